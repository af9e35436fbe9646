"""lesson_model.analysis.kv_memory: KV cache arithmetic, checked by hand and against the
bytes a real generation with the KV cache holds."""

from __future__ import annotations

import pytest
import torch

from lesson_model.analysis import kv_memory as K
from tests._fixtures_model import tiny_gemma  # noqa: F401  (fixture)


def test_llama2_70b_by_hand():
    llama = K.PRESETS["llama2_70b"]
    assert (llama.n_layers, llama.n_heads, llama.n_kv_heads, llama.d_head) == (80, 64, 8, 128)
    assert llama.kind == "GQA" and llama.group_size == 8
    assert K.kv_bytes_per_token(llama, "fp16") == 2 * 80 * 8 * 128 * 2 == 327_680
    # 4,096 tokens: 327,680 * 4096 = 1,342,177,280 bytes = 1.25 GiB.
    assert K.kv_bytes(llama, 4096, "fp16") == 1_342_177_280
    assert K.human_bytes(K.kv_bytes(llama, 4096, "fp16")) == (1.25, "GiB")


def test_gpt3_by_hand():
    gpt3 = K.PRESETS["gpt3"]
    assert gpt3.kind == "MHA" and gpt3.group_size == 1
    assert K.kv_bytes_per_token(gpt3, "fp16") == 2 * 96 * 96 * 128 * 2 == 4_718_592     # 4.5 MiB per token
    assert K.human_bytes(4_718_592) == (4.5, "MiB")
    # GPT-3's 2,048-token context, batch 1: 9 GiB.
    assert K.kv_bytes(gpt3, 2048, "fp16") == 9 * 2**30


def test_mistral_and_dtypes():
    mistral = K.PRESETS["mistral_7b"]
    assert K.kv_bytes_per_token(mistral, "fp16") == 2 * 32 * 8 * 128 * 2 == 131_072      # 128 KiB
    assert K.kv_bytes_per_token(mistral, "fp32") == 262_144
    assert K.kv_bytes_per_token(mistral, "int8") == 65_536
    assert K.kv_bytes_per_token(mistral, "bf16") == K.kv_bytes_per_token(mistral, "fp16")
    assert K.kv_bytes(mistral, 100, "fp16", batch=3) == 131_072 * 300
    with pytest.raises(ValueError):
        K.kv_bytes_per_token(mistral, "fp8x")


def test_variants_mha_mqa():
    llama = K.PRESETS["llama2_70b"]
    v = K.variants(llama)
    assert v["actual"] == llama
    assert v["MHA"].n_kv_heads == 64 and v["MHA"].kind == "MHA"
    assert v["MQA"].n_kv_heads == 1 and v["MQA"].kind == "MQA"
    # MHA would take 8x the memory of LLaMA-2-70B's GQA; MQA 1/8 of it.
    assert K.kv_bytes_per_token(v["MHA"]) == 8 * K.kv_bytes_per_token(llama)
    assert K.kv_bytes_per_token(v["MQA"]) * 8 == K.kv_bytes_per_token(llama)


@pytest.mark.parity
def test_this_model_matches_a_real_kv_cache(lm):
    shape = K.shape_of(lm.cfg, lm.name)
    assert (shape.n_layers, shape.n_heads, shape.n_kv_heads, shape.d_head) == (30, 9, 3, 64)
    assert shape.kind == "GQA" and shape.group_size == 3
    assert K.kv_bytes_per_token(shape, "fp32") == 2 * 30 * 3 * 64 * 4 == 46_080
    # The model runs in float32: its KV cache after a step holds exactly this per position.
    steps = list(lm.generate_steps("The cat sat", max_new_tokens=2, temperature=0))
    last = steps[-1]
    assert last.kv_positions > 0
    assert last.kv_bytes == K.kv_bytes(shape, last.kv_positions, "fp32")


def test_human_bytes():
    assert K.human_bytes(512) == (512, "B")
    assert K.human_bytes(2048) == (2.0, "KiB")
    assert K.human_bytes(3 * 2**40) == (3.0, "TiB")
    assert K.human_bytes(5 * 2**50)[1] == "TiB"


# --------------------------------------------------------------------------- sliding windows

GEMMA_LIKE = K.KVShape("Gemma-like", n_layers=18, n_heads=4, n_kv_heads=1, d_head=256, window=512, n_window_layers=15)


def test_window_aware_cache_by_hand():
    g = GEMMA_LIKE
    assert g.kind == "MQA" and g.n_global_layers == 3
    assert K.kv_bytes_per_token(g, "fp16") == 2 * 18 * 1 * 256 * 2 == 18_432
    assert K.kv_bytes_per_layer_position(g, "fp16") == 2 * 1 * 256 * 2 == 1024
    # Inside the window nothing is saved; past it the 15 window layers stop at 512 positions.
    assert K.kv_bytes_windowed(g, 300, "fp16") == K.kv_bytes(g, 300, "fp16") == 18_432 * 300
    assert K.kv_bytes_windowed(g, 512, "fp16") == K.kv_bytes(g, 512, "fp16")
    assert K.kv_bytes_windowed(g, 4096, "fp16") == 1024 * (3 * 4096 + 15 * 512) == 20_447_232    # 19.5 MiB
    assert K.human_bytes(20_447_232) == (19.5, "MiB")
    assert K.kv_bytes_windowed(g, 4096, "fp16", batch=2) == 2 * 20_447_232
    assert K.positions_kept(g, 4096) == (4096, 512) and K.positions_kept(g, 100) == (100, 100)
    # A model without a window: windowed == full; what-ifs keep the window.
    llama = K.PRESETS["llama2_70b"]
    assert llama.window is None and K.kv_bytes_windowed(llama, 10_000) == K.kv_bytes(llama, 10_000)
    assert K.variants(g)["MHA"].window == 512 and K.variants(g)["MHA"].n_window_layers == 15


def test_shape_of_a_windowed_config(tiny_gemma):
    """The tiny Gemma 3 (3 layers: sliding, sliding, global; window 5): the shape carries its
    window, and lesson_model's KVCache stores EVERY position (the full kind), also past the
    window: what it holds is kv_bytes, not kv_bytes_windowed."""
    _, lm = tiny_gemma
    shape = K.shape_of(lm.cfg, lm.name)
    assert (shape.window, shape.n_window_layers, shape.n_global_layers) == (5, 2, 1)
    assert K.positions_needed_by_layer(lm.cfg, 12) == [5, 5, 12]
    assert K.positions_needed_by_layer(lm.cfg, 3) == [3, 3, 3]
    steps = list(lm.generate_steps([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], max_new_tokens=2, temperature=0))
    last = steps[-1]
    assert last.kv_positions > 5
    assert last.kv_bytes == K.kv_bytes(shape, last.kv_positions, "fp32")
    assert last.kv_bytes > K.kv_bytes_windowed(shape, last.kv_positions, "fp32")


@pytest.mark.parity
def test_gemma_matches_a_real_kv_cache(gemma):
    shape = K.shape_of(gemma.cfg, gemma.name)
    assert shape.kind == "MQA" and shape.group_size == gemma.cfg.n_heads
    assert shape.window == gemma.cfg.sliding_window and shape.n_window_layers == len(gemma.cfg.sliding_layers)
    per = 2 * gemma.cfg.n_layers * gemma.cfg.n_kv_heads * gemma.cfg.d_head * 4
    assert K.kv_bytes_per_token(shape, "fp32") == per
    last = list(gemma.generate_steps("The cat sat", max_new_tokens=2, temperature=0))[-1]
    assert last.kv_bytes == K.kv_bytes(shape, last.kv_positions, "fp32")


@pytest.mark.parity
@pytest.mark.parametrize("which", ["lm", "gemma"])
def test_the_cache_of_a_run_is_what_a_generation_step_keeps(request, which):
    """kv_cache_of_run (the heads page's measurement) holds what a real generation step's cache
    holds after reading the prompt, and it works as that cache: the next token through it gives
    the logits of a full pass over prompt + token."""
    from lesson_model import Hooks
    m = request.getfixturevalue(which)
    ids = m.to_ids("The cat sat on the mat because it")
    run = m.run(ids, names=K.kv_cache_names(m.cfg.n_layers))
    cache = K.kv_cache_of_run(run, m.cfg.n_layers)
    step = next(iter(m.generate_steps(ids, max_new_tokens=1, temperature=0)))
    assert len(cache) == step.kv_positions == ids.shape[1]
    assert sum(cache.nbytes(layer) for layer in range(m.cfg.n_layers)) == step.kv_bytes
    new = torch.tensor([[step.token_id]])
    with torch.inference_mode():
        via_cache = m.decoder(new, Hooks(names=()), kv_cache=cache, last_only=True)[0, -1]
    full = m.run(torch.cat([ids, new], dim=1), names=[]).logits[0, -1]
    torch.testing.assert_close(via_cache, full, rtol=1e-4, atol=2e-3)
    assert len(cache) == ids.shape[1] + 1
