"""The model says how its weights were stored before dequantization (the course tells the
learner that the bundled SmolLM2 is a quantized copy)."""

from __future__ import annotations

from lesson_model import loading


def test_weight_formats_cover_every_parameter(lm):
    formats = lm.weight_formats
    assert formats, "the bundled GGUF model must report its weight formats"
    assert sum(formats.values()) == lm.param_counts()["total"]
    assert lm.embedding_format in formats
    assert formats[lm.embedding_format] >= lm.cfg.vocab_size * lm.cfg.d_model


def test_weight_formats_in_the_cache_match_the_file(lm):
    from_file = loading.gguf_weight_formats(loading.bundled_gguf_path())
    assert from_file == {"weight_formats": lm.weight_formats, "embedding_format": lm.embedding_format}
