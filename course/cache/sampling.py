"""The sampling lesson's shared computations: its forward pass (the final vector and the last
position's logits), what the page shows of those logits (once per view and settings, shared by
every session on the view), the Try-this lines, each checked on a run of the model on its own
prompt, and the weather table (per language)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import streamlit as st

from course.cache import context, default_tokens, lesson_t
from course.i18n import join_list, join_sentences
from course.model import MODEL_TAGS
from course.notices import sampling as N
from course.tokens import md_label, next_token_texts
from lesson_model import sampling as S
from lesson_model.analysis import sampling_demo as sd
from server.models import CachedRun, cached_run

CAP = 256              # tokens of the prompt this page runs (the last ones, when the prompt is longer)
TRIES = range(1, 6)    # the Try-this examples (try.<n>)
TRY_TOP_P, TRY_TOP_K = 0.9, 40     # the settings the Try-this lines quote


def lesson_run(lm, tokens) -> CachedRun:
    """The page's forward pass over ``tokens`` (Token objects), shared through the run cache."""
    return cached_run(lm, [tok.id for tok in tokens], sd.final_vector_hook_names())


@st.cache_data(max_entries=16, show_spinner=False)   # once per view: a class following its teacher shares it
def temperature_numbers(model_name: str, ids: tuple[int, ...], real_ids: tuple[int, ...], temps: tuple[float, ...],
                        _logits=None) -> tuple[list, list[list[float]]]:
    """The run's temperature table (sd.temperature_sweep) and, for each of ``real_ids``, its
    probability at each of ``temps``: the two temperature sections' numbers for the last
    position's logits of the run of ``model_name`` on ``ids`` (``_logits``, [vocab]). On Gemma's
    262,144-entry vocabulary they are 60 softmaxes and 4 sorts, 0.15 s of a session's run."""
    logits = _logits
    sweep = sd.temperature_sweep(logits)
    curves: list[list[float]] = [[] for _ in real_ids]
    for temp in temps:
        dist = S.next_token_distribution(logits, temp)
        for curve, i in zip(curves, real_ids):
            curve.append(float(dist[i]))
    return sweep, curves


@dataclass(frozen=True)
class LogitNumbers:
    """What the page shows of the run's last logits whatever the settings (temperature 1)."""
    prob_sum: float                # the softmax's sum (1 up to rounding)
    edges: list[float]             # the logit histogram's bin edges
    counts: list[int]              # and counts
    median: float
    lo: float
    hi: float


@st.cache_data(max_entries=16, show_spinner=False)   # once per view: a class following its teacher shares it
def logit_numbers(model_name: str, ids: tuple[int, ...], _logits=None) -> LogitNumbers:
    """The sums, histogram and spread of the last position's logits (``_logits``, [vocab]) of the
    run of ``model_name`` on ``ids``: on Gemma's 262,144 entries a histogram, a median and a
    min/max, a tenth of a second of a session's run that no setting changes (a teacher moving
    the temperature slider changes none of it, so no follower computes it again)."""
    logits = _logits.float()
    edges, counts = sd.logit_histogram(logits)
    return LogitNumbers(prob_sum=float(logits.softmax(-1).double().sum()), edges=edges.tolist(),
                        counts=counts.tolist(), median=float(logits.median()), lo=float(logits.min()),
                        hi=float(logits.max()))


@st.cache_data(max_entries=32, show_spinner=False)   # once per view and settings
def setting_view(model_name: str, ids: tuple[int, ...], settings: tuple, n: int, _logits=None) -> sd.DistributionView:
    """sd.distribution_view of the run's last logits under ``settings`` (Settings.kwargs() as
    sorted items), for the n best tokens."""
    return sd.distribution_view(_logits, n=n, **dict(settings))


@st.cache_data(max_entries=32, show_spinner=False)   # once per view, settings, draws and seed
def samples(model_name: str, ids: tuple[int, ...], settings: tuple, n_draws: int, seed: int,
            _logits=None) -> sd.SampleHistogram:
    """The sampling experiment: ``n_draws`` seeded draws from the run's last logits under ``settings``."""
    return sd.sample_histogram(S.next_token_distribution(_logits, **dict(settings)), n_draws, seed)


def try_prompt(lm, lang: str, n: int) -> str:
    return lesson_t("sampling", lm, lang)(f"try.{n}.prompt")


@st.cache_data(max_entries=64, show_spinner=False)   # the same for every visitor: once per model and language
def try_line(model_name: str, lang: str, n: int, prompt: str, _lm=None) -> str:
    """Example n's line: its point (try.<n>.why, placeholder-free, also shown on an empty prompt)
    and this model's numbers on that prompt, only when the numbers support the point; else a
    plain account of the numbers (course.notices.sampling.try_line)."""
    lm = _lm
    example = lm.tokenize(prompt)[-CAP:]
    facts = sd.prompt_facts(cached_run(lm, [tok.id for tok in example]).last_logits, top_p=TRY_TOP_P, top_k=TRY_TOP_K)
    cands = next_token_texts(lm, example, facts.top_ids)
    pieces = [c for c, tok in zip(cands, lm.tokenizer.tokens(facts.top_ids)) if tok.is_partial]
    parts = N.try_line(n, N.try_point(MODEL_TAGS[lm.bundled.key], n), facts=facts, cands=cands, pieces=pieces,
                       label=md_label, join=functools.partial(join_list, lang=lang))
    sentences = [lesson_t("sampling", lm, lang)(key, **fields) for key, fields in parts]
    return sentences[0] if len(sentences) == 1 else join_sentences(sentences, lang)


def try_lines(lm, lang: str) -> list[tuple[str, str]]:
    """(prompt, line) of every Try-this example in ``lang`` on ``lm``."""
    return [(try_prompt(lm, lang, n), try_line(lm.name, lang, n, try_prompt(lm, lang, n), _lm=lm)) for n in TRIES]


def weather(lm, lang: str):
    """The weather section's table in ``lang`` (its prompt and the toy's four words, as the page
    reads them): per language and the same for any prompt of the learner's."""
    t = lesson_t("sampling", lm, lang)
    return context.weather(lm, t("weather.prompt"), [t(f"four.{w}") for w, _ in sd.FOUR_CANDIDATES])


def warm(lm, lang: str) -> None:
    lesson_run(lm, default_tokens(lm, lang, CAP))
    try_lines(lm, lang)
    weather(lm, lang)
