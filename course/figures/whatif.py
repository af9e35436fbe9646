"""Figures for the What-if lab (app_pages/whatif.py). Builders take plain numbers, already-escaped
labels and ``tr`` (the page's translation function), and return plotly Figures for course.theme.plot."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from course.figures import chart as go
from course.figures import style
from course.figures.chart import make_subplots

Tr = Callable[..., str]
BEFORE = style.OKABE_ITO[0]      # blue: the intact model, everywhere on the page
AFTER = style.OKABE_ITO[3]       # vermillion: the model with the switches on


def top_figure(before: Sequence[tuple[str, float]], after: Sequence[tuple[str, float]], tr: Tr) -> go.Figure:
    """The next-token candidates, intact (left) and broken (right): (escaped label, probability)
    bars, the most likely on top. ``after`` may be empty (the broken run overflowed)."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.22,
                        subplot_titles=(tr("fig.before"), tr("fig.after")))
    for col, rows, colour in ((1, before, BEFORE), (2, after, AFTER)):
        labels = [lab for lab, _ in rows][::-1]
        probs = [float(p) for _, p in rows][::-1]
        fig.add_bar(x=probs, y=[f"{i}·{lab}" for i, lab in enumerate(labels)], orientation="h",
                    marker_color=colour, text=[f"{p:.1%}" for p in probs], textposition="auto",
                    hovertemplate="%{y}: %{x:.2%}<extra></extra>", showlegend=False, row=1, col=col)
        fig.update_yaxes(tickmode="array", tickvals=[f"{i}·{lab}" for i, lab in enumerate(labels)],
                         ticktext=labels, row=1, col=col)
        fig.update_xaxes(title=tr("fig.prob_axis"), tickformat=".0%", rangemode="tozero", row=1, col=col)
    fig.update_layout(title=tr("fig.top_title"), bargap=0.25)
    return fig


def loss_figure(labels: Sequence[str], before: Sequence[float], after: Sequence[float],
                after_labels: Sequence[str], tr: Tr) -> go.Figure:
    """The loss at every position, intact and broken, over the tokens being predicted
    (``after_labels``: what the broken run had to predict there, e.g. the shuffled text)."""
    x = list(range(len(before)))
    clean = [float(v) if math.isfinite(v) else None for v in after]
    hover_b = f"%{{customdata}}<br>{tr('fig.loss_axis')}: %{{y:.2f}}<extra>{tr('fig.before')}</extra>"
    hover_a = f"%{{customdata}}<br>{tr('fig.loss_axis')}: %{{y:.2f}}<extra>{tr('fig.after')}</extra>"
    fig = go.Figure([
        go.Scatter(x=x, y=[float(v) for v in before], mode="lines+markers", name=tr("fig.before"),
                   line=dict(color=BEFORE, width=2), customdata=list(labels), hovertemplate=hover_b),
        go.Scatter(x=x, y=clean, mode="lines+markers", name=tr("fig.after"),
                   line=dict(color=AFTER, width=2, dash="dash"), marker=dict(symbol="diamond"),
                   customdata=list(after_labels), hovertemplate=hover_a),
    ])
    fig.update_xaxes(title=tr("fig.target_axis"), tickmode="array", tickvals=x, ticktext=list(labels),
                     tickangle=-60 if len(x) > 12 else None)   # None: plotly's own auto, turned when they would overlap
    fig.update_yaxes(title=tr("fig.loss_axis"), rangemode="tozero")
    fig.update_layout(title=tr("fig.loss_title"), legend=dict(orientation="h", y=1.02, x=1, xanchor="right",
                                                              yanchor="bottom"))
    return fig


def patterns_figure(before: Sequence[Sequence[float]], after: Sequence[Sequence[float]],
                    labels_before: Sequence[str], labels_after: Sequence[str], head: str, tr: Tr) -> go.Figure:
    """One head's attention pattern, intact (left) and broken (right), on one colour scale 0..1.
    Weights above the diagonal (on later tokens) exist only without the causal mask."""
    same = list(labels_before) == list(labels_after)      # the same queries: label the rows once
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.06 if same else 0.16,
                        subplot_titles=(tr("fig.before"), tr("fig.after")))
    hover = (f"{tr('fig.query_axis')} %{{y}}<br>{tr('fig.key_axis')} %{{x}}<br>"
             f"{tr('fig.weight')}: %{{z:.1%}}<extra></extra>")
    for col, z, labels in ((1, before, labels_before), (2, after, labels_after)):
        rows = [[float(v) if math.isfinite(v) else None for v in row] for row in z]
        fig.add_heatmap(z=rows, x=list(labels), y=list(labels), colorscale=style.SEQUENTIAL, zmin=0, zmax=1,
                        showscale=col == 2, hovertemplate=hover, row=1, col=col,
                        colorbar=dict(title=dict(text=tr("fig.weight"), side="right"), tickformat=".0%",
                                      thickness=14))
        fig.update_xaxes(title=tr("fig.key_axis"), tickangle=-60, row=1, col=col)
        fig.update_yaxes(autorange="reversed", showticklabels=col == 1 or not same, row=1, col=col)
    fig.update_yaxes(title=tr("fig.query_axis"), row=1, col=1)
    fig.update_layout(title=tr("fig.pattern_title", head=head))
    return fig


def stream_figure(sizes: Sequence[float], tr: Tr) -> go.Figure:
    """Norms off: the size of the stream after each block, on a log scale (blocks past the
    overflow are left out: their numbers are inf or NaN)."""
    x = list(range(len(sizes)))
    y = [float(v) if math.isfinite(v) and v > 0 else None for v in sizes]
    fig = go.Figure(go.Scatter(x=x, y=y, mode="lines+markers", line=dict(color=AFTER, width=2),
                               hovertemplate=f"{tr('fig.block_axis')} %{{x}}: %{{y:.3g}}<extra></extra>"))
    fig.update_xaxes(title=tr("fig.block_axis"), range=[-0.5, len(x) - 0.5])
    fig.update_yaxes(title=tr("fig.stream_axis"), type="log", exponentformat="power")
    fig.update_layout(title=tr("fig.stream_title"))
    return fig
