"""What to notice on the sampling lesson, and what its Try-this lines may claim, from this run's
numbers.

Each notice is a (catalog key under "sampling.", fields) pair; a list of such pairs is one
bullet whose sentences run together (join_sentences). ``label(i)`` is the Markdown label of
candidate token id i as the token after the prompt: the page passes its own, the tests plain
ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from course.text import num

Notice = tuple[str, dict]
Bullet = Notice | list[Notice]
Label = Callable[[int], str]

# What each Try-this line claims (checked on the model's run before its "why" is shown), per model:
# the catalogs' try.<n> (and <tag>.try.<n>) make the same point in every language.
TRY_POINTS = {1: "confident", 2: "open", 3: "space", 4: "spread", 5: "pieces"}
TRY_POINTS_BY_MODEL = {"gemma": {**TRY_POINTS, 5: "whole"}}     # Gemma reads Chinese characters whole


def pct(p: float) -> str:
    """A probability as a percentage, with two significant digits below 0.1%."""
    return f"{p:.1%}" if p >= 0.001 else f"{p * 100:.2g}%" if p > 0 else "0%"


def last_notice(*, n: int, cut: bool, token: str, best: str, second: str, p_best: float, p_second: float,
                logit_best: float, gap: float) -> Notice:
    """Only the last position's vector chooses: the favourite and the runner-up (``token`` is the
    prompt's last token, ``best`` and ``second`` the two likeliest candidates, as labels)."""
    fields = dict(n=n, token=token, best=best, p=pct(p_best), logit=num(logit_best), second=second,
                  p2=pct(p_second), gap=num(gap))
    return ("notice.last_cut" if cut else "notice.last_one" if n == 1 else "notice.last"), fields


def spread_notice(*, lo: float, hi: float, median: float, top10: float, vocab: int) -> Notice:
    """How far the logits spread, and the share of the ten best (``top10``, a probability)."""
    return "notice.spread", dict(lo=num(lo, ".1f"), hi=num(hi, ".1f"), median=num(median, ".1f"), share=pct(top10),
                                 rest=f"{vocab - 10:,}")


def settings_notice(*, greedy: bool, untouched: bool, best: str, settings: str, vocab: int, entropy_model: float,
                    entropy_final: float, n_kept: int, kept_mass: float, p_top: float) -> Notice:
    """What temperature, top-k and top-p do to the distribution (``settings`` is their
    translated one-line description, ``p_top`` the likeliest token's final probability)."""
    if greedy:
        return "notice.greedy", dict(best=best)
    if untouched:
        fair = 2 ** entropy_model
        if fair < 1.5:
            return "notice.untouched_certain", dict(h=num(entropy_model), vocab=f"{vocab:,}", best=best)
        return "notice.untouched", dict(h=num(entropy_model), bits=f"{fair:,.0f}", vocab=f"{vocab:,}")
    fields = dict(settings=settings, n=f"{n_kept:,}", mass=pct(kept_mass), h0=num(entropy_model),
                  h1=num(entropy_final), best=best, p=pct(p_top))
    return ("notice.settings_one" if n_kept == 1 else "notice.settings"), fields


def temperature_notice(*, cold, hot, p: float, best: str) -> Notice:
    """Temperature moves the probabilities: ``cold`` and ``hot`` are two rows of the sweep
    (temperature, top_prob, tokens_for_90), ``p`` the best token's probability at temperature 1."""
    return "notice.temperature", dict(t1=f"{cold.temperature:g}", p1=pct(cold.top_prob), t2=f"{hot.temperature:g}",
                                      p2=pct(hot.top_prob), n1=f"{cold.tokens_for_90:,}",
                                      n2=f"{hot.tokens_for_90:,}", p=pct(p), best=best)


def samples_notices(*, ids: Sequence[int], probs: Sequence[float], counts: Sequence[int], other_prob: float,
                    distinct: int, total_variation: float, n_draws: int, seed: int, label: Label) -> list[Bullet]:
    """The draws against the distribution (a SampleHistogram's ids, probs, counts...): nothing
    when no token is listed; else one bullet."""
    if not ids:
        return []
    drawn_counts = dict(zip(ids, counts))
    fields = dict(n=f"{n_draws:,}", seed=seed, tv=f"{total_variation:.3f}", distinct=f"{distinct:,}")
    if n_draws == 1:
        drawn = next((i for i, c in drawn_counts.items() if c), None)
        if drawn is None:       # drawn from the long tail, beyond the tokens listed
            return [("notice.samples_one_tail", dict(seed=seed, p=pct(other_prob)))]
        return [("notice.samples_one", dict(seed=seed, token=label(drawn), p=pct(probs[list(ids).index(drawn)])))]
    best = ids[0]
    parts = [("notice.samples_all" if drawn_counts[best] == n_draws else "notice.samples",
              dict(token=label(best), c=f"{drawn_counts[best]:,}", f=pct(drawn_counts[best] / n_draws), p=pct(probs[0]),
                   **fields))]
    if distinct > 1:
        parts.append(("notice.samples_distinct", fields))
        parts.append(("notice.samples_more", {}))
    return [parts]


def try_point(tag: str, n: int) -> str | None:
    """What Try-this example n claims on the model with this tag (course.model.MODEL_TAGS)."""
    return TRY_POINTS_BY_MODEL.get(tag, TRY_POINTS).get(n)


def try_line(n: int, point: str | None, *, facts, cands: Sequence[str], pieces: Sequence[str],
             label: Callable[[str], str], join: Callable[[list[str]], str]) -> list[Notice]:
    """Example n's line: its point (try.<n>.why) and its numbers (try.<n>.numbers) when the
    numbers support the point, else a plain account of the numbers (try.plain), as sentences of
    one line. ``facts`` is the prompt's lesson_model.analysis.sampling_demo.PromptFacts, ``cands``
    the display texts of its likeliest tokens (``pieces`` those that are byte pieces), ``label``
    a text's Markdown label and ``join`` the language's list join."""
    f = facts
    fields = dict(best=label(cands[0]), p=pct(f.p), p_cold=pct(f.p_cold), p_hot=pct(f.p_hot),
                  t_cold=f"{f.t_cold:g}", t_hot=f"{f.t_hot:g}", h=num(f.entropy), top_p=f"{f.top_p:g}",
                  n_top_p=f"{f.n_top_p:,}", top_k=f.top_k, cut_top_k=pct(f.cut_top_k),
                  n_pieces=len(pieces), n_top=len(f.top_ids), piece=label(pieces[0]) if pieces else "",
                  examples=join([label(c) for c in cands[:3]]))
    holds = {
        "confident": f.p >= 0.5 and f.p_hot < f.p / 2,               # confident, yet temperature matters
        "open": f.p < 0.2 and f.n_top_p >= 100,                      # an open question
        "space": cands[0] == " " and f.p > 0.5,                      # the likeliest next token is a lone space
        "spread": f.entropy >= 4 and f.cut_top_k >= 0.1,             # many plausible continuations
        "pieces": len(pieces) >= len(f.top_ids) // 3,                # byte pieces among the candidates
        "whole": not pieces,                                         # whole characters, no byte piece
    }.get(point, False)
    if not holds:
        return [("try.plain", fields)]
    return [(f"try.{n}.why", {}), (f"try.{n}.numbers", fields)]
