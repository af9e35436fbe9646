"""A class's views ready before its students ask for them.

A teacher's view reaches followers in every language, and part of what a lesson computes is
per language and the same for any prompt (course/cache: the Try-this lines, each run of the
model on that language's example prompt; the sliding-window demo on that language's default
prompt; the weather table). The teacher's own run computes it for the teacher's language only;
without this, the first follower in each other language computes it in the follow's critical
path while the others in that language wait for it (the cache's lock): on Gemma's sampling and
attention lessons, seconds.

So when a teacher publishes a view (classroom/follow.py after_run), the view's lesson is warmed
in the background (course.cache.warm, what the server's start-up warm-up calls for every view)
for every language on the teacher's model, then on the other bundled models, where a teacher
who switches the model goes next: once per lesson, model and language in the process, one
thread per view (their forward passes release the GIL). Nothing is done once the start-up
warm-up has warmed every view, nor for a model that is not loaded (a class that never uses
it does not load it), nor with DECODER_LAB_CLASS_WARM=0 (the tests). Computing for one language never changes what another session
sees: the caches are keyed by model, tokens and language, as the pages' own calls are.
"""

from __future__ import annotations

import logging
import threading

from course import cache
from server import status

log = logging.getLogger(__name__)
_STARTED: set[tuple[str, str, str]] = set()       # (page, lang, model) warmed or being warmed here
_LOCK = threading.Lock()


def views_for(page: str, model_key: str, lang: str, models: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """(page, language, model) to warm for a teacher on ``page`` with ``model_key`` in ``lang``:
    the teacher's model first, its other languages, then the other models in every language."""
    order = [model_key, *[m for m in models if m != model_key]]
    return [(page, other, m) for m in order for other in status.LANGS if (other, m) != (lang, model_key)]


def _warmed_at_start() -> bool:
    s = status.status()
    return s.finished is not None and not s.errors and s.done >= len(s.views) > 0


def warm_view(page: str, model_key: str, lang: str) -> list[tuple[str, str, str]]:
    """Start warming ``page``'s views that are not warm yet (background threads); returns them."""
    if not status.class_warm() or _warmed_at_start() or cache.warmer(page) is None:
        return []
    from course.model import MODELS
    from server.models import shelf
    loaded = tuple(m for m in MODELS if m == model_key or shelf.ready(m))
    with _LOCK:
        todo = [v for v in views_for(page, model_key, lang, loaded) if v not in _STARTED]
        _STARTED.update(todo)
    if todo:
        first = [v for v in todo if v[2] == model_key]
        later = [v for v in todo if v[2] != model_key]
        for view in first:
            threading.Thread(target=_warm, args=([view],), daemon=True, name="decoder-lab-class-warm").start()
        if later:      # the other models after the teacher's, one view at a time
            threading.Thread(target=_warm, args=(later,), daemon=True, name="decoder-lab-class-warm").start()
    return todo


def _warm(views: list[tuple[str, str, str]]) -> None:
    from server.models import shelf
    for page, lang, key in views:
        try:
            cache.warm(page, shelf(key), lang)
        except Exception:  # noqa: BLE001 - a follower's own run computes it (and shows any error)
            log.exception("warming %s/%s/%s for a class failed", page, lang, key)
