"""Start the app server and its warm-up together: ``python -m server.serve [streamlit run options]``
(what ./lab app and deploy/ run). The warm-up thread (server/warmup.py) loads the bundled models
while Streamlit starts, then computes every lesson's shared results once per model and language,
so the first students are served from warm caches."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from server import warmup
from server.heap import tune_malloc

APP = Path(__file__).resolve().parents[1] / "app.py"
COALESCE_ENV = "DECODER_LAB_COALESCE"      # 0: Streamlit's own wake-ups (bench/bench_class.py compares both)


def coalesce_wakeups() -> None:
    """Wake Streamlit's event loop once per burst of messages, not once per message.

    Every element a script draws reaches the event loop twice through call_soon_threadsafe,
    each a write to the loop's wake-up pipe under the GIL: once from the script's thread
    (AppSession._call_soon_on_event_loop) and once on the loop (Runtime._enqueued_some_message).
    With 25 sessions drawing pages at once that was 4.6% of the server's busy time
    (bench/bench_class.py --profile). Here a session's callbacks wait in one queue, drained in
    order by a single scheduled call; and a message queued while a flush is pending (the loop
    clears need_send_data first, then sends every queue) goes out in that flush, unannounced.
    """
    from streamlit.runtime.app_session import AppSession
    from streamlit.runtime.runtime import Runtime

    if getattr(Runtime._enqueued_some_message, "coalesced", False):
        return
    enqueued = Runtime._enqueued_some_message

    def _enqueued_some_message(self) -> None:
        objs = self._async_objs
        if objs is not None and objs.need_send_data.is_set():
            return
        enqueued(self)

    call_soon = AppSession._call_soon_on_event_loop
    lock = threading.Lock()
    PENDING = "_decoder_lab_pending"         # a session's callbacks waiting for their drain

    def _call_soon_on_event_loop(self, callback) -> None:
        with lock:
            pending = self.__dict__.setdefault(PENDING, [])
            pending.append(callback)
            if len(pending) > 1:
                return                       # a drain is already scheduled: it runs this one too

        def drain() -> None:
            with lock:
                callbacks = self.__dict__.pop(PENDING, [])
            for fn in callbacks:             # in the order the script sent them
                try:
                    fn()
                except Exception as exc:     # noqa: BLE001 - reported as asyncio reports a failed callback
                    self._event_loop.call_exception_handler({"message": "session callback failed", "exception": exc})

        try:
            call_soon(self, drain)
        except BaseException:
            with lock:
                self.__dict__.pop(PENDING, None)     # nothing is scheduled: the next callback tries again
            raise

    _enqueued_some_message.coalesced = True
    Runtime._enqueued_some_message = _enqueued_some_message
    AppSession._call_soon_on_event_loop = _call_soon_on_event_loop


def main(argv: list[str] | None = None) -> int:
    from streamlit.web import cli

    tune_malloc()
    if os.environ.get(COALESCE_ENV, "1").strip() not in ("0", "false", "no"):
        coalesce_wakeups()
    # A class: many sessions at once. Each forward pass on one torch thread, as many at once as
    # there are cores, served more students per second than one pass at a time on every core
    # (bench/bench_class.py: rerun median 10.8 -> 7.8 s with 25 students on 2 cores).
    os.environ.setdefault("DECODER_LAB_THREADS", "1")
    os.environ.setdefault("DECODER_LAB_FORWARDS", str(os.cpu_count() or 1))
    os.environ.setdefault("DECODER_LAB_SCRIPTS", str(2 * (os.cpu_count() or 1)))
    warmup.start()
    sys.argv = ["streamlit", "run", str(APP), *(sys.argv[1:] if argv is None else argv)]
    return cli.main(prog_name="streamlit")


if __name__ == "__main__":
    sys.exit(main())
