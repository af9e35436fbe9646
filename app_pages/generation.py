"""Lesson 10: generation, step by step. Append the chosen token and run again; the KV cache
made visible and timed; speculative decoding with an early-exit draft."""

import dataclasses
import statistics

import streamlit as st

from course import controls, state, theme
from course.cache import generation as cache
from course.figures import generation as G
from course.i18n import big_number, join_sentences, t
from course.lesson import Lesson
from course.notices import generation as N
from course.text import bytes_text, code_span, html_escape, shorten
from course.tokens import (
    axis_labels,
    label,
    md_label,
    next_token_texts,
    plot_label,
    sentence_label,
    sequence_texts,
)
from lesson_model.analysis import generation_demo as gd
from lesson_model.analysis import kv_memory as K
from lesson_model.analysis import sampling_demo as sd
from lesson_model.decoder import KVCache
from lesson_model.generation import generate_steps
from lesson_model.speculative import speculative_generate

CAP = cache.CAP       # prompt tokens this page generates from (the last ones, when the prompt is longer)
MAX_NEW = 64          # most new tokens a learner can ask for
DEFAULT_NEW = 24
TIMING_MAX = 32       # new tokens in the live cache-on / cache-off timing (2 cores: keep it short)
SPEC_MAX = 32         # new tokens in the speculative-decoding demonstration
DRAFT_SHARE = 0.85    # the default draft: this share of the model's layers (26 of 30, 15 of 18)
CANDIDATES = 10       # candidates shown per step
PRESENT_CANDIDATES = 7   # ... in presenter mode (the chart beside the text, on the first screen)
STEP = "step"
CANON_STEP = "_url." + STEP


def render() -> None:
    """The lesson, top to bottom: its variables live only while it runs (a widget's callback
    keeps just the names it uses, never this run's tensors)."""
    page = Lesson("generation")
    page.header()
    lm = page.model()
    page.predict(lm)                  # Predict, then see: before the figures that answer it
    cfg = lm.cfg
    tokens = page.tokens(lm, cap=CAP)
    prompt_ids = [tok.id for tok in tokens]
    n_prompt = len(prompt_ids)
    cut = page.prompt_tokens > n_prompt       # Lesson.tokens kept the last CAP tokens


    def count(kind: str, n: int) -> str:
        """'1 token' / '24 tokens' (kind: tokens, new, positions, passes) in the page's language."""
        key, fields = N.count(kind, n)
        return page.t(key, **fields)


    # The model's own end-of-sequence token(s), as code spans: `<|im_end|>`, `<eos>`...
    eos_names = ", ".join(code_span(lm.token_text(i)) for i in sorted(lm.eos_token_ids)) or code_span("EOS")
    has_chat = lm.tokenizer.chat_template is not None      # an instruct model; a base model has none


    # --- settings (shared with the sampling lesson) ------------------------------------------------
    # (presenter mode: folded to one line, so the steps and their chart are on the first screen)
    presenting = theme.view().presenting
    shown = theme.projected(CANDIDATES, PRESENT_CANDIDATES)      # candidates in the step's chart
    with (st.expander(page.t("settings_folded"), icon=":material/tune:", key="generation_settings") if presenting
          else st.container(border=True, key="generation_settings")):
        st.caption(page.t("settings_caption"))
        row = st.columns(3)
        row2 = st.columns(3)
        settings = controls.settings_controls([row[0], row[1], row[2], row2[0]])
        max_new = state.url_int("max_new", page.t("max_new"), 1, MAX_NEW, DEFAULT_NEW, widget="number",
                                help=page.t("max_new_help", eos=eos_names), container=row2[1])
    kwargs = settings.kwargs()

    # --- 1. step through -----------------------------------------------------------------------------
    page.part("steps", page.t("steps_title"))
    page.prose("loop")
    if not has_chat and not presenting:      # (presenter mode: beside the chart, below)
        st.caption(page.t("base_note", name=lm.bundled.name, eos=eos_names))
    note = None
    raw = state.url_raw(STEP)
    if raw is not None:                                   # a shared link: rebuild its steps
        try:
            desired = int(float(raw))
            if not 0 <= desired <= max_new:
                note = t("state.clamped", param=code_span(f"{STEP}={shorten(raw, 40)}"), lo=0, hi=max_new,
                         value=min(max(desired, 0), max_new))
        except (ValueError, OverflowError):
            desired = 0
            note = t("state.ignored", param=code_span(f"{STEP}={shorten(raw, 40)}"), value=0)
    else:
        desired = int(st.session_state.get(CANON_STEP, 0))
    desired = min(max(desired, 0), max_new)
    steps_state = controls.step_state(lm, prompt_ids, max_new, kwargs, settings.seed)
    if len(steps_state.steps) < desired and not steps_state.finished:
        with st.spinner(page.t("running", n=desired - len(steps_state.steps))):
            steps_state.ensure(desired)
    steps = steps_state.steps
    current = min(desired, len(steps))
    st.session_state[CANON_STEP] = current
    finished_at = len(steps) if steps_state.finished else None


    def go_to(n: int) -> None:
        st.session_state[CANON_STEP] = max(0, n)


    at_end = finished_at is not None and current >= finished_at
    with st.container(horizontal=True, gap="small", key="step_buttons"):     # wraps, never cuts a label
        st.button(page.t("btn.next"), key="gen_next", on_click=go_to, args=(current + 1,), type="primary",
                  icon=":material/skip_next:", disabled=at_end or current >= max_new)
        st.button(page.t("btn.run"), key="gen_run", on_click=go_to, args=(max_new,), icon=":material/fast_forward:",
                  disabled=at_end or current >= max_new)
        st.button(page.t("btn.back"), key="gen_back", on_click=go_to, args=(current - 1,),
                  icon=":material/skip_previous:", disabled=current == 0)
        st.button(page.t("btn.reset"), key="gen_reset", on_click=go_to, args=(0,), icon=":material/restart_alt:",
                  disabled=current == 0)
    # Presenter mode: the chart of this step beside the step slider and the text so far (one screen).
    chart_area, side = st.columns([3, 2], gap="medium") if presenting else (None, None)
    step = state.url_int(STEP, page.t("step_slider"), 0, finished_at or max_new, 0, help=page.t("step_slider_help"),
                         container=side)
    if note:
        st.warning(note, icon=":material/link_off:")
    if step != current:     # defensive: the slider was clamped to a shorter range
        step = current

    new_ids = [s.token_id for s in steps[:step]]
    new_texts = sequence_texts(lm, tokens, new_ids)          # byte pieces read as their characters (我¹ 我²)
    with (side if side is not None else st).container(border=True, key="running_text"):
        st.markdown(G.running_text(lm.decode(prompt_ids), new_texts, newest=True))
        st.caption(page.t("text_caption_cut" if cut else "text_caption", n=count("tokens", n_prompt),
                          k=count("tokens", step), settings=settings.describe()))
    if not has_chat and presenting:
        side.caption(page.t("base_note", name=lm.bundled.name, eos=eos_names))


    def how_chosen(rank: int) -> str:
        key, fields = N.how_chosen(greedy=settings.greedy, rank=rank, seed=settings.seed)
        return page.t(key, **fields)


    if step == 0:
        first = sd.distribution_view(cache.lesson_run(lm, prompt_ids).last_logits, n=shown, **kwargs)
        left, right = (chart_area, side) if presenting else st.columns([3, 2], gap="medium")
        with left:
            theme.plot(G.candidates_figure(page.t, axis_labels(next_token_texts(lm, tokens, first.ids.tolist())),
                                           first.p_model.tolist(), first.p_final.tolist(), None, settings.greedy,
                                           title_key="cand.title_first"),
                       key="candidates_chart", height=theme.projected(190 + 34 * shown, 170 + 28 * shown))
        with right:
            st.info(page.t("step0", max=count("tokens", max_new)), icon=":material/touch_app:")
    else:
        s = steps[step - 1]
        last_logits, model_probs = cache.step_view(lm.name, tuple(prompt_ids + new_ids), n_prompt, _lm=lm)
        view = sd.distribution_view(last_logits, n=shown, **kwargs)
        cand_ids = view.ids.tolist()
        p_model, p_final = view.p_model.tolist(), view.p_final.tolist()
        if s.token_id not in cand_ids:                   # a sampled long shot: add it at the bottom
            extra = sd.distribution_view(last_logits, n=cfg.vocab_size, **kwargs)
            j = extra.ids.tolist().index(s.token_id)
            cand_ids.append(s.token_id)
            p_model.append(float(extra.p_model[j]))
            p_final.append(float(extra.p_final[j]))
        rank = int((last_logits > last_logits[s.token_id]).sum()) + 1
        chosen = cand_ids.index(s.token_id)
        context = tokens + lm.tokenizer.tokens(new_ids[:-1])            # what the model read at this step
        left, right = (chart_area, side) if presenting else st.columns([3, 2], gap="medium")
        with left:
            theme.plot(G.candidates_figure(page.t, axis_labels(next_token_texts(lm, context, cand_ids)), p_model,
                                           p_final, chosen, settings.greedy), key="candidates_chart",
                       height=theme.projected(190 + 34 * len(cand_ids), 170 + 28 * len(cand_ids)))
        with right:
            st.markdown(page.t("step_line", s=step, token=md_label(new_texts[-1]), p=f"{s.prob:.1%}",
                               pm=f"{model_probs[-1]:.1%}", how=how_chosen(rank), n=count("tokens", n_prompt + step - 1)))
            if finished_at is not None and step == finished_at:
                if s.stop == "eos":
                    st.success(page.t("stop.eos", token=md_label(new_texts[-1]), s=step), icon=":material/flag:")
                else:
                    st.warning(page.t("stop.length", max=count("new", max_new), eos=eos_names), icon=":material/straighten:")
        rows = [{page.t("col.step"): x.index + 1, page.t("col.token"): label(text),
                 page.t("col.prob"): f"{x.prob:.1%}", page.t("col.model_prob"): f"{pm:.1%}",
                 page.t("col.computed"): x.positions_computed, page.t("col.cached"): x.kv_positions,
                 page.t("col.ms"): round(x.seconds * 1000)}
                for x, pm, text in zip(steps[:step], model_probs, new_texts)]
        st.dataframe(theme.arrow_table(rows), hide_index=True, width="stretch", key="steps_table",
                     height=min(35 * (len(rows) + 1) + 3, 320))
        st.caption(page.t("table_caption"))

    # --- 2. the KV cache -------------------------------------------------------------------------------
    page.part("kv", page.t("kv_title"))
    page.prose("kv")
    per_token = gd.kv_bytes(cfg, 1)
    if cfg.sliding_layers:          # most layers attend only to a window of recent positions
        window_lines = [page.t("kv.window", n=len(cfg.sliding_layers), layers=cfg.n_layers, window=f"{cfg.sliding_window:,}",
                               ctx=f"{cfg.max_position:,}", full=bytes_text(gd.kv_bytes(cfg, cfg.max_position)),
                               windowed=bytes_text(gd.kv_bytes_windowed(cfg, cfg.max_position)))]
        if CAP + MAX_NEW <= cfg.sliding_window:
            window_lines.append(page.t("kv.window_inside", most=f"{CAP + MAX_NEW:,}", window=f"{cfg.sliding_window:,}"))
        st.markdown(join_sentences(window_lines))
    if step == 0:
        st.info(page.t("kv.step0"), icon=":material/touch_app:")
    else:
        s = steps[step - 1]
        cached = s.kv_positions                            # the newest token enters on the next step
        per_layer = gd.kv_bytes_per_layer(cfg, cached)
        m = st.columns(4)
        m[0].metric(page.t("kv.m_positions"), f"{cached:,}", help=page.t("kv.m_positions_help"))
        m[1].metric(page.t("kv.m_layer"), bytes_text(per_layer), help=page.t("kv.m_layer_help", kv=count("kv_heads", cfg.n_kv_heads), d=cfg.d_head))
        m[2].metric(page.t("kv.m_total"), bytes_text(s.kv_bytes), help=page.t("kv.m_total_help", layers=cfg.n_layers))
        m[3].metric(page.t("kv.m_computed"), f"{s.positions_computed:,}", help=page.t("kv.m_computed_help", layers=cfg.n_layers))
        seen = tokens + lm.tokenizer.tokens(new_ids)
        theme.plot(G.kv_grid_figure(page.t, n_prompt, cached - n_prompt, cfg.n_layers,
                                    axis_labels(seen[:cached], limit=10), per_layer / 1024, s.positions_computed),
                   key="kv_grid", height=560)

    # live timing, cache on vs off
    st.markdown(f"#### {page.t('time_title')}")
    page.prose("timing")
    timing_n = min(max_new, TIMING_MAX)
    timing_key = ("timing", lm.name, tuple(prompt_ids), timing_n, tuple(sorted(kwargs.items())), settings.seed)
    if st.button(page.t("time.button", n=count("tokens", timing_n)), key="time_button", icon=":material/timer:"):
        with st.spinner(page.t("time.running", n=count("tokens", timing_n))):
            st.session_state["_generation_timing"] = (timing_key, gd.compare_kv_cache(
                lm, prompt_ids, timing_n, seed=settings.seed, **kwargs))
    stored = st.session_state.get("_generation_timing")
    comparison = stored[1] if stored and stored[0] == timing_key else None
    if comparison is not None:
        on, off = comparison.with_cache, comparison.without_cache
        on_ms, off_ms = [x.seconds * 1000 for x in on], [x.seconds * 1000 for x in off]
        later_on = statistics.median(on_ms[1:]) if len(on_ms) > 1 else on_ms[0]
        later_off = statistics.median(off_ms[1:]) if len(off_ms) > 1 else off_ms[0]
        m = st.columns(3)
        m[0].metric(page.t("time.m_on"), f"{later_on:,.0f} ms")
        m[1].metric(page.t("time.m_off"), f"{later_off:,.0f} ms")
        with m[2]:
            if comparison.identical:
                st.success(page.t("time.identical", n=count("tokens", len(on))), icon=":material/check_circle:")
            else:
                st.error(page.t("time.different", i=(comparison.first_difference or 0) + 1), icon=":material/error:")
        theme.plot(G.timing_figure(page.t, on_ms, off_ms, [x.positions_computed for x in on],
                                   [x.positions_computed for x in off]), key="timing_chart", height=520)
        st.caption(page.t("time.totals", on=f"{sum(on_ms) / 1000:.2f}", off=f"{sum(off_ms) / 1000:.2f}"))
    else:
        st.caption(page.t("time.hint"))

    # --- 3. speculative decoding -----------------------------------------------------------------------
    page.part("spec", page.t("spec_title"))
    page.prose("spec")
    row = st.columns(2)
    draft_default = min(max(1, round(cfg.n_layers * DRAFT_SHARE)), cfg.n_layers - 1)
    draft_layers = state.url_int("draft_layers", page.t("spec.k"), 1, cfg.n_layers - 1, draft_default,
                                 help=page.t("spec.k_help", n=cfg.n_layers), container=row[0])
    draft_len = state.url_int("draft_len", page.t("spec.n"), 1, 8, 4, help=page.t("spec.n_help"), container=row[1])
    with st.container(horizontal=True, gap="large", key="spec_toggles"):     # wraps, never cuts a label
        spec_on = state.url_bool("spec", page.t("spec.run"), False, help=page.t("spec.run_help"))
        spec_sampled = state.url_bool("spec_sample", page.t("spec.sampled"), False, help=page.t("spec.sampled_help"))
    spec_n = min(max_new, SPEC_MAX)
    spec_kwargs = kwargs if spec_sampled else dict(temperature=0.0)
    greedy_spec = spec_kwargs["temperature"] == 0

    result = reference = None
    if not spec_on:
        st.info(page.t("spec.off", n=count("tokens", spec_n)), icon=":material/toggle_off:")
    else:
        with st.spinner(page.t("spec.running", n=count("tokens", spec_n))):
            result = cache.speculative(lm.name, tuple(prompt_ids), spec_n, draft_layers, draft_len,
                                       tuple(sorted(spec_kwargs.items())), settings.seed, _lm=lm)
            reference = cache.plain_greedy(lm.name, tuple(prompt_ids), spec_n, _lm=lm) if greedy_spec else None
        # token labels read in the order the text grows, byte pieces as their characters (我¹ 我²)
        grid_rows = []
        text_so_far = list(tokens)
        for r in result.rounds:
            guesses = sequence_texts(lm, text_so_far, r.proposed)
            own = sequence_texts(lm, text_so_far, r.proposed[:r.accepted] + [r.token])[-1]
            row = []
            for i, g in enumerate(r.proposed):
                kind = G.ACCEPTED if i < r.accepted else (G.REJECTED if i == r.accepted else G.UNCHECKED)
                hover = page.t("spec.hover_guess", token=sentence_label(guesses[i]), q=f"{r.draft_probs[i]:.1%}",
                               p=f"{r.target_probs[i]:.1%}", full=sentence_label(lm.token_text(r.target_choice[i])))
                row.append((kind, plot_label(guesses[i], 10), html_escape(hover)))
            row += [(G.EMPTY, "", "")] * (draft_len - len(r.proposed))
            row.append((G.BONUS if r.bonus else G.CORRECTION, plot_label(own, 10),
                        html_escape(page.t("spec.hover_own", token=sentence_label(own)))))
            grid_rows.append(row)
            text_so_far += lm.tokenizer.tokens(r.new_ids)
        theme.plot(G.speculative_figure(page.t, grid_rows, draft_len), key="spec_chart",
                   height=190 + 36 * len(grid_rows))
        m = st.columns(3)
        m[0].metric(page.t("spec.m_rate"), f"{result.acceptance_rate:.0%}",
                    help=page.t("spec.m_rate_help", a=result.accepted, p=result.proposed))
        m[1].metric(page.t("spec.m_passes"), f"{result.full_passes} / {len(result.new_ids)}",
                    help=page.t("spec.m_passes_help"))
        st.markdown(page.t("spec.output", text=code_span(shorten(lm.decode(result.new_ids).replace("\n", "↵"), 300))))
        if greedy_spec:
            if result.new_ids == reference:
                st.success(page.t("spec.equal", n=count("tokens", len(result.new_ids))), icon=":material/check_circle:")
            else:
                first = next((i for i, (a, b) in enumerate(zip(result.new_ids, reference)) if a != b),
                             min(len(result.new_ids), len(reference)))
                st.error(page.t("spec.not_equal", i=first + 1), icon=":material/error:")
        else:
            st.info(page.t("spec.sampled_note"), icon=":material/casino:")
    full_cost = gd.multiply_adds(cfg, n_prompt, 1)
    draft_cost = gd.multiply_adds(dataclasses.replace(cfg, n_layers=draft_layers), n_prompt, 1)

    # --- what to notice --------------------------------------------------------------------------------
    if step == 0:
        found = [N.start_notice(n_prompt=n_prompt)]
    else:
        s = steps[step - 1]
        cached = s.kv_positions
        found = N.step_notices(
            step=step, n_prompt=n_prompt, token=md_label(new_texts[-1]), p_model=model_probs[-1],
            how=N.how_chosen(greedy=settings.greedy, rank=rank, seed=settings.seed),
            finished=finished_at is not None and step == finished_at, stop=s.stop, max_new=max_new, cached=cached,
            n_layers=cfg.n_layers, kb=bytes_text(s.kv_bytes), per=bytes_text(per_token), full=bytes_text(gd.kv_bytes(cfg, cfg.max_position)),
            ctx=cfg.max_position, macs_with=gd.multiply_adds(cfg, cached - 1, 1),
            macs_without=gd.multiply_adds(cfg, 0, cached), big=big_number)
    if comparison is not None:
        found.append(N.time_notice(n=len(on), on_ms=later_on, off_ms=later_off, identical=comparison.identical,
                                   params=lm.param_counts()["total"], big=big_number))
    if result is not None:
        found += N.spec_notices(draft_layers=draft_layers, n_layers=cfg.n_layers, draft_len=draft_len,
                                accepted=result.accepted, proposed=result.proposed, rate=result.acceptance_rate,
                                full_passes=result.full_passes, n_new=len(result.new_ids), cost=draft_cost / full_cost,
                                greedy=greedy_spec, equal=result.new_ids == reference)
    page.notices(found)


    # --- try this: each example sets what its line relies on (and starts again at step 0) --------------
    GREEDY = {"temperature": 0.0, STEP: 0}
    long_enough = {"max_new": max(max_new, DEFAULT_NEW)}
    if has_chat:        # an instruct model: its chat format, and the reply ends with its end token
        third = (lm.chat_template([{"role": "user", "content": page.t("try.chat_question")}]), page.t("try.chat_why"))
    else:               # a base model has no chat format: it continues the text
        third = (page.t("try.base.prompt"), page.t("try.base.why", name=lm.bundled.name, eos=eos_names))
    page.try_this([
        (page.t("try.1.prompt"), join_sentences([page.t("try.1.why"), page.t("try.sets_spec")]),
         {**GREEDY, "spec": True, "spec_sample": False}),
        (page.t("try.2.prompt"), page.t("try.2.why"), {STEP: 0}),
        (third[0], join_sentences([third[1], page.t("try.sets_greedy")]), {**GREEDY, **long_enough}),
        (page.t("try.3.prompt"), join_sentences([page.t("try.3.why"), page.t("try.sets_greedy")]), {**GREEDY, **long_enough}),
    ])

    # --- the math --------------------------------------------------------------------------------------
    cached_now = steps[step - 1].kv_positions if step else n_prompt
    page.math(page.t("math_example", layers=cfg.n_layers, kv=count("kv_heads", cfg.n_kv_heads), d=cfg.d_head,
                     per=f"{per_token:,}", kind=K.shape_of(cfg, lm.name).kind,
                     n=f"{cached_now:,}", total=bytes_text(gd.kv_bytes(cfg, cached_now)), ctx=f"{cfg.max_position:,}",
                     full=bytes_text(gd.kv_bytes(cfg, cfg.max_position)), heads=cfg.n_heads, g=cfg.group_size,
                     mha=bytes_text(gd.kv_bytes(cfg, cfg.max_position) * cfg.n_heads // cfg.n_kv_heads)))
    page.code(generate_steps, KVCache.append, speculative_generate)


render()
