"""What to notice on the heads lesson, from this run's numbers.

Each function returns lines of [(catalog key under "heads.", fields)]: a line is one pair, or a
list of pairs whose sentences run together (join_sentences). ``label(i)`` is the Markdown label of
token i and ``head_name(layer, head)`` a head's name: the page passes its own, the tests pass plain
ones. ``lang`` is the session's language (how a list of heads is joined).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from course.i18n import join_list

if TYPE_CHECKING:           # not imported at run time: these functions need no torch
    from lesson_model.analysis.heads import GroupContrast

Notice = tuple[str, dict]
Line = Notice | list[Notice]
Label = Callable[[int], str]
HeadName = Callable[[int, int], str]
Leaders = Sequence[tuple[int, int, float]]      # H.leaders: the best head(s) of a measure, ties included

DEPTH_GAP = 0.10        # early vs late layers: "depth matters" only with at least this gap
ALIKE = 0.05            # two heads' weights never further apart than this: "almost alike"
TIES_LISTED = 3


def who(leaders: Leaders, head_name: HeadName, lang: str | None) -> Notice:
    """The head(s) with the best value: "head 16.0", or the tied heads when several print
    the same value (a two-token prompt, where dozens of heads give 100% to the first token)."""
    names = [head_name(layer, head) for layer, head, _ in leaders]
    if len(names) == 1:
        return "who.one", dict(head=names[0])
    if len(names) <= TIES_LISTED:
        return "who.tied", dict(heads=join_list(names, lang))
    return "who.tied_many", dict(n=len(names), heads=join_list(names[:TIES_LISTED], lang))


def one_token_notice(*, label: Label) -> Notice:
    """A one-token prompt: every head gives its only token 100%, no measure has a value."""
    return "notice.one_token", dict(token=label(0))


def measure_notices(*, n: int, previous: Leaders, sink: Leaders, n_sinks: int, total_heads: int,
                    early: float, late: float, third: int, n_layers: int, flat: Leaders, sharp: Leaders,
                    induction: Leaders | None, head_name: HeadName, label: Label, lang: str | None) -> list[Line]:
    """What the layer x head measures show on a prompt of ``n`` >= 2 tokens: the previous-token,
    first-token (``n_sinks`` heads above 50%; ``early``/``late`` its mean in the first and last
    ``third`` of the layers) and entropy leaders, and the induction leaders (None: no repeated
    token)."""
    out: list[Line] = [("notice.previous", dict(who=who(previous, head_name, lang), pct=f"{previous[0][2]:.0%}"))]
    sink_count = ("notice.sink_none" if n_sinks == 0 else
                  "notice.sink_most" if n_sinks > total_heads / 2 else "notice.sink_some")
    out.append([("notice.sink", dict(who=who(sink, head_name, lang), first=label(0), pct=f"{sink[0][2]:.0%}")),
                (sink_count, dict(count=n_sinks, total=total_heads))])
    depth = ("notice.depth_up" if late - early >= DEPTH_GAP else
             "notice.depth_down" if early - late >= DEPTH_GAP else "notice.depth_flat")
    out.append((depth, dict(a=f"{early:.0%}", b=f"{late:.0%}", k=third - 1, m=n_layers - third, last=n_layers - 1)))
    if n == 2:
        out.append(("notice.two_tokens", {}))
    out.append(("notice.entropy", dict(flat=who(flat, head_name, lang), e1=f"{flat[0][2]:.2f}",
                                       sharp=who(sharp, head_name, lang), e2=f"{sharp[0][2]:.2f}")))
    if induction is not None:
        out.append(("notice.induction", dict(who=who(induction, head_name, lang), pct=f"{induction[0][2]:.0%}")))
    else:
        out.append(("notice.no_induction", {}))
    return out


def group_notice(*, contrast: "GroupContrast", layer: int, members: Sequence[int], query: int,
                 head_name: HeadName, label: Label) -> Notice:
    """Two heads of the open group at the query: what each attends to most, how alike they are."""
    case = contrast.kind(ALIKE)
    return (f"notice.group_{case}",
            dict(a=head_name(layer, members[0]), b=head_name(layer, members[1]), query=label(query),
                 ta=label(contrast.top_a), tb=label(contrast.top_b), pa=f"{contrast.weight_a:.0%}",
                 pb=f"{contrast.weight_b:.0%}",
                 gap=f"{contrast.max_gap:.1%}" if case == "alike" else f"{contrast.max_gap:.0%}"))


def kv_notice(*, name: str, per_token: str, context: int, total: str, llama_ratio: float) -> Notice:
    """The calculator's answer: bytes per token and for the context (printed: "90 KiB"), and how
    many times the keys and values of Llama 2 70B would be without GQA."""
    return "notice.kv", dict(name=name, per=per_token, n=f"{context:,}", total=total, ratio=f"{llama_ratio:.0f}")


def window_notice(*, context: int, window: int, fields: dict) -> Notice:
    """A model with sliding-window layers: whether the context fits the window (``fields``: the
    page's window sentence fields)."""
    return ("notice.window_fits" if context <= window else "notice.window", fields)
