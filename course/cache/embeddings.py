"""The embeddings lesson's shared computations: the whole-vocabulary searches (nearest
neighbours, analogies: one pass over the embedding table each, 113 MB on SmolLM2), and the
two forward passes of the word-order section (the same token before and after attention)."""

from __future__ import annotations

import streamlit as st

from course.cache import default_tokens, lesson_t
from course.figures.embeddings import ANALOGIES, WordSet, word_set
from lesson_model.analysis import embeddings as E
from server.models import CachedRun, cached_run

CAP = 48            # prompt tokens the lesson uses (the similarity matrix stays readable)
K_MAX = 30          # neighbours searched for (the page shows up to this many)
ANALOGY_TOP = 10    # answers listed for an analogy
ORDER_MAX = 256     # the word-order section runs the model on sentences up to this many tokens


# Whole-vocabulary searches: keep their small results, shared by every session (the model
# name is part of the key).
@st.cache_data(max_entries=512, show_spinner=False)
def neighbours_of(model_name: str, token_id: int, k: int, _lm) -> list[E.Neighbour]:
    return E.nearest_neighbours(_lm, token_id, k=k)


@st.cache_data(max_entries=256, show_spinner=False)
def analogy_of(model_name: str, a: int, b: int, c: int, expected: int | None, k: int, _lm) -> E.Analogy:
    return E.analogy(_lm, a, b, c, k=k, expected=expected)


def neighbours(lm, token_id: int) -> list[E.Neighbour]:
    """The K_MAX nearest entries to ``token_id`` (the page shows the first k)."""
    return neighbours_of(lm.name, token_id, K_MAX, lm)


def analogy(lm, a: int, b: int, c: int, expected: int | None) -> E.Analogy:
    """a - b + c: the ANALOGY_TOP nearest entries, and ``expected``'s rank."""
    return analogy_of(lm.name, a, b, c, expected, ANALOGY_TOP, lm)


def resolve(lm, word: str) -> tuple[int | None, list[int]]:
    """A typed word -> (token id, or None when it is not one token; the pieces it makes).
    Inside a sentence words carry their leading space, so " word" is tried first."""
    word = word.strip()
    # A Chinese word is written without a space before it: its bare form first (「日本」, not 「▁日本」).
    forms = (word, " " + word) if word and "\u2e80" <= word[0] <= "\u9fff" else (" " + word, word)
    for form in forms:
        try:
            return E.token_id_of(lm, form), []
        except ValueError:
            continue
    return None, lm.encode(" " + word)


def is_one_token(lm, word: str) -> bool:
    try:
        E.token_id_of(lm, word)
        return True
    except ValueError:
        return False


def words(lm, lang: str) -> WordSet:
    """The map and analogy words for this model in this language: the script's Chinese set
    where the model keeps its words whole (Gemma), else the English one."""
    return word_set(lang, lambda word: is_one_token(lm, word))


def order_names(cfg) -> list[str]:
    """What the word-order section reads: the stream after the first block and after the last."""
    return ["blocks.0.hook_resid_post", f"blocks.{cfg.n_layers - 1}.hook_resid_post"]


def moved(match: E.RowMatch) -> list[tuple[int, int]]:
    """(position in B, position in A) of each row of B whose equal row in A sits elsewhere."""
    return [(j, m) for j, m in enumerate(match.match) if m is not None and m != j]


def order_runs(lm, match: E.RowMatch) -> tuple[CachedRun, CachedRun] | None:
    """Both sentences through the model, when a token moved and both are short enough."""
    if not moved(match) or len(match.tokens_a) > ORDER_MAX or len(match.tokens_b) > ORDER_MAX:
        return None
    names = order_names(lm.cfg)
    return cached_run(lm, match.tokens_a, names), cached_run(lm, match.tokens_b, names)


def warm(lm, lang: str) -> None:
    t = lesson_t("embeddings", lm, lang)
    tokens = default_tokens(lm, lang, CAP)
    neighbours(lm, tokens[min(1, len(tokens) - 1)].id)        # the row and neighbours of the default position
    a, b, c, expect = (resolve(lm, word)[0] for word in ANALOGIES[0])
    if None not in (a, b, c):
        analogy(lm, a, b, c, expect)
    order_runs(lm, E.same_rows(lm, t("order.default_a"), t("order.default_b")))
