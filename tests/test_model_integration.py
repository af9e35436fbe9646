"""The real SmolLM2-135M-Instruct against transformers' own load of the same GGUF file (slow)."""

from __future__ import annotations

import pytest
import torch

from tests._fixtures_model import (  # noqa: F401
    assert_close_f32,
    assert_run_invariants,
    f32_bound,
    finite_scale,
    logits_depth,
    pattern_depth,
    reference,
    smollm2,
    torch_threads,
)

pytestmark = pytest.mark.parity

PROMPTS = {
    "english": "The cat sat on the mat because it was warm. The cat",
    "chinese": "我喜歡貓，因為貓很可愛。我喜歡",
    "emoji-code": "def hello():\n    print('hi 👋')  # greet\n",
}


def reference_forward(hf, ids: torch.Tensor):
    with torch.no_grad():
        return hf(ids, output_attentions=True)


def test_config_is_smollm2_135m(smollm2):
    cfg = smollm2.cfg
    assert (cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.d_head, cfg.d_ff, cfg.vocab_size) == \
        (30, 576, 9, 3, 64, 1536, 49152)
    assert cfg.tie_embeddings and not cfg.attn_bias
    counts = smollm2.param_counts()
    assert 134_000_000 < counts["total"] < 135_000_000 and counts["unembedding"] == 0


def test_weights_equal_transformers_gguf_load(smollm2, reference):
    """Same dequantized numbers, and the GGUF q/k row permutation undone the way transformers does."""
    hf, _ = reference
    sd = hf.state_dict()
    ours = smollm2.decoder
    assert torch.equal(ours.W_E, sd["model.embed_tokens.weight"])
    for L in (0, 14, 29):
        h, b = f"model.layers.{L}", ours.blocks[L]
        assert torch.equal(b.attn.W_Q, sd[f"{h}.self_attn.q_proj.weight"].T)
        assert torch.equal(b.attn.W_K, sd[f"{h}.self_attn.k_proj.weight"].T)
        assert torch.equal(b.attn.W_V, sd[f"{h}.self_attn.v_proj.weight"].T)
        assert torch.equal(b.mlp.down_proj, sd[f"{h}.mlp.down_proj.weight"].T)
        assert torch.equal(b.ln1.weight, sd[f"{h}.input_layernorm.weight"])
    assert ours.cfg.rope_theta == hf.config.rope_parameters["rope_theta"]
    assert ours.cfg.norm_eps == pytest.approx(hf.config.rms_norm_eps)


@pytest.mark.parametrize("prompt", list(PROMPTS))
def test_logits_and_every_pattern_equal_transformers(smollm2, reference, prompt, torch_threads):
    hf, _ = reference
    cfg = smollm2.cfg
    ids = torch.tensor([smollm2.encode(PROMPTS[prompt])])
    n_pos = ids.shape[1]
    ref = reference_forward(hf, ids)
    names = [f"blocks.{L}.attn.{h}" for L in range(cfg.n_layers) for h in ("hook_pattern", "hook_attn_scores")]
    run = smollm2.run(ids, names=names)
    assert_close_f32(run.logits, ref.logits, depth=logits_depth(cfg, n_pos), what=f"{prompt}: logits")
    assert len(ref.attentions) == cfg.n_layers
    for L, pattern in enumerate(ref.attentions):
        # A pattern's error is its scores' error (softmax passes it on, shrunk): the scores set the scale.
        assert_close_f32(run.cache[f"blocks.{L}.attn.hook_pattern"], pattern, depth=pattern_depth(cfg, n_pos, L),
                         scale=finite_scale(run.cache[f"blocks.{L}.attn.hook_attn_scores"]),
                         what=f"{prompt}: layer {L} pattern")
    # The fused path (no capture) gives the same logits.
    assert_close_f32(smollm2.run(ids, names=[]).logits, ref.logits, depth=logits_depth(cfg, n_pos),
                     what=f"{prompt}: fused-path logits")


def test_chat_prompt_next_token(smollm2, reference, torch_threads):
    hf, _ = reference
    prompt = smollm2.chat_template([{"role": "user", "content": "What is the capital of France?"}])
    ids = torch.tensor([smollm2.encode(prompt)])
    ours = smollm2.run(ids, names=[]).logits[0, -1]
    theirs = reference_forward(hf, ids).logits[0, -1]
    depth = logits_depth(smollm2.cfg, ids.shape[1])
    assert_close_f32(ours, theirs, depth=depth, what="chat prompt: last logits")
    # The same five best tokens in the same order; fair to ask because each of them leads the next
    # by more than twice the float32 bound (otherwise two correct runs could swap them).
    top6 = ours.topk(6).values.double()
    assert ((top6[:-1] - top6[1:]) > 2 * f32_bound(ours, depth=depth)).all(), f"a near tie among the top 5: {top6}"
    assert torch.equal(ours.topk(5).indices, theirs.topk(5).indices)


def test_batch_of_two_equals_transformers(smollm2, reference, torch_threads):
    hf, _ = reference
    a, b = smollm2.encode("Once upon a time, there"), smollm2.encode("1 + 1 = 2, 2 + 2 =")
    n = min(len(a), len(b))
    ids = torch.tensor([a[:n], b[:n]])
    assert_close_f32(smollm2.run(ids, names=[]).logits, reference_forward(hf, ids).logits,
                     depth=logits_depth(smollm2.cfg, n), what="batch of two: logits")


@pytest.mark.parametrize("prompt", ["english", "chinese"])
def test_full_capture_invariants(smollm2, prompt):
    run = smollm2.run(PROMPTS[prompt], names=None)
    assert len(run.cache) == len(smollm2.hook_names())
    assert_run_invariants(smollm2, run)


def test_head_ablation_changes_the_prediction_only_through_that_head(smollm2):
    ids = smollm2.encode(PROMPTS["english"])
    layer, head = 18, 6
    clean = smollm2.run(ids, names=[f"blocks.{layer}.attn.hook_result", f"blocks.{layer}.hook_attn_out"])
    ablated = smollm2.run(ids, names=[f"blocks.{layer}.hook_attn_out"],
                          hooks={f"blocks.{layer}.attn.hook_z": lambda z: z.index_fill(2, torch.tensor([head]), 0.0)})
    expected = clean.cache[f"blocks.{layer}.hook_attn_out"] - clean.cache[f"blocks.{layer}.attn.hook_result"][:, :, head]
    cfg = smollm2.cfg
    attn = clean.cache[f"blocks.{layer}.attn.hook_result"]
    assert_close_f32(ablated.cache[f"blocks.{layer}.hook_attn_out"], expected,
                     depth=cfg.n_heads * cfg.d_head + cfg.n_heads,
                     scale=max(finite_scale(attn), finite_scale(clean.cache[f"blocks.{layer}.hook_attn_out"])),
                     what=f"attn_out with head {layer}.{head} zeroed")
    assert not torch.equal(ablated.logits, clean.logits)

