"""The embeddings lesson: row strips, neighbours, analogies, the PCA map, cosine matrices, order."""

from __future__ import annotations


import pytest
import torch

from lesson_model.analysis import embeddings as E
from ui import i18n
from ui.figures_embeddings import ANALOGIES, GROUPS, MAPS
from tests._apptest import chart, arr

pytestmark = pytest.mark.slow

CHINESE = "狗咬人。人咬狗。"
EMOJI = "I love 🍕 and 🐱"


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_every_group_word_is_one_token(lm):
    for words in GROUPS.values():
        for word in words:
            assert len(lm.encode(" " + word)) == 1, word
    for example in ANALOGIES:
        for word in example:
            assert len(lm.encode(" " + word)) == 1, word
    assert all(set(groups) <= set(GROUPS) for groups in MAPS.values())


@pytest.mark.parametrize("lang", list(i18n.LANGS))
@pytest.mark.parametrize("prompt", [None, CHINESE, EMOJI])
def test_row_strip_and_neighbours_come_from_the_table(open_page, lm, lang, prompt):
    at = open_page("embeddings", lang=lang, prompt=prompt)
    assert not at.exception, [e.value for e in at.exception]
    text = prompt if prompt is not None else i18n.catalog(lang)["prompt.default"]
    ids = lm.encode(text)
    chosen = ids[1]                                          # the page's default position is 1
    strip = chart(at, "row_strip")["data"][0]
    torch.testing.assert_close(torch.tensor(arr(strip["z"])[0]), lm.decoder.W_E.detach().cpu()[chosen].float(), atol=1e-6, rtol=0)
    nearest = E.nearest_neighbours(lm, chosen, k=12)
    bars = chart(at, "neighbours_chart")["data"][0]
    assert bars["customdata"] == [n.id for n in nearest]
    assert arr(bars["x"]).tolist() == pytest.approx([n.cosine for n in nearest], abs=1e-6)
    # The prompt's cosine matrix is the matrix of its embedding rows.
    heat = chart(at, "prompt_cosines")["data"][0]
    expected = E.cosine_matrix(lm.decoder.W_E.detach().cpu()[ids])
    torch.testing.assert_close(torch.tensor(arr(heat["z"])), expected, atol=1e-5, rtol=0)


def test_word_lookup_and_multi_token_warning(open_page, lm):
    at = open_page("embeddings", lang="en", params={"word": "Monday", "k": 5})
    got = chart(at, "neighbours_chart")["data"][0]["customdata"]
    assert got == [n.id for n in E.nearest_neighbours(lm, " Monday", k=5)]
    at = open_page("embeddings", lang="en", params={"word": "antidisestablishmentarianism"})
    assert not at.exception
    assert any("antidisestablishmentarianism" in w.value for w in at.warning)
    # Falls back to the prompt token at the chosen position.
    fallback = lm.encode(i18n.catalog("en")["prompt.default"])[1]
    assert chart(at, "neighbours_chart")["data"][0]["customdata"][0] == E.nearest_neighbours(lm, fallback, k=1)[0].id


def test_analogy_from_the_url_reports_honest_ranks(open_page, lm):
    at = open_page("embeddings", lang="en", params={"a": "Paris", "b": "France", "c": "Italy", "expect": "Rome"})
    assert not at.exception
    res = E.analogy(lm, " Paris", " France", " Italy", k=10, expected=" Rome")
    assert metric(at, "Rank of ·Rome") == f"{res.expected_rank:,}"
    assert metric(at, "Rank with the inputs kept") == f"{res.expected_rank_with_inputs:,}"
    bars = chart(at, "analogy_chart")["data"][0]
    assert bars["customdata"] == [n.id for n in res.top]
    assert res.expected_rank > 10                             # half-works: Rome is not in the top 10


def test_preset_button_fills_the_analogy(open_page, lm):
    # English: AppTest re-formats translated radio options outside the script run (in English).
    at = open_page("embeddings", lang="en")
    n = next(i for i, ex in enumerate(ANALOGIES) if ex[0] == "walking")
    at.button(key=f"analogy_{n}").click().run()
    assert not at.exception
    assert [at.text_input(key=k).value for k in ("a", "b", "c", "expect")] == list(ANALOGIES[n])
    res = E.analogy(lm, " walking", " walk", " swim", k=10, expected=" swimming")
    assert chart(at, "analogy_chart")["data"][0]["customdata"] == [t.id for t in res.top]


def test_bad_analogy_words_warn(open_page):
    at = open_page("embeddings", lang="en", params={"a": "antidisestablishment", "b": "", "expect": "xyzzyq"})
    assert not at.exception
    texts = " ".join(w.value for w in at.warning)
    assert "antidisestablishment" in texts
    assert not any(c.proto.id.endswith("-analogy_chart") for c in at.get("plotly_chart"))


def test_map_choices_and_bad_values(open_page, lm):
    at = open_page("embeddings", lang="en", params={"map": "time", "dims": "3"})
    data = chart(at, "map_chart")["data"]
    assert {trace["type"] for trace in data} == {"scatter3d"}
    n_points = sum(len(arr(trace["x"])) for trace in data)
    assert n_points == sum(len(GROUPS[g]) for g in MAPS["time"])
    ids = [lm.encode(" " + w)[0] for g in MAPS["time"] for w in GROUPS[g]]
    p = E.pca(lm.decoder.W_E.detach().cpu()[ids], 3)
    first = data[0]
    xs = arr(first["x"]).tolist()
    assert xs == pytest.approx(p.coords[: len(xs), 0].tolist(), abs=1e-4)
    at = open_page("embeddings", lang="en", params={"map": "<script>", "dims": "9", "k": "999", "pos": "abc"})
    assert not at.exception
    assert at.slider(key="k").value == 30
    notes = " ".join(w.value for w in at.warning)
    assert "map=<script>" in notes and "dims=9" in notes and "k=999" in notes


def test_map_of_the_prompt_and_capitals_lines(open_page, lm):
    at = open_page("embeddings", lang="en", prompt="one two two three", params={"map": "prompt"})
    data = chart(at, "map_chart")["data"]
    assert sum(len(arr(t["x"])) for t in data) == 3               # repeated tokens are placed once
    at = open_page("embeddings", lang="en")
    lines = [t for t in chart(at, "map_chart")["data"] if t.get("mode") == "lines"]
    assert len(lines) == len(GROUPS["countries"])            # one line from each country to its capital


def test_order_blindness(open_page, lm):
    at = open_page("embeddings", lang="en")
    assert at.success, "the default pair looks up the same rows"
    heat = arr(chart(at, "order_chart")["data"][0]["z"]).tolist()
    ones = [(r, c) for r, row in enumerate(heat) for c, v in enumerate(row) if v > 0.99999]
    assert len(ones) == len(lm.encode("The dog bites the man."))   # a permutation
    at = open_page("embeddings", lang="en", params={"order_b": "dog bites man"})
    assert not at.exception and not at.success and at.warning


def test_empty_prompt(open_page):
    at = open_page("embeddings", lang="zh-Hant", prompt="")
    assert not at.exception and at.info and not at.get("plotly_chart")
