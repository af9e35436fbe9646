"""Shared computations of the sections tied to the Chinese teaching articles: one word in two
contexts (the embeddings lesson), the temperature table's prompt on the real model (the
sampling lesson). Forward passes go through the run cache; results are kept per model and
inputs, shared by every session."""

from __future__ import annotations

import streamlit as st

from lesson_model.analysis import context as C
from lesson_model.analysis import toys
from server.models import cached_run

MAX_TOKENS = 256                       # each context is run up to its word, at most this many tokens
WEATHER_TEMPERATURES = (0.5, 1.0, 2.0)


@st.cache_data(max_entries=256, show_spinner=False)
def context_result(model_name: str, text_a: str, text_b: str, word: str, _lm) -> C.ContextResult | None:
    """The word in both texts through every block (None when it is missing from either, or a
    text is longer than MAX_TOKENS up to the word)."""
    lm = _lm
    a, b = C.find_word(lm, text_a, word), C.find_word(lm, text_b, word)
    if a is None or b is None or max(a.position, b.position) >= MAX_TOKENS:
        return None
    names = C.block_names(lm.cfg.n_layers)
    run_a = cached_run(lm, a.ids[:a.position + 1], names)
    run_b = cached_run(lm, b.ids[:b.position + 1], names)
    return C.compare(word.strip(), a, b, lm.decoder.W_E.detach(), [run_a.cache[n][0] for n in names],
                     [run_b.cache[n][0] for n in names], run_a.last_logits, run_b.last_logits)


def word_context(lm, text_a: str, text_b: str, word: str) -> C.ContextResult | None:
    return context_result(lm.name, text_a, text_b, word, lm)


@st.cache_data(max_entries=32, show_spinner=False)
def weather_table(model_name: str, prompt: str, words: tuple[str, ...], _lm) -> toys.WeatherTable:
    lm = _lm
    return toys.word_probabilities(lm, prompt, list(words), WEATHER_TEMPERATURES,
                                   run=lambda ids: cached_run(lm, ids).last_logits)


def weather(lm, prompt: str, words) -> toys.WeatherTable:
    return weather_table(lm.name, prompt, tuple(words), lm)
