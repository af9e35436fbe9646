"""lesson_model.analysis.kv_memory: KV cache arithmetic, checked by hand and against the
bytes a real generation with the KV cache holds."""

from __future__ import annotations

import pytest

from lesson_model.analysis import kv_memory as K


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


@pytest.mark.slow
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
