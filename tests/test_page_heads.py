"""AppTests of the heads / GQA / KV cache lesson: the head measures on the page are the
model's, the controls are bound to the URL, and the KV calculator's arithmetic holds."""

from __future__ import annotations


import pytest

from lesson_model.analysis import heads as H
from lesson_model.analysis import kv_memory as K
from tests._apptest import charts, errors, text_of

pytestmark = pytest.mark.slow

DEFAULT = "The cat sat on the mat because it was tired. The cat"
REPEAT = "Mr and Mrs Dursley were proud. Mr and Mrs Dursley"


def metric(at, label_part: str) -> str:
    return next(m.value for m in at.metric if label_part in m.label)


def test_default_page_measures_are_the_models(open_page, lm):
    at = open_page("heads", lang="en")
    assert not errors(at)
    figs = charts(at)
    assert {"grid_chart", "overview", "open_chart", "slices_chart", "group_chart", "kv_chart"} <= set(figs)
    run = lm.run(DEFAULT, names=H.head_measure_names(lm.cfg.n_layers))
    grids = H.head_measures(lm, run)
    # The overview: 270 squares coloured by the previous-token score (the default measure).
    squares = figs["overview"]["data"][0]
    assert len(squares["x"]) == 270
    assert squares["marker"]["color"] == pytest.approx(grids["previous"].flatten().tolist(), abs=1e-5)
    # The grid: the 9 heads of layer 0 (the default layer), each the model's pattern.
    heat = [t for t in figs["grid_chart"]["data"] if t["type"] == "heatmap"]
    assert len(heat) == 9
    assert heat[4]["z"][3][1] == pytest.approx(float(run.cache["blocks.0.attn.hook_pattern"][0, 4, 3, 1]), abs=1e-6)
    # The strongest previous-token head is named in What to notice.
    layer, head, value = H.top_heads(grids["previous"], 1)[0]
    assert f"is {layer}.{head}: it puts {value:.0%}" in text_of(at)
    # GQA: three heads of one group, same keys; the check is shown.
    group = figs["group_chart"]["data"]
    assert [t["name"] for t in group] == ["head 0.0", "head 0.1", "head 0.2"]
    assert "K/V head 0" in text_of(at)
    # Every head reads the whole vector.
    share = figs["slices_chart"]["data"][0]["z"]
    assert len(share) == 9 and max(max(r) for r in share) < 0.3
    # The KV cache measured during a real generation step: 46,080 bytes per position (fp32).
    assert "46,080" in text_of(at)


def test_measure_and_head_from_the_url(open_page, lm):
    at = open_page("heads", lang="en", prompt=REPEAT, params={"measure": "induction", "layer": "17", "head": "4"})
    assert not errors(at)
    run = lm.run(REPEAT, names=H.head_measure_names(lm.cfg.n_layers))
    induction = H.head_measures(lm, run)["induction"]
    squares = charts(at)["overview"]["data"][0]
    assert squares["marker"]["color"] == pytest.approx(induction.flatten().tolist(), abs=1e-5)
    best = H.top_heads(induction, 1)[0]
    assert best[2] > 0.5                                     # the repeat is picked up by some head
    assert f"head {best[0]}.{best[1]} scores highest on induction" in text_of(at)
    outline = charts(at)["overview"]["data"][1]
    assert (outline["x"], outline["y"]) == ([4], [17])       # the open head is outlined


def test_induction_measure_without_repeats(open_page):
    at = open_page("heads", lang="en", prompt="One two three.", params={"measure": "induction"})
    assert not errors(at)
    assert any("No token occurs twice" in i.value for i in at.info)


def test_kv_calculator(open_page):
    at = open_page("heads", lang="en", params={"preset": "llama2_70b", "dtype": "fp16", "ctx": "4096"})
    assert not errors(at)
    assert metric(at, "per token") == "320 KiB"               # 2 * 80 * 8 * 128 * 2 = 327,680 bytes
    assert metric(at, "For 4,096") == "1.25 GiB"
    assert "327,680 bytes per token" in text_of(at)
    at = open_page("heads", lang="en", params={"preset": "llama2_70b", "dtype": "fp16", "kv": "MQA"})
    assert metric(at, "per token") == "40 KiB"                # one K/V head: 327,680 / 8
    series = [t["name"] for t in charts(at)["kv_chart"]["data"]]
    assert any("MQA" in s and "LLaMA-2-70B" in s for s in series)
    at = open_page("heads", lang="en", params={"preset": "gpt3", "dtype": "fp16", "ctx": "2048"})
    assert metric(at, "per token") == "4.5 MiB"
    assert metric(at, "For 2,048") == "9 GiB"
    kv = charts(at)["kv_chart"]["data"]
    gpt3 = next(t for t in kv if t["name"].startswith("GPT-3"))
    i = gpt3["x"].index(2048)
    assert gpt3["y"][i] == pytest.approx(K.kv_bytes(K.PRESETS["gpt3"], 2048, "fp16") / 2**30)


def test_bad_url_values(open_page):
    at = open_page("heads", lang="en", params={"measure": "<script>", "preset": "gpt5", "dtype": "fp8", "ctx": "-5",
                                               "kv": "zzz", "layer": "abc", "head": "99"})
    assert not errors(at)
    assert at.selectbox(key="measure").value == "previous"
    assert at.selectbox(key="preset").value == "this"
    assert at.slider(key="head").value == 8
    assert at.number_input(key="ctx").value == 1
    notes = " ".join(w.value for w in at.warning)
    for param in ("measure=", "preset=gpt5", "dtype=fp8", "ctx=-5", "kv=zzz", "head=99"):
        assert param in notes


@pytest.mark.parametrize("lang,title", [("zh-Hant", "多頭注意力"), ("zh-Hans", "多头注意力")])
def test_chinese_pages(open_page, lang, title):
    at = open_page("heads", lang=lang)
    assert not errors(at)
    assert title in at.title[0].value
    assert len(charts(at)) == 6


@pytest.mark.parametrize("prompt", ["貓咪貓咪喜歡魚", "🐱🐶🐱🐶 🎉"])
def test_chinese_and_emoji_prompts(open_page, lm, prompt):
    at = open_page("heads", lang="zh-Hans", prompt=prompt, params={"measure": "induction"})
    assert not errors(at)
    n = len(lm.tokenize(prompt))
    assert len(charts(at)["open_chart"]["data"][0]["x"]) == n


def test_empty_prompt(open_page):
    at = open_page("heads", lang="en", prompt="")
    assert not errors(at)
    assert not at.get("plotly_chart")
