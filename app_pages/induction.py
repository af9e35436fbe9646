"""Lesson 6: induction heads. A B ... A -> B on the learner's own text; the standard test
with repeated random tokens (score map, the best heads' stripes, the loss on each copy);
knocking the best heads out against random heads as a control; and which heads do it on
the learner's text."""


import contextlib
import math

import streamlit as st
import torch

from course import nav, state, theme
from course.cache import induction as cache
from course.figures import induction as F
from course.i18n import current_lang, join_list, join_sentences
from course.lesson import Lesson
from course.notices import induction as N
from course.text import code_span, html_escape
from course.tokens import axis_labels, label, md_labeler, position_label, readable_texts
from lesson_model.analysis import induction as I

CAP = cache.CAP
N_SEQS = cache.N_SEQS    # random sequences averaged for the score map and the losses
N_RANDOM = cache.N_RANDOM  # random head sets in the ablation control
SITE_TOP = 8         # heads listed for a repeat in the learner's text
STRIP_MAX = 64       # tokens shown in the highlighted strip
NEXT_SHOWN = 5       # the best next tokens after the second A in its chart (and B)
K_MAX = 10


def head_name(layer: int, head: int) -> str:
    return f"{layer}.{head}"


def pct_text(p: float) -> str:
    """A probability in percent that never prints a non-zero one as 0.0%: "99.0%", "0.04%"."""
    return f"{p:.1%}" if p >= 0.001 else f"{p * 100:.2g}%"


def prob_text(p: float) -> str:
    """A probability as the page prints it: "42%", or "0.00061" when it would print as 0%."""
    return f"{p:.0%}" if p >= 0.005 else f"{p:.2g}"


def render() -> None:
    """The lesson, top to bottom: its variables live only while it runs (a widget's callback
    keeps just the names it uses, never this run's tensors)."""
    page = Lesson("induction")
    page.header()
    lm = page.model()
    page.predict(lm)                  # Predict, then see: before the figures that answer it
    cfg = lm.cfg

    # --- 1. A B ... A -> B on the learner's text --------------------------------------------------
    page.part("text", page.t("text_title"))
    page.prose("text")
    tokens = page.tokens(lm, cap=CAP)
    n = len(tokens)
    plain = [label(text) for text in readable_texts(tokens)]   # byte pieces read as their character (我¹ 我²)

    md_tok = md_labeler(tokens)

    run = cache.lesson_run(lm, tokens)
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
        # Presenter mode: the text beside its chart, so the chart is on the first screen.
        words, chart_area = st.columns([3, 2], gap="medium") if theme.view().presenting else (st, None)
        words.markdown(" ".join(strip))
        words.caption(page.t("strip_legend", a1=a1, b=b, a2=a2))
        probs = run.logits[0, a2].float().softmax(-1)                       # [vocab] prediction after the second A
        b_id = run.ids[b]
        rank = int((probs > probs[b_id]).sum()) + 1
        top_id = int(probs.argmax())
        first_probs = run.logits[0, a1].float().softmax(-1)                 # [vocab] prediction after the first A
        words.markdown(join_sentences([
            page.t("prediction", a=md_tok(a2), b=md_tok(b), p=pct_text(float(probs[b_id])), rank=rank,
                   top=code_span(label(lm.token_text(top_id))), ptop=pct_text(float(probs[top_id]))),
            page.t("prediction_first", a=md_tok(a1), b=md_tok(b), p=pct_text(float(first_probs[b_id])),
                   rank=int((first_probs > first_probs[b_id]).sum()) + 1)]))
        # The same numbers as a chart: the best candidates after the second A (and B), both times.
        ids = [int(i) for i in probs.topk(NEXT_SHOWN).indices]
        if int(b_id) not in ids:
            ids.append(int(b_id))
        names = axis_labels([lm.token_text(i) for i in ids])
        names = [page.t("fig.next_b", token=name) if i == int(b_id) else name for name, i in zip(names, ids)]
        a_names = axis_labels(tokens)
        with chart_area if chart_area is not None else contextlib.nullcontext():
            theme.plot(F.next_token_figure(names, [float(first_probs[i]) for i in ids], [float(probs[i]) for i in ids],
                                           a_names[a1], a_names[a2], page.t),
                       key="next_chart", height=theme.projected(320, 400))

    # --- 2. the standard test: repeated random tokens -------------------------------------------------
    page.part("random", page.t("random_title"))
    page.prose("random")
    st.page_link(nav.page_file("train"), label=page.t("train_link"), icon=":material/model_training:")
    figure_area, controls = page.columns()
    with controls:
        seq_len = state.url_int("len", page.t("len_label"), 10, 100, cache.LEN_DEFAULT, widget="number",
                                help=page.t("len_help"))
        seed = state.url_int("seed", page.t("seed_label"), 0, 9999, cache.SEED_DEFAULT, widget="number",
                             help=page.t("seed_help"))
        # The spinner sits under the controls that started the run, where the learner is looking.
        with st.spinner(page.t("computing", n=N_SEQS, len=2 * seq_len), show_time=True):
            exp = cache.experiment(lm, lm.name, seq_len, seed)
    ranked = I.top_k_heads(exp.scores, cfg.n_layers * cfg.n_heads)
    best = ranked[:cache.TOP_SHOWN]
    with figure_area:
        example = exp.copies[0].tolist()          # the two copies (after <bos> on a model with one)
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
    page.part("loss", page.t("loss_title"))
    page.prose("loss")
    theme.plot(F.loss_figure(exp.loss_first.tolist(), exp.loss_second.tolist(), page.t), key="loss_chart", height=400)

    # --- 4. knock them out -------------------------------------------------------------------------------
    page.part("ablation", page.t("ablation_title"))
    page.prose("ablation")
    figure_area, controls = page.columns()
    with controls:
        # At most half the heads: the control needs k other heads to draw from.
        k = state.url_int("k", page.t("k_label"), 1, min(K_MAX, cfg.n_layers * cfg.n_heads // 2), cache.K_DEFAULT,
                          help=page.t("k_help"))
        with st.spinner(page.t("ablating", k=k, sets=N_RANDOM + 1), show_time=True):
            ab = cache.ablation(lm, lm.name, seq_len, seed, k)
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
        page.part("site", page.t("site_title", a=md_tok(site.query), b=md_tok(site.targets[-1])))
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
    lang = current_lang()
    third = cfg.n_layers // 3
    found = [
        N.best_notices(ranked=ranked, k=k, third=third, early=float(exp.scores[:third].max()),
                       global_layers=([layer for layer in range(cfg.n_layers) if cfg.window(layer) is None]
                                      if cfg.sliding_layers else None),
                       sliding_window=cfg.sliding_window, seq_len=seq_len, head_name=head_name, lang=lang),
        N.loss_notices(first=exp.mean_loss_first, second=exp.mean_loss_second, vocab_size=cfg.vocab_size,
                       uniform=float(torch.log(torch.tensor(float(cfg.vocab_size)))), top1_first=exp.top1_first,
                       top1_second=exp.top1_second),
        N.ablation_notices(k=k, baseline=ab.baseline, top_loss=ab.top_loss, random_mean=ab.random_mean),
    ]
    if site is not None:
        probs_now = run.logits[0, site.query].float().softmax(-1)
        occurrences = N.occurrence_notices(ids=run.ids, query=site.query, targets=site.targets,
                                           probs=[float(probs_now[run.ids[t]]) for t in site.targets], label=md_tok)
        if occurrences:             # A occurred more than once before: which one the text matches longest
            found.append(occurrences)
        flat = site.grid.flatten()
        i = int(flat.argmax())
        found.append(N.site_notices(site=(site.query, site.targets[-1]), layer=i // cfg.n_heads, head=i % cfg.n_heads,
                                    weight=float(flat[i]), top_heads=top_set, head_name=head_name, label=md_tok))
    else:
        found.append(N.site_notices(site=None, head_name=head_name, label=md_tok))
    page.notices(found)
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


render()
