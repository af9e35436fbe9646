"""Figures for the attention lesson (app_pages/attention.py). Each builder takes plain numbers,
already-escaped token labels and ``tr`` (the page's translation function), and returns a
plotly Figure; the page draws it with course.theme.plot."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from course.figures import chart as go
from course.figures import style
from course.figures.chart import make_subplots

Tr = Callable[..., str]
GREY = "#9ca3af"
QUERY_COLOUR = style.OKABE_ITO[3]      # vermillion: the query token, everywhere on the page
KEY_COLOUR = style.OKABE_ITO[0]        # blue: keys, scores, weights
SCALE_OFF_COLOUR = style.OKABE_ITO[1]  # orange: the what-if without the scale


def _vec_hover(tr: Tr) -> str:
    return f"%{{y}} · {tr('fig.dim_word')} %{{x}}: %{{z:.3f}}<extra></extra>"


def _cost_hover(tr: Tr) -> str:
    return f"{tr('fig.length_axis')}: %{{x:,}}<br>%{{y:.2f}} {tr('fig.billion')}<extra></extra>"


def _row_height(n: int, per_row: int = 26, base: int = 140) -> int:
    return base + per_row * n


def rows_height(rows: int) -> int:
    """Height of a chart with one heatmap row per token: 22 px a row, 15 on a long prompt
    (the labels then thin out instead of the chart growing past a screen and a half)."""
    return max(320, 170 + (22 if rows <= 24 else 15) * rows)


ALL_LABELS_UP_TO = 16   # bars; a longer row labels only its largest weights
LABELLED_TOP = 6


def weight_texts(weights: Sequence[float]) -> list[str]:
    """Value labels for the softmax bars, readable at any prompt length: every bar while
    there are few (one decimal), else only the LABELLED_TOP largest weights of at least
    1% (whole percent), so that the labels keep their size instead of shrinking to the
    width of a bar."""
    values = [float(w) for w in weights]
    if len(values) <= ALL_LABELS_UP_TO:
        return [f"{v:.1%}" for v in values]
    top = set(sorted(range(len(values)), key=lambda i: -values[i])[:LABELLED_TOP])
    return [f"{v:.0%}" if i in top and v >= 0.01 else "" for i, v in enumerate(values)]


def qk_figure(q: Sequence[float], keys: Sequence[Sequence[float]], key_labels: list[str],
              query_label: str, tr: Tr) -> go.Figure:
    """Step 1: the query vector above the key vectors it is compared with (each a row of
    d_head numbers after RoPE), on one diverging colour scale."""
    n, d = len(keys), len(q)
    bound = max(max(abs(float(v)) for v in q), max(abs(float(v)) for row in keys for v in row)) or 1.0
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        row_heights=[1.4 / (n + 1.4), n / (n + 1.4)])
    common = dict(colorscale=style.DIVERGING, zmid=0, zmin=-bound, zmax=bound, xgap=0, ygap=1)
    fig.add_trace(go.Heatmap(z=[list(map(float, q))], x=list(range(d)), y=[query_label], showscale=False,
                             hovertemplate=_vec_hover(tr), **common), 1, 1)
    fig.add_trace(go.Heatmap(z=[list(map(float, row)) for row in keys], x=list(range(d)), y=key_labels,
                             colorbar=dict(title=dict(text=tr("fig.value"), side="right"), thickness=14),
                             hovertemplate=_vec_hover(tr), **common), 2, 1)
    fig.update_yaxes(type="category", autorange="reversed", row=2, col=1, title=tr("fig.keys_axis"))
    fig.update_yaxes(type="category", row=1, col=1, title=tr("fig.query_axis"), tickfont=dict(color=QUERY_COLOUR))
    fig.update_xaxes(title=tr("fig.dim_axis", last=d - 1), row=2, col=1)
    fig.update_layout(title=tr("fig.qk_title"))
    return fig


def score_steps_figure(raw: Sequence[float], scaled: Sequence[float], weights: Sequence[float],
                       labels: list[str], query: int, d_head: int, tr: Tr) -> go.Figure:
    """Steps 2-5 on one shared token axis: q . k, divided by sqrt(d_head), the causal mask,
    softmax. Positions after the query are shown as masked (no bar, a "-inf" mark)."""
    n = len(labels)
    allowed = list(range(query + 1))
    future = list(range(query + 1, n))
    titles = [tr("fig.step_raw"), tr("fig.step_scaled", s=f"{d_head ** 0.5:g}"),
              tr("fig.step_masked"), tr("fig.step_softmax")]
    fig = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.07, subplot_titles=titles)
    x_allowed = [labels[i] for i in allowed]
    bars = [
        (1, [float(raw[i]) for i in range(n)], labels, ".2f"),
        (2, [float(scaled[i]) for i in range(n)], labels, ".2f"),
        (3, [float(scaled[i]) for i in allowed], x_allowed, ".2f"),
        (4, [float(weights[i]) for i in allowed], x_allowed, ".1%"),
    ]
    for row, values, xs, fmt in bars:
        colours = [QUERY_COLOUR if x == labels[query] else KEY_COLOUR for x in xs]
        if row <= 2:
            colours = [GREY if i > query else c for i, c in enumerate(colours)]
        fig.add_trace(go.Bar(x=xs, y=values, marker_color=colours, showlegend=False,
                             text=weight_texts(values) if row == 4 else None,
                             textposition="outside", cliponaxis=False, constraintext="none",
                             textfont=dict(size=style.FONT_SIZE - 2),
                             hovertemplate=f"%{{x}}: %{{y:{fmt}}}<extra></extra>"), row, 1)
    if future:
        fig.add_trace(go.Scatter(x=[labels[i] for i in future], y=[0] * len(future), mode="text",
                                 text=["−∞"] * len(future), textfont=dict(color=GREY, size=16),
                                 showlegend=False, hovertemplate=tr("fig.masked_hover") + "<extra></extra>"), 3, 1)
    top = max(float(weights[i]) for i in allowed)
    fig.update_yaxes(range=[0, min(1.0, top) * 1.25 + 0.02], row=4, col=1, tickformat=".0%")
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=labels, tickangle=-45 if n > 12 else 0)
    fig.update_xaxes(title=tr("fig.keys_axis"), row=4, col=1)
    # room above the first subplot title (no figure title): the 20 px default cut its top in presenter mode
    fig.update_layout(margin=dict(l=10, r=10, b=10, t=style.room_above_subplot_titles()))
    return fig


def weighted_sum_figure(weighted: Sequence[Sequence[float]], z: Sequence[float], key_labels: list[str],
                        weights: Sequence[float], tr: Tr) -> go.Figure:
    """Step 6: each visible value vector times its weight, and their sum z (the head's
    output at the query)."""
    rows = [list(map(float, r)) for r in weighted] + [list(map(float, z))]
    ys = [f"{lab} × {float(w):.0%}" for lab, w in zip(key_labels, weights)] + [tr("fig.z_row")]
    bound = max(abs(v) for r in rows for v in r) or 1.0
    d = len(z)
    fig = go.Figure(go.Heatmap(z=rows, x=list(range(d)), y=ys, colorscale=style.DIVERGING, zmid=0,
                               zmin=-bound, zmax=bound, ygap=1,
                               colorbar=dict(title=dict(text=tr("fig.value"), side="right"), thickness=14),
                               hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>"))
    fig.add_hline(y=len(ys) - 1.5, line=dict(color="#1f2937", width=2))
    fig.update_yaxes(type="category", autorange="reversed", title=tr("fig.weighted_axis"))
    fig.update_xaxes(title=tr("fig.dim_axis", last=d - 1))
    fig.update_layout(title=tr("fig.sum_title"))
    return fig


def pattern_figure(pattern: Sequence[Sequence[float]], labels: list[str], query: int | None, title: str,
                   tr: Tr) -> go.Figure:
    """The whole pattern of one head: query (rows) x key (columns), the chosen query's row
    outlined (none if query is None). The upper triangle is empty: the causal mask."""
    n = len(labels)
    z = [[float(pattern[i][j]) if j <= i else None for j in range(n)] for i in range(n)]
    fig = go.Figure(go.Heatmap(z=z, x=labels, y=labels, colorscale=style.SEQUENTIAL, zmin=0, zmax=1,
                               colorbar=dict(title=dict(text=tr("fig.weight"), side="right"), tickformat=".0%",
                                             thickness=14),
                               hovertemplate=(f"{tr('fig.queries_axis')}: %{{y}}<br>{tr('fig.keys_axis')}: %{{x}}<br>"
                                              f"{tr('fig.weight')}: %{{z:.1%}}<extra></extra>")))
    if query is not None:
        fig.add_shape(type="rect", x0=-0.5, x1=query + 0.5, y0=query - 0.5, y1=query + 0.5,
                      line=dict(color=QUERY_COLOUR, width=3))
    fig.update_xaxes(type="category", title=tr("fig.keys_axis"), tickangle=-45 if n > 6 else 0)
    fig.update_yaxes(type="category", autorange="reversed", title=tr("fig.queries_axis"))
    fig.update_layout(title=title)
    return fig


LINES_ALL_UP_TO = 16   # the lines view draws every key up to this many ...
LINES_TOP = 12         # ... and beyond, only the keys with the most weight, this many


def lines_figure(weights: Sequence[float], labels: list[str], query: int, tr: Tr) -> tuple[go.Figure, list[int]]:
    """The query (left) with a line to each of the keys it weights most (right), thicker and
    darker for more weight, the keys in text order. Every key of a short prompt, else the
    keys with the most weight (at most LINES_TOP, none under 0.5%), so the chart keeps its
    size on a long prompt; returns (figure, the key positions drawn)."""
    visible = list(range(query + 1))
    if len(visible) <= LINES_ALL_UP_TO:
        keys = visible
    else:   # the largest weights, leaving out those under half a percent (the top one always stays)
        ranked = sorted(visible, key=lambda j: -float(weights[j]))[:LINES_TOP]
        keys = sorted(ranked[:1] + [j for j in ranked[1:] if float(weights[j]) >= 0.005])
    rows = {j: r for r, j in enumerate(keys)}          # one row per drawn key, no gaps
    mid = (len(keys) - 1) / 2
    fig = go.Figure()
    for j in keys:
        w = float(weights[j])
        if w < 0.005:
            continue
        fig.add_trace(go.Scatter(x=[0, 1], y=[mid, rows[j]], mode="lines", showlegend=False,
                                 line=dict(color=KEY_COLOUR, width=1 + 14 * w),
                                 opacity=min(1.0, 0.25 + w), hoverinfo="skip"))
    fig.add_trace(go.Scatter(
        x=[1] * len(keys), y=[rows[j] for j in keys], mode="text",
        text=[f"{labels[j]} {float(weights[j]):.0%}" for j in keys],
        textposition="middle right", showlegend=False, textfont=dict(size=15),
        hovertemplate="%{text}<extra></extra>"))
    fig.add_trace(go.Scatter(x=[0], y=[mid], mode="text", text=[labels[query]], textposition="middle left",
                             textfont=dict(size=16, color=QUERY_COLOUR), showlegend=False, hoverinfo="skip"))
    # x: the query's label left of 0, the lines from 0 to 1, the keys' labels right of 1.
    fig.update_xaxes(visible=False, range=[-0.9, 2.5])
    fig.update_yaxes(visible=False, range=[len(keys) - 0.2, -0.8])
    fig.update_layout(title=tr("fig.lines_title"), height=_row_height(len(keys), 28, 110))
    return fig, keys


def scale_figure(w_scaled: Sequence[float], w_unscaled: Sequence[float], labels: list[str], query: int,
                 d_head: int, tr: Tr) -> go.Figure:
    """The same scores through softmax with and without the division by sqrt(d_head)."""
    xs = labels[: query + 1]
    fig = go.Figure()
    fig.add_bar(x=xs, y=[float(w) for w in w_scaled[: query + 1]], name=tr("fig.with_scale", s=f"{d_head ** 0.5:g}"),
                marker_color=KEY_COLOUR, hovertemplate="%{x}: %{y:.1%}<extra></extra>")
    fig.add_bar(x=xs, y=[float(w) for w in w_unscaled[: query + 1]], name=tr("fig.without_scale"),
                marker_color=SCALE_OFF_COLOUR, marker_pattern_shape="/",
                hovertemplate="%{x}: %{y:.1%}<extra></extra>")
    # The legend sits inside the plot, in the room left above 100%: below the plot it would
    # meet the x-axis title (whose place depends on how long the tilted token labels are),
    # above it the title (which wraps on a narrow screen).
    fig.update_layout(barmode="group", title=tr("fig.scale_title"),
                      legend=dict(orientation="h", x=1, xanchor="right", y=1, yanchor="top",
                                  bgcolor="rgba(255,255,255,0.85)"))
    fig.update_yaxes(title=tr("fig.weight"), tickformat=".0%", range=[0, 1.4],
                     tickvals=[0, 0.2, 0.4, 0.6, 0.8, 1.0])
    # labels tilted past 12 tokens, or fewer where presenter mode draws them larger (9 at 21 px)
    tilt = len(xs) > 12 * style.FONT_SIZE / style.font_px(style.FONT_SIZE)
    fig.update_xaxes(type="category", title=tr("fig.keys_axis"), tickangle=-45 if tilt else 0)
    return fig


def head_weight_bars(names: Sequence[str], weights: Sequence[float], colours, head_axis: str, weight_axis: str,
                     title: str, x_max: float = 1.12) -> go.Figure:
    """Horizontal bars: one head per row (first on top), its attention weight as a percentage."""
    fig = go.Figure(go.Bar(x=[float(w) for w in weights], y=list(names), orientation="h", marker_color=colours,
                           text=[f"{float(w):.0%}" for w in weights], textposition="outside", cliponaxis=False,
                           hovertemplate="%{y}: %{x:.1%}<extra></extra>"))
    fig.update_yaxes(type="category", autorange="reversed", title=head_axis)
    fig.update_xaxes(range=[0, x_max], tickformat=".0%", title=weight_axis)
    fig.update_layout(title=title)
    return fig


def search_figure(hits: Sequence, tr: Tr, title: str) -> go.Figure:
    """The heads with the most attention from one token to another, strongest on top."""
    names = [tr("fig.head_name", layer=h.layer, head=h.head) for h in hits]
    return head_weight_bars(names, [h.weight for h in hits], KEY_COLOUR, tr("fig.head_axis"), tr("fig.weight"), title)


def cost_figure(lengths: Sequence[int], attention: Sequence[float], linear: Sequence[float], n_now: int,
                crossover: int, tr: Tr, sliding: Sequence[float] | None = None, window: int | None = None) -> go.Figure:
    """Work of one block (billions of multiply-adds) vs prompt length: attention grows with
    the square of the length, the matrices linearly; ``sliding``: attention on a sliding-window
    layer, which grows linearly once the prompt passes the ``window``."""
    fig = go.Figure()
    fig.add_scatter(x=list(lengths), y=[a / 1e9 for a in attention], name=tr("fig.cost_attention"),
                    line=dict(color=QUERY_COLOUR, width=3),
                    hovertemplate=_cost_hover(tr))
    if sliding is not None:
        fig.add_scatter(x=list(lengths), y=[a / 1e9 for a in sliding], name=tr("fig.cost_sliding", w=f"{window:,}"),
                        line=dict(color=style.OKABE_ITO[2], width=3, dash="dot"), hovertemplate=_cost_hover(tr))
    fig.add_scatter(x=list(lengths), y=[b / 1e9 for b in linear], name=tr("fig.cost_linear"),
                    line=dict(color=KEY_COLOUR, width=3, dash="dash"),
                    hovertemplate=_cost_hover(tr))
    if crossover <= lengths[-1]:
        # a line below "your prompt", on the side of the line with room: at the top it met that label
        # when the crossover is early on the axis (Gemma), and on the left it stretched the axis below 0
        fig.add_vline(x=crossover, line=dict(color=GREY, dash="dot"),
                      annotation_text=tr("fig.crossover", n=f"{crossover:,}"),
                      annotation_position="top left" if crossover > lengths[-1] / 2 else "top right",
                      annotation_yshift=-round(style.font_px(style.FONT_SIZE) * 1.5))
    fig.add_vline(x=n_now, line=dict(color=style.OKABE_ITO[2], width=2),
                  annotation_text=tr("fig.your_prompt", n=n_now), annotation_position="top right")
    fig.update_xaxes(title=tr("fig.length_axis"))
    fig.update_yaxes(title=tr("fig.cost_axis"))
    fig.update_layout(title=tr("fig.cost_title"), legend=dict(orientation="h", y=-0.25))
    return fig


def window_figure(pooled: Sequence, pool: int, n: int, window: int, titles: Sequence[str], tr: Tr) -> go.Figure:
    """The patterns of a sliding-window layer and a global layer on one long prompt, side by
    side: each cell the largest head-mean weight in a pool x pool block of (query, key)
    positions, on a log colour scale; a cell whose weights are all exactly 0 is left blank.
    The dashed line marks keys ``window`` positions behind the query."""
    import math
    fig = make_subplots(rows=1, cols=len(pooled), shared_yaxes=True, horizontal_spacing=0.04, subplot_titles=titles)
    centres = [i * pool + (pool - 1) / 2 for i in range(pooled[0].shape[0])]
    positive = [float(v) for grid in pooled for row in grid.tolist() for v in row if v > 0]
    low = math.floor(math.log10(max(min(positive), 1e-12))) if positive else -6
    low = max(low, -8)
    for col, grid in enumerate(pooled, start=1):
        z = [[math.log10(float(v)) if v > 0 else None for v in row] for row in grid.tolist()]
        fig.add_trace(go.Heatmap(z=z, x=centres, y=centres, colorscale=style.SEQUENTIAL, zmin=low, zmax=0,
                                 showscale=col == len(pooled),
                                 colorbar=dict(title=dict(text=tr("fig.window_colour"), side="right"), thickness=14,
                                               tickvals=list(range(low, 1, 2)),
                                               ticktext=[f"1e{v}" if v < 0 else "1" for v in range(low, 1, 2)]),
                                 hovertemplate=(f"{tr('fig.queries_axis')}: %{{y:.0f}}<br>{tr('fig.keys_axis')}: %{{x:.0f}}"
                                                "<br>log10: %{z:.1f}<extra></extra>")), 1, col)
        fig.add_trace(go.Scatter(x=[0, n - window], y=[window, n], mode="lines", showlegend=False, hoverinfo="skip",
                                 line=dict(color=QUERY_COLOUR, width=2, dash="dash")), 1, col)
        fig.update_xaxes(title=tr("fig.window_key_axis"), range=[0, n], row=1, col=col)
    fig.update_yaxes(title=tr("fig.window_query_axis"), autorange="reversed", range=[n, 0], row=1, col=1)
    fig.update_layout(title=tr("fig.window_title", n=f"{n:,}"))
    return fig
