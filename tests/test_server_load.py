"""A class opening the link at once: many sessions on a FRESH server, every page, the same moment.

The first runs of a new server import what the pages need from several session threads at
once. One page imports pandas while another page's charts are validated by plotly, which
peeks at a pandas it finds in sys.modules: half imported, it showed learners
``AttributeError: partially initialized module 'pandas' has no attribute 'Series'`` (unless
the app imports it before any page runs). This test starts its own server (nothing imported
yet), connects SESSIONS sessions through Streamlit's websocket protocol (what the browser
speaks), and makes them all open pages at the same moment, each session a different page,
in as many rounds as it takes to open every page: no session may get an exception element
and every run must finish.

Loopback only; every wait is bounded; the server is stopped by its own pid. The sessions
speak Streamlit's websocket protocol through tools/protocol.py.

For experiments: DECODER_LAB_LOAD_SESSIONS (default 10) and DECODER_LAB_LOAD_PAGES (a comma
separated list of page ids, default every page).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

import pytest

from course import nav
from tools.browser import streamlit_server
from tools.protocol import Client

pytestmark = pytest.mark.server

SESSIONS = int(os.environ.get("DECODER_LAB_LOAD_SESSIONS", "10"))
PAGES = [p for p in os.environ.get("DECODER_LAB_LOAD_PAGES", ",".join(nav.PAGES)).split(",") if p]
# A short prompt, and the induction page's shortest random sequences, keep the model's work
# small: what is tested is many sessions at once, not the lessons' numbers.
PROMPT = "The cat sat on the mat. The cat"
PAGE_PARAMS = {"induction": {"len": "10"}}
RUN_TIMEOUT = 300          # seconds for one page run (a cold page on a busy 2-core machine)
RECV_TIMEOUT = RUN_TIMEOUT  # seconds without a message (a cold page computes in silence)
TEST_TIMEOUT = 600          # all the rounds together (the server start comes before, pytest.ini allows 900)


@dataclass
class Session:
    index: int
    finished: dict[str, str] = field(default_factory=dict)            # page -> script_finished status
    exceptions: list[tuple[str, str]] = field(default_factory=list)   # (page, "Type: message")
    other: list[tuple[str, str]] = field(default_factory=list)        # (page, what went wrong)


def pages_of(index: int) -> list[str]:
    """The pages session `index` opens, one per round: in each round the sessions are spread over
    different pages (a class on a fresh server, each learner on a lesson), and the rounds together
    open every page."""
    rounds = -(-len(PAGES) // SESSIONS)
    return [PAGES[(index + r * SESSIONS) % len(PAGES)] for r in range(rounds)]


def run_session(base: str, session: Session, barrier: threading.Barrier, stop_at: float) -> None:
    client = None
    # Half the class reads Chinese, so both models load at once on the fresh server (Chinese starts on Gemma).
    lang = "zh-Hant" if session.index % 2 else "en"
    try:
        client = Client(base, timeout=RECV_TIMEOUT)
        for page in pages_of(session.index):
            barrier.wait(timeout=max(1.0, stop_at - time.monotonic()))   # every session sends at the same moment
            client.timeout = max(1.0, min(RUN_TIMEOUT, stop_at - time.monotonic()))
            result = client.open(page, {"lang": lang, "prompt": PROMPT, **PAGE_PARAMS.get(page, {})})
            session.exceptions += [(page, text) for text in result.exceptions]
            session.other += [(page, what) for what in result.problems]
            if result.status:
                session.finished[page] = result.status
    except threading.BrokenBarrierError:
        session.other.append(("-", "another session failed or the test ran out of time"))
    except Exception as exc:   # noqa: BLE001 - reported by the test below
        session.other.append(("-", f"{type(exc).__name__}: {exc}"))
        barrier.abort()        # release the others instead of leaving them waiting
    finally:
        if client is not None:
            client.close()


def test_many_sessions_open_every_page_at_once_on_a_fresh_server():
    assert set(PAGES) <= set(nav.PAGES), f"unknown pages {set(PAGES) - set(nav.PAGES)}"
    sessions = [Session(i) for i in range(SESSIONS)]
    with streamlit_server() as base:
        stop_at = time.monotonic() + TEST_TIMEOUT
        barrier = threading.Barrier(SESSIONS)
        threads = [threading.Thread(target=run_session, args=(base, s, barrier, stop_at), daemon=True)
                   for s in sessions]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=max(1.0, stop_at - time.monotonic()) + 5)
        alive = [i for i, thread in enumerate(threads) if thread.is_alive()]
    exceptions = sorted({(page, text) for s in sessions for page, text in s.exceptions})
    problems = [(s.index, page, what) for s in sessions for page, what in s.other]
    assert {page for s in sessions for page in pages_of(s.index)} == set(PAGES)
    unfinished = [(s.index, page) for s in sessions for page in pages_of(s.index)
                  if s.finished.get(page) != "FINISHED_SUCCESSFULLY"]
    assert not exceptions, "sessions got exception elements:\n" + "\n".join(f"  {p}: {t}" for p, t in exceptions)
    assert not alive and not problems, f"sessions still running {alive}; problems {problems[:10]}"
    assert not unfinished, f"runs that did not finish successfully (session, page): {unfinished[:20]}"
