"""KV-cache sizes, work per step, and the cache-on / cache-off comparison."""

from __future__ import annotations

import pytest
import torch

from lesson_model.analysis import generation_demo as gd
from lesson_model.decoder import Hooks, KVCache
from tests._fixtures_model import tiny  # noqa: F401
from tests.test_generation import with_eos

PROMPT = "the cat sat on"


def test_kv_bytes_match_a_real_cache(tiny):
    _, lm = tiny
    ids = torch.tensor([lm.encode(PROMPT)])
    cache = KVCache(lm.cfg.n_layers)
    with torch.inference_mode():
        lm.decoder(ids, Hooks(names=()), kv_cache=cache)
    n = ids.shape[1]
    for layer in range(lm.cfg.n_layers):
        assert cache.nbytes(layer) == gd.kv_bytes_per_layer(lm.cfg, n)
    assert gd.kv_bytes(lm.cfg, n) == sum(cache.nbytes(L) for L in range(lm.cfg.n_layers))


def test_smollm2_numbers_by_hand(lm):
    cfg = lm.cfg
    # 3 KV heads x 64 numbers x (K and V) x 4 bytes = 1,536 bytes per position per layer
    assert gd.kv_bytes_per_layer(cfg, 1) == 1536
    assert gd.kv_bytes(cfg, 100) == 30 * 100 * 1536
    # One new position: the weight matrices once (about the parameter count without the embedding
    # lookup) plus the unembedding, plus attention over 11 positions.
    one = gd.multiply_adds(cfg, start=10, n_new=1)
    weights = sum(p.numel() for name, p in lm.decoder.named_parameters() if p.dim() == 2 and name != "W_E")
    assert one == weights + cfg.d_model * cfg.vocab_size + 30 * 2 * 9 * 64 * 11
    # Recomputing 11 positions costs about 11x the weight work, not 11x the unembedding.
    eleven = gd.multiply_adds(cfg, start=0, n_new=11)
    assert eleven == 11 * weights + cfg.d_model * cfg.vocab_size + 30 * 2 * 9 * 64 * sum(range(1, 12))


def test_comparison_is_identical_and_interleaved(tiny):
    _, lm = tiny
    lm = with_eos(lm, -1)
    for settings in (dict(temperature=0), dict(temperature=1.3, top_k=20, seed=11)):
        comp = gd.compare_kv_cache(lm, PROMPT, 12, **settings)
        assert comp.identical and comp.first_difference is None
        assert len(comp.with_cache) == len(comp.without_cache) == 12
        n = len(lm.encode(PROMPT))
        assert [s.positions_computed for s in comp.with_cache] == [n] + [1] * 11
        assert [s.positions_computed for s in comp.without_cache] == list(range(n, n + 12))
        assert [s.kv_positions for s in comp.with_cache] == list(range(n, n + 12))
        plain = [s.token_id for s in lm.generate_steps(PROMPT, 12, **settings)]
        assert [s.token_id for s in comp.with_cache] == plain


def test_first_difference():
    from lesson_model.generation import Step
    mk = lambda t: Step(0, t, "", 1.0, [], 0.0, 1, 0, 0)  # noqa: E731
    comp = gd.CacheComparison([mk(1), mk(2), mk(3)], [mk(1), mk(5), mk(3)])
    assert not comp.identical and comp.first_difference == 1
    assert gd.CacheComparison([mk(1)], [mk(1), mk(2)]).first_difference == 1


@pytest.mark.slow
def test_smollm2_cache_on_off_same_tokens(lm):
    comp = gd.compare_kv_cache(lm, "The capital of France is", 8, temperature=0)
    assert comp.identical
    assert comp.with_cache[-1].kv_bytes == gd.kv_bytes(lm.cfg, comp.with_cache[-1].kv_positions)
