"""lesson_model.analysis.heads: per-head measures, checked on hand-made patterns and on the model."""

from __future__ import annotations

import math

import pytest
import torch

from lesson_model.analysis import heads as H

PROMPT = "Mr Dursley went to work. Mr Dursley"


def uniform_causal(n: int) -> torch.Tensor:
    """[n, n]: each query spreads its attention evenly over positions 0..q."""
    p = torch.tril(torch.ones(n, n))
    return p / p.sum(-1, keepdim=True)


def previous_only(n: int) -> torch.Tensor:
    p = torch.zeros(n, n)
    p[0, 0] = 1
    for q in range(1, n):
        p[q, q - 1] = 1
    return p


def test_previous_and_sink_by_hand():
    u = uniform_causal(4)                       # rows: [1], [1/2,1/2], [1/3]*3, [1/4]*4
    assert float(H.previous_token_score(u)) == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)
    assert float(H.sink_score(u)) == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)
    assert float(H.previous_token_score(previous_only(5))) == 1.0
    assert float(H.sink_score(previous_only(5))) == pytest.approx(1 / 4)   # only query 1's previous is 0
    sink = torch.zeros(5, 5)
    sink[:, 0] = 1
    assert float(H.sink_score(sink)) == 1.0 and float(H.previous_token_score(sink)) == pytest.approx(1 / 4)
    # Works on stacked [L, H, q, k] grids too.
    grid = torch.stack([torch.stack([uniform_causal(5), sink])])    # [1, 2, 5, 5]
    assert H.sink_score(grid).shape == (1, 2)


def test_entropy_by_hand():
    u = uniform_causal(4)
    rows = H.row_entropy_bits(u)
    assert rows.tolist() == pytest.approx([0.0, 1.0, math.log2(3), 2.0], abs=1e-6)
    assert float(H.entropy_score(u)) == pytest.approx((1 + math.log2(3) + 2) / 3, abs=1e-6)
    assert float(H.entropy_score(previous_only(6))) == 0.0


def test_one_token_gives_nan():
    one = torch.ones(1, 1)
    for fn in (H.previous_token_score, H.sink_score, H.entropy_score):
        assert math.isnan(float(fn(one)))
    assert math.isnan(float(H.induction_score_on(one, [5])))


def test_induction_targets():
    #        A  B  C  A  B  D  A
    ids = [1, 2, 3, 1, 2, 4, 1]
    assert H.induction_targets(ids) == [(3, [1]), (4, [2]), (6, [1, 4])]
    # "the the": the earlier occurrence's next token is the query itself: not a target.
    assert H.induction_targets([7, 7]) == []
    assert H.induction_targets([7, 7, 7]) == [(2, [1])]
    assert H.induction_targets([1, 2, 3]) == []


def test_induction_score_by_hand():
    ids = [1, 2, 3, 1, 2]
    p = uniform_causal(5)
    # query 3 -> key 1 (1/4), query 4 -> key 2 (1/5)
    assert float(H.induction_score_on(p, ids)) == pytest.approx((1 / 4 + 1 / 5) / 2)
    perfect = torch.zeros(5, 5)
    perfect[3, 1] = perfect[4, 2] = 1
    assert float(H.induction_score_on(perfect, ids)) == 1.0


def test_measures_on_the_model(lm):
    run = lm.run(PROMPT, names=H.head_measure_names(lm.cfg.n_layers))
    m = H.head_measures(lm, run)
    assert set(m) == set(H.MEASURES)
    for name, grid in m.items():
        assert grid.shape == (30, 9), name
        assert torch.isfinite(grid).all(), name
    for name in ("previous", "sink", "induction"):
        assert (m[name] >= 0).all() and (m[name] <= 1 + 1e-5).all()
    n = run.ids.shape[1]
    assert (m["entropy"] >= 0).all() and (m["entropy"] <= math.log2(n) + 1e-4).all()
    # Spot check one head against a direct computation.
    p = run.cache["blocks.5.attn.hook_pattern"][0, 2]
    assert float(m["previous"][5, 2]) == pytest.approx(float(sum(p[i, i - 1] for i in range(1, n)) / (n - 1)), abs=1e-6)
    assert float(m["sink"][5, 2]) == pytest.approx(float(p[1:, 0].mean()), abs=1e-6)
    # The model has strong previous-token heads and sink heads.
    assert H.top_heads(m["previous"], 1)[0][2] > 0.5
    assert H.top_heads(m["sink"], 1)[0][2] > 0.9


def test_top_heads_skips_nan():
    grid = torch.tensor([[0.1, float("nan")], [0.9, 0.5]])
    assert H.top_heads(grid, 2) == [(1, 0, pytest.approx(0.9)), (1, 1, 0.5)]
    assert H.top_heads(grid, 5, largest=False)[0][:2] == (0, 0)
    assert len(H.top_heads(grid, 5)) == 3
    assert H.top_heads(torch.full((2, 2), float("nan")), 3) == []


def test_every_input_number_feeds_every_head(lm):
    counts = H.inputs_feeding_head(lm, 10)
    assert counts.tolist() == [576] * 9
    share = H.query_weight_slices(lm, 10)
    assert share.shape == (9, 9)
    torch.testing.assert_close(share.sum(1), torch.ones(9))
    # Not "each head reads its own slice": no chunk takes most of any head.
    assert float(share.max()) < 0.3 and float(share.min()) > 0.05
    # By hand for head 0, chunk 0.
    W = lm.decoder.blocks[10].attn.W_Q.detach()
    norms = torch.tensor([float(W[c * 64:(c + 1) * 64, 0:64].norm()) for c in range(9)])
    assert float(share[0, 0]) == pytest.approx(float(norms[0] / norms.sum()), rel=1e-5)


def test_group_kinds_by_hand():
    first = H.group_contrast(torch.tensor([1.0]), torch.tensor([1.0]))
    assert first.kind() == "first"
    assert H.group_contrast(torch.tensor([0.7, 0.3]), torch.tensor([0.2, 0.8])).kind() == "different"
    assert H.group_contrast(torch.tensor([0.70, 0.30]), torch.tensor([0.72, 0.28])).kind() == "alike"
    assert H.group_contrast(torch.tensor([0.3, 0.5, 0.2]), torch.tensor([0.1, 0.52, 0.38])).kind() == "amount"
    assert H.group_contrast(torch.tensor([0.5, 0.4, 0.1]), torch.tensor([0.5, 0.3, 0.2])).kind() == "rest"


def test_leaders_by_hand():
    grid = torch.tensor([[1.0, 0.999, 0.5], [float("nan"), 0.2, 0.996]])
    assert [(layer, head) for layer, head, _ in H.leaders(grid)] == [(0, 0), (0, 1), (1, 2)]
    assert [(layer, head) for layer, head, _ in H.leaders(grid, largest=False)] == [(1, 1)]
    assert H.leaders(torch.full((2, 2), float("nan"))) == []


def test_depth_means():
    grid = torch.tensor([[0.2, 0.4]] * 3 + [[0.5, 0.5]] * 3 + [[0.9, float("nan")]] * 3)   # 9 layers
    early, late, third = H.depth_means(grid)
    assert third == 3 and early == pytest.approx(0.3) and late == pytest.approx(0.9)


def test_slices_of_a_model_whose_heads_are_wider(gemma):
    """Gemma 3 270M: d_model 640, 4 heads of 256 (1,024 numbers): the slice picture cuts the
    input into 4 chunks of 160, one per head, and every chunk still feeds every head."""
    cfg = gemma.cfg
    assert cfg.n_heads * cfg.d_head != cfg.d_model
    bounds = H.slice_bounds(cfg)
    assert len(bounds) == cfg.n_heads and bounds[0] == (0, cfg.d_model // cfg.n_heads) and bounds[-1][1] == cfg.d_model
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))               # the chunks tile the vector
    share = H.query_weight_slices(gemma, 2)
    assert share.shape == (cfg.n_heads, cfg.n_heads)
    torch.testing.assert_close(share.sum(1), torch.ones(cfg.n_heads))
    assert float(share.max()) < 2 / cfg.n_heads and float(share.min()) > 0.5 / cfg.n_heads
    assert H.inputs_feeding_head(gemma, 2).tolist() == [cfg.d_model] * cfg.n_heads
    W = gemma.decoder.blocks[2].attn.W_Q.detach()
    start, end = bounds[1]
    norms = torch.tensor([float(W[a:b, 0:cfg.d_head].norm()) for a, b in bounds])
    assert float(share[0, 1]) == pytest.approx(float(norms[1] / norms.sum()), rel=1e-5)
    assert (start, end) == (cfg.d_model // cfg.n_heads, 2 * cfg.d_model // cfg.n_heads)


def test_slice_bounds_equal_d_head_when_it_fits(lm):
    assert H.slice_bounds(lm.cfg) == [(h * lm.cfg.d_head, (h + 1) * lm.cfg.d_head) for h in range(lm.cfg.n_heads)]
