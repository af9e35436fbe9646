"""The Training lab's "What to notice" (course.notices.train.observations), branch by branch, on
made-up histories: no training, no model, no AppTest."""

import pytest

from course.notices import train as N
from lesson_model import training as T

pytestmark = pytest.mark.unit


def _progress(step, ind, prev=(0.1, 0.1), loss_repeat=4.0, best=(0, 0), prev_heads=(0, 0)):
    return T.Progress(step=step, steps=100, elapsed_s=step / 10, loss=4.0, loss_repeat=loss_repeat,
                      induction=list(ind), prev_token=list(prev), best_heads=list(best), prev_heads=list(prev_heads))


def _result(history, settings=T.TrainSettings(steps=100), stopped="done", shortcut=None):
    ckpt = T.Checkpoint(step=history[-1].step, probe=[0] * T.SEQ_LEN, patterns={}, repeat=T.FIXED_REPEAT)
    return T.TrainResult(settings=settings, history=history, checkpoints=[ckpt], phase_step=T.phase_change(history),
                         stopped=stopped, seconds=1.0, steps_done=history[-1].step, shortcut=shortcut)


def keys(result):
    return [key for key, _ in N.observations(result, 4.16)]


def test_observations_formed_names_the_head_and_the_losses():
    history = [_progress(0, (0.05, 0.05)), _progress(25, (0.1, 0.1), loss_repeat=3.9),
               _progress(50, (0.1, 0.5), prev=(0.7, 0.1), loss_repeat=2.0, best=(0, 3), prev_heads=(2, 0)),
               _progress(75, (0.1, 0.8), prev=(0.8, 0.1), loss_repeat=0.5, best=(1, 3), prev_heads=(2, 0))]
    obs = dict(N.observations(_result(history), 4.16))
    assert obs["formed"] == dict(step=50, seconds="5", head="1.3", before="10%", after="80%")
    assert obs["loss_change"] == dict(step=25, before="3.90", after="0.50", guess="4.16")
    assert obs["prev_head"] == dict(head="0.2", score="80%", induction="1.3")
    assert "none" not in obs and "shortcut" not in obs


def test_observations_none_time_and_shortcut():
    history = [_progress(0, (0.05,), prev=(0.1,)), _progress(25, (0.1,), prev=(0.1,), loss_repeat=3.0)]
    fixed = T.TrainSettings(n_layers=1, random_offset=False, steps=100)
    sc = _progress(25, (0.04,), prev=(0.1,), loss_repeat=4.1)
    obs = dict(N.observations(_result(history, fixed, stopped="time", shortcut=sc), 4.16))
    assert obs["time"] == dict(done=25, steps=100, seconds="1")
    assert obs["none"]["score"] == "10%" and obs["none"]["last"] == "3.00"
    assert "one_layer" not in obs                  # that sentence is about random offsets
    assert obs["shortcut"] == dict(here="3.00", there="4.10", score="4%", offset=T.FIXED_REPEAT[1] - T.FIXED_REPEAT[0])
    sc_close = _progress(25, (0.04,), prev=(0.1,), loss_repeat=3.2)
    obs = dict(N.observations(_result(history, fixed, shortcut=sc_close), 4.16))
    assert "shortcut_weak" in obs and "shortcut" not in obs


def test_observations_cancelled_one_layer_and_no_positions():
    history = [_progress(0, (0.05,), prev=(0.2,), loss_repeat=4.1), _progress(25, (0.1,), prev=(0.35,), loss_repeat=3.5)]
    settings = T.TrainSettings(n_layers=1, positions=False, steps=100)
    found = N.observations(_result(history, settings, stopped="cancelled"), 4.16)
    assert [key for key, _ in found] == ["cancelled", "none", "one_layer", "no_positions"]
    obs = dict(found)
    assert obs["cancelled"] == dict(done=25, steps=100)
    assert obs["none"] == dict(steps=25, score="10%", head="0.0", first="4.10", last="3.50", guess="4.16")
    assert obs["one_layer"] == {}
    assert obs["no_positions"] == dict(score="35%", start="20%")


def test_observations_a_fixed_offset_head_forms_without_a_previous_token_sentence():
    history = [_progress(0, (0.05,), prev=(0.1,)), _progress(25, (0.4,), prev=(0.1,), loss_repeat=1.0, best=(2,)),
               _progress(50, (0.9,), prev=(0.1,), loss_repeat=0.2, best=(2,))]
    fixed = T.TrainSettings(n_layers=1, random_offset=False, steps=100)
    found = N.observations(_result(history, fixed), 4.16)
    assert [key for key, _ in found] == ["formed_fixed", "loss_change"]      # no shortcut check was run
    assert dict(found)["formed_fixed"] == dict(step=25, seconds="2", head="0.2", before="5%", after="90%")


def test_observations_weak_previous_token_head_and_before_falls_back():
    # every evaluation before the phase change is already past PHASE_LOW: "before" is the one just before it
    history = [_progress(0, (0.2, 0.2)), _progress(25, (0.2, 0.25), loss_repeat=3.0),
               _progress(50, (0.1, 0.6), prev=(0.2, 0.1), loss_repeat=1.0, best=(0, 1), prev_heads=(3, 0))]
    found = N.observations(_result(history), 4.16)
    assert [key for key, _ in found] == ["formed", "loss_change", "prev_weak"]
    obs = dict(found)
    assert obs["formed"]["before"] == "25%" and obs["loss_change"]["step"] == 25
    assert obs["prev_weak"] == dict(head="0.3", score="20%", induction="1.1")


def test_observations_best_head_in_layer_zero_has_no_previous_token_sentence():
    history = [_progress(0, (0.05, 0.05)), _progress(25, (0.7, 0.1), best=(4, 0))]
    assert keys(_result(history)) == ["formed", "loss_change"]


def test_best_head():
    assert N.best_head(_progress(0, (0.2, 0.7, 0.1), best=(5, 6, 7))) == (1, 6, 0.7)


def test_every_key_is_in_every_catalog():
    """Each key observations can return, under "train.notice.", in every language."""
    from course import i18n
    produced = {"time", "cancelled", "formed", "formed_fixed", "loss_change", "prev_head", "prev_weak", "none",
                "one_layer", "shortcut", "shortcut_weak", "no_positions"}
    for lang in ("en", "zh-Hant", "zh-Hans"):
        catalog = i18n.catalog(lang)
        assert [k for k in sorted(produced) if f"train.notice.{k}" not in catalog] == [], lang


# --- the page's job: dropped, and a queued learner's place ------------------------------------------

def test_dropped_jobs_are_the_finished_ones_without_a_whole_result():
    history = [_progress(0, (0.05, 0.05)), _progress(25, (0.1, 0.1))]
    assert not N.dropped("queued", None) and not N.dropped("running", None)
    assert not N.dropped("failed", None)                      # shown as an error instead
    assert not N.dropped("done", _result(history))
    assert not N.dropped("done", _result(history, stopped="time"))
    assert N.dropped("cancelled", None)                       # cancelled while queued: the bug of issue 33
    assert N.dropped("cancelled", _result(history, stopped="cancelled"))   # cut while running
    assert N.dropped("done", None)                            # any job whose result is missing
    empty = _result(history)
    empty.history = []
    assert N.dropped("done", empty)
    assert N.dropped("something else", _result(history))


def test_queue_note_place_total_and_ahead():
    assert N.queue_note(None, 1, 3) is None and N.queue_note(0, 1, 3) is None   # finished / running
    assert N.queue_note(1, 1, 3) == ("queued_one", dict(place=1, total=3, n=1))
    assert N.queue_note(3, 1, 3) == ("queued_many", dict(place=3, total=3, n=3))
    assert N.queue_note(1, 0, 1) == ("queued_many", dict(place=1, total=1, n=0))   # the worker has not picked it yet
    assert N.queue_note(2, 0, 1)[1]["total"] == 2            # never "2 of 1" between two reads


def test_queue_note_keys_are_in_every_catalog_with_their_fields():
    from course import i18n
    for lang in ("en", "zh-Hant", "zh-Hans"):
        catalog = i18n.catalog(lang)
        for position, running, waiting in ((1, 1, 1), (2, 1, 4)):
            key, fields = N.queue_note(position, running, waiting)
            text = catalog[f"train.{key}"].format(**fields)
            assert str(fields["place"]) in text and str(fields["total"]) in text, (lang, text)


def test_a_run_stopped_by_time_before_any_head_says_so():
    """The classic setting's phase change comes late in its 2,000 steps: a run the time limit
    stopped first must not read as "no head forms with these settings"."""
    history = [_progress(0, (0.05, 0.05)), _progress(25, (0.1, 0.1), loss_repeat=3.9)]
    assert keys(_result(history, stopped="time")) == ["time", "none", "time_early"]
    assert "time_early" not in keys(_result(history))                                  # ran to the end
    one = T.TrainSettings(n_layers=1, steps=100)
    assert keys(_result(history, one, stopped="time")) == ["time", "none", "one_layer"]   # one layer never forms one


@pytest.mark.parametrize("lang,root", [("en", "square root of a running mean of their squares"),
                                       ("zh-Hant", "除以梯度平方的移動平均的平方根"),
                                       ("zh-Hans", "除以梯度平方的滑动平均的平方根")])
def test_adamw_divides_by_the_square_root(lang, root):
    """AdamW divides by the square root of the running mean of squared gradients (the page's own
    formula, m̂ / (√v̂ + ε)), not by the mean itself."""
    from course import i18n
    text = " ".join(" ".join(i18n.lesson_sections("train", lang).values()).split())
    assert root in text
    assert "by a running mean of their squares" not in text
