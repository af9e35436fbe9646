"""Figures for lesson 2 (embeddings): row strips, neighbour bars, analogy bars, the PCA map,
cosine heatmaps. Every visible word comes in as an argument; token text is escaped here."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
import torch

from ui import theme
from ui.tokens import plot_label

# Word groups for the map: every word, with a leading space, is one token of SmolLM2's
# vocabulary (checked by tests/test_page_embeddings.py). Data, the same in every language.
GROUPS: dict[str, list[str]] = {
    "numbers": "one two three four five six seven eight nine ten".split(),
    "days": "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split(),
    "months": "January February March April May June July August September October November December".split(),
    "countries": "France Germany Italy Japan China Spain Russia England Canada Egypt".split(),
    "capitals": "Paris Berlin Rome Tokyo Beijing Madrid Moscow London Ottawa Cairo".split(),
    "animals": "cat dog horse cow sheep lion tiger bird fish mouse rabbit".split(),
    "colours": "red blue green yellow black white purple orange".split(),
}
MAPS: dict[str, list[str]] = {
    "capitals": ["countries", "capitals"],
    "time": ["numbers", "days", "months"],
    "nature": ["animals", "colours"],
}

# Analogies a - b + c = expected, as one-token words (with a leading space). Which of them
# work on this model is not assumed: the page shows each one's computed rank.
ANALOGIES: list[tuple[str, str, str, str]] = [
    ("king", "man", "woman", "queen"),
    ("Paris", "France", "Germany", "Berlin"),
    ("Paris", "France", "Italy", "Rome"),
    ("walking", "walk", "swim", "swimming"),
    ("cats", "cat", "dog", "dogs"),
    ("bigger", "big", "small", "smaller"),
    ("his", "he", "she", "her"),
    ("went", "go", "see", "saw"),
    ("puppy", "dog", "cat", "kitten"),
    ("pizza", "Italy", "Japan", "sushi"),
    ("father", "man", "woman", "mother"),
]


def strip_figure(rows: torch.Tensor, labels: Sequence[str], title: str, x_title: str,
                 colorbar_title: str) -> go.Figure:
    """Embedding rows [n, d] as barcode strips, one row per token (diverging colours, 0 white)."""
    z = rows.float().numpy()
    bound = float(rows.abs().max()) or 1.0
    fig = go.Figure(go.Heatmap(
        z=z, y=list(labels), x=list(range(rows.shape[1])), colorscale=theme.DIVERGING, zmid=0,
        zmin=-bound, zmax=bound, colorbar=dict(title=dict(text=colorbar_title, side="right"), thickness=14),
        hovertemplate="%{y}<br>" + x_title + " %{x}: %{z:.3f}<extra></extra>", ygap=6,
    ))
    fig.update_layout(title=title)
    fig.update_xaxes(title=x_title, showgrid=False)
    fig.update_yaxes(type="category", autorange="reversed", showgrid=False)
    return fig


def bar_figure(labels: Sequence[str], values: Sequence[float], title: str, x_title: str,
               highlight: int | None = None, ids: Sequence[int] | None = None, hover_id: str = "id") -> go.Figure:
    """Horizontal bars, best first, values printed on the bars (cosines)."""
    colours = [theme.OKABE_ITO[1] if i == highlight else theme.OKABE_ITO[0] for i in range(len(values))]
    fig = go.Figure(go.Bar(
        x=list(values), y=list(labels), orientation="h", marker_color=colours,
        text=[f"{v:.3f}" for v in values], textposition="outside", cliponaxis=False,
        customdata=list(ids) if ids is not None else None,
        hovertemplate="%{y}: %{x:.3f}" + (f"<br>{hover_id} %{{customdata}}" if ids is not None else "") + "<extra></extra>",
    ))
    lo = min(0.0, min(values, default=0.0))
    fig.update_layout(title=title)
    fig.update_xaxes(title=x_title, range=[lo, max(values, default=1.0) * 1.18])
    fig.update_yaxes(type="category", autorange="reversed")
    return fig


def map_figure(coords: torch.Tensor, words: Sequence[str], groups: Sequence[str], group_names: dict[str, str],
               axis_titles: Sequence[str], title: str, pairs: Sequence[tuple[int, int]] = ()) -> go.Figure:
    """Labelled points coloured by group (2-D or 3-D), with optional lines between pairs."""
    three = coords.shape[1] >= 3
    positions = label_positions(coords[:, :2])
    fig = go.Figure()
    order = list(dict.fromkeys(groups))
    for g_index, g in enumerate(order):
        idx = [i for i, gg in enumerate(groups) if gg == g]
        pts = coords[idx]
        common = dict(mode="markers+text", name=group_names.get(g, g), text=[plot_label(words[i], 14) for i in idx],
                      textposition="top center" if three else [positions[i] for i in idx],
                      textfont=dict(size=theme.FONT_SIZE - 2), hovertemplate="%{text}<extra>" + group_names.get(g, g) + "</extra>",
                      marker=dict(size=9 if not three else 5, color=theme.OKABE_ITO[g_index % len(theme.OKABE_ITO)],
                                  symbol=["circle", "square", "diamond", "triangle-up", "x", "cross", "star"][g_index % 7]
                                  if not three else "circle"))
        if three:
            fig.add_scatter3d(x=pts[:, 0].tolist(), y=pts[:, 1].tolist(), z=pts[:, 2].tolist(), **common)
        else:
            fig.add_scatter(x=pts[:, 0].tolist(), y=pts[:, 1].tolist(), **common)
    for a, b in pairs:
        line = dict(mode="lines", showlegend=False, hoverinfo="skip", line=dict(color="#9ca3af", width=1.5))
        if three:
            fig.add_scatter3d(x=[float(coords[a, 0]), float(coords[b, 0])], y=[float(coords[a, 1]), float(coords[b, 1])],
                              z=[float(coords[a, 2]), float(coords[b, 2])], **line)
        else:
            fig.add_scatter(x=[float(coords[a, 0]), float(coords[b, 0])], y=[float(coords[a, 1]), float(coords[b, 1])],
                            **line)
    fig.update_layout(title=title, legend=dict(itemsizing="constant"))
    if three:
        fig.update_layout(scene=dict(xaxis_title=axis_titles[0], yaxis_title=axis_titles[1], zaxis_title=axis_titles[2]))
    else:
        fig.update_xaxes(title=axis_titles[0], zeroline=False)
        fig.update_yaxes(title=axis_titles[1], zeroline=False, scaleanchor="x", scaleratio=1)
    return fig


def label_positions(xy: torch.Tensor) -> list[str]:
    """Where to put each point's label so that close neighbours do not print on top of each
    other: above by default, below when another point sits just above, and to the side
    when both are taken (a small greedy pass, good enough for a few dozen points)."""
    n = xy.shape[0]
    if n == 0:
        return []
    span = (xy.max(dim=0).values - xy.min(dim=0).values).clamp_min(1e-9)
    near_x, near_y = 0.14 * float(span[0]), 0.07 * float(span[1])
    out = []
    for i in range(n):
        dx = (xy[:, 0] - xy[i, 0]).abs()
        dy = xy[:, 1] - xy[i, 1]
        close = (dx < near_x) & (torch.arange(n) != i)
        above = bool((close & (dy > 0) & (dy < near_y)).any())
        below = bool((close & (dy < 0) & (dy > -near_y)).any())
        if not above:
            out.append("top center")
        elif not below:
            out.append("bottom center")
        else:
            out.append("middle right")
    return out


def cosine_heatmap(matrix: torch.Tensor, x_labels: Sequence[str], y_labels: Sequence[str], title: str,
                   x_title: str, y_title: str, colorbar_title: str, show_values: bool = False) -> go.Figure:
    """A cosine-similarity matrix (-1..1, diverging, 0 white), token labels on both axes."""
    z = matrix.float().numpy()
    heat = go.Heatmap(z=z, x=list(x_labels), y=list(y_labels), colorscale=theme.DIVERGING, zmid=0, zmin=-1, zmax=1,
                      colorbar=dict(title=dict(text=colorbar_title, side="right"), thickness=14),
                      hovertemplate="%{y} · %{x}: %{z:.3f}<extra></extra>")
    if show_values:
        heat.update(text=[[f"{v:.2f}" for v in row] for row in z], texttemplate="%{text}",
                    textfont=dict(size=theme.FONT_SIZE - 3))
    fig = go.Figure(heat)
    fig.update_layout(title=title)
    fig.update_xaxes(title=x_title, type="category", tickangle=-45 if len(x_labels) > 8 else 0)
    fig.update_yaxes(title=y_title, type="category", autorange="reversed")
    return fig
