"""The readable decoder against transformers' Gemma3ForCausalLM on a tiny random Gemma 3
(fast suite): embedding scale, QK-norm, sandwich norms, GeGLU, multi-query attention with
n_heads * d_head != d_model, and sliding-window layers with their own RoPE base, on prompts
longer than the window."""

from __future__ import annotations

import pytest
import torch

from lesson_model import Hooks, KVCache
from lesson_model.loading import convert_hf
from tests._fixtures_model import (  # noqa: F401
    TINY_GEMMA_WINDOW,
    assert_close_f32,
    assert_greedy_has_margin,
    assert_run_invariants,
    finite_scale,
    logits_depth,
    pattern_depth,
    random_hf_model,
    tiny_gemma,
    tiny_gemma_config,
    torch_threads,
)

N_POS = 3 * TINY_GEMMA_WINDOW    # well past the window


def random_ids(lm, batch=2, n_pos=N_POS, seed=0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, lm.cfg.vocab_size, (batch, n_pos), generator=g)


def hf_forward(hf, ids):
    with torch.no_grad():
        return hf(ids, output_attentions=True)


def test_the_config_names_each_choice(tiny_gemma):
    _, lm = tiny_gemma
    cfg = lm.cfg
    assert (cfg.activation, cfg.embed_scale, cfg.qk_norm, cfg.post_norms) == ("gelu_tanh", True, True, True)
    assert cfg.sliding_window == TINY_GEMMA_WINDOW and cfg.sliding_layers == (0, 1)
    assert (cfg.rope_theta, cfg.rope_theta_sliding) == (1000.0, 10.0)
    assert cfg.n_heads * cfg.d_head != cfg.d_model and cfg.n_kv_heads == 1 and cfg.tie_embeddings
    assert [cfg.window(L) for L in range(3)] == [TINY_GEMMA_WINDOW, TINY_GEMMA_WINDOW, None]
    assert lm.decoder.rope_for(0) is lm.decoder.rope_for(1) is not lm.decoder.rope_for(2)


def test_logits_equal_transformers(tiny_gemma, torch_threads):
    hf, lm = tiny_gemma
    ids = random_ids(lm)
    ref = hf_forward(hf, ids).logits
    assert_close_f32(lm.run(ids, names=[]).logits, ref, depth=logits_depth(lm.cfg, N_POS), what="tiny gemma: logits")


def test_every_pattern_equals_transformers_and_the_window_hides_the_far_past(tiny_gemma, torch_threads):
    hf, lm = tiny_gemma
    ids = random_ids(lm, seed=1)
    names = [f"blocks.{L}.attn.hook_{h}" for L in range(lm.cfg.n_layers) for h in ("pattern", "attn_scores")]
    run = lm.run(ids, names=names)
    ref = hf_forward(hf, ids)
    for L, hf_pattern in enumerate(ref.attentions):
        ours = run.cache[f"blocks.{L}.attn.hook_pattern"]
        scores = run.cache[f"blocks.{L}.attn.hook_attn_scores"]
        assert_close_f32(ours, hf_pattern, depth=pattern_depth(lm.cfg, N_POS, L), scale=finite_scale(scores),
                         what=f"tiny gemma: layer {L} pattern")
        far = ours[..., -1, : N_POS - TINY_GEMMA_WINDOW]          # the last query, keys window or more back
        if L in lm.cfg.sliding_layers:
            assert (far == 0).all() and torch.isneginf(scores[..., -1, : N_POS - TINY_GEMMA_WINDOW]).all()
            assert (ours[..., -1, N_POS - TINY_GEMMA_WINDOW:] > 0).all()    # the window itself is seen
        else:
            assert (far > 0).all(), "a global layer sees every earlier position"


def test_full_capture_invariants_hold(tiny_gemma, torch_threads):
    hf, lm = tiny_gemma
    ids = random_ids(lm, seed=2)
    run = lm.run(ids, names=None)
    assert_close_f32(run.logits, hf_forward(hf, ids).logits, depth=logits_depth(lm.cfg, N_POS),
                     what="tiny gemma: full-capture logits")
    assert_run_invariants(lm, run)


def test_new_hook_points_have_their_shapes(tiny_gemma):
    _, lm = tiny_gemma
    cfg = lm.cfg
    run = lm.run(random_ids(lm, batch=1, n_pos=7), names=None)
    assert list(run.cache) == lm.hook_names()
    for L in range(cfg.n_layers):
        b = f"blocks.{L}"
        assert run.cache[f"{b}.attn.q_norm.hook_scale"].shape == (1, 7, cfg.n_heads, 1)
        assert run.cache[f"{b}.attn.k_norm.hook_normalized"].shape == (1, 7, cfg.n_kv_heads, cfg.d_head)
        for ln in ("ln1_post", "ln2_post"):
            assert run.cache[f"{b}.{ln}.hook_scale"].shape == (1, 7, 1)
            assert run.cache[f"{b}.{ln}.hook_normalized"].shape == (1, 7, cfg.d_model)
        assert run.cache[f"{b}.attn.hook_z"].shape == (1, 7, cfg.n_heads, cfg.d_head)


def test_explicit_attention_equals_fused_sdpa_past_the_window(tiny_gemma, torch_threads):
    _, lm = tiny_gemma
    ids = random_ids(lm, seed=3)
    fused = lm.run(ids, names=[])
    explicit = lm.run(ids, names=[f"blocks.{L}.attn.hook_pattern" for L in range(lm.cfg.n_layers)])
    assert_close_f32(explicit.logits, fused.logits, depth=logits_depth(lm.cfg, N_POS), what="explicit vs fused")


@pytest.mark.parametrize("explicit", [False, True], ids=["sdpa", "explicit"])
def test_kv_cache_forward_equals_full_forward_past_the_window(tiny_gemma, explicit, torch_threads):
    _, lm = tiny_gemma
    ids = random_ids(lm, batch=2, seed=4)
    names = [f"blocks.{L}.attn.hook_pattern" for L in range(lm.cfg.n_layers)] if explicit else []
    with torch.inference_mode():
        full = lm.decoder(ids, Hooks(names))
        cache = KVCache(lm.cfg.n_layers)
        pieces = [lm.decoder(ids[:, :3], Hooks(names), kv_cache=cache)]
        for i in range(3, ids.shape[1]):
            pieces.append(lm.decoder(ids[:, i:i + 1], Hooks(names), kv_cache=cache))
    assert_close_f32(torch.cat(pieces, dim=1), full, depth=logits_depth(lm.cfg, N_POS), what="KV cache vs full")


@pytest.mark.parametrize("use_cache", [True, False], ids=["kv_cache", "no_cache"])
def test_greedy_generation_equals_transformers(tiny_gemma, use_cache):
    hf, lm = tiny_gemma
    prompt = random_ids(lm, batch=1, n_pos=4, seed=5)
    with torch.no_grad():
        ref = hf.generate(prompt, max_new_tokens=3 * TINY_GEMMA_WINDOW, do_sample=False)[0, prompt.shape[1]:].tolist()
    assert len(ref) > TINY_GEMMA_WINDOW, "the generation reaches past the window"
    steps = list(lm.generate_steps(prompt[0].tolist(), max_new_tokens=3 * TINY_GEMMA_WINDOW, temperature=0,
                                   use_kv_cache=use_cache))
    ours = [s.token_id for s in steps]
    assert_greedy_has_margin(lm, prompt[0].tolist(), ours, what="tiny gemma greedy")
    assert ours == ref


def test_unsupported_gemma_features_are_refused():
    for overrides in (dict(final_logit_softcapping=30.0), dict(attn_logit_softcapping=50.0),
                      dict(query_pre_attn_scalar=32), dict(hidden_activation="gelu")):
        with pytest.raises(NotImplementedError):
            convert_hf(random_hf_model(tiny_gemma_config(**overrides)))
