"""Lesson 7: the feed-forward network (MLP): shapes, the non-linearity, neurons, where the
parameters are, and mixture of experts."""

import streamlit as st
import torch

from course import state, theme
from course.cache import ffn as cache
from course.figures import ffn as F
from course.i18n import big_number, current_lang, is_cjk, join_sentences
from course.lesson import Lesson
from course.notices import ffn as NO
from course.text import html_escape
from course.tokens import axis_labels, label, md_label, plot_label, readable_texts
from lesson_model.analysis import neurons as N
from lesson_model.analysis import params as P
from lesson_model.analysis.lens import decode_residual
from lesson_model.decoder import MLP

CAP = cache.CAP     # tokens of the prompt this page runs
TOP_NEURONS = cache.TOP_NEURONS     # neurons listed for the chosen token
VOCAB_K = 8         # tokens listed per side in the neuron's vocabulary chart
DIAGRAM_WIDTH = 340  # px: the MLP diagram's text is then about 17 px (less where the column is narrower)
WIDE = theme.WIDE_TITLE      # title width of a chart spanning the page


def block_parts(count: P.ParamCount) -> dict[str, int]:
    return {"attention": count.per_layer["attention"], "mlp": count.per_layer["mlp"], "norms": count.per_layer["norms"]}


def render() -> None:
    """The lesson, top to bottom: its variables live only while it runs (a widget's callback
    keeps just the names it uses, never this run's tensors)."""
    page = Lesson("ffn")
    page.header()
    lm = page.model()
    page.predict(lm)                  # Predict, then see: before the figures that answer it
    cfg = lm.cfg
    DEFAULT_LAYER = cache.default_layer(cfg)     # late, where neurons push next-token candidates (26 of 30, 15 of 18)
    LAST_RESID = cache.last_resid(cfg)
    ACT = dict(act=page.t(f"act_name.{cfg.activation}"), glu=page.t(f"glu.{cfg.activation}"), fn=cfg.activation)
    mine = P.model_breakdown(lm)
    gpt3 = P.count_params(P.PRESETS["gpt3-175b"])

    BIG = 1e8 if is_cjk() else 1e9           # unit.b: 億 / 亿 in Chinese, billions (B) in English

    def billions(n: int) -> str:
        return page.t("unit.b", n=f"{n / BIG:.2f}")

    # --- 1. the shape of the MLP ---------------------------------------------------------------
    page.part("shape", page.t("shape_title"))
    page.prose("shape")
    presenting = theme.view().presenting
    if presenting:      # the diagram in two rows across the page (whole on a projector's first screen), the facts under it
        theme.diagram(F.mlp_diagram(page.t, cfg.d_model, cfg.d_ff, theme.font_family().split(",")[0],
                                    ACT["act"], cfg.post_norms, snake=True), width="stretch")
        facts = st.container(horizontal=True, gap="large", key="mlp_facts")
    else:
        diagram, facts = st.columns([3, 2], gap="large", vertical_alignment="center")
        with diagram:
            theme.diagram(F.mlp_diagram(page.t, cfg.d_model, cfg.d_ff, theme.font_family().split(",")[0],
                                        ACT["act"], cfg.post_norms), width=F.diagram_px(DIAGRAM_WIDTH))
    with facts:
        st.metric(page.t("metric.mlp_layer"), f"{mine.per_layer['mlp']:,}",
                  help=page.t("metric.mlp_layer_help", d=cfg.d_model, f=cfg.d_ff))
        st.metric(page.t("metric.attn_layer"), f"{mine.per_layer['attention']:,}", help=page.t("metric.attn_layer_help"))
        st.metric(page.t("metric.ratio"), f"{cfg.d_ff / cfg.d_model:.2f}×", help=page.t("metric.ratio_help"))

    # --- 2. the non-linearity ------------------------------------------------------------------
    tokens = page.tokens(lm, cap=CAP)
    texts = readable_texts(tokens)               # byte pieces read as their character (我¹ 我²)
    n_pos = len(tokens)
    page.part("act", page.t("act_title"))
    page.prose("activations")
    with st.container(border=True, key="ffn_controls"):
        st.caption(page.t("controls_caption"))
        c1, c2 = st.columns(2, gap="large")
        with c1:
            layer = state.url_int("layer", page.t("layer"), 0, cfg.n_layers - 1, DEFAULT_LAYER, help=page.t("layer_help"))
        with c2:
            pos = state.url_int("pos", page.t("pos"), 0, n_pos - 1, n_pos - 1, widget="select",
                                format_func=lambda i: f"{i}: {label(texts[i])}", help=page.t("pos_help"))
    run = cache.lesson_run(lm, tokens, layer)
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

    st.markdown(f"#### {page.t('collapse_title')}")
    page.prose("collapse")
    singular, rank, params_two, params_one, collapse_error = cache.collapse(lm.name, layer, _lm=lm)
    pos_b = pos - 1 if pos > 0 else min(1, n_pos - 1)
    check = N.nonlinearity_check(lm, run, layer, pos, pos_b)
    chart, numbers = st.columns([3, 2], gap="medium")
    with chart:
        theme.plot(F.singular_figure(page.t, torch.tensor(singular), layer), key="singular_chart", height=340)
    with numbers:
        st.markdown(page.t("collapse.matrices", d=cfg.d_model, f=cfg.d_ff, two=f"{params_two:,}", one=f"{params_one:,}",
                           rank=rank, error=f"{collapse_error:.0e}"))

    def gap_text(gap: float) -> str:
        shown = NO.gap(gap)
        return shown if isinstance(shown, str) else page.t(shown[0], **shown[1])

    st.markdown(page.t("collapse.check_same" if pos_b == pos else "collapse.check", a=md_label(texts[pos]),
                       b=md_label(texts[pos_b]), layer=layer))
    st.markdown("\n".join(                       # cells without padding spaces (none after a Chinese 「）」)
        [f"|{page.t('collapse.col.map')}|{page.t('collapse.col.gap')}|{page.t('collapse.col.double')}|", "|:--|--:|--:|"]
        + [f"|{page.t(f'collapse.map.{m}', **ACT)}|{gap_text(check.gap[m])}|{check.doubling[m]:.2f}|" for m in N.MAPS]))
    quadratic = check.quadratic_error < 1e-4 and abs(check.doubling["bilinear"] - 4) < 1e-3
    st.caption(page.t("collapse.verdict_quadratic" if quadratic else "collapse.verdict",
                      gap=gap_text(check.gap["bilinear"]), double=f"{check.doubling['bilinear']:.2f}", **ACT))

    # --- 3. neuron explorer --------------------------------------------------------------------
    page.part("neurons", page.t("neurons_title"))
    page.prose("neurons")
    top = N.neuron_top_activations(lm, run, layer, pos, k=TOP_NEURONS)
    options = [str(a.neuron) for a in top]
    predicted = int(decode_residual(lm, run.cache[LAST_RESID][0, pos]).argmax())    # the model's next token here
    pusher = N.strongest_pusher(lm, run, layer, predicted, pos, k=TOP_NEURONS)   # the default neuron
    shown = {o: f"{float(post[pos, int(o)]):+.2f}" for o in options}       # the options' labels hold no tensor
    figure_area, controls = page.columns()
    with controls:
        st.caption(page.t("neurons.where", layer=layer, token=token_md, pos=pos))
        neuron = int(state.url_choice("neuron", page.t("neuron"), options, str(pusher.neuron),
                                      format_func=lambda o: page.t("neuron_option", n=o, v=shown[o]),
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
    page.part("params", page.t("params_title"))
    page.prose("params")
    rows = [
        (page.t("params.row.block", name=html_escape(lm.name)), block_parts(mine)),
        (page.t("params.row.block", name=page.t("params.gpt3")), block_parts(gpt3)),
        (page.t("params.row.model", name=html_escape(lm.name)), mine.parts),
        (page.t("params.row.model", name=page.t("params.gpt3")), gpt3.parts),
    ]
    theme.plot(F.params_figure(page.t, rows, big_number), key="params_chart", height=theme.presenter_height(420), title_width=WIDE)

    # --- 5. mixture of experts -----------------------------------------------------------------
    page.part("moe", page.t("moe_title"))
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
        theme.plot(F.moe_figure(page.t, parts_total, parts_active, BIG), key="moe_chart", height=400)
        st.caption(page.t("moe.caption", d=mixtral.d_model, f=mixtral.d_ff, layers=L, expert=f"{expert_size:,}",
                          published_total=page.t("unit.b", n=f"{P.PUBLISHED_TOTALS['mixtral-8x7b'] / BIG:.1f}"),
                          published_active=page.t("unit.b", n=f"{P.PUBLISHED_ACTIVE['mixtral-8x7b'] / BIG:.1f}")))

    # --- what to notice ------------------------------------------------------------------------
    lang = current_lang()
    found = [
        NO.top_notice(layer=layer, token=token_md, neuron=top[0].neuron, value=top[0].value,
                      big=int((post[pos].abs() > 0.1 * post[pos].abs().max()).sum()), d_ff=cfg.d_ff),
        NO.gate_notices(layer=layer, negative_share=negative_gate, activation_min=N.activation_min(cfg.activation),
                        largest_factor=largest_factor, act=ACT),
        NO.collapse_notices(rank=rank, d_model=cfg.d_model, quadratic=quadratic, gap_bilinear=check.gap["bilinear"],
                            gap_real=check.gap["real"], doubling=check.doubling["bilinear"], same=pos_b == pos,
                            a=md_label(texts[pos]), b=md_label(texts[pos_b]), act=ACT,
                            singular=(min(singular), max(singular))),
    ]
    scale_ratio = None
    if n_pos > 1:
        scales = run.cache["ln_final.hook_scale"][0, :, 0].float()
        others = torch.cat([scales[:pos], scales[pos + 1:]])
        scale_ratio = float(scales[pos] / others.median())
    found += NO.neuron_notices(
        neuron=neuron, token=token_md,
        promoted=(md_label(lm.token_text(effect.promoted[0][0])), effect.promoted[0][1]) if effect.promoted else None,
        push=pusher.push, total=pusher.total, pusher=pusher.neuron, scale=pusher.scale, k=len(top),
        pred=md_label(lm.token_text(predicted)), layer=layer, scale_ratio=scale_ratio)
    found.append(NO.params_notice(mlp=mine.parts["mlp"], total=mine.total, mlp_layer=mine.per_layer["mlp"],
                                  attn_layer=mine.per_layer["attention"], gpt3_mlp_layer=gpt3.per_layer["mlp"],
                                  gpt3_attn_layer=gpt3.per_layer["attention"], lang=lang))
    row_max = post.abs().max(dim=1).values                   # [pos] each position's largest |activation|
    first = max(range(n_pos), key=lambda i: float(post[i].abs().max()))
    hot = int(post[first].abs().argmax())
    massive = NO.massive_notice(n_pos=n_pos, layer=layer, first=first, first_max=float(row_max[first]),
                                median=float(row_max.median()), token=md_label(texts[first]), hot=hot,
                                hot_value=float(post[first, hot]))
    if massive is not None:
        found.append(massive)
    page.notices(found)

    # --- try this: each example's neuron, computed on its own prompt ---------------------------
    page.try_this([(page.t(f"try.{n}.prompt"),
                    join_sentences([page.t(f"try.{n}.why"), cache.try_detail(lm.name, lang, n, _lm=lm)]))
                   for n in page.try_numbers()])

    # --- the math ------------------------------------------------------------------------------
    n0 = top[0].neuron
    g0, u0 = float(gate[pos, n0]), float(up[pos, n0])
    act0 = float(N.gate_fn(lm)(torch.tensor(g0, dtype=torch.float64)))    # act(g) = g * sig below
    sig = act0 / g0 if g0 != 0 else 0.5                                     # sigma(g) for SiLU, Phi~(g) for GELU-tanh
    page.math(page.t("math_example", token=token_md, layer=layer, n=n0, g=f"{g0:.3f}", sig=f"{sig:.3f}",
                     silu=f"{act0:.3f}", u=f"{u0:.3f}", post=f"{act0 * u0:.3f}", real=f"{float(post[pos, n0]):.3f}",
                     shared=f"{(moe.total - L * moe.per_layer['mlp']) / BIG:.2f}", expert=f"{L * expert_size / BIG:.3f}",
                     total=f"{moe.total / BIG:.2f}", active=f"{moe.active / BIG:.2f}", e=experts, k=active))
    page.code(MLP.forward, N.neuron_top_activations, N.neuron_logit_effect, N.linear_collapse, N.nonlinearity_check,
              P.count_params, P.model_breakdown)


render()
