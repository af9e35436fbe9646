"""What to notice in the Training lab, from one finished (or stopped) training.

``observations(result, log_v)`` reads only the run (a lesson_model.training TrainResult: its
settings, evaluation history, checkpoints and shortcut check) and log(V), the loss of guessing,
so tests can check each sentence against a run. Unlike the other lessons' notices its keys are
relative to "train.notice." ("formed", "none"...): the page puts "notice." before each.

Two more decisions about the page's job, as pure functions: ``dropped`` (a job the page can no
longer show: the stale job leaves the session and the page says to press Start again) and
``queue_note`` (a queued learner's place in line; keys relative to "train.").
"""

from __future__ import annotations

import numpy as np

from course.figures.train import head_name, nats, pct

SHORTCUT_GAP = 0.5               # nats: the shortcut "fails on random places" when its loss there is this much higher
PHASE_LOW = 0.15                 # below this best induction score the head has not started to form
PREV_FORMED = 0.3                # a previous-token score from which the page calls it a previous-token head


def dropped(state: str, result) -> bool:
    """Whether a session's job has nothing left to show: cancelled (while queued it has no
    result, while running a cut one; either way every watcher had gone silent, since the
    page's own Cancel takes the job out of the session), or ended without a result or with
    an empty history. Active and failed jobs are shown as such."""
    if state in ("queued", "running", "failed"):
        return False
    return state != "done" or result is None or not getattr(result, "history", None)


def queue_note(position: int | None, running: int, waiting: int) -> tuple[str, dict] | None:
    """A queued job's line: its place among the waiting jobs, how many of them wait, and how
    many trainings run before it (the running one included). None unless it waits
    (``position`` as TrainQueue.position: 0 running, n the n-th waiting, None finished)."""
    if not position:
        return None
    ahead = position - 1 + running
    return ("queued_one" if ahead == 1 else "queued_many",
            dict(place=position, total=max(waiting, position), n=ahead))


def best_head(progress) -> tuple[int, int, float]:
    """(layer, head, induction score) of the best induction head in one evaluation."""
    layer = int(np.argmax(progress.induction))
    return layer, int(progress.best_heads[layer]), float(progress.induction[layer])


def observations(result, log_v: float) -> list[tuple[str, dict]]:
    """What to notice, as (catalog key under "notice.", fields) computed from this run."""
    s = result.settings
    history = result.history
    last = history[-1]
    out: list[tuple[str, dict]] = []
    if result.stopped == "time":
        out.append(("time", dict(done=result.steps_done, steps=s.steps, seconds=f"{result.seconds:.0f}")))
    elif result.stopped == "cancelled":
        out.append(("cancelled", dict(done=result.steps_done, steps=s.steps)))
    layer, head, score = best_head(last)
    name = head_name(layer, head)
    if result.phase_step is not None:
        i = next(i for i, p in enumerate(history) if p.step == result.phase_step)
        at = history[i]
        # "before": the last evaluation before the phase change where no head was half-way there yet
        # (the loss is often already falling at the eval just before the rule's step)
        low = [p for p in history[:i] if max(p.induction) < PHASE_LOW]
        before = low[-1] if low else history[max(i - 1, 0)]
        out.append(("formed_fixed" if not s.random_offset else "formed",
                    dict(step=result.phase_step, seconds=f"{at.elapsed_s:.0f}", head=name,
                         before=pct(max(before.induction)), after=pct(score))))
        out.append(("loss_change", dict(step=before.step, before=nats(before.loss_repeat),
                                        after=nats(last.loss_repeat), guess=nats(log_v))))
        if s.random_offset and layer > 0:
            prev_layer = int(np.argmax(last.prev_token[:layer]))
            prev_score = float(last.prev_token[prev_layer])
            key = "prev_head" if prev_score >= PREV_FORMED else "prev_weak"
            out.append((key, dict(head=head_name(prev_layer, int(last.prev_heads[prev_layer])),
                                  score=pct(prev_score), induction=name)))
    else:
        out.append(("none", dict(steps=result.steps_done, score=pct(score), head=name,
                                 first=nats(history[0].loss_repeat), last=nats(last.loss_repeat),
                                 guess=nats(log_v))))
        if s.n_layers == 1 and s.random_offset:
            out.append(("one_layer", {}))
        elif result.stopped == "time":      # cut short: that no head formed says nothing of the setting
            out.append(("time_early", {}))
    if not s.random_offset and result.shortcut is not None:
        sc = result.shortcut
        first, second, _ = result.checkpoints[-1].repeat if result.checkpoints else (0, 0, 0)
        fields = dict(here=nats(last.loss_repeat), there=nats(sc.loss_repeat), score=pct(max(sc.induction)),
                      offset=second - first)
        out.append(("shortcut" if sc.loss_repeat - last.loss_repeat >= SHORTCUT_GAP else "shortcut_weak", fields))
    if not s.positions:
        out.append(("no_positions", dict(score=pct(max(last.prev_token)), start=pct(max(history[0].prev_token)))))
    return out
