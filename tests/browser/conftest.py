"""Fixtures of the browser tests: one app server for the whole browser stage, shared by its test
workers, and one headless Chromium per worker (a test that needs a fresh server, or one of its
own, starts it itself: tools/browser.py)."""

import json
from urllib.parse import urlsplit

import pytest

from tests._shared import locked, run_folder
from tools import browser as harness


@pytest.fixture(scope="session")
def base_url(tmp_path_factory):
    """The app server's base URL. Under pytest-xdist the workers share one server, so each page
    is computed once: the first worker to ask starts it (detached, so it outlives that worker)
    and notes its pid, address and users in the run's temporary folder; the last user to finish
    stops it."""
    shared = run_folder(tmp_path_factory)
    state_path, lock_path = shared / "browser-server.json", shared / "browser-server.lock"
    with locked(lock_path):
        state = json.loads(state_path.read_text()) if state_path.exists() else None
        if state is None or harness.is_gone(state["pid"]):
            proc, base = harness.start_server(detached=True)
            state = {"pid": proc.pid, "base": base, "users": 0}
        state["users"] += 1
        state_path.write_text(json.dumps(state))
    yield state["base"]
    with locked(lock_path):
        state = json.loads(state_path.read_text())
        state["users"] -= 1
        if state["users"] > 0:
            state_path.write_text(json.dumps(state))
            return
        state_path.unlink()
        harness.stop_server(state["pid"])


# V8 without its optimizing compiler: the tests' pages run their scripts for seconds, not long
# enough to repay its compiles (measured: 8% less of Chromium's CPU over three pages' loads, axe
# runs and model switches, load 3; what the pages draw and do is the same).
TEST_CHROMIUM_ARGS = ["--js-flags=--no-opt"]


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        chromium = harness.launch(p, TEST_CHROMIUM_ARGS)
        yield chromium
        chromium.close()


# Clears what a page of the app keeps in the browser between visits: Streamlit keeps the theme,
# the sidebar's width and its navigation state in localStorage.
_FORGET = "() => { localStorage.clear(); sessionStorage.clear(); }"


@pytest.fixture(scope="session")
def _kept_tab(browser):
    """The worker's one tab that the ``tab`` fixtures hand from test to test, in a context of its
    own (English, en-US)."""
    context = browser.new_context(viewport=harness.VIEWPORT, locale="en-US")
    kept = {"context": context, "page": None}
    yield kept
    context.close()


@pytest.fixture
def warm_tab(_kept_tab, base_url):
    """A tab for one test on the shared server (``base_url``): at harness.VIEWPORT (resize it
    with set_viewport_size), English (en-US), no cookies, nothing in localStorage or
    sessionStorage: what a new browser context gives, except for Chromium's caches. The worker
    keeps one tab from test to test: a page of the app opened where the last test opened one
    (the same site, the same renderer) runs Streamlit's scripts already compiled, about 3 s less
    of Chromium's CPU a page load on a 2-core machine than in a new context (the stage's time is
    Chromium's CPU). After the test its cookies and the app's stored data are cleared; a tab
    that ended elsewhere, or that cannot be cleared, is closed (its sessionStorage with it) and
    the next test gets a new one."""
    context = _kept_tab["context"]
    page = _kept_tab["page"]
    if page is None or page.is_closed():
        page = _kept_tab["page"] = context.new_page()
    page.set_viewport_size(harness.VIEWPORT)
    page.set_default_timeout(120_000)
    yield page
    context.clear_cookies()
    if not page.is_closed() and _origin(page.url) == _origin(base_url):
        try:
            page.evaluate(_FORGET)
            return
        except Exception:
            pass
    _kept_tab["page"] = None
    page.close()
    blank = context.new_page()                 # the app's localStorage, cleared from a page of the app
    blank.goto(f"{_origin(base_url)}/_stcore/health")
    blank.evaluate(_FORGET)
    blank.close()


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
