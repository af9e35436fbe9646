"""Figures and the step state of the generation lesson (app_pages/generation.py).

Builders take numbers already computed by lesson_model and a ``tr(key, **fields)`` callable
for translated strings; they draw, they do not compute model results. Token labels arrive
escaped for where they go.

The step state (the generator and the steps taken so far) lives in the session only: each
browser tab steps on its own, and a shared link rebuilds the same steps from its settings
and seed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from course.figures import chart as go
from course.figures import style
from course.figures.chart import make_subplots
from course.figures.tokens import CHIP_COLOURS
from course.text import md_escape
from course.tokens import visible

T = Callable[..., str]
BLUE, ORANGE, GREEN, VERMILION, SKY, PURPLE, YELLOW = style.OKABE_ITO[:7]
GREY = "#9ca3af"
LIGHT = "#e5e7eb"


# --------------------------------------------------------------------------- text

def running_text(prompt: str, pieces: Sequence[str], newest: bool) -> str:
    """Markdown: the prompt in grey, then each generated token as a chip (the newest in bold)."""
    def esc(text: str) -> str:
        return md_escape(text.replace("\r", "").replace("\n", "↵")) if text.strip() else md_escape(visible(text))

    out = [f":gray[{esc(prompt)}]"] if prompt else []
    for i, piece in enumerate(pieces):
        chip = f":{CHIP_COLOURS[i % 2]}-background[{esc(piece)}]"
        out.append(f"**{chip}**" if newest and i == len(pieces) - 1 else chip)
    return " ".join(out)


# --------------------------------------------------------------------------- charts

def candidates_figure(tr: T, labels: Sequence[str], p_model: Sequence[float], p_final: Sequence[float],
                      chosen: int | None, greedy: bool, title_key: str = "cand.title") -> go.Figure:
    """This step's candidates: the model's probability and the one sampling used; the chosen one marked
    (chosen=None: before the choice, nothing marked)."""
    fig = go.Figure()
    fig.add_bar(y=list(labels), x=[p * 100 for p in p_model], orientation="h", name=tr("cand.model"),
                marker_color=LIGHT, marker_line=dict(color=GREY, width=1),
                hovertemplate="%{y}: %{x:.2f}%<extra></extra>")
    if not greedy:
        fig.add_bar(y=list(labels), x=[p * 100 for p in p_final], orientation="h", name=tr("cand.final"),
                    marker_color=[ORANGE if i == chosen else BLUE for i in range(len(labels))],
                    hovertemplate="%{y}: %{x:.2f}%<extra></extra>")
    else:
        fig.data[0]["marker"]["color"] = [ORANGE if i == chosen else LIGHT for i in range(len(labels))]
    values = p_final if not greedy else p_model
    top = max(values) * 100 if greedy else max(max(p_model), max(p_final)) * 100
    if chosen is not None:
        if values[chosen] * 100 > 0.6 * top:     # a long bar: the label inside its end, never past the edge
            fig.add_annotation(y=labels[chosen], x=values[chosen] * 100, text=tr("cand.chosen"), showarrow=False,
                               xanchor="right", xshift=-4, font=dict(color="#ffffff"), bgcolor=VERMILION)
        else:
            fig.add_annotation(y=labels[chosen], x=values[chosen] * 100, text=tr("cand.chosen"), showarrow=True,
                               arrowhead=2, ax=40, ay=0, xanchor="left", font=dict(color=VERMILION))
    fig.update_layout(barmode="group", title=tr(title_key), bargap=0.25,
                      legend=dict(orientation="h", x=0, y=style.legend_below(-0.2), yanchor="top"))
    fig.update_yaxes(autorange="reversed", type="category", title=tr("cand.y"))
    fig.update_xaxes(title=tr("cand.x"), range=[0, top * 1.3])
    return fig


def kv_grid_figure(tr: T, n_prompt: int, n_new: int, n_layers: int, x_labels: Sequence[str], per_layer_kb: float,
                   computed_now: int) -> go.Figure:
    """What the KV cache holds at this step: layers x positions, coloured by where each entry came from.

    The last `computed_now` positions were computed in this step (1 with the cache, after the first step).
    """
    n = n_prompt + n_new
    kinds = []      # 0 prompt (cached), 1 generated (cached), 2 computed this step
    for pos in range(n):
        kinds.append(2 if pos >= n - computed_now else (0 if pos < n_prompt else 1))
    z = [kinds for _ in range(n_layers)]
    scale = [[0, LIGHT], [0.33, LIGHT], [0.33, SKY], [0.66, SKY], [0.66, VERMILION], [1, VERMILION]]
    names = [tr("kv.kind_prompt"), tr("kv.kind_generated"), tr("kv.kind_new")]
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, column_widths=[0.8, 0.2], horizontal_spacing=0.02,
                        subplot_titles=("", tr("kv.kb_title")))
    fig.update_layout(title=tr("kv.grid_title", n=n))     # the figure's title, so it wraps on a narrow screen
    fig.add_trace(go.Heatmap(
        z=z, x=list(range(n)), y=list(range(n_layers)), zmin=0, zmax=2, colorscale=scale, showscale=False,
        xgap=1, ygap=1, customdata=[[names[k] for k in kinds] for _ in range(n_layers)],
        hovertemplate=tr("kv.hover") + "<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=[per_layer_kb] * n_layers, y=list(range(n_layers)), orientation="h", marker_color=BLUE,
                         hovertemplate=tr("kv.kb_hover") + "<extra></extra>", showlegend=False), row=1, col=2)
    for colour, name in ((LIGHT, names[0]), (SKY, names[1]), (VERMILION, names[2])):   # legend swatches
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", marker=dict(size=14, color=colour, symbol="square"),
                                 name=name), row=1, col=1)
    step = max(1, n // 16)
    fig.update_xaxes(tickvals=list(range(0, n, step)), ticktext=[x_labels[i] for i in range(0, n, step)],
                     tickangle=-45, title=tr("kv.x"), row=1, col=1)
    fig.update_xaxes(title=tr("kv.kb_x"), row=1, col=2, range=[0, per_layer_kb * 1.15 if per_layer_kb else 1])
    fig.update_yaxes(title=tr("kv.y"), autorange="reversed", row=1, col=1, dtick=5)
    fig.update_layout(legend=dict(orientation="h", x=0, y=-0.32, yanchor="top"))
    return fig


def timing_figure(tr: T, on_ms: Sequence[float], off_ms: Sequence[float], on_pos: Sequence[int],
                  off_pos: Sequence[int]) -> go.Figure:
    """Per-step time with and without the cache (top) and positions computed per step (bottom)."""
    steps = list(range(1, len(on_ms) + 1))
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.6, 0.4],
                        subplot_titles=(tr("time.ms_title"), tr("time.pos_title")))
    fig.add_scatter(x=steps, y=list(on_ms), mode="lines+markers", name=tr("time.on"), row=1, col=1,
                    line=dict(color=BLUE, width=2.5), marker=dict(symbol="circle"),
                    hovertemplate=tr("time.hover_ms") + "<extra>" + tr("time.on") + "</extra>")
    fig.add_scatter(x=steps[:len(off_ms)], y=list(off_ms), mode="lines+markers", name=tr("time.off"), row=1, col=1,
                    line=dict(color=VERMILION, width=2.5, dash="dash"), marker=dict(symbol="square"),
                    hovertemplate=tr("time.hover_ms") + "<extra>" + tr("time.off") + "</extra>")
    fig.add_bar(x=steps, y=list(on_pos), name=tr("time.on"), marker_color=BLUE, row=2, col=1, showlegend=False,
                hovertemplate=tr("time.hover_pos") + "<extra>" + tr("time.on") + "</extra>")
    fig.add_bar(x=steps[:len(off_pos)], y=list(off_pos), name=tr("time.off"), marker_color=VERMILION, row=2, col=1,
                showlegend=False, hovertemplate=tr("time.hover_pos") + "<extra>" + tr("time.off") + "</extra>")
    fig.update_layout(barmode="group", legend=dict(orientation="h", x=0, y=1.12, yanchor="bottom"))
    fig.update_yaxes(title=tr("time.ms_y"), rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title=tr("time.pos_y"), rangemode="tozero", row=2, col=1)
    fig.update_xaxes(title=tr("time.x"), row=2, col=1, dtick=max(1, len(steps) // 16))
    fig.update_xaxes(range=[0.4, len(steps) + 0.6])
    return fig


# Cell kinds of the speculative-decoding grid.
ACCEPTED, REJECTED, UNCHECKED, CORRECTION, BONUS, EMPTY = range(6)
SPEC_COLOURS = {ACCEPTED: GREEN, REJECTED: VERMILION, UNCHECKED: "#f3c9b5", CORRECTION: BLUE, BONUS: PURPLE,
                EMPTY: "#ffffff"}


def speculative_figure(tr: T, rows: Sequence[Sequence[tuple[int, str, str]]], draft_len: int) -> go.Figure:
    """Rounds x slots: each guess coloured accepted / rejected / not checked, then the full model's own token.

    rows[r] is a list of draft_len + 1 cells (kind, label, hover) for round r, label/hover already escaped;
    the last cell is the full model's own token.
    """
    n_cols = draft_len + 1
    kinds = sorted(SPEC_COLOURS)
    z, text, hover = [], [], []
    for row in rows:
        padded = list(row) + [(EMPTY, "", "")] * (n_cols - len(row))
        z.append([k for k, _, _ in padded])
        text.append([lab for _, lab, _ in padded])
        hover.append([h for _, _, h in padded])
    top = len(kinds) - 1
    scale = []
    for k in kinds:
        scale += [[k / top - (0.5 / top if k else 0), SPEC_COLOURS[k]], [min(1, k / top + 0.5 / top), SPEC_COLOURS[k]]]
    scale[0][0], scale[-1][0] = 0, 1
    fig = go.Figure(go.Heatmap(
        z=z, x=[tr("spec.slot", i=i + 1) for i in range(draft_len)] + [tr("spec.own")], y=[tr("spec.round", r=r + 1) for r in range(len(rows))],
        zmin=0, zmax=top, colorscale=scale, showscale=False, xgap=3, ygap=3, text=text,
        texttemplate="%{text}", textfont=dict(size=14, family=style.MONO), customdata=hover,
        hovertemplate="%{customdata}<extra></extra>"))
    legend = ((ACCEPTED, "spec.kind_accepted"), (REJECTED, "spec.kind_rejected"), (UNCHECKED, "spec.kind_unchecked"),
              (CORRECTION, "spec.kind_correction"), (BONUS, "spec.kind_bonus"))
    for kind, key in legend:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=tr(key),
                                 marker=dict(size=14, color=SPEC_COLOURS[kind], symbol="square")))
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(side="top", title=tr("spec.x"), type="category")
    fig.update_layout(legend=dict(orientation="h", x=0, y=-0.02, yanchor="top"), plot_bgcolor="#ffffff")
    return fig
