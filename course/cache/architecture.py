"""The architecture lesson's shared computations: both bundled models' cards, the forward pass
whose loss at every position is "training in one picture", and the post-training comparison."""

from __future__ import annotations

from dataclasses import asdict

import streamlit as st

from course.cache import default_tokens
from lesson_model.analysis import architecture as AR
from server.models import MODELS, CachedRun, cached_run, shelf

CAP = 64              # tokens of the prompt the loss section runs


@st.cache_data(max_entries=4, show_spinner=False)
def cards(model_names: tuple[str, ...], _models=None) -> list[list[AR.CardRow]]:
    """The card of each bundled model, in MODELS order (``_models``: {key: model}; keyed on their names)."""
    return [AR.model_card(_models[key]) for key in MODELS]


def lesson_run(lm, tokens) -> CachedRun:
    """The loss section's forward pass over ``tokens`` (Token objects): every position's logits."""
    return cached_run(lm, [tok.id for tok in tokens], all_logits=True)


@st.cache_data(max_entries=16, show_spinner=False)
def replies(question: str, model_names: tuple[str, str], n: int, _models=None) -> list[dict]:
    """Both models' greedy replies (``_models``: the instruct model and the base model; keyed on
    the question, their names and n)."""
    return [asdict(AR.post_training(m, question, n)) for m in _models]


def warm(lm, lang: str) -> None:
    """The first view: the cards and the loss section's pass (the comparison waits for a click)."""
    models = {key: shelf(key) for key in MODELS}
    cards(tuple(m.name for m in models.values()), _models=models)
    tokens = default_tokens(lm, lang, CAP)
    if len(tokens) >= 2:
        lesson_run(lm, tokens)
