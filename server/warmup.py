"""The server warms itself up once per process, in a background thread, so that the first
class is not the one that pays for it:

1. load every bundled model (a cold first start converts the packaged weights, up to a
   minute; a student who arrives meanwhile sees course.model's progress bar, not a frozen page);
2. compute, for every lesson, model and language, what the lesson's first view on that
   language's default prompt needs: the lesson's forward pass (kept in the shared run cache)
   and its cached analyses (induction scores, vocabulary statistics, neuron tables, the window
   demo...). It calls the lessons' shared computations directly (course/cache/<lesson>.py),
   the same functions the pages call, so a first view finds them ready: no page is rendered
   and nothing goes over the network;
3. move everything left in memory into the garbage collector's permanent generation
   (gc.freeze): the models' tokenizers and the caches are millions of objects that a full
   collection would otherwise walk again and again while students wait (with Streamlit's
   collection after every run turned off in .streamlit/config.toml).

It starts when the server starts (`python -m server.serve`, which ./lab app and deploy/ use), or
with the first visitor's run on a server started otherwise (app.py). DECODER_LAB_WARMUP=0 turns
it off (the tests do; models then load on first use); DECODER_LAB_WARMUP_PAGES=home,tokens warms
only those lessons. The server's log gets a line per model loaded, one every 10 views, and one
when it is done, with the seconds each part took.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from server.status import COLLECT_ENV, DONE_LINE, ENV, LANGS, PAGES_ENV, _lock, _status, enabled  # noqa: F401


def start() -> bool:
    """Start the warm-up thread unless it has started in this process (or is turned off)."""
    with _lock:
        if _status.started is not None or not enabled():
            return False
        _status.started = time.monotonic()
    threading.Thread(target=_run, daemon=True, name="decoder-lab-warmup").start()
    return True


# Lessons whose warm-up is far longer than the others' (the induction experiment on random
# tokens: ~45 s for Gemma and ~20 s for SmolLM2 on one core, a minute of the 100 s of CPU the
# whole warm-up takes): started first, so that they run beside the rest instead of after it.
LONGEST_FIRST = ("induction",)


def views() -> list[tuple[str, str, str]]:
    """(lesson, language, model) for every lesson with something to warm, every model and every
    language; each language on the model it starts on first (course.model.default_model), so
    the likeliest views are ready first, except that the longest lessons start before all."""
    from course import cache
    from course.model import MODELS, default_model

    wanted = [p.strip() for p in os.environ.get(PAGES_ENV, "").split(",") if p.strip()]
    pages = [page for page in cache.lessons() if not wanted or page in wanted]
    pairs = [(lang, key) for lang in LANGS for key in MODELS]
    pairs.sort(key=lambda pair: pair[1] != default_model(pair[0]))
    todo = [(page, lang, key) for lang, key in pairs for page in pages]
    first = [next(view for view in todo if view[0] == page and view[2] == key)
             for page in LONGEST_FIRST if page in pages for key in MODELS]
    return first + [view for view in todo if view not in first]


def _log(line: str) -> None:
    print(f"Decoder Lab: {line}", file=sys.stderr, flush=True)


def _warm_one(view: tuple[str, str, str]) -> None:
    from course import cache
    from server.models import shelf

    page, lang, key = view
    try:
        cache.warm(page, shelf(key), lang)
    except Exception as exc:               # noqa: BLE001 - reported in the log, the server goes on
        _status.errors.append(f"{page}/{lang}/{key}: {type(exc).__name__}: {exc}")
    with _lock:
        _status.done += 1
        done = _status.done
    if done % 10 == 0:
        _log(f"warm-up {done} of {len(_status.views)} views")


def _run() -> None:
    from server.heap import release_free_heap
    from server.models import FORWARDS, MODELS, shelf

    loaded = time.monotonic()
    for key in MODELS:                     # loads in the background; sessions show the progress
        try:
            shelf(key)
        except Exception as exc:           # noqa: BLE001 - a missing package: its pages say so
            _status.errors.append(f"{key}: {type(exc).__name__}: {exc}")
    loaded = time.monotonic() - loaded
    _log(f"models loaded in {loaded:.0f} s")
    warmed = time.monotonic()
    try:
        missing = {key for key in MODELS if not shelf.load(key).done.is_set() or shelf.load(key).error}
        _status.views = [view for view in views() if view[2] not in missing]
        # As many views at once as the server runs forward passes at once (server.models): the
        # run cache lets only that many compute, and each view's own Python work overlaps them.
        with ThreadPoolExecutor(max_workers=max(1, FORWARDS), thread_name_prefix="decoder-lab-warm") as pool:
            list(pool.map(_warm_one, _status.views))
    except Exception as exc:               # noqa: BLE001 - reported in the log line
        _status.errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        warmed = time.monotonic() - warmed
        gc.collect()
        gc.freeze()
        release_free_heap()                # what the warm-up's own work freed goes back (server.heap)
        every = float(os.environ.get(COLLECT_ENV, "15") or 0)
        if every > 0:
            threading.Thread(target=_collect_every, args=(every,), daemon=True).start()
        _status.finished = time.monotonic()
        seconds = _status.finished - _status.started
        _log(f"{DONE_LINE.removeprefix('Decoder Lab: ')} in {seconds:.0f} s (models {loaded:.0f} s, lessons "
             f"{warmed:.0f} s): {_status.done} views, {len(_status.errors)} errors")
        for error in _status.errors[:10]:
            print(f"  warm-up error: {error[:300]}", file=sys.stderr, flush=True)


def collect_garbage() -> float:
    """Free what the lesson runs left in reference cycles, now; the seconds it took.

    A finished run can leave cycles behind (Streamlit's own run objects, a figure and its
    parts), so it is freed only by a full collection, and one with tensors in it takes two
    (the first lets go of tensors that PyTorch keeps alive for their Python object, the second
    frees the rest). Streamlit's collection after every run is off (it walked the whole heap:
    ~0.2 s of the GIL a run), and Python's own full collections come rarely with a heap this
    size: eight classes of 25 in a row took the server from 2.6 to 3.4 GB; collecting every
    15 s (0.2 s each), from 2.5 to 2.75 GB (bench/RESULTS_class.md)."""
    start = time.perf_counter()
    gc.collect()
    gc.collect()
    from server.heap import release_free_heap
    release_free_heap()
    return time.perf_counter() - start


def _collect_every(seconds: float) -> None:
    """collect_garbage every ``seconds`` while sessions run (skipped while nothing has been
    allocated since the last one: an idle server does not walk its heap)."""
    after = gc.get_count()
    while True:
        time.sleep(seconds)
        if gc.get_count()[1:] == after[1:]:    # no young collection since: fewer than ~700 new objects
            continue
        collect_garbage()
        after = gc.get_count()
