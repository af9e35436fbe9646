"""AppTests of the sampling lesson: figures match the model, URL-bound settings, languages."""

from __future__ import annotations

import json

import pytest
import torch

from lesson_model.analysis import sampling_demo as sd
from lesson_model.sampling import next_token_distribution
from ui import i18n

pytestmark = pytest.mark.slow


def url(at, key: str):
    value = at.query_params.get(key)
    return value[-1] if isinstance(value, list) else value


def charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def by_title(at, text: str) -> dict:
    for spec in charts(at):
        title = spec["layout"].get("title", {}).get("text", "")
        if text in title:
            return spec
    raise AssertionError(f"no chart titled {text!r}")


def last_logits(lm, prompt: str) -> torch.Tensor:
    return lm.run(prompt, names=[]).logits[0, -1]


@pytest.mark.parametrize("lang", list(i18n.LANGS))
def test_default_page_matches_the_model(open_page, lm, lang):
    at = open_page("sampling", lang=lang)
    assert not at.exception, [e.value for e in at.exception]
    cat = i18n.catalog(lang)
    assert at.title[0].value == cat["nav.sampling"]
    assert len(at.get("plotly_chart")) == 7
    probs = last_logits(lm, cat["prompt.default"]).softmax(-1)
    top = by_title(at, cat["sampling.top.title"])
    shown = [p / 100 for p in top["data"][1]["x"]]                 # the probability bars, in percent
    expected = torch.topk(probs, len(shown)).values.tolist()
    assert shown == pytest.approx(expected, abs=1e-5)
    # metrics: 49,152 logits, probabilities sum to 1
    values = {m.label: m.value for m in at.metric}
    assert values[cat["sampling.metric.logits"]] == "49,152"
    assert values[cat["sampling.metric.sum"]] == "1.0000"
    # the four-candidate table, computed exactly
    four = at.dataframe[0].value
    row = four[four.iloc[:, 0] == "1"].iloc[0]
    assert list(row.iloc[1:5]) == ["64.4%", "23.7%", "8.7%", "3.2%"]
    assert len(at.markdown) > 5 and any(cat["lesson.notice"] == s.value for s in at.subheader)


def test_settings_from_the_url_drive_the_figures(open_page, lm):
    prompt = "The capital of France is"
    at = open_page("sampling", prompt=prompt, params={"temperature": "0.7", "top_k": "8", "top_p": "0.9"})
    assert not at.exception
    assert at.slider(key="temperature").value == 0.7
    assert at.slider(key="top_k").value == 8 and at.slider(key="top_p").value == 0.9
    logits = last_logits(lm, prompt)
    p_final = next_token_distribution(logits, 0.7, 8, 0.9)
    n_kept = int((p_final > 0).sum())
    ba = by_title(at, i18n.catalog("en")["sampling.ba.title"])
    order = logits.argsort(descending=True)[:len(ba["data"][1]["y"])]
    assert [y / 100 for y in ba["data"][1]["y"]] == pytest.approx(p_final[order].tolist(), abs=1e-5)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Tokens still possible"] == f"{n_kept:,}"
    cum = by_title(at, "Top-p")
    view = sd.distribution_view(logits, 0.7, 8, 0.9, n=40)
    assert [y / 100 for y in cum["data"][0]["y"]] == pytest.approx(view.cumulative.tolist(), abs=1e-5)
    assert any(f"kept: {n_kept}" in a.get("text", "") for a in cum["layout"].get("annotations", []))
    assert url(at, "temperature") == "0.7" and url(at, "top_k") == "8"


def test_bad_url_values_are_clamped_with_a_note(open_page):
    at = open_page("sampling", params={"temperature": "nan", "top_k": "-1", "top_p": "2", "seed": "x",
                                       "samples": "999999"})
    assert not at.exception
    assert at.slider(key="temperature").value == 1.0
    assert at.slider(key="top_k").value == 0
    assert at.slider(key="top_p").value == 1.0
    assert at.number_input(key="seed").value == 1
    assert at.number_input(key="samples").value == 10000
    notes = " ".join(w.value for w in at.warning)
    for param in ("temperature=nan", "top_k=-1", "top_p=2", "seed=x", "samples=999999"):
        assert param in notes


def test_greedy_is_temperature_zero(open_page, lm):
    at = open_page("sampling", prompt="The capital of France is", params={"temperature": "0"})
    assert not at.exception
    assert any("greedy decoding" in i.value for i in at.info)
    ba = by_title(at, "sampling uses")
    assert ba["data"][1]["y"][0] == pytest.approx(100.0) and sum(ba["data"][1]["y"][1:]) == 0
    samples = by_title(at, "draws compared")
    assert samples["data"][1]["y"][0] == pytest.approx(100.0)          # every draw is the top token
    assert any("chosen every time" in m.value for m in at.markdown)


def test_sample_histogram_is_seeded(open_page, lm):
    prompt = "My favourite colour is"
    params = {"samples": "500", "seed": "3", "top_k": "20"}
    at = open_page("sampling", prompt=prompt, params=params)
    assert not at.exception
    probs = next_token_distribution(last_logits(lm, prompt), 1.0, 20)
    hist = sd.sample_histogram(probs, 500, 3)
    spec = by_title(at, "500 draws")
    shown = spec["data"][1]["y"]
    assert shown[:len(hist.counts)] == pytest.approx([100 * c / 500 for c in hist.counts])
    again = open_page("sampling", prompt=prompt, params=params)
    assert by_title(again, "500 draws")["data"][1]["y"] == shown
    other = open_page("sampling", prompt=prompt, params=dict(params, seed="4"))
    assert by_title(other, "500 draws")["data"][1]["y"] != shown


@pytest.mark.parametrize("lang,prompt", [("zh-Hant", "從前有一隻小貓，牠"), ("zh-Hans", "今天天气很好，我们"),
                                         ("en", "I love 🍕 and 🐱")])
def test_chinese_and_emoji_prompts(open_page, lm, lang, prompt):
    at = open_page("sampling", lang=lang, prompt=prompt)
    assert not at.exception
    cat = i18n.catalog(lang)
    top = by_title(at, cat["sampling.top.title"])
    probs = last_logits(lm, prompt).softmax(-1)
    assert top["data"][1]["x"][0] / 100 == pytest.approx(float(probs.max()), abs=1e-5)


def test_empty_prompt_stops_kindly(open_page):
    at = open_page("sampling", prompt="")
    assert not at.exception
    assert at.info and not at.get("plotly_chart")


def test_settings_carry_over_to_generation(open_page):
    at = open_page("sampling", prompt="The capital of France is")
    at.slider(key="temperature").set_value(0.3).run()
    at.slider(key="top_k").set_value(12).run()
    assert url(at, "temperature") == "0.3"
    at.switch_page("app_pages/generation.py").run()
    assert not at.exception
    assert at.slider(key="temperature").value == 0.3 and at.slider(key="top_k").value == 12
