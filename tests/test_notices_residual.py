"""The residual lesson's "What to notice", branch by branch, without running the app or a model."""

import pytest

from course.notices import residual as N
from tests._notices import missing_from_catalogs

pytestmark = pytest.mark.unit


def part_label(kind, layer):
    return f"{kind} {layer}"


def test_sum_and_massive():
    assert N.sum_notice(token="`t`", n_parts=61, max_error=3.2e-6, embed_norm=0.512, final_norm=1234.56,
                        part="mlp 29", along=812.34) == (
        "notice.sum", dict(token="`t`", n=61, err="3.2e-06", embed="0.5", final="1,234.6", part="mlp 29",
                           along="+812.3"))
    assert N.massive_notice(token="`<s>`", ratio=1234.4) == ("notice.massive", dict(token="`<s>`", ratio="1,234"))


def lens(ranks, layers=(-1, 0, 1, 2), **changes):
    args = dict(ranks=list(ranks), lens_layers=list(layers), depths=["emb", "d1", "d2", "d3"], n_layers=3,
                token="`t`", pred="`p`", p=0.456)
    return N.lens_notice(**(args | changes))


def test_lens_notice_branches():
    assert lens([0, 0, 0, 0]) == ("notice.lens_embed", dict(token="`t`", pred="`p`", p="46%"))
    assert lens([3, 2, 1, 0]) == ("notice.lens_last", dict(token="`t`", pred="`p`", p="46%"))
    assert lens([3, 0, 1, 0])[0] == "notice.lens_last"                 # on top, then not: only the last stays
    assert lens([3, 2, 0, 0]) == ("notice.lens", dict(token="`t`", pred="`p`", depth="d2", p="46%", n=3, k=2))
    assert lens([5, 4, 3, 2]) is None


@pytest.mark.parametrize("echo, n, key", [(0, 12, "notice.echo_none"), (1, 1, "notice.echo_one"),
                                          (12, 12, "notice.echo_all"), (5, 12, "notice.echo_some")])
def test_echo_notice(echo, n, key):
    assert N.echo_notice(echo=echo, n=n) == (key, dict(k=echo, n=n))


def test_dla_notice():
    parts = [0.1, -2.5, 0.3, 4.25, 0.0, -1.0]         # attn 0..2, mlp 0..2
    key, fields = N.dla_notice(what="logit of `p`", layer_parts=parts, order=[3, 1, 5], n_layers=3, total=3.14159,
                               mlp=3.25, attn=-2.1, part_label=part_label, lang="en")
    assert key == "notice.dla"
    # The parts that push against the answer are listed apart from those that push for it.
    assert fields == dict(what="logit of `p`", parts=("dla_parts.mixed", dict(up="mlp 0 (+4.25)",
                                                                              down="attn 1 (-2.50), mlp 2 (-1.00)")),
                          total="3.14", mlp="+3.25", attn="-2.10")
    zh = N.dla_notice(what="w", layer_parts=parts, order=[3, 1], n_layers=3, total=0.0, mlp=-0.001, attn=0.0,
                      part_label=part_label, lang="zh-Hant")[1]
    assert zh["parts"] == ("dla_parts.mixed", dict(up="mlp 0（+4.25）", down="attn 1（-2.50）")) and zh["mlp"] == "0.00"


def test_dla_parts_all_one_way():
    parts = [0.1, -2.5, 0.3, 4.25, 0.0, -1.0]
    up = N.dla_parts(layer_parts=parts, order=[3, 2, 0], n_layers=3, part_label=part_label, lang="en")
    assert up == ("dla_parts.up", dict(up="mlp 0 (+4.25), attn 2 (+0.30), attn 0 (+0.10)"))
    down = N.dla_parts(layer_parts=parts, order=[1, 5], n_layers=3, part_label=part_label, lang="en")
    assert down == ("dla_parts.down", dict(down="attn 1 (-2.50), mlp 2 (-1.00)"))


def test_dla_wording_says_which_way_each_part_pushes():
    """The old line called every part of the top three a "contribution" to the answer, those
    pushing against it included; each language now says which push it up and which down."""
    from course import i18n
    for lang in ("en", "zh-Hant", "zh-Hans"):
        cat = i18n.catalog(lang)
        for key in ("residual.dla_parts.up", "residual.dla_parts.down", "residual.dla_parts.mixed"):
            assert key in cat, (lang, key)
    en = i18n.catalog("en")
    assert "in size" in en["residual.notice.dla"] and "down" in en["residual.dla_parts.mixed"]


def test_head_notice_picks_the_largest_push_either_way():
    assert N.head_notice(layer=7, heads=[0.5, -1.25, 1.0], attn=0.25) == (
        "notice.head", dict(layer=7, head=1, v="-1.25", n=3, attn="+0.25"))
    assert N.head_notice(layer=0, heads=[1.0, -1.0], attn=0.0)[1]["head"] == 0       # a tie: the first


def test_post_notice_with_post_norms():
    computed = [[2.0, 10.0], [0.5, 40.0]]
    written = [[20.0, 30.0], [25.0, 44.0]]              # gains 10, 3, 50, 1.1
    key, fields = N.post_notice(post_norms=True, computed=computed, written=written, token="`t`",
                                part_label=part_label)
    assert key == "post.notice"
    assert fields == dict(token="`t`", part="attn 1", computed="0.5", written="25", c_lo="0.5", c_hi="40",
                          w_lo="20", w_hi="44")


def test_post_notice_without_post_norms():
    written = [[1.25, 300.0], [2.0, 1500.0]]
    assert N.post_notice(post_norms=False, computed=written, written=written, token="`t`",
                         part_label=part_label) == (
        "post.notice_none", dict(token="`t`", lo="1.2", lo_part="attn 0", hi="1,500", hi_part="mlp 1"))


def test_a_computed_zero_does_not_divide_by_zero():
    key, fields = N.post_notice(post_norms=True, computed=[[0.0, 1.0]], written=[[0.5, 2.0]], token="`t`",
                                part_label=part_label)
    assert fields["part"] == "attn 0"


def test_grad_notice():
    assert N.grad_notice(grad_norms=[9.0, 2.5, 2.0, 1.0], n_layers=3, skip_wins=2) == (
        "notice.grad", dict(first="2.50", last="2.00", n=3, skip=2))
    assert N.grad_notice(grad_norms=[9.0, 1.5, 2.0, 1.0], n_layers=3, skip_wins=0)[0] == "notice.grad_shrinks"


def test_every_key_is_in_every_catalog():
    """Each key a branch returns exists in the lesson's catalog, in every language."""
    produced = {"notice.sum", "notice.massive", "notice.lens_embed", "notice.lens_last", "notice.lens",
                "notice.echo_none", "notice.echo_one", "notice.echo_all", "notice.echo_some", "notice.dla",
                "notice.head", "post.notice", "post.notice_none", "notice.grad", "notice.grad_shrinks"}
    assert missing_from_catalogs("residual", produced) == {}
