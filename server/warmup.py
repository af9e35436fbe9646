"""The server warms itself up once per process, in a background thread, so that the first
class is not the one that pays for it:

1. load every bundled model (a cold first start converts the packaged weights, up to a
   minute; a student who arrives meanwhile sees ui.model's progress bar, not a frozen page);
2. open every lesson once per model and language over this server's own websocket, exactly as
   a browser would (ui.protocol): that fills the caches a student's first click would
   otherwise fill: the per-model analyses (induction scores, vocabulary statistics, neuron
   tables), the Try-this examples, and the runs on each language's default prompt;
3. move everything left in memory into the garbage collector's permanent generation
   (gc.freeze): the models' tokenizers and the caches are millions of objects that a full
   collection would otherwise walk again and again while students wait (with Streamlit's
   collection after every run turned off in .streamlit/config.toml).

It starts when the server starts (`python -m ui.serve`, which ./lab app and deploy/ use), or
with the first visitor's run on a server started otherwise. DECODER_LAB_WARMUP=0 turns it off
(the tests do; models then load on first use); DECODER_LAB_WARMUP_PAGES=home,tokens opens only
those lessons. The server's log gets a line every 20 views and one when it is done.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field

ENV = "DECODER_LAB_WARMUP"
PAGES_ENV = "DECODER_LAB_WARMUP_PAGES"       # a comma-separated list of pages to open (default: all)
LANGS = ("en", "zh-Hant", "zh-Hans")
DONE_LINE = "Decoder Lab: warm-up done"     # the log line bench/bench_class.py waits for
COLLECT_ENV = "DECODER_LAB_COLLECT_S"          # seconds between garbage collections after the warm-up (0: none)


@dataclass
class Status:
    started: float | None = None
    views: list[tuple[str, str, str | None]] = field(default_factory=list)   # (page, lang, model) to open
    done: int = 0
    errors: list[str] = field(default_factory=list)
    finished: float | None = None


_status = Status()
_lock = threading.Lock()


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip() not in ("0", "false", "no", "")


def status() -> Status:
    return _status


def start(base: str | None = None) -> bool:
    """Start the warm-up thread unless it has started in this process (or is turned off).
    ``base``: this server's URL (default: read from Streamlit's server options once it runs)."""
    with _lock:
        if _status.started is not None or not enabled():
            return False
        _status.started = time.monotonic()
    threading.Thread(target=_run, args=(base,), daemon=True).start()
    return True


def views() -> list[tuple[str, str, str | None]]:
    """Every lesson once per model and language (a page without a model once per language),
    each language on the model it starts on first (ui.shell), so the likeliest views are ready first."""
    from ui import model as models
    from ui import nav
    from ui.shell import default_model

    wanted = [p.strip() for p in os.environ.get(PAGES_ENV, "").split(",") if p.strip()]
    pages = [page for page in nav.PAGES if not wanted or page in wanted]
    pairs = [(lang, key) for lang in LANGS for key in models.MODELS]
    pairs.sort(key=lambda pair: pair[1] != default_model(pair[0]))
    out = [(page, lang, key) for lang, key in pairs for page in pages if page not in nav.NO_MODEL]
    return out + [(page, lang, None) for page in pages if page in nav.NO_MODEL for lang in LANGS]


def own_base(timeout: float = 600) -> str:
    """This server's loopback URL, once it answers its health check."""
    from streamlit import config, runtime

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if runtime.exists():
            address = config.get_option("server.address") or "127.0.0.1"
            host = "127.0.0.1" if address in ("0.0.0.0", "::", "localhost") else address
            path = (config.get_option("server.baseUrlPath") or "").strip("/")
            base = f"http://{host}:{config.get_option('server.port')}" + (f"/{path}" if path else "")
            try:
                if urllib.request.urlopen(f"{base}/_stcore/health", timeout=2).read() == b"ok":
                    return base
            except OSError:
                pass
        time.sleep(0.5)
    raise TimeoutError("the server did not answer its health check")


def _run(base: str | None) -> None:
    from ui import model as models
    from ui.heap import release_free_heap
    from ui.protocol import Client

    for key in models.MODELS:               # loads in the background; sessions show the progress
        try:
            models._shared_model(key)
        except Exception as exc:           # noqa: BLE001 - a missing package: its pages say so
            _status.errors.append(f"{key}: {type(exc).__name__}: {exc}")
    todo = views()
    _status.views = todo
    try:
        base = base or own_base()
        for page, lang, key in todo:
            query = {"lang": lang, **({"model": key} if key else {})}
            try:
                with Client(base, timeout=600) as client:
                    result = client.open(page, query)
                if not result.ok:
                    _status.errors.append(f"{page}/{lang}/{key}: {result.exceptions + result.problems or result.status}")
            except Exception as exc:       # noqa: BLE001 - reported in the log line
                _status.errors.append(f"{page}/{lang}/{key}: {type(exc).__name__}: {exc}")
            _status.done += 1
            if _status.done % 20 == 0:
                print(f"Decoder Lab: warm-up {_status.done} of {len(todo)} views", file=sys.stderr, flush=True)
    except Exception as exc:               # noqa: BLE001 - no server to visit (started outside one)
        _status.errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        gc.collect()
        gc.freeze()
        release_free_heap()                # what the warm-up's own runs freed goes back (ui.heap)
        every = float(os.environ.get(COLLECT_ENV, "15") or 0)
        if every > 0:
            threading.Thread(target=_collect_every, args=(every,), daemon=True).start()
        _status.finished = time.monotonic()
        seconds = _status.finished - _status.started
        print(f"{DONE_LINE} in {seconds:.0f} s: {_status.done} views, {len(_status.errors)} errors", file=sys.stderr,
              flush=True)
        for error in _status.errors[:10]:
            print(f"  warm-up error: {error[:300]}", file=sys.stderr, flush=True)


def collect_garbage() -> float:
    """Free what the lesson runs left in reference cycles, now; the seconds it took.

    A page's namespace (that run's tensors, results and figures) and the functions the page
    defines refer to each other, so it is freed only by a full collection, and one with tensors
    in it takes two (the first lets go of tensors that PyTorch keeps alive for their Python
    object, the second frees the rest). Streamlit's collection after every run is off (it
    walked the whole heap: ~0.2 s of the GIL a run), and Python's own full collections come
    rarely with a heap this size: eight classes of 25 in a row took the server from 2.6 to
    3.4 GB; collecting every 15 s (0.2 s each), from 2.5 to 2.75 GB (bench/RESULTS_class.md)."""
    start = time.perf_counter()
    gc.collect()
    gc.collect()
    from ui.heap import release_free_heap
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


def progress() -> tuple[int, int] | None:
    """(views ready, views in all) while the page visits run, else None."""
    s = _status
    if s.started is None or s.finished is not None or not s.views:
        return None
    return s.done, len(s.views)
