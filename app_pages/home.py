"""Lesson 0, the big picture: the decoder loop, a live next-token demo on the shared
prompt, and the card of the model that is running."""

import plotly.graph_objects as go
import streamlit as st
import torch

from lesson_model.decoder import Decoder
from lesson_model.sampling import next_token_distribution
from ui import nav, state, theme
from ui.i18n import t
from ui.lesson import Lesson
from ui.text import html_escape, md_escape
from ui.tokens import axis_labels, label, md_label

CAP = 256            # tokens of the prompt this page runs
SHOWN_TOKENS = 48    # tokens listed under "tokens in"
APPEND_CHOICES = 5   # candidates offered as one-click appends
MAX_COMPLETION = 3   # extra greedy tokens to finish a character split across byte tokens

page = Lesson("home")
page.header()
lm = page.model()
cfg = lm.cfg


def loop_figure() -> go.Figure:
    """The decoder loop: seven stages left to right, the block stack framed, and the
    dashed arrow that appends the picked token and runs again."""
    stages = [
        (page.t("diagram.text"), "#f3f4f6"),
        (page.t("diagram.tokens"), "#f3f4f6"),
        (page.t("diagram.vectors", d_model=cfg.d_model), "#f3f4f6"),
        (page.t("diagram.attention"), "#cfe3f3"),
        (page.t("diagram.ffn"), "#fbe3bf"),
        (page.t("diagram.scores", vocab=f"{cfg.vocab_size:,}"), "#f3f4f6"),
        (page.t("diagram.pick"), "#c9ede0"),
    ]
    half_w, half_h, grey, blue, back = 0.43, 0.5, "#6b7280", theme.OKABE_ITO[0], theme.OKABE_ITO[3]
    last = len(stages) - 1
    arrow = dict(xref="x", yref="y", axref="x", ayref="y", text="", showarrow=True, arrowhead=2)
    shapes = [dict(type="rect", x0=x - half_w, x1=x + half_w, y0=-half_h, y1=half_h, fillcolor=fill,
                   line=dict(color=grey, width=1.5), layer="below") for x, (_, fill) in enumerate(stages)]
    shapes += [
        dict(type="rect", x0=2.5, x1=4.5, y0=-0.68, y1=0.95, line=dict(color=blue, dash="dash")),
        dict(type="path", path=f"M {last},{-half_h} L {last},-0.95 L 1,-0.95", line=dict(color=back, dash="dash", width=2)),
    ]
    notes = [dict(x=x, y=0, text=html_escape(text).replace("\n", "<br>"), showarrow=False)
             for x, (text, _) in enumerate(stages)]
    notes += [dict(x=x - half_w, y=0, ax=x - 1 + half_w, ay=0, arrowwidth=1.5, arrowcolor=grey, **arrow)
              for x in range(1, len(stages))]
    notes += [
        dict(x=1, y=-half_h, ax=1, ay=-0.95, arrowwidth=2, arrowcolor=back, **arrow),
        dict(x=3.5, y=0.8, text=html_escape(page.t("diagram.block", n=cfg.n_layers)), showarrow=False,
             font=dict(color=blue)),
        dict(x=(last + 1) / 2, y=-1.2, text=html_escape(page.t("diagram.append")), showarrow=False,
             font=dict(color=back)),
    ]
    fig = go.Figure(layout=dict(shapes=shapes, annotations=notes, showlegend=False, hovermode=False,
                                dragmode=False, margin=dict(l=0, r=0, t=0, b=0)))
    fig.update_xaxes(visible=False, range=[-0.5, last + 0.5], fixedrange=True)
    fig.update_yaxes(visible=False, range=[-1.45, 1.05], fixedrange=True)
    fig.update_annotations(font_size=theme.FONT_SIZE - 1)
    return fig


def param_figure(counts: dict[str, int]) -> go.Figure:
    kinds = [k for k in ("embedding", "attention", "mlp", "norms", "unembedding") if counts.get(k)]
    total = counts["total"]
    fig = go.Figure()
    for i, kind in enumerate(kinds):
        share = counts[kind] / total
        fig.add_bar(
            x=[counts[kind] / 1e6], y=[""], orientation="h", name=page.t(f"card.kind.{kind}"),
            marker_color=theme.OKABE_ITO[i], text=[f"{share:.0%}" if share >= 0.04 else ""],
            textposition="inside", insidetextanchor="middle",
            hovertemplate=f"%{{x:.2f}} M · {share:.1%}<extra>{page.t(f'card.kind.{kind}')}</extra>",
        )
    fig.update_layout(barmode="stack", showlegend=True, title=page.t("card.chart_title", total=f"{total / 1e6:.1f}"),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1,
                                  traceorder="normal"))
    fig.update_xaxes(title=page.t("card.axis"))
    return fig


def candidates_figure(labels: list[str], probs: list[float]) -> go.Figure:
    fig = go.Figure(go.Bar(
        x=[p * 100 for p in probs], y=labels, orientation="h", marker_color=theme.OKABE_ITO[0],
        text=[f"{p:.1%}" for p in probs], textposition="outside", cliponaxis=False,
        hovertemplate="%{y}: %{x:.2f}%<extra></extra>",
    ))
    fig.update_yaxes(autorange="reversed", title=page.t("demo.axis_token"), type="category")
    fig.update_xaxes(title=page.t("demo.axis_prob"), range=[0, max(probs) * 118])
    fig.update_layout(title=page.t("demo.chart_title"))
    return fig


def append_token(ids: tuple[int, ...], token_id: int) -> None:
    """Set the prompt to ``ids`` + the chosen token; when that token is only part of a
    character's bytes, let the model's top choices finish the character."""
    ids = [*ids, token_id]
    broken = lm.decode(ids[:-1]).count("\ufffd")
    for _ in range(MAX_COMPLETION):
        if lm.decode(ids).count("\ufffd") <= broken:
            break
        ids.append(int(page.run(lm, ids).last_logits.argmax()))
    state.set_prompt(lm.decode(ids))


# --- 1. the loop -------------------------------------------------------------------------
st.subheader(page.t("loop_title"), anchor=False)
page.prose("loop")
theme.plot(loop_figure(), key="loop_chart", height=250, static=True)
st.caption(page.t("links_caption"))
number = 0
for col, (section, pages) in zip(st.columns(len(nav.SECTIONS) - 1), nav.SECTIONS[1:]):
    col.markdown(f"**{t(f'nav.section.{section}')}**")
    for lesson, icon in pages:
        number += 1
        col.page_link(nav.page_file(lesson), label=f"{number}. {t(f'nav.{lesson}')}", icon=icon,
                      help=t(f"about.{lesson}"))

# --- 2. the model card --------------------------------------------------------------------
st.subheader(page.t("card.title", name=md_escape(lm.name)), anchor=False)
page.prose("card")
counts = lm.param_counts()
facts = [
    ("layers", cfg.n_layers), ("heads", cfg.n_heads), ("kv_heads", cfg.n_kv_heads),
    ("d_model", cfg.d_model), ("d_head", cfg.d_head), ("d_ff", cfg.d_ff), ("vocab", cfg.vocab_size),
]
for col, (fact, value) in zip(st.columns(len(facts)), facts):
    col.metric(page.t(f"card.{fact}"), f"{value:,}", help=page.t(f"card.{fact}_help"))
theme.plot(param_figure(counts), key="param_chart", height=220)

# --- 3. live demo -------------------------------------------------------------------------
st.subheader(page.t("demo.title"), anchor=False)
page.prose("demo")
tokens = page.tokens(lm, cap=CAP)
ids = tuple(tok.id for tok in tokens)
figure_area, controls = page.columns()
with controls:
    top_n = state.url_int("top", page.t("demo.top_label"), 3, 20, 10, help=page.t("demo.top_help"))
run = page.run(lm, ids)
probs = next_token_distribution(run.last_logits)
top = torch.topk(probs, top_n)
top_ids = [int(i) for i in top.indices]
top_probs = [float(p) for p in top.values]
with figure_area:
    shown = " ".join(md_label(tok) for tok in tokens[:SHOWN_TOKENS])
    more = page.t("demo.more", n=len(tokens) - SHOWN_TOKENS) if len(tokens) > SHOWN_TOKENS else ""
    st.markdown(page.t("demo.tokens_in", n=len(tokens)) + "\n\n" + shown + more)
    theme.plot(candidates_figure(axis_labels([lm.token_text(i) for i in top_ids]), top_probs),
               key="candidates_chart", height=120 + 34 * top_n)
with controls:
    st.markdown(page.t("demo.append_label"))
    for rank, (token_id, p) in enumerate(zip(top_ids[:APPEND_CHOICES], top_probs)):
        st.button(f"{md_escape(label(lm.token_text(token_id)))}  ({p:.0%})", key=f"append_{rank}",
                  on_click=append_token, args=(ids, token_id), width="stretch",
                  icon=":material/add:")

entropy_bits = float(-(probs[probs > 0] * probs[probs > 0].log2()).sum())
page.notice([
    page.t("notice.tokens", chars=len(state.prompt()), n=len(tokens)),
    page.t("notice.top", token=md_label(lm.token_text(top_ids[0])), p=f"{top_probs[0]:.0%}"),
    page.t("notice.cover", k=top_n, p=f"{sum(top_probs):.0%}", rest=f"{cfg.vocab_size - top_n:,}"),
    page.t("notice.positions", n=len(tokens), layers=cfg.n_layers, vocab=f"{cfg.vocab_size:,}"),
    page.t("notice.entropy", bits=f"{entropy_bits:.1f}"),
])
page.try_this()

z = run.last_logits[top_ids[:3]].tolist()
page.math(page.t("math_example", z1=f"{z[0]:.2f}", z2=f"{z[1]:.2f}", z3=f"{z[2]:.2f}",
                 p1=f"{top_probs[0]:.1%}", p2=f"{top_probs[1]:.1%}", p3=f"{top_probs[2]:.1%}",
                 vocab=f"{cfg.vocab_size:,}", emb=f"{counts['embedding']:,}", d_model=cfg.d_model))
page.code(Decoder.forward, next_token_distribution)
