"""Figures for the multi-head / GQA / KV cache lesson (app_pages/heads.py). Builders take plain
numbers, escaped labels and ``tr`` (the page's translation function)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from course.figures import chart as go
from course.figures import style
from course.figures.chart import make_subplots
from course.figures.diagrams import STREAMLIT_DOT_TEXT

Tr = Callable[..., str]
SELECTED = style.OKABE_ITO[3]     # vermillion outline: the open head
GREY = "#9ca3af"
SQUARE = 18                       # px: one head in the layer x head map


def fmt_measure(measure: str, value: float) -> str:
    """A measure's value as text: entropy in bits, the others as a percentage."""
    if value != value:   # NaN
        return "–"
    return f"{value:.2f}" if measure == "entropy" else f"{value:.0%}"


def layer_grid_figure(patterns: Sequence, layer: int, group_size: int, values: Sequence[float], measure: str,
                      selected_head: int, labels: list[str], tr: Tr) -> go.Figure:
    """All heads of one layer as small patterns, one row per K/V group (heads in a row
    share keys and values), each titled with the chosen measure."""
    n_heads = len(patterns)
    rows = math.ceil(n_heads / group_size)
    titles = [tr("fig.small_title", head=f"{layer}.{h}", value=fmt_measure(measure, float(values[h])))
              for h in range(n_heads)]
    fig = make_subplots(rows=rows, cols=group_size, subplot_titles=titles, horizontal_spacing=0.04,
                        vertical_spacing=0.09, row_titles=[tr("fig.group_row", g=g) for g in range(rows)])
    n = len(labels)
    hover = (f"{tr('fig.queries_axis')}: %{{y}}<br>{tr('fig.keys_axis')}: %{{x}}<br>"
             f"{tr('fig.weight')}: %{{z:.1%}}<extra></extra>")
    for h, pattern in enumerate(patterns):
        row, col = h // group_size + 1, h % group_size + 1
        z = [[float(pattern[i][j]) if j <= i else None for j in range(n)] for i in range(n)]
        fig.add_trace(go.Heatmap(z=z, x=labels, y=labels, colorscale=style.SEQUENTIAL, zmin=0, zmax=1,
                                 showscale=False, hovertemplate=hover), row, col)
        if h == selected_head:
            axis = "" if h == 0 else str(h + 1)
            fig.add_shape(type="rect", xref=f"x{axis} domain", yref=f"y{axis} domain", x0=-0.02, x1=1.02,
                          y0=-0.02, y1=1.02, line=dict(color=SELECTED, width=4))
    fig.update_xaxes(type="category", showticklabels=False, showgrid=False)
    fig.update_yaxes(type="category", showticklabels=False, autorange="reversed", showgrid=False)
    fig.update_annotations(font_size=15)
    # room above the first row's titles and right of the K/V row titles (no figure title; the
    # default 20 px at the top and 10 at the right cut them in presenter mode's larger type)
    title_px = style.font_px(15)
    fig.update_layout(margin=dict(l=10, r=round(title_px * 1.4), b=10, t=round(title_px * 1.5)))
    return fig


def overview_figure(grid: Sequence[Sequence[float]], measure: str, selected: tuple[int, int], tr: Tr,
                    title: str) -> go.Figure:
    """Layer x head, one square per head coloured by the measure (grey where it has no
    value); clickable (the page passes on_select), the open head outlined (the last trace)."""
    n_layers, n_heads = len(grid), len(grid[0])
    xs, ys, cs, custom, text = [], [], [], [], []
    for layer in range(n_layers):
        for head in range(n_heads):
            v = float(grid[layer][head])
            xs.append(head)
            ys.append(layer)
            cs.append(v if v == v else None)
            custom.append([layer, head])
            text.append(fmt_measure(measure, v))
    finite = [c for c in cs if c is not None]
    cmax = max(finite) if finite and measure == "entropy" else 1.0
    # The colour bar lies under the map: beside it, it left the squares too little room in a
    # narrow column (at 1024 px the nine head ticks ran together). It sits at the foot of the
    # figure (yref="container"), not a share of the plot's height below it: on Gemma's shorter
    # map that share put its title over the axis title.
    colour = dict(color=[c if c is not None else 0 for c in cs], colorscale=style.SEQUENTIAL, cmin=0, cmax=cmax,
                  colorbar=dict(title=dict(text=tr(f"fig.measure.{measure}"), side="top"), thickness=12,
                                orientation="h", y=0, yref="container", yanchor="bottom", ypad=8,
                                len=1, lenmode="fraction",
                                tickformat=".0%" if measure != "entropy" else None))
    fig = go.Figure(go.Scatter(
        x=xs, y=ys, mode="markers", customdata=custom, text=text,
        marker=dict(symbol="square", size=SQUARE, line=dict(width=0), **colour),
        hovertemplate=f"{tr('fig.head_word')} %{{y}}.%{{x}}: %{{text}}<extra></extra>"))
    empty = [i for i, c in enumerate(cs) if c is None]     # no value (one-token prompt, no repeats): grey
    if empty:
        fig.add_scatter(x=[xs[i] for i in empty], y=[ys[i] for i in empty], mode="markers", showlegend=False,
                        customdata=[custom[i] for i in empty], text=[text[i] for i in empty],
                        marker=dict(symbol="square", size=SQUARE, color=GREY, line=dict(width=0)),
                        hovertemplate=f"{tr('fig.head_word')} %{{y}}.%{{x}}: %{{text}}<extra></extra>")
    layer, head = selected
    fig.add_scatter(x=[head], y=[layer], mode="markers", hoverinfo="skip", showlegend=False,
                    marker=dict(symbol="square-open", size=SQUARE + 6, color=SELECTED,      # an open symbol takes
                                line=dict(color=SELECTED, width=3)))                         # marker.color
    fig.update_xaxes(title=tr("fig.head_axis"), tickmode="linear", dtick=1, range=[-0.6, n_heads - 0.4],
                     showgrid=False, zeroline=False)
    fig.update_yaxes(title=tr("fig.layer_axis"), tickmode="linear", dtick=2, range=[n_layers - 0.4, -0.6],
                     showgrid=False, zeroline=False)
    fig.update_layout(title=title, showlegend=False, clickmode="event+select", dragmode=False,
                      margin=dict(l=10, r=10, t=60, b=140))      # the colour bar sits in the bottom margin
    return fig


def slices_figure(share: Sequence[Sequence[float]], bounds: Sequence[tuple[int, int]], tr: Tr) -> go.Figure:
    """heads x input chunks (one chunk per head, ``bounds`` = [(start, end)], end exclusive):
    the share of each head's W_Q that each chunk of input numbers carries. The "slicing"
    misconception predicts a bright diagonal."""
    n_heads = len(share)
    xs = [f"{start}–{end - 1}" for start, end in bounds]
    ys = [str(h) for h in range(n_heads)]
    fig = go.Figure(go.Heatmap(z=[[float(v) for v in row] for row in share], x=xs, y=ys, colorscale=style.SEQUENTIAL,
                               zmin=0, zmax=1, text=[[f"{float(v):.0%}" for v in row] for row in share],
                               texttemplate="%{text}", textfont=dict(size=14),
                               colorbar=dict(title=dict(text=tr("fig.share"), side="right"), tickformat=".0%",
                                             thickness=12),
                               hovertemplate=f"{tr('fig.head_word')} %{{y}}, %{{x}}: %{{z:.1%}}<extra></extra>"))
    fig.update_xaxes(type="category", title=tr("fig.chunk_axis"), tickangle=-30)
    fig.update_yaxes(type="category", autorange="reversed", title=tr("fig.qhead_axis"))
    fig.update_layout(title=tr("fig.slices_title"))
    return fig


def group_weights_figure(weights: Sequence[Sequence[float]], heads: Sequence[int], layer: int, labels: list[str],
                         tr: Tr, title: str) -> go.Figure:
    """The query token's attention weights in each head of one K/V group: same keys,
    different queries, different weights."""
    fig = go.Figure()
    for colour, head, w in zip(style.OKABE_ITO, heads, weights):
        fig.add_bar(x=labels, y=[float(v) for v in w], name=tr("fig.head_legend", head=f"{layer}.{head}"),
                    marker_color=colour, hovertemplate="%{x}: %{y:.1%}<extra></extra>")
    fig.update_layout(barmode="group", title=title,
                      legend=dict(orientation="h", y=0.99, yanchor="top", x=0.99, xanchor="right",
                                  bgcolor="rgba(255,255,255,0.8)"))
    fig.update_xaxes(type="category", title=tr("fig.keys_axis"), tickangle=-45 if len(labels) > 10 else 0)
    # the legend lies in the room above 100%: in presenter mode's type it takes two lines, so more room
    top = 1.05 if style.font_px(style.FONT_SIZE) == style.FONT_SIZE else 1.35
    fig.update_yaxes(title=tr("fig.weight"), tickformat=".0%", range=[0, top], tickvals=[0, 0.2, 0.4, 0.6, 0.8, 1.0])
    return fig


def kv_memory_figure(series: Sequence[tuple[str, Sequence[float], str, str]], contexts: Sequence[int],
                     context: int, tr: Tr) -> go.Figure:
    """KV cache size (GiB) vs context length, one line per model (log-log)."""
    fig = go.Figure()
    for name, gib, colour, dash in series:
        fig.add_scatter(x=list(contexts), y=list(gib), name=name, mode="lines", line=dict(color=colour, width=3,
                                                                                              dash=dash),
                        hovertemplate=f"{name}<br>%{{x:,}} {tr('fig.tokens_word')}: %{{y:.3g}} GiB<extra></extra>")
    fig.add_vline(x=context, line=dict(color=GREY, dash="dot"),
                  annotation_text=tr("fig.context_mark", n=f"{context:,}"), annotation_position="top left")
    fig.update_xaxes(type="log", title=tr("fig.context_axis"))
    fig.update_yaxes(type="log", title=tr("fig.memory_axis"))
    fig.update_layout(title=tr("fig.memory_title"), legend=dict(orientation="h", y=style.legend_below(), yanchor="top"))
    return fig


def kv_layers_figure(needed: Sequence[int], stored: int, sliding: Sequence[bool], tr: Tr,
                     title: str) -> go.Figure:
    """Per layer, the positions a KV cache holds for one sequence: what this app's KVCache
    stores (every position, grey, behind) and what the layer's attention can still see
    (global layers all of them, sliding-window layers at most the window)."""
    xs = [str(layer) for layer in range(len(needed))]
    fig = go.Figure()
    fig.add_bar(x=xs, y=[stored] * len(xs), name=tr("fig.stored"), marker_color="#d1d5db",
                hovertemplate=f"{tr('fig.layer_axis')} %{{x}}: %{{y:,}}<extra></extra>")
    for is_sliding, name, colour in ((False, tr("fig.needed_global"), style.OKABE_ITO[3]),
                                     (True, tr("fig.needed_sliding"), style.OKABE_ITO[0])):
        picked = [i for i, s in enumerate(sliding) if bool(s) == is_sliding]
        if picked:
            fig.add_bar(x=[xs[i] for i in picked], y=[needed[i] for i in picked], name=name, marker_color=colour,
                        width=0.5, hovertemplate=f"{tr('fig.layer_axis')} %{{x}}: %{{y:,}}<extra></extra>")
    fig.update_layout(barmode="overlay", title=title, legend=dict(orientation="h", y=style.legend_below(), yanchor="top"))
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=xs, title=tr("fig.layer_axis"))
    fig.update_yaxes(title=tr("fig.positions_axis"), rangemode="tozero")
    return fig


# Streamlit's graphviz element sets every SVG text to calc(0.75rem * 0.8) = 9.6 user units with
# CSS, whatever the DOT fontsize says, so text reads 9.6 x (drawn width / SVG width) px on screen:
# stretched to a 820 px column a wide diagram had 9 px text. The DOT fontsize is set to the same
# 9.6 (the boxes fit their text) and the page draws each diagram at the pixel width that makes its
# text DIAGRAM_TEXT_PX (or narrower, if the column is), from the width these builders estimate;
# in presenter mode style.font_px(DIAGRAM_TEXT_PX), 21 px, so the labels read from the back of a room.
DIAGRAM_TEXT_PX = 16
_PAD, _NODESEP, _RANKSEP, _MARGIN_X = 3.6, 12.96, 25.2, 8.64       # pt, as set in _dot_header
_Q_NODE_W = 0.4 * 72                                              # pt, a query head's box in gqa_dot
_Q_NODESEP = 0.1 * 72                                             # pt, between query heads in gqa_dot


def _dot_header(font: str) -> list[str]:
    return [
        "bgcolor=transparent; nodesep=0.18; ranksep=0.35; pad=0.05;",
        f'node [shape=box style="rounded,filled" fillcolor="#f3f4f6" color="#6b7280" fontname="{font}" '
        f'fontsize={STREAMLIT_DOT_TEXT} margin="0.12,0.06"];',
        f'edge [color="#6b7280" fontname="{font}" fontsize={STREAMLIT_DOT_TEXT} arrowsize=0.7];',
    ]


def _text_width(label: str) -> float:
    """Rough width in pt of a node label's longest line at STREAMLIT_DOT_TEXT (CJK 1 em, Latin 0.55 em)."""
    return max(sum(1.0 if "\u2e80" <= ch <= "\uffef" else 0.55 for ch in line) for line in label.split("\n")) \
        * STREAMLIT_DOT_TEXT


def _box(label: str, min_width: float = 54.0) -> float:
    return max(min_width, _text_width(label) + 2 * _MARGIN_X)


def diagram_px(width_pt: float) -> int:
    """The pixel width to draw a diagram of ``width_pt`` (SVG user units) at, for DIAGRAM_TEXT_PX
    text (larger in presenter mode)."""
    return int(round(width_pt * style.font_px(DIAGRAM_TEXT_PX) / STREAMLIT_DOT_TEXT))


def projection_dot(cfg, tr: Tr, font: str) -> tuple[str, float]:
    """The shapes of one attention layer, from the config, as a loop: the whole vector x goes
    into every head's projection (top row, left to right); the heads' outputs are joined and
    W_O maps them back to the residual stream (bottom row, right to left). Three columns
    instead of a chain of seven boxes, so the text stays large at a projector's width.
    Returns the DOT source and its estimated width in pt."""
    q_cols, kv_cols = cfg.n_heads * cfg.d_head, cfg.n_kv_heads * cfg.d_head
    labels = {
        "x": tr("dot.x", d=cfg.d_model), "wq": tr("dot.wq", d=cfg.d_model, c=q_cols),
        "wkv": tr("dot.wkv", d=cfg.d_model, c=kv_cols),
        "heads": tr("dot.heads_mqa" if cfg.n_kv_heads == 1 else "dot.heads", h=cfg.n_heads, kv=cfg.n_kv_heads,
                    d=cfg.d_head),
        "concat": tr("dot.concat", h=cfg.n_heads, d=cfg.d_head, c=q_cols), "wo": tr("dot.wo", c=q_cols, d=cfg.d_model),
        "out": tr("dot.out", d=cfg.d_model),
    }
    fills = {"x": "#dbeafe", "heads": "#fde7c8", "out": "#dbeafe"}
    lines = ["digraph proj {", "rankdir=LR;", *_dot_header(font)]
    for name, text in labels.items():
        fill = f' fillcolor="{fills[name]}"' if name in fills else ""
        lines.append(f'{name} [label="{text}"{fill}];')
    lines += ["x -> wq; x -> wkv; wq -> heads; wkv -> heads;",
              "{ rank=same; heads -> concat; }",
              # the way back, right to left: written tail-first so the columns line up
              "wo -> concat [dir=back]; out -> wo [dir=back];",
              "{ rank=same; x; out; }", "}"]
    columns = [("x", "out"), ("wq", "wkv", "wo"), ("heads", "concat")]
    width = sum(max(_box(labels[n]) for n in col) for col in columns) + 2 * _RANKSEP + 2 * _PAD + 8
    return "\n".join(lines), width


def gqa_dot(n_heads: int, n_kv_heads: int, selected: int, tr: Tr, font: str) -> tuple[str, float]:
    """Query heads (top) each wired to the K/V head of its group (bottom). Returns the DOT
    source and its estimated width in pt."""
    group = n_heads // n_kv_heads
    colours = ["#cfe3f3", "#fbe3b8", "#c9eadf", "#f6d3c1", "#d9ecfa", "#f0d6e6", "#fbf6c2", "#e5e7eb"]
    lines = ["digraph gqa {", "rankdir=TB;", *_dot_header(font), f"node [width={_Q_NODE_W / 72:g}]; nodesep={_Q_NODESEP / 72:g};"]
    lines.append("{ rank=same; " + " ".join(f"q{h};" for h in range(n_heads)) + " }")
    lines.append("{ rank=same; " + " ".join(f"kv{g};" for g in range(n_kv_heads)) + " }")
    for h in range(n_heads):
        border = ' color="#D55E00" penwidth=3' if h == selected else ""
        lines.append(f'q{h} [label="{tr("dot.qhead", h=h)}" fillcolor="{colours[(h // group) % 8]}"{border}];')
    for g in range(n_kv_heads):
        lines.append(f'kv{g} [label="{tr("dot.kvhead", g=g)}" fillcolor="{colours[g % 8]}"];')
    for h in range(n_heads):
        lines.append(f"q{h} -> kv{h // group} [dir=none];")
    lines.append("}")
    q_width = max(_Q_NODE_W, max(_box(tr("dot.qhead", h=h), 0) for h in range(n_heads)))
    return "\n".join(lines), n_heads * q_width + (n_heads - 1) * _Q_NODESEP + 2 * _PAD + 8
