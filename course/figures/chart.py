"""Plotly figures as plain JSON: the part of plotly's ``graph_objects`` API the course draws with.

The figure modules build charts with ``from course.figures import chart as go`` and ``make_subplots`` from
here, written exactly as with plotly (``go.Figure``, ``go.Heatmap(...)``, ``fig.add_trace(...,
row, col)``, ``fig.update_layout(title=...)``, ``fig.update_xaxes(...)``, ``fig.add_vline(...)``).
What they get is the figure's JSON in plain dicts and lists, the same JSON plotly's objects give
(``fig.to_dict()``), without plotly's object tree: plotly builds one object per property and
checks every value against its schema, which was most of a chart's cost on the server
(make_subplots alone 7-12 ms, a two-heatmap figure 14 ms to build; here well under 1 ms).
tests/test_chart.py draws every chart of every page both ways (``use_plotly(True)`` builds
with plotly's own objects) and compares the JSON.

What plotly does to values on the way in is done here too: ``marker_color=`` means
``marker=dict(color=...)`` (its "magic underscores"), a string ``title`` is ``title.text``, a
named colour scale ("Viridis") is written out as plotly writes it, a None drops the property.
make_subplots asks plotly itself once per set of arguments (its axes, domains and subplot
titles) and keeps the answer.
"""

from __future__ import annotations

import copy
import functools
import json
import threading
from collections import OrderedDict

_reference = False      # use_plotly(True): build with plotly's own objects (tests)


def use_plotly(on: bool) -> None:
    """Build figures with plotly's own graph objects (True), or as JSON (False, the default),
    in the whole process. tests/test_chart.py draws every page both ways and compares them."""
    global _reference
    _reference = bool(on)


def _plotly() -> bool:
    return _reference


# --- values --------------------------------------------------------------------------------


@functools.cache
def _colorscale(name: str) -> list:
    """A named colour scale as plotly writes it in a figure's JSON."""
    import plotly.graph_objects as pgo
    return pgo.Heatmap(colorscale=name).to_plotly_json()["colorscale"]


class _Whole(dict):
    """A value that replaces what was there, as plotly's update does with a string title."""


def _value(key: str, value):
    """What plotly stores for ``key`` = ``value`` (a dict value is expanded key by key)."""
    if isinstance(value, dict):
        return _expand(value)
    if key == "title" and isinstance(value, str):
        return _Whole(text=value)
    if key == "colorscale" and isinstance(value, str):
        return _colorscale(value)
    if isinstance(value, tuple):
        return [_value("", v) if isinstance(v, dict) else v for v in value]
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return [_value("", v) for v in value]
    if hasattr(value, "detach"):          # a torch tensor: plotly reads it as a numpy array
        return value.detach().cpu().numpy()
    return value


# plotly's properties whose own names hold an underscore (every other underscore is a nesting)
_UNDERSCORED = {name: [name] for name in ("paper_bgcolor", "plot_bgcolor", "error_x", "error_y", "error_z",
                                          "copy_ystyle", "copy_zstyle")}


def _expand(props: dict) -> dict:
    """Keyword arguments or a dict as plotly's JSON: magic underscores (``marker_line_width``)
    become nested dicts, None values are dropped, nested dicts merge."""
    out: dict = {}
    for key, value in props.items():
        if value is None:
            continue
        path = _UNDERSCORED.get(key) or key.split("_")
        node = out
        for part in path[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        leaf = path[-1]
        value = _value(leaf, value)
        if isinstance(value, dict) and not isinstance(value, _Whole) and isinstance(node.get(leaf), dict):
            _merge(node[leaf], value)
        else:
            node[leaf] = value
    return out


def _merge(target: dict, patch: dict) -> None:
    """plotly's update: nested dicts merge key by key, anything else replaces."""
    for key, value in patch.items():
        if isinstance(value, dict) and not isinstance(value, _Whole) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = dict(value) if isinstance(value, _Whole) else value


# plotly's arrays of objects: an empty one is left out of the figure's JSON
_OBJECT_ARRAYS = frozenset({"annotations", "shapes", "images", "sliders", "updatemenus", "selections"})


def _copy(value):
    """A copy of the figure's dicts and of lists of dicts; data arrays (lists of numbers or of
    lists) are shared, since nothing writes into them."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items() if not (k in _OBJECT_ARRAYS and v == [])}
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return [_copy(v) for v in value]
    return value


# --- traces --------------------------------------------------------------------------------


def _trace(kind: str, arg: dict | None, kwargs: dict) -> dict:
    if _plotly():
        import plotly.graph_objects as pgo
        return getattr(pgo, _TRACE_CLASSES[kind])(arg, **kwargs)
    props = _expand(dict(arg or {}, **kwargs))
    props["type"] = kind
    return props


_TRACE_CLASSES = {"bar": "Bar", "heatmap": "Heatmap", "scatter": "Scatter", "scatter3d": "Scatter3d",
                  "scatterpolar": "Scatterpolar", "waterfall": "Waterfall"}


def Bar(arg=None, **kwargs):            # noqa: N802 - plotly's names
    return _trace("bar", arg, kwargs)


def Heatmap(arg=None, **kwargs):        # noqa: N802
    return _trace("heatmap", arg, kwargs)


def Scatter(arg=None, **kwargs):        # noqa: N802
    return _trace("scatter", arg, kwargs)


def Scatter3d(arg=None, **kwargs):      # noqa: N802
    return _trace("scatter3d", arg, kwargs)


def Scatterpolar(arg=None, **kwargs):   # noqa: N802
    return _trace("scatterpolar", arg, kwargs)


def Waterfall(arg=None, **kwargs):      # noqa: N802
    return _trace("waterfall", arg, kwargs)


# --- figures -------------------------------------------------------------------------------


@functools.cache
def _template() -> dict:
    """The default template's JSON, which plotly writes into every figure's layout."""
    import plotly.io as pio
    return pio.templates[pio.templates.default].to_plotly_json()


class Figure:
    """A figure as JSON, built with the plotly calls the course uses; ``to_dict()`` gives what
    ``plotly.graph_objects.Figure.to_dict()`` gives for the same calls."""

    def __new__(cls, *args, **kwargs):
        if _plotly() and cls is Figure:
            import plotly.graph_objects as pgo
            return pgo.Figure(*args, **kwargs)
        return super().__new__(cls)

    def __init__(self, data=None, layout=None):
        if isinstance(data, dict):
            data = [data]
        self.data: list[dict] = [dict(trace) for trace in (data or [])]
        self.layout: dict = _expand(layout) if layout else {}
        # make_subplots: for each row and column, the cell's (layout keys, trace axis refs),
        # the second one a secondary y axis (as plotly's _grid_ref)
        self._grid: list[list[list[tuple[tuple[str, str], dict]]]] | None = None

    def to_dict(self) -> dict:
        layout = _copy(self.layout)
        layout["template"] = _template()
        return {"data": [_copy(trace) for trace in self.data], "layout": layout}

    # traces

    def _refs(self, row: int, col: int) -> list:
        if self._grid is None:
            raise ValueError("this figure was not made with make_subplots: give no row or col")
        refs = self._grid[row - 1][col - 1]
        if not refs:
            raise ValueError(f"no subplot at ({row}, {col})")
        return refs

    def add_trace(self, trace: dict, row: int | None = None, col: int | None = None,
                  secondary_y: bool | None = None) -> Figure:
        trace = dict(trace)
        if row is None and secondary_y is not None:      # plotly: the first subplot
            row = col = 1
        if row is not None:
            refs = self._refs(row, col)
            trace.update(refs[1 if secondary_y and len(refs) > 1 else 0][1])
        self.data.append(trace)
        return self

    def _add(self, kind: str, kwargs: dict) -> Figure:
        row, col, secondary_y = (kwargs.pop(k, None) for k in ("row", "col", "secondary_y"))
        return self.add_trace(_trace(kind, None, kwargs), row=row, col=col, secondary_y=secondary_y)

    def add_bar(self, **kwargs) -> Figure:
        return self._add("bar", kwargs)

    def add_heatmap(self, **kwargs) -> Figure:
        return self._add("heatmap", kwargs)

    def add_scatter(self, **kwargs) -> Figure:
        return self._add("scatter", kwargs)

    def add_scatter3d(self, **kwargs) -> Figure:
        return self._add("scatter3d", kwargs)

    def add_scatterpolar(self, **kwargs) -> Figure:
        return self._add("scatterpolar", kwargs)

    # layout

    def update_layout(self, dict1: dict | None = None, **kwargs) -> Figure:
        _merge(self.layout, _expand(dict(dict1 or {}, **kwargs)))
        return self

    def _axes(self, prefix: str, row, col, secondary_y) -> list[str]:
        """plotly's _select_layout_subplots_by_prefix: the layout keys of the axes selected."""
        if row is not None or col is not None or secondary_y is not None:
            where = {}
            for r, cells in enumerate(self._grid or []):
                for c, refs in enumerate(cells):
                    for i, (keys, _) in enumerate(refs):
                        for key in keys:
                            if key.startswith(prefix):
                                where[key] = (r + 1, c + 1, i == 1)
        else:
            where = None
        keys = {prefix} | {k for k in self.layout if k.startswith(prefix) and k[len(prefix):].isdigit()}
        chosen = []
        for key in sorted(keys, key=lambda k: int(k[len(prefix):] or 1)):
            r, c, s = where.get(key, (None, None, None)) if where is not None else (None, None, None)
            if (row is None or r == row) and (col is None or c == col) and (secondary_y is None or s == secondary_y):
                chosen.append(key)
        return chosen

    def _update_axes(self, prefix: str, patch, row, col, secondary_y, kwargs) -> Figure:
        props = _expand(dict(patch or {}, **kwargs))
        for key in self._axes(prefix, row, col, secondary_y):
            node = self.layout.setdefault(key, {})
            _merge(node, copy.deepcopy(props))
        return self

    def update_xaxes(self, patch: dict | None = None, row=None, col=None, **kwargs) -> Figure:
        return self._update_axes("xaxis", patch, row, col, None, kwargs)

    def update_yaxes(self, patch: dict | None = None, row=None, col=None, secondary_y=None, **kwargs) -> Figure:
        return self._update_axes("yaxis", patch, row, col, secondary_y, kwargs)

    def add_annotation(self, arg: dict | None = None, **kwargs) -> Figure:
        return self._add_like("annotations", arg, kwargs)

    def add_shape(self, arg: dict | None = None, **kwargs) -> Figure:
        return self._add_like("shapes", arg, kwargs)

    def _add_like(self, plural: str, arg, kwargs) -> Figure:
        row, col = kwargs.pop("row", None), kwargs.pop("col", None)
        kwargs.pop("exclude_empty_subplots", None)
        if row is not None or col is not None:
            raise NotImplementedError("course.figures.chart: annotations and shapes on a subplot")
        self.layout.setdefault(plural, []).append(_expand(dict(arg or {}, **kwargs)))
        return self

    def update_annotations(self, patch: dict | None = None, **kwargs) -> Figure:
        props = _expand(dict(patch or {}, **kwargs))
        for note in self.layout.get("annotations", []):
            _merge(note, copy.deepcopy(props))
        return self

    def _spanning(self, shape_type: str, shape: dict, annotation, kwargs: dict) -> Figure:
        """plotly's add_vline / add_hline / add_vrect on a figure without subplots: the shape on
        the data axis one way and the whole plot ("domain") the other, its annotation placed by
        plotly's own rule."""
        from plotly import shapeannotation
        if self._grid is not None:
            raise NotImplementedError("course.figures.chart: spanning lines on subplots")
        kwargs.pop("row", None), kwargs.pop("col", None), kwargs.pop("exclude_empty_subplots", None)
        shape_kwargs, note_kwargs = shapeannotation.split_dict_by_key_prefix(kwargs, "annotation_")
        note = shapeannotation.axis_spanning_shape_annotation(annotation, shape_type, shape, note_kwargs)
        domain = "yref" if shape_type in ("vline", "vrect") else "xref"
        new = _expand(dict(shape, **shape_kwargs))
        new.setdefault("xref", "x")
        new.setdefault("yref", "y")
        new[domain] += " domain"
        self.layout.setdefault("shapes", []).append(new)
        if note is not None:
            note = _expand(dict(note) if isinstance(note, dict) else note.to_plotly_json())
            note["yref"] = shape_kwargs.get("yref", note.get("yref", "y"))
            note.setdefault("xref", "x")
            note[domain] += " domain"
            self.layout.setdefault("annotations", []).append(note)
        return self

    def add_vline(self, x, annotation=None, **kwargs) -> Figure:
        return self._spanning("vline", dict(type="line", x0=x, x1=x, y0=0, y1=1), annotation, kwargs)

    def add_hline(self, y, annotation=None, **kwargs) -> Figure:
        return self._spanning("hline", dict(type="line", x0=0, x1=1, y0=y, y1=y), annotation, kwargs)

    def add_vrect(self, x0, x1, annotation=None, **kwargs) -> Figure:
        return self._spanning("vrect", dict(type="rect", x0=x0, x1=x1, y0=0, y1=1), annotation, kwargs)


# --- subplots ------------------------------------------------------------------------------

_SUBPLOTS: OrderedDict[str, tuple[dict, list]] = OrderedDict()
_SUBPLOTS_KEPT = 256
_subplots_lock = threading.Lock()


def _frozen(kwargs: dict) -> str:
    return json.dumps(kwargs, sort_keys=True, default=repr, ensure_ascii=False)


def _subplot_layout(kwargs: dict) -> tuple[dict, list]:
    """The layout (without its template) and the grid plotly's make_subplots gives for these
    arguments, asked of plotly once and kept (it takes 7-12 ms a call)."""
    key = _frozen(kwargs)
    with _subplots_lock:
        hit = _SUBPLOTS.get(key)
        if hit is not None:
            _SUBPLOTS.move_to_end(key)
            return hit
    from plotly.subplots import make_subplots as plotly_subplots
    fig = plotly_subplots(**kwargs)
    layout = fig.to_dict()["layout"]
    layout.pop("template", None)
    grid = [[[(tuple(ref.layout_keys), dict(ref.trace_kwargs)) for ref in (refs or ())] for refs in row]
            for row in fig._grid_ref]
    with _subplots_lock:
        _SUBPLOTS[key] = (layout, grid)
        while len(_SUBPLOTS) > _SUBPLOTS_KEPT:
            _SUBPLOTS.popitem(last=False)
    return layout, grid


def make_subplots(**kwargs) -> Figure:
    """plotly.subplots.make_subplots, as a JSON Figure."""
    if _plotly():
        from plotly.subplots import make_subplots as plotly_subplots
        return plotly_subplots(**kwargs)
    layout, grid = _subplot_layout(kwargs)
    fig = Figure()
    fig.layout = copy.deepcopy(layout)
    fig._grid = grid
    return fig
