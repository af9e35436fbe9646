"""server/serve.py's changes to how the server process runs (the server itself is started by
tests/test_server_load.py and the browser tests)."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest
from streamlit.runtime.app_session import AppSession
from streamlit.runtime.runtime import Runtime

from server import heap, serve


class FakeLoop:
    """Records what is scheduled; runs it when asked, as the event loop would."""

    def __init__(self):
        self.scheduled = []
        self.errors = []

    def call_soon_threadsafe(self, fn, *args):
        self.scheduled.append(lambda: fn(*args))

    def run_scheduled(self):
        while self.scheduled:
            self.scheduled.pop(0)()

    def is_closed(self):
        return False

    def call_exception_handler(self, context):
        self.errors.append(context)


def test_a_flush_already_pending_takes_new_messages_without_waking_the_loop_again():
    serve.coalesce_wakeups()
    serve.coalesce_wakeups()                        # twice: wrapped once
    assert Runtime._enqueued_some_message.coalesced
    loop = FakeLoop()
    event = asyncio.Event()
    runtime = SimpleNamespace(_async_objs=SimpleNamespace(eventloop=loop, need_send_data=event))
    runtime._get_async_objs = lambda: runtime._async_objs     # what Streamlit's own method calls

    Runtime._enqueued_some_message(runtime)          # nothing pending: wake the loop (Streamlit's code)
    loop.run_scheduled()
    assert event.is_set()
    for _ in range(50):                              # the flush has not begun: the messages go out in it
        Runtime._enqueued_some_message(runtime)
    assert not loop.scheduled
    event.clear()                                    # the loop begins its flush: the next message wakes it again
    Runtime._enqueued_some_message(runtime)
    assert len(loop.scheduled) == 1


def test_a_sessions_callbacks_run_in_order_from_one_wakeup_and_a_failure_does_not_stop_the_rest():
    serve.coalesce_wakeups()
    loop = FakeLoop()
    session = SimpleNamespace(_event_loop=loop)
    ran = []
    for i in range(5):
        AppSession._call_soon_on_event_loop(session, lambda i=i: ran.append(i))
    AppSession._call_soon_on_event_loop(session, lambda: 1 / 0)
    AppSession._call_soon_on_event_loop(session, lambda: ran.append("after"))
    assert len(loop.scheduled) == 1, "one wake-up for the whole burst"
    loop.run_scheduled()
    assert ran == [0, 1, 2, 3, 4, "after"]
    assert len(loop.errors) == 1 and isinstance(loop.errors[0]["exception"], ZeroDivisionError)
    # after the drain the next callback schedules a new one
    AppSession._call_soon_on_event_loop(session, lambda: ran.append("next"))
    assert len(loop.scheduled) == 1
    loop.run_scheduled()
    assert ran[-1] == "next"


def test_callbacks_sent_from_many_threads_all_run_once():
    serve.coalesce_wakeups()
    loop = FakeLoop()
    session = SimpleNamespace(_event_loop=loop)
    ran = []
    lock = threading.Lock()

    def send(t):
        for i in range(200):
            AppSession._call_soon_on_event_loop(session, lambda t=t, i=i: ran.append((t, i)))
            if i % 50 == 0:
                with lock:
                    loop.run_scheduled()

    threads = [threading.Thread(target=send, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    loop.run_scheduled()
    assert sorted(ran) == [(t, i) for t in range(4) for i in range(200)]
    for t in range(4):
        assert [i for tt, i in ran if tt == t] == list(range(200)), "each thread's callbacks in its order"


def _rss_anon_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon in /proc/self/status")


@pytest.mark.parity
@pytest.mark.skipif(heap._libc() is None, reason="glibc's malloc_trim is Linux only")
def test_the_tokenizer_parse_leaves_freed_pages_that_release_free_heap_gives_back(gemma):
    """Reading Gemma's tokenizer goes through some 290 MB of short-lived allocations; after it,
    glibc keeps most of the freed pages until malloc_trim (server.heap.release_free_heap, which
    course.model calls after each model load)."""
    from tokenizers import Tokenizer

    from lesson_model.loading import bundled_cache_folder

    path = bundled_cache_folder("gemma-3-270m") / "tokenizer.json"
    heap.release_free_heap()
    for _ in range(2):
        tok = Tokenizer.from_file(str(path))
        assert tok.get_vocab_size() > 200_000 and gemma.cfg.vocab_size > 200_000
        del tok
    held = _rss_anon_mb()
    assert heap.release_free_heap()
    assert held - _rss_anon_mb() > 50          # measured here: about 190 MB back
