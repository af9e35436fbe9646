"""What to notice on the position lesson, from the model's RoPE and this run's query and key.

Each function returns [(catalog key under "position.", fields)]; the page translates them
(Lesson.notices). Token labels and a base's translated name come in already formatted.
"""

from __future__ import annotations

from collections.abc import Sequence

from course.text import num

Notice = tuple[str, dict]


def ladder_notices(*, bases: Sequence[tuple[str, dict]], d: int) -> list[Notice]:
    """One sentence per RoPE base (``bases``: its kind, "sliding" or "global", and its fields):
    the plain one on a model with a single base."""
    two = len(bases) > 1
    return [(f"notice.ladder_{kind}" if two else "notice.ladder", dict(d=d, **fields)) for kind, fields in bases]


def turn_notice(*, pair: int, layer: int, head: int, theta: float, turn_error: float, norm_error: float,
                kind: str) -> Notice:
    """The real query's turn: RoPE's rotation checked against the formula, and lengths kept."""
    return "notice.turn", dict(pair=pair, layer=layer, head=head, theta=f"{theta:.4g}", err=f"{turn_error:.1e}",
                               norm_err=f"{norm_error:.1e}", kind=kind)


def relative_notice(*, q: str, qpos: int, k: str, kpos: int, score: float, spread: float, far: int,
                    curve: Sequence[float], maxd: int) -> Notice:
    """The score of query ``q`` and key ``k`` depends on their distance only (``spread``: the
    largest change of a score moved along the prompt); ``curve``: the score at distances 0..maxd."""
    return ("notice.relative_same" if qpos == kpos else "notice.relative",
            dict(q=q, qpos=qpos, k=k, kpos=kpos, score=num(score, ".3f"), dist=qpos - kpos, spread=f"{spread:.1e}",
                 far=f"{far:,}", d1=num(curve[1], ".3f"), d0=num(curve[0], ".3f"), dmax=num(curve[-1], ".3f"),
                 maxd=maxd))


def peak_notice(*, curve: Sequence[float], layer: int, head: int) -> Notice:
    """The distance where the score curve peaks, and where it is lowest (the first of a tie)."""
    best = max(range(len(curve)), key=lambda i: curve[i])
    worst = min(range(len(curve)), key=lambda i: curve[i])
    return "notice.peak", dict(best=best, score=num(curve[best], ".3f"), layer=layer, head=head,
                               low=num(curve[worst], ".3f"), worst=worst)


def params_notice(*, attn_params: int, layers: int) -> Notice:
    return "notice.params", dict(attn=f"{attn_params:,}", layers=layers)
