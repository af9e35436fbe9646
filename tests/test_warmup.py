"""The server's start-up warm-up (server/warmup.py): what it computes is exactly what a lesson's
first view reads (a warmed lesson opens without a forward pass), and on a real server it logs
its time; and what a student sees while a cold server loads its model (course/model.py's
progress bar), over the websocket."""

from __future__ import annotations

import gc
import tempfile
import threading
import time
import weakref
from pathlib import Path

import pytest

from course import cache, i18n, nav
from course import model as models
from course.model import default_model
from server import warmup
from server.models import run_cache
from tools import browser as harness
from tools.protocol import Client

from tests._inputs import record_fresh_inputs, without_bos

WARMED = [page for page in nav.PAGES if page not in nav.NO_MODEL]


def test_every_lesson_that_runs_a_model_has_a_warm_up_and_the_lab_without_one_has_none():
    assert cache.lessons() == WARMED
    assert all(cache.warmer(page) is None for page in nav.NO_MODEL)


def test_views_cover_every_lesson_model_and_language_default_models_first(monkeypatch):
    monkeypatch.delenv(warmup.PAGES_ENV, raising=False)
    views = warmup.views()
    assert len(views) == len(set(views)) == len(WARMED) * len(models.MODELS) * 3
    assert {(p, lang, m) for p in WARMED for lang in warmup.LANGS for m in models.MODELS} == set(views)
    longest = [(page, key) for page, _, key in views[:len(models.MODELS)]]
    assert longest == [("induction", key) for key in models.MODELS]     # a minute of CPU: beside the rest
    first = [view for view in views[len(models.MODELS):3 * len(WARMED)]]  # each language on the model it starts on
    assert {(lang, m) for _, lang, m in first} == {(lang, default_model(lang)) for lang in warmup.LANGS}
    monkeypatch.setenv(warmup.PAGES_ENV, "home, train")
    assert {p for p, _, _ in warmup.views()} == {"home"}


@pytest.mark.page
@pytest.mark.parametrize("page, lang, model", [
    *[(page, "en", "smollm2-135m") for page in WARMED],
    *[(page, "zh-Hant", "gemma-3-270m") for page in WARMED],
])
def test_a_warmed_lesson_opens_without_a_forward_pass(open_page, models, page, lang, model, monkeypatch):
    """The warm-up computes what the lesson's first view reads: after warm(), opening the lesson
    on that language's default prompt and model runs the model no more (every run it asks for is
    in the shared run cache; its cached analyses are Streamlit's cache_data, filled by the same
    functions). And every input the warm-up and the view gave the model begins with its <bos>
    (Gemma's; the one rule, LessonModel.with_bos), whichever path built it."""
    seen = record_fresh_inputs(monkeypatch)
    run_cache().clear()
    cache.warm(page, models[model], lang)
    before = run_cache().computed
    at = open_page(page, lang=lang, model=model)
    assert not at.exception, [e.value for e in at.exception]
    assert run_cache().computed == before, f"{page} ran the model on its first view after the warm-up"
    assert not without_bos(seen, models[model]), f"{page}: inputs without <bos>"


def test_load_progress_moves_forward_through_the_stages():
    load = models.ModelLoad("gemma-3-270m")
    seen = []
    for stage, fraction in [("preparing", 0.0), ("converting", 0.0), ("converting", 0.5), ("converting", 0.9),
                            ("writing", 0.0), ("loading", 0.0)]:
        load.report(stage, fraction)
        seen.append(models._load_fraction(load))
    assert seen == sorted(seen) and 0 <= seen[0] < seen[-1] < 1


@pytest.mark.server
def test_server_warms_itself_up_and_logs_it():
    log = Path(tempfile.mkdtemp(prefix="warmup-test-")) / "server.log"
    env = {warmup.ENV: "1", warmup.PAGES_ENV: "home,train"}
    with harness.streamlit_server(env=env, log_path=log, timeout=300) as base:
        deadline = time.monotonic() + 600
        while warmup.DONE_LINE not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        line = next(x for x in log.read_text().splitlines() if x.startswith(warmup.DONE_LINE))
        # home in 3 languages x 2 models (the training lab runs no bundled model: nothing to warm)
        assert line.endswith(": 6 views, 0 errors"), line
        assert "(models " in line and " s, lessons " in line, line          # where the time went
        with Client(base, timeout=120) as client:         # both models are loaded: no progress bar
            result = client.open("home", {"lang": "zh-Hant"})
        assert result.ok and result.progress == []


@pytest.mark.server
def test_students_on_a_cold_server_see_the_model_load_progress():
    """A fresh cache: the first start converts SmolLM2's packaged weights (tens of seconds).
    Two students who arrive then both see a progress bar that moves and says what is done,
    then their page."""
    cache = tempfile.mkdtemp(prefix="cold-cache-")
    env = {warmup.ENV: "0", "DECODER_LAB_CACHE": cache}
    catalog = i18n.catalog("en")
    with harness.streamlit_server(env=env, timeout=300) as base:
        results = {}

        def student(i):
            with Client(base, timeout=600) as client:
                results[i] = client.open("home", {"lang": "en", "model": "smollm2-135m"})

        threads = [threading.Thread(target=student, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
            time.sleep(1)
        for thread in threads:
            thread.join(timeout=900)
        converting = catalog["model.stage.converting"].split("{name}")[0]
        for i in range(2):
            result = results[i]
            assert result.ok, (result.status, result.exceptions, result.problems)
            values = [v for v, _ in result.progress]
            assert len(values) >= 3 and values == sorted(values), values     # it moves, forwards
            assert any(converting in text for _, text in result.progress), result.progress
            assert any(text.endswith("s)…") for _, text in result.progress)   # the time so far
    folders = [p.name for p in Path(cache).iterdir()]
    assert len([f for f in folders if f.startswith("smollm2")]) == 1, folders   # one conversion for both


def test_collect_garbage_frees_a_finished_pages_namespace():
    """A script's namespace and the functions it defines form a cycle: with the automatic
    collector off it outlives the run, holding its tensors, until collect_garbage."""
    gc.disable()
    try:
        namespace: dict = {}
        exec("import torch\nresult = torch.zeros(1000)\ndef label(i):\n    return str(result[i])\n", namespace)
        held = weakref.ref(namespace["result"])
        del namespace
        assert held() is not None                 # garbage, but a cycle: nothing frees it yet
        assert warmup.collect_garbage() >= 0
        assert held() is None
    finally:
        gc.enable()
