"""The sections tied to the Chinese teaching articles, drawn by the app on both models and in
three languages: meaning from context (embeddings), the height-and-weight analogy (attention),
the temperature table's prompt on the model (sampling), decoder-only vs encoder-decoder and
shift-right (architecture, whatif)."""

from __future__ import annotations

import pytest

from course import i18n
from course.model import MODEL_TAGS
from lesson_model.analysis import context as C
from lesson_model.analysis import toys
from tests._apptest import GEMMA, MODELS, SMOL, arr, chart, errors, subheaders

LANGS = list(i18n.LANGS)
# (language, model) pairs each page is opened on: every language, both models.
PAIRS = [("en", SMOL), ("zh-Hant", GEMMA), ("zh-Hans", GEMMA), ("en", GEMMA), ("zh-Hant", SMOL)]


def text_of(at) -> str:
    return "\n".join(m.value for m in at.markdown) + "\n".join(c.value for c in at.caption)


def frame_with(at, column: str):
    """The dataframe the page drew that has ``column``."""
    for d in at.dataframe:
        if column in d.value.columns:
            return d.value
    raise AssertionError(f"no table with a column {column!r}")


def t(lang: str, key: str, **fields) -> str:
    return i18n.text_in(lang, key, **fields)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("lang", LANGS)
def test_context_section_draws_the_words_two_vectors(open_page, models, model, lang):
    lm = models[model]
    at = open_page("embeddings", lang=lang, model=model)
    assert not errors(at), errors(at)
    assert t(lang, "embeddings.context.title") in subheaders(at)
    texts = [i18n.text_in(lang, i18n.lesson_key("embeddings", MODEL_TAGS[model], f"context.{key}"))
             for key in ("default_a", "default_b", "default_word")]
    result = C.word_in_contexts(lm, *texts)
    assert result is not None
    lines = chart(at, "context_chart")["data"]
    raw, centred = arr(lines[0]["y"]).tolist(), arr(lines[1]["y"]).tolist()
    assert raw[0] == pytest.approx(1.0, abs=1e-6) and centred[0] == pytest.approx(1.0, abs=1e-6)
    assert raw[1:] == pytest.approx(result.raw, abs=2e-3)
    assert centred[1:] == pytest.approx(result.centred, abs=2e-3)
    shown = text_of(at)
    assert t(lang, "embeddings.context.next_a") in shown


def test_context_section_says_when_the_word_is_missing(open_page):
    at = open_page("embeddings", lang="zh-Hant", model=GEMMA, params={"ctx_word": "香蕉"})
    assert not errors(at)
    assert any("香蕉" in w.value for w in at.warning)
    assert not any(c.proto.id.endswith("-context_chart") for c in at.get("plotly_chart"))


@pytest.mark.parametrize("lang,model", PAIRS[:3])
def test_height_weight_table_and_real_step(open_page, lang, model):
    at = open_page("attention", lang=lang, model=model, params={"toy_h": 1.7})
    assert not errors(at), errors(at)
    assert t(lang, "attention.toy.title") in subheaders(at)
    table = frame_with(at, t(lang, "attention.toy.col_k"))
    hw = toys.height_weight(1.7)
    share = table[t(lang, "attention.toy.col_share")].tolist()
    assert share == [f"{a:.1%}" for a in hw.attention]
    assert t(lang, "attention.toy.kg", v=f"{hw.estimate:.1f}") in [m.value for m in at.metric]
    assert len(frame_with(at, t(lang, "attention.toy.col_real_score"))) == 3


@pytest.mark.parametrize("lang,model", PAIRS)
def test_weather_table_is_the_models(open_page, models, lang, model):
    lm = models[model]
    at = open_page("sampling", lang=lang, model=model)
    assert not errors(at), errors(at)
    assert t(lang, "sampling.weather.title") in subheaders(at)
    words = [t(lang, f"sampling.four.{w}") for w in ("good", "hot", "cold", "bad")]
    table = toys.word_probabilities(lm, t(lang, "sampling.weather.prompt"), words, (0.5, 1.0, 2.0))
    column = t(lang, "sampling.weather.col_model", t="1")
    got = frame_with(at, t(lang, "sampling.weather.col_toy", t="1"))[column].tolist()
    assert got == [f"{w.probs[1]:.1%}" for w in table.words]


@pytest.mark.parametrize("lang,model", PAIRS[:3])
def test_decoder_only_section(open_page, models, lang, model):
    at = open_page("architecture", lang=lang, model=model)
    assert not errors(at), errors(at)
    assert t(lang, "architecture.dec.title") in subheaders(at)
    shown = text_of(at)
    n = models[model].cfg.n_layers
    assert t(lang, "architecture.dec.no_encoder", model=models[model].name, n=n) in shown
    assert t(lang, "architecture.dec.caption", n=n) in shown
    assert at.get("graphviz_chart")


@pytest.mark.parametrize("lang,model", PAIRS[:3])
def test_whatif_names_shift_right(open_page, lang, model):
    at = open_page("whatif", lang=lang, model=model, params={"nomask": 1})
    assert not errors(at), errors(at)
    assert any(t(lang, "whatif.shift_right_caption", a="", b="")[:12] in c.value for c in at.caption)
