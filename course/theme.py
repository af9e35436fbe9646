"""Drawing a chart on the page: ``plot(fig, key=...)`` styles a figure with the course look
(course/figures/style.py, re-exported here for pages) and hands it to st.plotly_chart."""

from __future__ import annotations

import re

import plotly.graph_objects as go
import streamlit as st
from _plotly_utils.utils import convert_to_base64

from course.figures.style import *  # noqa: F401,F403 - pages read the palette and sizes as theme.X
from course.figures.style import TITLE_WIDTH, style, view


def plot(fig, key: str, height: int | None = None, static: bool = False,
         title_width: int = TITLE_WIDTH) -> None:
    """Draw a figure with the course look (Streamlit's own chart theme off). ``static``
    draws it as a picture (no hover, zoom or toolbar), which is quicker to draw. A long title is
    wrapped at ``title_width`` characters (pass a smaller one for a chart in a narrow column)."""
    spec = style(fig, height, title_width)
    config = {"staticPlot": True} if static else {"displaylogo": False,
                                                   "modeBarButtonsToRemove": ["lasso2d", "select2d"],
                                                   "toImageButtonOptions": export_options(spec, key)}
    st.plotly_chart(unchecked(spec), key=key, theme=None, width="stretch", config=config)


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
