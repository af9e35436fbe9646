"""Figures of the sections tied to the Chinese teaching articles: a word's two vectors through
the blocks (embeddings lesson), and the encoder-decoder vs decoder-only diagram (architecture
lesson). Numbers and the page's ``tr`` in, a plotly figure or Graphviz source out."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence

from course.figures import chart as go
from course.figures import style
from course.figures.diagrams import diagram_font

Tr = Callable[..., str]
RAW = style.OKABE_ITO[0]
CENTRED = style.OKABE_ITO[3]


def context_figure(embed_cos: float, raw: Sequence[float], centred: Sequence[float], word: str, tr: Tr) -> go.Figure:
    """Cosine of the word's two vectors: the embedding row (x = 0), then after each block
    (x = 1..n): raw and centred. ``word`` arrives escaped for plotly."""
    x = list(range(len(raw) + 1))
    ticks = [tr("context.fig.embed")] + [str(i) for i in range(len(raw))]
    hover = "%{customdata}: %{y:+.2f}<extra>%{fullData.name}</extra>"
    fig = go.Figure([
        go.Scatter(x=x, y=[embed_cos, *raw], mode="lines+markers", name=tr("context.fig.raw"),
                   line=dict(color=RAW, width=2), customdata=ticks, hovertemplate=hover),
        go.Scatter(x=x, y=[embed_cos, *centred], mode="lines+markers", name=tr("context.fig.centred"),
                   line=dict(color=CENTRED, width=2, dash="dash"), marker=dict(symbol="diamond"),
                   customdata=ticks, hovertemplate=hover),
    ])
    fig.add_hline(y=0, line=dict(color="#9ca3af", width=1))
    fig.update_xaxes(title=tr("context.fig.x"), tickmode="array", tickvals=x, ticktext=ticks)
    fig.update_yaxes(title=tr("context.fig.y"), range=[-1.05, 1.05])
    fig.update_layout(title=tr("context.fig.title", word=word),
                      legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"))
    return fig


def _q(text: str) -> str:
    """A Graphviz label: quotes and backslashes escaped."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


# A box label longer than this (in characters, with spaces) is wrapped onto lines this long: the
# English labels ("encoder: self-attention both ways + MLP") made the diagram so wide that, fitted
# to a laptop's column at 1024 px, its text was 11 px; wrapped, it is drawn larger.
LABEL_CHARS = 24


def _label(text: str) -> str:
    """A Graphviz box label (quoted text), wrapped at spaces onto lines of LABEL_CHARS."""
    lines = textwrap.wrap(text, LABEL_CHARS, break_long_words=False, break_on_hyphens=False) or [text]
    return "\\n".join(_q(line) for line in lines)


def encoder_decoder_diagram(tr: Tr, font: str, n_blocks: int) -> str:
    """Two columns: the original encoder-decoder (encoder stack, decoder stack with
    cross-attention reading the encoder) and the decoder-only model loaded here (``n_blocks``
    blocks of causal self-attention and MLP). Labels from ``tr`` (catalog keys dec.diag.*)."""
    size = diagram_font()
    box = 'shape=box style="rounded,filled" color="#6b7280"'
    lines = [
        "digraph arch {",
        "rankdir=BT; bgcolor=transparent; nodesep=0.3; ranksep=0.25; margin=0; compound=true;",
        f'node [{box} fillcolor="#f3f4f6" fontname="{font}" fontsize={size} margin="0.08,0.04" height=0.3];',
        f'edge [color="#6b7280" fontname="{font}" fontsize={size} arrowsize=0.6];',
        "subgraph cluster_ed {",
        f'label="{_q(tr("dec.diag.ed_title"))}"; fontname="{font}"; fontsize={size}; color="#9ca3af"; style=rounded;',
        f'src [label="{_label(tr("dec.diag.source"))}" fillcolor="#ffffff"];',
        f'enc [label="{_label(tr("dec.diag.encoder"))}" fillcolor="#e0f2e9"];',
        f'tgt [label="{_label(tr("dec.diag.target"))}" fillcolor="#ffffff"];',
        f'dself [label="{_label(tr("dec.diag.masked_self"))}" fillcolor="#dbeafe"];',
        f'cross [label="{_label(tr("dec.diag.cross"))}" fillcolor="#fde7c8"];',
        f'dmlp [label="{_q(tr("dec.diag.mlp"))}" fillcolor="#dbeafe"];',
        f'out1 [label="{_q(tr("dec.diag.next"))}" fillcolor="#ffffff"];',
        "src -> enc; tgt -> dself -> cross -> dmlp -> out1;",
        f'enc -> cross [label="{_q(tr("dec.diag.kv"))}" style=dashed];',
        "}",
        "subgraph cluster_do {",
        f'label="{_q(tr("dec.diag.do_title"))}"; fontname="{font}"; fontsize={size}; color="#9ca3af"; style=rounded;',
        f'text [label="{_label(tr("dec.diag.text"))}" fillcolor="#ffffff"];',
        f'self [label="{_label(tr("dec.diag.causal_self", n=n_blocks))}" fillcolor="#dbeafe"];',
        f'mlp [label="{_q(tr("dec.diag.mlp"))}" fillcolor="#dbeafe"];',
        f'out2 [label="{_q(tr("dec.diag.next"))}" fillcolor="#ffffff"];',
        "text -> self -> mlp -> out2;",
        "}",
        "}",
    ]
    return "\n".join(lines)
