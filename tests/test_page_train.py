"""AppTests of the Training lab (/train): renders in three languages without touching the big
models, Start trains a short run to the end through the class queue, the notice is computed
from the run, a second session gets the result replayed, bad URL values are clamped with a
note. And "What to notice" checked against real trainings (lesson_model.training.run)."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from course import i18n
from course.figures import train as F
from course.notices import train as N
from lesson_model import training as T
from server.training_queue import CANCELLED, DONE, QUEUED, RUNNING, shared_queue
from tests._apptest import charts, errors, text_of
from tests.test_training_jobs import wait_until

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


# --- the class queue's limits and a job dropped while the page was away (a fake queue) ------------

@pytest.fixture
def fake_queue(monkeypatch):
    """fake_queue(**kwargs) -> (queue, clock): the app's shared training queue replaced by one
    whose trainings wait at a gate (so a job stays queued behind a classmate's) and whose clock
    the test moves; the classmate's job "hog" is running."""
    from server import training_queue as Q

    gate = threading.Event()
    queues = []

    def train(settings, *, should_stop, max_seconds=None):
        while not gate.wait(0.01):
            if should_stop():
                break
        yield T.TrainResult(settings=settings, history=[], checkpoints=[], phase_step=None,
                            stopped="cancelled", seconds=0.0)

    def make(**kwargs):
        now = [0.0]
        q = Q.TrainQueue(train, clock=lambda: now[0], **kwargs)
        queues.append(q)
        monkeypatch.setattr(Q, "_SHARED", q)
        hog = q.submit(T.TrainSettings(seed=1), "hog", owner="hog")
        assert wait_until(lambda: hog.state == RUNNING)
        return q, now

    yield make
    gate.set()
    for q in queues:
        q.close()


def test_a_job_dropped_while_the_page_was_away(open_page, no_big_model, fake_queue):
    """Issue 33: a queued job cancelled because this tab was hidden longer than the heartbeat
    left the page raising AttributeError on job.result, on every run after."""
    q, now = fake_queue()
    at = open_page("train", lang="en", params=SHORT)
    at.button(key="start").click().run()
    assert not errors(at)
    job = at.session_state["_train_job"]
    assert job.state == QUEUED and q.busy() == (1, 1)
    # a queued learner sees their place and how many wait
    waiting = i18n.catalog("en")["train.queued_one"].format(place=1, total=1, n=1)
    assert waiting in [i.value for i in at.info]
    assert i18n.catalog("en")["train.server_queue"].format(running=1, waiting=1, limit=q.max_waiting) \
        in text_of(at)
    # the tab is hidden for 25 s: the classmate's page keeps polling, this one does not
    now[0] = shared_queue().heartbeat_s + 5
    q.touch(q.watching("hog")[0], "hog")
    q.position(q.watching("hog")[0])             # (a poll reaps the silent watchers)
    assert job.state == CANCELLED and job.result is None
    note = i18n.catalog("en")["train.dropped"].format(seconds=f"{q.heartbeat_s:.0f}")
    for _ in range(2):                           # the tab is back; and the run after it
        at.run()
        assert not errors(at)
        assert note in [w.value for w in at.warning]
        assert "_train_job" not in at.session_state
        assert not at.button(key="start").disabled and at.button(key="cancel").disabled
    at.button(key="start").click().run()
    assert not errors(at)
    again = at.session_state["_train_job"]
    assert again is not job and again.state == QUEUED
    assert note not in [w.value for w in at.warning]


def test_a_job_dropped_while_running_shows_the_note(open_page, no_big_model, fake_queue):
    q, now = fake_queue()
    q.cancel(q.watching("hog")[0], "hog")         # the classmate leaves: the worker is free
    at = open_page("train", lang="en", params=SHORT)
    at.button(key="start").click().run()
    job = at.session_state["_train_job"]
    assert wait_until(lambda: job.state == RUNNING)
    now[0] = shared_queue().heartbeat_s + 5       # nobody touches it: its training stops
    assert q.wait(job, 10) and job.state == CANCELLED and job.result is not None
    at.run()
    assert not errors(at)
    assert i18n.catalog("en")["train.dropped"].format(seconds=f"{q.heartbeat_s:.0f}") in [w.value for w in at.warning]
    assert "_train_job" not in at.session_state and not at.button(key="start").disabled


def test_a_second_start_from_one_session_leaves_one_job(open_page, no_big_model, fake_queue):
    q, now = fake_queue()
    at = open_page("train", lang="en", params=SHORT)
    at.button(key="start").click().run()
    first = at.session_state["_train_job"]
    watcher = at.session_state["_train_watcher"]
    assert at.button(key="start").disabled        # (Streamlit drops a disabled button's forged click)
    assert q.watching(watcher) == [first] and q.busy() == (1, 1)
    at.number_input(key="steps").set_value(200).run()
    assert not errors(at) and not at.button(key="start").disabled
    at.button(key="start").click().run()
    assert not errors(at)
    second = at.session_state["_train_job"]
    assert second is not first and second.settings.steps == 200
    assert first.state == CANCELLED and q.watching(watcher) == [second] and q.busy() == (1, 1)


def test_one_class_one_training(open_page, no_big_model, fake_queue):
    """Students of one class share the class's slot: the same settings join one job, other
    settings are refused with a note while the class's job is watched."""
    from classroom import follow

    q, now = fake_queue()
    code, _secret = follow.store().create()
    first = open_page("train", lang="en", params={**SHORT, "class": code})
    first.button(key="start").click().run()
    assert not errors(first)
    job = first.session_state["_train_job"]
    assert job.owner == f"class:{code}"
    second = open_page("train", lang="en", params={**SHORT, "seed": "5", "class": code})
    second.button(key="start").click().run()
    assert not errors(second)
    assert "_train_job" not in second.session_state and q.busy() == (1, 1)
    assert i18n.catalog("en")["train.class_busy"] in [w.value for w in second.warning]
    # a session outside the class still gets its own
    alone = open_page("train", lang="en", params={**SHORT, "seed": "5"})
    alone.button(key="start").click().run()
    assert alone.session_state["_train_job"].state == QUEUED and q.busy() == (1, 2)


def test_a_full_queue_says_so(open_page, no_big_model, fake_queue):
    q, now = fake_queue(max_waiting=1)
    q.submit(T.TrainSettings(seed=2), "someone")
    at = open_page("train", lang="en", params=SHORT)
    at.button(key="start").click().run()
    assert not errors(at)
    assert "_train_job" not in at.session_state and q.busy() == (1, 1)
    assert i18n.catalog("en")["train.queue_full"].format(limit=1) in [w.value for w in at.warning]


# --- What to notice on real trainings -------------------------------------------------------------

def _keys(result):
    return [key for key, _ in N.observations(result, T.log_vocab())]


@pytest.mark.timeout(3600)
@pytest.mark.xdist_group("training-1-layer-fixed-offset")   # the worker that trains it (conftest: trained)
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
@pytest.mark.xdist_group("training-2-layers")
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
@pytest.mark.xdist_group("training-1-layer")
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
