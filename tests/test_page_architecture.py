"""Lesson 11 page: renders on both models in three languages, the calculator's URL values
reproduce (and clamp with a note), the notice's claims hold, the post-training comparison runs."""

import json

import pytest

from lesson_model.analysis import architecture as AR
from lesson_model.analysis.params import PRESETS, model_breakdown

MODELS = ("smollm2-135m", "gemma-3-270m")


def markdown(at):
    return "\n".join(m.value for m in at.markdown)


def notice_lines(at):
    return [m.value for m in at.markdown if m.value.startswith("- ")]


@pytest.mark.parametrize("lang", ["en", "zh-Hant", "zh-Hans"])
@pytest.mark.parametrize("model", MODELS)
def test_renders_on_both_models(open_page, lang, model):
    at = open_page("architecture", lang=lang, model=model)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.warning
    keys = {c.key for c in at.get("plotly_chart")}
    assert {"split_chart", "loss_chart"} <= keys
    assert at.selectbox(key="arch").value == model               # the calculator starts on the loaded model
    assert at.button(key="post_run")


def test_card_and_embedding_notice(open_page, lm, gemma):
    at = open_page("architecture", lang="en", model="gemma-3-270m")
    text = markdown(at)
    assert "Gemma 3 270M (loaded)" in text
    assert "15 layers local (512 tokens); global: 5, 11, 17" in text
    assert "4 : 1 (MQA, all 4 share one)" in text and "9 : 3 (GQA, groups of 3)" in text
    s, g = model_breakdown(lm), model_breakdown(gemma)
    line = next(n for n in notice_lines(at) if "embedding table" in n and lm.name in n)   # not the decoder-only notice
    assert f"**{s.parts['embedding'] / s.total:.0%}** of {lm.name}" in line and "**21%**" in line
    assert f"**{g.parts['embedding'] / g.total:.0%}** of {gemma.name}" in line and "**63%**" in line
    assert "262,144 × 640" in line
    differ = len(AR.differing(AR.model_card(lm), AR.model_card(gemma)))
    assert any(f"differ on {differ} of {len(AR.CARD_KEYS)} rows" in n for n in notice_lines(at))


def test_url_bound_calculator_reproduces(open_page):
    at = open_page("architecture", lang="en", model="smollm2-135m", params={"arch": "llama2-70b", "n_layers": 40})
    assert not at.exception and not at.warning
    assert at.selectbox(key="arch").value == "llama2-70b"
    assert at.number_input(key="n_layers").value == 40
    assert at.number_input(key="d_model").value == 8192              # the rest from the preset
    expected = AR.calculate(config_of_llama(40))
    total = next(m for m in at.metric if m.label == "Parameters")
    assert total.help == f"{expected['total']:,}"
    assert "Llama 2 70B, edited" in markdown(at) and "`n_layers`" in markdown(at)
    assert at.query_params["arch"] == "llama2-70b" and at.query_params["n_layers"] == "40"
    # the learner switches preset: the fields take the new preset's values, "edited" goes away
    at.selectbox(key="arch").set_value("mixtral-8x7b").run()
    assert at.number_input(key="n_layers").value == 32 and at.number_input(key="n_exp").value == 8
    assert "Mixtral 8x7B** as published" in markdown(at)
    mix = AR.calculate(PRESETS["mixtral-8x7b"])
    active = next(m for m in at.metric if m.label == "Active per token")
    assert active.help == f"{mix['active']:,}"
    assert any("one token goes through only" in n and "2 of the 8 experts" in n for n in notice_lines(at))
    assert "n_layers" not in at.query_params


def config_of_llama(layers):
    from dataclasses import replace
    return replace(PRESETS["llama2-70b"], n_layers=layers)


def test_bad_url_values_clamp_or_explain(open_page):
    at = open_page("architecture", lang="en", model="smollm2-135m",
                   params={"arch": "nonsense", "n_layers": 0, "d_model": "abc", "n_kv": 5})
    assert not at.exception
    warnings = [w.value for w in at.warning]
    assert any("arch=nonsense" in w for w in warnings)
    assert any("n_layers=0" in w for w in warnings)                    # clamped to 1, with a note
    assert at.number_input(key="n_layers").value == 1
    assert any("d_model=abc" in w for w in warnings)
    assert any("9 query heads do not split into 5 equal groups" in w for w in warnings)   # SmolLM2's 9 heads
    assert "split_chart" not in {c.key for c in at.get("plotly_chart")}
    at2 = open_page("architecture", lang="zh-Hant", model="gemma-3-270m", params={"n_kv": 8})
    assert any("K/V 頭不能比查詢頭多" in w.value for w in at2.warning)


def test_loss_notice_is_the_mean_of_one_pass(open_page, lm):
    prompt = "The cat sat on the mat. The cat sat on the mat."
    at = open_page("architecture", lang="en", model="smollm2-135m", prompt=prompt)
    ids = lm.encode(prompt)
    loss = AR.position_losses(ids, lm.run(ids, names=[]).logits)
    line = next(n for n in notice_lines(at) if "One forward pass" in n)
    assert f"your {len(ids)} tokens gave {len(ids) - 1} losses" in line and f"**{float(loss.mean()):.2f}**" in line
    chart = next(c for c in at.get("plotly_chart") if c.key == "loss_chart")
    spec = json.loads(chart.proto.spec)
    assert len(spec["data"][0]["y"]) == len(ids) - 1
    one = open_page("architecture", lang="en", model="smollm2-135m", prompt="Hi")
    assert not one.exception and any("One token gives no loss" in i.value for i in one.info)


def test_post_training_comparison(open_page, lm, gemma):
    at = open_page("architecture", lang="en", model="smollm2-135m")
    at.button(key="post_run").click().run()
    assert not at.exception
    codes = [c.value for c in at.code]
    assert any(c.rstrip().endswith("<|im_start|>assistant") for c in codes)       # the chat template, as fed
    assert any(c.startswith("The capital of France is Paris") and c.endswith("<|im_end|>") for c in codes)
    notes = notice_lines(at)
    assert any("wrote `<|im_end|>`" in n for n in notes)
    assert any(f"{gemma.name} never stopped" in n for n in notes)
    assert any("wrote a question of its own" in n for n in notes)
    zh = open_page("architecture", lang="zh-Hant", model="gemma-3-270m")
    zh.button(key="post_run").click().run()
    assert not zh.exception
    notes = notice_lines(zh)
    assert any(f"{lm.name} 寫出的 36 個詞元中" in n for n in notes)         # SmolLM2 writes byte pieces
    assert any("巴黎" in c for c in [c.value for c in zh.code])
