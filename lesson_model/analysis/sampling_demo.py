"""The numbers of the sampling lesson: the last vector -> logits -> probabilities, and what
temperature, top-k and top-p do to them. Every probability comes from
lesson_model.sampling.next_token_distribution, the same function generation uses.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..sampling import entropy, make_generator, next_token_distribution, sample, warp_logits

# The classroom example: four candidate words with logits 3, 2, 1, 0.
FOUR_CANDIDATES: tuple[tuple[str, float], ...] = (("good", 3.0), ("hot", 2.0), ("cold", 1.0), ("bad", 0.0))
FOUR_TEMPERATURES: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0, 5.0)


def final_vector_hook_names() -> list[str]:
    """Hook points final_vector needs."""
    return ["ln_final.hook_normalized"]


def final_vector(lm, run, pos: int = -1) -> torch.Tensor:
    """The vector the unembedding reads at one position: normalized * ln_final.weight, [d_model].

    final_vector(lm, run) @ lm.decoder.W_U equals the run's logits at that position.
    """
    normalized = run.cache["ln_final.hook_normalized"][0, pos]              # [d_model]
    return normalized.float() * lm.decoder.ln_final.weight.detach().float().cpu()


# --------------------------------------------------------------------------- temperature, worked example

@dataclass(frozen=True)
class TemperatureRow:
    temperature: float
    scaled: list[float] | None      # logits / T (None for T = 0, greedy)
    probs: list[float]              # softmax(logits / T); one-hot on the best for T = 0
    entropy_bits: float


def temperature_table(logits=tuple(v for _, v in FOUR_CANDIDATES),
                      temperatures=FOUR_TEMPERATURES) -> list[TemperatureRow]:
    """The distribution over a handful of logits at several temperatures, via next_token_distribution."""
    x = torch.tensor(list(logits), dtype=torch.float32)                    # [n]
    rows = []
    for T in temperatures:
        probs = next_token_distribution(x, temperature=float(T))              # [n]; T = 0 is one-hot (greedy)
        rows.append(TemperatureRow(float(T), None if T == 0 else (x / T).tolist(), probs.tolist(),
                                   float(entropy(probs)) + 0.0))   # + 0.0: no "-0.0" bits
    return rows


@dataclass(frozen=True)
class SweepRow:
    temperature: float
    top_prob: float           # probability of the most likely token
    entropy_bits: float
    tokens_for_90: int        # fewest tokens whose probabilities add up to at least 90%


def temperature_sweep(logits: torch.Tensor, temperatures=FOUR_TEMPERATURES) -> list[SweepRow]:
    """The same temperatures on a real logit vector [vocab]."""
    rows = []
    # Dividing by a temperature keeps the tokens' order: sort once, then every temperature's
    # probabilities come out already ranked (a 262,144-entry sort is the costly step).
    ranked_logits = logits.float().sort(descending=True).values                 # [vocab], best first
    for T in temperatures:
        probs = next_token_distribution(ranked_logits, temperature=float(T))  # [vocab], best first
        ranked = probs.double().cumsum(0)
        rows.append(SweepRow(float(T), float(probs.max()), max(0.0, float(entropy(probs))),
                             int((ranked < 0.9 - 1e-9).sum()) + 1))
    return rows


# --------------------------------------------------------------------------- one setting in detail

@dataclass(frozen=True)
class DistributionView:
    """The best `n` tokens of one next-token distribution, sorted by logit (best first)."""
    ids: torch.Tensor           # [n] token ids
    logits: torch.Tensor        # [n]
    p_model: torch.Tensor       # [n] softmax of the logits (temperature 1, nothing cut)
    p_temp: torch.Tensor        # [n] after temperature only
    p_before_top_p: torch.Tensor  # [n] after temperature and top-k: what top-p measures
    cumulative: torch.Tensor    # [n] running sum of p_before_top_p (the top-p curve)
    p_final: torch.Tensor       # [n] after temperature, top-k and top-p: what is sampled from
    kept: torch.Tensor          # [n] bool: still possible to draw
    n_kept: int                 # tokens of the whole vocabulary still possible
    kept_model_mass: float      # share of the *model's* probability (T=1) those tokens had
    entropy_model: float        # bits, the model's distribution
    entropy_final: float        # bits, after the settings
    vocab_size: int


def ranked_first(values: torch.Tensor, n: int) -> torch.Tensor:
    """``values.argsort(descending=True, stable=True)[:n]`` for a vector, without sorting all of
    it (a 262,144-entry sort is most of the work): the entries above the n-th largest value,
    then as many of those equal to it as fit, earliest first, as a stable sort orders ties."""
    n = min(n, values.shape[-1])
    if n <= 0:
        return torch.empty(0, dtype=torch.long)
    threshold = torch.topk(values, n).values[-1]
    above = (values > threshold).nonzero().flatten()                                     # index order
    ties = (values == threshold).nonzero().flatten()[: n - above.numel()]                # index order
    candidates = torch.cat([above, ties])
    return candidates[values[candidates].argsort(descending=True, stable=True)]


def distribution_view(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                      top_p: float | None = None, n: int = 20) -> DistributionView:
    """logits [vocab] -> the distributions of the lesson's figures for the n best tokens."""
    logits = logits.float()
    n = min(n, logits.shape[-1])
    order = ranked_first(logits, n)                                                       # [n]
    p_model = logits.softmax(-1)                                                          # [vocab]
    # Each step that changes nothing gives the previous step's vector (the same numbers:
    # next_token_distribution at temperature 1 is the plain softmax, and without a top-k the
    # top-k step is the temperature's); the final warp gives both p_final and what is kept.
    p_temp = p_model if temperature == 1.0 else next_token_distribution(logits, temperature)   # [vocab]
    p_topk = p_temp if not top_k or top_k <= 0 else next_token_distribution(logits, temperature, top_k)
    warped = warp_logits(logits, temperature, top_k, top_p)                               # [vocab]
    p_final = warped.softmax(-1)                                                          # [vocab]
    kept_all = torch.isfinite(warped)                                                     # [vocab]
    ranked_topk = p_topk[order]
    return DistributionView(
        ids=order, logits=logits[order], p_model=p_model[order], p_temp=p_temp[order],
        p_before_top_p=ranked_topk, cumulative=ranked_topk.double().cumsum(0).float(),
        p_final=p_final[order], kept=kept_all[order], n_kept=int(kept_all.sum()),
        kept_model_mass=float(p_model[kept_all].double().sum()),
        entropy_model=float(entropy(p_model)), entropy_final=float(entropy(p_final)),
        vocab_size=int(logits.shape[-1]))


def logit_histogram(logits: torch.Tensor, bins: int = 60) -> tuple[torch.Tensor, torch.Tensor]:
    """Histogram of all logits: (edges [bins+1], counts [bins]) — drawn server-side, not 49,152 points."""
    lo, hi = float(logits.min()), float(logits.max())
    edges = torch.linspace(lo, hi, bins + 1)
    counts = torch.histc(logits.float(), bins=bins, min=lo, max=hi).long()
    return edges, counts


# --------------------------------------------------------------------------- sampling many times

@dataclass(frozen=True)
class SampleHistogram:
    ids: list[int]               # tokens shown: the likeliest ones, then any other token that was drawn
    probs: list[float]           # their probabilities under the distribution
    counts: list[int]            # how often each was drawn
    other_prob: float            # probability of every token not listed
    other_count: int             # draws of those
    n: int
    distinct: int                # different tokens drawn
    total_variation: float       # 1/2 sum |count/n - p| over the whole vocabulary


def sample_histogram(probs: torch.Tensor, n: int, seed: int | None, n_show: int = 12) -> SampleHistogram:
    """Draw n tokens from probs [vocab] with a seeded private generator and count them."""
    draws = sample(probs, make_generator(seed), n=n)                                      # [n]
    counts = torch.bincount(draws, minlength=probs.shape[-1])                             # [vocab]
    likely = [int(i) for i in ranked_first(probs, n_show) if probs[i] > 0]
    drawn_rest = [int(i) for i in counts.nonzero().flatten() if int(i) not in likely]
    drawn_rest.sort(key=lambda i: -int(counts[i]))
    shown = likely + drawn_rest[: max(0, n_show - len(likely))]
    p_shown = float(probs[shown].double().sum()) if shown else 0.0
    return SampleHistogram(
        ids=shown, probs=[float(probs[i]) for i in shown], counts=[int(counts[i]) for i in shown],
        other_prob=max(0.0, 1.0 - p_shown), other_count=n - int(counts[shown].sum()), n=n,
        distinct=int((counts > 0).sum()),
        total_variation=0.5 * float((counts.double() / n - probs.double()).abs().sum()))


# --------------------------------------------------------------------------- facts for the Try-this lines

@dataclass(frozen=True)
class PromptFacts:
    """What the Try-this lines of the sampling lesson say about one prompt's next token."""
    best: int                  # the most likely token id
    p: float                   # its probability at temperature 1
    p_cold: float              # ... at temperature t_cold
    p_hot: float               # ... at temperature t_hot
    t_cold: float
    t_hot: float
    entropy: float             # bits, temperature 1
    top_p: float
    n_top_p: int               # tokens top-p keeps at temperature 1
    top_k: int
    cut_top_k: float           # probability (temperature 1) top-k cuts off
    top_ids: list[int]         # the n_top likeliest tokens, best first


def prompt_facts(logits: torch.Tensor, t_cold: float = 0.5, t_hot: float = 1.5, top_p: float = 0.9,
                 top_k: int = 40, n_top: int = 10) -> PromptFacts:
    """The numbers behind a Try-this line, from one next-token logit vector [vocab]."""
    logits = logits.float()
    probs = next_token_distribution(logits, 1.0)                                       # [vocab]
    best = int(probs.argmax())
    kept_k = torch.isfinite(warp_logits(logits, 1.0, top_k, None))                     # [vocab]
    kept_p = torch.isfinite(warp_logits(logits, 1.0, None, top_p))                     # [vocab]
    return PromptFacts(
        best=best, p=float(probs[best]),
        p_cold=float(next_token_distribution(logits, t_cold)[best]),
        p_hot=float(next_token_distribution(logits, t_hot)[best]), t_cold=t_cold, t_hot=t_hot,
        entropy=max(0.0, float(entropy(probs))), top_p=top_p, n_top_p=int(kept_p.sum()), top_k=top_k,
        cut_top_k=max(0.0, 1.0 - float(probs[kept_k].double().sum())),
        top_ids=[int(i) for i in probs.argsort(descending=True, stable=True)[:n_top]])
