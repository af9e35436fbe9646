"""What to notice on the residual lesson, from this run's numbers.

Each function returns (catalog key under "residual.", fields), or None where it has nothing to
say. Token labels come in already formatted (Markdown code spans); ``part_label(kind, layer)``
names a part of the stream's sum ("attention 5", "MLP 29"), the page passing its translated one;
``lang`` is the session's language (how a list and a bracketed remark are written).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from course.i18n import join_list, with_paren
from course.text import num

Notice = tuple[str, dict]
PartLabel = Callable[[str, int], str]


def sum_notice(*, token: str, n_parts: int, max_error: float, embed_norm: float, final_norm: float, part: str,
               along: float) -> Notice:
    """The stream at the token is the sum of its parts (checked to ``max_error``); the part that
    adds most along the final direction."""
    return ("notice.sum", dict(token=token, n=n_parts, err=f"{max_error:.1e}", embed=f"{embed_norm:.1f}",
                               final=f"{final_norm:,.1f}", part=part, along=f"{along:+,.1f}"))


def massive_notice(*, token: str, ratio: float) -> Notice:
    """The largest massive activation: its token and how many times the typical size it is."""
    return "notice.massive", dict(token=token, ratio=f"{ratio:,.0f}")


def lens_notice(*, ranks: Sequence[int], lens_layers: Sequence[int], depths: Sequence[str], n_layers: int,
                token: str, pred: str, p: float) -> Notice | None:
    """Where the logit lens first puts the final prediction ``pred`` on top and keeps it there:
    ``ranks`` its rank at each depth of the lens (``lens_layers``: -1 the embedding, L after
    block L; ``depths`` their names), ``p`` its final probability. None if it never stays on top."""
    first_top = next((i for i in range(len(ranks)) if all(r == 0 for r in ranks[i:])), None)
    if first_top is None:
        return None
    fields = dict(token=token, pred=pred, p=f"{p:.0%}")
    if lens_layers[first_top] < 0:
        return "notice.lens_embed", fields
    if lens_layers[first_top] == n_layers - 1:
        return "notice.lens_last", fields
    return "notice.lens", dict(token=token, pred=pred, depth=depths[first_top], p=f"{p:.0%}", n=n_layers,
                               k=min(n_layers, n_layers - lens_layers[first_top]))


def echo_notice(*, echo: int, n: int) -> Notice:
    """How many of the lens grid's ``n`` columns read back their own token at the embedding row."""
    return ("notice.echo_none" if not echo else "notice.echo_one" if n == 1
            else "notice.echo_all" if echo == n else "notice.echo_some", dict(k=echo, n=n))


def dla_parts(*, layer_parts: Sequence[float], order: Sequence[int], n_layers: int, part_label: PartLabel,
              lang: str | None) -> Notice:
    """The parts of ``layer_parts`` (every layer's attention, then every layer's MLP) at ``order``
    (largest |value| first) as a nested notice: those that push the logit up apart from those
    that push it down, so a part working against the answer is never listed as writing it."""
    def listed(indices) -> str:
        return join_list((with_paren(part_label("attn" if i < n_layers else "mlp", i % n_layers),
                                     num(layer_parts[i], "+.2f"), lang) for i in indices), lang)
    up = [i for i in order if layer_parts[i] >= 0]
    down = [i for i in order if layer_parts[i] < 0]
    if not down:
        return "dla_parts.up", dict(up=listed(up))
    if not up:
        return "dla_parts.down", dict(down=listed(down))
    return "dla_parts.mixed", dict(up=listed(up), down=listed(down))


def dla_notice(*, what: str, layer_parts: Sequence[float], order: Sequence[int], n_layers: int, total: float,
               mlp: float, attn: float, part_label: PartLabel, lang: str | None) -> Notice:
    """Direct logit attribution of ``what``: the three parts of ``layer_parts`` (every layer's
    attention, then every layer's MLP) at ``order`` (largest |value| first; dla_parts), and the sums."""
    parts = dla_parts(layer_parts=layer_parts, order=order, n_layers=n_layers, part_label=part_label, lang=lang)
    return ("notice.dla", dict(what=what, parts=parts, total=num(total, ".2f"), mlp=num(mlp, "+.2f"),
                               attn=num(attn, "+.2f")))


def head_notice(*, layer: int, heads: Sequence[float], attn: float) -> Notice:
    """The head of ``layer`` whose write pushes most (``heads``: each head's share, summing to ``attn``)."""
    best = max(range(len(heads)), key=lambda h: abs(heads[h]))
    return "notice.head", dict(layer=layer, head=best, v=num(heads[best], "+.2f"), n=len(heads), attn=num(attn, "+.2f"))


def _extreme(values: Sequence[Sequence[float]], largest: bool) -> tuple[int, int]:
    """(layer, sublayer) of the largest (smallest) value of a [n_layers, 2] table, the first one on a tie."""
    cells = [(i, j) for i in range(len(values)) for j in range(2)]
    pick = max if largest else min
    return pick(cells, key=lambda c: values[c[0]][c[1]])


def post_notice(*, post_norms: bool, computed: Sequence[Sequence[float]], written: Sequence[Sequence[float]],
                token: str, part_label: PartLabel) -> Notice:
    """What each sub-layer computes against what it adds to the stream ([n_layers, 2]: attention,
    MLP): with post-norms (Gemma) the largest scaling up, without (SmolLM2) the range of writes."""
    def sublayer(cell: tuple[int, int]) -> str:
        return part_label(("attn", "mlp")[cell[1]], cell[0])

    w_lo, w_hi = _extreme(written, False), _extreme(written, True)
    if post_norms:
        gain = [[w / max(c, 1e-12) for w, c in zip(w_row, c_row)] for w_row, c_row in zip(written, computed)]
        g = _extreme(gain, True)
        c_lo, c_hi = _extreme(computed, False), _extreme(computed, True)
        return ("post.notice", dict(token=token, part=sublayer(g), computed=f"{computed[g[0]][g[1]]:,.1f}",
                                    written=f"{written[g[0]][g[1]]:,.0f}", c_lo=f"{computed[c_lo[0]][c_lo[1]]:,.1f}",
                                    c_hi=f"{computed[c_hi[0]][c_hi[1]]:,.0f}", w_lo=f"{written[w_lo[0]][w_lo[1]]:,.0f}",
                                    w_hi=f"{written[w_hi[0]][w_hi[1]]:,.0f}"))
    return ("post.notice_none", dict(token=token, lo=f"{written[w_lo[0]][w_lo[1]]:,.1f}", lo_part=sublayer(w_lo),
                                     hi=f"{written[w_hi[0]][w_hi[1]]:,.0f}", hi_part=sublayer(w_hi)))


def grad_notice(*, grad_norms: Sequence[float], n_layers: int, skip_wins: int) -> Notice:
    """Whether the gradient reaching block 1 is as large as at the last block (``skip_wins``:
    blocks where the skip path carries more than either branch)."""
    return ("notice.grad" if grad_norms[1] >= grad_norms[-2] else "notice.grad_shrinks",
            dict(first=f"{grad_norms[1]:.2f}", last=f"{grad_norms[-2]:.2f}", n=n_layers, skip=skip_wins))
