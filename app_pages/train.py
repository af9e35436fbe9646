"""Training lab: train a tiny decoder (lesson_model.decoder.Decoder, a few layers of width 64)
on this server's CPU and watch an induction head form, live.

The trainings go through one process-wide queue (server.training_queue): one at a time,
shared by settings (a class that trains the same settings waits once; the others see it
replayed at once), cancelled when nobody watches. This page polls its job in a fragment.
It does not use the shared prompt or the big pretrained models.

The queue's limits (one job per session, one per class, a bounded line) refuse some Starts:
the page shows why (a class shares one slot: the queue's docstring). A job the queue dropped
while this page was away (no heartbeat for the queue's heartbeat_s) leaves the session, with a
note and the Start button (course.notices.train.dropped decides which jobs).
"""

from __future__ import annotations

import math
import uuid

import streamlit as st

from classroom import follow
from course import state, theme
from course.figures import train as F
from course.lesson import Lesson
from course.notices import train as N
from course.predict import builders as B
from course.text import code_span
from lesson_model import training as T
from server.training_queue import DONE, FAILED, QUEUED, OwnerBusy, QueueFull, shared_queue

POLL_S = 1.0                        # seconds between two looks at a running job
LR_OPTIONS = ("1e-4", "3e-4", "1e-3", "3e-3", "1e-2")
_JOB = "_train_job"                 # the job this session started or joined
_WATCHER = "_train_watcher"         # this session's id in the queue's watcher lists
_DROPPED = "_train_dropped"         # the settings of this session's job the queue dropped
_REFUSED = "_train_refused"         # why the last Start added no job: (catalog key, fields)
CHART_HEIGHT = 330                  # px at the laptop type (taller in presenter mode)

DEFAULT = T.TrainSettings()
# Try this: settings to compare (they set the controls, not the shared prompt)
TRY = [
    ({"layers": 2, "offset": "random", "positions": True, "mlp": False}),
    ({"layers": 1, "offset": "random", "positions": True, "mlp": False}),
    ({"layers": 1, "offset": "fixed", "positions": True, "mlp": False}),
    ({"layers": 2, "offset": "random", "positions": False, "mlp": False}),
]


def lr_text(option: str) -> str:
    return f"{float(option):g}"


def owner() -> str | None:
    """Who this session's new trainings are charged to in the queue: its class (teacher or
    student, following or paused), else nobody but itself (None)."""
    cls = follow.teaching() or follow.joined()
    return f"class:{cls['code']}" if cls else None


def render() -> None:
    """The lab, top to bottom: its variables live only while it runs (a widget's callback
    keeps just the names it uses)."""
    page = Lesson("train")
    page.header()
    chart_size = dict(height=theme.presenter_height(CHART_HEIGHT), title_width=theme.THREE_QUARTERS_TITLE)   # loss and scores
    queue = shared_queue()
    watcher = st.session_state.setdefault(_WATCHER, uuid.uuid4().hex)
    log_v = T.log_vocab()


    def _start(settings) -> None:
        st.session_state.pop(_DROPPED, None)
        try:
            job = queue.submit(settings, watcher, owner=owner())
        except QueueFull as full:
            st.session_state[_REFUSED] = ("queue_full", dict(limit=full.limit))
            _cancel()                               # (submit took this session off its earlier job)
            return
        except OwnerBusy:
            st.session_state[_REFUSED] = ("class_busy", {})
            _cancel()
            return
        earlier = st.session_state.get(_JOB)
        if earlier is not None and earlier is not job:
            queue.cancel(earlier, watcher)          # (submit has already taken this session off it)
        st.session_state[_JOB] = job


    def _cancel() -> None:
        job = st.session_state.pop(_JOB, None)
        if job is not None:
            queue.cancel(job, watcher)


    predict_slot = st.container()       # Predict, then see: above the curves, asked of the settings below
    # --- controls ---------------------------------------------------------------------------------------
    figure, controls = page.columns()
    with controls:
        lo, hi = T.LIMITS["n_layers"]
        n_layers = state.url_int("layers", page.t("layers"), lo, hi, DEFAULT.n_layers, help=page.t("layers_help"))
        offset = state.url_choice("offset", page.t("offset"), ["random", "fixed"],
                                  "random" if DEFAULT.random_offset else "fixed", widget="select",
                                  format_func=lambda o: page.t(f"offset_{o}"), help=page.t("offset_help"))
        positions = state.url_bool("positions", page.t("positions"), DEFAULT.positions, help=page.t("positions_help"))
        mlp = state.url_bool("mlp", page.t("mlp"), DEFAULT.mlp, help=page.t("mlp_help"))
        lr = state.url_choice("lr", page.t("lr"), LR_OPTIONS, min(LR_OPTIONS, key=lambda o: abs(math.log(float(o) / DEFAULT.lr))),
                              format_func=lr_text, help=page.t("lr_help"))
        lo, hi = T.LIMITS["steps"]
        steps = state.url_int("steps", page.t("steps"), lo, hi, DEFAULT.steps, widget="number", help=page.t("steps_help"))
        lo, hi = T.LIMITS["seed"]
        seed = state.url_int("seed", page.t("seed"), lo, hi, DEFAULT.seed, widget="number", help=page.t("seed_help"))
        settings, notes = T.clamp(T.TrainSettings(n_layers=n_layers, mlp=mlp, random_offset=offset == "random",
                                                  positions=positions, lr=float(lr), steps=steps, seed=seed))
        for name, given, used in notes:
            st.warning(page.t("clamp_note", field=code_span(name), given=code_span(str(given)),
                              used=code_span(str(used))), icon=":material/link_off:")

    # --- which run this session looks at -------------------------------------------------------------------
    job = st.session_state.get(_JOB)
    if job is not None and job.settings != settings:       # the learner changed a control: leave that run
        _cancel()
        job = None
    if job is not None and N.dropped(job.state, job.result):   # dropped while this page was away
        _cancel()
        st.session_state[_DROPPED] = job.settings
        job = None
    if st.session_state.get(_DROPPED) not in (None, settings):
        del st.session_state[_DROPPED]                      # the note was about other settings
    mine = job is not None
    if job is None:
        job = queue.cached(settings)                        # trained earlier on this server: replayed at once
        if job is not None and N.dropped(job.state, job.result):
            job = None
    if job is not None and job.active:
        queue.touch(job, watcher)
    refused = st.session_state.pop(_REFUSED, None)
    with predict_slot:                  # the question of the run these settings train; answered once it is done
        page.predict(None, question=B.train_question(settings, job.result if job is not None and job.state == DONE
                                                     else None))

    with controls:
        finished = job is not None and job.state == DONE and job.result.stopped == "done"
        active = job is not None and job.active
        st.button(page.t("start"), key="start", type="primary", icon=":material/play_arrow:", width="stretch",
                  on_click=_start, args=(settings,), disabled=active or finished)
        st.button(page.t("cancel"), key="cancel", icon=":material/stop:", width="stretch",
                  on_click=_cancel, disabled=not (active and mine))
        if finished and not mine:
            st.caption(page.t("replayed", seconds=f"{job.result.seconds:.0f}"))
        elif job is None and queue.active_job(settings) is not None:
            st.caption(page.t("classmate"))
        running, waiting = queue.busy()
        st.caption(page.t("server_queue", running=running, waiting=waiting,
                          limit=queue.max_waiting if queue.max_waiting is not None else waiting))


    def draw_status(job) -> None:
        """Where the job stands: its place in the queue, or a progress bar."""
        if job.state == QUEUED:
            running, waiting = queue.busy()
            note = N.queue_note(queue.position(job), running, waiting)
            if note is not None:
                st.info(page.t(note[0], **note[1]), icon=":material/hourglass_top:")
            st.progress(0.0)
            return
        p = job.latest()
        if p is None:
            st.progress(0.0, text=page.t("starting"))
            return
        st.progress(min(p.step / max(p.steps, 1), 1.0),
                    text=page.t("running", step=f"{p.step:,}", steps=f"{p.steps:,}", seconds=f"{p.elapsed_s:.0f}"))


    def draw_curves(history, steps: int, phase_step) -> None:
        theme.plot(F.loss_figure(history, steps, log_v, phase_step, page.t), key="loss_chart", **chart_size)
        theme.plot(F.score_figure(history, steps, phase_step, page.t), key="score_chart", **chart_size)


    def live() -> None:
        """Polled every POLL_S seconds while the job is queued or running."""
        current = st.session_state.get(_JOB, job)
        if current is None:
            return
        if current.active:
            queue.touch(current, watcher)
        draw_status(current)
        draw_curves(current.history(), current.settings.steps, None)
        if not current.active:
            st.rerun()                  # finished: the whole page, with the results below


    # --- the curves ----------------------------------------------------------------------------------------
    with figure:
        if refused is not None:
            st.warning(page.t(refused[0], **refused[1]), icon=":material/block:")
        if job is None:
            if st.session_state.get(_DROPPED) == settings:
                st.warning(page.t("dropped", seconds=f"{queue.heartbeat_s:.0f}"), icon=":material/visibility_off:")
            else:
                st.info(page.t("press_start"), icon=":material/model_training:")
            theme.plot(F.empty_figure(settings.steps, log_v, page.t), key="loss_chart", **chart_size)
        elif job.active:
            st.fragment(live, run_every=POLL_S)()
        elif job.state == FAILED:
            st.error(page.t("failed", error=code_span(job.error or "")), icon=":material/error:")
            theme.plot(F.empty_figure(settings.steps, log_v, page.t), key="loss_chart", **chart_size)
        else:                           # done (N.dropped: with a result and its history)
            result = job.result
            draw_curves(result.history, settings.steps, result.phase_step)
            if result.phase_step is not None:
                st.caption(page.t("phase_caption", step=f"{result.phase_step:,}", threshold=F.pct(T.PHASE_THRESHOLD)))

    result = job.result if job is not None and job.state == DONE else None

    # --- inside the heads, after training ------------------------------------------------------------------------
    if result is not None and result.checkpoints and result.history:
        page.part("heads", page.t("heads_title"))
        page.prose("heads")
        ckpt_steps = [c.step for c in result.checkpoints]
        if st.session_state.get("ckpt") not in ckpt_steps:
            st.session_state["ckpt"] = ckpt_steps[-1]
        chosen = st.select_slider(page.t("ckpt"), options=ckpt_steps, key="ckpt",
                                  format_func=lambda s: f"{s:,}", help=page.t("ckpt_help"))
        checkpoint = result.checkpoints[ckpt_steps.index(chosen)]
        heads = F.shown_heads(result)
        for column, (layer, head, kind) in zip(st.columns(len(heads), gap="small"), heads):
            with column:
                fig = F.pattern_figure(checkpoint.patterns[(layer, head)], checkpoint.repeat, kind,
                                       F.head_name(layer, head), checkpoint.step, page.t)
                theme.plot(fig, key=f"pattern_{layer}_{head}_{kind}", height=340, title_width=22)
        first, second, length = checkpoint.repeat
        st.caption(page.t("pattern_caption", first=first, second=second, length=length, n=len(checkpoint.probe)))

        # observations' keys are relative to "notice."
        page.notices([(f"notice.{key}", fields) for key, fields in N.observations(result, log_v)])

    # --- try this: settings to compare (they set the controls, not the shared prompt) --------------------------
    page.try_this([(page.t(f"try.{n + 1}.label"), page.t(f"try.{n + 1}.why"),
                    {**values, "lr": "1e-3", "steps": DEFAULT.steps, "seed": DEFAULT.seed})
                   for n, values in enumerate(TRY)], set_prompt=False)

    if result is not None:
        first, last = result.history[0], result.history[-1]
        page.math(page.t("math_example", loss0=F.nats(first.loss), guess=F.nats(log_v), vocab=T.VOCAB,
                         loss1=F.nats(last.loss), ppl=f"{math.exp(last.loss):.1f}", lr=lr_text(lr)))
    else:
        page.math()
    page.code(T.train, T.make_batch)


render()
