"""The generation lesson's "What to notice", branch by branch, without running the app or a model."""

import pytest

from course.notices import generation as N
from tests._notices import missing_from_catalogs

pytestmark = pytest.mark.unit


def big(n):
    return f"<{n:g}>"


def test_count_and_how_chosen():
    assert N.count("tokens", 1) == ("count.tokens_one", {"n": "1"})
    assert N.count("positions", 1234) == ("count.positions", {"n": "1,234"})
    assert N.how_chosen(greedy=True, rank=3, seed=1) == ("how.greedy", {})
    assert N.how_chosen(greedy=False, rank=3, seed=7) == ("how.sampled", {"rank": 3, "seed": 7})


def test_start_notice():
    assert N.start_notice(n_prompt=1) == ("notice.start_one", {"n": "1"})
    assert N.start_notice(n_prompt=1200) == ("notice.start", {"n": "1,200"})


def steps(**changes):
    args = dict(step=3, n_prompt=10, token="`a`", p_model=0.4567, how=("how.greedy", {}), finished=False, stop=None,
                max_new=24, cached=12, n_layers=30, kb="270 KiB", per="22.5 KiB", full="180 MiB", ctx=8192,
                macs_with=1.0e8, macs_without=1.25e9, big=big)
    return N.step_notices(**(args | changes))


def test_a_step_says_what_was_chosen_what_the_cache_holds_and_the_work_saved():
    found = steps()
    assert [key for key, _ in found] == ["notice.step", "notice.kv", "notice.work"]
    assert found[0][1] == dict(s=3, token="`a`", p="45.7%", n=("count.tokens", {"n": "12"}), how=("how.greedy", {}))
    assert found[1][1] == dict(n=("count.positions", {"n": "12"}), layers=30, kb="270 KiB", per="22.5 KiB",
                               full="180 MiB", ctx="8,192")
    assert found[2][1] == dict(s=3, n="12", on="<1e+08>", off="<1.25e+09>", ratio="12.5")


def test_the_first_step_has_no_work_sentence_and_one_prompt_token_reads_as_one():
    found = steps(step=1, n_prompt=1, cached=1)
    assert [key for key, _ in found] == ["notice.step", "notice.kv"]
    assert found[0][1]["n"] == ("count.tokens_one", {"n": "1"})


@pytest.mark.parametrize("stop, key", [("eos", "notice.eos"), ("length", "notice.length")])
def test_the_last_step_says_why_generation_ended(stop, key):
    found = steps(finished=True, stop=stop)
    assert [k for k, _ in found] == ["notice.step", key, "notice.kv", "notice.work"]
    assert found[1][1] == dict(s=3, max=("count.new", {"n": "24"}), token="`a`")


@pytest.mark.parametrize("on, off, identical, key, same", [
    (10.0, 30.0, True, "notice.time_faster", "notice.same"),
    (10.0, 11.0, False, "notice.time_close", "notice.not_same"),
    (10.0, 12.0, True, "notice.time_close", "notice.same"),
])
def test_time_notice_branches(on, off, identical, key, same):
    got, fields = N.time_notice(n=24, on_ms=on, off_ms=off, identical=identical, params=134515008, big=big)
    assert got == key
    assert fields == dict(n=("count.tokens", {"n": "24"}), on=f"{on:,.0f}", off=f"{off:,.0f}",
                          ratio=f"{off / on:.1f}", params="<1.34515e+08>", same=(same, {}))


def spec(**changes):
    args = dict(draft_layers=26, n_layers=30, draft_len=4, accepted=20, proposed=32, rate=0.625, full_passes=10,
                n_new=32, cost=0.8712, greedy=True, equal=True)
    return N.spec_notices(**(args | changes))


def test_spec_is_one_bullet_of_two_sentences_then_the_greedy_check():
    found = spec()
    assert found[0] == [
        ("notice.spec", dict(k=26, layers=30, n=("count.tokens", {"n": "4"}), a=20, p=32, rate="62%",
                             passes=("count.passes", {"n": "10"}), t=("count.tokens", {"n": "32"}), cost="87%")),
        ("notice.spec_strong", {})]
    assert found[1] == ("notice.spec_equal", {"t": ("count.tokens", {"n": "32"})})


def test_spec_weak_not_equal_and_sampled():
    found = spec(rate=0.3, equal=False)
    assert found[0][1] == ("notice.spec_weak", {}) and found[1][0] == "notice.spec_not_equal"
    assert len(spec(greedy=False)) == 1


def test_every_key_is_in_every_catalog():
    """Each key a branch returns (and each nested count) exists in the lesson's catalog, in every language."""
    produced = {"notice.start", "notice.start_one", "notice.step", "notice.eos", "notice.length", "notice.kv",
                "notice.work", "notice.time_faster", "notice.time_close", "notice.same", "notice.not_same",
                "notice.spec", "notice.spec_weak", "notice.spec_strong", "notice.spec_equal", "notice.spec_not_equal",
                "how.greedy", "how.sampled"}
    produced |= {f"count.{kind}{one}" for kind in ("tokens", "new", "positions", "passes") for one in ("", "_one")}
    assert missing_from_catalogs("generation", produced) == {}
