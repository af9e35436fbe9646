"""lesson_model.analysis.attention: one head's attention step by step, the unscaled
what-if, the search for heads linking two tokens, and attention's cost."""

from __future__ import annotations

import math

import pytest
import torch

from lesson_model.analysis import attention as A

WAS_CAT = "The cat that I saw yesterday was"


@pytest.fixture(scope="module")
def run(lm):
    names = A.attention_step_names(2) + A.pattern_names(lm.cfg.n_layers)
    return lm.run(WAS_CAT, names=names)


def test_names():
    assert A.attention_step_names(4) == [
        "blocks.4.attn.hook_rot_q", "blocks.4.attn.hook_rot_k", "blocks.4.attn.hook_v",
        "blocks.4.attn.hook_pattern", "blocks.4.attn.hook_z"]
    assert A.pattern_names(2) == ["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"]


@pytest.mark.parametrize("head,query", [(0, 6), (4, 3), (8, 0), (5, 6)])
def test_steps_match_the_model(lm, run, head, query):
    s = A.attention_steps(lm, run, layer=2, head=head, query=query)
    n = run.ids.shape[1]
    assert s.kv_head == head // 3                                   # GQA: 3 query heads per K/V head
    assert s.q.shape == (64,) and s.keys.shape == (n, 64) and s.values.shape == (n, 64)
    # The steps, by hand from the captured tensors.
    q = run.cache["blocks.2.attn.hook_rot_q"][0, query, head]
    k = run.cache["blocks.2.attn.hook_rot_k"][0, :, head // 3]
    raw = torch.tensor([float(q @ k[j]) for j in range(n)])
    torch.testing.assert_close(s.raw, raw, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(s.scaled, raw / 8, atol=1e-5, rtol=1e-5)
    assert torch.isinf(s.masked[query + 1:]).all() and torch.isfinite(s.masked[:query + 1]).all()
    assert (s.weights[query + 1:] == 0).all()
    assert float(s.weights.sum()) == pytest.approx(1.0, abs=1e-6)
    # ... and the model's own numbers: pattern row and z.
    assert s.max_weight_error < 1e-5 and s.max_z_error < 1e-5
    torch.testing.assert_close(s.weights, run.cache["blocks.2.attn.hook_pattern"][0, head, query], atol=1e-5, rtol=0)
    torch.testing.assert_close(s.z, run.cache["blocks.2.attn.hook_z"][0, query, head], atol=1e-5, rtol=0)
    torch.testing.assert_close(s.weighted_values.sum(0), s.z)
    # The scores hook holds the scaled, masked scores.
    scores = run.cache.get("blocks.2.attn.hook_attn_scores")
    assert scores is None   # not asked for: the steps do not need it


def test_steps_agree_with_hook_attn_scores(lm):
    run = lm.run("Hello there, world", names=A.attention_step_names(7) + ["blocks.7.attn.hook_attn_scores"])
    s = A.attention_steps(lm, run, layer=7, head=1, query=3)
    torch.testing.assert_close(s.masked, run.cache["blocks.7.attn.hook_attn_scores"][0, 1, 3], atol=1e-5, rtol=1e-5)


def test_query_out_of_range(lm, run):
    with pytest.raises(IndexError):
        A.attention_steps(lm, run, 2, 0, run.ids.shape[1])


def test_entropy_bits_by_hand():
    assert A.entropy_bits(torch.tensor([1.0, 0.0, 0.0])) == 0.0
    assert A.entropy_bits(torch.tensor([0.5, 0.5])) == pytest.approx(1.0)
    assert A.entropy_bits(torch.tensor([0.25] * 4)) == pytest.approx(2.0)


def test_unscaled_what_if_sharpens(lm, run):
    s = A.attention_steps(lm, run, layer=2, head=0, query=6)
    w = A.unscaled_what_if(s)
    by_hand = torch.softmax(s.raw[:7], dim=0)
    torch.testing.assert_close(w.weights_unscaled[:7], by_hand)
    assert (w.weights_unscaled[7:] == 0).all()
    # Multiplying every score by 8 can only sharpen: lower entropy, larger top weight.
    assert w.entropy_unscaled <= w.entropy_scaled + 1e-9
    assert w.max_unscaled >= w.max_scaled - 1e-9
    assert w.entropy_scaled == pytest.approx(A.entropy_bits(s.weights))


def test_unscaled_on_a_toy_example():
    # Two keys with raw scores 16 and 8 (d_head 64): scaled 2 and 1 -> 73%/27%;
    # unscaled 16 and 8 -> 99.97%/0.03%.
    scaled = torch.softmax(torch.tensor([2.0, 1.0]), 0)
    assert float(scaled[0]) == pytest.approx(math.e / (math.e + 1))
    unscaled = torch.softmax(torch.tensor([16.0, 8.0]), 0)
    assert float(unscaled[0]) == pytest.approx(1 / (1 + math.exp(-8)))


def test_search_finds_heads_by_their_weights(lm, run):
    was = run.ids.shape[1] - 1
    cat = 1
    hits = A.find_heads_attending(lm, run, was, cat, top=5)
    assert len(hits) == 5
    weights = [h.weight for h in hits]
    assert weights == sorted(weights, reverse=True)
    grid = A.attention_between(run, lm.cfg.n_layers, was, cat)
    assert grid.shape == (30, 9)
    # The best hit is the true maximum of the grid, and its weight is the pattern's.
    assert hits[0].weight == pytest.approx(float(grid.max()))
    h = hits[0]
    assert h.weight == pytest.approx(float(run.cache[f"blocks.{h.layer}.attn.hook_pattern"][0, h.head, was, cat]))
    # On this model, some head really links "was" to "cat" (the lesson's example).
    assert hits[0].weight > 0.5
    assert A.find_heads_attending(lm, run, 2, 5, top=3)[0].weight == 0.0     # the future is masked


def test_strongest_link(lm, run):
    was = run.ids.shape[1] - 1
    key, hit = A.strongest_link(lm, run, was)
    assert 1 <= key < was - 1
    # No other allowed key is attended to more strongly by any head.
    for other in range(1, was - 1):
        assert float(A.attention_between(run, lm.cfg.n_layers, was, other).max()) <= hit.weight + 1e-7
    assert A.strongest_link(lm, run, 2) is None


def test_cost_by_hand(lm):
    cfg = lm.cfg
    # Q: 576*576, K and V: 576*192 each, O: 576*576, MLP: 3*576*1536.
    assert A.linear_macs_per_token(cfg) == 576 * 576 + 2 * 576 * 192 + 576 * 576 + 3 * 576 * 1536 == 3_538_944
    assert A.attention_macs_per_pair(cfg) == 2 * 9 * 64 == 1152
    assert A.causal_pairs(4) == 10
    c = A.block_cost(cfg, 100)
    assert c.attention == 1152 * 5050 and c.linear == 3_538_944 * 100
    # Doubling the length: linear work doubles, attention work about quadruples.
    c2 = A.block_cost(cfg, 200)
    assert c2.linear == 2 * c.linear
    assert c2.attention / c.attention == pytest.approx(200 * 201 / (100 * 101))
    n = A.crossover_length(cfg)
    assert A.block_cost(cfg, n).attention > A.block_cost(cfg, n).linear
    assert A.block_cost(cfg, n - 1).attention <= A.block_cost(cfg, n - 1).linear
    assert n == 6144


def test_heads_tied_for_most(lm, run):
    total = lm.cfg.n_layers * lm.cfg.n_heads
    assert A.heads_tied_for_most(run, lm.cfg.n_layers, 0, 0) == total    # the first token sees only itself
    assert A.heads_tied_for_most(run, lm.cfg.n_layers, 6, 1) == 1        # "was" -> "cat": one head stands out


def test_entropy_is_never_negative_zero():
    e = A.entropy_bits(torch.tensor([1.0, 0.0, 0.0]))
    assert e == 0.0 and math.copysign(1.0, e) == 1.0


# --------------------------------------------------------------------------- Gemma 3: MQA, QK-norm, window

def test_gemma_steps_use_the_normed_rotated_q_and_k(gemma):
    """On Gemma the scores come from q and k after QK-norm and RoPE: attention_steps reads
    hook_rot_q/hook_rot_k, divides by sqrt(256) = 16, and matches hook_attn_scores and the pattern."""
    prompt = "貓坐在墊子上，因為它累了。"
    layer = 5
    run = gemma.run(prompt, names=A.attention_step_names(layer) + [f"blocks.{layer}.attn.hook_attn_scores"])
    n = run.ids.shape[1]
    for head in range(gemma.cfg.n_heads):
        s = A.attention_steps(gemma, run, layer, head, n - 1)
        assert s.kv_head == 0 and s.scale == 16.0 and s.q.shape == (256,)      # MQA: one K/V head
        scores = run.cache[f"blocks.{layer}.attn.hook_attn_scores"][0, head, n - 1]
        torch.testing.assert_close(s.scaled, scores, atol=1e-4, rtol=1e-5)
        assert s.max_weight_error < 1e-5 and s.max_z_error < 1e-4
        w = A.unscaled_what_if(s)
        torch.testing.assert_close(w.weights_unscaled, (scores * 16).softmax(-1), atol=1e-5, rtol=1e-4)


def test_window_pairs_and_cost(gemma, lm):
    cfg = gemma.cfg
    assert A.causal_pairs(600, 512) == 512 * 513 // 2 + 88 * 512
    assert A.causal_pairs(100, 512) == A.causal_pairs(100)
    assert A.block_cost(cfg, 1000, 4).attention == A.attention_macs_per_pair(cfg) * A.causal_pairs(1000, 512)
    assert A.block_cost(cfg, 1000, 5).attention == A.attention_macs_per_pair(cfg) * A.causal_pairs(1000)
    assert A.sliding_attention_per_token(cfg) == 2 * 4 * 256 * 512 < A.linear_macs_per_token(cfg)
    assert A.sliding_attention_per_token(lm.cfg) is None and A.window_layers(lm.cfg) is None
    assert A.window_layers(cfg) == (4, 5)
    assert A.repeat_to_length([2, 7, 8, 9], 8, 1) == [2, 7, 8, 9, 7, 8, 9, 7]


def test_window_demo_on_a_long_prompt(gemma):
    """The sliding layer's pattern is exactly 0 where allowed() hides keys (512+ back) and the
    global layer's is not; the truncated run equals the full model's patterns."""
    ids = A.repeat_to_length(gemma.encode("貓坐在墊子上，因為它累了。"), 640, 1)
    demo = A.window_demo(gemma, ids)
    s, g = demo.layers
    assert demo.n == 640 and demo.window == 512
    assert demo.outside_zero[s] and demo.outside_count[s] == (640 - 512) * (640 - 512 + 1) // 2
    assert demo.outside_count[g] == 0
    assert float(demo.beyond(s).max()) == 0.0
    assert float(demo.beyond(g).min()) > 0.01
    full = gemma.run(ids, names=[f"blocks.{g}.attn.hook_pattern"])
    torch.testing.assert_close(demo.last_row[g], full.cache[f"blocks.{g}.attn.hook_pattern"][0, :, -1],
                               atol=1e-5, rtol=1e-4)
