"""Lesson 7: the feed-forward network (MLP): shapes, the non-linearity, neurons, where the
parameters are, and mixture of experts."""

import streamlit as st
import torch

from lesson_model.analysis import neurons as N
from lesson_model.analysis import params as P
from lesson_model.analysis.lens import decode_residual
from lesson_model.decoder import MLP
from ui import state, theme
from ui import figures_ffn as F
from ui.i18n import big_number, current_lang, join_list, join_sentences
from ui.lesson import Lesson
from ui.text import html_escape, num
from ui.tokens import axis_labels, label, md_label, plot_label, readable_texts

CAP = 64            # tokens of the prompt this page runs
TOP_NEURONS = 12    # neurons listed for the chosen token
VOCAB_K = 8         # tokens listed per side in the neuron's vocabulary chart
DIAGRAM_WIDTH = 340  # px: the MLP diagram's text is then about 17 px (less where the column is narrower)
TRY_TOKENS = 4      # pushed tokens named per Try-this example
WIDE = theme.WIDE_TITLE      # title width of a chart spanning the page

page = Lesson("ffn")
page.header()
lm = page.model()
cfg = lm.cfg
DEFAULT_LAYER = cfg.n_layers * 7 // 8    # late, where neurons push next-token candidates (26 of 30, 15 of 18)
LAST_RESID = f"blocks.{cfg.n_layers - 1}.hook_resid_post"
ACT = dict(act=page.t(f"act_name.{cfg.activation}"), glu=page.t(f"glu.{cfg.activation}"), fn=cfg.activation)
mine = P.model_breakdown(lm)
gpt3 = P.count_params(P.PRESETS["gpt3-175b"])


def billions(n: int) -> str:
    return page.t("unit.b", n=f"{n / 1e9:.2f}")


def negligible(x: float) -> bool:
    """A logit change that prints as 0.00."""
    return num(abs(x), ".2f") == num(0.0, ".2f")


# --- 1. the shape of the MLP ---------------------------------------------------------------
st.subheader(page.t("shape_title"), anchor=False)
page.prose("shape")
diagram, facts = st.columns([3, 2], gap="large", vertical_alignment="center")
with diagram:
    st.graphviz_chart(F.mlp_diagram(page.t, cfg.d_model, cfg.d_ff, theme.font_family().split(",")[0],
                                    ACT["act"], cfg.post_norms), width=F.diagram_px(DIAGRAM_WIDTH))
with facts:
    st.metric(page.t("metric.mlp_layer"), f"{mine.per_layer['mlp']:,}",
              help=page.t("metric.mlp_layer_help", d=cfg.d_model, f=cfg.d_ff))
    st.metric(page.t("metric.attn_layer"), f"{mine.per_layer['attention']:,}", help=page.t("metric.attn_layer_help"))
    st.metric(page.t("metric.ratio"), f"{cfg.d_ff / cfg.d_model:.2f}×", help=page.t("metric.ratio_help"))

# --- 2. the non-linearity ------------------------------------------------------------------
tokens = page.tokens(lm, cap=CAP)
texts = readable_texts(tokens)               # byte pieces read as their character (我¹ 我²)
labels = axis_labels(tokens)
n_pos = len(tokens)
st.subheader(page.t("act_title"), anchor=False)
page.prose("activations")
with st.container(border=True, key="ffn_controls"):
    st.caption(page.t("controls_caption"))
    c1, c2 = st.columns(2, gap="large")
    with c1:
        layer = state.url_int("layer", page.t("layer"), 0, cfg.n_layers - 1, DEFAULT_LAYER, help=page.t("layer_help"))
    with c2:
        pos = state.url_int("pos", page.t("pos"), 0, n_pos - 1, n_pos - 1, widget="select",
                            format_func=lambda i: f"{i}: {label(texts[i])}", help=page.t("pos_help"))
names = [f"blocks.{layer}.mlp.hook_pre", f"blocks.{layer}.mlp.hook_pre_linear", *N.neuron_names(layer),
         *N.mlp_names(layer), *N.neuron_effect_names(lm, layer), LAST_RESID]
run = page.run(lm, tokens, names=names)
gate = run.cache[f"blocks.{layer}.mlp.hook_pre"][0].float()          # [pos, d_ff]
up = run.cache[f"blocks.{layer}.mlp.hook_pre_linear"][0].float()     # [pos, d_ff]
post = run.cache[f"blocks.{layer}.mlp.hook_post"][0].float()         # [pos, d_ff]
token_md = md_label(texts[pos])
token_plot = plot_label(texts[pos])
left, right = st.columns(2, gap="medium")
with left:
    theme.plot(F.activation_figure(page.t, gate.flatten(), layer, N.curves(lm), N.own_curve(lm)),
               key="activation_chart", height=theme.presenter_height(520))
with right:
    theme.plot(F.swiglu_figure(page.t, gate[pos], up[pos], token_plot, N.gate_fn(lm), ACT), key="swiglu_chart",
               height=470)
negative_gate = float((gate < 0).float().mean())
largest_factor = float(N.gate_fn(lm)(gate).max())   # the most a positive gate multiplies up by here


@st.cache_data(max_entries=32, show_spinner=False)
def collapse(model_name: str, layer: int) -> tuple[list[float], int, int, int, float]:
    c = N.linear_collapse(lm, layer)
    return c.singular_values.tolist(), c.rank, c.params_two, c.params_one, c.max_error


st.markdown(f"#### {page.t('collapse_title')}")
page.prose("collapse")
singular, rank, params_two, params_one, collapse_error = collapse(lm.name, layer)
pos_b = pos - 1 if pos > 0 else min(1, n_pos - 1)
check = N.nonlinearity_check(lm, run, layer, pos, pos_b)
chart, numbers = st.columns([3, 2], gap="medium")
with chart:
    theme.plot(F.singular_figure(page.t, torch.tensor(singular), layer), key="singular_chart", height=340)
with numbers:
    st.markdown(page.t("collapse.matrices", d=cfg.d_model, f=cfg.d_ff, two=f"{params_two:,}", one=f"{params_one:,}",
                       rank=rank, error=f"{collapse_error:.0e}"))


def gap_text(gap: float) -> str:
    return f"{gap:.1%}" if gap >= 5e-4 else page.t("collapse.rounding", v=f"{gap:.0e}")


st.markdown(page.t("collapse.check_same" if pos_b == pos else "collapse.check", a=md_label(texts[pos]),
                   b=md_label(texts[pos_b]), layer=layer))
st.markdown("\n".join(                       # cells without padding spaces (none after a Chinese 「）」)
    [f"|{page.t('collapse.col.map')}|{page.t('collapse.col.gap')}|{page.t('collapse.col.double')}|", "|:--|--:|--:|"]
    + [f"|{page.t(f'collapse.map.{m}', **ACT)}|{gap_text(check.gap[m])}|{check.doubling[m]:.2f}|" for m in N.MAPS]))
quadratic = check.quadratic_error < 1e-4 and abs(check.doubling["bilinear"] - 4) < 1e-3
st.caption(page.t("collapse.verdict_quadratic" if quadratic else "collapse.verdict",
                  gap=gap_text(check.gap["bilinear"]), double=f"{check.doubling['bilinear']:.2f}", **ACT))

# --- 3. neuron explorer --------------------------------------------------------------------
st.subheader(page.t("neurons_title"), anchor=False)
page.prose("neurons")
top = N.neuron_top_activations(lm, run, layer, pos, k=TOP_NEURONS)
options = [str(a.neuron) for a in top]
predicted = int(decode_residual(lm, run.cache[LAST_RESID][0, pos]).argmax())    # the model's next token here
pusher = N.strongest_pusher(lm, run, layer, predicted, pos, k=TOP_NEURONS)   # the default neuron
figure_area, controls = page.columns()
with controls:
    st.caption(page.t("neurons.where", layer=layer, token=token_md, pos=pos))
    neuron = int(state.url_choice("neuron", page.t("neuron"), options, str(pusher.neuron),
                                  format_func=lambda o: page.t("neuron_option", n=o, v=f"{float(post[pos, int(o)]):+.2f}"),
                                  help=page.t("neuron_help", k=TOP_NEURONS)))
acts = N.neuron_activations(lm, run, layer, neuron)                  # [pos]
effect = N.neuron_logit_effect(lm, run, layer, neuron, pos, k=VOCAB_K)
with figure_area:
    theme.plot(F.neuron_bar_figure(page.t, [a.neuron for a in top], [a.value for a in top], neuron, token_plot,
                                   cfg.activation),
               key="neuron_bars", height=120 + 30 * len(top))
strip_title = html_escape(page.t("strip.title", n=neuron, layer=layer))
strip_labels = [plot_label(text, 12) for text in texts]
per_row = F.strip_per_row(strip_labels)
theme.plot(F.token_strip_figure(page.t, strip_labels, acts.tolist(), strip_title, per_row),
           key="neuron_strip", height=F.strip_height(-(-n_pos // per_row)), title_width=WIDE)
st.markdown(page.t("vocab.caption", n=neuron, token=token_md, v=f"{float(post[pos, neuron]):+.2f}"))
promoted = list(zip(axis_labels([lm.token_text(i) for i, _ in effect.promoted]), [v for _, v in effect.promoted]))
suppressed = list(zip(axis_labels([lm.token_text(i) for i, _ in effect.suppressed]), [v for _, v in effect.suppressed]))
theme.plot(F.vocab_figure(page.t, promoted, suppressed), key="vocab_chart", height=120 + 32 * VOCAB_K)

# --- 4. where the parameters are -----------------------------------------------------------
st.subheader(page.t("params_title"), anchor=False)
page.prose("params")


def block_parts(count: P.ParamCount) -> dict[str, int]:
    return {"attention": count.per_layer["attention"], "mlp": count.per_layer["mlp"], "norms": count.per_layer["norms"]}


rows = [
    (page.t("params.row.block", name=html_escape(lm.name)), block_parts(mine)),
    (page.t("params.row.block", name=page.t("params.gpt3")), block_parts(gpt3)),
    (page.t("params.row.model", name=html_escape(lm.name)), mine.parts),
    (page.t("params.row.model", name=page.t("params.gpt3")), gpt3.parts),
]
theme.plot(F.params_figure(page.t, rows, big_number), key="params_chart", height=theme.presenter_height(420), title_width=WIDE)

# --- 5. mixture of experts -----------------------------------------------------------------
st.subheader(page.t("moe_title"), anchor=False)
page.prose("moe")
mixtral = P.PRESETS["mixtral-8x7b"]
figure_area, controls = page.columns()
with controls:
    experts = state.url_int("experts", page.t("moe.experts"), 1, 64, mixtral.n_experts, widget="number",
                            help=page.t("moe.experts_help"))
    active = state.url_int("active", page.t("moe.active_label"), 1, experts, mixtral.experts_per_token, widget="number",
                           help=page.t("moe.active_help"))
moe = P.count_params(P.with_experts(mixtral, experts, active))
L = mixtral.n_layers
expert_size = moe.per_layer["mlp"] // experts
parts_total = {"attention": moe.parts["attention"], "experts": L * moe.per_layer["mlp"],
               "embedding": moe.parts["embedding"], "other": moe.parts["norms"] + L * moe.per_layer["router"]}
parts_active = dict(parts_total, experts=L * moe.per_layer_active["mlp"])
with figure_area:
    m1, m2, m3 = st.columns(3)
    m1.metric(page.t("moe.total_metric"), billions(moe.total))
    m2.metric(page.t("moe.active_metric"), billions(moe.active))
    m3.metric(page.t("moe.share"), f"{moe.active / moe.total:.0%}")
    theme.plot(F.moe_figure(page.t, parts_total, parts_active), key="moe_chart", height=400)
    st.caption(page.t("moe.caption", d=mixtral.d_model, f=mixtral.d_ff, layers=L, expert=f"{expert_size:,}",
                      published_total=f"{P.PUBLISHED_TOTALS['mixtral-8x7b'] / 1e9:.1f}",
                      published_active=f"{P.PUBLISHED_ACTIVE['mixtral-8x7b'] / 1e9:.1f}"))

# --- what to notice ------------------------------------------------------------------------
big = int((post[pos].abs() > 0.1 * post[pos].abs().max()).sum())
mlp_share = mine.parts["mlp"] / mine.total
pred_md = md_label(lm.token_text(predicted))
gate_line = [page.t("notice.gate", layer=layer, pct=f"{negative_gate:.0%}",
                    low=f"{N.activation_min(cfg.activation):.2f}".replace("-", "−"), **ACT)]
if largest_factor > 1:
    gate_line.append(page.t("notice.gate_positive", factor=f"{largest_factor:.1f}", **ACT))
collapse_line = [page.t("notice.collapse", rank=rank, d=cfg.d_model)]
if quadratic and check.gap["bilinear"] >= 0.01:
    pair = page.t("notice.pair_same" if pos_b == pos else "notice.pair", a=md_label(texts[pos]), b=md_label(texts[pos_b]))
    collapse_line.append(page.t("notice.collapse_gated", pair=pair,
                                gap=gap_text(check.gap["bilinear"]), double=f"{check.doubling['bilinear']:.2f}",
                                real=gap_text(check.gap["real"]), **ACT))
elif quadratic:
    collapse_line.append(page.t("notice.collapse_gated_small", gap=gap_text(check.gap["bilinear"]),
                                double=f"{check.doubling['bilinear']:.2f}", **ACT))
notice = [
    page.t("notice.top" if big < cfg.d_ff // 2 else "notice.top_dense", layer=layer, token=token_md, n=top[0].neuron,
           v=f"{top[0].value:+.2f}", big=big, total=f"{cfg.d_ff:,}"),
    join_sentences(gate_line),
    join_sentences(collapse_line),
]
tiny_effects = negligible(pusher.push)
if effect.promoted and not negligible(effect.promoted[0][1]):
    notice.append(page.t("notice.vocab", n=neuron, token=token_md, up=md_label(lm.token_text(effect.promoted[0][0])),
                         dv=f"{effect.promoted[0][1]:+.2f}"))
elif not tiny_effects:
    notice.append(page.t("notice.vocab_tiny", n=neuron, token=token_md))
if not tiny_effects:
    notice.append(page.t("notice.best" if pusher.push > 0 else "notice.best_none", k=len(top), token=token_md,
                         pred=pred_md, n=pusher.neuron, dv=f"{pusher.push:+.2f}", layer=layer,
                         all=num(pusher.total, "+.2f")))
else:
    tiny = [page.t("notice.best_tiny", token=token_md, pred=pred_md, layer=layer, all=num(pusher.total, "+.2f"),
                   s=f"{pusher.scale:,.1f}")]
    if n_pos > 1:
        scales = run.cache["ln_final.hook_scale"][0, :, 0].float()
        others = torch.cat([scales[:pos], scales[pos + 1:]])
        ratio = float(scales[pos] / others.median())
        if ratio >= 3:
            tiny.append(page.t("notice.best_tiny_ratio", ratio=f"{ratio:.0f}"))
    notice.append(join_sentences(tiny))
notice.append(page.t("notice.params", share=f"{mlp_share:.0%}", mlp=big_number(mine.parts["mlp"]),
                     total=big_number(mine.total),
                     ratio=f"{mine.per_layer['mlp'] / mine.per_layer['attention']:.1f}",
                     gpt3=f"{gpt3.per_layer['mlp'] / gpt3.per_layer['attention']:.1f}"))
first = max(range(n_pos), key=lambda i: float(post[i].abs().max()))
if n_pos > 2 and float(post[first].abs().max()) > 20 * float(post.abs().max(dim=1).values.median()):
    hot = int(post[first].abs().argmax())
    notice.append(page.t("notice.massive" if first == 0 else "notice.massive_other", layer=layer,
                         token=md_label(texts[first]), n=hot, v=f"{float(post[first, hot]):+,.0f}",
                         median=f"{float(post.abs().max(dim=1).values.median()):.1f}"))
page.notice(notice)


# --- try this: each example's neuron, computed on its own prompt ---------------------------
def try_names() -> list[str]:
    return sorted({n for L in range(cfg.n_layers) for n in N.neuron_effect_names(lm, L)})


def try_pusher(try_run) -> tuple[int, int, N.Pusher]:
    """(answer, layer, pusher): the model's answer on a Try-this run and, of every layer's
    TOP_NEURONS most active neurons at the last token, the one that pushes it up most directly."""
    answer = int(try_run.last_logits.argmax())
    pushers = [N.strongest_pusher(lm, try_run, L, answer, -1, k=TOP_NEURONS) for L in range(cfg.n_layers)]
    best = max(range(cfg.n_layers), key=lambda L: pushers[L].push)
    return answer, best, pushers[best]


@st.cache_data(max_entries=64, show_spinner=False)   # the same for every visitor: once per model and language
def try_detail(model_name: str, lang: str, n: int) -> str:
    """What the neuron that pushes example n's answer most does on its prompt (a model run)."""
    ids = [tok.id for tok in lm.tokenize(page.t(f"try.{n}.prompt"))]
    try_run = page.run(lm, ids, names=try_names())
    answer, try_layer, best = try_pusher(try_run)
    pushed = N.neuron_logit_effect(lm, try_run, try_layer, best.neuron, -1, k=TRY_TOKENS).promoted
    lines = [page.t("try_detail.main", answer=md_label(lm.token_text(answer)), layer=try_layer, k=TOP_NEURONS,
                    n=best.neuron, v=f"{best.value:+.1f}", dv=num(best.push, "+.2f"),
                    tokens=join_list(md_label(lm.token_text(i)) for i, _ in pushed))]
    if best.value < 0:
        lines.append(page.t("try_detail.negative"))
    return join_sentences(lines)


page.try_this([(page.t(f"try.{n}.prompt"), join_sentences([page.t(f"try.{n}.why"), try_detail(lm.name, current_lang(), n)]))
               for n in page.try_numbers()])

# --- the math ------------------------------------------------------------------------------
n0 = top[0].neuron
g0, u0 = float(gate[pos, n0]), float(up[pos, n0])
act0 = float(N.gate_fn(lm)(torch.tensor(g0, dtype=torch.float64)))    # act(g) = g * sig below
sig = act0 / g0 if g0 != 0 else 0.5                                     # sigma(g) for SiLU, Phi~(g) for GELU-tanh
page.math(page.t("math_example", token=token_md, layer=layer, n=n0, g=f"{g0:.3f}", sig=f"{sig:.3f}",
                 silu=f"{act0:.3f}", u=f"{u0:.3f}", post=f"{act0 * u0:.3f}", real=f"{float(post[pos, n0]):.3f}",
                 shared=f"{(moe.total - L * moe.per_layer['mlp']) / 1e9:.2f}", expert=f"{L * expert_size / 1e9:.3f}",
                 total=f"{moe.total / 1e9:.2f}", active=f"{moe.active / 1e9:.2f}", e=experts, k=active))
page.code(MLP.forward, N.neuron_top_activations, N.neuron_logit_effect, N.linear_collapse, N.nonlinearity_check,
          P.count_params, P.model_breakdown)
