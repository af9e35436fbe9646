"""Figures of the residual-stream lesson (app_pages/residual.py). Builders take numbers already
computed by lesson_model and a ``tr(key, **fields)`` callable for the page's strings; token
labels arrive already escaped for plotly."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from course.figures import chart as go
from course.figures import style
from course.figures.chart import make_subplots
from course.figures.diagrams import diagram_font
from course.text import num

T = Callable[..., str]
BLUE, ORANGE, GREEN, VERMILION, SKY, PURPLE = style.OKABE_ITO[:6]
GREY = "#9ca3af"


def signed(v: float) -> str:
    """+1.23 / -1.23, and 0.00 (no sign) for a value that rounds to zero."""
    text = num(v, "+.2f")
    return text.lstrip("+") if float(text) == 0 else text


def waterfall_figure(tr: T, labels: Sequence[str], along: Sequence[float], norms: Sequence[float],
                     final_norm: float, title: str) -> go.Figure:
    """The final vector's length along its own direction, built part by part."""
    hover = [tr("sum.hover", part=lab, along=f"{a:+.1f}", norm=f"{n:.1f}") for lab, a, n in zip(labels, along, norms)]
    fig = go.Figure(go.Waterfall(
        x=list(labels) + [tr("sum.final")], y=list(along) + [final_norm],
        measure=["relative"] * len(along) + ["total"],
        customdata=hover + [tr("sum.hover_final", norm=f"{final_norm:.1f}")],
        hovertemplate="%{customdata}<extra></extra>",
        increasing=dict(marker=dict(color=BLUE)), decreasing=dict(marker=dict(color=VERMILION)),
        totals=dict(marker=dict(color="#374151")), connector=dict(line=dict(color="#d1d5db", width=1))))
    cats = list(labels) + [tr("sum.final")]
    fig.update_xaxes(title=tr("sum.x"), type="category", tickangle=-90, tickmode="array",
                     tickvals=[cats[i] for i in _sparse_ticks(len(cats))])
    fig.update_yaxes(title=tr("sum.y"))
    fig.update_layout(title=title, showlegend=False)
    return fig


def _sparse_ticks(n: int, gap: int = 3) -> list[int]:
    """Which of n categories (embedding, attn 0, MLP 0, attn 1, ..., final) get a tick label:
    the first and the last, then every second block's attention, never two closer than
    ``gap`` categories, so that labels of 14 px do not overlap even at 1024 px. The other
    bars keep their hover text."""
    ticks: list[int] = []
    for i in [0, n - 1, *range(1, n - 1, 4)]:
        if all(abs(i - t) >= gap for t in ticks):
            ticks.append(i)
    return sorted(ticks)


def _every_other(labels: Sequence[str]) -> list[str]:
    """Every second label, and always the last one (31 depth labels of 14 px do not fit side by side)."""
    return [lab for i, lab in enumerate(labels) if i % 2 == 0 or i == len(labels) - 1]


def norm_heatmap(tr: T, depth_labels: Sequence[str], token_labels: Sequence[str], norms,
                 axis_depths: Sequence[str] | None = None) -> go.Figure:
    """|residual| per depth (rows) and position (columns), coloured on a log scale.
    ``axis_depths``: short row labels for the axis ("emb", "0", ...); the hover keeps the long ones."""
    z = [[math.log10(max(float(v), 1e-6)) for v in row] for row in norms]
    hover = [[tr("norms.hover", depth=d, token=tok, norm=f"{float(v):,.1f}") for tok, v in zip(token_labels, row)]
             for d, row in zip(depth_labels, norms)]
    lo, hi = math.floor(min(map(min, z))), math.ceil(max(map(max, z)))
    ticks = list(range(lo, hi + 1))
    fig = go.Figure(go.Heatmap(
        z=z, x=list(token_labels), y=list(axis_depths or depth_labels), customdata=hover, colorscale=style.SEQUENTIAL,
        hovertemplate="%{customdata}<extra></extra>", xgap=1, ygap=1,
        colorbar=dict(title=dict(text=tr("norms.scale"), side="right"), tickvals=ticks,
                      ticktext=[f"{10 ** k:,.0f}" if k >= 0 else f"{10 ** k:g}" for k in ticks])))
    fig.update_xaxes(title=tr("norms.x"), type="category", tickangle=-45)
    fig.update_yaxes(title=tr("norms.y"), type="category", autorange="reversed")
    fig.update_layout(title=tr("norms.title"))
    return fig


def lens_figure(tr: T, token_labels: Sequence[str], depth_labels: Sequence[str], top_labels, top_probs,
                axis_depths: Sequence[str] | None = None, hover_labels=None, font: int = 13) -> go.Figure:
    """Logit lens grid: rows = depth, columns = position; cell = top token, colour = its probability.
    ``axis_depths``: short row labels for the axis, which leaves the cells more room on a phone.
    ``hover_labels``: the top tokens in full for the hover (default the cells' own labels)."""
    hover = [[tr("lens.hover", depth=d, token=tok, top=lab, p=f"{p:.1%}") for tok, lab, p in zip(token_labels, row_l, row_p)]
             for d, row_l, row_p in zip(depth_labels, hover_labels or top_labels, top_probs)]
    fig = go.Figure(go.Heatmap(
        z=top_probs, x=list(token_labels), y=list(axis_depths or depth_labels), text=top_labels, texttemplate="%{text}",
        textfont=dict(size=font), customdata=hover, hovertemplate="%{customdata}<extra></extra>",
        colorscale=style.SEQUENTIAL, zmin=0, zmax=1, xgap=1, ygap=1,
        colorbar=dict(title=dict(text=tr("lens.scale"), side="right"), tickformat=".0%", thickness=14)))
    fig.update_xaxes(title=tr("lens.x"), type="category", side="top", tickangle=-45)
    fig.update_yaxes(title=tr("lens.y"), type="category", autorange="reversed")
    return fig


def rank_figure(tr: T, depth_labels: Sequence[str], ranks: Sequence[int], probs: Sequence[float], token: str) -> go.Figure:
    """The final prediction's rank (log scale) and probability at every depth."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Scatter(x=list(depth_labels), y=[r + 1 for r in ranks], name=tr("rank.rank"), mode="lines+markers",
                             line=dict(color=BLUE, width=3), customdata=list(ranks),
                             hovertemplate=tr("rank.hover_rank") + "<extra></extra>"), secondary_y=False)
    fig.add_trace(go.Scatter(x=list(depth_labels), y=[p * 100 for p in probs], name=tr("rank.prob"), mode="lines+markers",
                             line=dict(color=ORANGE, width=3, dash="dot"),
                             hovertemplate=tr("rank.hover_prob") + "<extra></extra>"), secondary_y=True)
    fig.update_xaxes(title=tr("rank.x"), type="category", tickangle=0, tickmode="array",
                     tickvals=_every_other(depth_labels))
    fig.update_yaxes(title=tr("rank.y"), type="log", autorange="reversed", secondary_y=False)
    fig.update_yaxes(title=tr("rank.y2"), range=[0, 100], ticksuffix="%", secondary_y=True, showgrid=False, tickmode="auto")
    fig.update_layout(title=tr("rank.title", token=token), legend=dict(orientation="h", y=-0.3))
    return fig


def dla_figure(tr: T, embed: float, attn: Sequence[float], mlp: Sequence[float], title: str) -> go.Figure:
    """Each layer's attention and MLP direct contribution to the logit (grouped bars), plus the embedding."""
    layers = [str(i) for i in range(len(attn))]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=[tr("dla.embed")], y=[embed], name=tr("dla.embed"), marker_color=GREEN,
                         hovertemplate="%{x}: %{y:+.3f}<extra></extra>"))
    fig.add_trace(go.Bar(x=layers, y=list(attn), name=tr("dla.attn"), marker_color=BLUE,
                         hovertemplate=tr("dla.hover_attn") + "<extra></extra>"))
    fig.add_trace(go.Bar(x=layers, y=list(mlp), name=tr("dla.mlp"), marker_color=ORANGE,
                         hovertemplate=tr("dla.hover_mlp") + "<extra></extra>"))
    fig.update_layout(barmode="group", title=title, bargap=0.15,
                      legend=dict(orientation="h", y=0.98, yanchor="top", x=0.01, xanchor="left",
                                  bgcolor="rgba(255,255,255,0.8)"))
    fig.update_xaxes(title=tr("dla.x"), type="category")
    fig.update_yaxes(title=tr("dla.y"), zeroline=True, zerolinecolor="#6b7280")
    return fig


def head_figure(tr: T, heads: Sequence[float], layer: int, token: str) -> go.Figure:
    names = [tr("heads.h", h=h) for h in range(len(heads))]
    fig = go.Figure(go.Bar(x=names, y=list(heads), marker_color=[BLUE if v >= 0 else VERMILION for v in heads],
                           text=[signed(v) for v in heads], textposition="outside", cliponaxis=False,
                           hovertemplate="%{x}: %{y:+.3f}<extra></extra>"))
    top = max((abs(v) for v in heads), default=1.0) or 1.0
    fig.update_yaxes(title=tr("dla.y"), zeroline=True, zerolinecolor="#6b7280",
                     range=[min(0.0, min(heads)) - 0.25 * top, max(0.0, max(heads)) + 0.25 * top])
    fig.update_xaxes(title=tr("heads.x"), type="category")
    fig.update_layout(title=tr("heads.title", layer=layer, token=token))
    return fig


def norm_compare_figure(tr: T, x: Sequence[float], layer_normed: Sequence[float], rms_normed: Sequence[float],
                        title: str) -> go.Figure:
    """One real vector before (top) and after LayerNorm and RMSNorm (bottom), dimension by dimension."""
    dims = list(range(len(x)))
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12,
                        # plotly never breaks a subplot title: "after: divided by its size (learned
                        # weights left out)" ran past a 1024 px laptop's column
                        subplot_titles=tuple(style.wrap_title(tr(key), style.title_chars(style.THREE_QUARTERS_TITLE))
                                             for key in ("ln.before", "ln.after")))
    fig.add_trace(go.Scatter(x=dims, y=list(x), mode="markers", marker=dict(size=4, color="#374151"), name=tr("ln.raw"),
                             hovertemplate=tr("ln.hover") + "<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=dims, y=list(layer_normed), mode="markers", name=tr("ln.layer"),
                             marker=dict(size=6, color=BLUE, symbol="circle-open"),
                             hovertemplate=tr("ln.hover") + "<extra></extra>"), row=2, col=1)
    fig.add_trace(go.Scatter(x=dims, y=list(rms_normed), mode="markers", name=tr("ln.rms"),
                             marker=dict(size=4, color=ORANGE),
                             hovertemplate=tr("ln.hover") + "<extra></extra>"), row=2, col=1)
    fig.update_xaxes(title=tr("ln.x"), row=2, col=1)
    fig.update_yaxes(title=tr("ln.y"), row=1, col=1)
    fig.update_yaxes(title=tr("ln.y"), row=2, col=1)
    fig.update_layout(title=title, legend=dict(orientation="h", y=-0.18))
    return fig


def post_norm_figure(tr: T, computed: Sequence[Sequence[float]], written: Sequence[Sequence[float]],
                     post_norms: bool, title: str) -> go.Figure:
    """Per block, the length of what attention and the MLP compute and of what they add to the
    stream (log scale). Without post-norms the two are the same, and only the writes are drawn."""
    blocks = [str(i) for i in range(len(written))]
    fig = go.Figure()
    for j, (kind, color) in enumerate((("attn", BLUE), ("mlp", ORANGE))):
        if post_norms:
            fig.add_trace(go.Scatter(x=blocks, y=[row[j] for row in computed], name=tr(f"post.computed_{kind}"),
                                     mode="lines+markers", line=dict(color=color, dash="dot", width=2),
                                     marker=dict(symbol="circle-open", size=7),
                                     hovertemplate=tr("post.hover") + "<extra></extra>"))
        fig.add_trace(go.Scatter(x=blocks, y=[row[j] for row in written], name=tr(f"post.written_{kind}"),
                                 mode="lines+markers", line=dict(color=color, width=3),
                                 hovertemplate=tr("post.hover") + "<extra></extra>"))
    fig.update_xaxes(title=tr("post.x"), type="category", tickmode="array", tickvals=_every_other(blocks))
    fig.update_yaxes(title=tr("post.y"), type="log")
    fig.update_layout(title=title, legend=dict(orientation="h", y=-0.25))
    return fig


def gradient_figure(tr: T, depth_labels: Sequence[str], grad_norms: Sequence[float]) -> go.Figure:
    fig = go.Figure(go.Bar(x=list(depth_labels), y=list(grad_norms), marker_color=PURPLE,
                           hovertemplate=tr("grad.hover") + "<extra></extra>"))
    fig.update_xaxes(title=tr("grad.x"), type="category", tickangle=0, tickmode="array",
                     tickvals=_every_other(depth_labels))
    positive = [v for v in grad_norms if v > 0] or [1.0]
    fig.update_yaxes(title=tr("grad.y"), type="log", dtick=1,
                     range=[math.log10(min(positive)) - 0.2, math.log10(max(positive)) + 0.15])
    fig.update_layout(title=tr("grad.title"))
    return fig


# --------------------------------------------------------------------------- diagrams (Graphviz DOT)

# Streamlit draws every diagram's text at 9.6 units of the SVG, whatever the DOT says (its
# CSS sets the font size of everything inside a graphviz chart), and scales the SVG to the
# column when width="stretch". So the boxes are sized for text of that size, and a diagram
# gets its readable size from the column it is drawn in: the narrower the layout, the larger
# the text (about 9.6 x column width / layout width, in px).
def _head(font: str, rankdir: str = "LR", size: int | None = None) -> list[str]:
    """Graph defaults: compact boxes sized for Streamlit's text size."""
    size = size or diagram_font()
    return [f"rankdir={rankdir}; bgcolor=transparent; nodesep=0.12; ranksep=0.16; margin=0;",
            f'node [shape=box style="rounded,filled" fillcolor="#f3f4f6" color="#6b7280" fontname="{font}" '
            f'fontsize={size} margin="0.06,0.02" width=0.3 height=0.28];',
            f'edge [color="#6b7280" fontname="{font}" fontsize={size} arrowsize=0.5];']


def prenorm_diagram(tr: T, font: str) -> str:
    """Pre-norm block (GPT-2 onward, LLaMA, this model): the stream itself is never normalized."""
    return "\n".join([
        "digraph pre {", *_head(font),
        f'x [label="{tr("diag.x")}"];',
        f'n1 [label="{tr("diag.norm")}" fillcolor="#e0f2e9"]; f1 [label="{tr("diag.attn")}" fillcolor="#dbeafe"];',
        'a1 [label="+" shape=circle width=0.22 height=0.22 margin=0 fixedsize=true];',
        f'n2 [label="{tr("diag.norm")}" fillcolor="#e0f2e9"]; f2 [label="{tr("diag.mlp")}" fillcolor="#fde7c8"];',
        'a2 [label="+" shape=circle width=0.22 height=0.22 margin=0 fixedsize=true];',
        f'y [label="{tr("diag.y")}"];',
        "x -> n1 -> f1 -> a1; a1 -> n2 -> f2 -> a2; a2 -> y;",
        f'x -> a1 [color="{VERMILION}" penwidth=1.8]; a1 -> a2 [color="{VERMILION}" penwidth=1.8];',
        "}",
    ])


def sandwich_diagram(tr: T, font: str) -> str:
    """Pre- and post-norm block (Gemma 2 and 3): each sub-layer reads a normalized copy, and its
    output is normalized once more before it is added; the stream itself is never normalized."""
    circle = 'shape=circle width=0.22 height=0.22 margin=0 fixedsize=true'
    return "\n".join([
        # Two rows (attention, then the MLP): in one row its ten boxes would shrink below 12 px at 1024 px.
        "digraph sandwich {", *_head(font, rankdir="TB"),
        "{rank=same; x; n1; f1; p1; a1;} {rank=same; n2; f2; p2; a2; y;}",
        f'x [label="{tr("diag.x")}"];',
        f'n1 [label="{tr("diag.norm")}" fillcolor="#e0f2e9"]; f1 [label="{tr("diag.attn")}" fillcolor="#dbeafe"];',
        f'p1 [label="{tr("diag.post_norm")}" fillcolor="#e0f2e9"]; a1 [label="+" {circle}];',
        f'n2 [label="{tr("diag.norm")}" fillcolor="#e0f2e9"]; f2 [label="{tr("diag.mlp")}" fillcolor="#fde7c8"];',
        f'p2 [label="{tr("diag.post_norm")}" fillcolor="#e0f2e9"]; a2 [label="+" {circle}];',
        f'y [label="{tr("diag.y")}"];',
        "x -> n1 -> f1 -> p1 -> a1; a1 -> n2 -> f2 -> p2 -> a2; a2 -> y;",
        f'x -> a1 [color="{VERMILION}" penwidth=1.8]; a1 -> a2 [color="{VERMILION}" penwidth=1.8];',
        "}",
    ])


def postnorm_diagram(tr: T, font: str) -> str:
    """Post-norm block (the 2017 Transformer): the sum itself is normalized after each add."""
    return "\n".join([
        "digraph post {", *_head(font),
        f'x [label="{tr("diag.x")}"];',
        f'f1 [label="{tr("diag.attn")}" fillcolor="#dbeafe"]; a1 [label="+" shape=circle width=0.22 height=0.22 margin=0 fixedsize=true];',
        f'n1 [label="{tr("diag.norm")}" fillcolor="#e0f2e9"];',
        f'f2 [label="{tr("diag.mlp")}" fillcolor="#fde7c8"]; a2 [label="+" shape=circle width=0.22 height=0.22 margin=0 fixedsize=true];',
        f'n2 [label="{tr("diag.norm")}" fillcolor="#e0f2e9"];',
        f'y [label="{tr("diag.y")}"];',
        "x -> f1 -> a1 -> n1; n1 -> f2 -> a2 -> n2 -> y;",
        'x -> a1 [color="#6b7280" penwidth=1.8]; n1 -> a2 [color="#6b7280" penwidth=1.8];',
        "}",
    ])


def gradient_diagram(tr: T, font: str, n_layers: int) -> str:
    """The residual stream unrolled: the x1 path straight through every add (red), and each
    block's branch beside it (dashed), on the rank of the node it reads from (so the layout
    stays short and the text large once it is stretched to the column)."""
    lines = ["digraph grad {", *_head(font),
             f'loss [label="{tr("diag.loss")}" fillcolor="#fde2e2"];',
             f'x0 [label="{tr("diag.embed")}"];']
    shown = [0, 1, n_layers - 1]
    prev = "x0"
    red = f'color="{VERMILION}" penwidth=2 label="×1" fontcolor="{VERMILION}"'
    for i, layer in enumerate(shown):
        if i == 2:
            lines.append('dots [label="…" shape=plaintext fillcolor=transparent];')
            lines.append(f"{prev} -> dots [{red}];")
            prev = "dots"
        lines.append(f'f{i} [label="{tr("diag.block", n=layer)}" fillcolor="#dbeafe"];')
        lines.append(f'p{i} [label="+" shape=circle width=0.22 height=0.22 margin=0 fixedsize=true];')
        lines.append(f"{{ rank=same; {prev}; f{i}; }}")
        lines.append(f"{prev} -> p{i} [{red}];")
        lines.append(f"{prev} -> f{i} [style=dashed]; f{i} -> p{i} [style=dashed];")
        prev = f"p{i}"
    lines.append(f"{prev} -> loss;")
    lines.append("}")
    return "\n".join(lines)
