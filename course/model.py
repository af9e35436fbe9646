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
    bar says what it is doing and for how long (every session waiting sees the same load); a
    missing package gets a clear message with its install command, then the page stops."""
    key = key or model_key()
    load = shelf.load(key)
    if not load.done.is_set():
        bar = st.progress(0.0, text=_load_text(load))
        while not load.done.wait(0.25):
            bar.progress(min(1.0, _load_fraction(load)), text=_load_text(load))
        bar.empty()
    if isinstance(load.error, lesson_model.ModelNotInstalledError):
        st.error(t("model.missing", name=load.error.model.name), icon=":material/error:")
        st.code(str(load.error), language="text")
        st.stop()
    if load.error is not None:
        raise load.error
    return load.model


# How much of a cold load each stage is (measured on Gemma: joining its parts, dequantizing,
# writing the cache, reading it back): the bar moves at about the pace of the work.
_STAGE_SPAN = {"waiting": (0.0, 0.0), "preparing": (0.0, 0.15), "converting": (0.15, 0.8),
               "writing": (0.8, 0.95), "loading": (0.95, 1.0)}


def _load_fraction(load: ModelLoad) -> float:
    start, end = _STAGE_SPAN.get(load.stage, (0.0, 1.0))
    return start + (end - start) * load.fraction


def _load_text(load: ModelLoad) -> str:
    stage = load.stage if load.stage in _STAGE_SPAN else "waiting"
    return t(f"model.stage.{stage}", name=lesson_model.BUNDLED[load.key].name,
             seconds=round(time.monotonic() - load.started))




def default_model(lang: str) -> str:
    """The model a visitor starts on: Gemma for Chinese (it reads Chinese, SmolLM2 does not)."""
    return "gemma-3-270m" if lang in ("zh-Hant", "zh-Hans") else DEFAULT_MODEL
