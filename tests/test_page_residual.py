"""The residual-stream lesson page: runs in three languages and with odd prompts, binds its
controls to the URL, and draws numbers that match the model (parts add up, the lens's
last row is the model's prediction, attributions sum to the logit)."""

from __future__ import annotations


import pytest
import torch

from lesson_model.analysis import attribution as A
from lesson_model.analysis import lens as LL
from lesson_model.analysis import norms as NO
from ui import i18n
from tests._apptest import chart, errors

pytestmark = pytest.mark.slow

PAGE = "residual"
CHARTS = ["sum_chart", "norms_chart", "lens_chart", "rank_chart", "dla_chart", "heads_chart", "norm_chart", "grad_chart"]


def model_run(lm, prompt):
    names = sorted(set(A.dla_names(lm)) | set(NO.residual_names(lm)) | set(LL.logit_lens_names(lm))
                   | set(NO.sink_names(lm, range(15, 30))))
    return lm.run(prompt, names=names)


@pytest.mark.parametrize("lang", list(i18n.LANGS))
def test_default_prompt_every_language(open_page, lm, lang):
    at = open_page(PAGE, lang=lang)
    assert not errors(at)
    for key in CHARTS:
        chart(at, key)
    prompt = i18n.catalog(lang)["prompt.default"]
    run = model_run(lm, prompt)
    predicted = int(run.logits[0, -1].argmax())
    # the waterfall: 61 parts adding up to the final vector's length
    water = chart(at, "sum_chart")["data"][0]
    final = run.cache["blocks.29.hook_resid_post"][0, -1]
    assert len(water["y"]) == 1 + 2 * lm.cfg.n_layers + 1
    assert sum(water["y"][:-1]) == pytest.approx(float(final.norm()), rel=1e-4)
    assert water["y"][-1] == pytest.approx(float(final.norm()), rel=1e-5)
    # the lens's last row is the model's own prediction at the last position, with its probability
    lens = chart(at, "lens_chart")["data"][0]
    assert lens["z"][-1][-1] == pytest.approx(float(run.logits[0, -1].softmax(-1).max()), abs=1e-4)
    # direct logit attribution: parts sum to the model's logit of the predicted token
    dla = chart(at, "dla_chart")["data"]
    total = dla[0]["y"][0] + sum(dla[1]["y"]) + sum(dla[2]["y"])
    assert total == pytest.approx(float(run.logits[0, -1, predicted]), abs=1e-2)
    assert dla[2]["y"] == pytest.approx(A.direct_logit_attribution(lm, run, predicted).mlp.tolist(), abs=1e-4)
    # the heads of the chosen block add up to its attention bar
    layer = at.slider(key="head_layer").value
    heads = chart(at, "heads_chart")["data"][0]["y"]
    assert sum(heads) == pytest.approx(dla[1]["y"][layer], abs=1e-3)


def test_norms_heatmap_matches_the_model(open_page, lm):
    prompt = "Hello. The dog ran home"
    at = open_page(PAGE, lang="en", prompt=prompt)
    assert not errors(at)
    run = model_run(lm, prompt)
    norms = NO.residual_norms(lm, run)
    z = torch.tensor(chart(at, "norms_chart")["data"][0]["z"])
    assert torch.allclose(10 ** z, norms, rtol=1e-4)
    # the first token is far longer than the rest on this model: the page says so, with numbers
    massive = NO.massive_activations(lm, run)
    assert massive and all(m.position == 0 for m in massive if m.ratio > 50)
    info = " ".join(i.value for i in at.info)
    worst = max(massive, key=lambda m: m.norm)
    assert f"{worst.norm:,.0f}" in info and str(worst.dim) in info
    share = float(NO.first_token_attention(lm, run, layers=range(15, 30)).mean())
    assert f"{share:.0%}" in info


@pytest.mark.parametrize("prompt", ["貓坐在墊子上，因為牠累了。", "🐱 cats 😀 and 🐶 dogs 👍🏽", "Hi"])
def test_odd_prompts(open_page, lm, prompt):
    at = open_page(PAGE, lang="zh-Hans", prompt=prompt)
    assert not errors(at)
    n_tokens = len(lm.tokenize(prompt))
    lens = chart(at, "lens_chart")["data"][0]
    assert len(lens["x"]) == min(n_tokens, 12) and len(lens["y"]) == lm.cfg.n_layers + 1


def test_empty_prompt(open_page):
    at = open_page(PAGE, lang="zh-Hant", prompt="")
    assert not errors(at)
    assert i18n.catalog("zh-Hant")["lesson.empty_prompt"] in [i.value for i in at.info]


def test_url_controls_and_logit_difference(open_page, lm):
    prompt = "The opposite of hot is"
    run = model_run(lm, prompt)
    top = torch.topk(run.logits[0, -1], 10).indices.tolist()
    at = open_page(PAGE, lang="en", prompt=prompt,
                   params={"pos": 4, "target": 0, "versus": 3, "head_layer": 25, "layer": 7})
    assert not errors(at) and not at.warning
    assert at.selectbox(key="pos").value == 4 and at.slider(key="head_layer").value == 25
    dla = chart(at, "dla_chart")["data"]
    want = A.direct_logit_attribution(lm, run, top[0], 4, other_token=top[3])
    assert dla[1]["y"] == pytest.approx(want.attn.tolist(), abs=1e-4)
    diff = float(run.logits[0, 4, top[0]] - run.logits[0, 4, top[3]])
    assert dla[0]["y"][0] + sum(dla[1]["y"]) + sum(dla[2]["y"]) == pytest.approx(diff, abs=1e-2)
    # the norm comparison reads the vector entering block 7 at the chosen token
    norm = chart(at, "norm_chart")["data"]
    assert norm[0]["y"] == pytest.approx(run.cache["blocks.6.hook_resid_post"][0, 4].tolist(), abs=1e-3)
    assert sum(norm[1]["y"]) == pytest.approx(0, abs=1e-2)                      # LayerNorm: centered


def test_bad_url_values(open_page):
    at = open_page(PAGE, lang="en", prompt="The cat sat",
                   params={"pos": "abc", "target": 99, "versus": "x", "head_layer": -4, "layer": 1e9})
    assert not errors(at)
    notes = " ".join(w.value for w in at.warning)
    for param in ("pos=abc", "target=99", "versus=x", "head_layer=-4", "layer=1000000000.0"):
        assert param in notes
    assert at.selectbox(key="target").value == 9 and at.slider(key="head_layer").value == 0
