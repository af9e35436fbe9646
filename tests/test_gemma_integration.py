"""The real Gemma 3 270M against transformers' Gemma3ForCausalLM (eager) loaded from the same
GGUF file (slow): weights, logits, every layer's pattern, greedy generation with and without
the KV cache, on prompts longer than the 512-token sliding window. (What needs no transformers
model, the config and a full capture's invariants, is in tests/test_gemma_model.py: a file of
its own, so a second test worker can run it beside this one.)"""

from __future__ import annotations

import pytest
import torch

from tests._fixtures_model import (  # noqa: F401
    assert_close_f32,
    assert_greedy_has_margin,
    finite_scale,
    gemma_lm,
    gemma_reference,
    logits_depth,
    pattern_depth,
    torch_threads,
)

pytestmark = pytest.mark.parity

PROMPTS = {
    "chinese": "貓坐在墊子上，因為它累了。貓",
    "english": "The capital of France is",
    "order": "我吃魚，魚吃我。",
}
# Longer than the 512-token window: 36 repeats of a sentence and a start of one, about 620 tokens.
LONG = "小明每天早上七點起床，先喝一杯水，再去公園跑步。" * 36 + "小明每天早上"


_reference_outputs: dict = {}


def reference_forward(hf, ids: torch.Tensor, attentions: bool = False):
    """transformers' forward pass, once per input in this process: ours is checked against it at
    each torch thread count (the long prompt's eager pass with every pattern is most of a minute)."""
    key = (tuple(ids[0].tolist()), attentions)
    if key not in _reference_outputs:
        with torch.no_grad():
            _reference_outputs[key] = hf(ids, output_attentions=attentions)
    return _reference_outputs[key]


def reference_greedy(hf, ids: list[int], n: int, eos_token_id) -> list[int]:
    """transformers' greedy continuation of ``ids`` (n tokens), once per input in this process:
    ours is checked against it with and without the KV cache."""
    key = ("greedy", tuple(ids), n, eos_token_id)
    if key not in _reference_outputs:
        with torch.no_grad():
            _reference_outputs[key] = hf.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False,
                                                  eos_token_id=eos_token_id)[0, len(ids):].tolist()
    return list(_reference_outputs[key])


def test_weights_equal_transformers_gguf_load(gemma_lm, gemma_reference):
    """The same dequantized numbers; our norm weights are transformers' w plus the 1 its formula adds."""
    hf, _ = gemma_reference
    sd, ours = hf.state_dict(), gemma_lm.decoder
    assert torch.equal(ours.W_E, sd["model.embed_tokens.weight"])
    for L in (0, 5, 17):
        h, b = f"model.layers.{L}", ours.blocks[L]
        assert torch.equal(b.attn.W_Q, sd[f"{h}.self_attn.q_proj.weight"].T)
        assert torch.equal(b.attn.W_K, sd[f"{h}.self_attn.k_proj.weight"].T)
        assert torch.equal(b.mlp.down_proj, sd[f"{h}.mlp.down_proj.weight"].T)
        for ours_norm, theirs in ((b.ln1, "input_layernorm"), (b.ln1_post, "post_attention_layernorm"),
                                  (b.ln2, "pre_feedforward_layernorm"), (b.ln2_post, "post_feedforward_layernorm"),
                                  (b.attn.q_norm, "self_attn.q_norm"), (b.attn.k_norm, "self_attn.k_norm")):
            torch.testing.assert_close(ours_norm.weight, 1.0 + sd[f"{h}.{theirs}.weight"], rtol=0, atol=1e-6)
    assert hf.config.layer_types == ["full_attention" if L not in ours.cfg.sliding_layers else "sliding_attention"
                                     for L in range(18)]


@pytest.mark.parametrize("prompt", list(PROMPTS) + ["long"])
def test_logits_and_every_pattern_equal_transformers(gemma_lm, gemma_reference, prompt, torch_threads):
    hf, _ = gemma_reference
    cfg = gemma_lm.cfg
    ids = torch.tensor([gemma_lm.encode(LONG if prompt == "long" else PROMPTS[prompt])])
    n_pos = ids.shape[1]
    if prompt == "long":
        assert n_pos > cfg.sliding_window + 50
    ref = reference_forward(hf, ids, attentions=True)
    names = [f"blocks.{L}.attn.{h}" for L in range(cfg.n_layers) for h in ("hook_pattern", "hook_attn_scores")]
    run = gemma_lm.run(ids, names=names)
    assert_close_f32(run.logits, ref.logits, depth=logits_depth(cfg, n_pos), what=f"gemma {prompt}: logits")
    for L, pattern in enumerate(ref.attentions):
        ours = run.cache[f"blocks.{L}.attn.hook_pattern"]
        assert_close_f32(ours, pattern, depth=pattern_depth(cfg, n_pos, L),
                         scale=finite_scale(run.cache[f"blocks.{L}.attn.hook_attn_scores"]),
                         what=f"gemma {prompt}: layer {L} pattern")
        if prompt == "long":
            far = ours[0, :, -1, : n_pos - cfg.sliding_window]      # keys 512 or more positions back
            assert (far == 0).all() if L in cfg.sliding_layers else (far > 0).any()
    assert_close_f32(gemma_lm.run(ids, names=[]).logits, ref.logits, depth=logits_depth(cfg, n_pos),
                     what=f"gemma {prompt}: fused-path logits")


@pytest.mark.parametrize("use_kv_cache", [True, False], ids=["kv_cache", "no_cache"])
@pytest.mark.parametrize("prompt", ["chinese", "long"])
def test_greedy_generation_equals_transformers(gemma_lm, gemma_reference, prompt, use_kv_cache):
    hf, _ = gemma_reference
    ids = gemma_lm.encode(LONG if prompt == "long" else PROMPTS[prompt])
    n = 7 if prompt == "chinese" else 6      # the Chinese seed has a near tie at its 8th token
    expected = reference_greedy(hf, ids, n, gemma_lm.eos_token_id)
    steps = list(gemma_lm.generate_steps(ids, n, temperature=0, use_kv_cache=use_kv_cache))
    ours = [s.token_id for s in steps]
    assert_greedy_has_margin(gemma_lm, ids, ours, what=f"gemma greedy ({prompt})")
    assert ours == expected
    if prompt == "chinese":   # the seed: the cat is tired because its legs hurt
        assert gemma_lm.decode(ours).startswith("的腿很痛")


def test_bos_comes_first_and_is_special(gemma_lm, gemma_reference):
    _, tok = gemma_reference
    text = PROMPTS["order"]
    ids = gemma_lm.encode(text)
    assert ids == tok(text).input_ids and ids[0] == tok.bos_token_id
    tokens = gemma_lm.tokenize(text)
    assert tokens[0].special and tokens[0].start == tokens[0].end == 0
    assert [t.text for t in tokens[1:]] == list(text), "one token per character"
