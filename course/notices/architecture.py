"""What to notice on the architecture lesson, from the two models' cards and tensors, the
calculator, the loss of one forward pass and the post-training comparison.

Each function returns [(catalog key under "architecture.", fields)]. ``big`` writes a large
count in words in the page's language (course.i18n.big_number); ``label(i)`` is the Markdown
label of the prompt's token i.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from course.text import code_span

Notice = tuple[str, dict]
Big = Callable[[float], str]


class Side(NamedTuple):
    """One bundled model in the embedding comparison: its name, vocabulary, width, and the
    parameters of its embedding and of the whole model (counted from its tensors)."""
    name: str
    vocab: int
    d_model: int
    embedding: int
    total: int


def embedding_notice(a: Side, b: Side, *, big: Big) -> Notice:
    """The share of each model's parameters in its embedding table."""
    fields = {}
    for prefix, side in (("a", a), ("b", b)):
        fields |= {prefix: side.name, f"{prefix}_share": f"{side.embedding / side.total:.0%}",
                   f"{prefix}_v": f"{side.vocab:,}", f"{prefix}_d": side.d_model,
                   f"{prefix}_n": big(side.embedding), f"{prefix}_total": big(side.total)}
    return "notice.embedding", fields


def differ_notice(*, n: int, total: int) -> Notice:
    """How many of the card's rows differ: the same machine either way."""
    return "notice.differ", dict(n=n, total=total)


def moe_notices(*, name: str, n_experts: int, experts_per_token: int, total: int, active: int,
                big: Big) -> list[Notice]:
    """For a mixture of experts in the calculator: the parameters a token goes through."""
    if n_experts <= 1:
        return []
    return [("notice.moe", dict(name=name, total=big(total), active=big(active), share=f"{active / total:.0%}",
                                k=experts_per_token, e=n_experts))]


def loss_notice(*, n: int, losses: Sequence[float], mean: float, label: Callable[[int], str]) -> Notice:
    """One forward pass gives a loss at every position (``losses[t]``: position t predicting
    token t + 1 of ``n``): their mean, the hardest and the easiest."""
    hard = max(range(len(losses)), key=losses.__getitem__)
    easy = min(range(len(losses)), key=losses.__getitem__)
    return "notice.loss", dict(n=n, m=len(losses), mean=f"{mean:.2f}", hard=label(hard + 1),
                               hard_loss=f"{losses[hard]:.2f}", easy=label(easy + 1), easy_loss=f"{losses[easy]:.2f}")


def post_notices(chat, base) -> list[Notice]:
    """The instruct model's reply and the base model's (lesson_model.analysis.architecture.Reply:
    model, ids, end_token, writes_question, partial): who stopped, who ran on, who repeated the
    question, who wrote byte pieces."""
    out = []
    for reply, kind in ((chat, "chat"), (base, "base")):
        if reply.end_token:
            out.append((f"notice.{kind}_stopped", dict(name=reply.model, n=len(reply.ids) - 1,
                                                       end=code_span(reply.end_token))))
        else:
            out.append((f"notice.{kind}_ran_on", dict(name=reply.model, n=len(reply.ids))))
    if base.writes_question:
        out.append(("notice.base_repeats", dict(name=base.model)))
    for reply in (chat, base):
        if reply.partial * 4 >= len(reply.ids):
            out.append(("notice.bytes", dict(name=reply.model, k=reply.partial, n=len(reply.ids))))
    return out
