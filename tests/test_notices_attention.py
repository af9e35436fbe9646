"""The attention lesson's "What to notice", branch by branch, without running the app or a model."""

import pytest

from course.notices import attention as N
from tests._notices import keys, label, missing_from_catalogs

pytestmark = pytest.mark.unit


def test_the_first_token_sees_only_itself():
    found = N.top_notices(query=0, n=5, weights=[1.0, 0, 0, 0, 0], raw=[2.0, 0, 0, 0, 0], scale=8.0,
                          head="L0H0", label=label)
    assert keys(found) == ["notice.top_first", "notice.mask"]
    assert found[0][1]["pct"] == "100%" and found[0][1]["target"] == "`t0`"
    assert found[1][1] == {"n": 4}


def test_a_sink_on_the_first_token_is_named():
    found = N.top_notices(query=3, n=4, weights=[0.7, 0.1, 0.1, 0.1], raw=[4.0, 1.0, 1.0, 1.0], scale=8.0,
                          head="L1H2", label=label)
    assert keys(found) == ["notice.top", "notice.sink", "notice.last"]
    fields = found[0][1]
    assert (fields["head"], fields["query"], fields["target"], fields["pct"], fields["s"]) == ("L1H2", "`t3`", "`t0`",
                                                                                            "70%", "8")
    assert float(fields["raw"]) == 4.0 and float(fields["scaled"]) == 0.5
    assert found[2][1] == {"n": 4}


def test_a_large_first_token_share_without_being_the_top():
    found = N.top_notices(query=2, n=3, weights=[0.3, 0.6, 0.1], raw=[1.0, 3.0, 0.5], scale=8.0,
                          head="h", label=label)
    assert keys(found) == ["notice.top", "notice.first", "notice.last"]
    assert found[0][1]["target"] == "`t1`" and found[1][1]["pct"] == "30%"


def test_a_small_first_token_share_is_not_mentioned_and_one_token_is_alone():
    assert keys(N.top_notices(query=2, n=3, weights=[0.1, 0.8, 0.1], raw=[0, 2, 0], scale=1, head="h",
                              label=label)) == ["notice.top", "notice.last"]
    assert keys(N.top_notices(query=0, n=1, weights=[1.0], raw=[0.0], scale=1, head="h",
                              label=label)) == ["notice.top_first", "notice.only"]


def test_the_top_weight_picks_the_raw_score_of_the_same_key():
    found = N.top_notices(query=2, n=3, weights=[0.2, 0.1, 0.7], raw=[5.0, 1.0, 16.0], scale=8.0, head="h",
                          label=label)
    assert found[0][1]["raw"] != "5.00" and found[0][1]["target"] == "`t2`"
    assert float(found[0][1]["scaled"]) == pytest.approx(2.0)


@pytest.mark.parametrize("query, top1, top2, e1, e2, key", [
    (0, 1.0, 1.0, 0.0, 0.0, "notice.scale_one"),
    (3, 0.97, 0.99, 0.1, 0.05, "notice.scale_sure"),
    (3, 0.40, 0.42, 1.50, 1.45, "notice.scale_small"),
    (3, 0.40, 0.80, 1.50, 0.70, "notice.scale"),
])
def test_scale_notice_branches(query, top1, top2, e1, e2, key):
    got, fields = N.scale_notice(query=query, max_scaled=top1, max_unscaled=top2, entropy_scaled=e1,
                                 entropy_unscaled=e2)
    assert got == key
    if key != "notice.scale_one":
        assert fields["top1"] == f"{top1:.0%}" and fields["top2"] == f"{top2:.0%}"


@pytest.mark.parametrize("query, tied, key", [
    (0, 270, "notice.search_first"), (4, 270, "notice.search_all"), (4, 3, "notice.search_tie"),
    (4, 1, "notice.search")])
def test_search_notice_branches(query, tied, key):
    got, fields = N.search_notice(query=query, key=1, best_head="L5H2", best_weight=0.91, tied=tied,
                                  total_heads=270, label=label)
    assert got == key and fields["pct"] == "91%" and fields["tied"] == tied and fields["target"] == "`t1`"


def test_cost_notice_for_one_token_and_for_many():
    assert N.cost_notice(n=1, pairs=1, pairs_doubled=3, attention_ratio=3.0, linear_ratio=2.0,
                         crossover=1234)[0] == "notice.cost_one"
    key, fields = N.cost_notice(n=10, pairs=55, pairs_doubled=210, attention_ratio=3.8181, linear_ratio=2.0,
                                crossover=12345)
    assert key == "notice.cost" and fields == dict(n=10, pairs="55", n2=20, pairs2="210", ratio="3.82", lin="2",
                                                   cross="12,345")


def window(**changes):
    args = dict(source="default", n=640, window=512, s_layer=4, g_layer=5, s_beyond_max=0.0, g_beyond_min=0.1,
                g_beyond_max=0.6, first="`<bos>`", g_first=0.55, outside_zero=True, outside_count=8256,
                per_token=512 * 4 * 256, linear_per_token=10**9)
    return N.window_notices(**(args | changes))


def test_window_notices_name_the_source_and_the_check():
    found = window()
    assert keys(found) == ["notice.window_default", "notice.window_cost"]
    assert found[0][1]["checked"] == ("notice.window_zero", {"count": "8,256"})
    assert found[0][1]["s_max"] == "0%" and found[0][1]["g_hi"] == "60%"
    mine = window(source="mine", outside_zero=False, per_token=2 * 10**9)
    assert keys(mine) == ["notice.window_mine", "notice.window_cost_passes"]
    assert mine[0][1]["checked"][0] == "notice.window_nonzero"


def test_every_key_is_in_every_catalog():
    """Each key a branch returns exists in the lesson's catalog, in every language."""
    produced = {"notice.top_first", "notice.top", "notice.sink", "notice.first", "notice.only", "notice.mask",
                "notice.last", "notice.scale_one", "notice.scale_sure", "notice.scale_small", "notice.scale",
                "notice.search_first", "notice.search_all", "notice.search_tie", "notice.search", "notice.cost_one",
                "notice.cost", "notice.window_default", "notice.window_mine", "notice.window_zero",
                "notice.window_nonzero", "notice.window_cost", "notice.window_cost_passes"}
    assert missing_from_catalogs("attention", produced) == {}
