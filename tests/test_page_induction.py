"""AppTests of the induction-heads lesson: the score map is induction_scores, the ablation
raises the loss on the repeat more than random heads do, the learner's repeats are found,
and the controls are bound to the URL. Short sequences keep the tests cheap."""

from __future__ import annotations


import pytest
import torch

from lesson_model.analysis import induction as I
from tests._apptest import charts, errors, text_of

pytestmark = pytest.mark.slow

SMALL = {"len": "12", "seed": "3", "k": "4"}
GORP = "My friend Gorp Fendleton likes tea. Gorp"


def test_random_tokens_map_loss_and_ablation(open_page, lm):
    at = open_page("induction", lang="en", params=SMALL)
    assert not errors(at)
    figs = charts(at)
    assert {"map_chart", "stripes_chart", "loss_chart", "ablation_chart", "site_chart"} <= set(figs)
    exp = I.induction_experiment(lm, seq_len=12, n_seqs=10, seed=3)
    torch.testing.assert_close(torch.tensor(figs["map_chart"]["data"][0]["z"]), exp.scores, atol=1e-5, rtol=0)
    loss = figs["loss_chart"]["data"]
    assert loss[0]["y"] == pytest.approx(exp.loss_first.tolist(), abs=1e-4)
    assert loss[1]["y"] == pytest.approx(exp.loss_second.tolist(), abs=1e-4)
    # Ablation: intact, top 4 zeroed, 3 random sets of 4.
    bars = figs["ablation_chart"]["data"][0]
    assert len(bars["y"]) == 5
    intact, top, *randoms = bars["y"]
    assert intact == pytest.approx(exp.mean_loss_second, abs=1e-4)
    assert top > intact + 1.0
    assert top > max(randoms)
    best = I.top_k_heads(exp.scores, 4)
    assert f"{best[0][0]}.{best[0][1]}" in text_of(at)
    # The top heads' patterns: 3 panels of 24 x 24.
    heat = [t for t in figs["stripes_chart"]["data"] if t["type"] == "heatmap"]
    assert len(heat) == 3 and len(heat[0]["z"]) == 24


def test_learner_text_repeat(open_page, lm):
    at = open_page("induction", lang="en", prompt=GORP, params=SMALL)
    assert not errors(at)
    tokens = lm.tokenize(GORP)
    run = lm.run(GORP, names=[f"blocks.{layer}.attn.hook_pattern" for layer in range(30)])
    sites = I.repeat_sites(lm, run)
    last = sites[-1]
    assert at.selectbox(key="site").value == str(last.query)       # the last repeat by default
    b = last.targets[-1]
    probs = run.logits[0, last.query].softmax(-1)
    assert f"{float(probs[tokens[b].id]):.1%}" in text_of(at)      # the model's probability for B
    bars = charts(at)["site_chart"]["data"][0]
    flat = last.grid.flatten()
    assert bars["x"][0] == pytest.approx(float(flat.max()), abs=1e-5)
    assert bars["x"][0] > 0.5                                     # some head copies the made-up name


def test_no_repeat_in_text(open_page):
    at = open_page("induction", lang="en", prompt="Hello there", params=SMALL)
    assert not errors(at)
    assert any("No token occurs twice" in i.value for i in at.info)
    assert "site_chart" not in charts(at)
    assert "map_chart" in charts(at)                              # the random-token test still runs


def test_bad_url_values(open_page):
    at = open_page("induction", lang="en", prompt=GORP, params={"len": "5", "seed": "x", "k": "99", "site": "abc"})
    assert not errors(at)
    assert at.number_input(key="len").value == 10
    assert at.number_input(key="seed").value == 0
    assert at.slider(key="k").value == 10
    notes = " ".join(w.value for w in at.warning)
    for param in ("len=5", "seed=x", "k=99", "site=abc"):
        assert param in notes


@pytest.mark.parametrize("lang,word", [("zh-Hant", "歸納"), ("zh-Hans", "归纳")])
def test_chinese_pages(open_page, lang, word):
    at = open_page("induction", lang=lang, params=SMALL)
    assert not errors(at)
    assert word in at.title[0].value
    assert word in text_of(at)


@pytest.mark.parametrize("prompt", ["貓咪說：喵喵。貓咪", "🐱 says hi 🐱 says"])
def test_chinese_and_emoji_prompts(open_page, prompt):
    at = open_page("induction", lang="zh-Hans", prompt=prompt, params=SMALL)
    assert not errors(at)
    assert "site_chart" in charts(at)


def test_empty_prompt(open_page):
    at = open_page("induction", lang="en", prompt="", params=SMALL)
    assert not errors(at)
    assert not at.get("plotly_chart")
