"""The attention lesson's shared computations: its forward pass (every layer's attention
tensors, so any head and query redraws without running again) and the sliding-window demo on
a prompt repeated past the window."""

from __future__ import annotations

import streamlit as st

from course import i18n
from course.cache import default_tokens
from lesson_model.analysis import attention as A
from server.models import CachedRun, cached_run

CAP = 64            # tokens of the prompt the lesson runs


def lesson_run(lm, tokens) -> CachedRun:
    """The page's forward pass over ``tokens`` (Token objects), shared through the run cache."""
    return cached_run(lm, [tok.id for tok in tokens], A.capture_names(lm.cfg.n_layers))


def long_length(cfg) -> int:
    """The window demo's prompt length: past the sliding window by a quarter."""
    return (cfg.sliding_window or 0) * 5 // 4


@st.cache_data(max_entries=8, show_spinner=False)
def long_run(model_name: str, ids: tuple[int, ...], n_special: int, _lm=None):
    """The window demo on a prompt repeated to long_length tokens (keyed on the model's name).
    On the default prompt of each language it is computed once for every session (at start-up,
    by the warm-up); a learner's own prompt only when they ask for it."""
    return A.window_demo(_lm, A.repeat_to_length(ids, long_length(_lm.cfg), n_special))


def window_tokens(lm, lang: str | None = None) -> list:
    """The default prompt's tokens the window demo runs on by default."""
    return lm.tokenize(i18n.catalog(lang)["prompt.default"] if lang else i18n.t("prompt.default"))


def demo(lm, tokens):
    """The window demo on ``tokens`` (their leading special tokens kept once)."""
    n_special = next((i for i, tok in enumerate(tokens) if not tok.special), len(tokens))
    return long_run(lm.name, tuple(tok.id for tok in tokens), n_special, _lm=lm)


def warm(lm, lang: str) -> None:
    lesson_run(lm, default_tokens(lm, lang, CAP))
    if A.window_layers(lm.cfg) is not None:
        demo(lm, window_tokens(lm, lang))
