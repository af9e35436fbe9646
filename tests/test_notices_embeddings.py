"""The embeddings lesson's "What to notice", branch by branch, without running the app or a model."""

import pytest

from course.notices import embeddings as N

pytestmark = pytest.mark.unit


def label(text):
    return f"`{text}`"


def join(items):
    return ", ".join(items)


def test_row_notice_and_the_scale_on_a_model_that_has_one():
    plain = N.row_notices(token="`cat`", d=576, norm=0.98765, vocab=49152, nearest="`·cats`", cos=0.61234,
                          embed_scale=False, model="SmolLM2-135M", scale=1.0)
    assert plain == [("notice.row", dict(token="`cat`", d=576, norm="0.99", vocab="49,152", nearest="`·cats`",
                                         cos="0.612"))]
    scaled = N.row_notices(token="`cat`", d=640, norm=1.5, vocab=262144, nearest="`·cats`", cos=0.5,
                           embed_scale=True, model="Gemma 3 270M", scale=25.298)
    assert [key for key, _ in scaled] == ["notice.row", "notice.scale"]
    assert scaled[1][1] == dict(model="Gemma 3 270M", d=640, scale="25.30", scaled="37.95")


def test_forms_of_the_same_word_are_named():
    key, fields = N.neighbours_notice(token="`·cat`", query_text=" cat",
                                      neighbours=[" Cat", " dog", "cat", " cats", "CAT", " CAT"], k=12, label=label,
                                      join=join)
    assert key == "notice.variants"
    assert fields == dict(token="`·cat`", n=4, k=12, examples="` Cat`, `cat`, `CAT`, ` CAT`")


def test_without_forms_the_first_neighbours_are_named():
    assert N.neighbours_notice(token="`·cat`", query_text=" cat", neighbours=[" dog", " cats", " kitten", " pet",
                                                                              " mouse"], k=5, label=label,
                               join=join) == (
        "notice.neighbours", dict(token="`·cat`", examples="` dog`, ` cats`, ` kitten`, ` pet`"))


def test_same_word():
    assert N.same_word(" Cat", "cat") and not N.same_word(" cats", "cat")


def test_analogy_sentences():
    args = dict(a="`·king`", b="`·man`", c="`·woman`", best="`·queen`", cos=0.71234)
    assert N.analogy_sentences(**args) == [("notice.analogy", dict(args, cos="0.712"))]
    found = N.analogy_sentences(**args, expected="`·queen`", expected_rank=1234, input_first="`·king`")
    assert found == [("notice.analogy", dict(args, cos="0.712")),
                     ("notice.analogy_rank", dict(rank="1,234", expected="`·queen`")),
                     ("notice.analogy_inputs", dict(token="`·king`"))]
    assert [k for k, _ in N.analogy_sentences(**args, input_first="`·king`")] == ["notice.analogy",
                                                                                  "notice.analogy_inputs"]


def test_map_notice_branches():
    assert N.map_notice(which="capitals", explained=None, pc1=[], n_countries=2, dims=2, n=0, d=576) == []
    assert N.map_notice(which="capitals", explained=[0.3, 0.2, 0.1], pc1=[1.0, 2.0, -1.0, -2.5], n_countries=2,
                        dims=3, n=4, d=576) == [
        ("notice.map_capitals", dict(pct="50%", n=4, countries="+1.50", capitals="-1.75"))]
    # A country among the capitals on PC1: the groups overlap, and the notice says so.
    assert N.map_notice(which="capitals", explained=[0.3, 0.2], pc1=[1.0, -2.0, -1.0, -2.5], n_countries=2, dims=2,
                        n=4, d=640)[0][0] == "notice.map_capitals_overlap"
    assert N.map_notice(which="animals", explained=[0.3, 0.2, 0.1], pc1=[], n_countries=2, dims=3, n=9,
                        d=576) == [("notice.map", dict(pct="50%", n=9, d=576))]
    assert N.map_notice(which="prompt", explained=[0.4], pc1=[], n_countries=2, dims=2, n=2,
                        d=576) == [("notice.map", dict(pct="40%", n=2, d=576))]


def at(i):
    return f"`t{i}`"


def test_the_most_and_least_alike_pairs_and_repeats():
    cos = [[1.0, 0.2, 0.5, 0.2],
           [0.2, 1.0, -0.1, 1.0],
           [0.5, -0.1, 1.0, -0.1],
           [0.2, 1.0, -0.1, 1.0]]
    found = N.prompt_notices(cos=cos, ids=[7, 8, 9, 8], label=at)
    assert found == [("notice.matrix", dict(a="`t2`", b="`t0`", hi="0.50", c="`t2`", d="`t1`", lo="-0.10")),
                     ("notice.repeats", dict(n=1))]


def test_two_different_tokens_make_one_pair():
    cos = [[1.0, 0.3, 1.0], [0.3, 1.0, 0.3], [1.0, 0.3, 1.0]]
    assert N.prompt_notices(cos=cos, ids=[5, 6, 5], label=at) == [
        ("notice.matrix_one", dict(a="`t1`", b="`t0`", hi="0.30")), ("notice.repeats", dict(n=1))]


def test_one_token_has_no_pairs():
    assert N.prompt_notices(cos=[[1.0]], ids=[5], label=at) == []
    assert N.prompt_notices(cos=[[1.0, 1.0], [1.0, 1.0]], ids=[5, 5], label=at) == [("notice.repeats", dict(n=1))]


def test_every_key_is_in_every_catalog():
    """Each key a branch returns exists in the lesson's catalog, in every language (and the
    word-order line the page adds as it is)."""
    from course import i18n
    produced = {"notice.row", "notice.scale", "notice.variants", "notice.neighbours", "notice.analogy",
                "notice.analogy_rank", "notice.analogy_inputs", "notice.map_capitals", "notice.map_capitals_overlap", "notice.map",
                "notice.matrix", "notice.matrix_one", "notice.repeats", "order.after"}
    for lang in ("en", "zh-Hant", "zh-Hans"):
        catalog = i18n.catalog(lang)
        assert [k for k in produced if f"embeddings.{k}" not in catalog] == [], lang
