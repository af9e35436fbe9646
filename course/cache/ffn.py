"""The FFN lesson's shared computations: its forward pass at the open layer, the layer's linear
collapse (weights only), and each Try-this example's neuron, computed on its own prompt once
per model and language."""

from __future__ import annotations

import streamlit as st

from course.cache import default_tokens, lesson_t, try_numbers
from course.i18n import join_list, join_sentences
from course.text import num
from course.tokens import md_label
from lesson_model.analysis import neurons as N
from server.models import CachedRun, cached_run

CAP = 64            # tokens of the prompt the lesson runs
TOP_NEURONS = 12    # neurons listed for the chosen token
TRY_TOKENS = 4      # pushed tokens named per Try-this example
PAGE = "ffn"


def default_layer(cfg) -> int:
    """Late, where neurons push next-token candidates (26 of 30, 15 of 18)."""
    return cfg.n_layers * 7 // 8


def last_resid(cfg) -> str:
    return f"blocks.{cfg.n_layers - 1}.hook_resid_post"


def run_names(lm, layer: int) -> list[str]:
    """What the page reads of its pass at ``layer``."""
    return [f"blocks.{layer}.mlp.hook_pre", f"blocks.{layer}.mlp.hook_pre_linear", *N.neuron_names(layer),
            *N.mlp_names(layer), *N.neuron_effect_names(lm, layer), last_resid(lm.cfg)]


def lesson_run(lm, tokens, layer: int) -> CachedRun:
    """The page's forward pass over ``tokens`` (Token objects) at ``layer``, shared through the run cache."""
    return cached_run(lm, [tok.id for tok in tokens], run_names(lm, layer))


@st.cache_data(max_entries=32, show_spinner=False)
def collapse(model_name: str, layer: int, _lm=None) -> tuple[list[float], int, int, int, float]:
    """The layer's MLP without its non-linearity, one matrix (keyed on the model's name)."""
    c = N.linear_collapse(_lm, layer)
    return c.singular_values.tolist(), c.rank, c.params_two, c.params_one, c.max_error


def try_names(lm) -> list[str]:
    return sorted({n for L in range(lm.cfg.n_layers) for n in N.neuron_effect_names(lm, L)})


def try_pusher(lm, try_run) -> tuple[int, int, N.Pusher]:
    """(answer, layer, pusher): the model's answer on a Try-this run and, of every layer's
    TOP_NEURONS most active neurons at the last token, the one that pushes it up most directly."""
    answer = int(try_run.last_logits.argmax())
    pushers = [N.strongest_pusher(lm, try_run, L, answer, -1, k=TOP_NEURONS) for L in range(lm.cfg.n_layers)]
    best = max(range(lm.cfg.n_layers), key=lambda L: pushers[L].push)
    return answer, best, pushers[best]


@st.cache_data(max_entries=64, show_spinner=False)   # the same for every visitor: once per model and language
def try_detail(model_name: str, lang: str, n: int, _lm=None) -> str:
    """What the neuron that pushes example n's answer most does on its prompt (a model run)."""
    lm, t = _lm, lesson_t(PAGE, _lm, lang)
    ids = [tok.id for tok in lm.tokenize(t(f"try.{n}.prompt"))]
    try_run = cached_run(lm, ids, try_names(lm))
    answer, try_layer, best = try_pusher(lm, try_run)
    pushed = N.neuron_logit_effect(lm, try_run, try_layer, best.neuron, -1, k=TRY_TOKENS).promoted
    lines = [t("try_detail.main", answer=md_label(lm.token_text(answer)), layer=try_layer, k=TOP_NEURONS,
               n=best.neuron, v=f"{best.value:+.1f}", dv=num(best.push, "+.2f"),
               tokens=join_list((md_label(lm.token_text(i)) for i, _ in pushed), lang))]
    if best.value < 0:
        lines.append(t("try_detail.negative"))
    return join_sentences(lines, lang)


def warm(lm, lang: str) -> None:
    layer = default_layer(lm.cfg)
    lesson_run(lm, default_tokens(lm, lang, CAP), layer)
    collapse(lm.name, layer, _lm=lm)
    for n in try_numbers(PAGE, lm):
        try_detail(lm.name, lang, n, _lm=lm)
