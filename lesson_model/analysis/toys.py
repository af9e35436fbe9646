"""Two classroom analogies, computed: the ones Chinese teaching articles use, tied to the model.

    height_weight(1.78)                  # Q, K, V with heights and weights: scores, softmax, estimate
    word_probabilities(lm, "今天天氣很", ["好", "熱", "冷", "壞"], (0.5, 1.0, 2.0))

height_weight is attention with one number per vector: the query is 小明's height, each key a
classmate's height, each value that classmate's weight. The score says how alike two heights
are (the closer, the higher: minus the squared difference in centimetres over 2·5²), softmax
turns the scores into weights that add up to 1, and the output is the weighted mean of the
values: an estimate of 小明's weight. The model's attention does the same with vectors (the
score is q·k/√d_head), with learned Q, K and V.

word_probabilities asks the real model the temperature table's question: after the prompt,
how likely is each of a few words, at a few temperatures. A word of several tokens has the
probability of its tokens one after another (the chain rule), each from a run of the model on
the prompt and the pieces before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..sampling import next_token_distribution

# A class: (height in metres, weight in kilograms) of each classmate. Made-up toy data.
CLASSMATES: tuple[tuple[float, float], ...] = ((1.60, 50.0), (1.68, 58.0), (1.75, 66.0), (1.80, 72.0),
                                               (1.92, 88.0))
QUERY_HEIGHT = 1.78
WIDTH_CM = 5.0      # two heights this far apart (cm) score -0.5 below two equal heights


@dataclass(frozen=True)
class HeightWeight:
    query: float                 # Q: the height whose weight we estimate (m)
    heights: list[float]         # K (m)
    weights: list[float]         # V (kg)
    diffs_cm: list[float]        # query - key, in cm
    scores: list[float]          # -(diff_cm)² / (2·WIDTH_CM²)
    attention: list[float]       # softmax(scores): adds up to 1
    contributions: list[float]   # attention × value (kg)
    estimate: float              # their sum: the weighted mean of the values (kg)


def height_weight(query: float = QUERY_HEIGHT, classmates: Sequence[tuple[float, float]] = CLASSMATES,
                  width_cm: float = WIDTH_CM) -> HeightWeight:
    """One attention step with numbers: Q = query height, K = heights, V = weights."""
    heights = [h for h, _ in classmates]
    weights = [w for _, w in classmates]
    diffs = [(query - h) * 100 for h in heights]
    scores = torch.tensor([-(d * d) / (2 * width_cm * width_cm) for d in diffs], dtype=torch.float64)
    attention = scores.softmax(-1)
    contributions = attention * torch.tensor(weights, dtype=torch.float64)
    return HeightWeight(query, heights, weights, diffs, scores.tolist(), attention.tolist(), contributions.tolist(),
                        float(contributions.sum()))


# --------------------------------------------------------------------------- the temperature table, on the model

def continuation(prompt: str, word: str) -> str:
    """The word as it follows the prompt: after a Latin letter or digit, with a space."""
    last = prompt[-1:]
    return (" " + word) if last.isascii() and last.isalnum() else word


@dataclass(frozen=True)
class WordProbability:
    word: str
    pieces: list[int]                   # its own tokens, as the model would write it after the prompt
    merged: bool                        # the tokenizer joins it with the prompt's end (很 + 好 -> 很好)
    probs: list[float]                  # probability at each temperature


@dataclass(frozen=True)
class WeatherTable:
    prompt_ids: list[int]
    temperatures: list[float]
    words: list[WordProbability]
    top: list[tuple[int, list[float]]]  # the model's own first few next tokens (id, probability at each temperature)


def word_pieces(lm, prompt: str, word: str) -> tuple[list[int], bool]:
    """The word's own tokens (read alone, as it follows the prompt: " hot" after English), and
    whether the tokenizer would cut prompt + word differently (很好 is one token in Gemma's
    vocabulary: the model can still write 很 then 好, and that is the probability we give)."""
    pieces = [tok.id for tok in lm.tokenize(continuation(prompt, word)) if not tok.added]
    before, after = lm.encode(prompt), lm.encode(prompt + continuation(prompt, word))
    return pieces, after != before + pieces


def word_probabilities(lm, prompt: str, words: Sequence[str], temperatures: Sequence[float], top: int = 3,
                       run=None) -> WeatherTable:
    """Each word's probability after ``prompt`` at each temperature (product over its tokens),
    and the model's own ``top`` next tokens at temperature 1 with their probabilities at each.
    ``run(ids) -> logits [vocab]`` of the next token (default: a plain forward pass)."""
    if run is None:
        def run(ids):
            return lm.run(ids, [], last_only=True).logits[0, -1]
    prompt_ids = lm.encode(prompt)
    first = run(prompt_ids).float()
    out = []
    for word in words:
        pieces, merged = word_pieces(lm, prompt, word)
        logits = [first] + [run(prompt_ids + pieces[:i]).float() for i in range(1, len(pieces))]
        probs = []
        for temp in temperatures:
            p = 1.0
            for step, piece in zip(logits, pieces):
                p *= float(next_token_distribution(step, temperature=float(temp))[piece])
            probs.append(p)
        out.append(WordProbability(word, pieces, merged, probs))
    dists = [next_token_distribution(first, temperature=float(temp)) for temp in temperatures]
    best = torch.topk(next_token_distribution(first, temperature=1.0), top).indices.tolist()
    return WeatherTable(prompt_ids, [float(t) for t in temperatures], out,
                        [(int(i), [float(d[i]) for d in dists]) for i in best])
