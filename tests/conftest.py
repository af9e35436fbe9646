"""Shared fixtures for Decoder Lab's tests.

- ``lm``: the real model, loaded once per test process.
- ``open_page``: an AppTest of app.py opened on one page, with URL parameters, already run.

Stages (pytest.ini's markers; .ci/run runs them in this order, ./lab test-stages): every test
gets exactly one of ``unit``, ``parity``, ``page``, ``server``, ``browser``. An explicit mark
(``pytestmark`` or ``@pytest.mark.<stage>``) decides; without one the stage is derived from what
the test uses (``stage_of`` below). Mark explicitly what the fixtures cannot show: a test that
calls ``load_model()`` on a bundled model or reaches ``lm``/``gemma`` through
``request.getfixturevalue`` (parity), one that starts a server process itself (server).
tests/test_markers.py checks the stages partition the collection.

Workers (pytest-xdist): ./lab runs the unit, parity and page stages in one worker process per
core (lab: stage_args). Each worker has its own session fixtures and app caches and an equal
share of the cores for torch. unit and parity go test by test but keep an xdist_group on one
worker (``--dist loadgroup``; XDIST_GROUPS below, and the marks of the trainings' tests), so
transformers' own load of Gemma happens once; the trainings of the lab are shared between
workers and stages on disk (``trained``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The server's start-up warm-up (server/warmup.py) would open every lesson in each test's server
# and compete with the tests for the CPU: off, except where a test turns it on.
os.environ["DECODER_LAB_WARMUP"] = "0"
os.environ["DECODER_LAB_CLASS_WARM"] = "0"     # no background warming of a teacher's views (classroom/prewarm.py)

# Analyses that take a minute a model (the induction lesson's experiment) are kept on disk for
# the whole run (course/cache/stored.py), so each is computed once, not once per process that
# shows it (every page-test worker, the browser stage's server). ./lab test-stages names one
# folder for all its stages; a pytest run without one gets its own, removed when it ends (this
# module is imported by pytest-xdist's controller before it starts the workers, who inherit it).
if not os.environ.get("DECODER_LAB_ANALYSIS_CACHE"):
    import atexit
    import shutil
    import tempfile
    os.environ["DECODER_LAB_ANALYSIS_CACHE"] = tempfile.mkdtemp(prefix="decoder-lab-analyses-")
    atexit.register(shutil.rmtree, os.environ["DECODER_LAB_ANALYSIS_CACHE"], True)


def scan_installed_components_once() -> bool:
    """Every new AppTest has Streamlit scan the metadata of every installed package for
    components (streamlit.components.v2.manifest_scanner.scan_component_manifests, from its first
    run): about 0.35 s of a light page test's 0.45 s. The packages do not change while the tests
    run, so a test process scans once and every AppTest registers what that scan found (none of
    this project's pages uses a component). True when the scan is shared; False when this
    Streamlit has no such function (the tests are then as slow as before, no less right:
    tests/test_apptest_helpers.py says so)."""
    import functools

    try:
        from streamlit.components.v2 import manifest_scanner
    except ImportError:
        return False
    scan = getattr(manifest_scanner, "scan_component_manifests", None)
    if scan is None:
        return False
    if getattr(scan, "shared_by_the_tests", False):
        return True
    found: list = []

    @functools.wraps(scan)
    def scan_once(*args, **kwargs):
        if not found:
            found.append(scan(*args, **kwargs))
        return list(found[0])

    scan_once.shared_by_the_tests = True
    manifest_scanner.scan_component_manifests = scan_once
    return True


scan_installed_components_once()


def compile_page_scripts_once() -> bool:
    """Every new AppTest gives its run a new ScriptCache (streamlit.testing.v1.app_test), so each
    page test read, rewrote for Streamlit's "magic" and compiled app.py and its page's script
    again: 11 s of the page stage's CPU. A server keeps one ScriptCache for all its sessions;
    here a test process keeps one for all its AppTests. The scripts do not change while the
    tests run. True when shared; False when this Streamlit builds its cache elsewhere (the tests
    are then slower, no less right: tests/test_apptest_helpers.py says so)."""
    try:
        from streamlit.runtime.scriptrunner.script_cache import ScriptCache
        from streamlit.testing.v1 import app_test
    except ImportError:
        return False
    current = getattr(app_test, "ScriptCache", None)
    if current is not ScriptCache:
        return getattr(current, "shared_by_the_tests", False)
    shared = ScriptCache()

    def one_cache() -> ScriptCache:
        return shared

    one_cache.shared_by_the_tests = True
    app_test.ScriptCache = one_cache
    return True


compile_page_scripts_once()

# Under pytest-xdist each worker takes its share of the cores: two workers on two cores with
# two torch threads each would wait on each other at every op.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    import torch
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))

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
def trained(tmp_path_factory):
    """trained(n_layers=2, ...) -> the TrainResult of one full default-length training of the
    training lab with those settings, run once per test run (each is ~25 s on an idle core,
    minutes on a busy one) and shared by the tests of lesson_model.training, of the page and of
    the Predict question (tests/test_predict_model.py, in the parity stage). It is kept with the
    analyses on disk (course/cache/stored.py, keyed by the settings and by lesson_model's code):
    the workers of one pytest, and the stages of one ./lab test-stages run (one folder for all),
    share it: the first to ask trains while the others wait on the file's lock, then read it.
    Without that folder (a test run that cleared $DECODER_LAB_ANALYSIS_CACHE), the run's
    temporary folder does the same for one pytest. max_seconds is lifted so a loaded machine
    cannot cut a run short."""
    import hashlib

    import torch

    from course.cache import stored
    from lesson_model import training
    from tests._shared import locked, run_folder

    shared = run_folder(tmp_path_factory)
    results = {}

    def run(**changes):
        settings = training.TrainSettings(**changes)
        if settings not in results:
            if stored.folder() is not None:
                results[settings] = stored.kept(("tests.conftest.trained", repr(settings)),
                                                lambda: training.run(settings, max_seconds=3600))
                return results[settings]
            path = shared / f"training-{hashlib.sha256(repr(settings).encode()).hexdigest()[:16]}.pt"
            with locked(path.with_suffix(".lock")):
                if path.exists():
                    results[settings] = torch.load(path, weights_only=False)
                else:
                    results[settings] = training.run(settings, max_seconds=3600)
                    torch.save(results[settings], path.with_suffix(".part"))
                    os.replace(path.with_suffix(".part"), path)
        return results[settings]

    return run


@pytest.fixture(scope="session")
def warm_app():
    """Run the app once per bundled model so both sit on the app's model shelf (server.models)
    for every AppTest: a page test's own run then has no model load in its APP_TIMEOUT. (The app
    loads its own copies: a test that compares a page with ``lm`` or ``gemma`` asks for them.)
    Then the induction lesson's per-model experiments, as the server's warm-up computes them
    (course/cache): a minute or two per model on a busy machine, which a page test's first run
    of that lesson would otherwise spend inside its APP_TIMEOUT. The experiments are kept on
    disk for the run (course/cache/stored.py): with several workers, odd-numbered ones take the
    models in the other order and each computes its first model's experiment; the other model's
    it reads in a background thread, which waits (on the file's lock, no CPU) while another
    worker computes it, and this worker starts on its tests meanwhile."""
    import threading

    from streamlit.testing.v1 import AppTest

    from course import cache
    from server.models import shelf
    order = ["smollm2-135m", "gemma-3-270m"]
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker[2:].isdigit() and int(worker[2:]) % 2:
        order.reverse()
    for n, model in enumerate(order):
        at = AppTest.from_file(str(APP), default_timeout=600)
        at.query_params["model"] = model
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        if n == 0:      # at once: the other worker's background thread must find this one's lock taken
            cache.warm("induction", shelf(model), "en")
    if worker:
        threading.Thread(target=cache.warm, args=("induction", shelf(order[1]), "en"), daemon=True,
                         name="warm-induction").start()
    else:
        cache.warm("induction", shelf(order[1]), "en")
    return True


@pytest.fixture
def open_page(warm_app):
    """open_page(page, lang=..., prompt=..., params={...}, locale=..., model=...) -> AppTest after its run.

    Like opening ``/<page>?lang=..&prompt=..&<params>`` in a browser: every parameter is in the
    URL for the first run, and that run is the page's (AppTest's switch_page before the first
    run finds the page by its file name, which is its url_path here, course/nav.py); home runs
    only when it is the page asked for.
    """
    from streamlit.testing.v1 import AppTest

    from course import nav

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
        for key, value in (params or {}).items():
            at.query_params[key] = str(value)
        if page != nav.HOME:
            at.switch_page(nav.page_file(page))
        return at.run()

    return _open


# --------------------------------------------------------------------------- stages

STAGES = ("unit", "parity", "page", "server", "browser")    # the order .ci/run runs them in: cheapest first
PAGE_FIXTURES = frozenset({"open_page", "warm_app"})        # an AppTest of app.py
REAL_WEIGHTS_FIXTURES = frozenset({                          # the bundled models, or transformers' load of them
    "lm", "gemma", "models",                                # here
    "smollm2", "gemma_lm", "reference", "gemma_reference", "reference_tokenizer",   # tests/_fixtures_model.py
})
SERVER_FIXTURES = frozenset({"redis_url"})                  # a redis-server process (tests/test_class_store.py)
BROWSER_DIR = Path(__file__).resolve().parent / "browser"


def explicit_stages(item) -> set[str]:
    """The stage marks put on the test, its class or its module."""
    return {mark.name for mark in item.iter_markers() if mark.name in STAGES}


def stage_of(item) -> str:
    """The test's stage: its explicit mark, else derived from what it uses. The heaviest thing
    the test needs decides: a live server for Chromium (tests/browser/), an AppTest run, a server
    process, the real weights; anything else (tiny random models, tokenizers, catalogs, state,
    pure functions) is a unit test."""
    explicit = explicit_stages(item)
    if len(explicit) > 1:
        raise pytest.UsageError(f"{item.nodeid}: more than one stage mark {sorted(explicit)}; "
                                f"a test has exactly one of {', '.join(STAGES)}")
    if explicit:
        return explicit.pop()
    used = set(getattr(item, "fixturenames", ()))
    if BROWSER_DIR in Path(str(item.path)).parents:
        return "browser"
    if used & PAGE_FIXTURES:
        return "page"
    if used & SERVER_FIXTURES:
        return "server"
    if used & REAL_WEIGHTS_FIXTURES:
        return "parity"
    return "unit"


# Work units under pytest-xdist's --dist loadgroup (lab: stage_args): a test that uses one of these
# fixtures joins the group named here, so one worker builds the expensive thing once for all of
# them; every other test (without an xdist_group mark of its own) is handed out alone, to
# whichever worker is free. The groups with the most tests are handed out first.
XDIST_GROUPS = {
    "gemma_reference": "gemma-reference",       # transformers' load of Gemma (~45 s) and the outputs its files keep
    "empty_cache": "smollm2-conversion",        # tests/test_loading.py: the real SmolLM2 conversion, once a process
}
# xdist 3.8 tells its controller a test's group by appending "@group" to the test's node id in
# the worker, which pytest 9.2's structured node ids ignore (pytest-xdist issue 1386: the groups
# silently stop working). So the workers write each grouped test's group into this folder as
# they collect, and the controller's scheduler (pytest_xdist_make_scheduler below) reads it.
_GROUPS_ENV = "DECODER_LAB_XDIST_GROUPS"
if not os.environ.get("PYTEST_XDIST_WORKER") and not os.environ.get(_GROUPS_ENV):
    import atexit
    import shutil
    import tempfile
    os.environ[_GROUPS_ENV] = tempfile.mkdtemp(prefix="decoder-lab-xdist-groups-")
    atexit.register(shutil.rmtree, os.environ[_GROUPS_ENV], True)


def xdist_group_of(item) -> str | None:
    """The test's work unit under --dist loadgroup: its xdist_group marks' names (joined, as
    xdist does), else the group XDIST_GROUPS gives it, else None (handed out alone)."""
    marked = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                     for mark in item.iter_markers("xdist_group")})
    if marked:
        return "_".join(marked)
    used = set(getattr(item, "fixturenames", ()))
    return next((group for fixture, group in XDIST_GROUPS.items() if fixture in used), None)


@pytest.hookimpl(optionalhook=True)     # a hook of pytest-xdist: none without it (-p no:xdist)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadgroup with the groups the workers wrote (see _GROUPS_ENV); xdist's own for any other --dist."""
    if config.getvalue("dist") != "loadgroup":
        return None
    import json

    from xdist.scheduler import LoadGroupScheduling

    class Grouped(LoadGroupScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:      # asked once every worker has collected (and written its file)
                self.groups = {}
                for path in sorted(Path(os.environ[_GROUPS_ENV]).glob("*.json")):
                    self.groups.update(json.loads(path.read_text()))
            return self.groups.get(nodeid) or super()._split_scope(nodeid)

    return Grouped(config, log)


# The longest tests of the server and browser stages (15 s to a minute or more each: they start
# servers of their own, wait on restarts, drive six tabs), handed out first to their stage's
# workers: lab's --dist load gives out tests in collection order (the same in every worker, as
# pytest-xdist requires), and one of these drawn last would run alone while the other worker idles.
LONGEST_FIRST = (
    "test_five_students_follow_one_teacher",                                        # browser
    "test_the_teacher_reloads_or_comes_back_after_the_session_is_gone_and_keeps_the_class",
    "test_a_lesson_walked_with_the_keyboard_alone",
    "test_deep_link_as_first_request_of_a_fresh_server",
    "test_a_killed_app_process_is_restarted_and_its_student_reconnects_and_follows",  # server
    "test_students_on_a_cold_server_see_the_model_load_progress",
    "test_many_sessions_open_every_page_at_once_on_a_fresh_server",
    "test_a_student_on_another_process_follows_the_teacher_through_nginx",
)


@pytest.hookimpl(tryfirst=True)     # before pytest's own -m selection reads the marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        stage = stage_of(item)          # raises on two stage marks
        if not explicit_stages(item):
            item.add_marker(stage)
    rank = {name: n for n, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(getattr(item, "originalname", item.name), len(LONGEST_FIRST)))
    worker, folder = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get(_GROUPS_ENV)
    if worker and folder and getattr(config.option, "loadgroup", False):     # in a worker of --dist loadgroup
        import json
        groups = {item.nodeid: group for item in items if (group := xdist_group_of(item)) is not None}
        part = Path(folder) / f"{worker}.part"
        part.write_text(json.dumps(groups))
        os.replace(part, part.with_suffix(".json"))
