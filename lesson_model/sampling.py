"""From logits to the next token: temperature, then top-k, then top-p, then sample.

The semantics are exactly those of transformers' TemperatureLogitsWarper,
TopKLogitsWarper and TopPLogitsWarper (applied in that order, each keeping at least
one token); temperature 0 means greedy decoding.
"""

from __future__ import annotations

import torch


def warp_logits(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                top_p: float | None = None) -> torch.Tensor:
    """logits [..., vocab] -> warped logits, -inf for every entry that can no longer be chosen."""
    if temperature < 0:
        raise ValueError("temperature must be >= 0")
    if top_p is not None and not 0.0 <= top_p <= 1.0:
        raise ValueError("top_p must be between 0 and 1")
    scores = logits.float()
    if temperature == 0:   # greedy: only the argmax survives
        return torch.full_like(scores, float("-inf")).scatter(-1, scores.argmax(-1, keepdim=True), 0.0)
    scores = scores / temperature
    if top_k is not None and top_k > 0:
        k = min(top_k, scores.shape[-1])
        kth_best = torch.topk(scores, k).values[..., -1:]                 # [..., 1]
        scores = scores.masked_fill(scores < kth_best, float("-inf"))     # ties with the k-th are kept
    if top_p is not None and top_p < 1.0:
        ascending, order = torch.sort(scores, descending=False)
        cumulative = ascending.softmax(-1).cumsum(-1)                     # mass of this token and all below it
        drop_sorted = cumulative <= (1 - top_p)
        drop_sorted[..., -1:] = False                                     # always keep the best token
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        scores = scores.masked_fill(drop, float("-inf"))
    return scores


def next_token_distribution(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                            top_p: float | None = None) -> torch.Tensor:
    """The full probability vector [..., vocab] after temperature -> top-k -> top-p."""
    return warp_logits(logits, temperature, top_k, top_p).softmax(-1)


def make_generator(seed: int | None, device="cpu") -> torch.Generator | None:
    """A private random generator (never the global one, so sessions don't disturb each other)."""
    if seed is None:
        return None
    return torch.Generator(device=device).manual_seed(int(seed))


def sample(probs: torch.Tensor, generator: torch.Generator | None = None, n: int = 1) -> torch.Tensor:
    """Draw n token ids from a probability vector [vocab] (with replacement)."""
    return torch.multinomial(probs.float(), n, replacement=True, generator=generator)


def entropy(probs: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in bits of probability vectors [..., vocab]."""
    p = probs.float()
    return -(p * torch.log2(p.clamp_min(1e-30))).where(p > 0, torch.zeros_like(p)).sum(-1)
