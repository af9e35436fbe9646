"""KV-cache sizes, work per step, and the cache-on / cache-off comparison."""

from __future__ import annotations

import pytest
import torch

from lesson_model.analysis import generation_demo as gd
from lesson_model.decoder import Hooks, KVCache
from tests._fixtures_model import tiny, tiny_gemma  # noqa: F401
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


@pytest.mark.parity
def test_smollm2_cache_on_off_same_tokens(lm):
    comp = gd.compare_kv_cache(lm, "The capital of France is", 8, temperature=0)
    assert comp.identical
    assert comp.with_cache[-1].kv_bytes == gd.kv_bytes(lm.cfg, comp.with_cache[-1].kv_positions)


def test_windowed_cache_and_work(tiny, tiny_gemma):
    _, lm = tiny
    assert not lm.cfg.sliding_layers
    for n in (1, 7, 600):                        # no windows: the windowed cache is the whole cache
        assert gd.kv_bytes_windowed(lm.cfg, n) == gd.kv_bytes(lm.cfg, n)
    _, g = tiny_gemma
    cfg = g.cfg                                  # 3 layers: sliding, sliding, global; window 5
    w = cfg.sliding_window
    assert [cfg.window(L) for L in range(cfg.n_layers)] == [w, w, None]
    per = gd.kv_bytes_per_layer(cfg, 1)
    assert gd.kv_bytes_windowed(cfg, 3) == gd.kv_bytes(cfg, 3)
    assert gd.kv_bytes_windowed(cfg, 20) == (2 * w + 20) * per
    # the real cache keeps every position in every layer (the window is applied when attention reads it)
    ids = torch.tensor([g.encode(PROMPT * 3)])
    cache = KVCache(cfg.n_layers)
    with torch.inference_mode():
        g.decoder(ids, Hooks(names=()), kv_cache=cache)
    assert ids.shape[1] > w and sum(cache.nbytes(L) for L in range(cfg.n_layers)) == gd.kv_bytes(cfg, ids.shape[1])
    # a query past the window reads w keys on a sliding layer, all of them on the global one
    no_attention = gd.multiply_adds(cfg, start=0, n_new=1) - cfg.n_layers * 2 * cfg.n_heads * cfg.d_head
    assert gd.multiply_adds(cfg, start=19, n_new=1) == no_attention + 2 * cfg.n_heads * cfg.d_head * (2 * w + 20)


@pytest.mark.parity
def test_gemma_numbers_by_hand(gemma):
    cfg = gemma.cfg
    # 1 KV head x 256 numbers x (K and V) x 4 bytes = 2,048 bytes per position per layer; 18 layers
    assert gd.kv_bytes_per_layer(cfg, 1) == 2048
    assert gd.kv_bytes(cfg, 100) == 18 * 100 * 2048
    # 15 sliding layers need at most their window of 512 positions; the 3 global ones need them all
    assert gd.kv_bytes_windowed(cfg, 100) == gd.kv_bytes(cfg, 100)
    assert gd.kv_bytes_windowed(cfg, 2000) == (3 * 2000 + 15 * 512) * 2048
    # attention work: past the window, a sliding layer's query reads only 512 keys
    weights = 18 * (640 * 4 * 256 + 2 * 640 * 256 + 4 * 256 * 640 + 3 * 640 * 2048)
    unembed = 640 * 262144
    assert gd.multiply_adds(cfg, start=10, n_new=1) == weights + unembed + 18 * 2 * 4 * 256 * 11
    assert gd.multiply_adds(cfg, start=600, n_new=1) == weights + unembed + 2 * 4 * 256 * (3 * 601 + 15 * 512)


@pytest.mark.parity
def test_gemma_cache_on_off_same_tokens(gemma):
    comp = gd.compare_kv_cache(gemma, "貓坐在墊子上，因為它累了。貓", 6, temperature=0)
    assert comp.identical
    last = comp.with_cache[-1]
    assert last.kv_bytes == gd.kv_bytes(gemma.cfg, last.kv_positions)     # the real cache, measured
