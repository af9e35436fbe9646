"""What to notice in "Meaning from context" (the embeddings lesson): one word in two texts.

Returns [(catalog key under "embeddings.", fields)]; the page translates them. ``word`` and the
token labels arrive already formatted for Markdown.
"""

from __future__ import annotations

from collections.abc import Sequence

Notice = tuple[str, dict]
APART = 0.5     # a centred cosine below this (from 1 at the embedding row): the vectors moved apart


def missing_notice(*, word: str, in_a: bool, in_b: bool) -> Notice | None:
    """The word is blank, or missing from one text or both."""
    if not word:
        return "context.no_word", {}
    if in_a and in_b:
        return None
    which = "both" if not (in_a or in_b) else ("a" if not in_a else "b")
    return f"context.missing_{which}", dict(word=word)


def context_notices(*, word: str, pieces_a: int, pieces_b: int, last_a: str, last_b: str, same_token: bool,
                    embed_cos: float, centred: Sequence[float], raw: Sequence[float], top_a: str, p_a: float,
                    top_b: str, p_b: float) -> list[Notice]:
    """The starting point (the embedding rows), where the centred cosine ends and its lowest
    block, and the next token after the word in each text."""
    out: list[Notice] = []
    if max(pieces_a, pieces_b) > 1:
        out.append(("context.pieces", dict(word=word, n=max(pieces_a, pieces_b), last=last_a if pieces_a > 1 else last_b)))
    if same_token:
        out.append(("context.start_same", dict(word=word, cos=f"{embed_cos:.2f}")))
    else:
        out.append(("context.start_diff", dict(a=last_a, b=last_b, cos=f"{embed_cos:.2f}")))
    last = len(centred) - 1
    low = min(range(len(centred)), key=lambda i: centred[i])
    fields = dict(word=word, block=last, cos=f"{centred[last]:+.2f}", raw=f"{raw[last]:.2f}", low_block=low,
                  low=f"{centred[low]:+.2f}")
    if centred[low] < APART:
        out.append(("context.apart", fields))
        if centred[low] < 0:
            out.append(("context.negative", {}))
    else:
        out.append(("context.together", fields))
    out.append(("context.predict", dict(top_a=top_a, p_a=f"{p_a:.0%}", top_b=top_b, p_b=f"{p_b:.0%}")))
    return out
