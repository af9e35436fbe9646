"""The FFN lesson's "What to notice", branch by branch, without running the app or a model."""

import pytest

from course.notices import ffn as N
from tests._notices import keys, missing_from_catalogs

pytestmark = pytest.mark.unit

ACT = dict(act="SiLU", glu="SwiGLU", fn="silu")


def test_negligible_is_what_prints_as_zero():
    assert N.negligible(0.004) and N.negligible(-0.004) and not N.negligible(0.005) and not N.negligible(-0.02)


def test_gap_prints_a_percentage_or_the_rounding_sentence():
    assert N.gap(0.0321) == "3.2%" and N.gap(5e-4) == "0.1%"
    assert N.gap(3e-7) == ("collapse.rounding", {"v": "3e-07"})


def test_top_notice_sparse_or_dense():
    assert N.top_notice(layer=26, token="`cat`", neuron=77, value=3.14159, big=40, d_ff=1536) == (
        "notice.top", dict(layer=26, token="`cat`", n=77, v="+3.14", big=40, total="1,536"))
    assert N.top_notice(layer=26, token="`cat`", neuron=77, value=-1.0, big=768, d_ff=1536)[0] == "notice.top_dense"


def test_gate_notices():
    found = N.gate_notices(layer=3, negative_share=0.62, activation_min=-0.2785, largest_factor=4.3, act=ACT)
    assert found == [("notice.gate", dict(layer=3, pct="62%", low="−0.28", **ACT)),
                     ("notice.gate_positive", dict(factor="4.3", **ACT))]
    assert keys(N.gate_notices(layer=3, negative_share=0.5, activation_min=-0.17, largest_factor=1.0,
                               act=ACT)) == ["notice.gate"]


def collapse(**changes):
    args = dict(rank=576, d_model=576, quadratic=True, gap_bilinear=0.25, gap_real=0.4, doubling=4.0, same=False,
                a="`a`", b="`b`", act=ACT)
    return N.collapse_notices(**(args | changes))


def test_collapse_notices_branches():
    found = collapse()
    assert found == [("notice.collapse", dict(rank=576, d=576)),
                     ("notice.collapse_gated", dict(pair=("notice.pair", dict(a="`a`", b="`b`")), gap="25.0%",
                                                    double="4.00", real="40.0%", **ACT))]
    assert collapse(same=True)[1][1]["pair"][0] == "notice.pair_same"
    small = collapse(gap_bilinear=1e-5)
    assert small[1] == ("notice.collapse_gated_small", dict(gap=("collapse.rounding", {"v": "1e-05"}), double="4.00",
                                                            **ACT))
    assert keys(collapse(quadratic=False)) == ["notice.collapse"]


def test_collapse_squeezed_only_when_full_rank_and_ill_conditioned():
    """Gemma's layer 15: full rank 640, smallest singular value 1.85e-4 against 2.87: every
    direction kept, one squeezed. Said only when true (float32's rank tolerance made it "639")."""
    found = collapse(rank=640, d_model=640, quadratic=False, singular=(1.85e-4, 2.87))
    assert found == [("notice.collapse", dict(rank=640, d=640)),
                     ("notice.collapse_squeezed", dict(smallest="0.00018", largest="2.87", ratio="15,514"))]
    assert keys(collapse(rank=576, quadratic=False, singular=(0.050, 131.9))) == ["notice.collapse"]   # SmolLM2's: 2,600x
    assert keys(collapse(rank=575, quadratic=False, singular=(1e-9, 3.0))) == ["notice.collapse"]   # a lost one: rank says so


def neurons(**changes):
    args = dict(neuron=5, token="`t`", promoted=("`up`", 0.8), push=1.25, total=3.5, pusher=9, scale=2.0, k=12,
                pred="`p`", layer=26, scale_ratio=1.0)
    return N.neuron_notices(**(args | changes))


def test_neuron_notices_with_visible_effects():
    assert neurons() == [("notice.vocab", dict(n=5, token="`t`", up="`up`", dv="+0.80")),
                         ("notice.best", dict(k=12, token="`t`", pred="`p`", n=9, dv="+1.25", layer=26, all="+3.50"))]
    assert keys(neurons(push=-0.5)) == ["notice.vocab", "notice.best_none"]
    assert keys(neurons(promoted=("`up`", 0.001))) == ["notice.vocab_tiny", "notice.best"]
    assert keys(neurons(promoted=None)) == ["notice.vocab_tiny", "notice.best"]
    assert neurons(promoted=None)[0] == ("notice.vocab_tiny", dict(n=5, token="`t`"))


def test_neuron_notices_when_every_push_is_tiny():
    found = neurons(push=0.001, promoted=None, total=-0.001, scale=1234.5, scale_ratio=2.0)
    assert found == [[("notice.best_tiny", dict(token="`t`", pred="`p`", layer=26, all="0.00", s="1,234.5"))]]
    with_ratio = neurons(push=0.001, scale_ratio=45.2)
    assert keys(with_ratio[:1]) == ["notice.vocab"]
    assert with_ratio[1][1] == ("notice.best_tiny_ratio", dict(ratio="45"))
    assert len(neurons(push=0.001, scale_ratio=None)[1]) == 1


def test_params_notice():
    key, fields = N.params_notice(mlp=80_000_000, total=135_000_000, mlp_layer=2_654_208, attn_layer=884_736,
                                  gpt3_mlp_layer=1_207_959_552, gpt3_attn_layer=603_979_776, lang="en")
    assert key == "notice.params"
    assert fields == dict(share="59%", mlp="80 million", total="135 million", ratio="3.0", gpt3="2.0")
    assert N.params_notice(mlp=80_000_000, total=135_000_000, mlp_layer=2, attn_layer=1, gpt3_mlp_layer=2,
                           gpt3_attn_layer=1, lang="zh-Hant")[1]["mlp"] == "8,000 萬"


def test_massive_notice():
    args = dict(n_pos=5, layer=3, first=0, first_max=500.0, median=10.0, token="`<s>`", hot=42, hot_value=-1234.4)
    assert N.massive_notice(**args) == ("notice.massive", dict(layer=3, token="`<s>`", n=42, v="-1,234",
                                                               median="10.0"))
    assert N.massive_notice(**(args | dict(first=2)))[0] == "notice.massive_other"
    assert N.massive_notice(**(args | dict(first_max=200.0))) is None
    assert N.massive_notice(**(args | dict(n_pos=2))) is None


def test_every_key_is_in_every_catalog():
    """Each key a branch returns exists in the lesson's catalog, in every language."""
    produced = {"collapse.rounding", "notice.top", "notice.top_dense", "notice.gate", "notice.gate_positive",
                "notice.collapse", "notice.collapse_gated", "notice.collapse_gated_small", "notice.pair",
                "notice.pair_same", "notice.vocab", "notice.vocab_tiny", "notice.best", "notice.best_none",
                "notice.best_tiny", "notice.best_tiny_ratio", "notice.params", "notice.massive",
                "notice.massive_other"}
    assert missing_from_catalogs("ffn", produced) == {}


def test_ffn_try2_asks_rather_than_claims():
    """Try this 2 once said "one neuron can push a whole family of related tokens"; on Gemma the
    tokens it pushes share a letter, not a meaning. The text asks; the computed detail answers."""
    from course import i18n
    for lang in ("en", "zh-Hant", "zh-Hans"):
        cat = i18n.catalog(lang)
        for key in ("ffn.try.2.why", "ffn.gemma.try.2.why"):
            assert cat[key].rstrip().endswith(("?", "？")), (lang, key)
            assert "whole family" not in cat[key]
