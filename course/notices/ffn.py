"""What to notice on the FFN lesson, from this run's numbers.

Each function returns a line of "What to notice": one (catalog key under "ffn.", fields) pair,
or a list of pairs whose sentences run together (join_sentences). Token labels come in already
formatted (Markdown code spans); ``act`` holds the activation's translated names (act, glu, fn)
that many sentences use; ``lang`` is the session's language (how a large count is written).
"""

from __future__ import annotations

from course.i18n import big_number
from course.text import num

Notice = tuple[str, dict]
SQUEEZED = 1e-4     # smallest / largest singular value below this (condition number over 10,000): a direction kept, but squeezed


def negligible(x: float) -> bool:
    """A logit change that prints as 0.00."""
    return num(abs(x), ".2f") == num(0.0, ".2f")


def gap(value: float) -> str | Notice:
    """A gap of the collapse check as printed: "3.2%", or (tiny: float rounding) the "rounding"
    sentence with its value."""
    return f"{value:.1%}" if value >= 5e-4 else ("collapse.rounding", dict(v=f"{value:.0e}"))


def top_notice(*, layer: int, token: str, neuron: int, value: float, big: int, d_ff: int) -> Notice:
    """The most active neuron at the token, and how many of the d_ff are large (> 10% of the largest)."""
    return ("notice.top" if big < d_ff // 2 else "notice.top_dense",
            dict(layer=layer, token=token, n=neuron, v=f"{value:+.2f}", big=big, total=f"{d_ff:,}"))


def gate_notices(*, layer: int, negative_share: float, activation_min: float, largest_factor: float,
                 act: dict) -> list[Notice]:
    """How many gate values are negative (squashed towards 0, never below ``activation_min``), and
    how much a positive gate multiplies up (``largest_factor`` > 1: more than the input)."""
    out = [("notice.gate", dict(layer=layer, pct=f"{negative_share:.0%}",
                                low=f"{activation_min:.2f}".replace("-", "−"), **act))]
    if largest_factor > 1:
        out.append(("notice.gate_positive", dict(factor=f"{largest_factor:.1f}", **act)))
    return out


def collapse_notices(*, rank: int, d_model: int, quadratic: bool, gap_bilinear: float, gap_real: float,
                     doubling: float, same: bool, a: str, b: str, act: dict,
                     singular: tuple[float, float] | None = None) -> list[Notice]:
    """Without the non-linearity the layer collapses to one matrix (of ``rank``; ``singular``: its
    smallest and largest singular values, which say when a full rank hides a direction squeezed
    to almost nothing); the check on two tokens ``a`` and ``b`` (``same``: a one-token prompt, the
    token with itself) when the gated map is quadratic."""
    out: list[Notice] = [("notice.collapse", dict(rank=rank, d=d_model))]
    if singular is not None and rank == d_model and singular[0] < SQUEEZED * singular[1]:
        out.append(("notice.collapse_squeezed", dict(smallest=f"{singular[0]:.2g}", largest=f"{singular[1]:.3g}",
                                                     ratio=f"{singular[1] / singular[0]:,.0f}")))
    if quadratic and gap_bilinear >= 0.01:
        pair = ("notice.pair_same" if same else "notice.pair", dict(a=a, b=b))
        out.append(("notice.collapse_gated", dict(pair=pair, gap=gap(gap_bilinear), double=f"{doubling:.2f}",
                                                  real=gap(gap_real), **act)))
    elif quadratic:
        out.append(("notice.collapse_gated_small", dict(gap=gap(gap_bilinear), double=f"{doubling:.2f}", **act)))
    return out


def neuron_notices(*, neuron: int, token: str, promoted: tuple[str, float] | None, push: float, total: float,
                   pusher: int, scale: float, k: int, pred: str, layer: int,
                   scale_ratio: float | None) -> list[Notice | list[Notice]]:
    """The chosen neuron's strongest pushed token (``promoted``: its label and logit change, None
    if none), then the neuron of the top k that pushes the prediction ``pred`` most (``push``;
    ``total`` all the layer's neurons together). When that push prints as 0.00 the final norm's
    divisor ``scale`` explains why (``scale_ratio``: it against the other positions' median,
    None on a one-token prompt)."""
    tiny = negligible(push)
    out: list[Notice | list[Notice]] = []
    if promoted and not negligible(promoted[1]):
        out.append(("notice.vocab", dict(n=neuron, token=token, up=promoted[0], dv=f"{promoted[1]:+.2f}")))
    elif not tiny:
        out.append(("notice.vocab_tiny", dict(n=neuron, token=token)))
    if not tiny:
        out.append(("notice.best" if push > 0 else "notice.best_none",
                    dict(k=k, token=token, pred=pred, n=pusher, dv=f"{push:+.2f}", layer=layer,
                         all=num(total, "+.2f"))))
    else:
        line = [("notice.best_tiny", dict(token=token, pred=pred, layer=layer, all=num(total, "+.2f"),
                                          s=f"{scale:,.1f}"))]
        if scale_ratio is not None and scale_ratio >= 3:
            line.append(("notice.best_tiny_ratio", dict(ratio=f"{scale_ratio:.0f}")))
        out.append(line)
    return out


def params_notice(*, mlp: int, total: int, mlp_layer: int, attn_layer: int, gpt3_mlp_layer: int,
                  gpt3_attn_layer: int, lang: str | None) -> Notice:
    """The MLPs' share of the model's parameters, and MLP against attention per layer here and in GPT-3."""
    return ("notice.params", dict(share=f"{mlp / total:.0%}", mlp=big_number(mlp, lang=lang),
                                  total=big_number(total, lang=lang), ratio=f"{mlp_layer / attn_layer:.1f}",
                                  gpt3=f"{gpt3_mlp_layer / gpt3_attn_layer:.1f}"))


def massive_notice(*, n_pos: int, layer: int, first: int, first_max: float, median: float, token: str, hot: int,
                   hot_value: float) -> Notice | None:
    """A massive activation: position ``first``'s largest |value| (``first_max``, in neuron
    ``hot``) over 20 times the positions' median; None when there is none (or under 3 tokens)."""
    if n_pos > 2 and first_max > 20 * median:
        return ("notice.massive" if first == 0 else "notice.massive_other",
                dict(layer=layer, token=token, n=hot, v=f"{hot_value:+,.0f}", median=f"{median:.1f}"))
    return None
