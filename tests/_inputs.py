"""Record every input a model reads from its first position (no KV cache before it), at the
decoder's two entries: Decoder.forward (every run, generation) and speculative.partial_forward
(the draft and the verifier). The one rule (LessonModel.with_bos) says each begins with the
model's <bos> when it has one; a test that runs a path asserts it on what was recorded."""

from __future__ import annotations

from lesson_model import speculative as S
from lesson_model.decoder import Decoder


def record_fresh_inputs(monkeypatch) -> list[tuple[int, list[int]]]:
    """Patch the decoder's entries for the test; returns the list they fill with
    (vocabulary size, ids) of every fresh input row (the vocabulary tells the models apart)."""
    seen: list[tuple[int, list[int]]] = []
    forward, partial = Decoder.forward, S.partial_forward

    def record(decoder, ids, kv_cache):
        if kv_cache is None or len(kv_cache) == 0:
            seen.extend((decoder.cfg.vocab_size, row) for row in ids.reshape(-1, ids.shape[-1]).tolist())

    def forward_spy(self, ids, hooks=None, kv_cache=None, **kwargs):
        record(self, ids, kv_cache)
        return forward(self, ids, hooks, kv_cache, **kwargs)

    def partial_spy(decoder, ids, n_layers, kv_cache, **kwargs):
        record(decoder, ids, kv_cache)
        return partial(decoder, ids, n_layers, kv_cache, **kwargs)

    monkeypatch.setattr(Decoder, "forward", forward_spy)
    monkeypatch.setattr(S, "partial_forward", partial_spy)
    return seen


def without_bos(seen, lm) -> list[list[int]]:
    """The recorded rows of ``lm``'s inputs that do not begin with its <bos> (first ids shown)."""
    if lm.bos_id is None:
        return []
    return [row[:4] for vocab, row in seen if vocab == lm.cfg.vocab_size and row and row[0] != lm.bos_id]
