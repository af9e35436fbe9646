"""The generation lesson's shared computations: the prompt's forward pass (step 0's candidates),
one pass per step shown (the logits that chose its token and the model's own probability of
every token so far), and speculative decoding against plain greedy decoding."""

from __future__ import annotations

import streamlit as st
import torch

from course.cache import default_tokens
from lesson_model.generation import generate_steps
from lesson_model.speculative import speculative_generate
from server.models import CachedRun, cached_run

CAP = 128             # prompt tokens this page generates from (the last ones, when the prompt is longer)


def lesson_run(lm, prompt_ids) -> CachedRun:
    """The prompt's forward pass (its last logits: step 0's candidates), shared through the run cache."""
    return cached_run(lm, prompt_ids)


@st.cache_data(max_entries=256, show_spinner=False)
def step_view(model: str, ids: tuple, n_prompt: int, _lm=None) -> tuple[torch.Tensor, list[float]]:
    """One forward pass over everything before the newest token: the logits that chose it
    [vocab], and the model's own probability (softmax) of every generated token so far."""
    probs_run = _lm.run(list(ids[:-1]), names=[])
    logits = probs_run.logits[0].float()                              # [pos, vocab]
    probs = logits[n_prompt - 1:].softmax(-1)                          # [generated, vocab]
    chosen = [float(probs[i, ids[n_prompt + i]]) for i in range(len(ids) - n_prompt)]
    return logits[-1].clone(), chosen


@st.cache_data(max_entries=32, show_spinner=False)
def speculative(model: str, ids: tuple, n: int, k: int, draft: int, kw: tuple, seed: int, _lm=None):
    return speculative_generate(_lm, list(ids), n, draft_layers=k, draft_len=draft, seed=seed, **dict(kw))


@st.cache_data(max_entries=32, show_spinner=False)
def plain_greedy(model: str, ids: tuple, n: int, _lm=None) -> list[int]:
    return [x.token_id for x in generate_steps(_lm, list(ids), n, temperature=0)]


def warm(lm, lang: str) -> None:
    """The first view is step 0 with speculative decoding off: the prompt's pass alone."""
    lesson_run(lm, [tok.id for tok in default_tokens(lm, lang, CAP)])
