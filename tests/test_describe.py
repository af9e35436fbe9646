"""A chart's text alternative (course/figures/describe.py) and a diagram's (course/figures/diagrams.py),
read from the figure's own JSON, no model, no app: the description names the largest bars, cells
and a line's extremes and trend with their labels; a big heatmap's table keeps the rows and
columns that matter and the CSV keeps everything; user text comes out plain and safe; every
sentence exists in all three languages."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from course import i18n
from course.figures import chart as go
from course.figures import describe as D
from course.figures.chart import make_subplots
from course.figures.diagrams import dot_alt, dot_chains, one_line
from course.figures.style import style

WORDS = {"row": "Row", "label": "Label", "value": "Value", "series": "Series", "angle": "Angle", "length": "Length"}


def spec(fig) -> dict:
    return style(fig)


def say(sentences, lang: str = "en") -> str:
    """The sentences as the page writes them, in ``lang``."""
    return i18n.join_sentences([i18n.text_in(lang, key, **fields) for key, fields in sentences], lang)


def keys(sentences) -> list[str]:
    return [key for key, _ in sentences]


def bar_figure():
    fig = go.Figure(go.Bar(x=[" the", "cat", "&lt;b&gt;sat&lt;/b&gt;", "on"], y=[0.1, 0.62, 0.2, 0.08]))
    fig.update_layout(title="Next token<br>candidates")
    fig.update_yaxes(tickformat=".0%", title="probability")
    return fig


def test_a_bar_chart_names_its_largest_bars_with_their_labels():
    s = spec(bar_figure())
    assert D.title(s) == "Next token candidates"
    text = say(D.describe(s))
    assert text.startswith("4 bars; the largest: cat (62.0%), &lt;b&gt;sat&lt;/b&gt;"[:20])
    # the label is the token's own text, decoded from plotly's escaping: never markup
    assert "cat (62.0%)" in text and "<b>sat</b> (20.0%)" in text and "the (10.0%)" in text
    assert "on (8.0%)" not in text          # only the top three


def test_a_horizontal_bar_chart_reads_values_from_x_and_names_the_lowest_when_signed():
    fig = go.Figure(go.Bar(y=["a", "b", "c", "d", "e"], x=[3.5, -7.25, 1.0, 12.0, -0.5], orientation="h"))
    sentences = D.describe(spec(fig))
    assert keys(sentences) == ["chart.bars", "chart.bars_low"]
    text = say(sentences)
    assert "the largest: d (12), a (3.5), c (1)" in text
    assert "The lowest: b (-7.25), e (-0.5)" in text


def test_a_line_gives_start_end_extremes_and_trend():
    fig = go.Figure(go.Scatter(x=[0, 1, 2, 3, 4], y=[5.0, 3.0, 4.0, 1.5, 1.0], mode="lines", name="loss"))
    text = say(D.describe(spec(fig)))
    assert "5 points from 0 to 4: it starts at 5 and ends at 1" in text
    assert "Highest 5 at 0; lowest 1 at 4." in text
    assert "It falls overall." in text
    steady = go.Figure(go.Scatter(x=[1, 2, 3], y=[1.0, 2.0, 2.0], mode="lines"))
    assert keys(D.describe(spec(steady)))[-1] == "chart.trend.up_steady"
    flat = go.Figure(go.Scatter(x=[1, 2, 3], y=[1.0, 9.0, 1.1], mode="lines"))
    assert keys(D.describe(spec(flat)))[-1] == "chart.trend.flat"


def test_several_traces_are_named_and_counted():
    fig = go.Figure()
    for k in range(6):
        fig.add_trace(go.Scatter(x=[0, 1], y=[k, k + 1.5], mode="lines", name=f"T = {k}"))
    sentences = D.describe(spec(fig))
    assert [f["name"] for key, f in sentences if key == "chart.series"] == ["T = 0", "T = 1", "T = 2", "T = 3"]
    assert sentences[-1] == ("chart.more_series", {"n": "2"})


def heatmap_figure(rows: int = 40, cols: int = 30):
    z = np.zeros((rows, cols))
    z[7 % rows, 3], z[31 % rows, 25 % cols], z[2, 29 % cols] = 9.0, -11.0, 5.0
    fig = go.Figure(go.Heatmap(z=z, x=[f"k{j}" for j in range(cols)], y=[f"q{i}" for i in range(rows)], zmid=0))
    fig.update_layout(title="Scores")
    fig.update_yaxes(title="query")
    return fig


def test_a_heatmap_gives_its_shape_range_and_strongest_cells():
    sentences = D.describe(spec(heatmap_figure()))
    assert keys(sentences) == ["chart.grid", "chart.cells_signed"]
    text = say(sentences)
    assert "A grid of 40 rows by 30 columns, values from -11 to 9." in text
    assert "q31 / k25 (-11), q7 / k3 (9), q2 / k29 (5)" in text


def test_a_big_heatmap_table_keeps_the_rows_and_columns_that_matter_and_the_csv_keeps_all():
    (table,) = D.tables(spec(heatmap_figure()), WORDS)
    assert len(table.rows) == D.MAX_ROWS and len(table.columns) == 1 + D.MAX_COLUMNS
    shown_rows = [row[0] for row in table.rows]
    assert {"q7", "q31", "q2"} <= set(shown_rows)
    assert shown_rows == sorted(shown_rows, key=lambda r: int(r[1:]))        # in the chart's order
    assert {"k3", "k25", "k29"} <= set(table.columns)
    assert table.columns[0] == "query"
    assert table.cut == ("chart.cut_both", {"rows": "20", "all_rows": "40", "cols": "12", "all_cols": "30"})
    row = table.rows[shown_rows.index("q31")]
    assert row[table.columns.index("k25")] == -11.0
    parsed = list(csv.reader(io.StringIO(D.csv_text(table))))
    assert len(parsed) == 1 + 40 and len(parsed[0]) == 1 + 30
    assert float(parsed[1 + 31][1 + 25]) == -11.0


def test_a_small_heatmap_is_shown_whole():
    (table,) = D.tables(spec(heatmap_figure(5, 4)), WORDS)
    assert table.cut is None and table.rows == table.all_rows and len(table.rows) == 5


def test_grouped_bars_share_one_table_and_a_long_line_is_cut_evenly_with_its_extremes():
    fig = go.Figure([go.Bar(x=["a", "b"], y=[1.0, 2.0], name="before"), go.Bar(x=["a", "b"], y=[3.0, 0.5], name="after")])
    (table,) = D.tables(spec(fig), WORDS)
    assert table.columns == ["Label", "before", "after"] and table.rows == [["a", 1.0, 3.0], ["b", 2.0, 0.5]]
    y = [float(np.sin(i / 9)) for i in range(200)]
    y[123] = 5.0
    (line,) = D.tables(spec(go.Figure(go.Scatter(x=list(range(200)), y=y, mode="lines"))), WORDS)
    assert len(line.all_rows) == 200 and len(line.rows) <= D.MAX_ROWS
    assert line.rows[0] == line.all_rows[0] and line.rows[-1] == line.all_rows[-1]
    assert line.all_rows[123] in line.rows and line.cut[0] == "chart.cut_line"


def test_subplot_titles_name_their_traces():
    fig = make_subplots(rows=1, cols=2, subplot_titles=["Promoted", "Suppressed"])
    fig.add_trace(go.Bar(x=[1.0, 2.0], y=["x", "y"], orientation="h"), 1, 1)
    fig.add_trace(go.Bar(x=[-1.0, -3.0], y=["z", "w"], orientation="h"), 1, 2)
    sentences = D.describe(spec(fig))
    assert [f["name"] for key, f in sentences if key == "chart.series"] == ["Promoted", "Suppressed"]


def test_points_polar_and_empty_figures():
    fig = go.Figure(go.Scatter(x=[0.5, -1.0, 2.0], y=[1.0, 0.0, -2.0], mode="markers+text", text=["cat", "dog", "car"]))
    text = say(D.describe(spec(fig)))
    assert "3 points" in text and "Labelled: cat, dog, car." in text
    polar = go.Figure()
    polar.add_scatterpolar(r=[0, 1], theta=[370.0, 370.0], mode="lines", name="pair 0")
    assert D.describe(spec(polar)) == [("chart.angle", {"angle": "10"})]
    assert D.describe(spec(go.Figure())) == [("chart.empty", {})]


def test_numbers_are_written_per_language():
    assert D.fmt(134_515_008, "en") == "135 million"
    assert D.fmt(134_515_008, "zh-Hant") == "1.35 億" and D.fmt(134_515_008, "zh-Hans") == "1.35 亿"
    assert D.fmt(49152.0) == "49,152" and D.fmt(0.123456) == "0.123" and D.fmt(-0.0001) == "-1.00e-04"
    assert D.fmt(0.4567, percent=True) == "45.7%" and D.fmt(-0.00001, percent=True) == "-0.001%"
    text = say(D.describe(spec(bar_figure()), "zh-Hant"), "zh-Hant")
    assert text.startswith("共 4 個長條，最大的是：cat（62.0%）、<b>sat</b>（20.0%）")


def test_bidi_and_formula_text_stays_safe_in_the_csv():
    fig = go.Figure(go.Bar(x=["=SUM(A1)", "\u2068\u05e9\u05dc\u05d5\u05dd\u2069"], y=[1.0, 2.0]))
    (table,) = D.tables(spec(fig), WORDS)
    rows = list(csv.reader(io.StringIO(D.csv_text(table))))
    assert rows[1][0] == "'=SUM(A1)"              # not a formula when opened in a spreadsheet
    assert rows[2][0].startswith("\u2068") and rows[2][0].endswith("\u2069")   # isolates kept balanced


def test_typed_arrays_are_read_like_lists():
    s = spec(go.Figure(go.Bar(x=["a", "b"], y=np.array([1.5, 4.0]))))
    from _plotly_utils.utils import convert_to_base64
    convert_to_base64(s)          # what st.plotly_chart does to the figure in place
    assert isinstance(s["data"][0]["y"], dict)
    assert "b (4)" in say(D.describe(s))


def test_every_chart_sentence_exists_in_three_languages():
    english = {k for k in i18n.catalog("en") if k.startswith("chart.")}
    used = {"chart.bars", "chart.bars_low", "chart.line", "chart.line_one", "chart.line_extremes", "chart.points",
            "chart.points_named", "chart.points_named_more", "chart.angle", "chart.grid", "chart.cells",
            "chart.cells_signed", "chart.strip", "chart.bar_one", "chart.bars_negative", "chart.point_one", "chart.point_named", "chart.more_series", "chart.empty", "chart.series", "chart.title", "chart.diagram",
            "chart.loop", "chart.table", "chart.table_alt", "chart.csv", "chart.csv_named", "chart.cut_rows",
            "chart.cut_cols", "chart.cut_both", "chart.cut_line",
            *(f"chart.trend.{k}" for k in ("up", "up_steady", "down", "down_steady", "flat")),
            *(f"chart.col.{w}" for w in WORDS)}
    assert used <= english
    for lang in ("zh-Hant", "zh-Hans"):
        table = i18n.catalog(lang)
        for key in english:
            assert table.get(key) and i18n.placeholders(table[key]) == i18n.placeholders(i18n.catalog("en")[key])


@pytest.mark.parametrize("text,joined", [("Feed-\nforward\n(each token)", "Feed-forward (each token)"),
                                         ("注意力\n（詞元之間\n交換資訊）", "注意力（詞元之間交換資訊）"),
                                         ("SiLU\n（1536 個數字）", "SiLU（1536 個數字）"),
                                         ("<b>q</b><br/>head 0", "q head 0")])
def test_diagram_labels_on_one_line(text, joined):
    assert one_line(text) == joined


def test_a_diagram_reads_along_its_arrows():
    dot = "\n".join([
        "digraph train {", 'node [shape=box fontsize=10];',
        'text [label="Text"];', 'predict [label="Predict\nnext"];', 'loss [label="Loss"];',
        'update [label="Update"];',
        "text -> predict -> loss; loss -> update;",
        'predict -> update [dir=back label="repeat" style=dashed];', "}"])
    assert dot_chains(dot) == ["Text → Predict next → Loss → Update → Predict next (repeat)"]
    key, fields = dot_alt(dot, "zh-Hant")
    assert key == "chart.diagram" and fields["chains"].endswith("Predict next（repeat）")


def test_bars_all_below_zero_name_the_lowest_and_one_bar_is_one_bar():
    fig = go.Figure(go.Bar(x=[-0.5, -0.6, -0.1, -0.3], y=["a", "b", "c", "d"], orientation="h"))
    assert say(D.describe(spec(fig))) == "4 bars, all below zero; the lowest: b (-0.6), a (-0.5), d (-0.3)."
    assert say(D.describe(spec(go.Figure(go.Bar(x=["only"], y=[2.5]))))) == "One bar: only (2.5)."


def test_a_strip_heatmap_is_a_column_of_its_largest_numbers():
    z = [[0.0] * 100]
    z[0][42], z[0][7] = -9.0, 4.0
    fig = go.Figure(go.Heatmap(z=z, y=["vector"], zmid=0))
    fig.update_xaxes(title="dimension")
    sentences = D.describe(spec(fig))
    assert sentences[0] == ("chart.strip", {"n": "100", "low": "-9", "high": "4"})
    assert "42 (-9), 7 (4)" in say(sentences)
    (table,) = D.tables(spec(fig), WORDS)
    assert table.columns == ["dimension", "vector"] and len(table.all_rows) == 100
    assert ["7", 4.0] in table.rows and ["42", -9.0] in table.rows and len(table.rows) == D.MAX_ROWS and table.cut[0] == "chart.cut_rows"


def test_marked_labels_leave_numbers_alone():
    fig = go.Figure(go.Scatter(x=[1, 2, 3], y=[3.0, 2.0, 1.0], mode="lines", name="loss"))
    fig2 = go.Figure(go.Bar(x=["cat", "12"], y=[1.0, 2.0]))
    mark = lambda s: f"[{s}]"          # noqa: E731
    assert "from 1 to 3" in say(D.describe(spec(fig), mark=mark))
    assert say(D.describe(spec(fig2), mark=mark)) == "2 bars; the largest: 12 (2), [cat] (1)."
