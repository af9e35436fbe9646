"""TokenizerView on a SentencePiece-style vocabulary (Gemma's): "▁" for a space, <0xE5> byte
fallback, a <bos> first. Fast: a tiny hand-built tokenizer of that style. Slow: the real
Gemma 3 270M tokenizer against transformers' own tokenizer built from the same GGUF."""

from __future__ import annotations

import functools

import pytest

from lesson_model.analysis import tokenization as T
from tests._fixtures_model import UNICODE_GAUNTLET, gguf_reference_tokenizer
from tests.test_tokens import check_tokens, random_strings

CHINESE = ["我吃魚，魚吃我。", "貓坐在墊子上，因為它累了。", "猫坐在垫子上，因为它累了。",
           "我喜歡貓，貓也喜歡我。简体中文：机器学习很有趣！", "台灣最高的山是玉山。"]


# --------------------------------------------------------------------------- a tiny SentencePiece-style BPE

SPECIAL = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
ALPHABET = list("▁thecasdog我吃魚，。")
MERGES = [("▁", "t"), ("h", "e"), ("▁t", "he"), ("t", "he"), ("c", "a"), ("ca", "t"), ("▁", "cat"), ("▁", "▁"),
          ("我", "吃")]


@functools.cache
def tiny_sentencepiece_view():
    """Gemma's layout in miniature: control tokens, 256 byte-fallback pieces, merged pieces in
    the order of their merges, then the single characters; spaces written as ▁."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers

    from lesson_model.tokens import TokenizerView

    vocab = {s: i for i, s in enumerate(SPECIAL)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for a, b in MERGES:
        vocab[a + b] = len(vocab)
    for ch in ALPHABET:
        vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=MERGES, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIAL])
    return TokenizerView(tok, chat_template=None, bos_token="<bos>", add_bos=True, eos_token="<eos>")


class _Tiny:
    """Just what the tokenization analyses read from a model."""
    name = "tiny-sentencepiece"

    def __init__(self):
        self.tokenizer = tiny_sentencepiece_view()

    def encode(self, text):
        return self.tokenizer.encode(text)

    def tokenize(self, text):
        return self.tokenizer.tokens(self.tokenizer.encode(text), text)


@functools.cache
def tiny_lm():
    return _Tiny()


def check_text_tokens(tokens, text: str) -> None:
    """check_tokens, and special tokens typed in the text (<start_of_turn>) spell their own text."""
    assert b"".join(t.bytes for t in tokens) == text.encode("utf-8")
    for t in tokens:
        if t.special:
            assert text[t.start:t.end] == t.text
    if not any(t.special for t in tokens):
        check_tokens(tokens, text)


def check_gemma_style(view, text: str, ids: list[int]) -> None:
    """<bos> first (added, special, empty span), then the text's own tokens, which spell it."""
    tokens = view.tokens(ids, text)
    assert tokens[0].text == "<bos>" and tokens[0].special and tokens[0].added and tokens[0].start == tokens[0].end == 0
    assert not any(t.added for t in tokens[1:])
    check_text_tokens(tokens[1:], text)


@pytest.mark.parametrize("text", UNICODE_GAUNTLET + CHINESE + random_strings(60, seed=3))
def test_tiny_sentencepiece_bytes_join_back(text):
    view = tiny_sentencepiece_view()
    check_gemma_style(view, text, view.encode(text))


def test_tiny_sentencepiece_pieces():
    view = tiny_sentencepiece_view()
    text = "the cat 龘我吃魚"
    tokens = view.tokens(view.encode(text), text)
    assert [t.text for t in tokens] == ["<bos>", "the", " cat", " ", "<E9>", "<BE>", "<98>", "我吃", "魚"]
    assert [(t.start, t.end) for t in tokens] == [(0, 0), (0, 3), (3, 7), (7, 8), (8, 9), (8, 9), (8, 9),
                                                 (9, 11), (11, 12)]
    assert [t.is_partial for t in tokens] == [False] * 4 + [True] * 3 + [False] * 2
    byte = view.tokenizer.token_to_id("<0xE9>")
    assert view.token_bytes(byte) == b"\xe9" and view.is_byte_piece(byte)
    assert view.token_bytes(view.tokenizer.token_to_id("▁cat")) == b" cat"      # ▁ is a space
    assert not view.byte_level and view.space_symbol == "▁"


def test_tiny_sentencepiece_special_tokens_typed_in_the_text():
    view = tiny_sentencepiece_view()
    text = "a<bos>b<start_of_turn>"
    tokens = view.tokens(view.encode(text), text)
    assert [(t.text, t.special, t.added, t.start, t.end) for t in tokens] == [
        ("<bos>", True, True, 0, 0), ("a", False, False, 0, 1), ("<bos>", True, False, 1, 6),
        ("b", False, False, 6, 7), ("<start_of_turn>", True, False, 7, 22)]
    # A text that starts with a typed <bos>: the tokenizer's own one still comes first.
    tokens = view.tokens(view.encode("<bos>t"), "<bos>t")
    assert [(t.added, t.start, t.end) for t in tokens] == [(True, 0, 0), (False, 0, 5), (False, 5, 6)]
    assert [t.text for t in T.typed_special_tokens(tiny_lm(), text)] == ["<bos>", "<start_of_turn>"]


def test_tiny_sentencepiece_reads_a_typed_space_symbol_as_a_space():
    view = tiny_sentencepiece_view()
    text = "▁the a▁cat"
    tokens = view.tokens(view.encode(text), text)
    assert view.encode(text) == view.encode(" the a cat")
    assert b"".join(t.bytes for t in tokens[1:]) == b" the a cat"
    assert [text[t.start:t.end] for t in tokens[1:]] == ["▁the", " ", "a", "▁cat"]


def test_tiny_sentencepiece_counts_and_facts():
    lm = tiny_lm()
    c = T.text_counts(lm, "我吃魚")
    assert (c.chars, c.tokens, c.added) == (3, 2, 1)               # <bos> counted apart
    f = T.vocabulary_facts(lm)
    assert f.byte_range == T.IdRange(len(SPECIAL), len(SPECIAL) + 255) and f.n_single_bytes == 256
    assert (f.n_chars, f.n_merged, f.n_merges) == (len(ALPHABET), len(MERGES), len(MERGES))
    assert f.char_range == T.IdRange(f.size - len(ALPHABET), f.size - 1)
    assert len(f.special) + f.n_added + f.n_single_bytes + f.n_chars + f.n_merged == f.size
    assert f.merges_follow_ids and f.first_merges[0] == (" ", "t")
    assert f.missing_bytes == ()                                   # byte fallback holds every byte


@pytest.mark.parametrize("word", [" the", " cat", "我吃魚", " 龘cat"])
def test_tiny_sentencepiece_merge_steps_end_in_the_tokens(word):
    lm = tiny_lm()
    steps = T.bpe_merge_steps(lm, word)
    assert steps and steps[0].merged is None
    assert list(steps[-1].pieces) == [t.text for t in lm.tokenize(word)[1:]]
    for before, after in zip(steps, steps[1:]):
        assert len(after.pieces) == len(before.pieces) - 1


# --------------------------------------------------------------------------- the real Gemma tokenizer

TEXTS = UNICODE_GAUNTLET + CHINESE + ["<bos>x<start_of_turn>user\nhi<end_of_turn>", "a<table>b\n\n\n\tc",
                                      "  two  spaces ▁ and a typed ▁"]


@pytest.mark.parity
def test_gemma_ids_equal_the_reference_tokenizer(gemma):
    ref = gguf_reference_tokenizer("gemma-3-270m")
    for text in TEXTS + random_strings(300, seed=5):
        ids = gemma.encode(text)
        assert ids == ref(text).input_ids, text
        assert gemma.decode(ids) == ref.decode(ids), text


@pytest.mark.parity
def test_gemma_tokens_join_back_after_bos(gemma):
    for text in TEXTS + random_strings(300, seed=6):
        ids = gemma.encode(text)
        tokens = gemma.tokenize(text)
        assert [t.id for t in tokens] == ids
        assert tokens[0].id == gemma.tokenizer.bos_id and tokens[0].special and tokens[0].added
        read = text.replace("▁", " ")           # the normalizer writes every space as ▁: a typed ▁ reads as a space
        check_text_tokens(tokens[1:], read)
        if "▁" not in text:
            assert gemma.decode(ids[1:]) == text


@pytest.mark.parity
def test_gemma_pieces_and_specials(gemma):
    tokens = gemma.tokenize("我吃魚，魚吃我。")
    assert [t.text for t in tokens] == ["<bos>", *"我吃魚，魚吃我。"]         # one token per character
    text = "𝕏 x"
    tokens = gemma.tokenize(text)
    assert [t.text for t in tokens[1:5]] == ["<F0>", "<9D>", "<95>", "<8F>"]      # byte fallback shown as bytes
    assert all(t.is_partial and (t.start, t.end) == (0, 1) for t in tokens[1:5])
    assert gemma.token_text(gemma.encode(" the")[1]) == " the"                   # ▁ shown as a space
    view = gemma.tokenizer
    assert view.token_bytes(view.tokenizer.token_to_id("<0xE5>")) == b"\xe5"
    typed = gemma.tokenize("hi<start_of_turn>user<bos>")
    assert [(t.text, t.id, t.added) for t in typed if t.special] == [
        ("<bos>", 2, True), ("<start_of_turn>", 105, False), ("<bos>", 2, False)]
    assert {2, 105, 106, 1} <= view.special_ids and gemma.tokenizer.chat_template is None


@pytest.mark.parity
def test_gemma_vocabulary_facts(gemma):
    f = T.vocabulary_facts(gemma)
    assert f.size == gemma.cfg.vocab_size == 262144
    assert f.byte_range is not None and f.n_single_bytes == 256 == f.byte_range.count
    assert gemma.token_text(f.byte_range.first) == "\x00" and gemma.tokenizer.tokenizer.id_to_token(f.byte_range.first) == "<0x00>"
    assert len(f.special) + f.n_added + f.n_single_bytes + f.n_chars + f.n_merged == f.size
    assert f.merges_follow_ids and not f.rank_is_id_offset and f.n_merges > f.n_merged
    assert f.char_range is not None and gemma.encode("我")[1] in range(f.char_range.first, f.char_range.last + 1)
    assert f.missing_bytes == ()


@pytest.mark.parity
@pytest.mark.parametrize("word", [" strawberry", "strawberry", " tokenization", " blueberry", "我吃魚", " 貓坐在墊子上",
                                  " naïve", "𝕏x"])
def test_gemma_merge_steps_end_in_the_tokens(gemma, word):
    steps = T.bpe_merge_steps(gemma, word)
    assert steps, word
    assert list(steps[-1].pieces) == [t.text for t in gemma.tokenize(word)[1:]]
    for s in steps[1:]:   # each step made the entry with the lowest id among the pairs it could join
        assert gemma.tokenizer.tokenizer.token_to_id(("".join(s.merged)).replace(" ", "▁")) == s.piece_id
