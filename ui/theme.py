"""Plotly look for the course: colour-blind-safe colours, fonts per language, sizes that
read on a projector. Pages draw with ``ui.theme.plot(fig, key=...)``."""

from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st

from ui.i18n import current_lang

# Okabe & Ito (2008), the colour-blind-safe qualitative palette, black moved last.
OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442", "#000000"]
SEQUENTIAL = "Viridis"    # magnitudes, probabilities, attention weights
SEQUENTIAL_ALT = "Cividis"
DIVERGING = "RdBu"        # signed values; pair with zmid=0 (ColorBrewer marks it colour-blind safe)

FONTS = {
    "en": "Noto Sans, DejaVu Sans, Helvetica, Arial, sans-serif",
    "zh-Hant": "Noto Sans CJK TC, Noto Sans TC, PingFang TC, Microsoft JhengHei, sans-serif",
    "zh-Hans": "Noto Sans CJK SC, Noto Sans SC, PingFang SC, Microsoft YaHei, sans-serif",
}
FONT_SIZE = 16
MONO = "Noto Sans Mono, DejaVu Sans Mono, monospace"


# The course template, the default for every figure of the process (the same for every
# session; the language's font is set per figure in style()). Applied when a figure is
# created, which is far cheaper than assigning a template to a finished figure.
pio.templates["decoder_lab"] = go.layout.Template(pio.templates["plotly_white"])
pio.templates["decoder_lab"].layout.update(colorway=OKABE_ITO, font=dict(size=FONT_SIZE, color="#1f2937"))
pio.templates.default = "decoder_lab"


def font_family(lang: str | None = None) -> str:
    return FONTS[lang or current_lang()]


def style(fig: go.Figure, height: int | None = None) -> go.Figure:
    """Apply the course look to a figure in place (and return it)."""
    fig.update_layout(
        font=dict(family=font_family(), size=FONT_SIZE, color="#1f2937"),
        hoverlabel=dict(font=dict(family=font_family(), size=FONT_SIZE)),
        legend=dict(font=dict(size=FONT_SIZE - 2)),
    )
    if fig.layout.margin.t is None:
        fig.update_layout(margin=dict(l=10, r=10, t=60 if fig.layout.title.text else 20, b=10))
    fig.update_xaxes(automargin=True, title_font=dict(size=FONT_SIZE), tickfont=dict(size=FONT_SIZE - 2))
    fig.update_yaxes(automargin=True, title_font=dict(size=FONT_SIZE), tickfont=dict(size=FONT_SIZE - 2))
    if height is not None:
        fig.update_layout(height=height)
    return fig


def plot(fig: go.Figure, key: str, height: int | None = None, static: bool = False) -> None:
    """Draw a figure with the course look (Streamlit's own chart theme off). ``static``
    draws it as a picture (no hover, zoom or toolbar), which is quicker to draw."""
    config = {"staticPlot": True} if static else {"displaylogo": False,
                                                   "modeBarButtonsToRemove": ["lasso2d", "select2d"]}
    st.plotly_chart(style(fig, height), key=key, theme=None, width="stretch", config=config)
