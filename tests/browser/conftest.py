"""Fixtures of the browser tests: one app server for the whole browser stage, shared by its test
workers, and one headless Chromium per worker (a test that needs a fresh server, or one of its
own, starts it itself: tools/browser.py)."""

import json

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


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        chromium = harness.launch(p)
        yield chromium
        chromium.close()
