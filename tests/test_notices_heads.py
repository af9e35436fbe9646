"""The heads lesson's "What to notice", branch by branch, without running the app or a model."""

import pytest

from course.notices import heads as N
from tests._notices import head_name, label, missing_from_catalogs

pytestmark = pytest.mark.unit


def test_who_names_one_head_a_few_tied_or_the_first_of_many():
    assert N.who([(16, 0, 0.9)], head_name, "en") == ("who.one", {"head": "16.0"})
    assert N.who([(1, 2, 0.9), (3, 4, 0.9)], head_name, "en") == ("who.tied", {"heads": "1.2, 3.4"})
    assert N.who([(1, 2, 0.9), (3, 4, 0.9)], head_name, "zh-Hant") == ("who.tied", {"heads": "1.2、3.4"})
    many = [(layer, 0, 1.0) for layer in range(5)]
    assert N.who(many, head_name, "en") == ("who.tied_many", {"n": 5, "heads": "0.0, 1.0, 2.0"})


def test_a_one_token_prompt_says_so():
    assert N.one_token_notice(label=label) == ("notice.one_token", {"token": "`t0`"})


def measures(**changes):
    args = dict(n=6, previous=[(2, 1, 0.83)], sink=[(20, 3, 0.97)], n_sinks=100, total_heads=270, early=0.30,
                late=0.80, third=10, n_layers=30, flat=[(0, 4, 2.345)], sharp=[(5, 5, 0.012)],
                induction=[(7, 2, 0.41)], head_name=head_name, label=label, lang="en")
    return N.measure_notices(**(args | changes))


def test_measure_notices_with_every_measure():
    found = measures()
    assert found[0] == ("notice.previous", {"who": ("who.one", {"head": "2.1"}), "pct": "83%"})
    assert found[1] == [("notice.sink", {"who": ("who.one", {"head": "20.3"}), "first": "`t0`", "pct": "97%"}),
                        ("notice.sink_some", {"count": 100, "total": 270})]
    assert found[2] == ("notice.depth_up", {"a": "30%", "b": "80%", "k": 9, "m": 20, "last": 29})
    assert found[3] == ("notice.entropy", {"flat": ("who.one", {"head": "0.4"}), "e1": "2.35",
                                           "sharp": ("who.one", {"head": "5.5"}), "e2": "0.01"})
    assert found[4] == ("notice.induction", {"who": ("who.one", {"head": "7.2"}), "pct": "41%"})
    assert len(found) == 5


@pytest.mark.parametrize("n_sinks, key", [(0, "notice.sink_none"), (135, "notice.sink_some"),
                                          (136, "notice.sink_most")])
def test_how_many_heads_sink(n_sinks, key):
    assert measures(n_sinks=n_sinks)[1][1] == (key, {"count": n_sinks, "total": 270})


@pytest.mark.parametrize("early, late, key", [(0.3, 0.4, "notice.depth_up"), (0.6, 0.4, "notice.depth_down"),
                                              (0.5, 0.45, "notice.depth_flat"), (0.45, 0.5, "notice.depth_flat")])
def test_depth_branches(early, late, key):
    assert measures(early=early, late=late)[2][0] == key


def test_two_tokens_and_no_repeat():
    found = measures(n=2, induction=None)
    assert [line[0] for line in found[2:]] == ["notice.depth_up", "notice.two_tokens", "notice.entropy",
                                               "notice.no_induction"]
    assert found[3] == ("notice.two_tokens", {}) and found[-1] == ("notice.no_induction", {})


def test_tied_leaders_are_listed():
    found = measures(previous=[(1, 0, 1.0), (2, 0, 1.0)])
    assert found[0][1]["who"] == ("who.tied", {"heads": "1.0, 2.0"})


class Contrast:
    """lesson_model.analysis.heads.GroupContrast's fields, with the case its kind() decides."""

    def __init__(self, case, top_a, top_b, weight_a, weight_b, max_gap):
        self.case, self.top_a, self.top_b, self.weight_a, self.weight_b, self.max_gap = (
            case, top_a, top_b, weight_a, weight_b, max_gap)

    def kind(self, alike):
        assert alike == N.ALIKE
        return self.case


@pytest.mark.parametrize("contrast, key, gap", [
    (Contrast("first", 0, 0, 1.0, 1.0, 0.0), "notice.group_first", "0%"),
    (Contrast("different", 0, 2, 0.6, 0.7, 0.5), "notice.group_different", "50%"),
    (Contrast("alike", 2, 2, 0.6, 0.61, 0.012), "notice.group_alike", "1.2%"),
    (Contrast("amount", 2, 2, 0.6, 0.8, 0.2), "notice.group_amount", "20%"),
    (Contrast("rest", 2, 2, 0.6, 0.6, 0.2), "notice.group_rest", "20%"),
])
def test_group_notice_branches(contrast, key, gap):
    got, fields = N.group_notice(contrast=contrast, layer=4, members=[3, 4, 5], query=2, head_name=head_name,
                                 label=label)
    assert got == key
    assert fields == dict(a="4.3", b="4.4", query="`t2`", ta=label(contrast.top_a), tb=label(contrast.top_b),
                          pa=f"{contrast.weight_a:.0%}", pb=f"{contrast.weight_b:.0%}", gap=gap)


def test_kv_notice():
    assert N.kv_notice(name="SmolLM2-135M", per_token="90 KiB", context=4096, total="360 MiB",
                       llama_ratio=8.0) == ("notice.kv", dict(name="SmolLM2-135M", per="90 KiB", n="4,096",
                                                              total="360 MiB", ratio="8"))


def test_window_notice():
    fields = {"w": 512}
    assert N.window_notice(context=512, window=512, fields=fields) == ("notice.window_fits", fields)
    assert N.window_notice(context=513, window=512, fields=fields) == ("notice.window", fields)


def test_every_key_is_in_every_catalog():
    """Each key a branch returns exists in the lesson's catalog, in every language."""
    produced = {"who.one", "who.tied", "who.tied_many", "notice.one_token", "notice.previous", "notice.sink",
                "notice.sink_none", "notice.sink_some", "notice.sink_most", "notice.depth_up", "notice.depth_down",
                "notice.depth_flat", "notice.two_tokens", "notice.entropy", "notice.induction", "notice.no_induction",
                "notice.group_first", "notice.group_different", "notice.group_alike", "notice.group_amount",
                "notice.group_rest", "notice.kv", "notice.window_fits", "notice.window"}
    assert missing_from_catalogs("heads", produced) == {}
