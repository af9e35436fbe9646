"""The position lesson: sinusoidal waves, the RoPE ladder, real q turning, relative scores."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lesson_model.analysis import rope as R
from ui import i18n
from tests._apptest import chart, arr

pytestmark = pytest.mark.slow

CHINESE = "貓坐在墊子上，因為牠累了。"
EMOJI = "🐱 sat on 🧶 😀"


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


@pytest.mark.parametrize("lang", list(i18n.LANGS))
@pytest.mark.parametrize("prompt", [None, CHINESE, EMOJI])
def test_ladder_turning_and_relative_scores_match_the_model(open_page, lm, lang, prompt):
    at = open_page("position", lang=lang, prompt=prompt)
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
    at = open_page("position", lang="zh-Hans", params={"clock": 1000})
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
        placed = R.rotate_head(lm, q[same[0]].float(), [i] * q.shape[1])        # ... by rotation alone (every head)
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
    at = open_page("position", lang="zh-Hans", prompt="我吃魚，魚吃我。")
    assert not at.exception
    options = at.selectbox(key="qpos").options
    assert "0: 我¹" in options and not any("<E" in o for o in options)
    each = chart(at, "turn_each")["data"]
    after = next(t for t in each if t.get("mode") == "markers+text")
    assert after["text"][4] == "魚¹"
