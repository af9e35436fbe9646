"""lesson_model.analysis.embeddings: neighbours, analogies, cosine matrix, PCA, order blindness."""

from __future__ import annotations

import threading

import pytest
import torch

from lesson_model.analysis import embeddings as E
from tests._fixtures_model import smollm2, tiny  # noqa: F401


def brute_cosines(lm, v: torch.Tensor) -> torch.Tensor:
    W = lm.decoder.W_E.detach().double().cpu()
    v = v.double().cpu()
    return (W @ v) / (W.norm(dim=1) * v.norm())


# --------------------------------------------------------------------------- norms, cosines, neighbours

def test_row_norms_are_cached_per_model_and_thread_safe(smollm2):
    lm = smollm2
    E._NORMS.pop(lm, None)
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(E.row_norms(lm))) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert all(x is seen[0] for x in seen)       # computed once, shared
    torch.testing.assert_close(seen[0], lm.decoder.W_E.detach().norm(dim=1))


def test_cosine_to_all_matches_brute_force(smollm2):
    v = torch.randn(smollm2.cfg.d_model, generator=torch.Generator().manual_seed(0))
    got = E.cosine_to_all(smollm2, v)
    assert got.shape == (smollm2.cfg.vocab_size,)
    torch.testing.assert_close(got.double(), brute_cosines(smollm2, v), atol=1e-5, rtol=0)


def test_nearest_neighbours_are_the_brute_force_top_k(smollm2):
    lm = smollm2
    king = E.token_id_of(lm, " king")
    got = E.nearest_neighbours(lm, " king", k=8)
    cos = brute_cosines(lm, lm.decoder.W_E.detach()[king])
    cos[king] = -2
    cos[sorted(lm.tokenizer.special_ids)] = -2
    expected = cos.topk(8).indices.tolist()
    assert [n.id for n in got] == expected
    assert king not in [n.id for n in got]
    assert all(a.cosine >= b.cosine for a, b in zip(got, got[1:]))
    assert got[0].text == lm.token_text(got[0].id)
    # The same query as an id and as a vector gives the same ranking (the vector keeps itself).
    assert [n.id for n in E.nearest_neighbours(lm, king, k=8)] == expected
    by_vector = E.nearest_neighbours(lm, lm.decoder.W_E.detach()[king], k=9)
    assert by_vector[0].id == king and by_vector[0].cosine == pytest.approx(1.0, abs=1e-5)


def test_neighbours_of_days_are_days(smollm2):
    """A fact about this model's geometry that the lesson states."""
    top = [n.text for n in E.nearest_neighbours(smollm2, " Monday", k=5)]
    assert set(top[:5]) <= {" Tuesday", " Wednesday", " Thursday", " Friday", " Saturday", " Sunday", "Monday"}


def test_token_id_of_rejects_multi_token_text(smollm2):
    with pytest.raises(ValueError, match="tokens"):
        E.token_id_of(smollm2, " strawberries are red")
    with pytest.raises(ValueError):
        E.token_id_of(smollm2, smollm2.cfg.vocab_size)
    assert E.token_id_of(smollm2, " cat") == smollm2.encode(" cat")[0]


def test_rank_of_counts_strictly_higher_entries():
    cos = torch.tensor([0.1, 0.9, 0.5, 0.5, 0.7])
    assert E.rank_of(cos, 1) == 1
    assert E.rank_of(cos, 2) == 3          # 0.9 and 0.7 are higher; the tie with 3 does not count
    assert E.rank_of(cos, 2, exclude=[1]) == 2
    assert E.rank_of(cos, 0, exclude=[0, 1]) == 4   # the target itself is never excluded


# --------------------------------------------------------------------------- analogies

def test_analogy_vector_is_sum_of_unit_rows(smollm2):
    lm = smollm2
    W = lm.decoder.W_E.detach()
    a, b, c = (E.token_id_of(lm, w) for w in (" king", " man", " woman"))
    unit = lambda i: W[i] / W[i].norm()  # noqa: E731
    torch.testing.assert_close(E.analogy_vector(lm, a, b, c), unit(a) - unit(b) + unit(c))


def test_king_minus_man_plus_woman_is_queen_on_this_model(smollm2):
    lm = smollm2
    res = E.analogy(lm, " king", " man", " woman", k=5, expected=" queen")
    assert res.top[0].text == " queen" and res.expected_rank == 1
    inputs = {res.a, res.b, res.c}
    assert not inputs & {n.id for n in res.top}
    # Check the rank against a brute-force count.
    cos = brute_cosines(lm, E.analogy_vector(lm, res.a, res.b, res.c))
    e = res.expected
    assert res.expected_cosine == pytest.approx(float(cos[e]), abs=1e-5)
    higher = (cos > cos[e]).nonzero().flatten().tolist()
    assert res.expected_rank_with_inputs == 1 + len([i for i in higher if i not in lm.tokenizer.special_ids])


def test_paris_france_italy_only_half_works(smollm2):
    """The page calls this one half-working: an Italian city wins, but not Rome."""
    res = E.analogy(smollm2, " Paris", " France", " Italy", k=5, expected=" Rome")
    assert res.expected_rank > 10
    assert " Milan" in [n.text for n in res.top]


def test_analogy_rank_with_inputs_is_never_better(smollm2):
    res = E.analogy(smollm2, " Paris", " France", " Germany", k=3, expected=" Berlin")
    assert res.expected_rank == 1
    assert res.expected_rank_with_inputs >= res.expected_rank
    assert res.top_with_inputs[0].text == " Paris"    # the famous caveat: the nearest entry is an input


# --------------------------------------------------------------------------- cosine matrix, PCA

def test_cosine_matrix_by_hand():
    v = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0], [-1.0, 0.0]])
    m = E.cosine_matrix(v)
    r = 2 ** -0.5
    expected = torch.tensor([[1, 0, r, -1], [0, 1, r, 0], [r, r, 1, -r], [-1, 0, -r, 1]], dtype=torch.float32)
    torch.testing.assert_close(m, expected)


def test_pca_recovers_a_line_and_its_variance():
    # Points on a line in 5-D plus a tiny wobble: one axis holds (almost) all the variance.
    direction = torch.tensor([1.0, 2.0, 0.0, -2.0, 0.0]) / 3.0
    t = torch.arange(-3.0, 4.0)
    wobble = torch.zeros(7, 5)
    wobble[:, 2] = 0.01 * torch.tensor([1, 0, -1, 0, -1, 0, 1.0])   # mean 0, uncorrelated with t
    x = t[:, None] * direction + wobble + 5.0
    p = E.pca(x, 2)
    assert p.coords.shape == (7, 2) and p.components.shape == (2, 5)
    assert float(p.explained[0]) > 0.999
    torch.testing.assert_close(p.components[0].abs(), direction.abs(), atol=1e-3, rtol=0)
    torch.testing.assert_close(p.coords[:, 0].abs(), t.abs(), atol=1e-3, rtol=0)
    # Coordinates are the centred points projected on the axes.
    torch.testing.assert_close(p.coords, (x - p.mean) @ p.components.T, atol=1e-5, rtol=0)
    assert float(p.explained.sum()) <= 1.0 + 1e-6


def test_pca_matches_the_covariance_eigenvectors(smollm2):
    lm = smollm2
    ids = [E.token_id_of(lm, w) for w in (" one", " two", " three", " Monday", " Tuesday", " cat", " dog", " Paris")]
    rows = lm.decoder.W_E.detach()[ids]
    p = E.pca(rows, 3)
    centred = (rows - rows.mean(0)).double()
    evals, evecs = torch.linalg.eigh(centred.T @ centred)          # ascending
    top = evecs[:, -3:].flip(-1).T                                   # [3, d], largest first
    torch.testing.assert_close(p.components.double().abs(), top.abs(), atol=1e-4, rtol=0)
    torch.testing.assert_close(p.explained.double(), evals[-3:].flip(-1) / evals.sum(), atol=1e-5, rtol=0)


def test_pca_handles_tiny_inputs():
    p = E.pca(torch.tensor([[1.0, 2.0, 3.0]]), 2)
    assert p.coords.shape == (1, 1) and float(p.coords.abs().sum()) == 0.0


# --------------------------------------------------------------------------- order blindness

def test_dog_bites_man_looks_up_the_same_rows(smollm2):
    m = E.same_rows(smollm2, "The dog bites the man.", "The man bites the dog.")
    assert m.same_multiset
    assert sorted(m.tokens_a) == sorted(m.tokens_b) and m.tokens_a != m.tokens_b
    assert m.match[1] == 4 and m.match[4] == 1           # " man" and " dog" swapped places
    other = E.same_rows(smollm2, "The dog bites the man.", "The dog bites the cat.")
    assert not other.same_multiset and other.match[4] is None


def test_prompt_rows_are_embedding_lookups(smollm2):
    run = smollm2.run("The cat sat", names=E.embedding_hook_names())
    rows = E.prompt_rows(run)
    torch.testing.assert_close(rows, smollm2.decoder.W_E.detach()[run.ids[0]])


def test_works_on_a_tiny_model(tiny):
    _, lm = tiny
    got = E.nearest_neighbours(lm, 5, k=3, skip_special=False)
    cos = brute_cosines(lm, lm.decoder.W_E.detach()[5]).nan_to_num(0.0)   # row 0 (padding) is all zeros
    assert float(E.cosine_to_all(lm, lm.decoder.W_E.detach()[5])[0]) == 0.0  # a zero row has cosine 0, not NaN
    cos[5] = -2
    assert [n.id for n in got] == cos.topk(3).indices.tolist()


@pytest.mark.parity
def test_gemma_hook_embed_is_the_rows_times_sqrt_d(gemma):
    """The embeddings page says the first block reads each row × √d_model on Gemma (√640 ≈ 25.30)."""
    import math
    assert gemma.cfg.embed_scale and f"{math.sqrt(gemma.cfg.d_model):.2f}" == "25.30"
    run = gemma.run("我吃魚，魚吃我。", names=E.embedding_hook_names())
    rows = gemma.decoder.W_E.detach()[run.ids[0]]
    torch.testing.assert_close(E.prompt_rows(run), rows * math.sqrt(gemma.cfg.d_model))
    # the unembedding is the same table, unscaled (tied)
    assert gemma.decoder.W_U.data_ptr() == gemma.decoder.W_E.data_ptr()
    # a common factor changes no cosine: neighbours of the scaled row are the row's neighbours
    token = gemma.encode(" king")[1]
    scaled = E.nearest_neighbours(gemma, gemma.decoder.W_E.detach()[token] * 25.3, k=5, exclude=[token])
    assert [n.id for n in scaled] == [n.id for n in E.nearest_neighbours(gemma, token, k=5)]


@pytest.mark.parity
def test_gemma_order_and_neighbours(gemma):
    for a, b in (("我吃魚。", "魚吃我。"), ("我吃鱼。", "鱼吃我。"), ("狗咬人。", "人咬狗。"),
                 ("The dog bites the man.", "The man bites the dog.")):
        m = E.same_rows(gemma, a, b)
        assert m.same_multiset and m.tokens_a != m.tokens_b and m.tokens_a[0] == gemma.tokenizer.bos_id
    assert E.nearest_neighbours(gemma, "貓", k=1)[0].text == "猫"
    assert E.nearest_neighbours(gemma, "魚", k=1)[0].text == "鱼"
    assert E.analogy(gemma, " king", " man", " woman", expected=" queen").expected_rank == 1
