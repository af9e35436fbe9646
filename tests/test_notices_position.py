"""The position lesson's "What to notice", branch by branch, without running the app or a model."""

import pytest

from course.notices import position as N
from tests._notices import label, missing_from_catalogs

pytestmark = pytest.mark.unit


def test_one_base_says_the_plain_ladder():
    fields = dict(base="100,000", fast="6.28", slow="61,703", never=12, first=20, n="8,192", pairs=32,
                  layers="0–29", count=30, window="0")
    assert N.ladder_notices(bases=[("global", fields)], d=64) == [("notice.ladder", dict(d=64, **fields))]


def test_two_bases_each_get_their_own_sentence():
    found = N.ladder_notices(bases=[("sliding", {"base": "10,000"}), ("global", {"base": "1,000,000"})], d=256)
    assert found == [("notice.ladder_sliding", {"d": 256, "base": "10,000"}),
                     ("notice.ladder_global", {"d": 256, "base": "1,000,000"})]


def test_turn_notice_formats_the_checks():
    assert N.turn_notice(pair=3, layer=16, head=2, theta=0.0123456, turn_error=1.234e-7, norm_error=0.0,
                         kind="RoPE (base 100,000)") == (
        "notice.turn", dict(pair=3, layer=16, head=2, theta="0.01235", err="1.2e-07", norm_err="0.0e+00",
                            kind="RoPE (base 100,000)"))


def relative(**changes):
    args = dict(q=label(7), qpos=7, k=label(4), kpos=4, score=1.23456, spread=3.2e-6, far=8000,
                curve=[0.5, -0.0001, 0.25, 2.0], maxd=3)
    return N.relative_notice(**(args | changes))


def test_relative_notice_for_two_positions():
    assert relative() == ("notice.relative", dict(q="`t7`", qpos=7, k="`t4`", kpos=4, score="1.235", dist=3,
                                                  spread="3.2e-06", far="8,000", d1="0.000", d0="0.500",
                                                  dmax="2.000", maxd=3))


def test_relative_notice_when_query_and_key_are_one_token():
    key, fields = relative(kpos=7, k=label(7))
    assert key == "notice.relative_same" and fields["dist"] == 0


def test_peak_notice_names_the_first_highest_and_lowest_distance():
    assert N.peak_notice(curve=[0.1, 0.9, -0.3, 0.9, -0.3], layer=5, head=1) == (
        "notice.peak", dict(best=1, score="0.900", layer=5, head=1, low="-0.300", worst=2))


def test_params_notice():
    assert N.params_notice(attn_params=1769472, layers=30) == ("notice.params", dict(attn="1,769,472", layers=30))


def test_every_key_is_in_every_catalog():
    """Each key a branch returns exists in the lesson's catalog, in every language."""
    produced = {"notice.ladder", "notice.ladder_sliding", "notice.ladder_global", "notice.turn", "notice.relative",
                "notice.relative_same", "notice.peak", "notice.params"}
    assert missing_from_catalogs("position", produced) == {}
