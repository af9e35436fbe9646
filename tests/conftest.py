"""Shared fixtures for Decoder Lab's tests.

- ``lm``: the real model, loaded once per test process.
- ``open_page``: an AppTest of app.py opened on one page, with URL parameters, already run.

Marks (pytest.ini): ``slow`` for tests that load the real model, ``browser`` for the
real-Chromium end-to-end tests in tests/browser/.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The server's start-up warm-up (ui/warmup.py) would open every lesson in each test's server
# and compete with the tests for the CPU: off, except where a test turns it on.
os.environ["DECODER_LAB_WARMUP"] = "0"

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"
APP_TIMEOUT = 120      # seconds for one AppTest run once the model is warm


@pytest.fixture(scope="session")
def lm():
    """The real model (SmolLM2-135M-Instruct), loaded once per test process."""
    from lesson_model import load_model
    return load_model()


@pytest.fixture(scope="session")
def gemma():
    """The real Gemma 3 270M, loaded once per test process."""
    from lesson_model import load_model
    return load_model("gemma-3-270m")


@pytest.fixture(scope="session")
def models(lm, gemma):
    """Both real models by their ?model= key."""
    return {"smollm2-135m": lm, "gemma-3-270m": gemma}


@pytest.fixture(scope="session")
def trained():
    """trained(n_layers=2, ...) -> the TrainResult of one full default-length training of the
    training lab with those settings, run once per test session (each is ~25 s on an idle core,
    minutes on a busy one) and shared by the tests of lesson_model.training and of the page.
    max_seconds is lifted so a loaded machine cannot cut a run short."""
    from lesson_model import training

    results = {}

    def run(**changes):
        settings = training.TrainSettings(**changes)
        if settings not in results:
            results[settings] = training.run(settings, max_seconds=3600)
        return results[settings]

    return run


@pytest.fixture(scope="session")
def warm_app(lm):
    """Run the app once per bundled model so both sit in Streamlit's resource cache for every AppTest."""
    from streamlit.testing.v1 import AppTest
    for model in ("smollm2-135m", "gemma-3-270m"):
        at = AppTest.from_file(str(APP), default_timeout=600)
        at.query_params["model"] = model
        at.run()
        assert not at.exception, [e.value for e in at.exception]
    return True


@pytest.fixture
def open_page(warm_app):
    """open_page(page, lang=..., prompt=..., params={...}, locale=..., model=...) -> AppTest after its run.

    Like opening ``/<page>?lang=..&prompt=..&<params>`` in a browser: the app starts on
    home (AppTest needs one run before switching pages), then the page's own parameters
    are put in the URL and the page runs.
    """
    from streamlit.testing.v1 import AppTest

    from ui import nav

    def _open(page: str = nav.HOME, *, lang: str | None = "en", prompt: str | None = None,
              params: dict | None = None, locale: str | None = None, model: str | None = None):
        at = AppTest.from_file(str(APP), default_timeout=APP_TIMEOUT)
        if model is not None:      # None: the model the language starts on (Chinese: Gemma)
            at.query_params["model"] = model
        if locale is not None:
            at.context["locale"] = locale
        if lang is not None:
            at.query_params["lang"] = lang
        if prompt is not None:
            at.query_params["prompt"] = prompt
        if page == nav.HOME:
            for key, value in (params or {}).items():
                at.query_params[key] = str(value)
            return at.run()
        at.run()
        for key, value in (params or {}).items():
            at.query_params[key] = str(value)
        at.switch_page(nav.page_file(page))
        return at.run()

    return _open
