"""Bytes the vocabulary cannot represent: the tokenizer drops them; spans must stay right."""

import pytest

from tests._fixtures_model import smollm2  # noqa: F401

pytestmark = pytest.mark.parity


def test_dropped_control_bytes_keep_spans_and_are_reported(smollm2):
    lm = smollm2
    text = "x\x1dy\x04\x04z 你"
    tokens = lm.tokenize(text)
    assert lm.tokenizer.dropped(text) == ["\x1d", "\x04"]
    # every token's bytes are the text's bytes under its span
    for tok in tokens:
        assert text[tok.start:tok.end].encode("utf-8").find(tok.bytes) >= 0
    assert [text[t.start:t.end] for t in tokens[:3]] == ["x", "y", "z"]
    # joined bytes give back the text minus the dropped characters
    assert b"".join(t.bytes for t in tokens) == text.replace("\x1d", "").replace("\x04", "").encode("utf-8")


def test_ordinary_text_drops_nothing(smollm2):
    assert smollm2.tokenizer.dropped("Hello, 世界 🙂\n\tcode()") == []


def test_a_missing_lead_byte_drops_only_that_byte(smollm2):
    """U+40000 is F1 80 80 80 in UTF-8; F1 has no vocabulary entry, its continuation bytes do."""
    lm = smollm2
    text = "a\U00040000b"
    assert lm.tokenizer.dropped_bytes(text) == [("\U00040000", b"\xf1")]
    tokens = lm.tokenize(text)
    assert [t.text for t in tokens] == ["a", "<80>", "<80>", "<80>", "b"]      # the model still gets three bytes
    assert [text[t.start:t.end] for t in tokens] == ["a", "\U00040000", "\U00040000", "\U00040000", "b"]
    # a control character loses its only byte: nothing of it reaches the model
    assert lm.tokenizer.dropped_bytes("x\x04y") == [("\x04", b"\x04")]
    assert [t.text for t in lm.tokenize("x\x04y")] == ["x", "y"]
