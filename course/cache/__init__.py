"""The computations lessons share between sessions, one module per lesson that has any, and
what the server's warm-up calls to have them ready before a class arrives.

Each module holds its lesson's ``st.cache_data`` functions (a page script defines none: a
function defined in a script is made anew on every run, and only running the page could reach
it) and a ``warm(lm, lang)`` that computes what the lesson's first view needs on that
language's default prompt: the page's forward pass (server.models.cached_run, shared through
the run cache) and its cached analyses. The page calls the same functions, so what the
warm-up fills is exactly what a first view reads (tests/test_warmup.py checks that a warmed
lesson opens without a forward pass).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from course import i18n, nav
from course.model import MODEL_TAGS


def default_tokens(lm, lang: str, cap: int | None = None) -> list:
    """The tokens a lesson runs on ``lang``'s default prompt, cut to ``cap`` as Lesson.tokens cuts it."""
    tokens = lm.tokenize(i18n.catalog(lang)["prompt.default"])
    return lm.cut(tokens, cap)[0] if cap is not None else tokens


def lesson_t(page: str, lm, lang: str) -> Callable[..., str]:
    """t(key, **fields): the lesson's string in ``lang`` as Lesson.t gives it to a session in
    that language on ``lm`` (the model's variant when the catalog has one): for cached text,
    which is computed for a language and a model, not for the session that asked first."""
    tag = MODEL_TAGS[lm.bundled.key]
    return lambda key, **fields: i18n.text_in(lang, i18n.lesson_key(page, tag, key), **fields)


def try_numbers(page: str, lm) -> list[int]:
    """The lesson's Try-this numbers on ``lm``, as Lesson.try_numbers finds them."""
    return i18n.try_numbers(page, MODEL_TAGS[lm.bundled.key])


def warmer(page: str) -> Callable | None:
    """course.cache.<page>.warm, or None for a lesson with nothing to warm."""
    try:
        module = importlib.import_module(f"course.cache.{page}")
    except ModuleNotFoundError as exc:
        if exc.name != f"course.cache.{page}":
            raise
        return None
    return getattr(module, "warm", None)


def warm(page: str, lm, lang: str) -> bool:
    """Compute what ``page``'s first view in ``lang`` needs on ``lm``; False if it needs nothing."""
    fn = warmer(page)
    if fn is None:
        return False
    fn(lm, lang)
    warm_question(page, lm, lang)
    return True


def warm_question(page: str, lm, lang: str) -> None:
    """Build the lesson's "Predict, then see" question on ``lang``'s default prompt (the block
    asks it before the first figure; its own forward passes, where it has any beyond the page's,
    go through the run cache): so a warmed lesson's first view runs no model for it either."""
    from course import predict_view
    predict_view.question_for(page, lm, i18n.catalog(lang)["prompt.default"])


def lessons() -> list[str]:
    """The lessons that have something to warm, in course order."""
    return [page for page in nav.PAGES if warmer(page) is not None]
