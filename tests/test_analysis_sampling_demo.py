"""The sampling lesson's arithmetic, checked by hand and against direct computations."""

from __future__ import annotations

import math

import pytest
import torch

from lesson_model.analysis import sampling_demo as sd


def hand_softmax(xs, T):
    e = [math.exp(x / T) for x in xs]
    return [v / sum(e) for v in e]


# --------------------------------------------------------------------------- the four candidates

def test_four_candidate_table_by_hand():
    rows = {r.temperature: r for r in sd.temperature_table()}
    assert set(rows) == {0.0, 0.5, 1.0, 2.0, 5.0}
    # T = 1: e^3 / (e^3 + e^2 + e^1 + e^0) = 20.09 / 31.19
    assert rows[1.0].probs == pytest.approx([0.6439, 0.2369, 0.0871, 0.0321], abs=1e-4)
    assert rows[0.5].scaled == pytest.approx([6, 4, 2, 0])
    assert rows[0.5].probs == pytest.approx([0.8650, 0.1171, 0.0158, 0.0021], abs=1e-4)
    assert rows[2.0].probs == pytest.approx(hand_softmax([3, 2, 1, 0], 2.0), abs=1e-6)
    assert rows[5.0].probs == pytest.approx(hand_softmax([3, 2, 1, 0], 5.0), abs=1e-6)
    assert rows[0.0].probs == [1.0, 0.0, 0.0, 0.0] and rows[0.0].scaled is None
    assert rows[0.0].entropy_bits == 0.0 and math.copysign(1, rows[0.0].entropy_bits) == 1
    # entropy in bits rises with temperature towards log2(4) = 2
    ent = [rows[T].entropy_bits for T in (0.0, 0.5, 1.0, 2.0, 5.0)]
    assert ent == sorted(ent) and ent[-1] < 2.0
    p = rows[1.0].probs
    assert rows[1.0].entropy_bits == pytest.approx(-sum(q * math.log2(q) for q in p), abs=1e-5)


def test_temperature_keeps_the_ratio_of_exponentials():
    rows = sd.temperature_table(temperatures=(0.7,))
    p = rows[0].probs
    # p_good / p_hot = exp((3 - 2) / T)
    assert p[0] / p[1] == pytest.approx(math.exp(1 / 0.7), rel=1e-5)


# --------------------------------------------------------------------------- one distribution

@pytest.fixture
def logits():
    g = torch.Generator().manual_seed(0)
    return torch.randn(500, generator=g) * 3          # [vocab]


def test_distribution_view_against_direct_computation(logits):
    view = sd.distribution_view(logits, temperature=0.8, top_k=40, top_p=0.9, n=30)
    order = logits.argsort(descending=True)[:30]
    assert view.ids.tolist() == order.tolist()
    torch.testing.assert_close(view.p_model, logits.softmax(-1)[order])
    torch.testing.assert_close(view.p_temp, (logits / 0.8).softmax(-1)[order])
    # top-k 40 then top-p 0.9: keep the smallest prefix of the (temperature, top-k) distribution reaching 0.9
    p40 = (logits / 0.8).softmax(-1)
    p40 = p40.masked_fill(logits < logits.sort(descending=True).values[39], 0)
    p40 = p40 / p40.sum()
    ranked = p40[logits.argsort(descending=True)]
    cut = int((ranked.cumsum(0) < 0.9).sum()) + 1
    assert view.n_kept == cut
    assert view.kept.tolist() == [i < cut for i in range(30)]
    torch.testing.assert_close(view.cumulative, ranked[:30].cumsum(0), atol=1e-5, rtol=1e-5)
    assert float(view.cumulative[cut - 2]) < 0.9 <= float(view.cumulative[cut - 1]) + 1e-6
    final = torch.where(torch.arange(500) < cut, ranked, torch.zeros(500))
    torch.testing.assert_close(view.p_final, (final / final.sum())[:30], atol=1e-6, rtol=1e-5)
    assert view.p_final.sum() == pytest.approx(1.0, abs=1e-5) or cut > 30
    assert view.kept_model_mass == pytest.approx(float(logits.softmax(-1)[order[:cut]].sum()), abs=1e-5)
    assert view.entropy_final < view.entropy_model


def test_distribution_view_greedy_and_no_cut(logits):
    greedy = sd.distribution_view(logits, temperature=0, n=5)
    assert greedy.n_kept == 1 and greedy.p_final.tolist() == [1, 0, 0, 0, 0]
    assert greedy.entropy_final == 0
    free = sd.distribution_view(logits, temperature=1.0, n=5)
    assert free.n_kept == 500 and free.kept_model_mass == pytest.approx(1.0, abs=1e-5)
    torch.testing.assert_close(free.p_final, free.p_model)
    assert free.entropy_final == pytest.approx(free.entropy_model)


@pytest.mark.parametrize("values", [
    torch.tensor([0.5, 2.0, 2.0, -1.0, 2.0, 0.5, 0.5, float("-inf"), 3.0]),     # ties across the cut
    torch.tensor([0.0, 0.3, 0.0, 0.0, 0.7, 0.0]),                                 # probabilities, mostly 0
    torch.zeros(7),
    torch.randn(5000).round(decimals=1),                                          # many ties everywhere
])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 6, 50])
def test_ranked_first_is_the_start_of_a_stable_argsort(values, n):
    expected = values.argsort(descending=True, stable=True)[:n]
    assert sd.ranked_first(values, n).tolist() == expected.tolist()


def test_logit_histogram_counts_every_entry(logits):
    edges, counts = sd.logit_histogram(logits, bins=25)
    assert counts.sum() == 500 and len(edges) == 26
    assert edges[0] == pytest.approx(float(logits.min())) and edges[-1] == pytest.approx(float(logits.max()))
    inside = ((logits >= edges[3]) & (logits < edges[4])).sum()
    assert counts[3] == inside


# --------------------------------------------------------------------------- sampling many times

def test_sample_histogram_seeded_and_consistent(logits):
    probs = sd.next_token_distribution(logits, temperature=1.0, top_k=8)
    a = sd.sample_histogram(probs, 2000, seed=3)
    torch.manual_seed(42)
    b = sd.sample_histogram(probs, 2000, seed=3)
    c = sd.sample_histogram(probs, 2000, seed=4)
    assert a == b and a.counts != c.counts
    assert sum(a.counts) + a.other_count == 2000
    assert a.other_count == 0 and a.distinct <= 8 and len(a.ids) == 8     # nothing outside the top 8
    assert a.probs == sorted(a.probs, reverse=True)
    for p, count in zip(a.probs, a.counts):      # within 5 standard errors of n * p
        assert abs(count - 2000 * p) <= 5 * math.sqrt(2000 * p * (1 - p)) + 1
    counts = torch.zeros(500)
    for i, k in zip(a.ids, a.counts):
        counts[i] = k
    assert a.total_variation == pytest.approx(0.5 * float((counts / 2000 - probs).abs().sum()), abs=1e-6)
    assert a.total_variation < 0.06


def test_sample_histogram_lists_rare_draws(logits):
    probs = logits.softmax(-1)
    h = sd.sample_histogram(probs, 300, seed=0, n_show=5)
    assert len(h.ids) == 5 and h.ids == [int(i) for i in probs.argsort(descending=True)[:5]]
    assert h.other_count == 300 - sum(h.counts)
    assert h.other_prob == pytest.approx(1 - sum(h.probs), abs=1e-6)


# --------------------------------------------------------------------------- the real model

@pytest.mark.parity
def test_final_vector_gives_the_logits(lm):
    run = lm.run("The capital of France is", names=sd.final_vector_hook_names())
    vec = sd.final_vector(lm, run)
    assert vec.shape == (lm.cfg.d_model,)
    torch.testing.assert_close(vec @ lm.decoder.W_U.detach().cpu(), run.logits[0, -1], atol=1e-3, rtol=1e-4)
    sweep = sd.temperature_sweep(run.logits[0, -1])
    assert [r.temperature for r in sweep] == list(sd.FOUR_TEMPERATURES)
    assert sweep[0].top_prob == 1.0 and sweep[0].tokens_for_90 == 1 and sweep[0].entropy_bits == 0
    top = [r.top_prob for r in sweep[1:]]
    assert top == sorted(top, reverse=True)                      # hotter: the best token loses share
    p1 = run.logits[0, -1].softmax(-1)
    # the sweep sums the vocabulary in ranked order, softmax in vocabulary order: float32 sums of
    # 49,152 terms in two orders agree to about sqrt(vocab) * eps32 (relative)
    rel = 8 * 2.0 ** -23 * math.sqrt(lm.cfg.vocab_size)
    assert sweep[2].top_prob == pytest.approx(float(p1.max()), rel=rel)
    need = int((p1.sort(descending=True).values.cumsum(0) < 0.9).sum()) + 1
    assert sweep[2].tokens_for_90 == need
    for row in sweep[1:]:        # every temperature against its own softmax in vocabulary order
        p = (run.logits[0, -1] / row.temperature).softmax(-1)
        assert row.top_prob == pytest.approx(float(p.max()), rel=rel)
        assert row.entropy_bits == pytest.approx(float(-(p * p.clamp_min(1e-30).log2()).sum()), abs=1e-4)
        ranked = p.sort(descending=True).values.double().cumsum(0)
        assert abs(row.tokens_for_90 - (int((ranked < 0.9 - 1e-9).sum()) + 1)) <= 1   # a float tie at 90% at most


# --------------------------------------------------------------------------- facts behind the Try-this lines

def test_prompt_facts_by_hand(logits):
    f = sd.prompt_facts(logits, t_cold=0.5, t_hot=1.5, top_p=0.9, top_k=40, n_top=10)
    p = logits.softmax(-1)
    assert f.best == int(p.argmax()) and f.p == pytest.approx(float(p.max()))
    assert f.p_cold == pytest.approx(float((logits / 0.5).softmax(-1)[f.best]))
    assert f.p_hot == pytest.approx(float((logits / 1.5).softmax(-1)[f.best]))
    assert f.p_cold > f.p > f.p_hot                       # the favourite loses share as T rises
    ranked = p.sort(descending=True).values.double()
    assert f.n_top_p == int((ranked.cumsum(0) < 0.9).sum()) + 1
    assert f.cut_top_k == pytest.approx(1 - float(ranked[:40].sum()), abs=1e-6)
    assert f.entropy == pytest.approx(float(-(p * p.log2()).sum()), abs=1e-4)
    assert f.top_ids == p.argsort(descending=True)[:10].tolist()


def test_prompt_facts_of_a_certain_token():
    x = torch.full((50,), -30.0)
    x[7] = 10.0
    f = sd.prompt_facts(x)
    assert f.best == 7 and f.p == pytest.approx(1.0) and f.n_top_p == 1
    assert f.entropy == pytest.approx(0.0, abs=1e-3) and math.copysign(1, f.entropy) == 1
    assert f.cut_top_k == pytest.approx(0.0, abs=1e-6)
