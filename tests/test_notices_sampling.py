"""The sampling lesson's "What to notice" and Try-this lines, branch by branch, without running the
app or a model."""

from types import SimpleNamespace

import pytest

from course.notices import sampling as N
from tests._notices import label, missing_from_catalogs

pytestmark = pytest.mark.unit


def text_label(text):
    return f"`{text}`"


def join(items):
    return ", ".join(items)


def test_pct_writes_small_probabilities_with_two_digits():
    assert [N.pct(p) for p in (0.5, 0.001, 0.00012345, 0.0)] == ["50.0%", "0.1%", "0.012%", "0%"]


@pytest.mark.parametrize("n, cut, key", [(5, False, "notice.last"), (1, False, "notice.last_one"),
                                         (256, True, "notice.last_cut"), (1, True, "notice.last_cut")])
def test_last_notice_branches(n, cut, key):
    got, fields = N.last_notice(n=n, cut=cut, token="`.`", best="`a`", second="`b`", p_best=0.25, p_second=0.0001,
                                logit_best=17.256, gap=-0.001)
    assert got == key
    assert fields == dict(n=n, token="`.`", best="`a`", p="25.0%", logit="17.26", second="`b`", p2="0.01%",
                          gap="0.00")


def test_spread_notice():
    assert N.spread_notice(lo=-12.34, hi=20.06, median=-0.04, top10=0.912, vocab=49152) == (
        "notice.spread", dict(lo="-12.3", hi="20.1", median="0.0", share="91.2%", rest="49,142"))


def settings(**changes):
    args = dict(greedy=False, untouched=False, best="`a`", settings="temperature 0.8", vocab=49152,
                entropy_model=3.0, entropy_final=2.0, n_kept=1234, kept_mass=0.97, p_top=0.3)
    return N.settings_notice(**(args | changes))


def test_settings_notice_branches():
    assert settings(greedy=True) == ("notice.greedy", dict(best="`a`"))
    assert settings(untouched=True) == ("notice.untouched", dict(h="3.00", bits="8", vocab="49,152"))
    assert settings(untouched=True, entropy_model=0.5) == (
        "notice.untouched_certain", dict(h="0.50", vocab="49,152", best="`a`"))
    assert settings() == ("notice.settings", dict(settings="temperature 0.8", n="1,234", mass="97.0%", h0="3.00",
                                                  h1="2.00", best="`a`", p="30.0%"))
    assert settings(n_kept=1, p_top=1.0)[0] == "notice.settings_one"


def test_temperature_notice():
    cold = SimpleNamespace(temperature=0.5, top_prob=0.8, tokens_for_90=2)
    hot = SimpleNamespace(temperature=2.0, top_prob=0.05, tokens_for_90=12345)
    assert N.temperature_notice(cold=cold, hot=hot, p=0.4, best="`a`") == (
        "notice.temperature", dict(t1="0.5", p1="80.0%", t2="2", p2="5.0%", n1="2", n2="12,345", p="40.0%",
                                   best="`a`"))


def samples(**changes):
    args = dict(ids=[7, 3, 9], probs=[0.5, 0.3, 0.1], counts=[120, 70, 10], other_prob=0.1, distinct=3,
                total_variation=0.0456, n_draws=200, seed=4, label=label)
    return N.samples_notices(**(args | changes))


def test_samples_with_many_draws_is_one_bullet_of_three_sentences():
    (bullet,) = samples()
    fields = dict(n="200", seed=4, tv="0.046", distinct="3")
    assert bullet == [("notice.samples", dict(token="`t7`", c="120", f="60.0%", p="50.0%", **fields)),
                      ("notice.samples_distinct", fields), ("notice.samples_more", {})]


def test_samples_all_the_same_token():
    (bullet,) = samples(ids=[7], probs=[1.0], counts=[200], other_prob=0.0, distinct=1, total_variation=0.0)
    assert bullet == [("notice.samples_all", dict(token="`t7`", c="200", f="100.0%", p="100.0%", n="200", seed=4,
                                                  tv="0.000", distinct="1"))]


def test_one_draw_names_it_or_the_long_tail():
    assert samples(n_draws=1, counts=[0, 1, 0], distinct=1) == [
        ("notice.samples_one", dict(seed=4, token="`t3`", p="30.0%"))]
    assert samples(n_draws=1, counts=[0, 0, 0], distinct=1, other_prob=0.25) == [
        ("notice.samples_one_tail", dict(seed=4, p="25.0%"))]


def test_no_listed_token_says_nothing():
    assert samples(ids=[], probs=[], counts=[]) == []


def test_try_points_per_model():
    assert N.try_point("smollm2", 5) == "pieces" and N.try_point("gemma", 5) == "whole"
    assert N.try_point("gemma", 1) == "confident" and N.try_point("smollm2", 9) is None


def facts(**changes):
    args = dict(p=0.6, p_cold=0.9, p_hot=0.2, t_cold=0.5, t_hot=1.5, entropy=2.5, top_p=0.9, n_top_p=30, top_k=40,
                cut_top_k=0.05, top_ids=list(range(10)))
    return SimpleNamespace(**(args | changes))


def try_line(n, point, cands=("a", "b", "c"), pieces=(), **changes):
    return N.try_line(n, point, facts=facts(**changes), cands=list(cands), pieces=list(pieces), label=text_label,
                      join=join)


@pytest.mark.parametrize("point, holds, fails", [
    ("confident", {}, dict(p_hot=0.4)),
    ("open", dict(p=0.1, n_top_p=150), dict(p=0.1, n_top_p=50)),
    ("spread", dict(entropy=5.0, cut_top_k=0.2), dict(entropy=5.0, cut_top_k=0.05)),
])
def test_try_line_shows_the_point_only_when_the_numbers_hold(point, holds, fails):
    assert [key for key, _ in try_line(2, point, **holds)] == ["try.2.why", "try.2.numbers"]
    assert [key for key, _ in try_line(2, point, **fails)] == ["try.plain"]


def test_try_line_space_pieces_whole_and_no_point():
    assert try_line(3, "space", cands=(" ", "1"))[0][0] == "try.3.why"
    assert try_line(3, "space", cands=("1", " "))[0][0] == "try.plain"
    assert try_line(5, "pieces", pieces=("x", "y", "z"))[0][0] == "try.5.why"
    assert try_line(5, "pieces", pieces=("x",))[0][0] == "try.plain"
    assert try_line(5, "whole")[0][0] == "try.5.why"
    assert try_line(5, "whole", pieces=("x",))[0][0] == "try.plain"
    assert try_line(9, None)[0][0] == "try.plain"


def test_try_line_fields():
    (why, _), (key, fields) = try_line(5, "whole", cands=("我", "你", "他", "她"))
    assert why == "try.5.why" and key == "try.5.numbers"
    assert fields == dict(best="`我`", p="60.0%", p_cold="90.0%", p_hot="20.0%", t_cold="0.5", t_hot="1.5", h="2.50",
                          top_p="0.9", n_top_p="30", top_k=40, cut_top_k="5.0%", n_pieces=0, n_top=10, piece="",
                          examples="`我`, `你`, `他`")
    assert try_line(5, "pieces", pieces=("<E6>", "<E7>", "<E8>"))[1][1]["piece"] == "`<E6>`"


def test_every_key_is_in_every_catalog():
    """Each key a branch returns exists in the lesson's catalog (or a model's variant), in every language."""
    produced = {"notice.last", "notice.last_one", "notice.last_cut", "notice.spread", "notice.greedy",
                "notice.untouched", "notice.untouched_certain", "notice.settings", "notice.settings_one",
                "notice.temperature", "notice.samples", "notice.samples_all", "notice.samples_distinct",
                "notice.samples_more", "notice.samples_one", "notice.samples_one_tail", "try.plain"}
    produced |= {f"try.{n}.{part}" for n in range(1, 6) for part in ("why", "numbers")}
    assert missing_from_catalogs("sampling", produced) == {}
