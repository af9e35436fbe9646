"""The induction lesson's shared computations: its forward pass over the learner's text (every
layer's attention pattern and every position's logits), and the standard test on repeated
random tokens with its ablation, computed once per process for each setting and shared by all
sessions (the first view's settings by the warm-up: about two minutes of model runs a model)."""

from __future__ import annotations

import streamlit as st

from course.cache import default_tokens, stored
from lesson_model.analysis import induction as I
from server.models import CachedRun, cached_run

CAP = 64
N_SEQS = 10          # random sequences averaged for the score map and the losses
N_RANDOM = 3         # random head sets in the ablation control
TOP_SHOWN = 3        # best heads whose patterns are drawn
LEN_DEFAULT, SEED_DEFAULT, K_DEFAULT = 50, 0, 5      # the controls' defaults: half a sequence, seed, heads zeroed


def pattern_names(n_layers: int) -> list[str]:
    return [f"blocks.{layer}.attn.hook_pattern" for layer in range(n_layers)]


def lesson_run(lm, tokens) -> CachedRun:
    """The page's forward pass over ``tokens`` (Token objects), shared through the run cache."""
    return cached_run(lm, [tok.id for tok in tokens], pattern_names(lm.cfg.n_layers), all_logits=True)


@st.cache_data(max_entries=16, show_spinner=False)
def experiment(_lm, model_name: str, seq_len: int, seed: int) -> I.InductionExperiment:
    """Repeated random tokens through the model (N_SEQS forward passes of 2 x seq_len
    tokens), computed once per process for each (seq_len, seed) and shared by all sessions
    (and kept on disk between processes where course/cache/stored.py is on: the test stages)."""
    return stored.kept(("induction.experiment", model_name, stored.model_key(_lm), seq_len, seed, N_SEQS, TOP_SHOWN),
                       lambda: I.induction_experiment(_lm, seq_len=seq_len, n_seqs=N_SEQS, seed=seed,
                                                      n_examples=TOP_SHOWN))


@st.cache_data(max_entries=32, show_spinner=False)
def ablation(_lm, model_name: str, seq_len: int, seed: int, k: int) -> I.Ablation:
    """Zero the top-k heads and N_RANDOM random sets of k heads (cached like experiment)."""
    exp = experiment(_lm, model_name, seq_len, seed)
    return stored.kept(("induction.ablation", model_name, stored.model_key(_lm), seq_len, seed, N_SEQS, TOP_SHOWN, k,
                        N_RANDOM),
                       lambda: I.ablate(_lm, exp.tokens, exp.scores, k, seed=seed, n_random=N_RANDOM,
                                        baseline=exp.mean_loss_second))


def warm(lm, lang: str) -> None:
    lesson_run(lm, default_tokens(lm, lang, CAP))
    experiment(lm, lm.name, LEN_DEFAULT, SEED_DEFAULT)
    ablation(lm, lm.name, LEN_DEFAULT, SEED_DEFAULT, K_DEFAULT)
