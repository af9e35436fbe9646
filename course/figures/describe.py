"""A chart in words and as a table, read from the figure's own JSON: what a screen reader says
for a chart, and what its "Data as a table" expander holds.

Pure (no Streamlit): ``describe(spec, lang)`` returns the chart's description as catalog keys
with their fields, ``[(key, fields)]`` (the ``chart.*`` group of assets/i18n/<lang>.json), from
the numbers the chart draws on this run: a bar chart's largest bars with their labels, a line's
start, end, highest and lowest points and its trend, a heatmap's shape and largest cells.
``tables(spec)`` returns the same numbers as tables, a big one cut to the rows and columns that
matter (``Table.rows``) with every row kept for the CSV (``Table.all_rows``, ``csv_text``).

Labels come out as plain text: a figure's labels are plotly text (HTML-escaped user and model
text, with <br> and <b> markup), so tags are dropped and entities decoded here; whoever shows
them escapes them again for where they go (Markdown, CSV)."""

from __future__ import annotations

import base64
import csv
import html
import io
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from course.i18n import big_number, join_list, with_paren

TOP = 3                 # the largest bars or cells a description names
MAX_SERIES = 4          # traces described one by one; the rest are counted
MAX_ROWS = 20           # rows a table shows; the CSV has them all
MAX_COLUMNS = 12        # value columns a heatmap's table shows
MAX_POINT_LABELS = 8    # labelled points a scatter's description names
FLAT = 0.05             # a line whose end is this share of its range from its start "ends where it started"

_TAG = re.compile(r"<[^<>]*>")
_BREAK = re.compile(r"<br\s*/?>", re.I)
_NUMBER = re.compile(r"[-−+]?[\d.,]+(e[-+]?\d+)?%?( (million|billion|trillion|thousand|萬|億|兆|万|亿|万亿))?")
_CSV_FORMULA = ("=", "+", "-", "@", "\t", "\r")


# --- reading the figure's JSON ----------------------------------------------------------------


def plain(text) -> str:
    """Plotly text as plain text: <br> a space, other tags dropped, entities decoded."""
    if text is None:
        return ""
    text = _BREAK.sub(" ", str(text))
    return " ".join(html.unescape(_TAG.sub("", text)).split())


def values(data) -> list:
    """A data array of the JSON (a list, a numpy array, or plotly's base64 typed array) as a
    list (of lists, for a 2-D one)."""
    if data is None:
        return []
    if isinstance(data, dict) and "bdata" in data:
        out = np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"])
        shape = data.get("shape")
        if shape:
            out = out.reshape([int(n) for n in str(shape).split(",")])
        return out.tolist()
    if hasattr(data, "tolist"):
        return data.tolist()
    return [values(v) if isinstance(v, (dict, np.ndarray)) or hasattr(v, "tolist") else v for v in data]


def grid(data) -> np.ndarray | None:
    """A heatmap's z as a 2-D float array, gaps (None) as NaN; None when it is not 2-D."""
    if data is None:
        return None
    if isinstance(data, dict) and "bdata" in data:
        data = values(data)
    try:
        z = np.asarray(data, dtype=float)
    except (TypeError, ValueError):          # ragged rows: padded with gaps
        rows = [[number_or_none(v) for v in row] for row in values(data)]
        width = max(map(len, rows), default=0)
        z = np.array([[np.nan if v is None else v for v in row] + [np.nan] * (width - len(row)) for row in rows])
    return z if z.ndim == 2 and z.size else None


def number_or_none(v) -> float | None:
    """A finite number, or None for a gap (None, NaN, text)."""
    if isinstance(v, bool) or v is None:
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def title(spec: dict) -> str:
    """The chart's title as plain text ("" when it has none)."""
    t = (spec.get("layout") or {}).get("title")
    return plain(t.get("text") if isinstance(t, dict) else t)


def _axis(spec: dict, trace: dict, letter: str) -> dict:
    ref = trace.get(f"{letter}axis") or letter
    return (spec.get("layout") or {}).get(f"{letter}axis{ref[1:]}") or {}


def _axis_title(axis: dict) -> str:
    t = axis.get("title")
    return plain(t.get("text") if isinstance(t, dict) else t)


def _ticks(axis: dict) -> dict:
    """An axis's tick labels by value, when it names its ticks (tickvals/ticktext)."""
    vals, texts = values(axis.get("tickvals")), values(axis.get("ticktext"))
    return {v: plain(t) for v, t in zip(vals, texts)} if vals and texts and len(vals) == len(texts) else {}


def _label(v, ticks: dict, lang: str) -> str:
    if isinstance(v, str):
        return plain(v)
    if v in ticks:
        return ticks[v]
    x = number_or_none(v)
    return fmt(x, lang) if x is not None else plain(v)


def _percent(spec: dict, trace: dict, letter: str) -> bool:
    """Whether the chart shows these values as percentages (its axis, colour bar or hover says so)."""
    if letter in "xy" and "%" in str(_axis(spec, trace, letter).get("tickformat") or ""):
        return True
    bar = trace.get("colorbar") or (trace.get("marker") or {}).get("colorbar") or {}
    if letter == "z" and "%" in str(bar.get("tickformat") or ""):
        return True
    return re.search(r"%\{" + letter + r":[^}]*%\}", str(trace.get("hovertemplate") or "")) is not None


def _suffix(spec: dict, trace: dict, letter: str) -> str:
    """"%" when the values are already percentages (the axis's tick suffix, or the hover
    writes "%{x:.1f}%"), else ""."""
    if letter in "xy" and str(_axis(spec, trace, letter).get("ticksuffix") or "").strip() == "%":
        return "%"
    return "%" if re.search(r"%\{" + letter + r"(:[^}]*)?\}%", str(trace.get("hovertemplate") or "")) else ""


def _subplot_titles(spec: dict) -> dict[tuple[str, str], str]:
    """make_subplots' titles by the (x axis, y axis) of the subplot each sits above."""
    layout = spec.get("layout") or {}
    notes = [a for a in layout.get("annotations") or () if a.get("showarrow") is False
             and a.get("xref") == "paper" and a.get("yref") == "paper" and a.get("yanchor") == "bottom"]
    out = {}
    for trace in spec.get("data") or ():
        xref, yref = trace.get("xaxis") or "x", trace.get("yaxis") or "y"
        xd = (layout.get(f"xaxis{xref[1:]}") or {}).get("domain")
        yd = (layout.get(f"yaxis{yref[1:]}") or {}).get("domain")
        if not xd or not yd:
            continue
        for a in notes:
            if abs(a.get("x", -9) - (xd[0] + xd[1]) / 2) < 0.02 and abs(a.get("y", -9) - yd[1]) < 0.02:
                out[(xref, yref)] = plain(a.get("text"))
    return out


# --- numbers in words -------------------------------------------------------------------------


def fmt(x: float, lang: str = "en", percent: bool = False) -> str:
    """A chart's number as a sentence writes it: 3 significant digits, thousands separated,
    millions and more in the language's words (「1.35 億」), percentages with "%"."""
    if percent:
        p = x * 100
        if p != 0 and abs(p) < 0.1:
            return _no_minus_zero(f"{p:.1g}") + "%"
        return _no_minus_zero(f"{p:.1f}" if abs(p) < 99.95 else f"{p:.0f}") + "%"
    if abs(x) >= 1e6:
        return big_number(x, 3, lang)
    if float(x).is_integer():
        return f"{int(x):,}"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return _no_minus_zero(f"{x:.1f}")
    if x != 0 and abs(x) < 0.001:
        return f"{x:.2e}"
    return _no_minus_zero(f"{x:.3g}")


def _no_minus_zero(text: str) -> str:
    return text[1:] if text.startswith("-") and float(text) == 0 else text


# --- one trace as (label, value) pairs -------------------------------------------------------


@dataclass
class Series:
    """One drawn trace: its kind, its name, and its numbers by label."""

    kind: str                     # "bar", "line", "points", "heatmap", "polar"
    name: str
    labels: list[str]             # category / x labels (bar, line, points); heatmap: column labels
    numbers: list                 # values (bar, line); points: y values; heatmap: a 2-D array (NaN: a gap)
    label_title: str = ""         # the label axis's title
    value_title: str = ""         # the value axis's title
    percent: bool = False
    suffix: str = ""              # "%" when the numbers are percentages already
    rows: list[str] = field(default_factory=list)     # heatmap: row labels
    xs: list = field(default_factory=list)            # points: x values; polar: angles
    texts: list[str] = field(default_factory=list)    # points: their text labels


def _shown(trace: dict) -> bool:
    """Drawn and not a decoration (a connector with no legend entry and no hover)."""
    if trace.get("visible", True) in (False, "legendonly"):
        return False
    return not (trace.get("hoverinfo") == "skip" and trace.get("showlegend") is False and not trace.get("text"))


def series(spec: dict, lang: str = "en") -> list[Series]:
    """The figure's traces as Series, in drawing order (hidden ones left out)."""
    out = []
    subtitles = _subplot_titles(spec)
    for trace in spec.get("data") or ():
        if not _shown(trace):
            continue
        kind = trace.get("type") or "scatter"
        xref, yref = trace.get("xaxis") or "x", trace.get("yaxis") or "y"
        name = plain(trace.get("name")) or subtitles.get((xref, yref), "")
        xaxis, yaxis = _axis(spec, trace, "x"), _axis(spec, trace, "y")
        if kind == "heatmap":
            z = grid(trace.get("z"))
            if z is None:
                continue
            xt, yt = _ticks(xaxis), _ticks(yaxis)
            cols = [_label(v, xt, lang) for v in values(trace.get("x"))] or [str(i) for i in range(z.shape[1])]
            rows = [_label(v, yt, lang) for v in values(trace.get("y"))] or [str(i) for i in range(z.shape[0])]
            out.append(Series("heatmap", name, cols[: z.shape[1]], z, _axis_title(xaxis), _axis_title(yaxis),
                              _percent(spec, trace, "z"), _suffix(spec, trace, "z"), rows=rows[: z.shape[0]]))
        elif kind in ("bar", "waterfall"):
            horizontal = trace.get("orientation") == "h"
            cat, val = ("y", "x") if horizontal else ("x", "y")
            cat_axis, val_axis = (yaxis, xaxis) if horizontal else (xaxis, yaxis)
            nums = values(trace.get(val))
            if not nums:
                continue
            cats = values(trace.get(cat)) or list(range(len(nums)))
            ticks = _ticks(cat_axis)
            out.append(Series("bar", name, [_label(v, ticks, lang) for v in cats][: len(nums)], nums,
                              _axis_title(cat_axis), _axis_title(val_axis), _percent(spec, trace, val),
                              _suffix(spec, trace, val)))
        elif kind == "scatterpolar":
            r, theta = values(trace.get("r")), values(trace.get("theta"))
            if theta:
                out.append(Series("polar", name, [], r, xs=theta))
        elif kind in ("scatter", "scatter3d"):
            ys = values(trace.get("y"))
            if not ys:
                continue
            xs = values(trace.get("x")) or list(range(len(ys)))
            mode = trace.get("mode") or "lines"
            texts = values(trace.get("text")) if isinstance(trace.get("text"), (list, tuple, np.ndarray)) else []
            ticks = _ticks(xaxis)
            labels = [_label(v, ticks, lang) for v in xs][: len(ys)]
            if "lines" in mode:
                out.append(Series("line", name, labels, ys, _axis_title(xaxis), _axis_title(yaxis),
                                  _percent(spec, trace, "y"), _suffix(spec, trace, "y"), xs=xs))
            else:
                out.append(Series("points", name, labels, ys, _axis_title(xaxis), _axis_title(yaxis),
                                  _percent(spec, trace, "y"), _suffix(spec, trace, "y"), xs=xs,
                                  texts=[plain(t) for t in texts]))
    return _single_bars_joined(out)


def _single_bars_joined(found: list[Series]) -> list[Series]:
    """Bar traces of one bar each (a stacked or coloured-by-trace bar chart) as one series whose
    labels are the traces' names."""
    bars = [s for s in found if s.kind == "bar"]
    if len(bars) < 2 or any(len(s.numbers) != 1 for s in bars):
        return found
    first = bars[0]
    joined = Series("bar", "", [s.name or s.labels[0] for s in bars], [s.numbers[0] for s in bars],
                    first.label_title, first.value_title, first.percent, first.suffix)
    return [joined] + [s for s in found if s.kind != "bar"]


# --- the description ----------------------------------------------------------------------------


Sentence = tuple[str, dict]


def _fmt(s: Series, x: float, lang: str) -> str:
    return fmt(x, lang, s.percent) + s.suffix


def _pairs(s: Series) -> list[tuple[str, float]]:
    return [(label, x) for label, v in zip(s.labels, s.numbers) if (x := number_or_none(v)) is not None]


def _bar(s: Series, lang: str) -> list[Sentence]:
    pairs = _pairs(s)
    if not pairs:
        return []
    item = lambda p: with_paren(p[0], _fmt(s, p[1], lang), lang)     # noqa: E731
    if len(pairs) == 1:
        return [("chart.bar_one", dict(items=item(pairs[0])))]
    top = sorted(pairs, key=lambda p: -p[1])[:TOP]
    negative = sorted((p for p in pairs if p[1] < 0), key=lambda p: p[1])[:TOP]
    if all(p[1] < 0 for p in pairs):          # all below zero: the lowest are the ones that stand out
        return [("chart.bars_negative", dict(n=f"{len(pairs):,}", items=join_list(map(item, negative), lang)))]
    out = [("chart.bars", dict(n=f"{len(pairs):,}", items=join_list(map(item, top), lang)))]
    if negative and len(pairs) > TOP:
        out.append(("chart.bars_low", dict(items=join_list(map(item, negative), lang))))
    return out


def _line(s: Series, lang: str) -> list[Sentence]:
    pairs = _pairs(s)
    if not pairs:
        return []
    v = [p[1] for p in pairs]
    f = lambda x: _fmt(s, x, lang)                                   # noqa: E731
    if len(pairs) == 1:
        return [("chart.line_one", dict(x=pairs[0][0], value=f(v[0])))]
    hi, lo = max(range(len(v)), key=v.__getitem__), min(range(len(v)), key=v.__getitem__)
    out = [("chart.line", dict(n=f"{len(pairs):,}", x_first=pairs[0][0], x_last=pairs[-1][0],
                               first=f(v[0]), last=f(v[-1]))),
           ("chart.line_extremes", dict(high=f(v[hi]), x_high=pairs[hi][0], low=f(v[lo]), x_low=pairs[lo][0]))]
    out.append((f"chart.trend.{trend(v)}", {}))
    return out


def trend(v: Sequence[float]) -> str:
    """How a line goes from its first value to its last: "up_steady" (never down), "up",
    "down_steady", "down", or "flat" (ends within FLAT of its range from where it started)."""
    span = max(v) - min(v)
    change = v[-1] - v[0]
    if span <= 1e-6 * max(1.0, max(abs(x) for x in v)) or abs(change) <= FLAT * span:    # rounding noise: flat
        return "flat"
    steps = [b - a for a, b in zip(v, v[1:])]
    if change > 0:
        return "up_steady" if all(d >= 0 for d in steps) else "up"
    return "down_steady" if all(d <= 0 for d in steps) else "down"


def _points(s: Series, lang: str) -> list[Sentence]:
    xs = [number_or_none(x) for x in s.xs]
    ys = [number_or_none(y) for y in s.numbers]
    pts = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None]
    if not pts:
        return []
    if len(pts) == 1:
        label = next((t for t in s.texts if t), "") or s.name
        fields = dict(x=fmt(pts[0][0], lang), y=_fmt(s, pts[0][1], lang))
        return [("chart.point_named", dict(fields, label=label)) if label else ("chart.point_one", fields)]
    out = [("chart.points", dict(n=f"{len(pts):,}", x_low=fmt(min(p[0] for p in pts), lang),
                                 x_high=fmt(max(p[0] for p in pts), lang),
                                 y_low=_fmt(s, min(p[1] for p in pts), lang),
                                 y_high=_fmt(s, max(p[1] for p in pts), lang)))]
    named = [t for t in s.texts if t]
    if named:
        more = len(named) - MAX_POINT_LABELS
        out.append(("chart.points_named" if more <= 0 else "chart.points_named_more",
                    dict(items=join_list(named[:MAX_POINT_LABELS], lang), more=f"{max(more, 0):,}")))
    return out


def _polar(s: Series, lang: str) -> list[Sentence]:
    angles = [x for x in (number_or_none(t) for t in s.xs) if x is not None]
    if not angles:
        return []
    return [("chart.angle", dict(angle=fmt(round(angles[-1]) % 360, lang)))]


def _heatmap(s: Series, lang: str) -> list[Sentence]:
    z = s.numbers
    finite = np.isfinite(z)
    if not finite.any():
        return []
    signed = bool((z[finite] < 0).any())
    strength = np.where(finite, np.abs(z) if signed else z, -np.inf).ravel()
    top = [divmod(int(k), z.shape[1]) for k in np.argsort(-strength, kind="stable")[:TOP] if np.isfinite(strength[k])]
    n_rows, n_cols = z.shape

    def where(i: int, j: int) -> str:
        if n_rows == 1:
            return _at(s.labels, j)
        if n_cols == 1:
            return _at(s.rows, i)
        return f"{_at(s.rows, i)} / {_at(s.labels, j)}"

    items = [with_paren(where(i, j), _fmt(s, float(z[i, j]), lang), lang) for i, j in top]
    low, high = _fmt(s, float(z[finite].min()), lang), _fmt(s, float(z[finite].max()), lang)
    shape = (("chart.strip", dict(n=f"{max(n_rows, n_cols):,}", low=low, high=high)) if min(n_rows, n_cols) == 1
             else ("chart.grid", dict(rows=f"{n_rows:,}", cols=f"{n_cols:,}", low=low, high=high)))
    return [shape, ("chart.cells_signed" if signed else "chart.cells", dict(items=join_list(items, lang)))]


def _at(labels: Sequence[str], i: int) -> str:
    return labels[i] if i < len(labels) else str(i)


_DESCRIBE = {"bar": _bar, "line": _line, "points": _points, "polar": _polar, "heatmap": _heatmap}


def describe(spec: dict, lang: str = "en", mark: Callable[[str], str] | None = None) -> list[Sentence]:
    """What the chart shows on this run, as [(catalog key, fields)]: for each of its first
    MAX_SERIES traces (named by its legend entry or subplot title when there are several),
    the sentences of its kind; then how many more there are. A figure with no numbers yet
    says so. ``mark`` wraps every label and name (the chart's text, user and model text
    among it) where it goes into a field, e.g. to show it as code in Markdown."""
    found = series(spec, lang)
    if mark is not None:
        def text(x: str) -> str:      # a number written as a label (a position, a layer) stays as it is
            return x if not x or _NUMBER.fullmatch(x) else mark(x)
        for s in found:
            s.labels, s.rows = [text(x) for x in s.labels], [text(x) for x in s.rows]
            s.texts, s.name = [text(x) for x in s.texts], text(s.name)
    found = [(s, sentences) for s in found if (sentences := _DESCRIBE[s.kind](s, lang))]
    if not found:
        return [("chart.empty", {})]
    out: list[Sentence] = []
    several = len(found) > 1
    for s, sentences in found[:MAX_SERIES]:
        if several and s.name:
            out.append(("chart.series", dict(name=s.name)))
        out.extend(sentences)
    if len(found) > MAX_SERIES:
        out.append(("chart.more_series", dict(n=f"{len(found) - MAX_SERIES:,}")))
    return out


# --- the tables ---------------------------------------------------------------------------------


class Table:
    """A chart's numbers as a table: ``columns`` and the rows shown (``rows``: all of them, or a
    cut of a big one, which ``cut`` says in words); ``all_rows`` and ``csv_columns()`` are every
    row and column, for the CSV (a heatmap's are made only when asked for)."""

    def __init__(self, name: str, columns: list[str], all_rows, rows: list[list], cut: Sentence | None = None,
                 all_columns: list[str] | None = None):
        self.name, self.columns, self.rows, self.cut, self.all_columns = name, columns, rows, cut, all_columns
        self._all = all_rows            # a list of rows, or a function that makes them

    @property
    def all_rows(self) -> list[list]:
        if callable(self._all):
            self._all = self._all()
        return self._all

    def csv_columns(self) -> list[str]:
        return self.all_columns or self.columns


def _unique(names: Sequence[str]) -> list[str]:
    """Column names made distinct (a prompt repeats tokens): the second "the" is "the (2)"."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        n = n or "-"
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n} ({seen[n]})")
    return out


def _num(v):
    x = number_or_none(v)
    return x if x is not None else None


def _cells_of(row) -> list:
    return [None if not math.isfinite(v) else v for v in row.tolist()]


def _heat_table(s: Series, words: dict) -> Table:
    z = s.numbers
    n_rows, n_cols = z.shape
    if n_rows == 1:        # a strip (one vector): a row per number, the largest kept
        long = [[_at(s.labels, j), v] for j, v in enumerate(_cells_of(z[0]))]
        return _capped(Table(s.name, [s.label_title or words["label"], s.rows[0] if s.rows and s.rows[0]
                                      else words["value"]], long, long), strength_col=1, line=False)
    columns = [s.value_title or words["row"], *_unique([_at(s.labels, j) for j in range(n_cols)])]
    full = lambda: [[_at(s.rows, i), *_cells_of(z[i])] for i in range(n_rows)]      # noqa: E731
    strength = np.where(np.isfinite(z), np.abs(z), -1.0)
    keep_r = np.sort(np.argsort(-strength.max(axis=1), kind="stable")[:MAX_ROWS])
    keep_c = np.sort(np.argsort(-strength[keep_r].max(axis=0), kind="stable")[:MAX_COLUMNS])
    if len(keep_r) == n_rows and len(keep_c) == n_cols:
        return Table(s.name, columns, full, full())
    shown = [[_at(s.rows, int(i)), *_cells_of(z[i, keep_c])] for i in keep_r]
    key = ("chart.cut_both" if len(keep_r) < n_rows and len(keep_c) < n_cols else
           "chart.cut_rows" if len(keep_r) < n_rows else "chart.cut_cols")
    cut = (key, dict(rows=f"{len(keep_r):,}", all_rows=f"{n_rows:,}", cols=f"{len(keep_c):,}", all_cols=f"{n_cols:,}"))
    return Table(s.name, [columns[0], *[columns[1 + int(j)] for j in keep_c]], full, shown, cut, columns)


def _series_table(group: list[Series], words: dict) -> Table:
    first = group[0]
    value_name = lambda s, i: s.name or s.value_title or f"{words['value']} {i + 1}"   # noqa: E731
    if first.kind == "polar":
        cols = [words["series"], words["angle"], words["length"]]
        rows = [[s.name, _num(s.xs[-1]), _num(s.numbers[-1] if s.numbers else None)] for s in group]
        return Table("", cols, rows, rows)
    if first.kind == "points":
        cols = ([words["series"]] if len(group) > 1 else []) + (
            [words["label"]] if any(s.texts for s in group) else []) + [
            first.label_title or "x", first.value_title or "y"]
        rows = []
        for s in group:
            for i, (x, y) in enumerate(zip(s.xs, s.numbers)):
                row = ([s.name] if len(group) > 1 else []) + ([_at(s.texts, i) if s.texts else ""]
                                                              if words["label"] in cols else []) + [_num(x), _num(y)]
                rows.append(row)
        return _capped(Table("", cols, rows, rows), strength_col=len(cols) - 1, line=False)
    label_title = first.label_title or words["label"]
    if all(s.labels == first.labels for s in group):          # one row per label, a column per trace
        names = _unique([value_name(s, i) for i, s in enumerate(group)]) if len(group) > 1 else [
            first.value_title or first.name or words["value"]]
        rows = [[label, *[_num(s.numbers[i]) if i < len(s.numbers) else None for s in group]]
                for i, label in enumerate(first.labels)]
        return _capped(Table("", [label_title, *names], rows, rows), strength_col=None,
                       line=first.kind == "line")
    cols = [words["series"], label_title, first.value_title or words["value"]]
    rows = [[value_name(s, i), label, _num(v)] for i, s in enumerate(group) for label, v in zip(s.labels, s.numbers)]
    return _capped(Table("", cols, rows, rows), strength_col=2, line=first.kind == "line")


def _capped(t: Table, strength_col: int | None, line: bool) -> Table:
    """A table of more than MAX_ROWS rows cut: a line keeps evenly spaced rows with its first,
    last, highest and lowest; bars and points keep their largest values, in order."""
    n = len(t.all_rows)
    if n <= MAX_ROWS:
        return t
    cols = [strength_col] if strength_col is not None else list(range(1, len(t.columns)))
    def strength(row):
        return max((abs(row[c]) for c in cols if isinstance(row[c], float)), default=-1.0)
    if line:
        keep = {round(k * (n - 1) / (MAX_ROWS - 3)) for k in range(MAX_ROWS - 2)}
        for c in cols:
            column = [(r[c], i) for i, r in enumerate(t.all_rows) if isinstance(r[c], float)]
            if column:
                keep |= {max(column)[1], min(column)[1]}
    else:
        keep = set(sorted(range(n), key=lambda i: -strength(t.all_rows[i]))[:MAX_ROWS])
    rows = [t.all_rows[i] for i in sorted(keep)]
    key = "chart.cut_line" if line else "chart.cut_rows"
    return Table(t.name, t.columns, t.all_rows, rows, (key, dict(rows=f"{len(rows):,}", all_rows=f"{n:,}")))


def tables(spec: dict, words: dict, lang: str = "en") -> list[Table]:
    """The chart's numbers as tables: one per heatmap (cut to the MAX_ROWS rows and MAX_COLUMNS
    columns holding its largest values), and one for its other traces of each kind (a column per
    trace when they share their labels). ``words``: the column names the figure does not give
    (catalog words: row, label, value, series, angle, length)."""
    found = series(spec, lang)
    out = [_heat_table(s, words) for s in found if s.kind == "heatmap"]
    for kind in ("bar", "line", "points", "polar"):
        group = [s for s in found if s.kind == kind and (s.numbers or s.xs)]
        if group:
            out.append(_series_table(group, words))
    return out


def _csv_cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    text = str(v)
    return "'" + text if text.startswith(_CSV_FORMULA) else text    # never read as a spreadsheet formula


def csv_text(table: Table) -> str:
    """Every row of the table as CSV (text cells that a spreadsheet would read as a formula are
    prefixed with an apostrophe)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([_csv_cell(c) for c in table.csv_columns()])
    writer.writerows([[_csv_cell(v) for v in row] for row in table.all_rows])
    return buf.getvalue()
