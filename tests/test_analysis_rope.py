"""lesson_model.analysis.rope: the frequency ladder, 2-D rotations, q turning, relative scores."""

from __future__ import annotations

import math

import pytest
import torch

from lesson_model.analysis import rope as R
from tests._fixtures_model import smollm2, tiny  # noqa: F401

PROMPT = "The cat sat on the mat because it was tired. The cat"


@pytest.fixture(scope="module")
def run(smollm2):
    return smollm2.run(PROMPT, names=R.rope_hook_names(3) + R.rope_hook_names(16))


def test_worked_example_three_zero_by_thirty_degrees():
    got = R.rotate_pair([3.0, 0.0], math.radians(30))
    assert got.tolist() == pytest.approx([3 * math.sqrt(3) / 2, 1.5])
    assert [round(v, 3) for v in got.tolist()] == [2.598, 1.5]
    # A quarter turn of (1, 2) is (-2, 1); rotation keeps the length.
    assert R.rotate_pair([1, 2], math.pi / 2).tolist() == pytest.approx([-2.0, 1.0])
    assert float(R.rotate_pair([1, 2], 1.234).norm()) == pytest.approx(math.sqrt(5))


def test_frequency_ladder_of_smollm2(smollm2):
    th = R.frequency_ladder(smollm2)
    assert smollm2.cfg.rope_theta == 100000 and smollm2.cfg.d_head == 64
    assert th.shape == (32,)
    assert float(th[0]) == 1.0                                   # pair 0: one radian per token
    assert float(th[1]) == pytest.approx(100000 ** (-2 / 64), rel=1e-6)
    assert float(th[31]) == pytest.approx(100000 ** (-62 / 64), rel=1e-5)
    torch.testing.assert_close(th.double(), R.ladder_formula(64, 100000.0), rtol=1e-6, atol=0)
    p = R.periods(th)
    assert float(p[0]) == pytest.approx(2 * math.pi)
    assert float(p[31]) == pytest.approx(2 * math.pi * 100000 ** (62 / 64), rel=1e-5)   # ~438,000 tokens
    assert (th[1:] < th[:-1]).all()


def test_pair_dims_rotate_half_layout():
    assert R.pair_dims(0, 64) == (0, 32) and R.pair_dims(31, 64) == (31, 63)
    with pytest.raises(ValueError):
        R.pair_dims(32, 64)


def test_real_q_turns_by_position_times_theta(smollm2, run):
    for pair in (0, 3, 20):
        tr = R.pair_track(smollm2, run, layer=3, head=4, pair=pair)
        n = tr.before.shape[0]
        # Each point turns by exactly position * theta_i; its length does not change.
        torch.testing.assert_close(tr.turned, tr.expected, atol=1e-4, rtol=0)
        torch.testing.assert_close(tr.after.norm(dim=1), tr.before.norm(dim=1), atol=1e-5, rtol=1e-5)
        # Position 0 is not rotated at all.
        torch.testing.assert_close(tr.after[0], tr.before[0], atol=1e-6, rtol=0)
        # By hand: rotate the pre-RoPE point with rotate_pair and compare with hook_rot_q.
        p = n - 1
        by_hand = R.rotate_pair(tr.before[p].tolist(), p * tr.theta)
        torch.testing.assert_close(by_hand, tr.after[p], atol=1e-4, rtol=1e-4)


def test_key_track(smollm2, run):
    tr = R.pair_track(smollm2, run, layer=16, head=2, pair=1, kind="k")
    torch.testing.assert_close(tr.turned, tr.expected, atol=1e-4, rtol=0)


def test_rotate_head_matches_the_forward_pass(smollm2, run):
    q = run.cache["blocks.3.attn.hook_q"][0, :, 5]                 # [pos, d_head]
    n = q.shape[0]
    torch.testing.assert_close(R.rotate_head(smollm2, q, range(n), 3), run.cache["blocks.3.attn.hook_rot_q"][0, :, 5],
                               atol=1e-5, rtol=1e-5)


def test_relative_scores_depend_on_distance_only(smollm2, run):
    n = run.ids.shape[1]
    q, k = R.query_and_key(smollm2, run, 16, 0, n - 1, n - 2)
    assert torch.equal(k, run.cache["blocks.16.attn.hook_k"][0, n - 2, 0])
    res = R.relative_scores(smollm2, q, k, distances=[0, 1, 2, 8, 32], positions=[0, 7, 100, 1000, 4000], layer=16)
    assert res.scores.shape == (5, 5)
    assert float(res.spread.max()) < 1e-3                          # constant along each row
    per_distance = res.scores[:, 0]
    assert float(per_distance.max() - per_distance.min()) > 1.0    # but it changes with distance
    assert res.unrotated == pytest.approx(float(per_distance[0]), abs=1e-4)   # distance 0: no net rotation
    # The score at distance 1 equals the model's own scaled score between these two positions
    # (the forward pass rotated q at n-1 and k at n-2).
    rq = run.cache["blocks.16.attn.hook_rot_q"][0, n - 1, 0]
    rk = run.cache["blocks.16.attn.hook_rot_k"][0, n - 2, 0]
    assert float(res.scores[1, 0]) == pytest.approx(float(rq @ rk) / 8.0, abs=1e-3)
    by_d = R.score_by_distance(smollm2, q, k, 8, 16)
    torch.testing.assert_close(by_d[[0, 1, 2, 8]], per_distance[:4], atol=1e-4, rtol=0)


def test_sinusoidal_encoding_by_hand():
    pe = R.sinusoidal_encoding(50, 8)
    assert pe.shape == (50, 8)
    assert pe[0].tolist() == pytest.approx([0, 1, 0, 1, 0, 1, 0, 1])
    assert float(pe[3, 0]) == pytest.approx(math.sin(3))
    assert float(pe[3, 1]) == pytest.approx(math.cos(3))
    assert float(pe[7, 2]) == pytest.approx(math.sin(7 / 10000 ** (2 / 8)))
    assert float(pe[7, 7]) == pytest.approx(math.cos(7 / 10000 ** (6 / 8)))


def test_tiny_model_ladder(tiny):
    _, lm = tiny
    th = R.frequency_ladder(lm)
    torch.testing.assert_close(th.double(), R.ladder_formula(lm.cfg.d_head, lm.cfg.rope_theta), rtol=1e-6, atol=0)


def test_max_turn_error_wraps_and_skips_zero_pairs():
    before = torch.tensor([[1.0, 0.0], [0.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    track = R.PairTrack(0, 0, 0, (0, 32), 1.0, before, before.clone(), torch.zeros(3), torch.zeros(3),
                        torch.tensor([0.0, 2.0, math.pi]), torch.tensor([0.0, 0.0, -math.pi]))
    # position 1 has no direction (a pair of zeros); at position 2, pi and -pi are the same angle
    assert track.max_turn_error == pytest.approx(0.0, abs=1e-6)


# --------------------------------------------------------------------------- Gemma 3: two bases, QK-norm

GEMMA_PROMPT = "我吃魚，魚吃我。The cat sat on the mat."


@pytest.mark.parity
def test_rope_bases_of_both_models(smollm2, gemma):
    (one,) = R.rope_bases(smollm2)
    assert one.kind == "global" and one.base == smollm2.cfg.rope_theta and one.layers == tuple(range(30))
    assert one.reach == smollm2.cfg.max_position and one.window is None
    local, glob = R.rope_bases(gemma)
    cfg = gemma.cfg
    assert local.kind == "sliding" and local.layers == cfg.sliding_layers and local.base == cfg.rope_theta_sliding == 10000
    assert glob.kind == "global" and glob.base == cfg.rope_theta == 1e6
    assert glob.layers == tuple(i for i in range(cfg.n_layers) if i not in cfg.sliding_layers) == (5, 11, 17)
    assert local.reach == local.window == cfg.sliding_window == 512 and glob.reach == cfg.max_position
    for b in (local, glob):
        for layer in b.layers:
            torch.testing.assert_close(R.frequency_ladder(gemma, layer), gemma.decoder.rope_for(layer).inv_freq.cpu())
        torch.testing.assert_close(b.thetas.double(), R.ladder_formula(cfg.d_head, b.base), rtol=1e-5, atol=0)
    assert local.slow_pairs == 66 and glob.slow_pairs == 48          # the numbers the position page quotes
    assert R.base_of(gemma, 5).kind == "global" and R.base_of(gemma, 4).kind == "sliding"


@pytest.mark.parity
@pytest.mark.parametrize("layer", [4, 5])
def test_gemma_rope_turns_the_qk_normed_vector(gemma, layer):
    """On Gemma RoPE turns q after QK-norm: pre_rope, rotated by the layer's own RoPE, is hook_rot_q."""
    run = gemma.run(GEMMA_PROMPT, names=R.rope_hook_names(layer))
    n = run.ids.shape[1]
    q = R.pre_rope(gemma, run, layer, "q")
    assert not torch.allclose(q, run.cache[f"blocks.{layer}.attn.hook_q"][0])     # the norm changed it
    for head in range(gemma.cfg.n_heads):
        torch.testing.assert_close(R.rotate_head(gemma, q[:, head], range(n), layer),
                                   run.cache[f"blocks.{layer}.attn.hook_rot_q"][0, :, head], atol=1e-4, rtol=1e-4)
    k = R.pre_rope(gemma, run, layer, "k")
    torch.testing.assert_close(R.rotate_head(gemma, k[:, 0], range(n), layer),
                               run.cache[f"blocks.{layer}.attn.hook_rot_k"][0, :, 0], atol=1e-4, rtol=1e-4)
    for pair in (0, 3, 40):       # (layer 5's q_norm weight is exactly 0 on pair 3: max_turn_error skips zero pairs)
        tr = R.pair_track(gemma, run, layer, head=1, pair=pair)
        assert tr.max_turn_error < 1e-4
        assert tr.theta == pytest.approx(float(gemma.decoder.rope_for(layer).inv_freq[pair]))
    qv, kv = R.query_and_key(gemma, run, layer, 2, n - 1, n - 2)
    res = R.relative_scores(gemma, qv, kv, [1], [n - 2], layer)
    rq = run.cache[f"blocks.{layer}.attn.hook_rot_q"][0, n - 1, 2]
    rk = run.cache[f"blocks.{layer}.attn.hook_rot_k"][0, n - 2, 0]
    assert float(res.scores[0, 0]) == pytest.approx(float(rq @ rk) / 16.0, abs=1e-3)
