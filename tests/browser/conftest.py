"""Fixtures of the browser tests: one app server and one headless Chromium per test module."""

import pytest

from tools import browser as harness


@pytest.fixture(scope="module")
def base_url():
    with harness.streamlit_server() as base:
        yield base


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        chromium = harness.launch(p)
        yield chromium
        chromium.close()
