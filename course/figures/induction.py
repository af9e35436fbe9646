"""Figures for the induction-heads lesson (app_pages/induction.py). Builders take plain numbers,
escaped labels and ``tr`` (the page's translation function)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from course.figures import chart as go
from course.figures import style
from course.figures.attention import head_weight_bars

Tr = Callable[..., str]
STRIPE = style.OKABE_ITO[3]      # vermillion: the induction stripe / the chosen heads
FIRST, SECOND = style.OKABE_ITO[0], style.OKABE_ITO[1]
GREY = "#9ca3af"


def score_map_figure(scores: Sequence[Sequence[float]], top: Sequence[tuple[int, int]], tr: Tr) -> go.Figure:
    """Layer x head induction scores, the top-k heads outlined."""
    n_layers, n_heads = len(scores), len(scores[0])
    fig = go.Figure(go.Heatmap(
        z=[[float(v) for v in row] for row in scores], x=list(range(n_heads)), y=list(range(n_layers)),
        colorscale=style.SEQUENTIAL, zmin=0, zmax=1, xgap=1, ygap=1,
        colorbar=dict(title=dict(text=tr("fig.score"), side="right"), tickformat=".0%", thickness=14),
        hovertemplate=f"{tr('fig.head_word')} %{{y}}.%{{x}}: %{{z:.1%}}<extra></extra>"))
    for layer, head in top:
        fig.add_shape(type="rect", x0=head - 0.5, x1=head + 0.5, y0=layer - 0.5, y1=layer + 0.5,
                      line=dict(color=STRIPE, width=3))
    fig.update_xaxes(title=tr("fig.head_axis"), tickmode="linear", dtick=1)
    fig.update_yaxes(title=tr("fig.layer_axis"), tickmode="linear", dtick=2, autorange="reversed")
    fig.update_layout(title=tr("fig.map_title"))
    return fig


def next_token_figure(labels: Sequence[str], first: Sequence[float], second: Sequence[float], a_first: str,
                      a_second: str, tr: Tr) -> go.Figure:
    """The model's next-token probability for the best candidates after the second A (and B),
    the first time A came (grey) and the second (blue): on the learner's own text, the jump
    an induction head makes. ``labels``, ``a_first`` and ``a_second`` arrive escaped for plotly."""
    fig = go.Figure()
    fig.add_bar(y=list(labels), x=[100 * p for p in first], orientation="h", name=tr("fig.next_first", a=a_first),
                marker_color=GREY, hovertemplate="%{y}: %{x:.1f}%<extra></extra>")
    fig.add_bar(y=list(labels), x=[100 * p for p in second], orientation="h", name=tr("fig.next_second", a=a_second),
                marker_color=FIRST, text=[f"{p:.0%}" for p in second], textposition="outside", cliponaxis=False,
                textfont=dict(size=14), constraintext="none",
                hovertemplate="%{y}: %{x:.1f}%<extra></extra>")
    top = max([*first, *second, 0.01]) * 100
    fig.update_layout(barmode="group", title=tr("fig.next_title"), bargap=0.25,
                      legend=dict(orientation="h", x=0, y=style.legend_below(-0.3), yanchor="top"))
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(title=tr("fig.next_x"), range=[0, top * 1.3])
    return fig


def stripe_pattern_figure(pattern: Sequence[Sequence[float]], name: str, score: float, seq_len: int,
                          token_text: Sequence[str], tr: Tr) -> go.Figure:
    """One of the best heads' patterns on one repeated sequence, the induction stripe (query
    in the second copy -> the token after its first occurrence) drawn as a dashed line and
    the copies separated. One figure per head, so that on a narrow screen the page can stack
    them (Streamlit columns) instead of squeezing three panels and their titles into one."""
    n = 2 * seq_len
    # Each axis is a category per position, named "position (token)", so the hover shows the
    # tokens without a pair of strings per cell; the weights go as a float32 array (binary),
    # the future (above the diagonal) as gaps. A few times fewer bytes than lists per cell.
    names = [f"{i} ({token_text[i]})" for i in range(n)]
    hover = f"{tr('fig.query_pos')} %{{y}}<br>{tr('fig.key_pos')} %{{x}}<br>{tr('fig.weight')}: %{{z:.1%}}<extra></extra>"
    z = np.array(pattern, dtype=np.float32)[:n, :n]
    z[np.triu_indices(n, 1)] = np.nan
    fig = go.Figure(go.Heatmap(x=names, y=names, z=z, colorscale=style.SEQUENTIAL, zmin=0, zmax=1, showscale=False,
                               hovertemplate=hover))
    # The stripe: queries seq_len..2*seq_len-1, keys 1..seq_len.
    fig.add_scatter(x=[names[1], names[seq_len]], y=[names[seq_len], names[2 * seq_len - 1]], mode="lines",
                    hoverinfo="skip", showlegend=False, line=dict(color=STRIPE, width=2, dash="dash"))
    split = seq_len - 0.5
    fig.update_layout(title=tr("fig.top_title", head=name, score=f"{score:.0%}"),
                      shapes=[dict(type="line", xref="x", yref="y", x0=-0.5, x1=n - 0.5, y0=split, y1=split,
                                   line=dict(color="white", width=1)),
                              dict(type="line", xref="x", yref="y", x0=split, x1=split, y0=-0.5, y1=n - 0.5,
                                   line=dict(color="white", width=1))])
    step = max(1, n // 8)
    ticks = dict(tickmode="array", tickvals=names[::step], ticktext=[str(i) for i in range(0, n, step)])
    fig.update_xaxes(title=tr("fig.key_pos"), range=[-0.5, n - 0.5], type="category", **ticks)
    fig.update_yaxes(title=tr("fig.query_pos"), range=[n - 0.5, -0.5], type="category", **ticks)
    return fig


def loss_figure(first: Sequence[float], second: Sequence[float], tr: Tr) -> go.Figure:
    """Per-token loss on the first vs the second copy, by position inside the copy."""
    xs = list(range(1, len(first) + 1))
    fig = go.Figure()
    fig.add_scatter(x=xs, y=[float(v) for v in first], name=tr("fig.first_copy"), mode="lines+markers",
                    line=dict(color=FIRST, width=3), marker=dict(size=5),
                    hovertemplate="%{x}: %{y:.2f}<extra></extra>")
    fig.add_scatter(x=xs, y=[float(v) for v in second], name=tr("fig.second_copy"), mode="lines+markers",
                    line=dict(color=SECOND, width=3, dash="dash"), marker=dict(size=5, symbol="diamond"),
                    hovertemplate="%{x}: %{y:.2f}<extra></extra>")
    fig.update_xaxes(title=tr("fig.index_axis"))
    fig.update_yaxes(title=tr("fig.loss_axis"), rangemode="tozero")
    # the legend below the x-axis title, which presenter mode's larger ticks and title push lower
    below = style.legend_below(-0.25)
    fig.update_layout(title=tr("fig.loss_title"), legend=dict(orientation="h", y=below, yanchor="top"))
    return fig


def ablation_figure(labels: Sequence[str], values: Sequence[float], colours: Sequence[str], tr: Tr) -> go.Figure:
    """Loss on the second copy: intact, top-k zeroed, random k zeroed."""
    fig = go.Figure(go.Bar(x=list(labels), y=[float(v) for v in values], marker_color=list(colours),
                           text=[f"{float(v):.2f}" for v in values], textposition="outside", cliponaxis=False,
                           hovertemplate="%{x}: %{y:.3f}<extra></extra>"))
    fig.update_yaxes(title=tr("fig.loss_axis"), rangemode="tozero", range=[0, max(values) * 1.18])
    fig.update_xaxes(type="category")
    fig.update_layout(title=tr("fig.ablation_title"))
    return fig


def site_heads_figure(names: Sequence[str], weights: Sequence[float], highlight: Sequence[bool], tr: Tr,
                      title: str) -> go.Figure:
    """The heads with the most attention from the second A to B on the learner's text;
    heads that are also top induction heads on random tokens highlighted."""
    colours = [STRIPE if h else style.OKABE_ITO[0] for h in highlight]
    return head_weight_bars(names, weights, colours, tr("fig.head_axis_full"), tr("fig.weight"), title, x_max=1.15)
