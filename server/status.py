"""How far the server's warm-up (server/warmup.py) has got: read by the sidebar's counter.
Plain Python, below the course in the layering, so the page shell can read it without importing
the warm-up (which imports the course)."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

ENV = "DECODER_LAB_WARMUP"
PAGES_ENV = "DECODER_LAB_WARMUP_PAGES"       # a comma-separated list of pages to open (default: all)
LANGS = ("en", "zh-Hant", "zh-Hans")
DONE_LINE = "Decoder Lab: warm-up done"     # the log line bench/bench_class.py waits for
CLASS_WARM_ENV = "DECODER_LAB_CLASS_WARM"        # 0: a teacher's view is not warmed for the other languages (classroom/prewarm.py)
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


def class_warm() -> bool:
    return os.environ.get(CLASS_WARM_ENV, "1").strip() not in ("0", "false", "no", "")


def status() -> Status:
    return _status


def progress() -> tuple[int, int] | None:
    """(views ready, views in all) while the page visits run, else None."""
    s = _status
    if s.started is None or s.finished is not None or not s.views:
        return None
    return s.done, len(s.views)
