"""Lesson 6: induction heads. A B ... A -> B on the learner's own text; the standard test
with repeated random tokens (score map, the best heads' stripes, the loss on each copy);
knocking the best heads out against random heads as a control; and which heads do it on
the learner's text."""


import math

import streamlit as st
import torch

from lesson_model.analysis import induction as I
from ui import figures_induction as F
from ui import nav, state, theme
from ui.i18n import join_list, join_sentences
from ui.lesson import Lesson
from ui.text import code_span, html_escape, md_escape
from ui.tokens import label, md_labeler, position_label, readable_texts

CAP = 64
N_SEQS = 10          # random sequences averaged for the score map and the losses
N_RANDOM = 3         # random head sets in the ablation control
SITE_TOP = 8         # heads listed for a repeat in the learner's text
TOP_SHOWN = 3        # best heads whose patterns are drawn
STRIP_MAX = 64       # tokens shown in the highlighted strip
COPIED = 1.0         # nats: the second copy is "copied" when its loss is at least this much lower
ABLATION_MOVE = 0.1  # nats: a smaller change of the loss counts as "barely changes"
COPIED_TOP1 = 0.5    # ...and "copied" outright only when its top guess is right at half its positions or more
K_MAX, K_DEFAULT = 10, 5

page = Lesson("induction")
page.header()
lm = page.model()
cfg = lm.cfg


@st.cache_data(max_entries=16, show_spinner=False)
def experiment(_lm, model_name: str, seq_len: int, seed: int) -> I.InductionExperiment:
    """Repeated random tokens through the model (N_SEQS forward passes of 2 x seq_len
    tokens), computed once per process for each (seq_len, seed) and shared by all sessions."""
    return I.induction_experiment(_lm, seq_len=seq_len, n_seqs=N_SEQS, seed=seed, n_examples=TOP_SHOWN)


@st.cache_data(max_entries=32, show_spinner=False)
def ablation(_lm, model_name: str, seq_len: int, seed: int, k: int) -> I.Ablation:
    """Zero the top-k heads and N_RANDOM random sets of k heads (cached like experiment)."""
    exp = experiment(_lm, model_name, seq_len, seed)
    return I.ablate(_lm, exp.tokens, exp.scores, k, seed=seed, n_random=N_RANDOM, baseline=exp.mean_loss_second)


def head_name(layer: int, head: int) -> str:
    return f"{layer}.{head}"


def pct_text(p: float) -> str:
    """A probability in percent that never prints a non-zero one as 0.0%: "99.0%", "0.04%"."""
    return f"{p:.1%}" if p >= 0.001 else f"{p * 100:.2g}%"


def prob_text(p: float) -> str:
    """A probability as the page prints it: "42%", or "0.00061" when it would print as 0%."""
    return f"{p:.0%}" if p >= 0.005 else f"{p:.2g}"


# --- 1. A B ... A -> B on the learner's text --------------------------------------------------
st.subheader(page.t("text_title"), anchor=False)
page.prose("text")
tokens = page.tokens(lm, cap=CAP)
n = len(tokens)
plain = [label(text) for text in readable_texts(tokens)]   # byte pieces read as their character (我¹ 我²)

md_tok = md_labeler(tokens)


run = page.run(lm, tokens, names=[f"blocks.{layer}.attn.hook_pattern" for layer in range(cfg.n_layers)],
               all_logits=True)
sites = {site.query: site for site in I.repeat_sites(lm, run)}
site = None
if not sites:
    st.info(page.t("no_repeat"), icon=":material/info:")
else:
    options = [str(q) for q in sites]
    site_key = state.url_choice("site", page.t("site_label"), options, options[-1],
                                format_func=lambda q: position_label(plain, int(q)), help=page.t("site_help"))
    site = sites[int(site_key)]
    a2, b = site.query, site.targets[-1]
    a1 = b - 1
    # The token strip: first A, its B, the second A highlighted (escaped token text).
    marks = {a1: "blue", b: "green", a2: "orange"}
    strip = []
    for i in range(min(n, STRIP_MAX)):      # each token in its own box: token boundaries stay visible in Chinese
        text = code_span(plain[i])
        strip.append(f":{marks[i]}-background[**{text}**]" if i in marks else text)
    st.markdown(" ".join(strip))
    st.caption(page.t("strip_legend", a1=a1, b=b, a2=a2))
    probs = run.logits[0, a2].float().softmax(-1)                       # [vocab] prediction after the second A
    b_id = run.ids[b]
    rank = int((probs > probs[b_id]).sum()) + 1
    top_id = int(probs.argmax())
    first_probs = run.logits[0, a1].float().softmax(-1)                 # [vocab] prediction after the first A
    st.markdown(join_sentences([
        page.t("prediction", a=md_tok(a2), b=md_tok(b), p=pct_text(float(probs[b_id])), rank=rank,
               top=code_span(label(lm.token_text(top_id))), ptop=pct_text(float(probs[top_id]))),
        page.t("prediction_first", a=md_tok(a1), b=md_tok(b), p=pct_text(float(first_probs[b_id])),
               rank=int((first_probs > first_probs[b_id]).sum()) + 1)]))

# --- 2. the standard test: repeated random tokens -------------------------------------------------
st.subheader(page.t("random_title"), anchor=False)
page.prose("random")
st.page_link(nav.page_file("train"), label=page.t("train_link"), icon=":material/model_training:")
figure_area, controls = page.columns()
with controls:
    seq_len = state.url_int("len", page.t("len_label"), 10, 100, 50, widget="number", help=page.t("len_help"))
    seed = state.url_int("seed", page.t("seed_label"), 0, 9999, 0, widget="number", help=page.t("seed_help"))
    # The spinner sits under the controls that started the run, where the learner is looking.
    with st.spinner(page.t("computing", n=N_SEQS, len=2 * seq_len), show_time=True):
        exp = experiment(lm, lm.name, seq_len, seed)
ranked = I.top_k_heads(exp.scores, cfg.n_layers * cfg.n_heads)
best = ranked[:TOP_SHOWN]
with figure_area:
    example = exp.tokens[0].tolist()
    st.markdown(page.t("example_seq", n=seq_len, first=code_span(" ".join(label(lm.token_text(i), 10)
                                                                        for i in example[:8])),
                       more=seq_len - 8))
    theme.plot(F.score_map_figure(exp.scores.tolist(), [(layer, head) for layer, head, _ in best], page.t),
               key="map_chart", height=80 + 22 * cfg.n_layers)
shown = list(exp.example_patterns.items())
hover_tokens = [html_escape(label(lm.token_text(i), 12)) for i in example]
for i, (column, (key, pattern)) in enumerate(zip(st.columns(len(shown), gap="small"), shown)):
    with column:      # one chart per head: the columns stack on a phone instead of squeezing three titles
        theme.plot(F.stripe_pattern_figure(pattern.numpy(), head_name(*key), float(exp.scores[key]), seq_len,
                                           hover_tokens, page.t), key=f"stripes_chart_{i}", height=360)
st.caption(page.t("stripes_caption", n=seq_len, last=2 * seq_len - 1))

# --- 3. the loss on each copy ----------------------------------------------------------------------
st.subheader(page.t("loss_title"), anchor=False)
page.prose("loss")
theme.plot(F.loss_figure(exp.loss_first.tolist(), exp.loss_second.tolist(), page.t), key="loss_chart", height=400)

# --- 4. knock them out -------------------------------------------------------------------------------
st.subheader(page.t("ablation_title"), anchor=False)
page.prose("ablation")
figure_area, controls = page.columns()
with controls:
    # At most half the heads: the control needs k other heads to draw from.
    k = state.url_int("k", page.t("k_label"), 1, min(K_MAX, cfg.n_layers * cfg.n_heads // 2), K_DEFAULT,
                      help=page.t("k_help"))
    with st.spinner(page.t("ablating", k=k, sets=N_RANDOM + 1), show_time=True):
        ab = ablation(lm, lm.name, seq_len, seed, k)
bars = [page.t("bar.intact"), page.t("bar.top", k=k)] + [page.t("bar.random", k=k, i=i + 1)
                                                        for i in range(len(ab.random_losses))]
values = [ab.baseline, ab.top_loss, *ab.random_losses]
colours = ["#6b7280", F.STRIPE] + [theme.OKABE_ITO[0]] * len(ab.random_losses)
with figure_area:
    theme.plot(F.ablation_figure(bars, values, colours, page.t), key="ablation_chart", height=420)
with controls:
    st.markdown(page.t("zeroed_top", heads=join_list(head_name(*h) for h in ab.top_heads)))
    for i, heads in enumerate(ab.random_sets):
        st.markdown(page.t("zeroed_random", i=i + 1, heads=join_list(head_name(*h) for h in heads)))

# --- 5. which heads do it on the learner's text ----------------------------------------------------------
top_set = {(layer, head) for layer, head, _ in ranked[:k]}
if site is not None:
    st.subheader(page.t("site_title", a=md_tok(site.query), b=md_tok(site.targets[-1])), anchor=False)
    page.prose("site")
    flat = site.grid.flatten()
    order = torch.argsort(flat, descending=True)[:SITE_TOP]
    hits = [(int(i) // cfg.n_heads, int(i) % cfg.n_heads, float(flat[i])) for i in order]
    theme.plot(F.site_heads_figure([head_name(layer, head) for layer, head, _ in hits], [w for *_, w in hits],
                                   [(layer, head) in top_set for layer, head, _ in hits], page.t,
                                   page.t("fig.site_title", a=html_escape(plain[site.query]),
                                          b=html_escape(plain[site.targets[-1]]))),
               key="site_chart", height=140 + 40 * len(hits))
    st.caption(page.t("site_caption", k=k))

# --- What to notice -------------------------------------------------------------------------------------
layers = sorted({layer for layer, _, _ in ranked[:k]})
third = cfg.n_layers // 3
early = float(exp.scores[:third].max())
best_parts = [page.t("notice.best", head=head_name(*best[0][:2]), pct=f"{best[0][2]:.0%}")]
if k > 1:
    best_parts.append(page.t("notice.best_layer" if len(layers) == 1 else "notice.best_layers", k=k,
                             layers=join_list(str(layer) for layer in layers)))
best_parts.append(page.t("notice.early_only" if early < best[0][2] / 2 else "notice.early", third=third - 1,
                         early=f"{early:.0%}"))
if cfg.sliding_layers:          # Gemma 3: which of the best heads sit in the global layers
    global_layers = [layer for layer in range(cfg.n_layers) if cfg.window(layer) is None]
    in_global = sum(1 for layer, _, _ in ranked[:k] if cfg.window(layer) is None)
    best_parts.append(page.t("notice.global_all" if in_global == k else "notice.global_none" if in_global == 0 else
                             "notice.global", m=in_global, k=k, globals=join_list(str(g) for g in global_layers)))
    if 2 * seq_len <= cfg.sliding_window:
        best_parts.append(page.t("notice.window_fits", n=2 * seq_len, w=cfg.sliding_window))
first, second = exp.mean_loss_first, exp.mean_loss_second
uniform = float(torch.log(torch.tensor(float(cfg.vocab_size))))
move = ab.top_loss - ab.baseline
ablation_key = ("notice.ablation_up" if move >= ABLATION_MOVE else
                "notice.ablation_down" if move <= -ABLATION_MOVE else "notice.ablation_flat")
random_move = ab.random_mean - ab.baseline
compare_key = ("notice.compare_far" if move >= ABLATION_MOVE and move > 2 * max(random_move, 0) else
               "notice.compare_more" if move >= ABLATION_MOVE and move > random_move else "notice.compare_not")
observations = [
    join_sentences(best_parts),
    join_sentences([
        page.t("notice.loss", first=f"{first:.2f}", second=f"{second:.2f}", vocab=f"{cfg.vocab_size:,}",
               uniform=f"{uniform:.2f}"),
        page.t("notice.loss_worse", vocab=f"{cfg.vocab_size:,}") if first > uniform else "",
        page.t("notice.loss_not_copied" if second > first - COPIED else
               "notice.loss_copied" if exp.top1_second >= COPIED_TOP1 else "notice.loss_partly"),
        page.t("notice.top1", hit1=f"{exp.top1_first:.0%}", hit2=f"{exp.top1_second:.0%}")]),
    join_sentences([
        page.t(ablation_key, k=k, base=f"{ab.baseline:.2f}", top=f"{ab.top_loss:.2f}", rand=f"{ab.random_mean:.2f}"),
        page.t(compare_key)]),
]
if site is not None:
    flat = site.grid.flatten()
    i = int(flat.argmax())
    layer, head = i // cfg.n_heads, i % cfg.n_heads
    site_parts = [page.t("notice.site", head=head_name(layer, head), a=md_tok(site.query),
                         b=md_tok(site.targets[-1]), pct=f"{float(flat[i]):.0%}")]
    if (layer, head) in top_set:
        site_parts.append(page.t("notice.also"))
    observations.append(join_sentences(site_parts))
else:
    observations.append(page.t("notice.no_site"))
page.notice(observations)
page.try_this()

queries, keys = I.second_copy_positions(seq_len)
L0, H0 = best[0][:2]
pattern0 = exp.example_patterns[(L0, H0)]
page.math(page.t("math_example", head=head_name(L0, H0), q=int(queries[3]), k=int(keys[3]), i=3,
                 w=f"{float(pattern0[queries[3], keys[3]]):.1%}", n=seq_len, s=N_SEQS,
                 score=f"{best[0][2]:.1%}", first=f"{exp.mean_loss_first:.2f}",
                 pfirst=prob_text(math.exp(-exp.mean_loss_first)), second=f"{exp.mean_loss_second:.2f}",
                 psecond=prob_text(math.exp(-exp.mean_loss_second))))
page.code(I.induction_experiment, I.zero_heads_hooks, I.ablate)
