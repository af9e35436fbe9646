"""Bytes the vocabulary cannot represent: the tokenizer drops them; spans must stay right."""

from tests._fixtures_model import smollm2  # noqa: F401
import pytest

pytestmark = pytest.mark.slow


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
