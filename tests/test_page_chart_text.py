"""Every chart a page draws comes with its text alternative (course/theme.py plot): an accessible
name holding its title and a description of this run's numbers, and a "Data as a table"
expander with the description, the table and a CSV download; the home loop picture has alt text.
Run on the home page (its two charts and the picture), on both models and in Chinese."""

from __future__ import annotations

import json

import pytest

from course import i18n, theme
from course.figures import describe as D
from course.text import md_escape
from tests._apptest import MODELS, errors


def table_expanders(at, lang: str) -> list:
    label = i18n.text_in(lang, "chart.table")
    return [e for e in at.expander if e.label == label]


@pytest.mark.parametrize("model,lang", [(m, "en") for m in MODELS] + [(MODELS[1], "zh-Hant")])
def test_every_chart_has_a_description_and_a_table(open_page, model, lang):
    at = open_page("home", lang=lang, model=model)
    assert not errors(at)
    charts = at.get("plotly_chart")
    expanders = table_expanders(at, lang)
    assert len(charts) >= 2 and len(expanders) == len(charts)
    for chart, expander in zip(charts, expanders):
        spec = json.loads(chart.proto.spec)
        title = D.title(spec)
        assert title and chart.proto.alt.startswith(title)
        assert len(chart.proto.alt) > len(title) + 10         # a description follows the title
        assert expander.table and expander.markdown           # the numbers and the description
        # the table holds the chart's own rows, cell for cell (sent to the browser as Arrow)
        words = {w: i18n.text_in(lang, f"chart.col.{w}") for w in theme._COLUMN_WORDS}
        table = D.tables(spec, words, lang)[0]
        shown = expander.table[0].value
        assert list(shown.columns) == [md_escape(c) for c in table.columns]
        assert len(shown) == len(table.rows)
        assert shown.iloc[0].tolist() == [theme._cell(v) for v in table.rows[0]]
        assert expander.get("download_button")
    # the candidates chart's description names this run's top candidate and its probability
    cand = next(c for c in charts if c.proto.id.endswith("-candidates_chart"))
    trace = json.loads(cand.proto.spec)["data"][0]
    values = D.values(trace["x"])
    top = max(range(len(values)), key=values.__getitem__)
    assert D.plain(trace["y"][top]) in cand.proto.alt
    assert D.fmt(values[top], lang) + "%" in cand.proto.alt
    # the loop picture's alt text names its boxes, in the page's language
    (image,) = [img for element in at.get("image") for img in element.proto.imgs]
    assert image.alt.startswith(i18n.text_in(lang, "chart.loop", chains="", n=0, back="")[:4])
    assert i18n.catalog(lang)["home.diagram.text"] in image.alt


def test_presenter_mode_keeps_the_names_and_leaves_the_tables_out(open_page):
    at = open_page("home", params={"present": "1"})
    assert not errors(at)
    charts = at.get("plotly_chart")
    assert charts and all(c.proto.alt for c in charts)
    assert not table_expanders(at, "en")
