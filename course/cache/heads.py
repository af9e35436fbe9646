"""The heads lesson's shared computations: its forward pass is the attention lesson's (every
layer's attention tensors), so either lesson opened first fills the run the other reads."""

from __future__ import annotations

from course.cache import default_tokens
from course.cache.attention import lesson_run

CAP = 64            # tokens of the prompt the lesson runs

__all__ = ["CAP", "lesson_run", "warm"]


def warm(lm, lang: str) -> None:
    lesson_run(lm, default_tokens(lm, lang, CAP))
