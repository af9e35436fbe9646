"""The induction lesson's "What to notice", branch by branch, without running the app or a model."""

import pytest

from course.notices import induction as N
from tests._notices import head_name, keys, label, missing_from_catalogs

pytestmark = pytest.mark.unit


RANKED = [(4, 1, 0.92), (4, 3, 0.85), (7, 0, 0.60), (1, 2, 0.30), (5, 5, 0.10)]


def best(**changes):
    args = dict(ranked=RANKED, k=3, third=10, early=0.30, global_layers=None, sliding_window=None, seq_len=50,
                head_name=head_name, lang="en")
    return N.best_notices(**(args | changes))


def test_the_best_heads_without_a_window():
    assert best() == [("notice.best", {"head": "4.1", "pct": "92%"}),
                      ("notice.best_layers", {"k": 3, "layers": "4, 7"}),
                      ("notice.early_only", {"third": 9, "early": "30%"})]
    assert best(lang="zh-Hans")[1][1]["layers"] == "4、7"


def test_one_head_or_one_layer_and_strong_early_heads():
    assert keys(best(k=1)) == ["notice.best", "notice.early_only"]
    assert best(k=2)[1] == ("notice.best_layer", {"k": 2, "layers": "4"})
    assert best(early=0.46)[2] == ("notice.early", {"third": 9, "early": "46%"})


@pytest.mark.parametrize("globals_, key, m", [([4, 7], "notice.global_all", 3), ([0, 5], "notice.global_none", 0),
                                              ([7], "notice.global", 1)])
def test_which_of_the_best_sit_in_the_global_layers(globals_, key, m):
    found = best(global_layers=globals_, sliding_window=512, seq_len=300)
    assert found[3] == (key, {"m": m, "k": 3, "globals": ", ".join(str(g) for g in globals_)})
    assert len(found) == 4                      # 600 tokens: past the window


def test_the_test_fits_the_window():
    found = best(global_layers=[5, 11, 17], sliding_window=512, seq_len=256)
    assert found[-1] == ("notice.window_fits", {"n": 512, "w": 512})
    assert found[3][1]["globals"] == "5, 11, 17"


def loss(**changes):
    args = dict(first=10.5, second=0.8, vocab_size=49152, uniform=10.80, top1_first=0.01, top1_second=0.9)
    return N.loss_notices(**(args | changes))


def test_the_loss_on_each_copy():
    assert loss() == [("notice.loss", dict(first="10.50", second="0.80", vocab="49,152", uniform="10.80")),
                      ("notice.loss_copied", {}), ("notice.top1", dict(hit1="1%", hit2="90%"))]


def test_worse_than_uniform_partly_and_not_copied():
    assert keys(loss(first=11.0)) == ["notice.loss", "notice.loss_worse", "notice.loss_copied", "notice.top1"]
    assert loss(first=11.0)[1] == ("notice.loss_worse", {"vocab": "49,152"})
    assert keys(loss(top1_second=0.4))[1] == "notice.loss_partly"
    assert keys(loss(second=9.6))[1] == "notice.loss_not_copied"


@pytest.mark.parametrize("top, rand, first, second", [
    (3.0, 0.9, "notice.ablation_up", "notice.compare_far"),          # +2.0 against +0.1
    (3.0, 2.2, "notice.ablation_up", "notice.compare_more"),         # +2.0 against +1.2
    (3.0, 3.5, "notice.ablation_up", "notice.compare_not"),          # +2.0 against +2.5
    (0.5, 1.0, "notice.ablation_down", "notice.compare_not"),
    (1.05, 1.0, "notice.ablation_flat", "notice.compare_not"),
])
def test_ablation_branches(top, rand, first, second):
    found = N.ablation_notices(k=5, baseline=1.0, top_loss=top, random_mean=rand)
    assert keys(found) == [first, second]
    assert found[0][1] == dict(k=5, base="1.00", top=f"{top:.2f}", rand=f"{rand:.2f}")


def test_a_random_loss_below_the_baseline_counts_as_no_move():
    assert keys(N.ablation_notices(k=5, baseline=1.0, top_loss=1.3, random_mean=0.5))[1] == "notice.compare_far"


def test_site_notices():
    assert N.site_notices(site=None, head_name=head_name, label=label) == [("notice.no_site", {})]
    found = N.site_notices(site=(9, 4), layer=4, head=1, weight=0.734, top_heads={(4, 1)}, head_name=head_name,
                           label=label)
    assert found == [("notice.site", dict(head="4.1", a="`t9`", b="`t4`", pct="73%")), ("notice.also", {})]
    assert keys(N.site_notices(site=(9, 4), layer=2, head=0, weight=0.5, top_heads={(4, 1)}, head_name=head_name,
                               label=label)) == ["notice.site"]


def test_every_key_is_in_every_catalog():
    """Each key a branch returns exists in the lesson's catalog, in every language."""
    produced = {"notice.best", "notice.best_layer", "notice.best_layers", "notice.early_only", "notice.early",
                "notice.global_all", "notice.global_none", "notice.global", "notice.window_fits", "notice.loss",
                "notice.loss_worse", "notice.loss_not_copied", "notice.loss_copied", "notice.loss_partly",
                "notice.top1", "notice.ablation_up", "notice.ablation_down", "notice.ablation_flat",
                "notice.compare_far", "notice.compare_more", "notice.compare_not", "notice.site", "notice.also",
                "notice.no_site"}
    assert missing_from_catalogs("induction", produced) == {}


def test_match_length_counts_the_shared_tokens_before_a():
    #      0  1  2  3  4  5  6  7  8  9
    ids = [0, 5, 6, 7, 8, 9, 6, 7, 5, 6]     # A = 6 at 2, 6 and 9: before 9 comes 5, as before 2
    assert N.match_length(ids, 2, 9) == 1 and N.match_length(ids, 6, 9) == 0


def test_occurrences_name_the_longest_match_not_just_the_latest():
    """王小明喜歡吃蘋果。陳大文喜歡喝咖啡。王小明喜歡 (as ids): the first 喜歡 matches longest."""
    ids = [0, 1, 2, 3, 10, 11, 12, 4, 5, 3, 20, 21, 12, 1, 2, 3]   # 王 小明 喜歡 吃 ... 陳 大文 喜歡 喝 ... 王 小明 喜歡
    label = str
    notice = N.occurrence_notices(ids=ids, query=15, targets=[4, 10], probs=[0.402, 0.309], label=label)
    assert notice == [("notice.occurrences", dict(a="15", n=2, pos=3, b="4", k=2, p="40.2%", pos_last=9, b_last="10",
                                                  p_last="30.9%"))]
    # The latest occurrence is also the longest match: one sentence that says so.
    assert N.occurrence_notices(ids=[0, 1, 2, 7, 1, 2, 8, 1, 2], query=8, targets=[3, 6], probs=[0.1, 0.2],
                                label=label)[0][0] == "notice.occurrences_same"
    assert N.occurrence_notices(ids=ids, query=15, targets=[4], probs=[0.4], label=label) == []
