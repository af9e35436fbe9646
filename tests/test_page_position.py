"""The position lesson: sinusoidal waves, the RoPE ladder, real q turning, relative scores."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from course import i18n
from lesson_model.analysis import rope as R
from tests._apptest import arr, chart

CHINESE = "貓坐在墊子上，因為牠累了。"
EMOJI = "🐱 sat on 🧶 😀"


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


@pytest.mark.parametrize("lang", list(i18n.LANGS))
@pytest.mark.parametrize("prompt", [None, CHINESE, EMOJI])
def test_ladder_turning_and_relative_scores_match_the_model(open_page, lm, lang, prompt):
    at = open_page("position", lang=lang, prompt=prompt, model="smollm2-135m")
    assert not at.exception, [e.value for e in at.exception]
    text = prompt if prompt is not None else i18n.catalog(lang)["prompt.default"]
    ids = lm.encode(text)
    n = len(ids)
    # The frequency ladder is the model's own inv_freq.
    ladder = arr(chart(at, "ladder")["data"][0]["y"])
    np.testing.assert_allclose(ladder, lm.decoder.rope.inv_freq.cpu().numpy(), rtol=1e-6)
    # Defaults: layer 16, head 0, pair 0, query at the last token, key just before it.
    layer, head = 16, 0
    run = lm.run(ids, names=R.rope_hook_names(layer))
    each = chart(at, "turn_each")["data"]
    before = next(t for t in each if t.get("mode") == "markers")
    after = next(t for t in each if t.get("mode") == "markers+text")
    q, rq = run.cache[f"blocks.{layer}.attn.hook_q"][0, :, head], run.cache[f"blocks.{layer}.attn.hook_rot_q"][0, :, head]
    np.testing.assert_allclose(arr(before["x"]), q[:, 0].numpy(), atol=1e-5)
    np.testing.assert_allclose(arr(after["y"]), rq[:, 32].numpy(), atol=1e-5)
    # The relative chart: flat lines on the left, the model's own score as the star on the right.
    rel = chart(at, "relative")["data"]
    flat = [t for t in rel if t.get("mode") == "lines+markers"]
    assert len(flat) == 6
    for trace in flat:
        ys = arr(trace["y"])
        assert ys.max() - ys.min() < 1e-3
    star = next(t for t in chart(at, "relative_curve")["data"] if t.get("marker", {}).get("symbol") == "star")
    kpos = max(0, n - 2)
    rk = run.cache[f"blocks.{layer}.attn.hook_rot_k"][0, kpos, head // lm.cfg.group_size]
    assert float(arr(star["y"])[0]) == pytest.approx(float(rq[n - 1] @ rk) / 8.0, abs=1e-3)
    assert metric(at, i18n.catalog(lang)["position.where.params"]) == "0"


def test_same_vector_circle(open_page, lm):
    at = open_page("position", lang="en", prompt="The cat sat on the mat", params={"qpos": 2, "pair": 3})
    data = chart(at, "turn_same")["data"]
    points = next(t for t in data if t.get("mode") == "markers+text")
    xs, ys = arr(points["x"]), arr(points["y"])
    radius = np.hypot(xs, ys)
    np.testing.assert_allclose(radius, radius[0], rtol=1e-4)        # the same vector: one circle
    run = lm.run("The cat sat on the mat", names=R.rope_hook_names(16))
    q = run.cache["blocks.16.attn.hook_q"][0, 2, 0]
    theta = float(lm.decoder.rope.inv_freq.cpu()[3])
    for p in range(len(xs)):
        expected = R.rotate_pair([float(q[3]), float(q[35])], p * theta)
        assert [xs[p], ys[p]] == pytest.approx(expected.tolist(), abs=1e-4)


def test_url_values_are_clamped_with_notes(open_page):
    at = open_page("position", lang="en", prompt="a b c d",
                   params={"layer": 99, "head": -5, "pair": 40, "qpos": 2, "kpos": 3, "clock": 99999})
    assert not at.exception
    assert at.slider(key="layer").value == 29
    assert at.slider(key="head").value == 0
    assert at.slider(key="pair").value == 31
    assert at.selectbox(key="kpos").value == 2                       # a key cannot come after its query
    assert at.number_input(key="clock").value == 8191
    notes = " ".join(w.value for w in at.warning)
    for param in ("layer=99", "head=-5", "pair=40", "clock=99999"):
        assert param in notes


def test_clock_hands_follow_the_formula(open_page, lm):
    at = open_page("position", lang="zh-Hans", params={"clock": 1000}, model="smollm2-135m")
    hands = chart(at, "clock_chart")["data"]
    thetas = lm.decoder.rope.inv_freq.cpu()
    for trace, pair in zip(hands, (0, 4, 8, 16, 24, 31)):
        deg = arr(trace["theta"])[1]
        assert deg == pytest.approx(math.degrees(1000 * float(thetas[pair])) % 360, abs=1e-3)


def test_one_token_and_empty_prompts(open_page):
    at = open_page("position", lang="en", prompt="Hi")
    assert not at.exception
    assert chart(at, "relative")
    at = open_page("position", lang="zh-Hant", prompt="")
    assert not at.exception and at.info and not at.get("plotly_chart")


def test_sinusoidal_heatmap_is_the_formula(open_page):
    at = open_page("position", lang="en", prompt="Hello")
    z = arr(chart(at, "sin_heat")["data"][0]["z"])
    expected = R.sinusoidal_encoding(64, 128).numpy()
    np.testing.assert_allclose(z, expected, atol=1e-6)
    assert torch.tensor(z).shape == (64, 128)


def test_intro_nope_claim_is_the_literatures():
    """Correctness review row 20: the no-position-encoding claim cites the papers and says
    "somewhat better", not "much better", in every language."""
    for lang in i18n.LANGS:
        intro = i18n.lesson_sections("position", lang)["intro"]
        assert "Haviv" in intro and "Kazemnejad" in intro and "2022" in intro and "2023" in intro
        assert "much better" not in intro and "好得多" not in intro


def test_try_this_same_tokens_differ_only_by_rotation_in_layer_0(lm):
    """Try this 1: in layer 0 the repeated tokens get the same query before RoPE, and after
    RoPE the same vector turned by its own position (every pair keeps its length)."""
    prompt = i18n.catalog("en")["position.try.1.prompt"]
    tokens = lm.tokenize(prompt)
    run = lm.run(prompt, names=R.rope_hook_names(0))
    q, rq = run.cache["blocks.0.attn.hook_q"][0], run.cache["blocks.0.attn.hook_rot_q"][0]
    same = [i for i, t in enumerate(tokens) if t.text == " cat"]
    assert len(same) >= 3
    for i in same[1:]:
        torch.testing.assert_close(q[i], q[same[0]], atol=0, rtol=0)            # identical before RoPE
        assert float((rq[i] - rq[same[0]]).abs().max()) > 1e-2                  # different after it ...
        placed = R.rotate_head(lm, q[same[0]].float(), [i] * q.shape[1], 0)        # ... by rotation alone (every head)
        torch.testing.assert_close(rq[i].float(), placed.float(), atol=1e-4, rtol=1e-4)


def test_relative_charts_are_two_figures_with_short_titles(open_page):
    at = open_page("position", lang="en", prompt="The cat sat on the mat")
    assert not at.exception
    left, right = chart(at, "relative"), chart(at, "relative_curve")
    assert all(t.get("mode") == "lines+markers" for t in left["data"])
    assert any(t.get("marker", {}).get("symbol") == "star" for t in right["data"])
    for key in ("sin_heat", "turn_same", "turn_each", "relative", "relative_curve"):
        title = chart(at, key)["layout"]["title"]["text"]
        assert len(title) <= 30, (key, title)                       # fits a half-width column at 1280


def test_clock_dial_leaves_room_for_its_labels(open_page):
    at = open_page("position", lang="en", params={"clock": 100})
    layout = chart(at, "clock_chart")["layout"]
    assert layout["polar"]["domain"]["x"][1] >= 0.5 and layout["legend"]["x"] > layout["polar"]["domain"]["x"][1]
    assert layout["margin"]["l"] >= 40                              # "180°" is drawn left of the dial
    assert layout["height"] >= 450


def test_chinese_prompt_reads_as_characters(open_page):
    at = open_page("position", lang="zh-Hans", prompt="我吃魚，魚吃我。", model="smollm2-135m")
    assert not at.exception
    options = at.selectbox(key="qpos").options
    assert "0: 我¹" in options and not any("<E" in o for o in options)
    each = chart(at, "turn_each")["data"]
    after = next(t for t in each if t.get("mode") == "markers+text")
    assert after["text"][4] == "魚¹"


# --- Gemma 3: two RoPE bases, QK-norm, the Try-this prompts on the model they run on ------------------------

GEMMA = "gemma-3-270m"


@pytest.mark.parametrize("model", ["smollm2-135m", GEMMA])
@pytest.mark.parametrize("lang", ["en", "zh-Hant", "zh-Hans"])
def test_page_renders_on_both_models(open_page, lang, model):
    at = open_page("position", lang=lang, model=model, prompt="貓坐在墊子上，因為它累了。")
    assert not at.exception, [e.value for e in at.exception]
    assert chart(at, "ladder") and chart(at, "clock_chart") and chart(at, "relative_curve")


def test_gemma_ladder_shows_both_bases_from_rope_for(open_page, gemma):
    at = open_page("position", lang="en", model=GEMMA)
    assert not at.exception, [e.value for e in at.exception]
    cfg = gemma.cfg
    local, glob = R.rope_bases(gemma)
    data = chart(at, "ladder")["data"]
    assert len(data) == 2
    np.testing.assert_allclose(arr(data[0]["y"]), gemma.decoder.rope_for(cfg.sliding_layers[0]).inv_freq.numpy(), rtol=1e-6)
    g_layer = next(i for i in range(cfg.n_layers) if i not in cfg.sliding_layers)
    np.testing.assert_allclose(arr(data[1]["y"]), gemma.decoder.rope_for(g_layer).inv_freq.numpy(), rtol=1e-6)
    text = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
    # the notices quote the two bases, their layers (from cfg.sliding_layers) and the computed counts
    assert "base 10,000" in text and "base 1,000,000" in text
    assert "(5, 11, 17)" in text and "(0–4, 6–10, 12–16)" in text
    assert f"{local.slow_pairs} of 128 pairs never finish one within the 512 positions" in text
    assert f"{glob.slow_pairs} of 128 pairs never finish one within the 32,768-token context" in text
    assert f"{float(local.periods[-1]):,.0f} tokens" in text and f"{float(glob.periods[-1]):,.0f} tokens" in text
    # the default layer comes from the model (a fraction of its stack) and says which RoPE it uses
    assert at.slider(key="layer").value == int(cfg.n_layers * 0.55)
    assert "Layer 9 uses the RoPE of the sliding-window layers (base 10,000)" in text


def test_gemma_prose_numbers_are_the_configs(gemma):
    """The Gemma prose names the window and the two bases: they are this config's."""
    cfg = gemma.cfg
    assert (cfg.sliding_window, cfg.rope_theta_sliding, cfg.rope_theta) == (512, 10000, 1e6)
    assert len(cfg.sliding_layers) * 6 == cfg.n_layers * 5                   # five of every six layers
    for lang in i18n.LANGS:
        text = i18n.lesson_sections("position", lang)["bases-gemma"]
        assert "512" in text and "10,000" in text and "1,000,000" in text


@pytest.mark.parametrize("layer", [5, 4])
def test_gemma_turn_uses_the_normed_q_and_the_layers_rope(open_page, gemma, layer):
    prompt = "我吃魚，魚吃我。"
    at = open_page("position", lang="zh-Hant", model=GEMMA, prompt=prompt, params={"layer": layer, "pair": 2})
    assert not at.exception, [e.value for e in at.exception]
    run = gemma.run(prompt, names=R.rope_hook_names(layer))
    pre = R.pre_rope(gemma, run, layer, "q")[:, 0]
    each = chart(at, "turn_each")["data"]
    before = next(t for t in each if t.get("mode") == "markers")
    np.testing.assert_allclose(arr(before["x"]), pre[:, 2].numpy(), atol=1e-5)          # after QK-norm, not hook_q
    n = run.ids.shape[1]
    rq = run.cache[f"blocks.{layer}.attn.hook_rot_q"][0, n - 1, 0]
    rk = run.cache[f"blocks.{layer}.attn.hook_rot_k"][0, n - 2, 0]
    star = next(t for t in chart(at, "relative_curve")["data"] if t.get("marker", {}).get("symbol") == "star")
    assert float(arr(star["y"])[0]) == pytest.approx(float(rq @ rk) / 16.0, abs=1e-3)
    kind = "全域層（底數 1,000,000）" if layer == 5 else "滑動視窗層（底數 10,000）"
    assert any(kind in c.value for c in at.caption)


def test_gemma_clock_uses_the_chosen_base(open_page, gemma):
    at = open_page("position", lang="en", model=GEMMA, params={"clock": 1000, "base": "global"})
    assert not at.exception
    hands = chart(at, "clock_chart")["data"]
    thetas = gemma.decoder.rope_for(5).inv_freq
    for trace, pair in zip(hands, (0, 16, 32, 64, 96, 127)):
        assert arr(trace["theta"])[1] == pytest.approx(math.degrees(1000 * float(thetas[pair])) % 360, abs=1e-3)


def test_gemma_url_values_are_clamped(open_page):
    at = open_page("position", lang="en", model=GEMMA, prompt="a b c d", params={"layer": 99, "head": 9, "pair": 400})
    assert not at.exception
    assert at.slider(key="layer").value == 17 and at.slider(key="head").value == 3 and at.slider(key="pair").value == 127


def _layer0_queries(lm, prompt):
    run = lm.run(prompt, names=R.rope_hook_names(0))
    return lm.tokenize(prompt), R.pre_rope(lm, run, 0, "q"), run.cache["blocks.0.attn.hook_rot_q"][0]


@pytest.mark.parametrize("lang", ["en", "zh-Hant", "zh-Hans"])
def test_gemma_try_same_tokens_differ_only_by_rotation(gemma, lang):
    """Gemma's Try this 1 (the cat sat / 我吃魚，魚吃我。): a repeated token has the same query
    before RoPE in layer 0, and after it the same vector turned by its own position."""
    prompt = i18n.catalog(lang)["position.gemma.try.1.prompt"]
    tokens, q, rq = _layer0_queries(gemma, prompt)
    texts = [t.text for t in tokens]
    repeated = [x for x in set(texts) if texts.count(x) >= 2 and not x.startswith("<")]
    assert repeated
    for x in repeated:
        same = [i for i, t in enumerate(texts) if t == x]
        for i in same[1:]:
            torch.testing.assert_close(q[i], q[same[0]], atol=0, rtol=0)
            assert float((rq[i] - rq[same[0]]).abs().max()) > 1e-2
            placed = R.rotate_head(gemma, q[same[0]].float(), [i] * q.shape[1], 0)
            torch.testing.assert_close(rq[i].float(), placed, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("lang", ["zh-Hant", "zh-Hans"])
def test_gemma_try_other_order_same_queries(gemma, lang):
    """Try this 2 (魚吃我，我吃魚。): the same characters as try 1 in another order; layer 0 gets the
    same set of queries before RoPE, and only after RoPE do the two sentences differ."""
    cat = i18n.catalog(lang)
    (t1, q1, r1), (t2, q2, r2) = (_layer0_queries(gemma, cat[f"position.gemma.try.{n}.prompt"]) for n in (1, 2))
    assert sorted(t.id for t in t1) == sorted(t.id for t in t2) and [t.id for t in t1] != [t.id for t in t2]
    rows1 = sorted(tuple(q1[i].flatten().tolist()) for i in range(len(t1)))
    rows2 = sorted(tuple(q2[i].flatten().tolist()) for i in range(len(t2)))
    assert rows1 == rows2                                                       # the same set before RoPE
    rot1 = sorted(tuple(r1[i].flatten().tolist()) for i in range(len(t1)))
    rot2 = sorted(tuple(r2[i].flatten().tolist()) for i in range(len(t2)))
    assert rot1 != rot2                                                         # told apart by rotation only
    assert all(len(t.text) == 1 for t in t1[1:])                                # one character per token


def test_try_numbers_turn_several_times(gemma, lm):
    for lang in i18n.LANGS:
        for key in ("position.gemma.try.2.prompt", "position.gemma.try.3.prompt", "position.try.2.prompt"):
            prompt = i18n.catalog(lang).get(key, "")
            if prompt.startswith("1 2 3"):
                for lm_ in ((gemma,) if "gemma" in key else (lm, gemma)):
                    n = len(lm_.tokenize(prompt))
                    assert (n - 1) * float(lm_.decoder.rope_for(0).inv_freq[0]) > 2 * 2 * math.pi


def test_one_base_ladder_label_stands_above_the_short_bars():
    """The reach label of a one-base ladder hangs from the top right corner (above the slow
    pairs' short bars) with a line down to its dashed line, not on the line over taller bars."""
    from course.figures.position import ladder_figure

    thetas = 100_000 ** (-torch.arange(32) * 2 / 64)
    periods = 2 * math.pi / thetas
    fig = ladder_figure([("base", thetas, periods, 8192, "one turn per 8,192 tokens")], "t", "x", "y", "h")
    note = fig.to_dict()["layout"]["annotations"][0]
    assert note["showarrow"] and note["yanchor"] == "top" and note["xanchor"] == "right"
    assert note["x"] == note["ax"] == 31 and note["y"] == pytest.approx(math.log10(2 * math.pi / 8192))
    assert note["ayref"] == "y" and note["ay"] == pytest.approx(0.0)          # the top bar's top: 10^0 rad/token
