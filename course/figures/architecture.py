"""Figures of lesson 11 (architecture vs weights): where the parameters live, the loss at every
position, and training in one picture (a Graphviz diagram)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from course.figures import chart as go
from course.figures import style
from course.figures.diagrams import diagram_font

T = Callable[..., str]
PARTS = ("embedding", "attention", "mlp", "norms")
PART_COLOURS = dict(zip(PARTS, (style.OKABE_ITO[0], style.OKABE_ITO[4], style.OKABE_ITO[1], style.OKABE_ITO[2])))


def split_figure(tr: T, names: Sequence[str], parts: Sequence[dict], counts_text: Callable[[int], str]) -> go.Figure:
    """One stacked bar per model (names, already escaped for plotly): each part's share of its
    parameters, the count in the hover."""
    traces = []
    for part in PARTS:
        shares = [p[part] / sum(p.values()) for p in parts]
        traces.append(go.Bar(
            y=list(names), x=shares, name=tr(f"part.{part}"), orientation="h",
            marker_color=PART_COLOURS[part],
            text=[f"{s:.0%}" if s >= 0.12 else "" for s in shares], textposition="inside", textangle=0,
            insidetextanchor="middle",
            customdata=[counts_text(p[part]) for p in parts],
            hovertemplate="%{y}: %{customdata} (%{x:.1%})<extra>" + tr(f"part.{part}") + "</extra>"))
    fig = go.Figure(traces)
    fig.update_layout(barmode="stack", title=tr("split.title"), legend=dict(orientation="h", y=-0.45, traceorder="normal"),
                      margin=dict(l=10, r=10))
    fig.update_xaxes(title=tr("split.x"), tickformat=".0%", range=[0, 1])
    fig.update_yaxes(autorange="reversed")
    return fig


def loss_figure(tr: T, labels: Sequence[str], losses: Sequence[float], mean: float) -> go.Figure:
    """The loss at every position (x: the token it had to predict), with the mean as a line."""
    fig = go.Figure(go.Bar(x=list(labels), y=list(losses), marker_color=style.OKABE_ITO[3],
                           hovertemplate="%{x}: %{y:.2f}<extra></extra>"),
                    layout=dict(shapes=[dict(type="line", xref="paper", x0=0, x1=1, y0=mean, y1=mean,
                                             line=dict(color=style.OKABE_ITO[0], dash="dash", width=2))],
                                annotations=[dict(xref="paper", x=1, y=mean, xanchor="right", yanchor="bottom",
                                                  showarrow=False, text=tr("loss.mean_label", mean=f"{mean:.2f}"),
                                                  font=dict(color=style.OKABE_ITO[0]))]))
    fig.update_layout(title=tr("loss.title"))
    fig.update_xaxes(title=tr("loss.x"), type="category")
    fig.update_yaxes(title=tr("loss.y"), rangemode="tozero")
    return fig


def training_diagram(tr: T, font: str) -> str:
    """Training in one picture, as a loop: predict, compare with the answer (loss), gradients,
    update, repeat (two rows, so the text stays large once stretched to the column)."""
    size = diagram_font()
    box = 'shape=box style="rounded,filled" color="#6b7280"'
    return "\n".join([
        "digraph train {",
        "rankdir=TB; bgcolor=transparent; nodesep=0.35; ranksep=0.3; margin=0;",
        f'node [{box} fillcolor="#f3f4f6" fontname="{font}" fontsize={size} margin="0.08,0.04" height=0.3];',
        f'edge [color="#6b7280" fontname="{font}" fontsize={size} arrowsize=0.6];',
        f'text [label="{tr("diag.text")}" fillcolor="#ffffff"];',
        f'predict [label="{tr("diag.predict")}" fillcolor="#dbeafe"];',
        f'loss [label="{tr("diag.loss")}" fillcolor="#fde2e2"];',
        f'grad [label="{tr("diag.grad")}" fillcolor="#fde7c8"];',
        f'update [label="{tr("diag.update")}" fillcolor="#e0f2e9"];',
        "{rank=same; text; predict; loss;} {rank=same; update; grad;}",
        # drawn backwards (dir=back) so that the second row reads update <- grad, under predict and loss
        "text -> predict -> loss; loss -> grad; update -> grad [dir=back];",
        f'predict -> update [dir=back label="{tr("diag.repeat")}" style=dashed];',
        "}",
    ])
