"""The training core (lesson_model/training.py): the task, the switches, the events, the bounds,
determinism, and (slow) the lesson itself: two layers form an induction head, one cannot."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lesson_model import Decoder, Hooks
from lesson_model import training as tr
from lesson_model.training import (
    LIMITS,
    Checkpoint,
    Progress,
    TrainResult,
    TrainSettings,
    clamp,
    log_vocab,
    phase_change,
    train,
)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One torch thread: on a busy shared machine two threads wait on each other at every op
    (measured: a 30-step run several times slower). train() itself never sets the count."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def stop_after(n_calls: int):
    """A should_stop that says stop at its (n_calls + 1)-th call, i.e. after n_calls steps."""
    calls = {"n": 0}

    def should_stop():
        calls["n"] += 1
        return calls["n"] > n_calls
    return should_stop


def curves(result: TrainResult) -> list[tuple]:
    return [(p.step, p.loss, p.loss_repeat, tuple(p.induction), tuple(p.prev_token), tuple(p.best_heads),
             p.train_loss) for p in result.history]


# --------------------------------------------------------------------------- settings

def test_defaults_are_within_limits_and_clamp_keeps_them():
    settings, notes = clamp(TrainSettings())
    assert settings == TrainSettings() and notes == []
    for name, (low, high) in LIMITS.items():
        assert low <= getattr(settings, name) <= high


def test_clamp_bad_values_with_a_note_each():
    bad = {"n_layers": 7, "lr": "abc", "steps": -5, "seed": 3.7, "mlp": "maybe", "random_offset": "false",
           "positions": float("nan")}
    settings, notes = clamp(bad)
    assert settings == TrainSettings(n_layers=3, lr=1e-3, steps=100, seed=4, mlp=False, random_offset=False,
                                     positions=True)
    noted = {name: (given, used) for name, given, used in notes}
    assert set(noted) == set(bad)
    assert noted["n_layers"] == (7, 3) and noted["steps"] == (-5, 100) and noted["lr"] == ("abc", 1e-3)
    # a frozen TrainSettings holding bad values is clamped too; lr out of range goes to the limit
    settings, notes = clamp(TrainSettings(lr=1.0, n_layers=0, steps=10**9))
    assert (settings.lr, settings.n_layers, settings.steps) == (1e-2, 1, 4000)
    assert {n for n, _, _ in notes} == {"lr", "n_layers", "steps"}
    # equal values in another type are accepted silently
    assert clamp({"n_layers": "2", "steps": 2000.0}) == (TrainSettings(), [])
    with pytest.raises(TypeError):
        clamp(42)


def test_log_vocab_is_the_guessing_line():
    assert log_vocab() == pytest.approx(math.log(tr.VOCAB))


# --------------------------------------------------------------------------- the task

@pytest.mark.parametrize("random_offset", [True, False])
def test_batches_repeat_a_segment(random_offset):
    g = torch.Generator().manual_seed(3)
    ids, (first, second, length) = tr.make_batch(g, 256, random_offset)
    assert ids.shape == (256, tr.SEQ_LEN) and ids.min() >= 0 and ids.max() < tr.VOCAB
    assert (first >= 0).all() and (second >= first + length).all() and (second + length <= tr.SEQ_LEN).all()
    for row in range(256):
        a, b, n = int(first[row]), int(second[row]), int(length[row])
        assert torch.equal(ids[row, a:a + n], ids[row, b:b + n])
    if random_offset:
        assert length.min() >= tr.SEG_MIN and length.max() <= tr.SEG_MAX
        assert len(set(length.tolist())) > 5 and len(set((second - first).tolist())) > 5
    else:
        assert {(int(a), int(b), int(n)) for a, b, n in zip(first, second, length)} == {tr.FIXED_REPEAT}


# --------------------------------------------------------------------------- the model

def test_the_model_is_the_course_decoder_with_a_small_config():
    model = tr.build_model(TrainSettings(n_layers=2))
    assert type(model) is Decoder
    cfg = model.cfg
    assert (cfg.vocab_size, cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.max_position) == (64, 64, 4, 2, 40)
    assert cfg.d_ff == 0 and tr.build_model(TrainSettings(mlp=True)).cfg.d_ff == tr.D_FF
    # the same seed gives the same weights, another seed other weights; the global RNG is untouched
    state = torch.random.get_rng_state()
    again, other = tr.build_model(TrainSettings(n_layers=2)), tr.build_model(TrainSettings(n_layers=2, seed=1))
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(model.W_E, again.W_E) and not torch.equal(model.W_E, other.W_E)


def test_attention_only_means_the_mlp_adds_exactly_zero():
    model = tr.build_model(TrainSettings(n_layers=2, mlp=False))
    ids, _ = tr.make_batch(torch.Generator().manual_seed(0), 2, True)
    hooks = Hooks(names=["blocks.0.hook_mlp_out", "blocks.1.hook_mlp_out"])
    model(ids, hooks=hooks)
    assert all(torch.count_nonzero(t) == 0 for t in hooks.cache.values())


def test_no_positions_hands_back_the_unrotated_q_and_k():
    model = tr.build_model(TrainSettings(n_layers=1))
    ids, _ = tr.make_batch(torch.Generator().manual_seed(0), 2, True)
    names = ["blocks.0.attn.hook_q", "blocks.0.attn.hook_rot_q", "blocks.0.attn.hook_k", "blocks.0.attn.hook_rot_k"]
    off = Hooks(names=names, fns=tr.no_rope_fns(model))
    model(ids, hooks=off)
    assert torch.equal(off.cache["blocks.0.attn.hook_rot_q"], off.cache["blocks.0.attn.hook_q"])
    assert torch.equal(off.cache["blocks.0.attn.hook_rot_k"], off.cache["blocks.0.attn.hook_k"])
    on = Hooks(names=names)
    model(ids, hooks=on)
    assert not torch.equal(on.cache["blocks.0.attn.hook_rot_q"], on.cache["blocks.0.attn.hook_q"])
    # no position information: a token's attention scores do not depend on where the pair sits
    same = torch.full((1, 8), 5)
    scores = Hooks(names=["blocks.0.attn.hook_attn_scores"], fns=tr.no_rope_fns(model))
    model(same, hooks=scores)
    s = scores.cache["blocks.0.attn.hook_attn_scores"][0]
    assert torch.allclose(s[:, 7, :], s[:, 7, :1].expand(-1, 8))


# --------------------------------------------------------------------------- events and bounds

def test_events_their_order_and_shapes():
    events = list(train(TrainSettings(n_layers=2), should_stop=stop_after(30), max_seconds=900))
    result = events[-1]
    assert isinstance(result, TrainResult) and all(not isinstance(e, TrainResult) for e in events[:-1])
    assert result.stopped == "cancelled" and result.steps_done == 30
    progress = [e for e in events if isinstance(e, Progress)]
    assert progress == result.history and [p.step for p in progress] == [0, 25, 30]
    assert progress[0].train_loss is None and progress[1].train_loss is not None
    checkpoints = [e for e in events if isinstance(e, Checkpoint)]
    assert checkpoints == result.checkpoints and [c.step for c in checkpoints] == [0, 30]
    p = progress[-1]
    assert len(p.induction) == len(p.prev_token) == len(p.best_heads) == len(p.prev_heads) == 2
    assert all(0 <= x <= 1 for x in p.induction + p.prev_token) and all(0 <= h < tr.N_HEADS for h in p.best_heads)
    c = checkpoints[-1]
    assert set(c.patterns) == {(L, h) for L in range(2) for h in range(tr.N_HEADS)}
    assert len(c.probe) == tr.SEQ_LEN
    a, b, n = c.repeat
    assert c.probe[a:a + n] == c.probe[b:b + n] and b >= a + n
    for pattern in c.patterns.values():
        assert isinstance(pattern, np.ndarray) and pattern.shape == (tr.SEQ_LEN, tr.SEQ_LEN)
        assert np.allclose(pattern.sum(-1), 1, atol=1e-5) and np.all(np.triu(pattern, 1) == 0)
    # at initialization nobody guesses better than uniform by much, and nothing is an induction head
    assert progress[0].loss > log_vocab() - 0.2 and max(progress[0].induction) < 0.2


def test_should_stop_cancels_at_once():
    result = list(train(TrainSettings(), should_stop=lambda: True))[-1]
    assert result.stopped == "cancelled" and result.steps_done == 0 and [p.step for p in result.history] == [0]


def test_max_seconds_bounds_the_training():
    result = list(train(TrainSettings(steps=4000), max_seconds=2.0))[-1]
    assert result.stopped == "time" and result.steps_done < 4000
    assert result.seconds < 2.0 + 20.0       # one step and one eval past the bound, on a busy machine
    assert result.history[-1].step == result.steps_done


def test_train_clamps_its_settings():
    result = list(train({"n_layers": 9, "steps": 1}, should_stop=stop_after(2), max_seconds=900))[-1]
    assert result.settings.n_layers == 3 and result.settings.steps == 100
    assert len(result.history[-1].induction) == 3


def test_same_settings_same_curves_other_seed_other_curves():
    settings = TrainSettings(n_layers=2, seed=5)
    first = list(train(settings, should_stop=stop_after(30), max_seconds=900))[-1]
    second = list(train(settings, should_stop=stop_after(30), max_seconds=900))[-1]
    other = list(train(TrainSettings(n_layers=2, seed=6), should_stop=stop_after(30), max_seconds=900))[-1]
    assert curves(first) == curves(second)
    assert all(np.array_equal(a.patterns[k], b.patterns[k])
               for a, b in zip(first.checkpoints, second.checkpoints) for k in a.patterns)
    assert curves(first) != curves(other)


# minutes on a busy 2-core machine, where two threads wait on each other
def test_same_curves_at_two_threads():
    """At 2 threads too (the embedding's gradient is a matmul, see training.one_hot_embed)."""
    torch.set_num_threads(2)
    try:
        settings = TrainSettings(n_layers=1, seed=7)
        assert curves(list(train(settings, should_stop=stop_after(26), max_seconds=900))[-1]) == \
            curves(list(train(settings, should_stop=stop_after(26), max_seconds=900))[-1])
    finally:
        torch.set_num_threads(1)


def test_fixed_offset_run_reports_the_shortcut_check():
    result = list(train(TrainSettings(n_layers=1, random_offset=False), should_stop=stop_after(5), max_seconds=900))[-1]
    assert isinstance(result.shortcut, Progress) and len(result.shortcut.induction) == 1
    assert list(train(TrainSettings(n_layers=1), should_stop=stop_after(5), max_seconds=900))[-1].shortcut is None


# --------------------------------------------------------------------------- the phase change rule

def synthetic(scores, step=25):
    return [Progress(step=i * step, steps=len(scores) * step, elapsed_s=0.0, loss=4.0, loss_repeat=4.0,
                     induction=list(s), prev_token=[0.1] * len(s), best_heads=[0] * len(s),
                     prev_heads=[0] * len(s)) for i, s in enumerate(scores)]


def test_phase_change_is_the_first_step_from_which_the_score_stays_high():
    assert phase_change([]) is None
    assert phase_change(synthetic([(0.05, 0.1), (0.05, 0.2), (0.1, 0.5), (0.1, 0.7)])) == 50
    # a blip above the line that falls back does not count; the later crossing that stays does
    assert phase_change(synthetic([(0.0, 0.1), (0.0, 0.35), (0.0, 0.2), (0.0, 0.31), (0.0, 0.8)])) == 75
    # the best layer counts, whichever it is
    assert phase_change(synthetic([(0.1,), (0.4,), (0.9,)])) == 25
    assert phase_change(synthetic([(0.1, 0.1), (0.2, 0.29)])) is None
    assert phase_change(synthetic([(0.1, 0.1), (0.2, 0.5), (0.2, 0.1)])) is None


# --------------------------------------------------------------------------- the lesson (slow: full runs)
# Each is one default-length training (2,000 steps): about 25 s on an idle core, minutes on a busy
# shared machine, hence the generous timeouts. max_seconds is lifted so the load cannot cut a run short.
# Under --dist loadgroup (lab: the unit stage) the tests of one training, here and in
# tests/test_page_train.py, share an xdist_group: one worker trains it and runs them all, instead
# of a second worker waiting on the lock while the first trains.

@pytest.fixture
def full_run(trained):
    def run(**changes) -> TrainResult:
        result = trained(**changes)      # one run per settings per test session (tests/conftest.py)
        assert result.stopped == "done" and result.steps_done == TrainSettings().steps
        return result
    return run


@pytest.mark.timeout(3600)
@pytest.mark.xdist_group("training-2-layers")
def test_two_layers_form_an_induction_head_with_random_offsets(full_run):
    result = full_run(n_layers=2)
    first, last = result.history[0], result.history[-1]
    assert max(last.induction) >= 0.6 and max(first.induction) < 0.2
    assert result.phase_step is not None and 0 < result.phase_step < result.settings.steps
    assert first.loss_repeat > 4.0 and last.loss_repeat < 1.5
    # the induction head sits in the second layer, fed by a previous-token head in the first
    assert last.induction[1] == max(last.induction) and last.prev_token[0] >= 0.5


@pytest.mark.timeout(3600)
@pytest.mark.xdist_group("training-1-layer")
def test_one_layer_stays_stuck_with_random_offsets(full_run):
    result = full_run(n_layers=1)
    assert max(max(p.induction) for p in result.history) < 0.2
    assert result.phase_step is None and result.history[-1].loss_repeat > 3.0


@pytest.mark.timeout(3600)
@pytest.mark.xdist_group("training-1-layer-fixed-offset")
def test_one_layer_takes_the_positional_shortcut_with_a_fixed_offset(full_run):
    result = full_run(n_layers=1, random_offset=False)
    last = result.history[-1]
    assert last.loss_repeat < 1.0                        # it solves the repeated part...
    assert max(last.induction) >= 0.4                    # ...by attending a fixed distance back (the induction target here)
    assert result.shortcut.loss_repeat > 3.0             # ...which fails once the segment moves
    assert max(result.shortcut.induction) < 0.2
