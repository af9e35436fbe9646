"""Lesson 9: the next token. The last position's vector -> one logit per vocabulary entry ->
softmax; temperature, top-k and top-p; the four-candidate example; sampling many times."""

import pandas as pd
import streamlit as st
import torch

from lesson_model import sampling as S
from lesson_model.analysis import sampling_demo as sd
from ui import state, theme
from ui import figures_sampling as F
from ui.lesson import Lesson
from ui.text import html_escape
from ui.tokens import axis_labels, md_label, plot_label

CAP = 256              # tokens of the prompt this page runs
TOP_SHOWN = 12         # candidates in the logit / probability bars
SETTING_SHOWN = 20     # candidates in the before/after chart
CURVE_SHOWN = 40       # ranks on the cumulative curve
CURVE_TOKENS = 4       # real tokens followed across temperatures
N_MAX = 10000          # draws in the sampling experiment

page = Lesson("sampling")
page.header()
lm = page.model()
cfg = lm.cfg
tokens = page.tokens(lm, cap=CAP)
run = page.run(lm, tokens, names=sd.final_vector_hook_names())
logits = run.last_logits.float()                       # [vocab]
probs = logits.softmax(-1)                             # [vocab], temperature 1
last = md_label(tokens[-1])


def pct(p: float) -> str:
    return f"{p:.1%}" if p >= 0.001 else f"{p * 100:.2g}%" if p > 0 else "0%"


# --- 1. the last vector -> logits -> probabilities --------------------------------------------
st.subheader(page.t("last_title"), anchor=False)
page.prose("last")
vector = sd.final_vector(lm, run)                     # [d_model]
m = st.columns(4)
m[0].metric(page.t("metric.positions"), f"{len(tokens):,}", help=page.t("metric.positions_help"))
m[1].metric(page.t("metric.vector"), f"{cfg.d_model:,}", help=page.t("metric.vector_help"))
m[2].metric(page.t("metric.logits"), f"{cfg.vocab_size:,}", help=page.t("metric.logits_help"))
m[3].metric(page.t("metric.sum"), f"{float(probs.double().sum()):.4f}", help=page.t("metric.sum_help", vocab=f"{cfg.vocab_size:,}"))
theme.plot(F.vector_strip_figure(page.t, vector.tolist(), cfg.d_model), key="vector_chart", height=170)
top = torch.topk(probs, TOP_SHOWN)
top_ids = [int(i) for i in top.indices]
top_labels = axis_labels([lm.token_text(i) for i in top_ids])
left, right = st.columns([2, 3], gap="medium")
with left:
    edges, counts = sd.logit_histogram(logits)
    marks = [(float(logits[top_ids[0]]), plot_label(lm.token_text(top_ids[0]))),
             (float(logits.median()), page.t("hist.median"))]
    theme.plot(F.logit_histogram_figure(page.t, edges.tolist(), counts.tolist(), marks, cfg.vocab_size),
               key="logit_hist", height=420)
with right:
    theme.plot(F.top_candidates_figure(page.t, top_labels, [float(logits[i]) for i in top_ids], top.values.tolist()),
               key="top_chart", height=420)

# --- 2. temperature, top-k, top-p ---------------------------------------------------------------
st.subheader(page.t("settings_title"), anchor=False)
page.prose("settings")
figure_area, controls = page.columns()
with controls:
    settings = F.settings_controls(with_seed=False)
    if settings.greedy:
        st.info(page.t("settings.greedy_note"), icon=":material/trending_up:")
view = sd.distribution_view(logits, n=max(SETTING_SHOWN, CURVE_SHOWN), **settings.kwargs())
with controls:
    st.metric(page.t("metric.kept"), f"{view.n_kept:,}", help=page.t("metric.kept_help", vocab=f"{cfg.vocab_size:,}"))
    st.metric(page.t("metric.entropy"), page.t("metric.bits", v=f"{view.entropy_final:.2f}"),
              delta=f"{view.entropy_final - view.entropy_model:+.2f}", delta_color="off",
              help=page.t("metric.entropy_help", v=f"{view.entropy_model:.2f}"))
view_labels = axis_labels([lm.token_text(int(i)) for i in view.ids])
with figure_area:
    n = SETTING_SHOWN
    theme.plot(F.before_after_figure(page.t, view_labels[:n], view.p_model[:n].tolist(), view.p_final[:n].tolist(),
                                     view.kept[:n].tolist()), key="before_after", height=440)
    theme.plot(F.cumulative_figure(page.t, view_labels[:CURVE_SHOWN], view.cumulative[:CURVE_SHOWN].tolist(),
                                   settings.top_p, view.n_kept, settings.top_p < 1 and not settings.greedy),
               key="cumulative", height=380)
    if view.n_kept > CURVE_SHOWN:
        st.caption(page.t("cum.beyond", n=f"{view.n_kept:,}", shown=CURVE_SHOWN))

# --- 3. the four-candidate example ------------------------------------------------------------
st.subheader(page.t("four_title"), anchor=False)
page.prose("four")
names = [page.t(f"four.{w}") for w, _ in sd.FOUR_CANDIDATES]
toy_logits = [v for _, v in sd.FOUR_CANDIDATES]
table = sd.temperature_table()
sweep = sd.temperature_sweep(logits)
left, right = st.columns(2, gap="medium")
with left:
    st.markdown(page.t("four.toy_caption"))
    rows = [{page.t("four.col_t"): page.t("four.greedy") if r.temperature == 0 else f"{r.temperature:g}",
             **{f"{name} ({v:g})": f"{p:.1%}" for name, v, p in zip(names, toy_logits, r.probs)},
             page.t("four.col_entropy"): f"{r.entropy_bits:.2f}"} for r in table]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key="four_table")
with right:
    st.markdown(page.t("four.real_caption", token=last))
    rows = [{page.t("four.col_t"): page.t("four.greedy") if r.temperature == 0 else f"{r.temperature:g}",
             page.t("four.col_top"): pct(r.top_prob), page.t("four.col_entropy"): f"{r.entropy_bits:.2f}",
             page.t("four.col_90"): f"{r.tokens_for_90:,}"} for r in sweep]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key="real_table")
temps = torch.logspace(-1, 0.7, 60).tolist()           # 0.1 .. 5
toy_series = {f"{name} ({v:g})": [] for name, v in zip(names, toy_logits)}
real_ids = top_ids[:CURVE_TOKENS]
real_series = {plot_label(lm.token_text(i)): [] for i in real_ids}
if len(real_series) < len(real_ids):     # two tokens with the same label: keep them apart
    real_series = {lab: [] for lab in axis_labels([lm.token_text(i) for i in real_ids])}
for temp in temps:
    for key, p in zip(toy_series, S.next_token_distribution(torch.tensor(toy_logits), temp).tolist()):
        toy_series[key].append(p)
    dist = S.next_token_distribution(logits, temp)
    for key, i in zip(real_series, real_ids):
        real_series[key].append(float(dist[i]))
theme.plot(F.temperature_curves_figure(page.t, temps, toy_series, real_series, sd.FOUR_TEMPERATURES),
           key="temperature_curves", height=420)

# --- 4. sample many times ----------------------------------------------------------------------
st.subheader(page.t("samples_title"), anchor=False)
page.prose("samples")
figure_area, controls = page.columns()
with controls:
    n_draws = state.url_int("samples", page.t("samples.n"), 1, N_MAX, 200, widget="number",
                            help=page.t("samples.n_help"))
    seed = F.seed_control()
    st.caption(page.t("samples.using", settings=settings.describe(with_seed=False)))
p_final = S.next_token_distribution(logits, **settings.kwargs())        # [vocab]
hist = sd.sample_histogram(p_final, n_draws, seed)
h_labels = axis_labels([lm.token_text(i) for i in hist.ids]) + [html_escape(page.t("samples.other"))]
h_probs = hist.probs + [hist.other_prob]
h_freqs = [c / n_draws for c in hist.counts] + [hist.other_count / n_draws]
if hist.other_prob < 1e-6 and hist.other_count == 0:
    h_labels, h_probs, h_freqs = h_labels[:-1], h_probs[:-1], h_freqs[:-1]
with figure_area:
    theme.plot(F.samples_figure(page.t, h_labels, h_probs, h_freqs, n_draws), key="samples_chart", height=420)
with controls:
    st.metric(page.t("samples.distinct"), f"{hist.distinct:,}")
    st.metric(page.t("samples.tv"), f"{hist.total_variation:.3f}", help=page.t("samples.tv_help"))

# --- what to notice ------------------------------------------------------------------------------
second = top_ids[1]
top10 = float(top.values[:10].sum())
notice = [
    page.t("notice.last", n=len(tokens), token=last, best=md_label(lm.token_text(top_ids[0])),
           p=pct(float(probs[top_ids[0]])), logit=f"{float(logits[top_ids[0]]):.2f}",
           second=md_label(lm.token_text(second)), p2=pct(float(probs[second])),
           gap=f"{float(logits[top_ids[0]] - logits[second]):.2f}"),
    page.t("notice.spread", lo=f"{float(logits.min()):.1f}", hi=f"{float(logits.max()):.1f}",
           median=f"{float(logits.median()):.1f}", share=pct(top10), rest=f"{cfg.vocab_size - 10:,}"),
]
if settings.greedy:
    notice.append(page.t("notice.greedy", best=md_label(lm.token_text(top_ids[0]))))
elif settings.untouched:
    notice.append(page.t("notice.untouched", h=f"{view.entropy_model:.2f}", bits=f"{2 ** view.entropy_model:.0f}",
                         vocab=f"{cfg.vocab_size:,}"))
else:
    notice.append(page.t("notice.settings", settings=settings.describe(with_seed=False), n=f"{view.n_kept:,}",
                         mass=pct(view.kept_model_mass), h0=f"{view.entropy_model:.2f}", h1=f"{view.entropy_final:.2f}",
                         best=md_label(lm.token_text(top_ids[0])), p=pct(float(view.p_final[0]))))
cold, hot = sweep[1], sweep[3]
notice.append(page.t("notice.temperature", t1=f"{cold.temperature:g}", p1=pct(cold.top_prob),
                     t2=f"{hot.temperature:g}", p2=pct(hot.top_prob), n1=f"{cold.tokens_for_90:,}",
                     n2=f"{hot.tokens_for_90:,}", p=pct(float(probs[top_ids[0]])), best=md_label(lm.token_text(top_ids[0]))))
if hist.ids:
    j = 0
    notice.append(page.t("notice.samples", n=f"{n_draws:,}", seed=seed, token=md_label(lm.token_text(hist.ids[j])),
                         c=f"{hist.counts[j]:,}", f=pct(hist.counts[j] / n_draws), p=pct(hist.probs[j]),
                         distinct=f"{hist.distinct:,}", tv=f"{hist.total_variation:.3f}"))
page.notice(notice)
page.try_this()

# --- the math ----------------------------------------------------------------------------------
t1 = table[2]
l1, l2 = float(logits[top_ids[0]]), float(logits[second])
page.math(page.t("math_example", e3=f"{torch.tensor(3.0).exp():.2f}", e2=f"{torch.tensor(2.0).exp():.2f}",
                 e1=f"{torch.tensor(1.0).exp():.2f}", total=f"{sum(torch.tensor(toy_logits).exp().tolist()):.2f}",
                 p_good=f"{t1.probs[0]:.3f}", p_good_half=f"{table[1].probs[0]:.3f}", p_good_two=f"{table[3].probs[0]:.3f}",
                 best=md_label(lm.token_text(top_ids[0])), second=md_label(lm.token_text(second)),
                 l1=f"{l1:.2f}", l2=f"{l2:.2f}", diff=f"{l1 - l2:.2f}", ratio=f"{float(torch.tensor(l1 - l2).exp()):.2f}",
                 p1=f"{float(probs[top_ids[0]]):.4f}", p2=f"{float(probs[second]):.4f}",
                 ratio_check=f"{float(probs[top_ids[0]] / probs[second]):.2f}", others=f"{cfg.vocab_size - 2:,}"))
page.code(S.warp_logits, S.next_token_distribution, S.sample, sd.distribution_view)
