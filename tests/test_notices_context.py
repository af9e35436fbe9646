"""Every branch of the notices of the article-tied sections (meaning from context, the two
toy analogies, decoder-only), and the toy arithmetic: pure, no model."""

from __future__ import annotations

import math

import pytest

from course.notices import context as CN
from course.notices import decoder_only as DN
from course.notices import toys as TN
from lesson_model.analysis import toys


def keys(found):
    return [key for key, _ in found]


def test_missing_word_branches():
    assert CN.missing_notice(word="", in_a=False, in_b=False) == ("context.no_word", {})
    assert CN.missing_notice(word="`x`", in_a=True, in_b=True) is None
    assert CN.missing_notice(word="`x`", in_a=False, in_b=True)[0] == "context.missing_a"
    assert CN.missing_notice(word="`x`", in_a=True, in_b=False)[0] == "context.missing_b"
    assert CN.missing_notice(word="`x`", in_a=False, in_b=False) == ("context.missing_both", {"word": "`x`"})


BASE = dict(word="`bank`", pieces_a=1, pieces_b=1, last_a="`a`", last_b="`b`", same_token=True, embed_cos=1.0,
            raw=[0.9, 0.8, 0.7], top_a="`,`", p_a=0.72, top_b="`.`", p_b=0.2)


def test_context_apart_and_negative():
    found = CN.context_notices(**BASE, centred=[0.9, -0.2, 0.1])
    assert keys(found) == ["context.start_same", "context.apart", "context.negative", "context.predict"]
    apart = dict(found)["context.apart"]
    assert apart["low"] == "-0.20" and apart["low_block"] == 1 and apart["cos"] == "+0.10" and apart["block"] == 2
    assert dict(found)["context.predict"] == dict(top_a="`,`", p_a="72%", top_b="`.`", p_b="20%")


def test_context_apart_without_going_negative():
    found = CN.context_notices(**BASE, centred=[0.9, 0.6, 0.05])
    assert keys(found) == ["context.start_same", "context.apart", "context.predict"]


def test_context_together():
    found = CN.context_notices(**BASE, centred=[0.95, 0.9, 0.8])
    assert "context.together" in keys(found) and "context.apart" not in keys(found)


def test_context_pieces_and_different_tokens():
    found = CN.context_notices(**{**BASE, "pieces_a": 1, "pieces_b": 3, "same_token": False, "embed_cos": 0.31},
                               centred=[0.5, 0.2, 0.1])
    assert keys(found)[:2] == ["context.pieces", "context.start_diff"]
    assert dict(found)["context.pieces"] == dict(word="`bank`", n=3, last="`b`")
    assert dict(found)["context.start_diff"]["cos"] == "0.31"


def test_height_weight_arithmetic():
    hw = toys.height_weight(1.78)
    assert sum(hw.attention) == pytest.approx(1.0)
    # score = -(Δcm)² / (2·5²), by hand for the 1.75 m classmate: Δ = 3 cm -> -9/50
    assert hw.scores[2] == pytest.approx(-9 / 50)
    z = sum(math.exp(s) for s in hw.scores)
    assert hw.attention[2] == pytest.approx(math.exp(-9 / 50) / z)
    assert hw.estimate == pytest.approx(sum(a * w for a, w in zip(hw.attention, hw.weights)))
    assert min(hw.weights) < hw.estimate < max(hw.weights)
    # the nearest height gets the largest weight
    assert max(range(5), key=lambda i: hw.attention[i]) == min(range(5), key=lambda i: abs(hw.diffs_cm[i]))


def test_height_notices():
    hw = toys.height_weight(1.60)
    found = TN.height_notice(query=hw.query, heights=hw.heights, weights=hw.weights, attention=hw.attention,
                             estimate=hw.estimate, names=list("ABCDE"))
    assert dict(found)["toy.notice_best"]["name"] == "A"
    assert dict(found)["toy.notice_estimate"] == dict(estimate=f"{hw.estimate:.1f}", lo="50", hi="88")
    assert TN.real_step_notice(query="q", best="k", weight=1.0, n_keys=1)[0] == "toy.real_one"
    assert TN.real_step_notice(query="q", best="k", weight=0.4, n_keys=5) == (
        "toy.real", dict(query="q", best="k", share="40%", n=5))


def test_continuation_spacing():
    assert toys.continuation("The weather today is very", "hot") == " hot"
    assert toys.continuation("今天天氣很", "熱") == "熱"


def test_weather_notices():
    found = TN.weather_notices(prompt="p", words=["good", "hot", "cold", "bad"], probs_t1=[0.01, 0.13, 0.05, 0.02],
                               merged=[False, False, False, False], pieces=[1, 1, 2, 1], top="hot", p_top=0.13,
                               toy_best="good", p_toy=0.64, top_is_word=True)
    assert keys(found) == ["weather.words", "weather.top_word", "weather.pieces"]
    assert dict(found)["weather.words"] == dict(prompt="p", word="hot", p="13%", total="21%", toy="good", p_toy="64%")
    found = TN.weather_notices(prompt="p", words=["好", "熱"], probs_t1=[0.0, 0.56], merged=[True, False],
                               pieces=[1, 1], top="熱", p_top=0.56, toy_best="好", p_toy=0.64, top_is_word=False)
    assert keys(found) == ["weather.words", "weather.top_other", "weather.merged"]


def test_decoder_only_notices():
    found = DN.decoder_only_notices(model="m", n_blocks=3, attention_per_block=[1, 1, 1], encoder_modules=[],
                                    causal=True, embedding_tables=1)
    assert keys(found) == ["dec.no_encoder", "dec.causal", "dec.one_table"]
    found = DN.decoder_only_notices(model="m", n_blocks=2, attention_per_block=[2, 2], encoder_modules=["encoder"],
                                    causal=False, embedding_tables=2)
    assert keys(found) == ["dec.has_extra", "dec.not_causal", "dec.tables"]
    assert dict(found)["dec.has_extra"] == dict(model="m", n=1, most=2)
