"""What to notice on the induction lesson, from this run's numbers.

Each function returns a line of "What to notice": a list of (catalog key under "induction.",
fields) whose sentences run together (join_sentences), or one pair. ``label(i)`` is the Markdown
label of token i of the learner's text and ``head_name(layer, head)`` a head's name; ``lang`` is
the session's language (how a list is joined).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from course.i18n import join_list

Notice = tuple[str, dict]
Label = Callable[[int], str]
HeadName = Callable[[int, int], str]

COPIED = 1.0         # nats: the second copy is "copied" when its loss is at least this much lower
ABLATION_MOVE = 0.1  # nats: a smaller change of the loss counts as "barely changes"
COPIED_TOP1 = 0.5    # ...and "copied" outright only when its top guess is right at half its positions or more


def best_notices(*, ranked: Sequence[tuple[int, int, float]], k: int, third: int, early: float,
                 global_layers: Sequence[int] | None, sliding_window: int | None, seq_len: int,
                 head_name: HeadName, lang: str | None) -> list[Notice]:
    """The best heads of the standard test: ``ranked`` every head by score, best first (the top
    ``k`` are the ones knocked out); ``early`` the best score in the first ``third`` of the
    layers; on a model with sliding-window layers (``global_layers`` not None) which of the top k
    sit in the global layers, and whether the test fits the window."""
    layer0, head0, score0 = ranked[0]
    out = [("notice.best", dict(head=head_name(layer0, head0), pct=f"{score0:.0%}"))]
    top = ranked[:k]
    if k > 1:
        layers = sorted({layer for layer, _, _ in top})
        out.append(("notice.best_layer" if len(layers) == 1 else "notice.best_layers",
                    dict(k=k, layers=join_list((str(layer) for layer in layers), lang))))
    out.append(("notice.early_only" if early < score0 / 2 else "notice.early",
                dict(third=third - 1, early=f"{early:.0%}")))
    if global_layers is not None:          # Gemma 3: which of the best heads sit in the global layers
        in_global = sum(1 for layer, _, _ in top if layer in global_layers)
        out.append(("notice.global_all" if in_global == k else "notice.global_none" if in_global == 0 else
                     "notice.global", dict(m=in_global, k=k, globals=join_list((str(g) for g in global_layers), lang))))
        if 2 * seq_len <= sliding_window:
            out.append(("notice.window_fits", dict(n=2 * seq_len, w=sliding_window)))
    return out


def loss_notices(*, first: float, second: float, vocab_size: int, uniform: float, top1_first: float,
                 top1_second: float) -> list[Notice]:
    """The loss on each copy of the random sequence (``uniform``: the loss of a uniform guess) and
    how often the top guess is right on each."""
    out = [("notice.loss", dict(first=f"{first:.2f}", second=f"{second:.2f}", vocab=f"{vocab_size:,}",
                                uniform=f"{uniform:.2f}"))]
    if first > uniform:
        out.append(("notice.loss_worse", dict(vocab=f"{vocab_size:,}")))
    out.append(("notice.loss_not_copied" if second > first - COPIED else
                "notice.loss_copied" if top1_second >= COPIED_TOP1 else "notice.loss_partly", {}))
    out.append(("notice.top1", dict(hit1=f"{top1_first:.0%}", hit2=f"{top1_second:.0%}")))
    return out


def ablation_notices(*, k: int, baseline: float, top_loss: float, random_mean: float) -> list[Notice]:
    """Knocking out the top k heads against random sets of k heads."""
    move = top_loss - baseline
    random_move = random_mean - baseline
    ablation_key = ("notice.ablation_up" if move >= ABLATION_MOVE else
                    "notice.ablation_down" if move <= -ABLATION_MOVE else "notice.ablation_flat")
    compare_key = ("notice.compare_far" if move >= ABLATION_MOVE and move > 2 * max(random_move, 0) else
                   "notice.compare_more" if move >= ABLATION_MOVE and move > random_move else "notice.compare_not")
    return [(ablation_key, dict(k=k, base=f"{baseline:.2f}", top=f"{top_loss:.2f}", rand=f"{random_mean:.2f}")),
            (compare_key, {})]


def site_notices(*, site: tuple[int, int] | None, layer: int = 0, head: int = 0, weight: float = 0.0,
                 top_heads: set = frozenset(), head_name: HeadName, label: Label) -> list[Notice]:
    """The head that attends most from the second A to its B in the learner's text (``site``: the
    positions (A, B), None when the text repeats nothing), and whether it is one of the top k."""
    if site is None:
        return [("notice.no_site", {})]
    a, b = site
    out = [("notice.site", dict(head=head_name(layer, head), a=label(a), b=label(b), pct=f"{weight:.0%}"))]
    if (layer, head) in top_heads:
        out.append(("notice.also", {}))
    return out


def match_length(ids: Sequence[int], a: int, query: int) -> int:
    """How many tokens right before position ``a`` equal the ones right before ``query`` (the
    tokens at ``a`` and ``query`` themselves are the same A): 2 for 「王小明喜歡」 against an
    earlier 「王小明喜歡」 when A is 喜歡 and 王小明 is two tokens."""
    n = 0
    while a - n - 1 >= 0 and ids[a - n - 1] == ids[query - n - 1] and a - n - 1 != query - n - 1:
        n += 1
    return n


def occurrence_notices(*, ids: Sequence[int], query: int, targets: Sequence[int], probs: Sequence[float],
                       label: Label) -> list[Notice]:
    """When A occurred more than once before, which earlier occurrence the text before the
    current A matches longest (``targets``: the positions of each earlier A's B, in order;
    ``probs``: the probability the model gives each of those B now). Nothing for one occurrence."""
    if len(targets) < 2:
        return []
    lengths = [match_length(ids, b - 1, query) for b in targets]
    best = max(range(len(targets)), key=lambda i: (lengths[i], i))       # longest; the latest on a tie
    latest = len(targets) - 1
    fields = dict(a=label(query), n=len(targets), pos=targets[best] - 1, b=label(targets[best]),
                  k=lengths[best], p=f"{probs[best]:.1%}", pos_last=targets[latest] - 1, b_last=label(targets[latest]),
                  p_last=f"{probs[latest]:.1%}")
    if best == latest or targets[best] == targets[latest] or ids[targets[best]] == ids[targets[latest]]:
        return [("notice.occurrences_same", fields)]
    return [("notice.occurrences", fields)]
