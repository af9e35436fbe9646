"""Tokens as learners see them: ids, exact bytes, display text, character spans, chat template."""

from __future__ import annotations

import random

import pytest

from lesson_model.tokens import Token, bytes_as_text
from tests._fixtures_model import UNICODE_GAUNTLET, reference_tokenizer, smollm2, tiny_tokenizer_view  # noqa: F401

# Code point ranges random strings are drawn from: ASCII, whitespace, Latin with accents,
# combining marks, Greek/Cyrillic, Hebrew/Arabic, CJK, Hangul, emoji and their modifiers.
RANGES = [(0x20, 0x7E), (0x09, 0x0D), (0xC0, 0x17F), (0x300, 0x36F), (0x391, 0x3C9), (0x410, 0x44F),
          (0x5D0, 0x5EA), (0x620, 0x64A), (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
          (0x1F300, 0x1F64F), (0x1F3FB, 0x1F3FF), (0x200B, 0x200F), (0xFE00, 0xFE0F), (0x1F1E6, 0x1F1FF),
          (0x1D400, 0x1D7FF)]


def random_strings(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        length = rng.randint(1, 40)
        out.append("".join(chr(rng.randint(*rng.choice(RANGES))) for _ in range(length)))
    return out


def check_tokens(tokens: list[Token], text: str) -> None:
    """The contract of tokenize(): bytes join back to the text, spans and display forms are right."""
    assert b"".join(t.bytes for t in tokens if not t.special) == text.encode("utf-8")
    previous_end = 0
    for t in tokens:
        assert 0 <= t.start <= t.end <= len(text)
        assert t.start >= previous_end - 1                   # a split character may be shared by two tokens
        covered = text[t.start:t.end].encode("utf-8")
        if t.is_partial:
            assert t.bytes in covered and t.text.startswith("<") and t.text.endswith(">")
            assert t.text == "<" + " ".join(f"{b:02X}" for b in t.bytes) + ">"
        elif t.bytes:
            assert covered == t.bytes, (t, covered)
            assert t.text == t.bytes.decode("utf-8")
        previous_end = t.end
    assert not tokens or tokens[-1].end == len(text)


def test_bytes_as_text():
    assert bytes_as_text("貓".encode()) == "貓"
    assert bytes_as_text("貓".encode()[:2]) == "<E8 B2>"
    assert bytes_as_text(b" \xf0\x9f") == "<20 F0 9F>"
    assert bytes_as_text(b"") == ""


# --------------------------------------------------------------------------- a tiny byte-level BPE (fast)

@pytest.mark.parametrize("text", UNICODE_GAUNTLET + random_strings(150))
def test_tiny_tokenizer_bytes_join_back(text):
    view = tiny_tokenizer_view()
    check_tokens(view.tokens(view.encode(text), text), text)


def test_tiny_tokenizer_splits_characters_into_byte_pieces():
    view = tiny_tokenizer_view()
    tokens = view.tokens(view.encode("the 龘"), "the 龘")   # 龘 was never seen: single bytes
    assert [t.text for t in tokens] == ["the", " ", "<E9>", "<BE>", "<98>"]
    assert [(t.start, t.end) for t in tokens] == [(0, 3), (3, 4), (4, 5), (4, 5), (4, 5)]
    assert [t.is_partial for t in tokens] == [False, False, True, True, True]


def test_special_tokens_are_marked_and_spanned():
    view = tiny_tokenizer_view()
    text = "the cat<|endoftext|>sat"
    tokens = view.tokens(view.encode(text), text)
    special = [t for t in tokens if t.special]
    assert len(special) == 1
    assert special[0].bytes == b"<|endoftext|>" and text[special[0].start:special[0].end] == "<|endoftext|>"
    assert b"".join(t.bytes for t in tokens) == text.encode()


def test_tokens_without_text_have_empty_spans():
    view = tiny_tokenizer_view()
    tokens = view.tokens(view.encode("the cat"))
    assert b"".join(t.bytes for t in tokens) == b"the cat"
    assert all(t.start == t.end == 0 for t in tokens)


# --------------------------------------------------------------------------- the real SmolLM2 tokenizer

ENGLISH = "The quick brown fox jumps over the lazy dog. It's 3.14159, isn't it?"
CHINESE = "我喜歡貓，貓也喜歡我。简体中文：机器学习很有趣！"
EMOJI = "I ❤️ 🐈‍⬛ and 👩🏽‍💻 🇹🇼 🤖!"
CODE = 'def add(a, b):\n    """Add two numbers."""\n    return a + b  # 2 spaces\n\n\nprint(add(1, 2))\t// done'


@pytest.mark.parity
@pytest.mark.parametrize("text", [ENGLISH, CHINESE, EMOJI, CODE] + UNICODE_GAUNTLET, ids=lambda t: repr(t[:12]))
def test_ids_equal_reference_tokenizer(smollm2, reference_tokenizer, text):
    assert smollm2.encode(text) == reference_tokenizer(text).input_ids
    assert smollm2.decode(smollm2.encode(text)) == reference_tokenizer.decode(reference_tokenizer(text).input_ids)


@pytest.mark.parity
def test_smollm2_bytes_join_back_on_many_strings(smollm2):
    for text in [ENGLISH, CHINESE, EMOJI, CODE] + UNICODE_GAUNTLET + random_strings(400, seed=1):
        tokens = smollm2.tokenize(text)
        check_tokens(tokens, text)
        assert [t.id for t in tokens] == smollm2.encode(text)
        assert smollm2.decode([t.id for t in tokens]) == text


@pytest.mark.parity
def test_smollm2_tokens_show_split_characters_as_bytes(smollm2):
    tokens = smollm2.tokenize(CHINESE)
    assert any(t.is_partial for t in tokens), "some Chinese characters take several tokens"
    for t in tokens:
        if t.is_partial:
            assert t.text.startswith("<") and all(len(h) == 2 for h in t.text[1:-1].split())
    assert smollm2.token_text(smollm2.encode(" the")[0]) == " the"


@pytest.mark.parity
def test_smollm2_special_tokens(smollm2):
    text = "<|im_start|>user\nhi<|im_end|>"
    tokens = smollm2.tokenize(text)
    assert [t.text for t in tokens if t.special] == ["<|im_start|>", "<|im_end|>"]
    assert smollm2.eos_token_id == tokens[-1].id
    assert b"".join(t.bytes for t in tokens) == text.encode()


CONVERSATIONS = [
    [{"role": "user", "content": "What is 2+2?"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "貓是什麼？"}],
    [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello! 👋"},
     {"role": "user", "content": "  spaces\nand lines  "}],
]


@pytest.mark.parity
@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_chat_template_equals_apply_chat_template(smollm2, reference_tokenizer, add_generation_prompt):
    for messages in CONVERSATIONS:
        ours = smollm2.chat_template(messages, add_generation_prompt=add_generation_prompt)
        theirs = reference_tokenizer.apply_chat_template(messages, tokenize=False,
                                                         add_generation_prompt=add_generation_prompt)
        assert ours == theirs
        assert smollm2.encode(ours) == reference_tokenizer.apply_chat_template(
            messages, tokenize=True, add_generation_prompt=add_generation_prompt, return_dict=False)
