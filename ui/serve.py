"""Start the app server and its warm-up together: ``python -m ui.serve [streamlit run options]``
(what ./lab app and deploy/ run). The warm-up thread (ui/warmup.py) loads the bundled models
while Streamlit starts, then opens every lesson once over the server's own websocket, so the
first students are served from warm caches."""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

from ui import warmup

APP = Path(__file__).resolve().parents[1] / "app.py"


def tune_malloc() -> None:
    """Many session threads allocate and free big tensors: glibc's default gives each thread
    its own heap arena and raises its mmap threshold as it goes, so freed tensors stay in the
    process (resident memory grew by a gigabyte over one class in bench/bench_class.py).
    Two arenas and a fixed 1 MB threshold give big tensors back to the system when freed.
    DECODER_LAB_MALLOC=default keeps glibc's defaults."""
    if os.environ.get("DECODER_LAB_MALLOC", "") == "default" or not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    libc.mallopt(M_ARENA_MAX, 2)
    libc.mallopt(M_MMAP_THRESHOLD, 1 << 20)


M_ARENA_MAX, M_MMAP_THRESHOLD = -8, -3      # mallopt parameters (malloc.h)


def main(argv: list[str] | None = None) -> int:
    from streamlit.web import cli

    tune_malloc()
    # A class: many sessions at once. Each forward pass on one torch thread, as many at once as
    # there are cores, served more students per second than one pass at a time on every core
    # (bench/bench_class.py: rerun median 10.8 -> 7.8 s with 25 students on 2 cores).
    os.environ.setdefault("DECODER_LAB_THREADS", "1")
    os.environ.setdefault("DECODER_LAB_FORWARDS", str(os.cpu_count() or 1))
    warmup.start()
    sys.argv = ["streamlit", "run", str(APP), *(sys.argv[1:] if argv is None else argv)]
    return cli.main(prog_name="streamlit")


if __name__ == "__main__":
    sys.exit(main())
