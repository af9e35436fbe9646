"""Drawing a chart on the page: ``plot(fig, key=...)`` styles a figure with the course look
(course/figures/style.py, re-exported here for pages) and hands it to st.plotly_chart, with its
text alternative: the title and a description of this run's numbers as the chart's accessible
name (course/figures/describe.py), and a collapsed "Data as a table" expander under it (the
description, the numbers as a table, a CSV download). ``diagram(dot, ...)`` draws a Graphviz
diagram with its alt text."""

from __future__ import annotations

import re

import plotly.graph_objects as go
import pyarrow as pa
import streamlit as st
from _plotly_utils.utils import convert_to_base64

from course.figures import describe as D
from course.figures.diagrams import dot_alt
from course.figures.style import *  # noqa: F401,F403 - pages read the palette and sizes as theme.X
from course.figures.style import TITLE_WIDTH, style, view
from course.i18n import join_sentences, t
from course.text import code_span, md_escape


def plot(fig, key: str, height: int | None = None, static: bool = False,
         title_width: int = TITLE_WIDTH) -> None:
    """Draw a figure with the course look (Streamlit's own chart theme off). ``static``
    draws it as a picture (no hover, zoom or toolbar), which is quicker to draw. A long title is
    wrapped at ``title_width`` characters (pass a smaller one for a chart in a narrow column)."""
    spec = style(fig, height, title_width)
    config = {"staticPlot": True} if static else {"displaylogo": False,
                                                   "modeBarButtonsToRemove": ["lasso2d", "select2d"],
                                                   "toImageButtonOptions": export_options(spec, key)}
    about = ChartText(spec)
    st.plotly_chart(unchecked(spec), key=key, theme=None, width="stretch", config=config, alt=about.alt)
    data_table(about, key)


# --- the text alternative ----------------------------------------------------------------------

_COLUMN_WORDS = ("row", "label", "value", "series", "angle", "length")
_TITLE_END = tuple(".?!:。？！：")


_MARKED = re.compile("\x02([^\x02\x03]*)\x03")


def _marked(text: str) -> str:
    """A label or name of the chart, marked for ChartText to show as code in Markdown."""
    return f"\x02{text.replace(chr(2), '').replace(chr(3), '')}\x03"


class ChartText:
    """A styled figure's words for this run, in the session's language: ``title`` (plain text),
    ``description`` (course/figures/describe.py's sentences), ``alt`` (both: what a screen
    reader says for the chart) and ``tables``. Read before st.plotly_chart, which turns the
    figure's arrays into base64 in place."""

    def __init__(self, spec: dict):
        lang = view().lang
        self.title = D.title(spec)
        marked = join_sentences([t(key, **fields) for key, fields in D.describe(spec, lang, _marked)], lang)
        self.description = _MARKED.sub(lambda m: m.group(1), marked)
        # for the expander: the chart's labels as code spans (escaped; the typography checks skip them)
        self.description_md = _MARKED.sub(lambda m: code_span(m.group(1)), marked)
        head = self.title if self.title.endswith(_TITLE_END) else t("chart.title", title=self.title)
        self.alt = join_sentences([head, self.description], lang) if self.title else self.description
        self.tables = D.tables(spec, {w: t(f"chart.col.{w}") for w in _COLUMN_WORDS}, lang)


def chart_alt(spec: dict) -> str:
    """The accessible name of a chart drawn without ``plot`` (its title and description)."""
    return ChartText(spec).alt


def _cell(value) -> str:
    """A table cell as Markdown (st.table renders Markdown): a number with 4 significant digits,
    text escaped."""
    if value is None:
        return ""
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    return md_escape(str(value))


def arrow_table(data) -> pa.Table:
    """A table for st.table or st.dataframe, from a dict of columns or a list of rows (dicts with
    the same keys in the same order), as an Arrow table. Streamlit sends an Arrow table as it is;
    a pandas DataFrame it first probes and converts: the chart tables were 27% of an attention
    run in a profile of one session, 11% as Arrow (bench/RESULTS_follow.md)."""
    if isinstance(data, dict):
        return _arrow(list(data), [list(column) for column in data.values()])
    names = list(data[0]) if data else []
    return _arrow(names, [[row[name] for row in data] for name in names])


def _arrow(names: list[str], columns: list[list]) -> pa.Table:
    return pa.Table.from_arrays([pa.array(column) for column in columns], names=names)


def _frame(table: D.Table) -> pa.Table:
    cells = [[_cell(v) for v in row] for row in table.rows]
    return _arrow([md_escape(c) for c in table.columns],
                  [list(column) for column in zip(*cells)] if cells else [[] for _ in table.columns])


def data_table(about: ChartText, key: str) -> None:
    """The chart's collapsed "Data as a table" expander: the description, each table (a big one
    cut, saying so) and a CSV download of every row (made only when clicked). Streamlit's
    "compact" expander would be lighter, but draws its label at 60% opacity: 3.9:1 contrast,
    under WCAG AA's 4.5:1. Left out in presenter mode (the projected view, where every line of
    height counts); the chart's accessible name stays."""
    if view().presenting:
        return
    with st.expander(t("chart.table"), key=f"table_{key}"):
        st.markdown(about.description_md)
        several = len(about.tables) > 1
        for i, table in enumerate(about.tables):
            if several and table.name:
                st.markdown(f"**{md_escape(table.name)}**")
            st.table(_frame(table), hide_index=True,
                     alt=t("chart.table_alt", title=about.title or table.name or about.description))
            if table.cut:
                st.caption(t(table.cut[0], **table.cut[1]))
            st.download_button(t("chart.csv_named", name=md_escape(table.name)) if several and table.name
                               else t("chart.csv"), data=lambda table=table: D.csv_text(table),
                               file_name=f"{export_name(key)}{f'_{i + 1}' if several else ''}.csv",
                               mime="text/csv", on_click="ignore", key=f"csv_{key}_{i}",
                               icon=":material/download:")


def diagram(dot: str, width="stretch") -> None:
    """A Graphviz diagram with its alt text: the labels along its arrows (course.figures.diagrams)."""
    key, fields = dot_alt(dot, view().lang)
    st.graphviz_chart(dot, width=width, alt=t(key, **fields))


def unchecked(spec: dict) -> go.Figure:
    """The styled JSON as the figure st.plotly_chart takes, not checked or copied again.

    Given a plain dict, Streamlit would check it property by property (as much work as building
    the figure); given a go.Figure it asks only for ``to_dict()``, which deep-copies every
    trace. Even made with plotly's ``_validate=False``, a go.Figure copies the JSON in and
    again out: 5-7 ms a chart, held under the GIL while a class waits. This figure hands
    Streamlit the JSON it was made from."""
    return _Ready(spec)


class _Ready(go.Figure):
    """A go.Figure (what st.plotly_chart checks for) that is only its finished JSON."""

    def __init__(self, spec: dict):     # noqa: D107 - plotly's own __init__ is what it skips
        self._ready_spec = spec

    def to_dict(self) -> dict:
        convert_to_base64(self._ready_spec)     # numpy arrays as typed arrays, as plotly's to_dict sends them
        return self._ready_spec

    to_plotly_json = to_dict


# The toolbar's camera button downloads the chart for a slide: laid out EXPORT_WIDTH px wide
# (at the figure's own height) and drawn at EXPORT_SCALE, so a 1,920 px wide PNG whose 16 px
# text is 32 px on the slide (presenter mode's 20+ px text, 40+ px), or an SVG, as chosen in
# the sidebar; named after the lesson and the chart.
EXPORT_WIDTH = 960
EXPORT_SCALE = 2


def export_name(key: str) -> str:
    """decoder-lab_<lesson>_<chart>: the download's file name (without extension)."""
    safe = re.sub(r"[^A-Za-z0-9_-]+", "-", key).strip("-") or "chart"
    return f"decoder-lab_{view().page}_{safe}"


def export_options(spec: dict, key: str) -> dict:
    """plotly's toImageButtonOptions for a chart drawn with ``key``."""
    options = {"format": view().export_format, "filename": export_name(key),
               "width": EXPORT_WIDTH, "scale": EXPORT_SCALE}
    if spec["layout"].get("height") is not None:
        options["height"] = spec["layout"]["height"]
    return options
