"""Fixtures of the browser tests: one app server and one headless Chromium for the whole browser
stage (a test that needs a fresh server, or one of its own, starts it itself: tools/browser.py)."""

import pytest

from tools import browser as harness


@pytest.fixture(scope="session")
def base_url():
    with harness.streamlit_server() as base:
        yield base


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        chromium = harness.launch(p)
        yield chromium
        chromium.close()
