"""AppTests of the attention lesson: the figures carry the model's real numbers, the
controls are bound to the URL (bad values clamped with a note), and the search finds the
"was -> cat" heads on this model."""

from __future__ import annotations

import math

import pytest
import torch

from lesson_model.analysis import attention as A
from tests._apptest import charts, errors, says, text_of

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
    entropy = [m for m in at.metric if m.value.endswith("bits")]   # the scale part's two (the toy's weight aside)
    assert entropy[0].value.startswith(f"{what_if.entropy_scaled:.2f}")
    assert entropy[1].value.startswith(f"{what_if.entropy_unscaled:.2f}")
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
    assert says(text_of(at), "{:.0%}", hits[0].weight)
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
    at = open_page("attention", lang=lang, model="smollm2-135m")
    assert not errors(at)
    assert at.title[0].value == "注意力"
    assert word in text_of(at)
    assert len(charts(at)) == 8


@pytest.mark.parametrize("prompt", ["我喜歡貓，因為牠們很可愛。", "I ❤️ 🐱 and 👨‍👩‍👧!"])
def test_chinese_and_emoji_prompts(open_page, lm, prompt):
    at = open_page("attention", lang="zh-Hant", prompt=prompt, model="smollm2-135m")
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


# --- the notices say only what this run shows ------------------------------------------------

def test_one_token_prompt_notices_are_true(open_page, lm):
    """With one token every head gives it 100%: the page says so instead of naming an
    arbitrary "best" head, and no entropy reads "-0.00"."""
    at = open_page("attention", lang="en", prompt="Hello")
    assert not errors(at)
    run = lm.run("Hello", names=A.pattern_names(lm.cfg.n_layers))
    total = lm.cfg.n_layers * lm.cfg.n_heads
    assert A.heads_tied_for_most(run, lm.cfg.n_layers, 0, 0) == total          # the model: all heads tie
    text = text_of(at)
    assert f"every one of the {total} heads puts 100%" in text
    assert "Searching all" not in text and "puts the most attention" not in text
    assert "the first token: it can see only itself" in text
    assert "-0.00" not in text and all("-0.00" not in m.value for m in at.metric)
    assert [m.value for m in at.metric if m.value.endswith("bits")][0] == "0.00 bits"   # the toy's weight aside


def test_search_notice_names_the_unique_best_head(open_page, lm):
    at = open_page("attention", lang="en", prompt=WAS_CAT)
    tokens = lm.tokenize(WAS_CAT)
    was, cat = len(tokens) - 1, 1
    run = lm.run(WAS_CAT, names=A.pattern_names(lm.cfg.n_layers))
    assert A.heads_tied_for_most(run, lm.cfg.n_layers, was, cat) == 1          # one head stands out ...
    best = A.find_heads_attending(lm, run, was, cat, top=1)[0]
    grid = A.attention_between(run, lm.cfg.n_layers, was, cat)
    assert float(grid.max()) == pytest.approx(best.weight)                      # ... and it is the maximum
    assert (f"Searching all {lm.cfg.n_layers * lm.cfg.n_heads} heads, head {best.layer}.{best.head} puts the most"
            in text_of(at))


def test_try_this_mary_is_the_models_next_word(lm):
    """Try this 2 says the model's next word is Mary: check it on the model."""
    prompt = "When Mary and John went to the store, John gave a drink to"
    run = lm.run(prompt, names=[])
    assert lm.token_text(int(run.logits[0, -1].argmax())) == " Mary"


def test_long_prompt_charts_keep_their_size(open_page, lm):
    """A 64-token prompt: the lines view draws at most LINES_TOP keys (not a 1,500 px chart)
    and the softmax bars label only their largest weights, at a readable size."""
    from course.figures import attention as F
    prompt = " ".join(["The quick brown fox jumps over the lazy dog."] * 8)
    at = open_page("attention", lang="en", prompt=prompt)
    assert not errors(at)
    figs = charts(at)
    lines = figs["lines_chart"]
    labels = next(t for t in lines["data"] if t.get("mode") == "text" and len(t["text"]) > 1)
    assert 1 <= len(labels["text"]) <= F.LINES_TOP
    assert lines["layout"]["height"] <= 500
    softmax = figs["steps_chart"]["data"][3]
    shown = [t for t in softmax["text"] if t]
    assert 1 <= len(shown) <= F.LABELLED_TOP
    assert softmax["textfont"]["size"] >= 14 and softmax["constraintext"] == "none"
    hidden = next(c.value for c in at.caption if "keys with the most weight" in c.value)
    assert f"the {len(labels['text'])} keys" in hidden and f"the other {64 - len(labels['text'])}" in hidden
    assert figs["qk_chart"]["layout"]["height"] <= 1200


def test_what_if_legend_sits_in_the_room_above_100_percent(open_page):
    at = open_page("attention", lang="en")
    layout = charts(at)["scale_chart"]["layout"]
    assert layout["legend"]["y"] == 1 and layout["legend"]["yanchor"] == "top"   # away from the x-axis title
    assert layout["yaxis"]["range"][1] >= 1.3 and max(layout["yaxis"]["tickvals"]) == 1.0


def test_math_blocks_are_fenced():
    """Display maths spanning lines must open and close with "$$" on lines of their own
    (remark-math reads "$$text" as a fence with meta and the rest of the page as maths)."""
    from course import i18n
    for lang in i18n.LANGS:
        math = i18n.lesson_sections("attention", lang)["math"]
        for line in math.splitlines():
            if "$$" in line:
                assert line.strip() == "$$" or (line.strip().startswith("$$") and line.strip().endswith("$$")
                                                and line.count("$$") == 2), (lang, line)


def test_chinese_prompt_reads_as_characters(open_page):
    at = open_page("attention", lang="zh-Hant", prompt="我吃魚，魚吃我。", model="smollm2-135m")
    assert not errors(at)
    options = at.selectbox(key="pos").options
    assert "0: 我¹" in options and "4: 魚¹" in options
    assert not any("<E" in o for o in options)


def test_scale_notice_close_scores_is_true(open_page, lm):
    """On two special tokens the scores are close together: the page says the division
    changes little, and the model's numbers agree (a small spread, a small change)."""
    prompt = "<|im_start|><|im_end|>"
    at = open_page("attention", lang="en", prompt=prompt)
    assert not errors(at)
    layer, head, query = at.slider(key="layer").value, at.slider(key="head").value, at.selectbox(key="pos").value
    run = lm.run(prompt, names=A.capture_names(lm.cfg.n_layers))
    steps = A.attention_steps(lm, run, layer, head, query)
    what_if = A.unscaled_what_if(steps)
    visible = steps.scaled[: query + 1]
    assert float(visible.max() - visible.min()) < 1.0                        # the scores are close together
    assert what_if.max_unscaled - what_if.max_scaled < 0.05                   # so the division changes little
    assert "Here the scores are close together" in text_of(at)
    assert "pile up on fewer tokens" not in text_of(at)


def test_one_token_cost_notice_is_singular(open_page):
    at = open_page("attention", lang="en", prompt="Hello")
    text = text_of(at)
    assert "With 1 token, each head scores a single query-key pair" in text and "1 tokens" not in text


# --- Gemma 3: MQA, QK-norm, the sliding window, the Chinese seed example ------------------------------------

GEMMA = "gemma-3-270m"
SEED = {"zh-Hant": "貓坐在墊子上，因為牠累了。", "zh-Hans": "猫坐在垫子上，因为它累了。"}   # 牠 for animals in Taiwan


@pytest.mark.parametrize("model", ["smollm2-135m", GEMMA])
@pytest.mark.parametrize("lang", ["en", "zh-Hant", "zh-Hans"])
def test_page_renders_on_both_models(open_page, lang, model):
    at = open_page("attention", lang=lang, model=model)
    assert not errors(at)
    figs = charts(at)
    assert ("window_chart" in figs) == (model == GEMMA)
    assert len(figs) == (9 if model == GEMMA else 8)


def test_gemma_steps_are_the_real_scores(open_page, gemma):
    """Step by step on Gemma: q and k are hook_rot_q/hook_rot_k (after QK-norm and RoPE), the
    division is by √256 = 16, the what-if recomputes from those real scores."""
    at = open_page("attention", lang="en", model=GEMMA)
    assert not errors(at)
    layer, head, query = at.slider(key="layer").value, at.slider(key="head").value, at.selectbox(key="pos").value
    names = A.capture_names(gemma.cfg.n_layers) + [f"blocks.{layer}.attn.hook_attn_scores"]
    run = gemma.run(DEFAULT, names=names)
    key, hit = A.strongest_link(gemma, run, query)
    assert (layer, head) == (hit.layer, hit.head)
    figs = charts(at)
    bars = figs["steps_chart"]["data"]
    scores = run.cache[f"blocks.{layer}.attn.hook_attn_scores"][0, head, query]
    assert bars[1]["y"] == pytest.approx(scores.tolist(), abs=1e-3)                  # the model's own scaled scores
    assert bars[0]["y"] == pytest.approx((scores * 16).tolist(), rel=1e-4, abs=1e-2)
    what_if = A.unscaled_what_if(A.attention_steps(gemma, run, layer, head, query))
    assert figs["scale_chart"]["data"][1]["y"] == pytest.approx((scores * 16).softmax(-1).tolist(), abs=1e-5)
    assert figs["scale_chart"]["data"][1]["y"] == pytest.approx(what_if.weights_unscaled.tolist(), abs=1e-5)
    text = text_of(at)
    assert "d_head = 256" in text and "√256 = 16" in text and "All 4 query heads of a layer share one key/value head" in text
    assert "hook_rot_q" in text
    # cost: the crossover for this config, and the sliding layers' line
    assert f"{A.crossover_length(gemma.cfg):,}" in text
    cost = figs["cost_chart"]["data"]
    x = cost[0]["x"]
    i = x.index(1000) if 1000 in x else len(x) - 1
    assert cost[1]["y"][i] * 1e9 == pytest.approx(A.block_cost(gemma.cfg, x[i], 0).attention)


def test_gemma_window_on_a_long_prompt(open_page, gemma):
    at = open_page("attention", lang="en", model=GEMMA)
    assert not errors(at)
    ids = A.repeat_to_length(gemma.encode(DEFAULT), 640, 1)
    demo = A.window_demo(gemma, ids)
    s, g = demo.layers
    assert (s, g) == (4, 5) and s in gemma.cfg.sliding_layers and g not in gemma.cfg.sliding_layers
    assert float(demo.beyond(s).max()) == 0.0 and demo.outside_zero[s]
    text = text_of(at)
    far = demo.beyond(g)
    assert (f"the last token in sliding-window layer {s} puts 0% of its attention on keys 512 or more positions back"
            in text)
    assert f"the {demo.outside_count[s]:,} query-key pairs its window hides are all exactly 0" in text
    assert f"Global layer {g} gives those keys {float(far.min()):.0%}–{float(far.max()):.0%} per head" in text
    assert float(far.min()) > 0
    fig = charts(at)["window_chart"]
    z_s, z_g = fig["data"][0]["z"], fig["data"][2]["z"]
    assert z_s[-1][0] is None and z_g[-1][0] is not None        # bottom-left: 600+ back, blank only when sliding
    assert "1,048,576 multiply-adds per token, below the 5,570,560" in text


OWN = "My dog chased the ball across the park because it was"


def _window_line(demo, source: str) -> str:
    s, g = demo.layers
    far = demo.beyond(g)
    return (f"On {source} repeated to {demo.n:,} tokens, the last token in sliding-window layer {s} puts "
            f"{float(demo.beyond(s).max()):.0%} of its attention on keys 512 or more positions back, in every head: "
            f"the {demo.outside_count[s]:,} query-key pairs its window hides are all exactly 0. Global layer {g} "
            f"gives those keys {float(far.min()):.0%}–{float(far.max()):.0%} per head")


def test_gemma_window_on_an_own_prompt_shows_the_default_prompt_unless_asked(open_page, gemma):
    """A learner's own prompt: the window demo stays on the default prompt (computed once for
    every session) and says so; with the toggle on (?window_mine=1) it runs on theirs."""
    at = open_page("attention", lang="en", model=GEMMA, prompt=OWN)
    assert not errors(at)
    assert at.toggle(key="window_mine").value is False
    default = A.window_demo(gemma, A.repeat_to_length(gemma.encode(DEFAULT), 640, 1))
    text = text_of(at)
    assert _window_line(default, "the default prompt") in text
    assert "The default prompt repeated to 640 tokens" in text and "Your prompt repeated" not in text
    at = open_page("attention", lang="en", model=GEMMA, prompt=OWN, params={"window_mine": 1})
    assert not errors(at) and at.toggle(key="window_mine").value is True
    mine = A.window_demo(gemma, A.repeat_to_length(gemma.encode(OWN), 640, 1))
    assert not torch.equal(mine.pooled[mine.layers[1]], default.pooled[default.layers[1]])   # really another text
    text = text_of(at)
    assert _window_line(mine, "your prompt") in text and "Your prompt repeated to 640 tokens" in text
    z = charts(at)["window_chart"]["data"][2]["z"]
    assert z[-1][0] == pytest.approx(math.log10(float(mine.pooled[mine.layers[1]][-1, 0])), abs=1e-5)   # log colour


def test_gemma_window_toggle_only_when_the_prompt_is_not_the_default(open_page):
    at = open_page("attention", lang="zh-Hant", model=GEMMA)
    assert not errors(at)
    assert not [t for t in at.toggle if t.key == "window_mine"]
    assert "把你的提示詞重複到 640 個詞元" in text_of(at)
    at = open_page("attention", lang="zh-Hans", model=GEMMA, prompt="我的狗追着球跑过公园，因为它")
    assert not errors(at)
    assert at.toggle(key="window_mine").label == "重复我的提示词"
    assert "把默认提示词重复到 640 个词元" in text_of(at)


def test_smollm2_has_no_window(open_page):
    at = open_page("attention", lang="zh-Hans", model="smollm2-135m")
    assert not errors(at)
    assert "window_chart" not in charts(at)
    assert "每一层都是全局注意力" in text_of(at)


@pytest.mark.parametrize("lang", ["zh-Hant", "zh-Hans"])
def test_gemma_seed_example_it_attends_to_cat(open_page, gemma, lang):
    """Try this 1 on Gemma in Chinese: the button puts the query on 它 (因为它 in Simplified,
    one token there) and the key on 貓; the search notice names the head the run finds."""
    from course import i18n
    prompt = i18n.catalog(lang)["attention.gemma.try.1.prompt"]
    assert prompt == SEED[lang]
    at = open_page("attention", lang=lang, model=GEMMA, prompt="你好")
    at.button(key="try_0").click().run()
    assert not errors(at)
    tokens = gemma.tokenize(prompt)
    texts = [t.text for t in tokens]
    query, key = at.selectbox(key="pos").value, at.selectbox(key="key").value
    assert {"zh-Hant": "牠", "zh-Hans": "它"}[lang] in texts[query] and texts[key] in ("貓", "猫")
    run = gemma.run(prompt, names=A.pattern_names(gemma.cfg.n_layers))
    best = A.find_heads_attending(gemma, run, query, key, top=1)[0]
    assert A.heads_tied_for_most(run, gemma.cfg.n_layers, query, key) == 1
    assert f"{best.layer}.{best.head}" in text_of(at) and says(text_of(at), "{:.0%}", best.weight)
    assert best.weight > 0.2                                   # a real link, computed live (7.0 on this model)


@pytest.mark.parametrize("lang", ["en", "zh-Hant", "zh-Hans"])
def test_gemma_try_this_targets_and_claims(gemma, lang):
    """Every Gemma Try-this: its query and key exist in the prompt's tokens; try 2's "next word"."""
    from course import i18n
    cat = i18n.catalog(lang)
    for n in (1, 2, 3):
        texts = [t.text.strip() for t in gemma.tokenize(cat[f"attention.gemma.try.{n}.prompt"])]
        q, k = cat[f"attention.gemma.try.{n}.query"], cat[f"attention.gemma.try.{n}.key"]
        qi = max(i for i, t in enumerate(texts) if t == q or q in t)
        assert any(t == k or k in t for t in texts[:qi])
    prompt = cat["attention.gemma.try.2.prompt"]
    ids = gemma.encode(prompt)
    for _ in range(2):
        ids.append(int(gemma.run(ids, names=[]).logits[0, -1].argmax()))
    said = gemma.decode(ids[len(gemma.encode(prompt)):])
    assert said.strip().startswith("Mary" if lang == "en" else "小明"), said


def test_gemma_was_cat(gemma):
    """Gemma's English Try this 1: the search opens on was -> cat (the strongest link)."""
    run = gemma.run(WAS_CAT, names=A.pattern_names(gemma.cfg.n_layers))
    tokens = gemma.tokenize(WAS_CAT)
    key, _ = A.strongest_link(gemma, run, len(tokens) - 1)
    assert tokens[key].text == " cat"


def test_gemma_url_values_are_clamped(open_page):
    at = open_page("attention", lang="en", model=GEMMA, prompt=WAS_CAT, params={"layer": "99", "head": "9"})
    assert not errors(at)
    assert at.slider(key="layer").value == 17 and at.slider(key="head").value == 3
