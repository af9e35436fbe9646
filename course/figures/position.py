"""Figures for lesson 3 (position and RoPE): sinusoidal waves, clock hands, the frequency
ladder, a query pair turning, the relative-position curves, and the block diagram.
Every visible word comes in as an argument; token text is escaped here."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from course.figures import chart as go
from course.figures import style
from course.figures.diagrams import STREAMLIT_DOT_TEXT
from course.tokens import plot_label

GRID = "#e5e7eb"


def sinusoid_heatmap(pe: torch.Tensor, title: str, x_title: str, y_title: str, colorbar: str,
                     hover_tokens: Sequence[str] | None = None, x_word: str | None = None) -> go.Figure:
    """PE [pos, d] as a heatmap: positions down, dimensions across. ``hover_tokens``: the
    prompt's token at each position (plain text, escaped here); ``x_word``: the dimension
    word in the hover (the axis title by default)."""
    n = pe.shape[0]
    x_word = x_word or x_title
    heat = go.Heatmap(z=pe.numpy(), colorscale=style.DIVERGING, zmid=0, zmin=-1, zmax=1,
                      colorbar=dict(title=dict(text=colorbar, side="right"), thickness=14),
                      hovertemplate=y_title + " %{y} · " + x_word + " %{x}: %{z:.3f}<extra></extra>")
    if hover_tokens:
        shown = [f"({plot_label(t)})" for t in hover_tokens]
        labels = [[shown[p] if p < len(shown) else "" for _ in range(pe.shape[1])] for p in range(n)]
        heat.update(customdata=labels, hovertemplate=y_title + " %{y} %{customdata} · " + x_word
                    + " %{x}: %{z:.3f}<extra></extra>")
    fig = go.Figure(heat)
    fig.update_layout(title=title)
    fig.update_xaxes(title=x_title, showgrid=False)
    fig.update_yaxes(title=y_title, autorange="reversed", showgrid=False)
    return fig


def waves_figure(pe: torch.Tensor, dims: Sequence[int], names: Sequence[str], title: str, x_title: str,
                 y_title: str) -> go.Figure:
    """A few columns of PE drawn as waves over the positions."""
    fig = go.Figure()
    x = list(range(pe.shape[0]))
    for n, (dim, name) in enumerate(zip(dims, names)):
        fig.add_scatter(x=x, y=pe[:, dim].tolist(), mode="lines", name=name,
                        line=dict(color=style.OKABE_ITO[n % len(style.OKABE_ITO)], width=2.5))
    fig.update_layout(title=title, legend=dict(orientation="h", y=style.legend_below(-0.25), x=0))
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title, range=[-1.15, 1.15])
    return fig


def clock_figure(angles: Sequence[float], names: Sequence[str], title: str, legend_title: str | None = None,
                 hover_names: Sequence[str] | None = None) -> go.Figure:
    """Clock hands: one hand per pair at angle (radians, counter-clockwise from 3 o'clock),
    faster pairs drawn longer and thinner, like a second hand. ``names``: short legend
    entries under ``legend_title``; ``hover_names``: the longer text shown on hover."""
    fig = go.Figure()
    n = len(angles)
    hover_names = hover_names or names
    for i, (angle, name, hover) in enumerate(zip(angles, names, hover_names)):
        length = 1.0 - 0.55 * i / max(1, n - 1)
        deg = math.degrees(angle) % 360
        fig.add_scatterpolar(r=[0, length], theta=[deg, deg], mode="lines+markers", name=name,
                             line=dict(color=style.OKABE_ITO[i % len(style.OKABE_ITO)], width=2 + 2.2 * i / max(1, n - 1)),
                             marker=dict(size=[0, 9]), hovertemplate=hover + " · %{theta:.0f}°<extra></extra>")
    # The dial takes most of the width and a short legend sits at its right. Plotly fits the
    # angle labels ("180°", "0°") just around the dial's domain: the margin on the left and
    # the gap before the legend keep them in view; the bottom margin holds "270°" (at presenter
    # mode's 20 px the 20 px margin cut it).
    tick_px = style.font_px(style.FONT_SIZE - 2)
    fig.update_layout(title=title, showlegend=True,
                      legend=dict(orientation="v", x=0.8, xanchor="left", y=0.5, yanchor="middle",
                                  title=dict(text=legend_title) if legend_title else None),
                      margin=dict(l=40, r=10, t=70, b=max(20, round(tick_px * 1.5))),
                      polar=dict(domain=dict(x=[0.0, 0.7], y=[0.0, 1.0]),
                                 angularaxis=dict(direction="counterclockwise", rotation=0, showticklabels=True,
                                                  tickfont=dict(size=style.FONT_SIZE - 2)),
                                 radialaxis=dict(visible=False, range=[0, 1.05])))
    return fig


def period_text(period: float) -> str:
    """A period in tokens for a legend: one decimal while short, whole tokens once long."""
    return f"{period:,.1f}" if period < 100 else f"{period:,.0f}"


def ladder_figure(series: Sequence[tuple], title: str, x_title: str, y_title: str, hover: str,
                  colours: Sequence[str] | None = None) -> go.Figure:
    """theta_i per pair (log axis), one series per RoPE base: ``series`` holds
    (name, thetas [pairs], periods [pairs], reach, reach_label) with reach the positions the
    layers using that base can see (the context, or the window), drawn as the rate at which
    one turn takes that whole reach. One base: bars, the pairs that never finish a turn
    within the reach in a lighter colour; several: one line of markers each."""
    fig = go.Figure()
    several = len(series) > 1
    shapes, notes = [], []
    for n, (name, thetas, periods, reach, reach_label) in enumerate(series):
        pairs = list(range(len(thetas)))
        colour = style.OKABE_ITO[n % len(style.OKABE_ITO)]
        custom = [[f"{float(p):,.1f}", f"{i}, {i + len(thetas)}"] for i, p in enumerate(periods)]
        if several:
            fig.add_scatter(x=pairs, y=thetas.tolist(), mode="lines+markers", name=name, customdata=custom,
                            line=dict(color=colour, width=2), marker=dict(size=5, color=colour),
                            hovertemplate=name + "<br>" + hover + "<extra></extra>")
        else:
            bar_colours = list(colours) if colours else [style.OKABE_ITO[4] if float(p) > reach else colour
                                                         for p in periods]
            fig.add_bar(x=pairs, y=thetas.tolist(), marker_color=bar_colours, customdata=custom, name=name,
                        hovertemplate=hover + "<extra></extra>", showlegend=False)
        limit = 2 * math.pi / reach
        line_colour = colour if several else style.OKABE_ITO[3]
        shapes.append(dict(type="line", xref="paper", x0=0, x1=1, yref="y", y0=limit, y1=limit,
                           line=dict(color=line_colour, dash="dash", width=2)))
        # On a log axis an annotation's y is given in log10 units.
        font = dict(size=style.FONT_SIZE - 3, color=line_colour)
        if several:
            notes.append(dict(x=1, xref="paper", y=math.log10(limit), yref="y", text=reach_label, showarrow=False,
                              xanchor="right", yanchor="bottom" if n % 2 == 0 else "top",
                              font=font, bgcolor="rgba(255,255,255,0.85)"))
        else:
            # Bars: the label hangs from the top right corner, above the slow pairs' short bars,
            # with a line down to the dashed line (written on the line, it sat over taller bars).
            top = max(math.log10(float(thetas.max())), math.log10(limit) + 1)
            notes.append(dict(x=pairs[-1], xref="x", y=math.log10(limit), yref="y", text=reach_label,
                              showarrow=True, arrowhead=0, arrowcolor=line_colour, axref="x", ax=pairs[-1],
                              ayref="y", ay=top, xanchor="right", yanchor="top",
                              font=font, bgcolor="rgba(255,255,255,0.85)"))
    fig.update_layout(title=title, bargap=0.15, shapes=shapes, annotations=notes,
                      legend=dict(orientation="h", y=style.legend_below(-0.22), x=0) if several else None)
    fig.update_xaxes(title=x_title, dtick=max(4, (len(series[0][1]) // 8) // 4 * 4))
    fig.update_yaxes(title=y_title, type="log", exponentformat="power")
    return fig


def _circle(radius: float) -> dict:
    t = [2 * math.pi * k / 120 for k in range(121)]
    return dict(x=[radius * math.cos(a) for a in t], y=[radius * math.sin(a) for a in t], mode="lines",
                line=dict(color=GRID, width=1), hoverinfo="skip", showlegend=False)


def same_vector_figure(points: torch.Tensor, tokens: Sequence[str], title: str, axis: Sequence[str],
                       hover: str, highlight: int | None = None) -> go.Figure:
    """One pair of the same q placed at positions 0..n-1: points [n, 2] on one circle,
    coloured by position, with the token that sits there in the hover."""
    n = points.shape[0]
    radius = float(points[0].norm()) if n else 1.0
    fig = go.Figure()
    fig.add_scatter(**_circle(radius))
    fig.add_scatter(x=points[:, 0].tolist(), y=points[:, 1].tolist(), mode="markers+text",
                    text=[str(p) for p in range(n)] if n <= 40 else None, textposition="top center",
                    textfont=dict(size=style.FONT_SIZE - 4),
                    marker=dict(size=10, color=list(range(n)), colorscale=style.SEQUENTIAL, showscale=True,
                                colorbar=dict(title=dict(text=axis[2], side="right"), thickness=12)),
                    customdata=[[p, plot_label(tokens[p]) if p < len(tokens) else ""] for p in range(n)],
                    hovertemplate=hover + "<extra></extra>", showlegend=False)
    if n:
        fig.add_scatter(x=[0, float(points[0, 0])], y=[0, float(points[0, 1])], mode="lines",
                        line=dict(color="#6b7280", width=2.5, dash="dash"), hoverinfo="skip", showlegend=False)
    if highlight is not None and 0 <= highlight < n:
        fig.add_scatter(x=[0, float(points[highlight, 0])], y=[0, float(points[highlight, 1])], mode="lines",
                        line=dict(color=style.OKABE_ITO[3], width=3), hoverinfo="skip", showlegend=False)
    _square(fig, radius, title, axis)
    return fig


def before_after_figure(before: torch.Tensor, after: torch.Tensor, tokens: Sequence[str], title: str,
                        axis: Sequence[str], names: Sequence[str], hover: str) -> go.Figure:
    """Each position's own pair before RoPE (hollow) and after (filled), joined by a line."""
    n = before.shape[0]
    radius = float(torch.cat([before.norm(dim=1), after.norm(dim=1)]).max()) if n else 1.0
    fig = go.Figure()
    xs, ys = [], []
    for p in range(n):
        xs += [float(before[p, 0]), float(after[p, 0]), None]
        ys += [float(before[p, 1]), float(after[p, 1]), None]
    fig.add_scatter(x=xs, y=ys, mode="lines", line=dict(color="#9ca3af", width=1), hoverinfo="skip", showlegend=False)
    labels = [plot_label(t, 10) for t in tokens[:n]]
    custom = [[p, labels[p]] for p in range(n)]
    fig.add_scatter(x=before[:, 0].tolist(), y=before[:, 1].tolist(), mode="markers", name=style.legend_text(names[0]),
                    marker=dict(size=10, symbol="circle-open", color=style.OKABE_ITO[0], line=dict(width=2)),
                    customdata=custom, hovertemplate=hover + "<extra>" + names[0] + "</extra>")
    fig.add_scatter(x=after[:, 0].tolist(), y=after[:, 1].tolist(), mode="markers+text", name=style.legend_text(names[1]),
                    text=labels if n <= 24 else None, textposition="top center", textfont=dict(size=style.FONT_SIZE - 4),
                    marker=dict(size=10, color=style.OKABE_ITO[1]),
                    customdata=custom, hovertemplate=hover + "<extra>" + names[1] + "</extra>")
    fig.update_layout(legend=dict(orientation="h", y=style.legend_below(-0.18), x=0))
    _square(fig, radius, title, axis)
    return fig


def _square(fig: go.Figure, radius: float, title: str, axis: Sequence[str]) -> None:
    lim = radius * 1.25 + 1e-6
    fig.update_layout(title=title)
    fig.update_xaxes(title=axis[0], range=[-lim, lim], zeroline=True, zerolinecolor="#9ca3af")
    fig.update_yaxes(title=axis[1], range=[-lim, lim], zeroline=True, zerolinecolor="#9ca3af",
                     scaleanchor="x", scaleratio=1)


def relative_figure(distances: Sequence[int], positions: Sequence[int], scores: torch.Tensor, title: str,
                    x_title: str, y_title: str, line_name: str, legend_title: str) -> go.Figure:
    """Score against the key's absolute position, one line per distance: flat lines, since
    the score depends on the distance only. The legend names each line by its distance
    alone, under ``legend_title``, so that it fits one or two rows of a narrow column."""
    fig = go.Figure()
    for n, d in enumerate(distances):
        fig.add_scatter(x=[str(p) for p in positions], y=scores[n].tolist(), mode="lines+markers",
                        name=str(d), line=dict(color=style.OKABE_ITO[n % len(style.OKABE_ITO)], width=2.5),
                        hovertemplate=line_name.format(d=d) + " · %{x}: %{y:.4f}<extra></extra>")
    fig.update_xaxes(title_text=x_title, type="category")
    fig.update_yaxes(title_text=y_title)
    # The legend between the title and the plot: below it, it would meet the axis title
    # whenever the position labels are drawn tilted (a narrow column).
    # Its title on a row of its own gives the entries the width (beside them, "16" was cut at a
    # narrow column's edge); the chart title is pinned to the top, clear of the legend's rows.
    fig.update_layout(title=dict(text=title, yref="container", y=0.97, yanchor="top"),
                      legend=dict(orientation="h", y=1.02, x=0, yanchor="bottom",
                                  title=dict(text=legend_title, side="top")),
                      margin=dict(l=10, r=10, t=170, b=10))
    return fig


def distance_figure(distances: Sequence[int], curve_d: Sequence[int], curve: torch.Tensor,
                    actual: tuple[int, float] | None, title: str, x_title: str, y_title: str, line_name: str,
                    actual_name: str) -> go.Figure:
    """Score against distance for the same q and k, the distances of relative_figure marked
    in its colours and the model's own score for the chosen pair as a star."""
    fig = go.Figure()
    fig.add_scatter(x=list(curve_d), y=curve.tolist(), mode="lines", showlegend=False,
                    line=dict(color=style.OKABE_ITO[7], width=2), hovertemplate="%{x}: %{y:.3f}<extra></extra>")
    for n, d in enumerate(distances):
        if d in curve_d:
            fig.add_scatter(x=[d], y=[float(curve[list(curve_d).index(d)])], mode="markers", showlegend=False,
                            marker=dict(size=9, color=style.OKABE_ITO[n % len(style.OKABE_ITO)]),
                            hovertemplate=line_name.format(d=d) + ": %{y:.4f}<extra></extra>")
    if actual is not None:
        fig.add_scatter(x=[actual[0]], y=[actual[1]], mode="markers", name=actual_name,
                        marker=dict(size=16, symbol="star", color=style.OKABE_ITO[3], line=dict(color="white", width=1)),
                        hovertemplate=actual_name + ": %{y:.4f}<extra></extra>")
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title)
    fig.update_layout(title=title, showlegend=actual is not None,
                      legend=dict(orientation="h", y=1.02, x=0, yanchor="bottom"),
                      margin=dict(l=10, r=10, t=100, b=10))
    return fig


def worked_example_figure(before: Sequence[float], after: Sequence[float], degrees: float,
                          names: Sequence[str], title: str) -> go.Figure:
    """[3, 0] and its rotation by 30 degrees, with the arc between them."""
    r = math.hypot(*before)
    arc = [math.radians(degrees) * k / 30 for k in range(31)]
    fig = go.Figure()
    fig.add_scatter(x=[0.6 * r * math.cos(a) for a in arc], y=[0.6 * r * math.sin(a) for a in arc], mode="lines",
                    line=dict(color="#9ca3af", dash="dot"), hoverinfo="skip", showlegend=False)
    for n, (vec, name) in enumerate(zip((before, after), names)):
        fig.add_annotation(x=vec[0], y=vec[1], ax=0, ay=0, xref="x", yref="y", axref="x", ayref="y",
                           showarrow=True, arrowhead=3, arrowwidth=3, arrowcolor=style.OKABE_ITO[n])
        # the turned vector's (long) label ends at its tip, so that it stays inside a narrow chart
        fig.add_scatter(x=[vec[0]], y=[vec[1]], mode="markers+text", text=[name],
                        textposition="middle right" if n == 0 else "top left",
                        marker=dict(size=8, color=style.OKABE_ITO[n]), showlegend=False, hoverinfo="skip")
    fig.update_layout(title=title)
    fig.update_xaxes(range=[-0.5, r * 1.6], zeroline=True, dtick=1)
    fig.update_yaxes(range=[-0.5, r * 0.9], zeroline=True, scaleanchor="x", scaleratio=1, dtick=1)
    return fig


# Streamlit draws a diagram's text at 9.6 SVG units whatever the DOT says and scales the SVG to the
# width the page asks for, so the text reads 9.6 x drawn width / SVG width px. On a laptop the
# boxes are laid out for 17-unit text and drawn DIAGRAM_WIDTH px wide (text 14-17 px). In presenter
# mode they are laid out for PRESENT_FONT-unit text (boxes closer to the text: the SVG is then
# about PRESENT_UNITS wide in Chromium, the QK-norm variant's Chinese labels the widest) and drawn
# at the width that gives style.font_px(DIAGRAM_FONT) text, 22 px, within the 864 px column of a
# 1024 px screen (at 17 units it would need about 930 px for 20 px text).
DIAGRAM_FONT = 17
DIAGRAM_WIDTH = 620
PRESENT_FONT = 11
PRESENT_UNITS = {False: 265, True: 330}      # SVG width, without and with QK-norm


def diagram_size(qk_norm: bool = False) -> tuple[float, int]:
    """(DOT fontsize, pixel width) of the block diagram for this session."""
    text_px = style.font_px(DIAGRAM_FONT)
    if text_px == DIAGRAM_FONT:
        return DIAGRAM_FONT, DIAGRAM_WIDTH
    return PRESENT_FONT, int(round(PRESENT_UNITS[bool(qk_norm)] * text_px / STREAMLIT_DOT_TEXT))


def block_diagram(labels: dict[str, str], font: str, qk_norm: bool = False, fontsize: float = DIAGRAM_FONT) -> str:
    """Graphviz DOT of one attention block with the RoPE step highlighted; with ``qk_norm``
    the norm of q and of k (Gemma) sits between the projection and RoPE. ``fontsize``: the text
    size the boxes are laid out for (see diagram_size)."""
    def esc(text: str) -> str:
        return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    def node(name: str, key: str, **attrs) -> str:
        extra = "".join(f' {k}="{v}"' for k, v in attrs.items())
        return f'{name} [label="{esc(labels[key])}"{extra}];'

    rope = dict(fillcolor="#E69F00", color="#b45309", penwidth="2.5", fontcolor="#111827")
    return "\n".join([
        "digraph block {",
        "rankdir=TB; bgcolor=transparent; nodesep=0.3; ranksep=0.22;",
        f'node [shape=box style="rounded,filled" fillcolor="#f3f4f6" color="#6b7280" fontname="{font}" fontsize={fontsize:g} margin="0.12,0.05"];',
        f'edge [color="#6b7280" fontname="{font}" fontsize=12];',
        node("x", "resid"), node("norm", "norm"),
        node("wq", "wq"), node("wk", "wk"), node("wv", "wv"),
        node("rq", "rope_q", **rope), node("rk", "rope_k", **rope),
        node("scores", "scores"), node("mix", "mix"), node("wo", "wo"),
        node("add", "add", shape="circle", width="0.45", fixedsize="true"),
        "x -> norm; norm -> wq; norm -> wk; norm -> wv;",
        *([node("qn", "qnorm"), node("kn", "knorm"), "wq -> qn; qn -> rq; wk -> kn; kn -> rk;"] if qk_norm
          else ["wq -> rq; wk -> rk;"]),
        "rq -> scores; rk -> scores; scores -> mix; wv -> mix; mix -> wo; wo -> add;",
        'x -> add [style=dashed];',
        "}",
    ])
