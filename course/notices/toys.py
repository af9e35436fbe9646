"""What to notice beside the two classroom analogies: Q, K, V with heights and weights (the
attention lesson), and the temperature table's prompt on the real model (the sampling lesson).

Returns [(catalog key, fields)] under the page's catalog ("attention." / "sampling.").
"""

from __future__ import annotations

from collections.abc import Sequence

Notice = tuple[str, dict]


def height_notice(*, query: float, heights: Sequence[float], weights: Sequence[float],
                  attention: Sequence[float], estimate: float, names: Sequence[str]) -> list[Notice]:
    """Who gets the most weight, and where the estimate lands between the values."""
    best = max(range(len(attention)), key=lambda i: attention[i])
    out = [("toy.notice_best", dict(name=names[best], height=f"{heights[best]:.2f}", share=f"{attention[best]:.0%}",
                                    query=f"{query:.2f}"))]
    lo, hi = min(weights), max(weights)
    out.append(("toy.notice_estimate", dict(estimate=f"{estimate:.1f}", lo=f"{lo:g}", hi=f"{hi:g}")))
    return out


def real_step_notice(*, query: str, best: str, weight: float, n_keys: int) -> Notice:
    """The real head's step on the page, said in the analogy's words."""
    key = "toy.real_one" if n_keys == 1 else "toy.real"
    return key, dict(query=query, best=best, share=f"{weight:.0%}", n=n_keys)


def weather_notices(*, prompt: str, words: Sequence[str], probs_t1: Sequence[float], merged: Sequence[bool],
                    pieces: Sequence[int], top: str, p_top: float, toy_best: str, p_toy: float,
                    top_is_word: bool) -> list[Notice]:
    """The model's numbers against the toy's at T = 1: which of the four words it likes most,
    how much the four share, its own favourite; a word the tokenizer joins with the prompt's
    end, and one the model writes in several tokens, are said."""
    out: list[Notice] = []
    best = max(range(len(words)), key=lambda i: probs_t1[i])
    out.append(("weather.words", dict(prompt=prompt, word=words[best], p=f"{probs_t1[best]:.0%}",
                                      total=f"{sum(probs_t1):.0%}", toy=toy_best, p_toy=f"{p_toy:.0%}")))
    out.append(("weather.top_word" if top_is_word else "weather.top_other", dict(token=top, p=f"{p_top:.0%}")))
    for w, m, n in zip(words, merged, pieces):
        if m:
            out.append(("weather.merged", dict(word=w, prompt=prompt)))
        elif n > 1:
            out.append(("weather.pieces", dict(word=w, n=n)))
    return out
