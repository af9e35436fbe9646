"""AppTests of the Training lab (/train): renders in three languages without touching the big
models, Start trains a short run to the end through the class queue, the notice is computed
from the run, a second session gets the result replayed, bad URL values are clamped with a
note. And "What to notice" checked against real trainings (lesson_model.training.run)."""

from __future__ import annotations

import time

import pytest
import torch

from course import i18n
from course.figures import train as F
from course.notices import train as N
from lesson_model import training as T
from server.training_queue import DONE, shared_queue
from tests._apptest import charts, errors, text_of

SHORT = {"steps": "100", "layers": "1", "seed": "4242"}      # the shortest training the limits allow


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """The tiny model trains several times faster on one thread than on two busy cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def no_big_model(monkeypatch):
    """The page must not ask for the pretrained model, a forward pass, or the prompt's tokens."""
    import inspect

    from course.lesson import Lesson

    def guard(original):
        def wrapper(*args, **kwargs):
            if any(frame.filename.endswith("app_pages/train.py") for frame in inspect.stack()):
                raise AssertionError("the Training lab touched the big model")
            return original(*args, **kwargs)
        return wrapper

    for name in ("model", "run", "tokens"):
        monkeypatch.setattr(Lesson, name, guard(getattr(Lesson, name)))


def test_page_source_does_not_load_models():
    source = open("app_pages/train.py", encoding="utf-8").read()
    for word in ("page.model(", "get_model", "load_model", "page.run(", "page.tokens(", "course.model", "ui import model"):
        assert word not in source


@pytest.mark.parametrize("lang", list(i18n.LANGS))
def test_renders_in_three_languages(open_page, no_big_model, lang):
    at = open_page("train", lang=lang)
    assert not errors(at)
    assert at.title[0].value == i18n.catalog(lang)["nav.train"]
    assert "loss_chart" in charts(at)
    assert at.button(key="start").label == i18n.catalog(lang)["train.start"]
    assert at.button(key="cancel").disabled
    assert at.slider(key="layers").value == T.TrainSettings().n_layers
    assert at.number_input(key="steps").value == T.TrainSettings().steps


def _wait_done(at, timeout=240.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = at.session_state["_train_job"] if "_train_job" in at.session_state else None
        if job is not None and not job.active:
            return at.run()
        time.sleep(0.5)
        at.run()         # as the fragment's polling would (and it touches the job: still watched)
    raise AssertionError("the training did not finish")


def test_start_trains_to_done_and_notices(open_page, no_big_model):
    at = open_page("train", lang="en", params=SHORT)
    assert not errors(at)
    at.button(key="start").click().run()
    assert not errors(at)
    job = at.session_state["_train_job"]
    assert job.settings == T.TrainSettings(n_layers=1, steps=100, seed=4242)
    at = _wait_done(at)
    assert not errors(at)
    assert job.state == DONE and job.result.stopped == "done"
    figs = charts(at)
    assert {"loss_chart", "score_chart"} <= set(figs)
    loss = figs["loss_chart"]["data"]
    assert loss[1]["y"] == pytest.approx([round(p.loss_repeat, 4) for p in job.result.history], abs=1e-4)
    assert len(loss[0]["x"]) == len(job.result.history) <= 100 // T.EVAL_EVERY + 1
    # the guessing line at log V
    assert figs["loss_chart"]["layout"]["shapes"][0]["y0"] == pytest.approx(T.log_vocab())
    # one pattern per shown head, SEQ_LEN x SEQ_LEN
    for layer, head, kind in F.shown_heads(job.result):
        assert len(figs[f"pattern_{layer}_{head}_{kind}"]["data"][0]["z"]) == T.SEQ_LEN
    assert at.select_slider(key="ckpt").value == job.result.checkpoints[-1].step
    text = text_of(at)
    for key, fields in N.observations(job.result, T.log_vocab()):
        assert i18n.catalog("en")[f"train.notice.{key}"].format(**fields) in text
    keys = [k for k, _ in N.observations(job.result, T.log_vocab())]
    assert "none" in keys and "one_layer" in keys          # 100 steps of one layer: nothing formed
    assert at.button(key="start").disabled                  # trained: nothing to start
    # a classmate opening the same link gets it at once, from the cache
    t0 = time.perf_counter()
    other = open_page("train", lang="zh-Hant", params=SHORT)
    assert not errors(other)
    assert "score_chart" in charts(other)
    assert i18n.catalog("zh-Hant")["train.replayed"].split("{")[0] in text_of(other)
    assert shared_queue().cached(job.settings) is job
    assert time.perf_counter() - t0 < 60
    # the step slider: the first checkpoint is the untrained model
    at.select_slider(key="ckpt").set_value(0).run()
    assert not errors(at)
    fig = charts(at)[f"pattern_{F.shown_heads(job.result)[0][0]}_{F.shown_heads(job.result)[0][1]}_induction"]
    assert "step 0<br>" in fig["layout"]["title"]["text"]


def test_cancel_stops_the_run(open_page, no_big_model):
    at = open_page("train", lang="en", params={"steps": "4000", "layers": "1", "seed": "777"})
    at.button(key="start").click().run()
    job = at.session_state["_train_job"]
    assert job.active and not at.button(key="cancel").disabled
    at.button(key="cancel").click().run()
    assert not errors(at)
    assert "_train_job" not in at.session_state
    deadline = time.monotonic() + 60
    while job.active and time.monotonic() < deadline:
        time.sleep(0.2)
    assert job.state == "cancelled"
    assert shared_queue().cached(job.settings) is None


def test_bad_url_values_clamp_with_a_note(open_page, no_big_model):
    at = open_page("train", lang="en", params={"layers": "9", "steps": "99999", "seed": "-3", "lr": "banana",
                                               "offset": "sideways", "positions": "maybe"})
    assert not errors(at)
    hi = T.LIMITS["n_layers"][1]
    assert at.slider(key="layers").value == hi
    assert at.number_input(key="steps").value == T.LIMITS["steps"][1]
    assert at.number_input(key="seed").value == 0
    assert at.selectbox(key="lr").value == "1e-3"
    notes = " ".join(w.value for w in at.warning)
    for param in ("layers=9", "steps=99999", "seed=-3", "lr=banana", "offset=sideways", "positions=maybe"):
        assert param in notes


def test_try_this_sets_the_controls(open_page, no_big_model):
    at = open_page("train", lang="en")
    at.button(key="try_2").click().run()
    assert not errors(at)
    assert at.slider(key="layers").value == 1
    assert at.query_params.get("offset") in ("fixed", ["fixed"])


# --- What to notice on real trainings -------------------------------------------------------------

def _keys(result):
    return [key for key, _ in N.observations(result, T.log_vocab())]


@pytest.mark.timeout(3600)
def test_notice_fixed_offset_one_layer_is_the_shortcut(trained):
    result = trained(n_layers=1, random_offset=False)
    assert result.stopped == "done"
    obs = dict(N.observations(result, T.log_vocab()))
    last = result.history[-1]
    assert result.shortcut is not None
    assert "shortcut" in obs, obs
    assert result.shortcut.loss_repeat - last.loss_repeat >= N.SHORTCUT_GAP
    assert obs["shortcut"]["offset"] == T.FIXED_REPEAT[1] - T.FIXED_REPEAT[0]
    print(obs)


@pytest.mark.timeout(3600)
def test_notice_two_layers_random_offset_forms_a_head(trained):
    result = trained(n_layers=2)
    assert result.stopped == "done"
    obs = dict(N.observations(result, T.log_vocab()))
    assert "formed" in obs and "none" not in obs, obs
    layer, head, score = N.best_head(result.history[-1])
    assert layer >= 1 and score >= 0.6
    assert obs["formed"]["step"] == result.phase_step
    assert float(obs["loss_change"]["after"]) < float(obs["loss_change"]["before"]) - 1.0
    assert "prev_head" in obs and obs["prev_head"]["induction"] == obs["formed"]["head"]
    # Try this 1: the repeated part's loss starts near guessing and falls while the score rises
    assert result.history[0].loss_repeat > T.log_vocab() - 0.5 and result.history[-1].loss_repeat < 1.5
    print(obs)


@pytest.mark.timeout(3600)
def test_notice_one_layer_random_offset_stays_stuck(trained):
    result = trained(n_layers=1)
    assert result.stopped == "done"
    keys = _keys(result)
    assert "none" in keys and "one_layer" in keys and "formed" not in keys
    assert max(result.history[-1].induction) < 0.2


def test_the_shell_loads_no_model_for_the_training_lab(open_page, monkeypatch):
    """A cold server does not spend a model load on a student who opens /train first."""
    import classroom.shell

    def refuse(*args, **kwargs):
        raise AssertionError("the shell loaded a bundled model for /train")

    monkeypatch.setattr(classroom.shell, "get_model", refuse)
    at = open_page("train", lang="zh-Hant", model="gemma-3-270m")   # (its first run, on home, refuses)
    assert not errors(at), "the /train run itself must not ask for a model"
    assert at.title[0].value == i18n.catalog("zh-Hant")["nav.train"]
    assert at.query_params["model"] == "gemma-3-270m"     # the choice is kept for the next page
