"""Predict, then see, without a model: scoring at its edges, the question's checks, the
class's question store (memory, and Redis in the server stage), and the chart builder."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch

from classroom import poll_store as ps
from classroom import store as cs
from course.predict import core
from course.predict.core import Question, score_choice, score_number, score_token
from tests.test_class_store import redis_server



@pytest.mark.unit
def test_choice_scoring():
    assert score_choice(2, 2).right and score_choice(2, 2).value == 1.0 and score_choice(2, 2).off is None
    wrong = score_choice(2, 0)
    assert not wrong.right and wrong.value == 0.0 and wrong.off == ("predict.off.choice", {})


@pytest.mark.unit
def test_number_scoring_linear_edges():
    exact = score_number(12, 12)
    assert exact.right and exact.value == 1.0
    assert score_number(12, 12.4).right                       # an integer answer: 12.4 rounds off to it
    more, fewer = score_number(12, 15), score_number(12, 9)
    assert not more.right and more.off == ("predict.off.more", {"n": "3"})
    assert fewer.off == ("predict.off.fewer", {"n": "3"}) and math.isclose(more.value, fewer.value)
    assert 0 < more.value < 1
    assert score_number(12, 200).value == 0.0                  # far off: nothing, never negative
    assert score_number(0, 1, low=0, high=17).value > 0        # an answer of 0 still has a scale
    assert score_number(10, 11).value > score_number(10, 13).value > score_number(10, 16).value


@pytest.mark.unit
def test_number_scoring_log_edges():
    assert score_number(1.35e8, 1.35e8, log=True).right
    assert score_number(1.35e8, 1.4e8, log=True).right         # within 10%
    high, low = score_number(1e8, 1e9, log=True), score_number(1e8, 1e7, log=True)
    assert high.value == 0.0 and low.value == 0.0              # a factor of 10: nothing
    assert high.off[0] == "predict.off.factor_high" and low.off[0] == "predict.off.factor_low"
    assert high.off[1] == {"x": "10.0"}
    half = score_number(1e8, 1e8 * 10 ** 0.5, log=True)
    assert math.isclose(half.value, 0.5, abs_tol=1e-9)
    assert score_number(1e8, 2e8, log=True).value == pytest.approx(score_number(1e8, 5e7, log=True).value)
    with pytest.raises(ValueError):
        score_number(1e8, 0, log=True)


@pytest.mark.unit
def test_token_scoring():
    probs = torch.tensor([0.6, 0.3, 0.1])
    right = score_token(0, [0], probs, 0.6)
    assert right.right and right.value == 1.0 and right.note is None
    second = score_token(0, [1], probs, 0.6)
    assert not second.right and second.value == pytest.approx(0.5)
    assert second.off == ("predict.off.token", {"p": "30%"})
    several = score_token(0, [0, 2], probs, 0.6)               # right first token, but two tokens
    assert not several.right and several.note == ("predict.note.first_token", {"n": 2})
    assert several.value == 1.0
    assert score_token(0, [], probs, 0.6).off == ("predict.off.empty", {})


@pytest.mark.unit
def test_percent_and_guess_candidates():
    assert core.percent(0.42) == "42%" and core.percent(0.031) == "3.1%" and core.percent(0.0004) == "0.04%"
    assert core.percent(1e-7) == "<0.01%"
    assert core.guess_candidates("Rome", False) == ["Rome", " Rome"]
    assert core.guess_candidates("Rome", True) == ["Rome"]
    assert core.guess_candidates(" Rome", False) == [" Rome"]
    assert core.guess_candidates("  ", False) == []
    probs = torch.tensor([0.1, 0.7, 0.2])
    assert core.best_guess([[0, 2], [1]], probs) == [1] and core.best_guess([[], []], probs) == []


@pytest.mark.unit
def test_question_checks_and_keys():
    q = Question("x.y", "abc", "choice", ("k", {}), ("w", {}), 1, options=("a", "b"))
    assert q.key == "x.y:abc" and "answer" not in q.public() and "why" not in q.public()
    with pytest.raises(ValueError):
        Question("x.y", "abc", "choice", ("k", {}), ("w", {}), 2, options=("a", "b"))
    with pytest.raises(ValueError):
        Question("x.y", "abc", "poll", ("k", {}), ("w", {}), 0)
    assert core.run_digest("m", [1, 2]) != core.run_digest("m", [1, 3])


@pytest.mark.unit
def test_question_modules_load_without_streamlit():
    code = ("import sys, course.predict, course.predict.builders, classroom.poll_store, course.figures.predict; "
            "sys.exit(1 if 'streamlit' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


@pytest.mark.unit
def test_pending_question_and_option_fields():
    q = Question("x.y", "abc", "choice", ("k", {}), ("", {}), None, options=("a", "b"), option_keys=True,
                 option_fields=({"n": 1}, {"n": 2}))
    assert q.pending and q.public()["option_fields"] == [{"n": 1}, {"n": 2}]
    assert not Question("x.y", "abc", "choice", ("k", {}), ("w", {}), 0, options=("a", "b")).pending
    with pytest.raises(ValueError):
        Question("x.y", "abc", "choice", ("k", {}), ("w", {}), 0, options=("a", "b"), option_fields=({},))


# --- the training lab's question (pure: made-up histories) -----------------------------------

def _history(scores, every=25):
    from lesson_model.training import Progress
    return [Progress(step=i * every, steps=every * (len(scores) - 1), elapsed_s=0.0, loss=1.0, loss_repeat=1.0,
                     induction=[0.01, s], prev_token=[0.5, 0.1], best_heads=[0, 1], prev_heads=[0, 0])
            for i, s in enumerate(scores)]


def _result(settings, history, stopped="done"):
    from lesson_model.training import TrainResult, phase_change
    return TrainResult(settings=settings, history=history, checkpoints=[], phase_step=phase_change(history),
                       stopped=stopped, seconds=1.0, steps_done=history[-1].step)


@pytest.mark.unit
def test_train_bins_and_bin_edges():
    from course.predict.builders import train_bin, train_bins
    assert train_bins(2000, 25) == [0, 500, 1000, 1500, 2000]
    assert train_bins(100, 25) == [0, 25, 50, 75, 100]
    assert train_bins(110, 25) == [0, 25, 50, 75, 110]            # the last part ends at the run's end
    edges = [0, 500, 1000, 1500, 2000]
    assert [train_bin(s, edges) for s in (0, 25, 500, 525, 1000, 1500, 1525, 2000)] == [0, 0, 0, 1, 1, 2, 3, 3]
    assert train_bin(None, edges) == 4                               # no phase change: the last option
    with pytest.raises(ValueError):
        train_bin(2025, edges)


@pytest.mark.unit
def test_train_question_pending_then_answered():
    from course.predict.builders import train_question
    from lesson_model.training import PHASE_THRESHOLD, TrainSettings
    settings = TrainSettings(steps=200)                              # parts: 0-50, 50-100, 100-150, 150-200
    pending = train_question(settings)
    assert pending.pending and pending.kind == "choice" and len(pending.options) == 5
    assert pending.option_fields[0] == {"low": "0", "high": "50"} and pending.option_fields[-1] == {"steps": "200"}
    assert pending.options[-1] == "predict.train.never" and pending.intro == "predict.train.intro"
    # the score crosses the threshold at step 75, dips at 100, and stays from 125: the phase is 125
    scores = [0.0, 0.1, 0.2, 0.35, 0.2, 0.4, 0.5, 0.6, 0.7]
    done = train_question(settings, _result(settings, _history(scores)))
    assert not done.pending and done.key == pending.key               # the learner's guess carries over
    assert done.answer == 2 and done.answer_text == "125"
    assert done.why == ("predict.train.why_phase", {"step": "125", "threshold": core.percent(PHASE_THRESHOLD),
                                                    "score": "70%", "layer": 1, "end": "200"})
    never = train_question(settings, _result(settings, _history([0.0, 0.1, 0.35, 0.2, 0.25, 0.1, 0.1, 0.1, 0.29])))
    assert never.answer == 4 and never.why[0] == "predict.train.why_never"
    assert never.why[1]["score"] == "35%" and never.why[1]["at"] == "50"
    # a run cut short, or of other settings, answers nothing yet
    assert train_question(settings, _result(settings, _history(scores), stopped="time")).pending
    assert train_question(settings, _result(TrainSettings(steps=200, seed=1), _history(scores))).pending
    assert train_question(TrainSettings(steps=200, seed=1)).key != pending.key



@pytest.mark.unit
def test_train_answers_csv_reads_options_in_words():
    """The training lab's options are catalog keys: the teacher's CSV writes them as the class read
    them (option_text), not as keys; without option_text an option is written as stored."""
    import csv
    import io

    from course.predict.builders import answers_csv, train_question
    from lesson_model.training import TrainSettings
    settings = TrainSettings(steps=200)
    q = train_question(settings, _result(settings, _history([0.0, 0.1, 0.2, 0.35, 0.2, 0.4, 0.5, 0.6, 0.7])))
    answers = [{"nick": "a", "lang": "en", "value": 2}, {"nick": "b", "lang": "zh-Hant", "value": 4}]
    words = lambda i: f"part {i} " + " ".join(f"{k}={v}" for k, v in sorted(q.option_fields[i].items()))
    rows = list(csv.reader(io.StringIO(answers_csv(q, answers, option_text=words))))
    assert [r[3] for r in rows[1:]] == ["part 2 high=150 low=100", "part 4 steps=200"]
    assert [r[4] for r in rows[1:]] == ["True", "False"]
    rows = list(csv.reader(io.StringIO(answers_csv(q, answers))))
    assert [r[3] for r in rows[1:]] == ["predict.train.part", "predict.train.never"]

# --- the class's question store ---------------------------------------------------------------

SPEC = {"id": "heads.previous", "key": "heads.previous:abc", "kind": "choice", "text": ["k", {}],
        "options": ["L1.H1", "L2.H2"], "option_keys": False, "low": 0, "high": 0, "log": False, "integer": True,
        "unit": ""}


def check_poll_store(store):
    polls = ps.polls(store)
    code, secret = store.create()
    assert polls.current(code) is None
    with pytest.raises(cs.NotTeacher):
        polls.ask(code, "wrong", SPEC)
    poll = polls.ask(code, secret, SPEC)
    assert polls.current(code).question == SPEC and polls.current(code).state == "open"
    assert polls.answer(code, poll.id, "a", {"value": 1, "nick": "  Mei  ", "lang": "zh-Hant", "at": 1.0})
    assert polls.answer(code, poll.id, "b", {"value": 0, "at": 2.0})
    assert polls.answer(code, poll.id, "b", {"value": 1, "at": 3.0})        # changed their mind: one answer each
    assert polls.count(code, poll.id) == 2
    assert not polls.answer(code, poll.id + 1, "c", {"value": 0})           # another question
    with pytest.raises(cs.NotTeacher):
        polls.answers(code, "wrong", poll.id)
    rows = polls.answers(code, secret, poll.id)
    assert [r["value"] for r in rows] == [1, 1] and rows[0]["nick"] == "Mei" and rows[0]["lang"] == "zh-Hant"
    with pytest.raises(ValueError):
        polls.answer(code, poll.id, "d", {"value": {"x": 1}})
    revealed = polls.reveal(code, secret, poll.id, {"n": 2})
    assert revealed.state == "revealed" and revealed.reveal == {"n": 2}
    assert not polls.answer(code, poll.id, "e", {"value": 0})               # closed by the reveal
    again = polls.ask(code, secret, SPEC)
    assert again.id == poll.id + 1 and polls.count(code, again.id) == 0     # a new question, no answers
    polls.close(code, secret)
    assert polls.current(code) is None
    polls.ask(code, secret, SPEC)
    store.end(code, secret)                                                 # answers end with the class
    assert polls.current(code) is None
    with pytest.raises(cs.ClassGone):
        polls.answer(code, again.id + 1, "a", {"value": 0})


@pytest.mark.unit
def test_poll_store_memory():
    check_poll_store(cs.MemoryStore())


@pytest.mark.server
def test_poll_store_redis():
    with redis_server() as url:
        store = cs.RedisStore.from_url(url)
        check_poll_store(store)
        code, secret = store.create()
        ps.polls(store).ask(code, secret, SPEC)
        assert store._r.ttl(cs._PREFIX + code + ":poll") > 0                # expires with the class


@pytest.mark.unit
def test_clean_answer_bounds():
    kept = ps.clean_answer({"value": "x" * 500, "nick": "n" * 100, "lang": "zh-Hant-TW-extra"})
    assert len(kept["value"]) == ps.MAX_ANSWER_CHARS and len(kept["nick"]) == ps.MAX_NICK and len(kept["lang"]) == 8
    with pytest.raises(ValueError):
        ps.clean_answer({"value": True})


@pytest.mark.unit
def test_class_chart():
    from course.figures.predict import class_answers_figure
    fig = class_answers_figure(lambda k, **f: k, ["a", "b"], [66.7, 33.3], [True, False], [40.0, 5.0])
    assert len(fig.data) == 2 and list(fig.data[0]["x"]) == [66.7, 33.3]
    assert fig.data[0]["marker"]["color"][0] != fig.data[0]["marker"]["color"][1]


@pytest.mark.unit
def test_student_block_follows_the_class_question_on_the_follow_poll(monkeypatch):
    """A following student's block has no timer of its own: the follow poll (classroom/follow.py)
    looks at the class's question and reruns the block, a keyed fragment, only when what it drew
    is out of date (asked, revealed, closed), and only from a fragment run of the poll."""
    from classroom import follow, poll

    store = cs.MemoryStore()
    cs.reset_store(store)
    try:
        state: dict = {}
        reruns: list[str] = []
        fragment_run = [True]
        monkeypatch.setattr(poll.st, "session_state", state)
        monkeypatch.setattr(poll.session, "in_fragment_run", lambda: fragment_run[0])
        monkeypatch.setattr(poll.session, "rerun_fragment", lambda key: reruns.append(key) or True)
        assert poll._look in follow._ON_POLL
        code, secret = store.create()
        join = {"code": code, "following": True}
        key = SPEC["key"]
        state[poll._DRAWN] = poll.mark(code, key, None)          # the block drew "not asked"
        poll._look(join)
        assert reruns == []                                      # nothing changed: no rerun
        asked = ps.polls(store).ask(code, secret, SPEC)
        fragment_run[0] = False
        poll._look(join)
        assert reruns == []                                      # a full run draws the block anyway
        fragment_run[0] = True
        poll._look(join)
        assert reruns == [poll.BLOCK]                            # asked: the block reruns
        state[poll._DRAWN] = poll.mark(code, key, ps.polls(store).current(code))
        poll._look(join)
        assert reruns == [poll.BLOCK]
        ps.polls(store).reveal(code, secret, asked.id, {"n": 0})
        poll._look(join)
        assert reruns == [poll.BLOCK] * 2                        # revealed: again
        other = dict(SPEC, key="another.question")
        state[poll._DRAWN] = poll.mark(code, key, ps.polls(store).current(code))
        ps.polls(store).ask(code, secret, other)                 # a question about another block
        poll._look(join)
        assert reruns == [poll.BLOCK] * 3                        # this block goes back to the learner's own
        monkeypatch.setattr(poll.session, "rerun_fragment", lambda key: False)
        state[poll._DRAWN] = poll.mark(code, key, None)
        ps.polls(store).ask(code, secret, SPEC)
        poll._look(join)
        assert poll._DRAWN not in state                          # no block on this page: stop looking
    finally:
        cs.reset_store()
