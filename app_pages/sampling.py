"""Lesson 9: the next token. The last position's vector -> one logit per vocabulary entry ->
softmax; temperature, top-k and top-p; the four-candidate example; sampling many times."""

import streamlit as st
import torch

from course import controls, state, theme
from course.cache import context as context_cache
from course.cache import sampling as cache
from course.figures import sampling as F
from course.i18n import current_lang, with_paren
from course.lesson import Lesson
from course.notices import sampling as N
from course.notices import toys as N_TOYS
from course.text import html_escape, num
from course.tokens import axis_labels, label, md_label, next_token_texts, readable_texts
from lesson_model import sampling as S
from lesson_model.analysis import sampling_demo as sd

CAP = cache.CAP        # tokens of the prompt this page runs (the last ones, when the prompt is longer)
TOP_SHOWN = 12         # candidates in the logit / probability bars
SETTING_SHOWN = 15     # candidates in the before/after chart
CURVE_SHOWN = 40       # ranks on the cumulative curve
CURVE_TOKENS = 4       # real tokens followed across temperatures
N_MAX = 10000          # draws in the sampling experiment
pct = N.pct


def render() -> None:
    """The lesson, top to bottom: its variables live only while it runs."""
    page = Lesson("sampling")
    page.header()
    lm = page.model()
    page.predict(lm)                  # Predict, then see: before the figures that answer it
    cfg = lm.cfg
    tokens = page.tokens(lm, cap=CAP)
    cut = page.prompt_tokens > len(tokens)     # Lesson.tokens kept the last CAP tokens
    run = cache.lesson_run(lm, tokens)
    logits = run.last_logits.float()                       # [vocab]
    probs = logits.softmax(-1)                             # [vocab], temperature 1
    last = md_label(readable_texts(tokens)[-1])


    def texts(ids) -> list[str]:
        """Candidate ids as the token after the prompt: a byte piece that completes the prompt's last
        character reads as that character (我²)."""
        return next_token_texts(lm, tokens, [int(i) for i in ids])


    def md_tok(i: int) -> str:
        return md_label(texts([i])[0])


    # --- 1. the last vector -> logits -> probabilities --------------------------------------------
    page.part("last", page.t("last_title"))
    page.prose("last")
    vector = sd.final_vector(lm, run)                     # [d_model]
    m = st.columns(4)
    m[0].metric(page.t("metric.positions"), f"{len(tokens):,}", help=page.t("metric.positions_help"))
    m[1].metric(page.t("metric.vector"), f"{cfg.d_model:,}", help=page.t("metric.vector_help"))
    m[2].metric(page.t("metric.logits"), f"{cfg.vocab_size:,}", help=page.t("metric.logits_help"))
    numbers = cache.logit_numbers(lm.name, run.ids, _logits=logits)     # shared by every session on this view
    m[3].metric(page.t("metric.sum"), f"{numbers.prob_sum:.4f}", help=page.t("metric.sum_help", vocab=f"{cfg.vocab_size:,}"))
    theme.plot(F.vector_strip_figure(page.t, vector.tolist(), cfg.d_model), key="vector_chart", height=200)
    top = torch.topk(probs, TOP_SHOWN)
    top_ids = [int(i) for i in top.indices]
    top_labels = axis_labels(texts(top_ids))
    theme.plot(F.top_candidates_figure(page.t, top_labels, [float(logits[i]) for i in top_ids], top.values.tolist()),
               key="top_chart", height=470)
    marks = [(float(logits[top_ids[0]]), top_labels[0]), (numbers.median, page.t("hist.median"))]
    theme.plot(F.logit_histogram_figure(page.t, numbers.edges, numbers.counts, marks, cfg.vocab_size),
               key="logit_hist", height=360)

    # --- 2. temperature, top-k, top-p ---------------------------------------------------------------
    page.part("settings", page.t("settings_title"))
    page.prose("settings")
    slots = st.columns(3)
    settings = controls.settings_controls([*slots, st], with_seed=False)
    if settings.greedy:
        st.info(page.t("settings.greedy_note"), icon=":material/trending_up:")
    chosen = tuple(sorted(settings.kwargs().items()))
    view = cache.setting_view(lm.name, run.ids, chosen, max(SETTING_SHOWN, CURVE_SHOWN), _logits=logits)
    m = st.columns(3)
    m[0].metric(page.t("metric.kept"), f"{view.n_kept:,}", help=page.t("metric.kept_help", vocab=f"{cfg.vocab_size:,}"))
    m[1].metric(page.t("metric.entropy"), page.t("metric.bits", v=num(view.entropy_final)),
                delta=num(view.entropy_final - view.entropy_model, "+.2f"), delta_color="off",
                help=page.t("metric.entropy_help", v=num(view.entropy_model)))
    m[2].metric(page.t("metric.kept_mass"), pct(view.kept_model_mass), help=page.t("metric.kept_mass_help"))
    view_labels = axis_labels(texts(view.ids))
    n = SETTING_SHOWN
    theme.plot(F.before_after_figure(page.t, view_labels[:n], view.p_model[:n].tolist(), view.p_final[:n].tolist(),
                                     view.kept[:n].tolist()), key="before_after", height=170 + 34 * n)
    theme.plot(F.cumulative_figure(page.t, view_labels[:CURVE_SHOWN], view.cumulative[:CURVE_SHOWN].tolist(),
                                   settings.top_p, view.n_kept, settings.top_p < 1 and not settings.greedy),
               key="cumulative", height=380)
    if view.n_kept > CURVE_SHOWN:
        st.caption(page.t("cum.beyond", n=f"{view.n_kept:,}", shown=CURVE_SHOWN))

    # --- 3. the four-candidate example ------------------------------------------------------------
    page.part("four", page.t("four_title"))
    page.prose("four")
    names = [page.t(f"four.{w}") for w, _ in sd.FOUR_CANDIDATES]
    toy_logits = [v for _, v in sd.FOUR_CANDIDATES]
    table = sd.temperature_table()
    temps = torch.logspace(-1, 0.7, 60).tolist()           # 0.1 .. 5
    real_ids = top_ids[:CURVE_TOKENS]
    sweep, real_curves = cache.temperature_numbers(lm.name, run.ids, tuple(real_ids), tuple(temps), _logits=logits)
    toy_names = [with_paren(name, f"{v:g}") for name, v in zip(names, toy_logits)]
    st.markdown(page.t("four.toy_caption"))
    rows = [{page.t("four.col_t"): page.t("four.greedy") if r.temperature == 0 else f"{r.temperature:g}",
             **{name: f"{p:.1%}" for name, p in zip(toy_names, r.probs)},
             page.t("four.col_entropy"): num(r.entropy_bits)} for r in table]
    st.dataframe(theme.arrow_table(rows), hide_index=True, width="stretch", key="four_table")
    st.markdown(page.t("four.real_caption", token=last))
    rows = [{page.t("four.col_t"): page.t("four.greedy") if r.temperature == 0 else f"{r.temperature:g}",
             page.t("four.col_top"): pct(r.top_prob), page.t("four.col_entropy"): num(r.entropy_bits),
             page.t("four.col_90"): f"{r.tokens_for_90:,}"} for r in sweep]
    st.dataframe(theme.arrow_table(rows), hide_index=True, width="stretch", key="real_table")
    toy_series = {name: [] for name in toy_names}
    real_series = dict(zip(top_labels[:CURVE_TOKENS], real_curves))     # axis labels: escaped and unique
    for temp in temps:
        for key, p in zip(toy_series, S.next_token_distribution(torch.tensor(toy_logits), temp).tolist()):
            toy_series[key].append(p)
    left, right = st.columns(2, gap="medium")        # side by side; stacked on a phone
    with left:
        theme.plot(F.temperature_curves_figure(page.t, page.t("curves.toy"), temps, toy_series, sd.FOUR_TEMPERATURES),
                   key="temperature_curves", height=420)
    with right:
        theme.plot(F.temperature_curves_figure(page.t, page.t("curves.real"), temps, real_series, sd.FOUR_TEMPERATURES),
                   key="temperature_curves_real", height=420)

    # --- 3b. the same four words after the toy's own prompt, on the real model --------------------
    weather_found = _weather_section(page, lm, names)

    # --- 4. sample many times ----------------------------------------------------------------------
    page.part("samples", page.t("samples_title"))
    page.prose("samples")
    slots = st.columns(3)
    n_draws = state.url_int("samples", page.t("samples.n"), 1, N_MAX, 200, widget="number",
                            help=page.t("samples.n_help"), container=slots[0])
    seed = controls.seed_control(slots[1])
    slots[2].caption(page.t("samples.using", settings=settings.describe(with_seed=False)))
    hist = cache.samples(lm.name, run.ids, chosen, n_draws, seed, _logits=logits)
    h_labels = axis_labels(texts(hist.ids)) + [html_escape(page.t("samples.other"))]
    h_probs = hist.probs + [hist.other_prob]
    h_freqs = [c / n_draws for c in hist.counts] + [hist.other_count / n_draws]
    if hist.other_prob < 1e-6 and hist.other_count == 0:
        h_labels, h_probs, h_freqs = h_labels[:-1], h_probs[:-1], h_freqs[:-1]
    theme.plot(F.samples_figure(page.t, h_labels, h_probs, h_freqs, n_draws), key="samples_chart", height=440)
    m = st.columns(3)
    m[0].metric(page.t("samples.distinct"), f"{hist.distinct:,}")
    m[1].metric(page.t("samples.tv"), f"{hist.total_variation:.3f}", help=page.t("samples.tv_help"))

    # --- what to notice ------------------------------------------------------------------------------
    best, second = top_ids[0], top_ids[1]
    found = [
        N.last_notice(n=len(tokens), cut=cut, token=last, best=md_tok(best), second=md_tok(second),
                      p_best=float(probs[best]), p_second=float(probs[second]), logit_best=float(logits[best]),
                      gap=float(logits[best] - logits[second])),
        N.spread_notice(lo=numbers.lo, hi=numbers.hi, median=numbers.median,
                        top10=float(top.values[:10].sum()), vocab=cfg.vocab_size),
        N.settings_notice(greedy=settings.greedy, untouched=settings.untouched, best=md_tok(best),
                          settings=settings.describe(with_seed=False), vocab=cfg.vocab_size,
                          entropy_model=view.entropy_model, entropy_final=view.entropy_final, n_kept=view.n_kept,
                          kept_mass=view.kept_model_mass, p_top=float(view.p_final[0])),
        N.temperature_notice(cold=sweep[1], hot=sweep[3], p=float(probs[best]), best=md_tok(best)),
        *N.samples_notices(ids=hist.ids, probs=hist.probs, counts=hist.counts, other_prob=hist.other_prob,
                           distinct=hist.distinct, total_variation=hist.total_variation, n_draws=n_draws, seed=seed,
                           label=md_tok),
    ]
    found += weather_found
    page.notices(found)

    # --- try this: each line checked on a run of the model on its own prompt ----------------------
    page.try_this(cache.try_lines(lm, current_lang()))

    # --- the math ----------------------------------------------------------------------------------
    t1 = table[2]
    l1, l2 = float(logits[top_ids[0]]), float(logits[second])
    page.math(page.t("math_example", e3=f"{torch.tensor(3.0).exp():.2f}", e2=f"{torch.tensor(2.0).exp():.2f}",
                     e1=f"{torch.tensor(1.0).exp():.2f}", total=f"{sum(torch.tensor(toy_logits).exp().tolist()):.2f}",
                     p_good=f"{t1.probs[0]:.3f}", p_good_half=f"{table[1].probs[0]:.3f}", p_good_two=f"{table[3].probs[0]:.3f}",
                     best=md_tok(top_ids[0]), second=md_tok(second),
                     l1=num(l1), l2=num(l2), diff=num(l1 - l2), ratio=f"{float(torch.tensor(l1 - l2).exp()):.2f}",
                     p1=f"{float(probs[top_ids[0]]):.4f}", p2=f"{float(probs[second]):.4f}",
                     ratio_check=f"{float(probs[top_ids[0]] / probs[second]):.2f}", others=f"{cfg.vocab_size - 2:,}"))
    page.code(S.warp_logits, S.next_token_distribution, S.sample, sd.distribution_view)


def _weather_section(page: Lesson, lm, names: list[str]) -> list:
    """The toy's four words after the prompt its story comes from (今天天氣很 / The weather today is
    very), on the real model, at the toy table's temperatures; the model's own first choices
    beside them. Returns this section's notices."""
    page.part("weather", page.t("weather.title"))
    prompt = page.t("weather.prompt")
    st.markdown(page.t("weather.intro", prompt=md_label(prompt, 60)))   # the whole prompt, not a token cut short
    table = context_cache.weather(lm, prompt, names)
    temps = table.temperatures
    toy = sd.temperature_table(temperatures=temps)
    col_toy = [page.t("weather.col_toy", t=f"{t:g}") for t in temps]
    col_model = [page.t("weather.col_model", t=f"{t:g}") for t in temps]
    rows = []
    for n, word in enumerate(table.words):
        row = {page.t("weather.col_word"): word.word}
        row.update({c: f"{r.probs[n]:.1%}" for c, r in zip(col_toy, toy)})
        row.update({c: f"{p:.1%}" for c, p in zip(col_model, word.probs)})
        rows.append(row)
    st.dataframe(theme.arrow_table(rows), hide_index=True, width="stretch", key="weather_table")
    st.markdown(page.t("weather.top_caption"))
    st.dataframe(theme.arrow_table([{page.t("weather.col_token"): label(lm.token_text(i), 30),
                                **{c: f"{p:.1%}" for c, p in zip(col_model, probs)}} for i, probs in table.top]),
                 hide_index=True, width="stretch", key="weather_top")
    one = temps.index(1.0)
    word_ids = {w.pieces[0] for w in table.words if len(w.pieces) == 1}
    top_id, top_probs = table.top[0]
    return N_TOYS.weather_notices(prompt=md_label(prompt), words=[md_label(w.word) for w in table.words],
                                  probs_t1=[w.probs[one] for w in table.words],
                                  merged=[w.merged for w in table.words], pieces=[len(w.pieces) for w in table.words],
                                  top=md_label(lm.token_text(top_id)), p_top=top_probs[one],
                                  toy_best=md_label(table.words[0].word), p_toy=toy[one].probs[0],
                                  top_is_word=top_id in word_ids)


render()
