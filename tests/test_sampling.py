"""lesson_model.sampling against transformers' logits warpers."""

from __future__ import annotations

import itertools

import pytest
import torch
from transformers.generation.logits_process import (
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from lesson_model.sampling import entropy, make_generator, next_token_distribution, sample, warp_logits


def hf_distribution(logits: torch.Tensor, temperature, top_k, top_p) -> torch.Tensor:
    """What transformers' generate(do_sample=True) samples from: warpers in this order, then softmax."""
    warpers = LogitsProcessorList()
    if temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(temperature))
    if top_k:
        warpers.append(TopKLogitsWarper(top_k))
    if top_p is not None and top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p))
    ids = torch.zeros(logits.shape[0], 1, dtype=torch.long)
    return warpers(ids, logits.clone()).softmax(-1)


def random_logits(seed: int, batch: int = 4, vocab: int = 50, with_ties: bool = False) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, vocab, generator=g) * 3
    if with_ties:   # rounding makes many exact ties, including at the top-k / top-p boundaries
        logits = (logits * 2).round() / 2
        logits[:, :6] = logits[:, :6].max(dim=-1, keepdim=True).values   # a block of tied best tokens
    return logits


SETTINGS = list(itertools.product([0.3, 0.7, 1.0, 1.5, 4.0], [None, 1, 2, 5, 10, 49, 50, 80], [None, 0.0, 0.1, 0.5, 0.9, 0.95, 1.0]))


# Exact equality, on any machine: both sides apply the same torch operations (divide, topk, an
# ascending sort, softmax, cumsum, softmax) to the same float32 input, element by element or
# along one short row, so they round identically; there is no float32 error to allow for.
@pytest.mark.parametrize("with_ties", [False, True], ids=["distinct", "ties"])
def test_distribution_equals_transformers_warpers(with_ties):
    for i, (temperature, top_k, top_p) in enumerate(SETTINGS):
        logits = random_logits(i, with_ties=with_ties)
        ours = next_token_distribution(logits, temperature, top_k, top_p)
        theirs = hf_distribution(logits, temperature, top_k, top_p)
        assert torch.equal(ours > 0, theirs > 0), (temperature, top_k, top_p)   # the same tokens survive
        torch.testing.assert_close(ours, theirs, atol=0, rtol=0, msg=lambda m: f"{(temperature, top_k, top_p)}: {m}")


def test_one_dimensional_logits_work_like_a_batch_of_one():
    logits = random_logits(0, batch=1, vocab=200, with_ties=True)
    for temperature, top_k, top_p in [(0.8, 20, 0.9), (1.0, None, 0.5), (2.0, 3, None)]:
        torch.testing.assert_close(next_token_distribution(logits[0], temperature, top_k, top_p),
                                   hf_distribution(logits, temperature, top_k, top_p)[0], atol=0, rtol=0)


def test_warped_logits_are_minus_inf_exactly_where_removed():
    logits = random_logits(1)
    warped = warp_logits(logits, 0.5, 10, 0.8)
    probs = next_token_distribution(logits, 0.5, 10, 0.8)
    assert torch.equal(torch.isneginf(warped), probs == 0)
    assert ((~torch.isneginf(warped)).sum(-1) <= 10).all()
    assert ((~torch.isneginf(warped)).sum(-1) >= 1).all()


def test_top_k_keeps_ties_with_the_kth_token():
    logits = torch.tensor([[3.0, 2.0, 2.0, 2.0, 1.0]])
    probs = next_token_distribution(logits, 1.0, top_k=2)
    assert (probs[0, :4] > 0).all() and probs[0, 4] == 0


def test_top_p_always_keeps_the_best_token():
    logits = torch.tensor([[5.0, 1.0, 0.0]])
    probs = next_token_distribution(logits, 1.0, top_p=0.0)
    assert torch.equal(probs, torch.tensor([[1.0, 0.0, 0.0]]))


def test_temperature_zero_is_greedy_one_hot():
    logits = random_logits(2, with_ties=True)
    for top_k, top_p in [(None, None), (5, 0.5)]:
        probs = next_token_distribution(logits, 0.0, top_k, top_p)
        assert torch.equal(probs.sum(-1), torch.ones(4))
        assert torch.equal(probs.argmax(-1), logits.argmax(-1))     # ties: the first best token, like argmax
        assert torch.equal((probs > 0).sum(-1), torch.ones(4, dtype=torch.long))


def test_out_of_range_settings_are_refused():
    with pytest.raises(ValueError):
        next_token_distribution(torch.zeros(5), -0.1)
    for top_p in (-0.1, 1.5):
        with pytest.raises(ValueError):
            next_token_distribution(torch.zeros(5), 1.0, top_p=top_p)


def test_distribution_is_float32_and_normalized():
    probs = next_token_distribution(random_logits(3).half(), 0.9, 7, 0.9)
    assert probs.dtype == torch.float32
    torch.testing.assert_close(probs.sum(-1), torch.ones(4))


def test_seeded_sampling_is_reproducible_and_private():
    probs = next_token_distribution(random_logits(4, batch=1, vocab=1000)[0], 1.5)
    a = sample(probs, make_generator(123), n=50)
    torch.manual_seed(0)                  # the global generator must not matter
    b = sample(probs, make_generator(123), n=50)
    torch.manual_seed(1)
    c = sample(probs, make_generator(124), n=50)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    assert make_generator(None) is None


def test_sampling_follows_the_distribution():
    probs = torch.tensor([0.5, 0.3, 0.2, 0.0])
    draws = sample(probs, make_generator(0), n=20000)
    freq = torch.bincount(draws, minlength=4).float() / draws.numel()
    torch.testing.assert_close(freq, probs, atol=0.02, rtol=0)
    assert freq[3] == 0


def test_entropy_in_bits():
    torch.testing.assert_close(entropy(torch.tensor([0.5, 0.5, 0.0])), torch.tensor(1.0))
    torch.testing.assert_close(entropy(torch.full((8,), 1 / 8)), torch.tensor(3.0))
    assert entropy(torch.tensor([1.0, 0.0])) == 0
