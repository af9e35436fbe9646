"""The What-if lab's "What to notice", branch by branch, without running the app or a model."""

from types import SimpleNamespace

import pytest

from course.notices import whatif as N
from tests._notices import keys

pytestmark = pytest.mark.unit


def cmp(**changes):
    values = dict(mean_before=4.0, mean_after=1.0, finite=True, top_before=[(11, 0.5)], top_after=[(12, 0.25)],
                  top1_changed=True, kl=1.234, overflow_block=None, stream_sizes=[], future_weight=0.42,
                  first_loss_change=0.0, row_max_before=0.4, row_max_after=0.9, window_matters=True,
                  farthest_key=40, window=512)
    return SimpleNamespace(**(values | changes))


def notices(on, n=10, **changes):
    return N.notices(on=on, cmp=cmp(**changes), n=n, n_layers=30, n_heads=9, d_head=64, cap=64,
                     token=lambda i: f"`id{i}`", label=lambda i: f"`t{i}`", head_name=lambda L, H: f"L{L}H{H}")


def test_no_switch_says_both_runs_are_the_same():
    assert notices({}) == [("notice.none", {})]


def test_mean_and_top_guess():
    found = notices({"no_scale": True})
    assert found[0] == ("notice.mean", dict(n=9, before="4.00", after="1.00", delta="-3.00"))
    assert found[1] == ("notice.top_changed", dict(t1="`id11`", p1="50%", t2="`id12`", p2="25%", kl="1.23"))
    assert keys(notices({"no_scale": True}, top1_changed=False))[1] == "notice.top_same"
    assert keys(notices({"no_scale": True}, n=1)) == ["notice.top_changed", "notice.scale"]     # no mean of 0 losses


def test_no_scale_and_no_qk_norm():
    assert notices({"no_scale": True})[-1] == ("notice.scale", dict(s="8", d=64, before="40%", after="90%"))
    assert notices({"no_qk_norm": True})[-1] == ("notice.qk", dict(before="40%", after="90%"))


def test_norms_overflow_or_growth():
    found = notices({"no_norms": True}, finite=False, overflow_block=5, stream_sizes=[1.5, 20, 300, 4000, 51234.5])
    assert found == [("notice.overflow", dict(first="1.5", block=5, last="5.12e+04", prev=4))]
    found = notices({"no_norms": True}, finite=False, overflow_block=0, stream_sizes=[float("inf")])
    assert found == [("notice.overflow", dict(first="inf", block=0, last="inf", prev=0))]
    found = notices({"no_norms": True}, stream_sizes=[1.0, 2.0, 300.0])
    assert found[-1] == ("notice.norms_grow", dict(first="1", last="300", n_blocks=30))
    assert keys(notices({"no_norms": True})) == ["notice.mean", "notice.top_changed"]       # no stream measured


@pytest.mark.parametrize("after, key", [(1.0, "notice.mask_collapse"), (3.0, "notice.mask_falls"),
                                        (4.5, "notice.mask_rises")])
def test_no_mask_branches(after, key):
    found = notices({"no_mask": True}, mean_after=after)
    assert keys(found)[-2:] == [key, "notice.mask_why"]
    assert found[-2][1]["future"] == "42%"
    assert keys(notices({"no_mask": True}, n=1)) == ["notice.top_changed"]


def test_no_rope_leaves_position_zero_alone_unless_shuffled_or_unmasked():
    assert notices({"no_rope": True})[-1] == ("notice.rope_first", dict(token="`t1`"))
    assert "notice.rope_first" not in keys(notices({"no_rope": True}, first_loss_change=0.01))
    assert "notice.rope_first" not in keys(notices({"no_rope": True, "shuffle": True}))
    assert "notice.rope_first" not in keys(notices({"no_rope": True, "no_mask": True}))


@pytest.mark.parametrize("field, value, key, where", [("skip_block", 0, "skip", 0), ("zero_mlp", 15, "zero_mlp", 15),
                                                      ("zero_head", (3, 2), "zero_head", "L3H2")])
def test_skip_and_zero_big_small_or_with_others(field, value, key, where):
    found = notices({field: value}, mean_after=6.0)
    assert found[-1] == (f"notice.{key}_big", dict(where=where, delta="+2.00", heads=9))
    found = notices({field: value}, mean_after=4.05)
    assert found[-1] == (f"notice.{key}_small", dict(where=where, delta="+0.05", heads=9))
    found = notices({"no_scale": True, field: value})
    assert found[-1] == (f"notice.{key}_with_others", dict(where=where))
    assert not any(k.startswith(f"notice.{key}") for k in keys(notices({field: value}, n=1)))


def test_zero_head_is_small_below_a_tenth_of_a_nat_and_big_above():
    assert keys(notices({"zero_head": (0, 0)}, mean_after=4.2))[-1] == "notice.zero_head_big"
    assert keys(notices({"skip_block": 4}, mean_after=4.2))[-1] == "notice.skip_small"


def test_shuffle_branches():
    assert notices({"shuffle": True}, n=2)[-1] == ("notice.shuffle_short", {})
    assert notices({"shuffle": True}, mean_after=6.0)[-1] == ("notice.shuffle_rises", dict(before="4.00", after="6.00"))
    assert notices({"shuffle": True})[-1] == ("notice.shuffle_flat", dict(before="4.00", after="1.00"))
    assert keys(notices({"shuffle": True}, finite=False)) == []


def test_no_window_on_a_short_prompt():
    found = notices({"no_window": True}, window_matters=False, kl=0.0001)
    assert found[-1] == ("notice.window_short", dict(far=40, window=512, cap=64, kl="0.000"))
    assert notices({"no_window": True}, window_matters=False, finite=False)[-1][1]["kl"] == "–"
    assert "notice.window_short" not in keys(notices({"no_window": True}))


def test_nothing_from_a_broken_run_but_the_norms():
    assert notices({"no_scale": True, "no_qk_norm": True, "no_mask": True}, finite=False) == []


def test_every_key_is_in_every_catalog():
    from course import i18n
    produced = {"notice.none", "notice.mean", "notice.top_same", "notice.top_changed", "notice.overflow",
                "notice.norms_grow", "notice.mask_collapse", "notice.mask_falls", "notice.mask_rises",
                "notice.mask_why", "notice.rope_first", "notice.scale", "notice.qk", "notice.shuffle_short",
                "notice.shuffle_rises", "notice.shuffle_flat", "notice.window_short"}
    produced |= {f"notice.{key}_{size}" for key in ("skip", "zero_mlp", "zero_head") for size in ("big", "small",
                                                                                                   "with_others")}
    for lang in ("en", "zh-Hant", "zh-Hans"):
        catalog = i18n.catalog(lang)
        assert [k for k in sorted(produced) if f"whatif.{k}" not in catalog] == [], lang
