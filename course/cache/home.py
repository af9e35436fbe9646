"""The big-picture lesson's shared computation: its live demo's forward pass (the next-token
scores after the prompt), shared through the run cache."""

from __future__ import annotations

from course.cache import default_tokens
from server.models import CachedRun, cached_run

CAP = 256            # tokens of the prompt the live demo runs


def lesson_run(lm, tokens) -> CachedRun:
    """The demo's forward pass over ``tokens`` (Token objects): only the last position's logits."""
    return cached_run(lm, [tok.id for tok in tokens])


def warm(lm, lang: str) -> None:
    lesson_run(lm, default_tokens(lm, lang, CAP))
