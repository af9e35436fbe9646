"""What to notice on the embeddings lesson, from this run's rows, searches and map.

Each function returns [(catalog key under "embeddings.", fields)]; the page translates them
(Lesson.notices). ``label(text)`` is a token's Markdown label and ``join`` the language's list
joiner: the page passes its own, the tests plain ones. analogy_sentences returns the sentences
of one line, which the page runs together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

Notice = tuple[str, dict]
Label = Callable[[str], str]
Join = Callable[[Iterable[str]], str]


def same_word(a: str, b: str) -> bool:
    """Two token texts of one word: "·cat", "cat" and "·Cat"."""
    return a.strip().lower() == b.strip().lower()


def row_notices(*, token: str, d: int, norm: float, vocab: int, nearest: str, cos: float, embed_scale: bool,
                model: str, scale: float) -> list[Notice]:
    """The chosen token's row and its nearest entry; on a model that scales the rows before
    the first block (Gemma), what the block reads."""
    out = [("notice.row", dict(token=token, d=d, norm=f"{norm:.2f}", vocab=f"{vocab:,}", nearest=nearest,
                               cos=f"{cos:.3f}"))]
    if embed_scale:
        out.append(("notice.scale", dict(model=model, d=d, scale=f"{scale:.2f}", scaled=f"{norm * scale:.2f}")))
    return out


def neighbours_notice(*, token: str, query_text: str, neighbours: Sequence[str], k: int, label: Label,
                      join: Join) -> Notice:
    """Forms of the query's own word among its ``neighbours`` (their texts), else the first few."""
    variants = [text for text in neighbours if same_word(text, query_text)]
    if variants:
        return "notice.variants", dict(token=token, n=len(variants), k=k,
                                       examples=join(label(v) for v in variants[:4]))
    return "notice.neighbours", dict(token=token, examples=join(label(v) for v in neighbours[:4]))


def analogy_sentences(*, a: str, b: str, c: str, best: str, cos: float, expected: str | None = None,
                      expected_rank: int | None = None, input_first: str | None = None) -> list[Notice]:
    """The analogy's answer, the expected word's rank (when one was given) and, when an input
    itself is nearest to a - b + c once the inputs are kept, that input: one line."""
    out = [("notice.analogy", dict(a=a, b=b, c=c, best=best, cos=f"{cos:.3f}"))]
    if expected is not None:
        out.append(("notice.analogy_rank", dict(rank=f"{expected_rank:,}", expected=expected)))
    if input_first is not None:
        out.append(("notice.analogy_inputs", dict(token=input_first)))
    return out


def map_notice(*, which: str, explained: Sequence[float] | None, pc1: Sequence[float], n_countries: int, dims: int,
               n: int, d: int) -> list[Notice]:
    """The map's share of the variance it shows (``explained``: None when there was no map);
    on the capitals map, where countries and capitals sit on the first axis (``pc1``: the
    countries first, then the capitals)."""
    if explained is None:
        return []
    if which == "capitals":
        countries, capitals = pc1[:n_countries], pc1[n_countries:]
        apart = max(countries) < min(capitals) or max(capitals) < min(countries)    # PC1 alone splits them
        return [("notice.map_capitals" if apart else "notice.map_capitals_overlap",
                 dict(pct=f"{sum(explained[:2]):.0%}", n=n, countries=f"{sum(countries) / len(countries):+.2f}",
                      capitals=f"{sum(capitals) / len(capitals):+.2f}"))]
    return [("notice.map", dict(pct=f"{sum(explained[:min(2, dims)]):.0%}", n=n, d=d))]


def prompt_notices(*, cos: Sequence[Sequence[float]], ids: Sequence[int], label: Callable[[int], str]) -> list[Notice]:
    """The most and least alike pair of different tokens in the prompt (``cos``: the cosine
    matrix of its rows, ``label(i)``: token i), and how many tokens repeat an earlier one."""
    out = []
    pairs = [(i, j) for i in range(len(ids)) for j in range(i) if ids[i] != ids[j]]
    if pairs:
        hi = max(pairs, key=lambda p: cos[p[0]][p[1]])
        lo = min(pairs, key=lambda p: cos[p[0]][p[1]])
        if len({(ids[i], ids[j]) if ids[i] < ids[j] else (ids[j], ids[i]) for i, j in pairs}) > 1:
            out.append(("notice.matrix", dict(a=label(hi[0]), b=label(hi[1]), hi=f"{cos[hi[0]][hi[1]]:.2f}",
                                              c=label(lo[0]), d=label(lo[1]), lo=f"{cos[lo[0]][lo[1]]:.2f}")))
        else:   # only two different tokens: one pair
            out.append(("notice.matrix_one", dict(a=label(hi[0]), b=label(hi[1]), hi=f"{cos[hi[0]][hi[1]]:.2f}")))
    repeats = len(ids) - len(set(ids))
    if repeats:
        out.append(("notice.repeats", dict(n=repeats)))
    return out
