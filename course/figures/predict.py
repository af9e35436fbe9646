"""The class's answers to a "Predict, then see" question, next to the model's answer.

Numbers in (course.predict.builders.class_summary), a figure out: one bar per option, number
or first token guessed, its share of the class; for a typed next token a second bar beside
it, the model's probability of that token. The model's answer is the green bar. Labels
arrive escaped (course.tokens.plot_label)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from course.figures import chart as go
from course.figures import style

T = Callable[..., str]
BLUE, ORANGE, GREEN = style.OKABE_ITO[0], style.OKABE_ITO[1], style.OKABE_ITO[2]
GREY = "#9ca3af"


def class_answers_figure(tr: T, labels: Sequence[str], shares: Sequence[float], right: Sequence[bool],
                         model_probs: Sequence[float] | None = None) -> go.Figure:
    """Horizontal bars, first label on top: the class's share of each answer (percent), the model's
    answer in green; with ``model_probs`` (percent) the model's probability of each beside it."""
    y = list(labels)
    fig = go.Figure(go.Bar(
        x=list(shares), y=y, orientation="h", name=tr("predict.class.class_share"),
        marker_color=[GREEN if r else BLUE for r in right],
        text=[f"{s:.0f}%" for s in shares], textposition="outside", cliponaxis=False,
        hovertemplate="%{y}: %{x:.0f}%<extra></extra>"))
    if model_probs is not None:
        fig.add_trace(go.Bar(
            x=list(model_probs), y=y, orientation="h", name=tr("predict.class.model_prob"), marker_color=ORANGE,
            text=[f"{p:.1f}%" if p < 10 else f"{p:.0f}%" for p in model_probs], textposition="outside",
            cliponaxis=False, hovertemplate="%{y}: %{x:.2f}%<extra></extra>"))
    fig.update_layout(title=tr("predict.class.chart_title"), barmode="group", bargap=0.25,
                      showlegend=model_probs is not None,
                      legend=dict(orientation="h", x=0.5, xanchor="center", y=style.legend_below()))
    fig.update_xaxes(range=[0, 115], ticksuffix="%", showgrid=True)
    fig.update_yaxes(autorange="reversed", type="category")
    return fig
