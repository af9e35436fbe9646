"""Figures of the feed-forward lesson (app_pages/ffn.py). Each builder takes numbers already
computed by lesson_model and translated strings (a ``tr(key, **fields)`` callable for the
page's catalog); it draws, it does not compute model results."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from course.figures import chart as go
from course.figures import style
from course.figures.chart import make_subplots
from course.figures.diagrams import diagram_font
from course.text import html_escape
from lesson_model.analysis import neurons as N

T = Callable[..., str]
BLUE, ORANGE, GREEN, VERMILION, SKY, PURPLE = style.OKABE_ITO[:6]
GREY = "#9ca3af"


def diagram_px(width: int) -> int:
    """The pixel width to draw the MLP diagram at: ``width`` on a laptop, wider in presenter mode
    by the ratio of style.font_px(16) to 16, so its labels (about 17 px at 340) reach 21 px."""
    return int(round(width * style.font_px(16) / 16))


def mlp_diagram(tr: T, d_model: int, d_ff: int, font: str, act: str, post_norm: bool = False,
                snake: bool = False) -> str:
    """The gated MLP of one block as Graphviz DOT, sized with the model's numbers, top to
    bottom; ``act`` names the gate's activation (SiLU, GELU), and ``post_norm`` adds the norm
    a sandwich-norm model (Gemma) applies to the MLP's output before the add. Streamlit draws diagram text at 9.6 SVG units whatever the DOT says and stretches
    the SVG to its column, so the boxes are sized for that text and the column sets the
    size (see course.figures.residual.DIAGRAM_FONT)."""
    size = diagram_font()

    def node(name: str, text: str, fill: str = "#f3f4f6", shape: str = "box") -> str:
        return f'{name} [label="{text}" fillcolor="{fill}" shape={shape}];'

    if snake:
        return _mlp_snake(tr, d_model, d_ff, font, act, post_norm, size, node)
    return "\n".join([
        "digraph mlp {",
        "rankdir=TB; bgcolor=transparent; nodesep=0.15; ranksep=0.16; margin=0;",
        f'node [style="rounded,filled" color="#6b7280" fontname="{font}" fontsize={size} margin="0.06,0.02" '
        'width=0.3 height=0.28];',
        f'edge [color="#6b7280" fontname="{font}" fontsize={size} arrowsize=0.5];',
        node("x", tr("diagram.resid", d=d_model)),
        node("norm", tr("diagram.norm")),
        node("gate", tr("diagram.gate", d=d_model, f=d_ff), "#fde7c8"),
        node("up", tr("diagram.up", d=d_model, f=d_ff), "#fde7c8"),
        node("silu", tr("diagram.act", f=d_ff, act=act), "#e0f2e9"),
        node("mul", "×", "#e0f2e9", "circle") + " mul [width=0.22 height=0.22 fixedsize=true];",
        node("down", tr("diagram.down", d=d_model, f=d_ff), "#dbeafe"),
        node("post", tr("diagram.post_norm")) if post_norm else "",
        node("add", "+", "#f3f4f6", "circle") + " add [width=0.22 height=0.22 fixedsize=true];",
        node("out", tr("diagram.out", d=d_model)),
        "{ rank=same; gate; up; }",
        "x -> norm; norm -> gate; norm -> up; gate -> silu; silu -> mul; up -> mul;",
        f'mul -> down [label=" {d_ff}"]; ' + ("down -> post; post -> add" if post_norm else "down -> add")
        + f' [label=" {d_model}"]; add -> out;',
        f'x -> add [style=dashed color="{VERMILION}" label=" {tr("diagram.skip")}" fontcolor="{VERMILION}"];',
        "}",
    ])


def _mlp_snake(tr: T, d_model: int, d_ff: int, font: str, act: str, post_norm: bool, size: int, node) -> str:
    """The same MLP in three rows (presenter mode: wide and short, so it is whole on a
    projector's first screen at 20 px type): the stream in and its norm on top; the two
    projections, the activation and the product left to right below; down_proj, the add back
    and the stream out right to left at the bottom."""
    bottom = ["out", "add", *(["post"] if post_norm else []), "down"]
    return "\n".join([
        "digraph mlp {",
        "rankdir=TB; bgcolor=transparent; nodesep=0.1; ranksep=0.3; margin=0;",
        f'node [style="rounded,filled" color="#6b7280" fontname="{font}" fontsize={size} margin="0.04,0.02" '
        'width=0.3 height=0.28];',
        f'edge [color="#6b7280" fontname="{font}" fontsize={size} arrowsize=0.5];',
        node("x", tr("diagram.resid", d=d_model)),
        node("norm", tr("diagram.norm")),
        node("up", tr("diagram.up", d=d_model, f=d_ff), "#fde7c8"),
        node("gate", tr("diagram.gate", d=d_model, f=d_ff), "#fde7c8"),
        node("silu", tr("diagram.act", f=d_ff, act=act), "#e0f2e9"),
        node("mul", "×", "#e0f2e9", "circle") + " mul [width=0.22 height=0.22 fixedsize=true];",
        node("out", tr("diagram.out", d=d_model)),
        node("add", "+", "#f3f4f6", "circle") + " add [width=0.22 height=0.22 fixedsize=true];",
        node("post", tr("diagram.post_norm")) if post_norm else "",
        node("down", tr("diagram.down", d=d_model, f=d_ff), "#dbeafe"),
        "{ rank=same; x; norm; }",
        "{ rank=same; up; gate; silu; mul; }",
        "{ rank=same; " + "; ".join(bottom) + "; }",
        "x -> norm; norm -> up; norm -> gate; gate -> silu; silu -> mul; up -> mul; mul -> down;",
        # The bottom row runs right to left: its arrows are written left to right (a row's arrows
        # order its boxes) and drawn backwards (dir=back; the alt text reads them as they point).
        " ".join(f"{a} -> {b} [dir=back];" for a, b in reversed(list(zip(bottom, bottom[1:])))),
        f'x -> add [style=dashed color="{VERMILION}" label=" {tr("diagram.skip")}" fontcolor="{VERMILION}"];',
        "}",
    ])


HIST_BIN = 0.2
STRIP_TEXT = 15          # px of a token strip cell's label (larger in presenter mode)
STRIP_PLOT_PX = 600      # the strip cells' width at 1024 px (main column, sidebar open, colour bar aside)


def strip_per_row(labels: Sequence[str], most: int = 10, least: int = 4) -> int:
    """How many token cells one row of the strip holds so that the widest label fits in its
    cell (a 10-cell row cut "·because" at 20 px in presenter mode)."""
    widest = max((style.width_units(label) for label in labels), default=1)
    cell = widest * 0.55 * style.font_px(STRIP_TEXT) + 8           # a half-em is about 0.55 of the px size
    return max(least, min(most, int(STRIP_PLOT_PX // cell)))


def strip_height(rows: int) -> int:
    """The token strip's height for ``rows`` rows of cells: taller in presenter mode, so its
    colour bar has room for its ticks and its title."""
    return style.presenter_height(110 + 46 * rows)


def activation_figure(tr: T, gate_values: torch.Tensor, layer: int, curves: dict | None = None,
                      own: str = "silu", span: float = 5.0) -> go.Figure:
    """ReLU, GELU and SiLU over [-span, span] (``curves``: name -> function, the model's own
    forms; ``own``: the model's gate, drawn thicker), with the layer's real gate values as a histogram."""
    x = torch.linspace(-span, span, 401)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    # The histogram is counted here, not in the browser: tens of thousands of raw gate values
    # would be most of the page's bytes. Bins 0.2 wide, as a percent of the values inside the span.
    inside = gate_values.detach().float().flatten()
    inside = inside[(inside >= -span) & (inside <= span)]
    bins = round(2 * span / HIST_BIN)
    counts = torch.histc(inside, bins=bins, min=-span, max=span)
    centres = -span + HIST_BIN * (torch.arange(bins) + 0.5)
    fig.add_trace(go.Bar(
        x=centres.numpy(), y=(100 * counts / max(1, inside.numel())).numpy(), width=HIST_BIN * 0.95,
        marker_color="#d1d5db", name=style.legend_text(tr("act.hist", layer=layer)), opacity=0.8,
        hovertemplate="%{x:.1f}: %{y:.1f}%<extra></extra>"), secondary_y=True)
    styles = {"relu": (VERMILION, "dash"), "gelu": (BLUE, "dot"), "silu": (GREEN, "solid")}
    for name, fn in (curves or N.ACTIVATIONS).items():
        color, dash = styles[name]
        fig.add_trace(go.Scatter(x=x.numpy(), y=fn(x).numpy(), name=style.legend_text(tr(f"act.{name}")), mode="lines",
                                 line=dict(color=color, dash=dash, width=5 if name == own else 3),
                                 hovertemplate="x=%{x:.2f}, y=%{y:.2f}<extra>" + html_escape(tr(f"act.{name}")) + "</extra>"),
                      secondary_y=False)
    fig.update_xaxes(title=tr("act.x"), range=[-span, span], zeroline=True)
    fig.update_yaxes(title=tr("act.y"), range=[-1.5, span], secondary_y=False, zeroline=True, zerolinecolor=GREY)
    fig.update_yaxes(title=tr("act.y2"), secondary_y=True, showgrid=False, rangemode="tozero", tickmode="auto",
                     ticksuffix="%")
    fig.update_layout(title=tr("act.title"), legend=dict(orientation="h", y=style.legend_below(-0.3)),
                      bargap=0.05)
    return fig


def swiglu_figure(tr: T, gate: torch.Tensor, up: torch.Tensor, token: str, act=N.silu,
                  names: dict | None = None, span: float = 4.0) -> go.Figure:
    """act(gate) * up as a map over (gate, up), with the real neurons of one token on it
    (``act``: the model's gate function; ``names``: act/glu/fn for the titles).

    ``token`` is already escaped for plotly."""
    names = names or {"act": "SiLU", "glu": "SwiGLU", "fn": "silu"}
    grid = torch.linspace(-span, span, 121)
    g, u = torch.meshgrid(grid, grid, indexing="xy")       # x: gate, y: up
    z = act(g) * u
    fig = go.Figure(go.Heatmap(       # numpy arrays: sent as binary, a quarter of the bytes of JSON numbers
        x=grid.numpy(), y=grid.numpy(), z=z.numpy(), colorscale=style.DIVERGING, zmid=0,
        colorbar=dict(thickness=12),     # what the colours are is the chart's title: no colour-bar title to squeeze the map
        hovertemplate=tr("swiglu.hover") + "<extra></extra>"))
    keep = (gate.abs() <= span) & (up.abs() <= span)
    fig.add_trace(go.Scatter(
        x=gate[keep].detach().float().numpy(), y=up[keep].detach().float().numpy(), mode="markers", name=style.legend_text(tr("swiglu.points", n=f"{int(keep.sum()):,}", token=token)),
        marker=dict(size=4, color="#111827", opacity=0.45), showlegend=True,
        hovertemplate=tr("swiglu.hover") + "<extra></extra>"))
    fig.update_xaxes(title=tr("swiglu.x"), range=[-span, span], constrain="domain")
    fig.update_yaxes(title=tr("swiglu.y"), range=[-span, span], scaleanchor="x", constrain="domain")
    fig.update_layout(title=tr("swiglu.title", **names), legend=dict(orientation="h", y=-0.22))
    return fig


def singular_figure(tr: T, singular_values: torch.Tensor, layer: int) -> go.Figure:
    s = singular_values.tolist()
    fig = go.Figure(go.Scatter(x=list(range(1, len(s) + 1)), y=s, mode="lines", line=dict(color=BLUE, width=3),
                               hovertemplate=tr("collapse.hover") + "<extra></extra>"))
    fig.update_xaxes(title=tr("collapse.x"))
    fig.update_yaxes(title=tr("collapse.y"), type="log", dtick=1)
    fig.update_layout(title=tr("collapse.title", layer=layer))
    return fig


def neuron_bar_figure(tr: T, neurons: Sequence[int], values: Sequence[float], chosen: int, token: str,
                      fn: str = "silu") -> go.Figure:
    """The most active neurons at one token (signed values; the chosen one outlined).
    ``token`` is already escaped for plotly."""
    labels = [tr("neurons.n", n=n) for n in neurons]
    colors = [BLUE if v >= 0 else ORANGE for v in values]
    widths = [3 if n == chosen else 0 for n in neurons]
    fig = go.Figure(go.Bar(
        x=list(values), y=labels, orientation="h", marker=dict(color=colors, line=dict(color="#111827", width=widths)),
        text=[f"{v:+.2f}" for v in values], textposition="outside", cliponaxis=False,
        hovertemplate="%{y}: %{x:.3f}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", type="category", title=tr("neurons.y"))
    low, high = min(0.0, min(values, default=0.0)), max(0.0, max(values, default=0.0))
    span = (high - low) or 1.0
    # Room for the value written outside each bar's end (about a fifth of a half column's plot):
    # a -5.73 ran into the tick label "neuron 495" at 20 px in presenter mode.
    room = 0.35 * span
    fig.update_xaxes(title=tr("neurons.x", fn=fn),
                     range=[low - (room if low < 0 else 0.02 * span), high + (room if high > 0 else 0.02 * span)],
                     zeroline=True, zerolinecolor=GREY)
    fig.update_layout(title=tr("neurons.title", token=token), showlegend=False)
    return fig


def token_strip_figure(tr: T, labels: Sequence[str], values: Sequence[float], title: str,
                       per_row: int = 10) -> go.Figure:
    """Tokens laid out like text, each cell coloured by a signed value (a neuron's activation).
    ``labels`` and ``title`` are already escaped for plotly."""
    n = len(labels)
    rows = max(1, -(-n // per_row))
    z = [[None] * per_row for _ in range(rows)]
    text = [[""] * per_row for _ in range(rows)]
    hover = [[""] * per_row for _ in range(rows)]
    for i, (lab, v) in enumerate(zip(labels, values)):
        r, c = divmod(i, per_row)
        z[r][c], text[r][c] = float(v), lab
        hover[r][c] = tr("strip.hover", pos=i, token=lab, value=f"{v:+.3f}")
    limit = max((abs(float(v)) for v in values), default=1.0) or 1.0
    fig = go.Figure(go.Heatmap(
        z=z, text=text, customdata=hover, texttemplate="%{text}", textfont=dict(size=STRIP_TEXT),
        colorscale=style.DIVERGING, zmid=0, zmin=-limit, zmax=limit, xgap=3, ygap=3,
        colorbar=dict(title=dict(text=tr("strip.scale"), side="right")),
        hovertemplate="%{customdata}<extra></extra>"))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, autorange="reversed")
    fig.update_layout(title=title, plot_bgcolor="white")
    return fig


def vocab_figure(tr: T, promoted: Sequence[tuple[str, float]], suppressed: Sequence[tuple[str, float]]) -> go.Figure:
    """Tokens whose logits one unit of the neuron raises (left) and lowers (right).
    Token labels are already escaped and unique."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=(tr("vocab.promoted"), tr("vocab.suppressed")),
                        horizontal_spacing=0.22)
    for col, items, color in ((1, promoted, BLUE), (2, suppressed, ORANGE)):
        fig.add_trace(go.Bar(x=[v for _, v in items], y=[lab for lab, _ in items], orientation="h",
                             marker_color=color, hovertemplate="%{y}: %{x:+.3f}<extra></extra>"), row=1, col=col)
        fig.update_yaxes(autorange="reversed", type="category", row=1, col=col)
        fig.update_xaxes(title=tr("vocab.x"), row=1, col=col)
    # room above the subplot titles (no figure title: the default 20 px cut them in presenter mode)
    fig.update_layout(showlegend=False, margin=dict(l=10, r=10, b=10, t=style.room_above_subplot_titles()))
    return fig


def params_figure(tr: T, rows: Sequence[tuple[str, dict[str, int]]], unit: Callable[[int], str]) -> go.Figure:
    """Horizontal 100% bars: each row's parameters split by part, absolute counts as labels.
    Each row's name sits above its bar (not beside it), so the bars keep the full width on a
    narrow screen."""
    parts = ["attention", "mlp", "embedding", "norms"]
    colors = {"attention": BLUE, "mlp": ORANGE, "embedding": GREEN, "norms": PURPLE}
    ys = list(range(len(rows)))
    fig = go.Figure()
    for part in parts:
        shares, labels, hovers = [], [], []
        for name, counts in rows:
            total = sum(counts.values())
            share = counts.get(part, 0) / total
            shares.append(share * 100)
            labels.append(unit(counts.get(part, 0)) if share >= 0.06 else "")
            hovers.append(f"{html_escape(tr('params.part.' + part))}: {counts.get(part, 0):,} ({share:.1%})")
        fig.add_trace(go.Bar(x=shares, y=ys, orientation="h", name=tr(f"params.part.{part}"), marker_color=colors[part],
                             width=0.5, text=labels, textposition="inside", insidetextanchor="middle",
                             textfont=dict(size=14), customdata=hovers, hovertemplate="%{customdata}<extra></extra>"))
    notes = [dict(x=0, y=y, xref="x", yref="y", text=f"<b>{name}</b>", showarrow=False, xanchor="left",
                  yanchor="bottom", yshift=15, font=dict(size=15)) for y, (name, _) in zip(ys, rows)]
    fig.update_layout(barmode="stack", title=tr("params.title"), annotations=notes,
                      uniformtext=dict(minsize=13, mode="hide"),
                      legend=dict(orientation="h", y=style.legend_below(-0.2), traceorder="normal"))
    fig.update_xaxes(title=tr("params.x"), range=[0, 100], ticksuffix="%")
    fig.update_yaxes(showticklabels=False, range=[len(rows) - 0.6, -0.95], showgrid=False, zeroline=False)
    return fig


def moe_figure(tr: T, parts_total: dict[str, int], parts_active: dict[str, int], unit: float = 1e9) -> go.Figure:
    """Total vs active parameters, stacked by part, in ``unit``s (1e9 for billions, 1e8 for the
    Chinese 億 / 亿; the catalog's unit.b names it). Value labels that would be smaller than
    13 px are left out (hover still shows them)."""
    colors = {"attention": BLUE, "experts": ORANGE, "embedding": GREEN, "other": PURPLE}
    cats = [tr("moe.total"), tr("moe.active")]
    fig = go.Figure()
    for part, color in colors.items():
        vals = [parts_total[part] / unit, parts_active[part] / unit]
        fig.add_trace(go.Bar(x=cats, y=vals, name=tr(f"moe.part.{part}"), marker_color=color,
                             text=[f"{v:.1f}" for v in vals], textposition="inside", textfont=dict(size=15),
                             hovertemplate="%{x}: " + tr("unit.b", n="%{y:.2f}") + "<extra>" + html_escape(tr(f"moe.part.{part}")) + "</extra>"))
    fig.update_layout(barmode="stack", title=tr("moe.title"), uniformtext=dict(minsize=13, mode="hide"),
                      legend=dict(orientation="h", y=-0.15, traceorder="normal"))
    fig.update_yaxes(title=tr("moe.y"))
    return fig
