"""AppTests of the sampling lesson: figures match the model, URL-bound settings, languages."""

from __future__ import annotations

import json
import re

import pytest
import torch

from course import i18n
from course.text import md_escape, shorten
from lesson_model.analysis import sampling_demo as sd
from lesson_model.sampling import next_token_distribution
from tests._apptest import says


def url(at, key: str):
    value = at.query_params.get(key)
    return value[-1] if isinstance(value, list) else value


def charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def by_title(at, text: str) -> dict:
    for spec in charts(at):
        title = spec["layout"].get("title", {}).get("text", "").replace("<br>", " ")     # titles wrap
        if text in title:
            return spec
    raise AssertionError(f"no chart titled {text!r}")


SMOLLM2, GEMMA = "smollm2-135m", "gemma-3-270m"
FIXTURE = {SMOLLM2: "lm", GEMMA: "gemma"}
# Every catalog on every model: the Chinese catalogs on Gemma (their visitors' default) and on SmolLM2.
LANG_MODELS = [(lang, model) for model in (SMOLLM2, GEMMA) for lang in i18n.LANGS]


def last_logits(lm, prompt: str) -> torch.Tensor:
    return lm.run(prompt, names=[]).logits[0, -1]


@pytest.mark.parametrize("lang,model", [("en", SMOLLM2), ("zh-Hant", GEMMA), ("zh-Hans", GEMMA), ("en", GEMMA)])
def test_default_page_matches_the_model(open_page, request, lang, model):
    lm = request.getfixturevalue(FIXTURE[model])
    at = open_page("sampling", lang=lang, model=model)
    assert not at.exception, [e.value for e in at.exception]
    cat = i18n.catalog(lang)
    assert at.title[0].value == cat["nav.sampling"]
    assert len(at.get("plotly_chart")) == 8
    probs = last_logits(lm, cat["prompt.default"]).softmax(-1)
    top = by_title(at, cat["sampling.top.title"])
    shown = [p / 100 for p in top["data"][1]["x"]]                 # the probability bars, in percent
    expected = torch.topk(probs, len(shown)).values.tolist()
    assert shown == pytest.approx(expected, abs=1e-5)
    # metrics: one logit per vocabulary entry of this model (49,152 / 262,144), probabilities sum to 1
    values = {m.label: m.value for m in at.metric}
    assert values[cat["sampling.metric.logits"]] == f"{lm.cfg.vocab_size:,}"
    assert values[cat["sampling.metric.vector"]] == f"{lm.cfg.d_model:,}"
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
    order = logits.argsort(descending=True)[:len(ba["data"][1]["x"])]
    assert [x / 100 for x in ba["data"][1]["x"]] == pytest.approx(p_final[order].tolist(), abs=1e-5)
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
    ba = by_title(at, "Before and after")
    assert ba["data"][1]["x"][0] == pytest.approx(100.0) and sum(ba["data"][1]["x"][1:]) == 0
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Entropy after the settings"] == "0.00 bits"           # never "-0.00"
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


@pytest.mark.parametrize("lang,prompt,model", [("zh-Hant", "從前有一隻小貓，牠", GEMMA), ("zh-Hans", "今天天气很好，我们", GEMMA),
                                               ("zh-Hant", "從前有一隻小貓，牠", SMOLLM2), ("en", "I love 🍕 and 🐱", SMOLLM2)])
def test_chinese_and_emoji_prompts(open_page, request, lang, prompt, model):
    lm = request.getfixturevalue(FIXTURE[model])
    at = open_page("sampling", lang=lang, prompt=prompt, model=model)
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


def notices(at) -> str:
    return " ".join(m.value for m in at.markdown)


@pytest.mark.parametrize("lang,model", LANG_MODELS)
def test_try_this_lines_hold_on_their_prompts(open_page, request, lang, model):
    """Each Try-this line states its point only because the model's numbers on that prompt bear
    it out; the numbers are checked here straight from the model's logits, on the model the page
    runs (its own prompts: Chinese ones in the Chinese catalogs on Gemma)."""
    lm = request.getfixturevalue(FIXTURE[model])
    cat = i18n.catalog(lang)
    tag = "gemma" if model == GEMMA else "smollm2"

    def key(k: str) -> str:        # the model's variant when the catalog has one, as page.t reads it
        return cat[f"sampling.{tag}.{k}"] if f"sampling.{tag}.{k}" in cat else cat[f"sampling.{k}"]

    at = open_page("sampling", lang=lang, prompt="Hello", model=model)
    assert not at.exception
    shown = [m.value for m in at.markdown]
    buttons = [b.label for b in at.button if (b.key or "").startswith("try_")]
    assert buttons == [md_escape(shorten(key(f"try.{n}.prompt"), 60)) for n in range(1, 6)]
    if model == GEMMA and lang != "en":       # Chinese prompts on Gemma (the counting one is digits)
        assert all(re.search("[\u4e00-\u9fff]", key(f"try.{n}.prompt")) for n in (1, 2, 4, 5))

    def line(n: int) -> str:
        why = key(f"try.{n}.why")
        found = [m for m in shown if m.startswith(why)]
        assert found, f"try {n}: its point is not shown (the page fell back to the plain line)"
        return found[0]

    def facts(n: int):
        logits = last_logits(lm, key(f"try.{n}.prompt")).double()
        p = logits.softmax(-1)
        return logits, p, int(p.argmax())

    # 1. confident, yet temperature matters: the favourite loses more than half its share at T = 1.5
    logits, p, best = facts(1)
    p_hot = float((logits / 1.5).softmax(-1)[best])
    assert float(p[best]) >= 0.5 and p_hot < float(p[best]) / 2
    assert says(line(1), "{:.1%}", float(p[best])) and says(line(1), "{:.1%}", p_hot)
    # 2. an open question: the favourite under 20%, top-p 0.9 still keeps 100+ tokens
    logits, p, best = facts(2)
    kept = int((p.sort(descending=True).values.cumsum(0) < 0.9).sum()) + 1
    assert float(p[best]) < 0.2 and kept >= 100
    assert f"{kept:,}" in line(2)
    # 3. counting: the likeliest token is a lone space; digits and spaces are tokens of their own
    logits, p, best = facts(3)
    assert lm.token_text(best) == " " and float(p[best]) > 0.5
    assert [t.text for t in lm.tokenize(key("try.3.prompt")) if not t.special][:6] == ["1", ",", " ", "2", ",", " "]
    line(3)
    # 4. many continuations: entropy of 4+ bits, top-k 40 cuts off 10%+ of the probability
    logits, p, best = facts(4)
    bits = float(-(p * p.clamp_min(1e-300).log2()).sum())
    cut = 1 - float(p.sort(descending=True).values[:40].sum())
    assert bits >= 4 and cut >= 0.1
    assert says(line(4), "{:.1%}", cut)
    # 5. Chinese. SmolLM2: a third or more of the 10 likeliest tokens are byte pieces; most characters
    # split. Gemma: no byte piece among them, and every character of the prompt is whole in a token.
    prompt = key("try.5.prompt")
    logits, p, best = facts(5)
    top10 = lm.tokenizer.tokens(p.topk(10).indices.tolist())
    toks = lm.tokenize(prompt)
    split = {ch for t in toks if t.is_partial for ch in prompt[t.start:t.end]}
    hanzi = [ch for ch in prompt if "\u4e00" <= ch <= "\u9fff"]
    if model == GEMMA:
        assert not any(t.is_partial for t in top10) and not split
        assert any(len(t.text) > 1 and all("\u4e00" <= ch <= "\u9fff" for ch in t.text) for t in toks + top10)  # some words
        assert f"`{top10[0].text}`" in line(5)
    else:
        assert sum(t.is_partial for t in top10) >= 10 // 3
        assert len([ch for ch in hanzi if ch in split]) > len(hanzi) / 2
        assert f"{sum(t.is_partial for t in top10)}" in line(5)


def test_notices_read_right_on_odd_prompts(open_page, lm):
    one = open_page("sampling", prompt="Hello", params={"samples": "1"})
    assert not one.exception
    text = notices(one)
    assert "a single token" in text and not re.search(r"(?<![\d,.])1 tokens", text)
    assert "single draw" in text and "out of 1 times" not in text
    greedy = open_page("sampling", prompt="The capital of France is", params={"temperature": "0", "samples": "50"})
    assert "all 50 draws were" in notices(greedy) and "different tokens came up" not in notices(greedy)
    cut = open_page("sampling", prompt="The cat sat on the mat. " * 80 + "The dog")
    assert not cut.exception
    assert "the last 256 tokens" in notices(cut) and "`·dog`" in notices(cut)


def test_chinese_prompt_labels_read_as_characters(open_page, lm, gemma):
    at = open_page("sampling", lang="zh-Hant", prompt="我吃魚，魚吃我", model=SMOLLM2)
    assert not at.exception
    assert [t.text for t in lm.tokenize("我")] == ["<E6 88>", "<91>"]
    assert "`我²`" in notices(at)                    # the last token, <91>, read as the second piece of 我
    whole = open_page("sampling", lang="zh-Hant", prompt="我吃魚，魚吃我", model=GEMMA)
    assert not whole.exception
    assert [t.text for t in gemma.tokenize("我吃魚") if not t.special] == ["我", "吃", "魚"]
    assert "`我`" in notices(whole) and "`我²`" not in notices(whole)       # one character, one token
