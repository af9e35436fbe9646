"""The course's chart look as plain data: colour-blind-safe colours, fonts per language, sizes
that read on a projector, titles wrapped by Chinese line rules, and ``style(fig)``, the finished
JSON. No Streamlit and no session state: what a figure depends on besides its numbers (the
run's language, presenter mode, the page, the download format) is the run's ``View``, set once
at the start of each script run (classroom.presenter.begin) and read here.

A ContextVar, not a module global: every session's script runs in its own thread, and a new
thread starts with the default View, so one session's presenter mode never reaches another's
charts. Pages draw with ``course.theme.plot(fig, key=...)``."""

from __future__ import annotations

import contextvars
import re
from dataclasses import dataclass, replace

import plotly.graph_objects as go
import plotly.io as pio


@dataclass(frozen=True)
class View:
    """What a chart's look depends on besides its numbers: this run's language, presenter mode,
    page (chart download names) and download format."""

    lang: str = "en"
    presenting: bool = False
    page: str = "home"
    export_format: str = "png"
    dark: bool = False          # the dark theme (?theme=dark, classroom/access.py)


_VIEW: contextvars.ContextVar[View] = contextvars.ContextVar("decoder_lab_view", default=View())


def view() -> View:
    """The current run's View (the default one outside a run)."""
    return _VIEW.get()


def set_view(new: View | None = None, **changes) -> View:
    """Set this run's View (``new``, or the current one with ``changes``); returns it."""
    value = replace(new or _VIEW.get(), **changes)
    _VIEW.set(value)
    return value

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
# The template travels in every chart's JSON, so it keeps plotly_white's defaults only for the
# trace types the course draws (DRAWN_TRACES; tests/test_app_pages.py checks every page's
# charts) and drops the map, 3-D and ternary layouts it never uses: 7.1 KB of a median 9.1 KB
# chart before, copied and sent with each one.
DRAWN_TRACES = ("bar", "heatmap", "scatter", "scatterpolar", "waterfall")
_WHITE = pio.templates["plotly_white"].to_plotly_json()
pio.templates["decoder_lab"] = go.layout.Template(
    data={kind: traces for kind, traces in _WHITE["data"].items() if kind in DRAWN_TRACES},
    layout={key: value for key, value in _WHITE["layout"].items() if key not in ("geo", "scene", "ternary")})
pio.templates["decoder_lab"].layout.update(colorway=OKABE_ITO, font=dict(size=FONT_SIZE, color="#1f2937"))
pio.templates.default = "decoder_lab"

# The dark theme's charts: plotly_dark's look on Streamlit's dark background, the same colours
# except Okabe-Ito's black, which would vanish (white instead); kept as the finished JSON that
# style() puts in place of the light template. Colours the figures set for ink (text, outlines,
# reference lines) are swapped for light ones (DARK_INK); the palettes and colour scales stay.
DARK_BG = "#0e1117"
DARK_TEXT = "#e5e7eb"
_DARK = pio.templates["plotly_dark"].to_plotly_json()
DARK_TEMPLATE = go.layout.Template(
    data={kind: traces for kind, traces in _DARK["data"].items() if kind in DRAWN_TRACES},
    layout={key: value for key, value in _DARK["layout"].items() if key not in ("geo", "scene", "ternary")})
DARK_TEMPLATE.layout.update(colorway=OKABE_ITO[:-1] + ["#ffffff"], font=dict(size=FONT_SIZE, color=DARK_TEXT),
                            paper_bgcolor=DARK_BG, plot_bgcolor=DARK_BG)
DARK_TEMPLATE = DARK_TEMPLATE.to_plotly_json()
DARK_INK = {"#1f2937": DARK_TEXT, "black": "#ffffff", "#000": "#ffffff", "#000000": "#ffffff",
            "#111827": "#f3f4f6", "#374151": "#d1d5db", "#4b5563": "#cbd5e1", "#6b7280": "#b0b7c3",
            "#333": "#d1d5db", "#333333": "#d1d5db", "#444": "#cbd5e1", "#444444": "#cbd5e1",
            "#555": "#c0c4cc", "#555555": "#c0c4cc", "#666": "#b0b7c3", "#666666": "#b0b7c3"}
_DARK_FILL = {"white": DARK_BG, "#fff": DARK_BG, "#ffffff": DARK_BG, "black": DARK_BG, "#000": DARK_BG,
              "#000000": DARK_BG}   # backgrounds only (bgcolor, plot_bgcolor, paper_bgcolor)
_WHITE_VEIL = re.compile(r"rgba\(\s*255\s*,\s*255\s*,\s*255\s*,\s*([0-9.]+)\s*\)")
_BG_KEYS = ("bgcolor", "plot_bgcolor", "paper_bgcolor")
_INK_KEYS = ("color", *_BG_KEYS, "bordercolor", "linecolor", "gridcolor", "zerolinecolor", "tickcolor",
             "outlinecolor", "fillcolor")


def _darken(node) -> None:
    """Swap the ink colours (DARK_INK) set anywhere in a figure's JSON for the dark theme's, and
    white (or black) backgrounds and half-white label backings for the dark background, in place.
    Colours given per point (lists: text chosen to read on its own cell) and colour scales are
    left alone."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _INK_KEYS and isinstance(value, str):
                if key in _BG_KEYS:
                    veil = _WHITE_VEIL.fullmatch(value.strip())   # a label's half-white backing
                    node[key] = f"rgba(14,17,23,{veil.group(1)})" if veil else _DARK_FILL.get(value.lower(), value)
                else:
                    node[key] = DARK_INK.get(value.lower(), value)
            elif isinstance(value, (dict, list)) and key not in ("template", "colorscale"):
                _darken(value)
    elif isinstance(node, list):
        for item in node:
            if isinstance(item, (dict, list)):
                _darken(item)


# A title line's width in Latin characters (a CJK character counts as two): about 300 px at
# TITLE_SIZE, the width of a chart in a half column at 1024x768 with the sidebar open.
TITLE_WIDTH = 32
WIDE_TITLE = 56                  # title width (characters) of a chart that spans the page
THREE_QUARTERS_TITLE = 44        # ... of a chart in a page's figure column (Lesson.columns)
TITLE_SIZE = 17
TITLE_LINE_PX = 22


def _is_cjk(ch: str) -> bool:
    return "\u2e80" <= ch <= "\uffef"


def width_units(text: str) -> int:
    """How wide ``text`` is in half-em units, about: a CJK character 2, anything else 1."""
    return sum(2 if _is_cjk(ch) else 1 for ch in text)


# Chinese line breaking (禁則): closing punctuation never starts a line, opening punctuation never
# ends one. Between two Chinese characters a line may break anywhere.
_CLOSING = "，。、：；！？）」』》〉】%％"
_OPENING = "（「『《〈【"


def _pieces(text: str) -> list[tuple[str, bool]]:
    """The title as pieces a line may break between: words, single CJK characters (with the
    closing punctuation after one, and the opening punctuation before one, kept on it), and
    spaces (True)."""
    pieces: list[tuple[str, bool]] = []
    for part in text.split(" "):
        chunk = ""                                   # characters that stay together
        for ch in part:
            if ch in _CLOSING:                       # stays with what it closes
                if not chunk and pieces and not pieces[-1][1]:
                    pieces[-1] = (pieces[-1][0] + ch, False)
                else:
                    chunk += ch
            elif _is_cjk(ch) and ch not in _OPENING:
                if chunk and chunk[-1] in _OPENING:  # an opening mark goes with the character it opens
                    pieces.append((chunk + ch, False))
                else:
                    if chunk:
                        pieces.append((chunk, False))
                    pieces.append((ch, False))
                chunk = ""
            else:                                    # Latin letters, digits, an opening mark
                chunk += ch
        if chunk:
            pieces.append((chunk, False))
        pieces.append((" ", True))
    return _keep_counts_whole(pieces[:-1])


_NUMBER = re.compile(r"[+−-]?\d[\d,.]*%?")


def _keep_counts_whole(pieces: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """A number stays with the Chinese measure word after it (「15 層」, 「8 個」) and with 「第」
    before it: 「第 15 層」 is one unit, so a line never ends in 「第」 or starts with 「層」."""
    out: list[tuple[str, bool]] = []
    i = 0
    while i < len(pieces):
        piece, space = pieces[i]
        if (not space and _NUMBER.fullmatch(piece) and i + 2 < len(pieces) and pieces[i + 1][1]
                and _is_cjk(pieces[i + 2][0][0]) and pieces[i + 2][0][0] not in _OPENING + _CLOSING):
            piece = f"{piece} {pieces[i + 2][0]}"
            if len(out) >= 2 and out[-1][1] and out[-2][0] == "第":
                out = out[:-2]
                piece = "第 " + piece
            out.append((piece, False))
            i += 3
            continue
        out.append((piece, space))
        i += 1
    return out


def wrap_title(text: str, width: int = TITLE_WIDTH) -> str:
    """A chart title broken into lines of about ``width`` characters (plotly never wraps a
    title, so a long one is cut at the chart's right edge on a projector or a phone). Breaks at
    spaces, or between CJK characters, never before closing punctuation nor after opening
    punctuation; existing <br> breaks are kept."""
    if not text or "<" in text or width_units(text) <= width:   # already broken, or holds markup
        return text
    lines, line = [], ""
    for piece, is_space in _pieces(text):
        if is_space:
            if line and width_units(line) + 1 > width:
                lines.append(line)
                line = ""
            elif line:
                line += " "
            continue
        if line and width_units(line) + width_units(piece) > width:       # line: with its space
            lines.append(line.rstrip())
            line = piece
        else:
            line += piece
    if line.strip():
        lines.append(line.rstrip())
    return "<br>".join(lines)


def font_family(lang: str | None = None) -> str:
    return FONTS[lang or view().lang]


# Presenter mode (?present=1, classroom/presenter.py, View.presenting): every size scaled up, none under 20 px, so
# ticks, titles, labels in the plot and legends read from the back of a room at 1024x768.
PRESENT_SCALE = 1.3
PRESENT_MIN_PX = 20


LEGEND_WIDTH = 28           # characters per legend line in presenter mode (a half column at 20 px)
LAPTOP_LEGEND_WIDTH = 24    # ... and on a laptop (a half column at 1024 px with the sidebar open)


def legend_text(text: str) -> str:
    """A legend entry broken into lines: plotly never wraps one, and a long one ran past a half
    column's right edge (at 20 px in presenter mode, and in Chinese at 1024 px)."""
    return wrap_title(text, LEGEND_WIDTH if view().presenting else LAPTOP_LEGEND_WIDTH)


def room_above_subplot_titles() -> int:
    """A top margin (px) for a figure with no title of its own whose first row has a subplot
    title: the 20 px default cut its top in presenter mode, and 1.5 x the type cut 2 px off
    Chinese titles (the CJK font's taller ascent)."""
    return round(font_px(FONT_SIZE) * 1.8)


def title_chars(width: int) -> int:
    """A title width in characters (wrap_title's) at the laptop type, as many as fit the same
    room at this session's type: fewer in presenter mode."""
    return max(12, round(width * FONT_SIZE / font_px(FONT_SIZE)))


def presenter_height(px: int) -> int:
    """A chart's height ``px`` at the laptop type, grown with the type in presenter mode, so that
    larger ticks, titles and legends do not squeeze its plot to a strip."""
    return round(px * font_px(FONT_SIZE) / FONT_SIZE)


# Presenter mode fits a projector: the first screen of a lesson at 1024x768 (under the header,
# the title and the folded "Predict, then see" line) shows the lesson's first chart whole
# (tests/browser/test_presenter_browser.py). A first chart taller than that room is drawn shorter
# there: ``projected(laptop, presenter)`` is the height to draw at.
def projected(laptop, presenter):
    """``laptop`` px, or ``presenter`` px in presenter mode (a first chart fitted to the first screen)."""
    return presenter if view().presenting else laptop


def legend_below(y: float = -0.25) -> float:
    """The paper y of a horizontal legend under a chart's x-axis title: ``y`` at the laptop
    type, lower in presenter mode, whose larger tick labels and axis title push the title down
    onto a legend at ``y`` (seen on the heads page's KV charts)."""
    return y if not view().presenting else y - 0.15


def font_px(size: float) -> float:
    """A font size as this session draws it: ``size``, or larger in presenter mode."""
    if not view().presenting:
        return size
    return max(PRESENT_MIN_PX, round(size * PRESENT_SCALE))


# Layout keys of the axes (xaxis, xaxis2, ..., yaxis...) and polar subplots of a figure's JSON.
_AXIS = re.compile(r"[xy]axis\d*$")
_POLAR = re.compile(r"polar\d*$")


def _part(parent: dict, key: str) -> dict:
    """``parent[key]``, a dict, made empty when absent."""
    if not isinstance(parent.get(key), dict):
        parent[key] = {}
    return parent[key]


def _merge(target: dict, patch: dict) -> None:
    """Write ``patch`` into ``target`` in place, nested dicts key by key (plotly's update)."""
    for key, value in patch.items():
        if isinstance(value, dict):
            _merge(_part(target, key), value)
        else:
            target[key] = value


def _enlarge_font(font) -> None:
    if isinstance(font, dict) and isinstance(font.get("size"), (int, float)):
        font["size"] = font_px(font["size"])


def _enlarge(spec: dict) -> None:
    """Presenter mode: the sizes a figure set for itself (text in cells and bars, annotations,
    subplot titles, colour bars) scaled like the rest."""
    for annotation in spec["layout"].get("annotations", ()):
        _enlarge_font(annotation.get("font"))
    for trace in spec["data"]:
        for attr in ("textfont", "insidetextfont", "outsidetextfont"):
            _enlarge_font(trace.get(attr))
        for bar in (trace.get("colorbar"), (trace.get("marker") or {}).get("colorbar")):
            if isinstance(bar, dict):
                _enlarge_font(bar.get("tickfont"))
                _enlarge_font((bar.get("title") or {}).get("font"))


def style(fig, height: int | None = None, title_width: int = TITLE_WIDTH) -> dict:
    """The figure's JSON (``fig.to_dict()`` of a course.figures.chart Figure, or of plotly's) with the
    course look applied.

    Written on the dict rather than through plotly's update_layout / update_xaxes, which
    check every property against plotly's schema on every call: that took 13 ms a figure,
    this 3 ms (the figure itself was checked when it was built). tests/test_theme.py checks
    that plotly's validators accept the result unchanged."""
    spec = fig.to_dict()
    layout = spec["layout"]
    present = view().presenting
    dark = view().dark
    if dark:
        _darken(spec)
        layout["template"] = DARK_TEMPLATE
    if present:
        _enlarge(spec)
        title_width = title_chars(title_width)
    line_px = round(TITLE_LINE_PX * font_px(TITLE_SIZE) / TITLE_SIZE)
    _merge(layout, dict(
        font=dict(family=font_family(), size=font_px(FONT_SIZE), color=DARK_TEXT if dark else "#1f2937"),
        hoverlabel=dict(font=dict(family=font_family(), size=font_px(FONT_SIZE))),
        legend=dict(font=dict(size=font_px(FONT_SIZE - 2))),
        modebar=dict(orientation="v"),   # at the right edge, off the (left-aligned) title
    ))
    legend = layout["legend"]
    if (legend.get("orientation") == "h" and legend.get("y") is not None and legend["y"] < 0
            and legend.get("yanchor") in (None, "auto")):
        # A legend under the plot hangs from its y: anchored by its bottom (plotly's "auto" for
        # a low y), a legend that wraps to more rows (Chinese, presenter type) grows up into the
        # x-axis title.
        legend["yanchor"] = "top"
    title = (layout.get("title") or {}).get("text")
    extra_lines = 0
    if title:
        wrapped = wrap_title(title, title_width)
        extra_lines = wrapped.count("<br>") - title.count("<br>")
        layout["title"]["text"] = wrapped
        font = _part(layout["title"], "font")
        if font.get("size") is None:
            font["size"] = font_px(TITLE_SIZE)
        elif present:
            font["size"] = font_px(font["size"])
    margin = layout.get("margin") or {}
    if margin.get("t") is None:
        lines = (title and layout["title"]["text"] or "").count("<br>") + 1
        _merge(layout, dict(margin=dict(l=10, r=10, t=40 + line_px * lines if title else 20, b=10)))
    elif extra_lines:
        margin["t"] += line_px * extra_lines
    axes = sorted({key for key in layout if _AXIS.match(key)} | {"xaxis", "yaxis"})
    for name in axes:
        _merge(_part(layout, name), dict(automargin=True, title=dict(font=dict(size=font_px(FONT_SIZE))),
                                         tickfont=dict(size=font_px(FONT_SIZE - 2))))
    if present:
        tick = dict(tickfont=dict(size=font_px(FONT_SIZE - 2)))
        for name in {key for key in layout if _POLAR.match(key)} | {"polar"}:
            _merge(_part(layout, name), dict(angularaxis=tick, radialaxis=tick))
        for name in axes:   # a log axis labels 2 and 5 of each decade at 3/4 of the tick size: decades only
            if layout[name].get("type") == "log" and layout[name].get("dtick") is None:
                layout[name]["dtick"] = 1
    if height is not None:
        layout["height"] = height
    for name in axes:
        if name.startswith("y") and layout.get("height"):
            _wrap_vertical_title(layout[name], layout["height"])
    return spec


Y_TITLE_ROOM = 0.6     # of a chart's height (of its subplot's share), about what a y-axis title may run along


def _wrap_vertical_title(axis: dict, height: int) -> None:
    """A y-axis title runs up the side of the plot, and plotly never wraps it: one longer than
    the plot is tall is cut at the chart's top and bottom (seen on the residual page's running
    sum in presenter type, whose chart is kept short to fit the first screen). Such a title is
    broken into two lines."""
    title = axis.get("title")
    text = title.get("text") if isinstance(title, dict) else None
    if not isinstance(text, str) or not text or "<" in text:
        return
    low, high = axis.get("domain") or (0, 1)
    size = (title.get("font") or {}).get("size") or font_px(FONT_SIZE)
    if width_units(text) * size / 2 > height * (high - low) * Y_TITLE_ROOM:
        title["text"] = wrap_title(text, (width_units(text) + 1) // 2 + 1)
