"""lesson_model.analysis.tokenization: counts, byte pieces grouped by character, vocabulary facts."""

from __future__ import annotations

import pytest

from lesson_model.analysis import tokenization as T
from tests._fixtures_model import UNICODE_GAUNTLET, smollm2, tiny  # noqa: F401


def test_text_counts_by_hand(smollm2):
    c = T.text_counts(smollm2, "The cat sat on the mat.")
    assert (c.chars, c.utf8_bytes, c.tokens) == (23, 23, 7)
    assert c.chars_per_token == pytest.approx(23 / 7)
    zh = T.text_counts(smollm2, "猫坐在垫子上。")
    assert (zh.chars, zh.utf8_bytes) == (7, 21)              # 3 bytes per CJK character
    assert zh.tokens == len(smollm2.encode("猫坐在垫子上。")) > zh.chars
    empty = T.text_counts(smollm2, "")
    assert (empty.chars, empty.tokens, empty.chars_per_token) == (0, 0, 0.0)


@pytest.mark.parametrize("text", UNICODE_GAUNTLET)
def test_character_groups_cover_the_text(smollm2, text):
    tokens = smollm2.tokenize(text)
    groups = T.character_groups(tokens, text)
    assert [t for g in groups for t in g.tokens] == tokens          # every token once, in order
    assert "".join(g.text for g in groups) == text                  # the groups spell the text
    for g in groups:
        b"".join(t.bytes for t in g.tokens).decode("utf-8")         # whole characters in every group
        assert g.split == (len(g.tokens) > 1)


def test_a_chinese_character_split_over_byte_tokens(smollm2):
    text = "猫坐在垫子上"
    groups = T.split_characters(smollm2.tokenize(text), text)
    cat = next(g for g in groups if g.text == "猫")
    assert [t.text for t in cat.tokens] == ["<E7>", "<8C>", "<AB>"]
    assert b"".join(t.bytes for t in cat.tokens) == "猫".encode()
    assert all(t.is_partial for t in cat.tokens)
    assert "在" not in [g.text for g in groups]                     # 在 is a single token


def test_strawberry_pieces(smollm2):
    start = smollm2.tokenize("strawberry")
    assert [t.text for t in start] == ["st", "raw", "berry"]
    counts = T.letter_counts(start, "r")
    assert [n for _, n in counts] == [0, 1, 2] and sum(n for _, n in counts) == 3
    # After a space the whole word is one vocabulary entry: no letters visible at all.
    assert [t.text for t in smollm2.tokenize("How many r's in strawberry?")][-2] == " strawberry"


def test_chat_tokens_wrap_the_prompt(smollm2):
    rendered, tokens = T.chat_tokens(smollm2, "Hi there")
    assert rendered.startswith("<|im_start|>system\n") and rendered.endswith("<|im_start|>assistant\n")
    assert "<|im_start|>user\nHi there<|im_end|>" in rendered
    specials = [t.text for t in tokens if t.special]
    assert specials == ["<|im_start|>", "<|im_end|>", "<|im_start|>", "<|im_end|>", "<|im_start|>"]
    assert smollm2.decode([t.id for t in tokens]) == rendered
    custom, _ = T.chat_tokens(smollm2, "Hi", system="Be brief.")
    assert custom.startswith("<|im_start|>system\nBe brief.<|im_end|>")


def test_vocabulary_facts_of_smollm2(smollm2):
    f = T.vocabulary_facts(smollm2, n_longest=5)
    assert f.size == 49152
    assert f.special_range == T.IdRange(0, 16) and f.special[0] == (0, "<|endoftext|>")
    assert f.byte_range == T.IdRange(17, 251) and f.n_single_bytes == 235
    assert f.merged_range == T.IdRange(252, 49151)
    assert f.n_merges == 48900 == f.merged_range.count                # one new entry per merge rule
    assert f.special_range.count + f.n_single_bytes + f.n_merges == f.size
    assert f.first_merges[0] == (" ", "t")
    assert len(f.longest) == 5
    lengths = [n for _, _, n in f.longest]
    assert lengths == sorted(lengths, reverse=True)
    for token_id, text, n in f.longest + f.longest_words:
        assert smollm2.token_text(token_id) == text and len(smollm2.tokenizer.token_bytes(token_id)) == n
    # Nothing in the vocabulary is longer than the longest entry reported.
    longest = max(len(smollm2.tokenizer.token_bytes(i)) for i in range(f.size) if i not in smollm2.tokenizer.special_ids)
    assert lengths[0] == longest
    assert all(text.strip().isalpha() for _, text, _ in f.longest_words)


def test_vocabulary_facts_on_a_tiny_tokenizer(tiny):
    _, lm = tiny
    f = T.vocabulary_facts(lm, n_longest=3)
    assert f.size == lm.tokenizer.vocab_size
    assert f.special_range is not None and f.special_range.count == 1
    assert f.n_single_bytes == 256


def test_single_token_id(smollm2):
    assert T.single_token_id(smollm2, " king") == smollm2.encode(" king")[0]
    assert T.single_token_id(smollm2, "strawberry") is None


@pytest.mark.parametrize("word", ["strawberry", " strawberry", " tokenization", " unbelievable", "猫", " the",
                                  " antidisestablishmentarianism", "2024"[:1], " naïve"])
def test_bpe_merge_steps_end_in_the_tokenizers_tokens(smollm2, word):
    steps = T.bpe_merge_steps(smollm2, word)
    assert steps[0].merged is None and steps[0].rank is None
    assert len(steps[0].pieces) == len(word.encode("utf-8"))                    # one piece per byte
    assert list(steps[-1].pieces) == [t.text for t in smollm2.tokenize(word)]   # same result as the tokenizer
    for before, after in zip(steps, steps[1:]):
        assert len(after.pieces) == len(before.pieces) - 1                        # each step joins one pair


def test_merge_rank_is_the_id_offset(smollm2):
    """Id 252 + n is the piece made by merge rule n (what the page's id chart says)."""
    f = T.vocabulary_facts(smollm2)
    steps = T.bpe_merge_steps(smollm2, " strawberry")
    for s in steps[1:]:
        joined = "".join(s.merged)
        assert smollm2.encode(joined) == [f.merged_range.first + s.rank]
    last = steps[-1]
    assert smollm2.encode(" strawberry") == [f.merged_range.first + last.rank]


def test_letter_counts_ignore_byte_pieces(smollm2):
    text = "猫e"
    counts = T.letter_counts(smollm2.tokenize(text), "e")
    assert sum(n for _, n in counts) == 1      # "<E7>" shows an E but holds no letter e


def test_missing_bytes_are_dropped_by_the_tokenizer(smollm2):
    """The page says the alphabet lacks some byte values and that such bytes are lost."""
    f = T.vocabulary_facts(smollm2)
    assert len(f.missing_bytes) == 256 - f.n_single_bytes == 21
    assert 0x04 in f.missing_bytes and 0xC0 in f.missing_bytes and 0xF1 in f.missing_bytes
    assert ord("a") not in f.missing_bytes
    assert smollm2.decode(smollm2.encode("a\x04b")) == "ab"
    # Every byte value that occurs in the vocabulary at all has its own single-byte entry.
    present = {b for i in range(f.size) if i not in smollm2.tokenizer.special_ids for b in smollm2.tokenizer.token_bytes(i)}
    assert not present & set(f.missing_bytes)


def test_groups_stop_at_a_character_whose_lead_byte_was_dropped(smollm2):
    text = "a\U00040000b猫c"
    groups = T.character_groups(smollm2.tokenize(text), text)
    assert [g.text for g in groups] == ["a", "\U00040000", "b", "猫", "c"]       # the rest is not lumped in
    lost = groups[1]
    assert [t.text for t in lost.tokens] == ["<80>", "<80>", "<80>"] and lost.dropped == b"\xf1" and lost.split
    assert all(not g.dropped for g in groups if g is not lost)
    assert [t for g in groups for t in g.tokens] == smollm2.tokenize(text)


def test_typed_special_tokens_and_the_literal_reading(smollm2):
    text = "<|im_start|>user hi<|im_end|>"
    assert [t.id for t in smollm2.tokenize(text)] == [1, 4093, 15876, 2]      # typing the marker gives id 1
    assert [(t.text, t.id) for t in T.typed_special_tokens(smollm2, text)] == [("<|im_start|>", 1), ("<|im_end|>", 2)]
    literal = T.literal_tokens(smollm2, text)
    assert not any(t.special for t in literal) and len(literal) > 4
    assert b"".join(t.bytes for t in literal) == text.encode()                 # the same text, as ordinary pieces
    # the shared tokenizer is untouched
    assert [t.id for t in smollm2.tokenize(text)] == [1, 4093, 15876, 2]
    assert smollm2.tokenizer.tokenizer.encode_special_tokens is False


def test_literal_reading_under_concurrency(smollm2):
    """Sessions encode at the same time as one reads literally: the literal mode is a setting of
    the one shared tokenizer, so every encode waits for the lock (a wrong answer here means an
    encode saw the other mode)."""
    import sys
    import threading

    text = "<|im_start|>user hi<|im_end|>"
    plain, literal = smollm2.encode(text), smollm2.tokenizer.encode_literal(text)
    assert plain != literal
    wrong, switch = [], sys.getswitchinterval()
    sys.setswitchinterval(1e-6)                     # threads trade the GIL between nearly every bytecode

    def work(read_literally: bool) -> None:
        for _ in range(300):
            got = smollm2.tokenizer.encode_literal(text) if read_literally else smollm2.encode(text)
            if got != (literal if read_literally else plain):
                wrong.append(got)

    try:
        threads = [threading.Thread(target=work, args=(i % 2 == 0,)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switch)
    assert not wrong


def test_finish_characters(smollm2):
    ids = smollm2.encode("我吃魚，魚吃")
    piece = smollm2.encode("我")[0]                                              # <E6 88>, the first bytes of 我
    whole = smollm2.encode("。")[0]
    done = T.finish_characters(smollm2, ids, [piece, whole])
    assert done[whole] == [whole]
    assert done[piece][0] == piece and len(done[piece]) > 1
    assert "\ufffd" not in smollm2.decode(done[piece])


def test_smollm2_merge_facts_the_page_chooses_by(smollm2):
    """The tokens page picks its id and merge sentences from these facts, not from the model's name."""
    f = T.vocabulary_facts(smollm2)
    assert f.rank_is_id_offset and f.merges_follow_ids
    assert (f.n_chars, f.char_range, f.n_merged) == (0, None, f.merged_range.count)
    assert list(f.first_merge_ids) == [f.merged_range.first + r for r in range(len(f.first_merges))]
    assert T.text_counts(smollm2, "我吃魚").added == 0
    assert {T.piece_kind(smollm2, i) for i in (0, 17, 300)} == {"special", "byte", "merged"}
