"""Figures for the Training lab (app_pages/train.py).

Builders take the training's plain events (lesson_model.training Progress / Checkpoint /
TrainResult) and ``tr`` (the page's translation function). Payloads stay small: a curve has
one point per evaluation (steps / EVAL_EVERY), numbers are rounded, an attention map is
SEQ_LEN x SEQ_LEN.

What "What to notice" says about a run is course/notices/train.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from course.figures import chart as go
from course.figures import style

Tr = Callable[..., str]
WHOLE, REPEAT = style.OKABE_ITO[0], style.OKABE_ITO[3]          # blue: whole sequence; vermillion: repeated part
LAYER_COLOURS = [style.OKABE_ITO[i] for i in (0, 3, 2, 5)]
GUESS = "#6b7280"
PHASE = "#111827"
STRIPE = "#F0E442"               # yellow on Viridis: the expected stripe


def head_name(layer: int, head: int) -> str:
    return f"{layer}.{head}"


def pct(x: float) -> str:
    return f"{x:.0%}"


def nats(x: float) -> str:
    return f"{x:.2f}"


def _r(values, digits: int = 4) -> list[float]:
    return [round(float(v), digits) for v in values]


def _mode(history: Sequence) -> str:
    """Lines, with markers while there are too few points for a line to show."""
    return "lines+markers" if len(history) < 3 else "lines"


def _phase_shapes(phase_step: int | None) -> list[dict]:
    if phase_step is None:
        return []
    return [dict(type="line", xref="x", yref="paper", x0=phase_step, x1=phase_step, y0=0, y1=1,
                 line=dict(color=PHASE, width=2, dash="dash"))]


def _phase_note(phase_step: int | None, tr: Tr) -> list[dict]:
    if phase_step is None:
        return []
    return [dict(x=phase_step, y=1, xref="x", yref="paper", yanchor="bottom", showarrow=False,
                 text=tr("fig.phase", step=phase_step), font=dict(size=13, color=PHASE))]


def loss_figure(history: Sequence, steps: int, log_v: float, phase_step: int | None, tr: Tr) -> go.Figure:
    """The eval loss over the whole sequence and over the repeated part, against the
    log(V) line of guessing; the phase change as a vertical line."""
    x = [p.step for p in history]
    mode = _mode(history)
    fig = go.Figure(layout=dict(
        shapes=[dict(type="line", xref="paper", yref="y", x0=0, x1=1, y0=log_v, y1=log_v,
                     line=dict(color=GUESS, width=1.5, dash="dot"))] + _phase_shapes(phase_step),
        annotations=[dict(x=1, y=log_v, xref="paper", yref="y", xanchor="right", yanchor="bottom",
                          showarrow=False, text=tr("fig.guess", value=nats(log_v)),
                          font=dict(size=13, color=GUESS))] + _phase_note(phase_step, tr)))
    fig.add_scatter(x=x, y=_r(p.loss for p in history), mode=mode, name=tr("fig.loss_whole"),
                    line=dict(color=WHOLE, width=2))
    fig.add_scatter(x=x, y=_r(p.loss_repeat for p in history), mode=mode, name=tr("fig.loss_repeat"),
                    line=dict(color=REPEAT, width=3))
    fig.update_xaxes(title=tr("fig.step_axis"), range=[0, steps])
    top = max([log_v] + [max(p.loss, p.loss_repeat) for p in history])
    fig.update_yaxes(title=tr("fig.loss_axis"), range=[0, top * 1.12])
    fig.update_layout(title=tr("fig.loss_title"), legend=dict(orientation="h", y=style.legend_below(-0.3), x=0),
                      hovermode="x unified")
    return fig


def score_figure(history: Sequence, steps: int, phase_step: int | None, tr: Tr) -> go.Figure:
    """Per layer, the best head's induction score (solid) and the best previous-token score
    (dotted) over the steps; the phase change as a vertical line."""
    x = [p.step for p in history]
    n_layers = len(history[0].induction) if history else 0
    mode = _mode(history)
    fig = go.Figure(layout=dict(shapes=_phase_shapes(phase_step), annotations=_phase_note(phase_step, tr)))
    for layer in range(n_layers):
        colour = LAYER_COLOURS[layer % len(LAYER_COLOURS)]
        fig.add_scatter(x=x, y=_r(p.induction[layer] for p in history), mode=mode,
                        name=tr("fig.induction_layer", layer=layer), line=dict(color=colour, width=3))
        fig.add_scatter(x=x, y=_r(p.prev_token[layer] for p in history), mode=mode,
                        name=tr("fig.prev_layer", layer=layer), line=dict(color=colour, width=2, dash="dot"))
    fig.update_xaxes(title=tr("fig.step_axis"), range=[0, steps])
    fig.update_yaxes(title=tr("fig.score_axis"), range=[0, 1.05], tickformat=".0%")
    fig.update_layout(title=tr("fig.score_title"), legend=dict(orientation="h", y=style.legend_below(-0.3), x=0),
                      hovermode="x unified")
    return fig


def induction_targets(repeat: tuple[int, int, int]) -> list[tuple[int, int]]:
    """(query, key) pairs of the induction stripe on the probe: each position of the second
    copy -> the token after its earlier occurrence."""
    first, second, length = repeat
    return [(q, q - (second - first) + 1) for q in range(second, second + length)]


def probe_score(pattern: np.ndarray, repeat: tuple[int, int, int], kind: str) -> float:
    """A head's score on the probe sequence alone: mean attention on the induction targets
    ("induction") or on the previous position ("prev")."""
    if kind == "induction":
        pairs = induction_targets(repeat)
        return float(np.mean([pattern[q, k] for q, k in pairs])) if pairs else 0.0
    n = pattern.shape[0]
    return float(np.mean([pattern[q, q - 1] for q in range(1, n)]))


def pattern_figure(pattern: np.ndarray, repeat: tuple[int, int, int], kind: str, name: str, step: int,
                   tr: Tr) -> go.Figure:
    """One head's attention on the probe at one checkpoint, with the stripe it would draw
    if it did its job (induction: second copy -> token after the first occurrence; prev:
    each position -> the one before) as a dashed guide, and the copies marked."""
    n = pattern.shape[0]
    z = [[round(float(pattern[i, j]), 3) if j <= i else None for j in range(n)] for i in range(n)]
    first, second, length = repeat
    if kind == "induction":
        x0, y0, x1, y1 = first + 1, second, first + length, second + length - 1
    else:
        x0, y0, x1, y1 = 0, 1, n - 2, n - 1
    score = probe_score(pattern, repeat, kind)
    fig = go.Figure(go.Heatmap(
        z=z, colorscale=style.SEQUENTIAL, zmin=0, zmax=1, showscale=False,
        hovertemplate=f"{tr('fig.query_pos')} %{{y}}<br>{tr('fig.key_pos')} %{{x}}<br>"
                      f"{tr('fig.weight')}: %{{z:.0%}}<extra></extra>"),
        layout=dict(shapes=[
            dict(type="line", xref="x", yref="y", x0=x0, y0=y0, x1=x1, y1=y1,
                 line=dict(color=STRIPE, width=2, dash="dash")),
            # the two copies of the segment, on the key axis
            dict(type="rect", xref="x", yref="paper", x0=first - 0.5, x1=first + length - 0.5, y0=1.0, y1=1.03,
                 line=dict(width=0), fillcolor=style.OKABE_ITO[0]),
            dict(type="rect", xref="x", yref="paper", x0=second - 0.5, x1=second + length - 0.5, y0=1.0, y1=1.03,
                 line=dict(width=0), fillcolor=style.OKABE_ITO[1]),
        ]))
    title_key = "fig.pattern_induction" if kind == "induction" else "fig.pattern_prev"
    fig.update_layout(title=tr(title_key, head=name, step=step, score=pct(score)))
    fig.update_xaxes(title=tr("fig.key_pos"), range=[-0.5, n - 0.5], constrain="domain")
    fig.update_yaxes(title=tr("fig.query_pos"), range=[n - 0.5, -0.5], scaleanchor="x")
    return fig


def empty_figure(steps: int, log_v: float, tr: Tr) -> go.Figure:
    """Before any training: the axes and the guessing line, where the curves will appear."""
    return loss_figure([], steps, log_v, None, tr)


# --- the heads the page shows ----------------------------------------------------------------

def shown_heads(result) -> list[tuple[int, int, str]]:
    """The heads whose patterns the step slider shows: each layer's best induction head at the
    end, and layer 0's best previous-token head when the model has a later layer to use it."""
    last = result.history[-1]
    heads = [(layer, int(head), "induction") for layer, head in enumerate(last.best_heads)]
    if len(last.best_heads) > 1:
        heads.insert(0, (0, int(last.prev_heads[0]), "prev"))
    return heads
