"""What to notice in the What-if lab, from the comparison of the intact run with the switched one.

``notices`` returns [(catalog key under "whatif.", fields)]. ``on`` holds the switches that are
on, {Switches field: value} in declaration order (lesson_model.whatif.Switches.on); ``cmp`` the
comparison's numbers (lesson_model.analysis.whatif's compare). ``token(id)`` is the Markdown label
of a vocabulary token, ``label(i)`` that of the prompt's token i, ``head_name(layer, head)`` the
translated name of a head: the page passes its own, the tests plain ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from course.text import num

Notice = tuple[str, dict]

BIG = 1.0            # nats: a change of the mean loss at least this big "wrecks" the prediction
SMALL = 0.1          # nats: a smaller change "barely" moves it


def notices(*, on: Mapping[str, object], cmp, n: int, n_layers: int, n_heads: int, d_head: int, cap: int,
            token: Callable[[int], str], label: Callable[[int], str],
            head_name: Callable[[int, int], str]) -> list[Notice]:
    """What the switches did to the loss, the next token, the stream and the attention, on a
    prompt of ``n`` tokens (the page runs at most ``cap``)."""
    if not on:
        return [("notice.none", {})]
    lines = []
    b, a = cmp.mean_before, cmp.mean_after
    if n >= 2 and cmp.finite:
        lines.append(("notice.mean", dict(n=n - 1, before=num(b), after=num(a), delta=num(a - b, "+.2f"))))
    if cmp.finite:
        (t1, p1), (t2, p2) = cmp.top_before[0], cmp.top_after[0]
        key = "notice.top_changed" if cmp.top1_changed else "notice.top_same"
        lines.append((key, dict(t1=token(t1), p1=f"{p1:.0%}", t2=token(t2), p2=f"{p2:.0%}", kl=num(cmp.kl))))
    if "no_norms" in on:
        if cmp.overflow_block is not None:
            prev = max(cmp.overflow_block - 1, 0)
            lines.append(("notice.overflow", dict(first=f"{cmp.stream_sizes[0]:.3g}", block=cmp.overflow_block,
                                                  last=f"{cmp.stream_sizes[prev]:.3g}", prev=prev)))
        elif cmp.stream_sizes:
            lines.append(("notice.norms_grow", dict(first=f"{cmp.stream_sizes[0]:.3g}",
                                                    last=f"{cmp.stream_sizes[-1]:.3g}", n_blocks=n_layers)))
    if "no_mask" in on and n >= 2 and cmp.finite:
        fields = dict(before=num(b), after=num(a), future=f"{cmp.future_weight:.0%}")
        if a < b / 2:
            lines.append(("notice.mask_collapse", fields))
        elif a < b:
            lines.append(("notice.mask_falls", fields))
        else:
            lines.append(("notice.mask_rises", fields))
        lines.append(("notice.mask_why", {}))
    if ("no_rope" in on and n >= 2 and cmp.finite and cmp.first_loss_change < 1e-3
            and not ("shuffle" in on or "no_mask" in on)):
        lines.append(("notice.rope_first", dict(token=label(1))))
    if "no_scale" in on and cmp.finite:
        lines.append(("notice.scale", dict(s=f"{d_head ** 0.5:g}", d=d_head, before=f"{cmp.row_max_before:.0%}",
                                           after=f"{cmp.row_max_after:.0%}")))
    if "no_qk_norm" in on and cmp.finite:
        lines.append(("notice.qk", dict(before=f"{cmp.row_max_before:.0%}", after=f"{cmp.row_max_after:.0%}")))
    for field, key, size in (("skip_block", "skip", BIG), ("zero_mlp", "zero_mlp", BIG), ("zero_head", "zero_head", SMALL)):
        value = on.get(field)
        if value is None or not cmp.finite or n < 2:
            continue
        alone = list(on) == [field]
        where = head_name(*value) if field == "zero_head" else value
        if not alone:
            lines.append((f"notice.{key}_with_others", dict(where=where)))
        elif abs(a - b) >= size:
            lines.append((f"notice.{key}_big", dict(where=where, delta=num(a - b, "+.2f"), heads=n_heads)))
        else:
            lines.append((f"notice.{key}_small", dict(where=where, delta=num(a - b, "+.2f"), heads=n_heads)))
    if "shuffle" in on:
        if n <= 2:
            lines.append(("notice.shuffle_short", {}))
        elif cmp.finite:
            lines.append(("notice.shuffle_rises" if a > b else "notice.shuffle_flat", dict(before=num(b), after=num(a))))
    if "no_window" in on and not cmp.window_matters:
        lines.append(("notice.window_short", dict(far=cmp.farthest_key, window=cmp.window, cap=cap,
                                                  kl=num(cmp.kl, ".3f") if cmp.finite else "–")))
    return lines
