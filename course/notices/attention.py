"""What to notice on the attention lesson, from this run's numbers.

Each function returns [(catalog key under "attention.", fields)]; the page translates them
(Lesson.notices). ``label(i)`` is the Markdown label of token i and ``head_name(layer, head)``
the translated name of a head: the page passes its own, the tests pass plain ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from course.text import num

Notice = tuple[str, dict]
Label = Callable[[int], str]


def top_notices(*, query: int, n: int, weights: Sequence[float], raw: Sequence[float], scale: float,
                head: str, label: Label) -> list[Notice]:
    """The head's strongest link from the query (``weights`` and the unscaled scores ``raw``
    of its row), the first token's share, and the mask."""
    top_key = max(range(query + 1), key=lambda j: weights[j])
    raw_top = raw[top_key]
    fields = dict(head=head, query=label(query), target=label(top_key), pct=f"{weights[top_key]:.0%}",
                  raw=num(raw_top), scaled=num(raw_top / scale), s=f"{scale:g}")
    # The first token can see only itself: its 100% says nothing about the scores.
    out = [("notice.top_first" if query == 0 else "notice.top", fields)]
    if query > 0 and top_key == 0:
        out.append(("notice.sink", dict(target=label(0))))
    elif query > 0 and weights[0] >= 0.2:
        out.append(("notice.first", dict(target=label(0), pct=f"{weights[0]:.0%}")))
    if n == 1:
        out.append(("notice.only", {}))
    elif query < n - 1:
        out.append(("notice.mask", dict(n=n - 1 - query)))
    else:
        out.append(("notice.last", dict(n=n)))
    return out


def scale_notice(*, query: int, max_scaled: float, max_unscaled: float, entropy_scaled: float,
                 entropy_unscaled: float) -> Notice:
    """What dropping the 1/sqrt(d_head) scale does to this query's weights."""
    fields = dict(top1=f"{max_scaled:.0%}", top2=f"{max_unscaled:.0%}", e1=num(entropy_scaled),
                  e2=num(entropy_unscaled))
    if query == 0:
        return "notice.scale_one", {}
    if max_scaled >= 0.95:
        return "notice.scale_sure", fields
    if max_unscaled - max_scaled < 0.05 and entropy_scaled - entropy_unscaled < 0.1:
        return "notice.scale_small", fields          # the scores are close together
    return "notice.scale", fields


def search_notice(*, query: int, key: int, best_head: str, best_weight: float, tied: int,
                  total_heads: int, label: Label) -> Notice:
    """The head search's answer: one head, a tie, or every head (the first token)."""
    fields = dict(head=best_head, query=label(query), target=label(key), pct=f"{best_weight:.0%}",
                  total=total_heads, tied=tied)
    if query == 0:                      # every head gives the first token 100% of its own attention
        return "notice.search_first", fields
    if tied == total_heads:
        return "notice.search_all", fields
    if tied > 1:
        return "notice.search_tie", fields
    return "notice.search", fields


def cost_notice(*, n: int, pairs: int, pairs_doubled: int, attention_ratio: float, linear_ratio: float,
                crossover: int) -> Notice:
    """How the work grows when the prompt doubles."""
    return ("notice.cost_one" if n == 1 else "notice.cost",
            dict(n=n, pairs=f"{pairs:,}", n2=2 * n, pairs2=f"{pairs_doubled:,}", ratio=f"{attention_ratio:.2f}",
                 lin=f"{linear_ratio:.0f}", cross=f"{crossover:,}"))


def window_notices(*, source: str, n: int, window: int, s_layer: int, g_layer: int, s_beyond_max: float,
                   g_beyond_min: float, g_beyond_max: float, first: str, g_first: float, outside_zero: bool,
                   outside_count: int, per_token: int, linear_per_token: int) -> list[Notice]:
    """The sliding-window demo (``source``: "default" prompt or the learner's "mine"), then its cost."""
    checked = ("notice.window_zero" if outside_zero else "notice.window_nonzero", dict(count=f"{outside_count:,}"))
    return [
        (f"notice.window_{source}", dict(
            n=f"{n:,}", w=f"{window:,}", s=s_layer, g=g_layer, s_max=f"{s_beyond_max:.0%}",
            g_lo=f"{g_beyond_min:.0%}", g_hi=f"{g_beyond_max:.0%}", first=first, g_first=f"{g_first:.0%}",
            checked=checked)),
        ("notice.window_cost" if per_token < linear_per_token else "notice.window_cost_passes",
         dict(w=f"{window:,}", att=f"{per_token:,}", lin=f"{linear_per_token:,}")),
    ]
