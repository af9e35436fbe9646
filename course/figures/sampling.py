"""Figures and shared controls of the sampling lesson (app_pages/sampling.py); the generation
lesson (app_pages/generation.py) uses the same sampling controls, so the two pages share their
values through the session and the URL (keys temperature, top_k, top_p, seed).

Builders take numbers already computed by lesson_model and a ``tr(key, **fields)`` callable
for translated strings; they draw, they do not compute model results. Token labels arrive
escaped (course.tokens.axis_labels / plot_label)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from course.figures import chart as go
from course.figures import style
from course.figures.chart import make_subplots
from course.text import num

T = Callable[..., str]
BLUE, ORANGE, GREEN, VERMILION, SKY, PURPLE = style.OKABE_ITO[:6]
GREY = "#9ca3af"
VALUE_FONT = 14      # value labels on bars (px): readable on a projector
LIGHT = "#d1d5db"
INSIDE_LEGEND = dict(orientation="h", x=0.5, xanchor="center", y=0.99, yanchor="top", bgcolor="rgba(255,255,255,0.85)")

# --------------------------------------------------------------------------- 1. last vector -> logits

def vector_strip_figure(tr: T, vector: Sequence[float], d_model: int) -> go.Figure:
    """The last position's final vector as one strip of d_model coloured cells."""
    lim = max(abs(min(vector)), abs(max(vector))) or 1.0
    fig = go.Figure(go.Heatmap(
        z=[list(vector)], x=list(range(d_model)), y=[""], colorscale=style.DIVERGING, zmid=0, zmin=-lim, zmax=lim,
        colorbar=dict(thickness=12, len=1.0, nticks=3, title=dict(text=tr("vector.value"), side="right")),
        hovertemplate=tr("vector.hover") + "<extra></extra>"))
    fig.update_layout(title=tr("vector.title", d=d_model))
    fig.update_xaxes(title=tr("vector.x"), showgrid=False)
    fig.update_yaxes(showticklabels=False, showgrid=False)
    return fig


def logit_histogram_figure(tr: T, edges: Sequence[float], counts: Sequence[int], marks: Sequence[tuple[float, str]],
                           vocab: int) -> go.Figure:
    """How all vocabulary logits are spread, with the best few marked (log count axis)."""
    centers = [(a + b) / 2 for a, b in zip(edges[:-1], edges[1:])]
    width = (edges[1] - edges[0]) if len(edges) > 1 else 1.0
    fig = go.Figure(go.Bar(
        x=centers, y=[c if c else None for c in counts], width=width, marker_color=SKY, name=tr("hist.bars"),
        hovertemplate=tr("hist.hover") + "<extra></extra>"))
    for i, (value, text) in enumerate(marks):
        fig.add_vline(x=value, line=dict(color=VERMILION, width=1.5, dash="dot"))
        fig.add_annotation(x=value, y=1 - 0.11 * i, yref="paper", text=text, showarrow=False, xanchor="right",
                           font=dict(color=VERMILION), bgcolor="rgba(255,255,255,0.8)")
    fig.update_layout(title=tr("hist.title", vocab=f"{vocab:,}"), showlegend=False, bargap=0)
    fig.update_xaxes(title=tr("hist.x"))
    fig.update_yaxes(title=tr("hist.y"), type="log", dtick=1)
    return fig


def top_candidates_figure(tr: T, labels: Sequence[str], logits: Sequence[float], probs: Sequence[float]) -> go.Figure:
    """The best tokens: their logits (left) and softmax probabilities (right), sharing the token axis."""
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.06,
                        subplot_titles=(tr("top.logits"), tr("top.probs")))
    fig.add_bar(x=list(logits), y=list(labels), orientation="h", marker_color=GREY, row=1, col=1,
                text=[num(v) for v in logits], textposition="inside", insidetextanchor="end",
                textfont=dict(size=VALUE_FONT), constraintext="none",
                hovertemplate="%{y}: %{x:.3f}<extra></extra>", name=tr("top.logits"))
    fig.add_bar(x=[p * 100 for p in probs], y=list(labels), orientation="h", marker_color=BLUE, row=1, col=2,
                text=[f"{p:.1%}" for p in probs], textposition="outside", cliponaxis=False,
                textfont=dict(size=VALUE_FONT), constraintext="none",
                hovertemplate="%{y}: %{x:.2f}%<extra></extra>", name=tr("top.probs"))
    lo = min(logits)
    fig.update_xaxes(range=[min(0.0, lo - 1), max(logits) * 1.02 if max(logits) > 0 else 0], row=1, col=1,
                     title=tr("top.logit_x"))
    fig.update_xaxes(range=[0, max(probs) * 100 * 1.3], row=1, col=2, title=tr("top.prob_x"))
    fig.update_yaxes(autorange="reversed", type="category", row=1, col=1)
    fig.update_layout(showlegend=False, title=tr("top.title"))
    return fig


# --------------------------------------------------------------------------- 2. settings

def before_after_figure(tr: T, labels: Sequence[str], p_model: Sequence[float], p_final: Sequence[float],
                        kept: Sequence[bool]) -> go.Figure:
    """The model's probabilities next to the ones sampling uses after the settings, as horizontal
    bars (best at the top) with readable value labels; a cut token is marked with a cross."""
    fig = go.Figure()
    fig.add_bar(y=list(labels), x=[p * 100 for p in p_model], orientation="h", name=tr("ba.model"),
                marker_color=LIGHT, marker_line=dict(color=GREY, width=1),
                hovertemplate="%{y}: %{x:.2f}%<extra></extra>")
    fig.add_bar(y=list(labels), x=[p * 100 for p in p_final], orientation="h", name=tr("ba.final"),
                marker_color=[BLUE if k else "rgba(0,0,0,0)" for k in kept],
                text=[pct_label(p) if k else "✕" for p, k in zip(p_final, kept)],
                textposition="outside", cliponaxis=False, textfont=dict(size=VALUE_FONT), constraintext="none",
                hovertemplate="%{y}: %{x:.2f}%<extra></extra>")
    top = max(max(p_model), max(p_final)) * 100
    fig.update_layout(barmode="group", title=tr("ba.title"), bargap=0.2, bargroupgap=0.05,
                      legend=dict(orientation="h", x=0, xanchor="left", y=-0.12, yanchor="top"))
    fig.update_yaxes(title=tr("ba.x"), type="category", autorange="reversed")
    fig.update_xaxes(title=tr("ba.y"), range=[0, top * 1.25 or 1])
    return fig


def pct_label(p: float) -> str:
    """A probability as a short bar label: 23%, 4.2%, 0.3%, <0.1%."""
    if p >= 0.1:
        return f"{p:.0%}"
    if p >= 0.001:
        return f"{p:.1%}"
    return "<0.1%" if p > 0 else "0%"


def cumulative_figure(tr: T, labels: Sequence[str], cumulative: Sequence[float], top_p: float,
                      n_kept: int, top_p_on: bool) -> go.Figure:
    """The top-p curve: cumulative probability by rank, the p line and the cut."""
    ranks = list(range(1, len(cumulative) + 1))
    colours = [BLUE if r <= n_kept else GREY for r in ranks]
    fig = go.Figure(go.Scatter(
        x=ranks, y=[c * 100 for c in cumulative], mode="lines+markers", line=dict(color=BLUE, shape="hv"),
        marker=dict(color=colours, size=7), customdata=list(labels), name=tr("cum.curve"),
        hovertemplate=tr("cum.hover") + "<extra></extra>"))
    if top_p_on:
        fig.add_hline(y=top_p * 100, line=dict(color=VERMILION, dash="dash"),
                      annotation=dict(text=tr("cum.p_line", p=f"{top_p:g}"), font=dict(color=VERMILION),
                                      xanchor="right", x=1, yanchor="bottom"))
    if n_kept <= len(cumulative):
        fig.add_vrect(x0=0.5, x1=n_kept + 0.5, fillcolor=BLUE, opacity=0.08, line_width=0)
        fig.add_vline(x=n_kept + 0.5, line=dict(color=VERMILION, width=2))
        fig.add_annotation(x=n_kept + 0.5, y=0.04, yref="paper", text=tr("cum.cut", n=n_kept), showarrow=False,
                           xanchor="left", font=dict(color=VERMILION), bgcolor="rgba(255,255,255,0.85)")
    fig.update_layout(title=tr("cum.title"), showlegend=False)
    fig.update_xaxes(title=tr("cum.x"), range=[0.5, len(cumulative) + 0.5])
    fig.update_yaxes(title=tr("cum.y"), range=[0, 105])
    return fig


# --------------------------------------------------------------------------- 3. temperature

def temperature_curves_figure(tr: T, title: str, temps: Sequence[float], series: dict[str, list[float]],
                              marks: Sequence[float]) -> go.Figure:
    """Probability against temperature for a few candidates, one panel (the page draws the
    four-candidate example and this prompt's top tokens side by side; on a phone they stack)."""
    fig = go.Figure()
    dashes = ["solid", "dash", "dot", "dashdot"]
    for i, (name, ys) in enumerate(series.items()):
        fig.add_scatter(x=list(temps), y=[y * 100 for y in ys], mode="lines", name=name,
                        line=dict(color=style.OKABE_ITO[i % 8], dash=dashes[i % 4], width=2.5),
                        hovertemplate=f"{name}<br>T=%{{x:.2f}}: %{{y:.1f}}%<extra></extra>")
    fig.update_layout(
        title=title, legend=dict(orientation="h", x=0, xanchor="left", y=-0.28, yanchor="top"),
        shapes=[dict(type="line", x0=m, x1=m, y0=0, y1=1, yref="paper", line=dict(color=LIGHT, width=1))
                for m in marks if m > 0])
    fig.update_xaxes(type="log", title=tr("curves.x"), tickvals=[0.1, 0.2, 0.5, 1, 2, 5],
                     ticktext=["0.1", "0.2", "0.5", "1", "2", "5"])
    fig.update_yaxes(title=tr("curves.y"), range=[-4, 104], tickvals=[0, 20, 40, 60, 80, 100])   # 0 clear of the x ticks
    return fig


# --------------------------------------------------------------------------- 4. many samples

def samples_figure(tr: T, labels: Sequence[str], probs: Sequence[float], freqs: Sequence[float], n: int) -> go.Figure:
    """Observed share of n draws next to the probability of each token."""
    fig = go.Figure()
    fig.add_bar(x=list(labels), y=[p * 100 for p in probs], name=tr("samples.expected"), marker_color=LIGHT,
                marker_line=dict(color=GREY, width=1), hovertemplate="%{x}: %{y:.2f}%<extra></extra>")
    fig.add_bar(x=list(labels), y=[f * 100 for f in freqs], name=tr("samples.observed", n=f"{n:,}"),
                marker_color=ORANGE, hovertemplate="%{x}: %{y:.2f}%<extra></extra>")
    fig.update_layout(barmode="group", title=tr("samples.title", n=f"{n:,}"), legend=INSIDE_LEGEND)
    fig.update_xaxes(title=tr("samples.x"), type="category", tickangle=-45)
    fig.update_yaxes(title=tr("samples.y"), range=[0, max(max(probs), max(freqs)) * 100 * 1.4])
    return fig
