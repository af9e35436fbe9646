"""AppTests of the attention lesson: the figures carry the model's real numbers, the
controls are bound to the URL (bad values clamped with a note), and the search finds the
"was -> cat" heads on this model."""

from __future__ import annotations


import pytest

from lesson_model.analysis import attention as A
from tests._apptest import charts, errors, text_of

pytestmark = pytest.mark.slow

DEFAULT = "The cat sat on the mat because it was tired. The cat"
WAS_CAT = "The cat that I saw yesterday was"


def test_default_page_shows_the_models_numbers(open_page, lm):
    at = open_page("attention", lang="en")
    assert not errors(at)
    layer, head, query = at.slider(key="layer").value, at.slider(key="head").value, at.selectbox(key="pos").value
    n = len(lm.tokenize(DEFAULT))
    assert query == n - 1                                       # the last token by default
    run = lm.run(DEFAULT, names=A.capture_names(lm.cfg.n_layers))
    # The page opens on the head with the strongest long-range link from the query (found by search).
    key, hit = A.strongest_link(lm, run, query)
    assert (layer, head) == (hit.layer, hit.head)
    assert at.selectbox(key="key").value == key
    figs = charts(at)
    assert {"qk_chart", "steps_chart", "sum_chart", "pattern_chart", "lines_chart", "scale_chart", "search_chart",
            "cost_chart"} <= set(figs)
    steps = A.attention_steps(lm, run, layer, head, query)
    bars = figs["steps_chart"]["data"]
    assert bars[0]["y"] == pytest.approx(steps.raw.tolist(), abs=1e-3)          # q . k
    assert bars[1]["y"] == pytest.approx((steps.raw / 8).tolist(), abs=1e-3)    # / sqrt(64)
    assert bars[3]["y"] == pytest.approx(run.cache[f"blocks.{layer}.attn.hook_pattern"][0, head, query].tolist(),
                                         abs=1e-5)                             # softmax = the model's pattern
    assert len(bars[3]["x"]) == n
    pattern = figs["pattern_chart"]["data"][0]["z"]
    assert pattern[2][1] == pytest.approx(float(run.cache[f"blocks.{layer}.attn.hook_pattern"][0, head, 2, 1]),
                                          abs=1e-6)
    assert pattern[1][2] is None                                 # the causal mask: nothing above the diagonal
    # The what-if without the scale and its entropies.
    what_if = A.unscaled_what_if(steps)
    assert figs["scale_chart"]["data"][1]["y"] == pytest.approx(what_if.weights_unscaled.tolist(), abs=1e-5)
    assert at.metric[0].value.startswith(f"{what_if.entropy_scaled:.2f}")
    assert at.metric[1].value.startswith(f"{what_if.entropy_unscaled:.2f}")
    # Cost: the curves are the formulas, with the crossover at 6,144 tokens for this model.
    cost = figs["cost_chart"]["data"]
    x = cost[0]["x"]
    i = x.index(n)
    assert cost[0]["y"][i] * 1e9 == pytest.approx(1152 * n * (n + 1) / 2)
    assert cost[1]["y"][i] * 1e9 == pytest.approx(3_538_944 * n)
    text = text_of(at)
    assert "6,144" in text
    assert f"{steps.max_weight_error:.1e}" in text                # the check against hook_pattern is shown


def test_was_cat_found_by_search(open_page, lm):
    at = open_page("attention", lang="en", prompt=WAS_CAT)
    assert not errors(at)
    tokens = lm.tokenize(WAS_CAT)
    was, cat = len(tokens) - 1, 1
    assert tokens[cat].text == " cat" and tokens[was].text == " was"
    assert at.selectbox(key="key").value == cat                   # the strongest link from "was" is "cat"
    run = lm.run(WAS_CAT, names=A.pattern_names(lm.cfg.n_layers))
    hits = A.find_heads_attending(lm, run, was, cat, top=8)
    bars = charts(at)["search_chart"]["data"][0]
    assert bars["x"] == pytest.approx([h.weight for h in hits], abs=1e-5)
    assert bars["y"][0] == f"{hits[0].layer}.{hits[0].head}"
    assert hits[0].weight > 0.5
    assert f"{hits[0].weight:.0%}" in text_of(at)
    # "Open" the second-best head: the layer and head controls follow.
    at.button(key="open_1").click().run()
    assert not errors(at)
    assert (at.slider(key="layer").value, at.slider(key="head").value) == (hits[1].layer, hits[1].head)


def test_url_values_are_clamped_with_a_note(open_page, lm):
    at = open_page("attention", lang="en", prompt=WAS_CAT, params={"layer": "99", "head": "x", "pos": "2", "key": "7"})
    assert not errors(at)
    assert at.slider(key="layer").value == 29
    assert at.selectbox(key="pos").value == 2
    assert at.selectbox(key="key").value <= 2                     # a key after the query is not allowed
    notes = " ".join(w.value for w in at.warning)
    assert "layer=99" in notes and "head=x" in notes
    steps = charts(at)["steps_chart"]["data"]
    assert len(steps[3]["y"]) == 3                                # softmax over positions 0..2 only
    assert sum(steps[3]["y"]) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("lang,word", [("zh-Hant", "頭"), ("zh-Hans", "头")])
def test_chinese_pages(open_page, lang, word):
    at = open_page("attention", lang=lang)
    assert not errors(at)
    assert at.title[0].value == "注意力"
    assert word in text_of(at)
    assert len(charts(at)) == 8


@pytest.mark.parametrize("prompt", ["我喜歡貓，因為牠們很可愛。", "I ❤️ 🐱 and 👨‍👩‍👧!"])
def test_chinese_and_emoji_prompts(open_page, lm, prompt):
    at = open_page("attention", lang="zh-Hant", prompt=prompt)
    assert not errors(at)
    n = len(lm.tokenize(prompt))
    figs = charts(at)
    assert len(figs["pattern_chart"]["data"][0]["x"]) == n
    assert len(set(figs["pattern_chart"]["data"][0]["x"])) == n       # repeated byte pieces stay apart


def test_empty_prompt(open_page):
    at = open_page("attention", lang="en", prompt="")
    assert not errors(at)
    assert not at.get("plotly_chart")
    assert at.info


def test_one_token_prompt(open_page):
    at = open_page("attention", lang="en", prompt="Hello")
    assert not errors(at)
    figs = charts(at)
    assert figs["steps_chart"]["data"][3]["y"] == pytest.approx([1.0])
