"""The feed-forward lesson page: runs in three languages and with odd prompts, binds its
controls to the URL, and draws numbers that match the model."""

from __future__ import annotations


import pytest
from lesson_model.analysis import neurons as N
from lesson_model.analysis import params as P
from ui import i18n
from tests._apptest import chart, errors

pytestmark = pytest.mark.slow

PAGE = "ffn"


CHARTS = ["activation_chart", "swiglu_chart", "singular_chart", "neuron_bars", "neuron_strip", "vocab_chart",
          "params_chart", "moe_chart"]


@pytest.mark.parametrize("lang", list(i18n.LANGS))
def test_default_prompt_every_language(open_page, lm, lang):
    at = open_page(PAGE, lang=lang)
    assert not errors(at)
    for key in CHARTS:
        chart(at, key)
    # the neuron bars are the model's own top activations at the default layer and last token
    prompt = i18n.catalog(lang)["prompt.default"]
    layer = at.slider(key="layer").value
    run = lm.run(prompt, names=N.neuron_names(layer))
    top = N.neuron_top_activations(lm, run, layer, -1, k=12)
    bars = chart(at, "neuron_bars")["data"][0]
    assert bars["x"] == pytest.approx([a.value for a in top], abs=1e-4)
    # the neuron shown first: of these, the one that pushes the model's next token up the most
    run_effect = lm.run(prompt, names=N.neuron_effect_names(layer))
    predicted = int(run_effect.logits[0, -1].argmax())
    pushes = N.neuron_effects_on_token(lm, run_effect, layer, predicted, -1)
    best = max(top, key=lambda a: float(pushes[a.neuron])).neuron
    assert at.selectbox(key="neuron").value == str(best)
    # the neuron strip shows that neuron on every token
    strip = chart(at, "neuron_strip")["data"][0]
    cells = [v for row in strip["z"] for v in row if v is not None]
    assert cells == pytest.approx(N.neuron_activations(lm, run, layer, best).tolist(), abs=1e-4)
    # the notice and the math are filled with numbers from this run
    notice = " ".join(m.value for m in at.markdown)
    assert f"{top[0].value:+.2f}" in notice


def test_numbers_on_the_page(open_page, lm):
    at = open_page(PAGE, lang="en")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["MLP parameters per block"] == "2,654,208"
    assert metrics["Attention parameters per block"] == "884,736"
    assert metrics["Parameters in total"] == "46.70 B"
    assert metrics["Parameters used per token"] == "12.88 B"
    # the singular values are those of the layer's up_proj @ down_proj
    layer = at.slider(key="layer").value
    s = chart(at, "singular_chart")["data"][0]["y"]
    c = N.linear_collapse(lm, layer)
    assert len(s) == lm.cfg.d_model
    assert s[:5] == pytest.approx(c.singular_values[:5].tolist(), rel=1e-4)
    # the parameter chart's rows add up to 100%
    data = chart(at, "params_chart")["data"]
    for row in range(4):
        assert sum(trace["x"][row] for trace in data) == pytest.approx(100)


@pytest.mark.parametrize("prompt", ["貓坐在墊子上，因為牠累了。", "🐱 cats 😀 and 🐶 dogs 👍🏽"])
def test_chinese_and_emoji_prompts(open_page, lm, prompt):
    at = open_page(PAGE, lang="zh-Hant", prompt=prompt)
    assert not errors(at)
    strip = chart(at, "neuron_strip")["data"][0]
    n_tokens = len(lm.tokenize(prompt))
    assert sum(v is not None for row in strip["z"] for v in row) == n_tokens
    assert at.selectbox(key="pos").value == n_tokens - 1


def test_empty_prompt_shows_a_hint(open_page):
    at = open_page(PAGE, lang="zh-Hans", prompt="")
    assert not errors(at)
    assert at.info and i18n.catalog("zh-Hans")["lesson.empty_prompt"] in [i.value for i in at.info]


def test_url_controls(open_page, lm):
    prompt = "The cat sat on the mat"
    run = lm.run(prompt, names=N.neuron_names(5))
    second = N.neuron_top_activations(lm, run, 5, 2, k=12)[1].neuron
    at = open_page(PAGE, lang="en", prompt=prompt,
                   params={"layer": 5, "pos": 2, "neuron": second, "experts": 4, "active": 1})
    assert not errors(at) and not at.warning
    assert at.slider(key="layer").value == 5 and at.selectbox(key="pos").value == 2
    assert at.selectbox(key="neuron").value == str(second)
    strip = [v for row in chart(at, "neuron_strip")["data"][0]["z"] for v in row if v is not None]
    assert strip == pytest.approx(N.neuron_activations(lm, run, 5, second).tolist(), abs=1e-4)
    metrics = {m.label: m.value for m in at.metric}
    moe = P.count_params(P.with_experts(P.PRESETS["mixtral-8x7b"], 4, 1))
    assert metrics["Parameters in total"] == f"{moe.total / 1e9:.2f} B"
    assert metrics["Parameters used per token"] == f"{moe.active / 1e9:.2f} B"
    url = {key: (v[-1] if isinstance(v, list) else v) for key, v in at.query_params.items()}
    assert url["layer"] == "5" and url["pos"] == "2" and url["experts"] == "4" and url["active"] == "1"


def test_bad_url_values_are_clamped_with_a_note(open_page):
    at = open_page(PAGE, lang="en", prompt="The cat sat",
                   params={"layer": 99, "pos": "abc", "neuron": "huge", "experts": 0, "active": 7})
    assert not errors(at)
    assert at.slider(key="layer").value == 29
    assert at.number_input(key="experts").value == 1
    assert at.selectbox(key="active").value == 1        # one expert: the only choice, shown disabled
    notes = " ".join(w.value for w in at.warning)
    for param in ("layer=99", "pos=abc", "neuron=huge", "experts=0", "active=7"):
        assert param in notes
