"""Lesson 5: multi-head attention, grouped-query attention and the KV cache.

All heads of a layer side by side; a layer x head map coloured by a measure computed on
this prompt (click a square to open that head); every head reads the whole vector; GQA
drawn from the real shapes, with the heads of one group using the same keys; a KV cache
memory calculator."""


import streamlit as st
import torch

from course import state, theme
from course.cache import heads as cache
from course.figures import heads as F
from course.figures.attention import pattern_figure
from course.i18n import current_lang, join_list, join_sentences
from course.lesson import Lesson
from course.notices import heads as N
from course.text import bytes_text
from course.tokens import axis_labels, md_labeler, position_label, readable_texts
from lesson_model.analysis import heads as H
from lesson_model.analysis import kv_memory as K
from lesson_model.decoder import Attention, KVCache

CAP = cache.CAP
PRESETS = ["this", *K.PRESETS]          # "this" = the loaded model
DTYPES = ["fp32", "fp16", "int8"]
VARIANTS = ["actual", "MHA", "MQA"]
CTX_MAX = 1_048_576
TIE = 0.005             # values this close to the best one print the same: a tie, not "the" strongest head


def head_name(layer: int, head: int) -> str:
    return f"{layer}.{head}"


def shape_text(weight) -> str:
    """A matrix's shape as the lesson writes it: "576 × 192" (not a Python tuple)."""
    return " × ".join(str(n) for n in weight.shape)


def best_head(grid: torch.Tensor, layer: int | None = None) -> tuple[int, int]:
    """The head with the highest value of a measure on this prompt (in ``layer``, if given):
    the default the controls open on. (0, 0) when nothing has a value (a one-token prompt)."""
    if layer is not None:
        top = H.top_heads(grid[layer:layer + 1], 1)
        return (layer, top[0][1]) if top else (layer, 0)
    top = H.top_heads(grid, 1)
    return top[0][:2] if top else (0, 0)


def render() -> None:
    """The lesson, top to bottom: its variables live only while it runs (a widget's callback
    keeps just the names it uses, never this run's tensors)."""
    page = Lesson("heads")
    page.header()
    lm = page.model()
    page.predict(lm)                  # Predict, then see: before the figures that answer it
    cfg = lm.cfg
    st.markdown(page.t("intro_count", h=cfg.n_heads, layers=cfg.n_layers, total=cfg.n_heads * cfg.n_layers))
    tokens = page.tokens(lm, cap=CAP)
    n = len(tokens)
    labels = axis_labels(tokens)
    readable = readable_texts(tokens)       # byte pieces of a split character read as the character (我¹ 我²)
    run = cache.lesson_run(lm, tokens)       # shared with the attention lesson

    md_tok = md_labeler(tokens)

    def open_from_chart() -> None:
        """on_select of the overview: open the clicked head."""
        points = st.session_state["overview"].selection.points
        if points:
            layer, head = points[0]["customdata"][:2]
            state.set_value("layer", int(layer))
            state.set_value("head", int(head))

    measures = H.head_measures(lm, run)                  # {measure: [n_layers, n_heads]}
    has_repeats = bool(H.induction_targets(H.run_ids(run)))
    globals_text = join_list(str(layer) for layer in range(cfg.n_layers) if cfg.window(layer) is None)

    # --- 1. every head of one layer --------------------------------------------------------------
    page.part("grid", page.t("grid_title"))
    page.prose("grid")
    if n < 2:
        st.info(page.t("one_token", token=md_tok(0)), icon=":material/info:")
    figure_area, controls = page.columns()
    with controls:
        measure = state.url_choice("measure", page.t("measure_label"), list(H.MEASURES), "previous",
                                   format_func=lambda m: page.t(f"fig.measure.{m}"), help=page.t("measure_help"))
        # Defaults: the head with the highest value of the chosen measure on this prompt (layer,
        # then the best head of whatever layer is open), clamped to this model's range.
        layer = state.url_int("layer", page.t("layer_label"), 0, cfg.n_layers - 1, best_head(measures[measure])[0],
                              help=page.t("layer_help"))
        head = state.url_int("head", page.t("head_label"), 0, cfg.n_heads - 1, best_head(measures[measure], layer)[1],
                             help=page.t("head_help"))
        st.caption(page.t(f"measure_about.{measure}"))
    grid = measures[measure]
    patterns = run.cache[f"blocks.{layer}.attn.hook_pattern"][0]          # [n_heads, q, k]
    with figure_area:
        theme.plot(F.layer_grid_figure(patterns.tolist(), layer, cfg.group_size, grid[layer].tolist(), measure, head,
                                       labels, page.t),
                   key="grid_chart", height=theme.projected(260 * (cfg.n_heads // cfg.group_size) + 60,
                                                            125 * (cfg.n_heads // cfg.group_size) + 55))
        window = cfg.window(layer)
        st.caption(join_sentences([
            page.t("grid_caption", group=cfg.group_size),
            *([] if not cfg.sliding_layers else
              [page.t("layer_global", layer=layer, globals=globals_text)] if window is None else
              [page.t("layer_window_fits" if n <= window else "layer_window", layer=layer, w=window, w1=window - 1, n=n)])]))

    # --- 2. the layer x head map -------------------------------------------------------------------
    page.part("overview", page.t("overview_title"))
    page.prose("overview")
    if measure == "induction" and not has_repeats:
        st.info(page.t("no_repeats"), icon=":material/info:")
    left, right = st.columns([2, 3], gap="medium")
    with left:
        overview = F.overview_figure(grid.tolist(), measure, (layer, head), page.t,
                                     page.t("fig.overview_title", measure=page.t(f"fig.measure.{measure}")))
        overview = theme.style(overview, height=160 + 24 * cfg.n_layers, title_width=24)     # a narrow column
        about = theme.ChartText(overview)
        st.plotly_chart(theme.unchecked(overview), key="overview", theme=None, width="stretch", on_select=open_from_chart,
                        selection_mode="points", alt=about.alt,
                        config={"displaylogo": False, "modeBarButtonsToRemove": ["lasso2d", "select2d"]})
        theme.data_table(about, "overview")
        st.caption(page.t("overview_caption"))
    with right:
        pattern = patterns[head]
        theme.plot(pattern_figure(pattern.tolist(), labels, None,
                                  page.t("fig.open_title", head=head_name(layer, head),
                                         value=F.fmt_measure(measure, float(grid[layer, head])),
                                         measure=page.t(f"fig.measure.{measure}")), page.t),
                   key="open_chart", height=260 + 16 * n)

    # --- 3. every head reads the whole vector ---------------------------------------------------------
    page.part("whole", page.t("whole_title", d=cfg.d_model))
    page.prose("whole")
    bounds = H.slice_bounds(cfg)
    if cfg.d_model == cfg.n_heads * cfg.d_head:
        st.markdown(page.t("whole_equal", d=cfg.d_model, h=cfg.n_heads, dh=cfg.d_head))
    else:       # Gemma 3 270M: 4 heads x 256 = 1,024 query numbers made from 640
        st.markdown(page.t("whole_wider" if cfg.n_heads * cfg.d_head > cfg.d_model else "whole_narrower",
                           d=cfg.d_model, h=cfg.n_heads, dh=cfg.d_head, q=f"{cfg.n_heads * cfg.d_head:,}",
                           chunk=bounds[0][1] - bounds[0][0]))
    # Drawn at a width that makes its text F.DIAGRAM_TEXT_PX (not stretched to the column, which made
    # a wide diagram's text tiny; see course/figures/heads.py).
    proj_dot, proj_width = F.projection_dot(cfg, page.t, theme.font_family().split(",")[0])
    theme.diagram(proj_dot, width=F.diagram_px(proj_width))
    share = H.query_weight_slices(lm, layer)                             # [n_heads, n_chunks]
    feeding = H.inputs_feeding_head(lm, layer)                           # [n_heads]
    st.markdown(page.t("shapes", d=cfg.d_model, q=cfg.n_heads * cfg.d_head, h=cfg.n_heads, dh=cfg.d_head, layer=layer))
    lo, hi, even = float(share.min()), float(share.max()), 1 / share.shape[1]
    st.markdown(join_sentences([
        page.t("slices_facts"),
        page.t("slices_all", layer=layer, d=cfg.d_model) if int(feeding.min()) == cfg.d_model else
        page.t("slices_partial", layer=layer, min=int(feeding.min()), d=cfg.d_model),
        page.t("slices_even" if even / 2 <= lo and hi <= 1.5 * even else "slices_uneven",
               lo=f"{lo:.0%}", hi=f"{hi:.0%}", even=f"{even:.0%}")]))
    # Full width: nine columns of percentages need the room (at 1024 px a side column squeezed them together).
    theme.plot(F.slices_figure(share.tolist(), bounds, page.t), key="slices_chart", height=460)

    # --- 4. grouped-query attention ----------------------------------------------------------------------
    kind = K.shape_of(cfg, lm.name).kind          # "GQA" (SmolLM2: 9 query heads, 3 K/V heads), "MQA" (Gemma: 4, 1)
    page.part("gqa", page.t("gqa_title_mqa" if kind == "MQA" else "gqa_title_mha" if kind == "MHA" else "gqa_title",
                     h=cfg.n_heads, kv=cfg.n_kv_heads))
    page.prose("gqa")
    st.markdown(page.t("gqa_this_mqa" if kind == "MQA" else "gqa_this_mha" if kind == "MHA" else "gqa_this",
                       name=lm.name, h=cfg.n_heads, kv=cfg.n_kv_heads, g=cfg.group_size))
    group = head // cfg.group_size
    members = list(range(group * cfg.group_size, (group + 1) * cfg.group_size))
    gqa_dot, gqa_width = F.gqa_dot(cfg.n_heads, cfg.n_kv_heads, head, page.t, theme.font_family().split(",")[0])
    theme.diagram(gqa_dot, width=F.diagram_px(gqa_width))
    left, right = st.columns([2, 3], gap="medium")
    with left:
        W = lm.decoder.blocks[layer].attn
        st.markdown(page.t("gqa_shapes_mqa" if kind == "MQA" else "gqa_shapes", wq=shape_text(W.W_Q), wk=shape_text(W.W_K),
                           wv=shape_text(W.W_V), h=cfg.n_heads, kv=cfg.n_kv_heads, g=cfg.group_size))
        query = state.url_int("pos", page.t("query_label"), 0, n - 1, n - 1, widget="select",
                              format_func=lambda i: position_label(readable, i), help=page.t("query_help"))
    with right:
        group_weights = [run.cache[f"blocks.{layer}.attn.hook_pattern"][0, h, query, : query + 1] for h in members]
        theme.plot(F.group_weights_figure([w.tolist() for w in group_weights], members, layer, labels[: query + 1],
                                          page.t, page.t("fig.group_title", g=group, layer=layer,
                                                         query=labels[query])),
                   key="group_chart", height=420)
    keys = run.cache[f"blocks.{layer}.attn.hook_rot_k"][0, :, group]              # [pos, d_head] one K head
    qs = run.cache[f"blocks.{layer}.attn.hook_rot_q"][0, query, members]          # [group, d_head]
    shared_scores = qs @ keys[: query + 1].T / cfg.d_head ** 0.5                  # [group, pos]
    same_keys_check = max(float((torch.softmax(shared_scores[i], -1) - group_weights[i]).abs().max())
                          for i in range(len(members)))
    check_heads = join_list(head_name(layer, h) for h in members)
    if same_keys_check == 0:
        st.caption(page.t("gqa_check_exact", heads=check_heads, g=group))
    else:
        st.caption(page.t("gqa_check", heads=check_heads, g=group, err=f"{same_keys_check:.1e}"))

    # --- 5. the KV cache and its memory -------------------------------------------------------------------
    page.part("kv", page.t("kv_title"))
    page.prose("kv")
    this = K.shape_of(cfg, lm.name)
    shapes = {"this": this, **K.PRESETS}
    figure_area, controls = page.columns()
    with controls:
        preset = state.url_choice("preset", page.t("preset_label"), PRESETS, "this",
                                  format_func=lambda p: shapes[p].name)
        variant = state.url_choice("kv", page.t("variant_label"), VARIANTS, "actual", widget="radio",
                                   format_func=lambda v: page.t(f"variant.{v}"), help=page.t("variant_help"))
        dtype = state.url_choice("dtype", page.t("dtype_label"), DTYPES, "fp16", widget="radio",
                                 help=page.t("dtype_help"))
        context = state.url_int("ctx", page.t("ctx_label"), 1, CTX_MAX, 4096, widget="number", help=page.t("ctx_help"))
    chosen = K.variants(shapes[preset])[variant]
    per_token = K.kv_bytes_per_token(chosen, dtype)
    total = K.kv_bytes(chosen, context, dtype)
    with figure_area:
        cols = st.columns(3)
        cols[0].metric(page.t("per_token"), "{:.4g} {}".format(*K.human_bytes(per_token)))
        cols[1].metric(page.t("for_context", n=f"{context:,}"), "{:.4g} {}".format(*K.human_bytes(total)))
        cols[2].metric(page.t("kv_heads_metric"), f"{chosen.n_kv_heads} / {chosen.n_heads}",
                       help=page.t("kv_heads_metric_help"))
        st.markdown(page.t("formula", name=chosen.name, layers=chosen.n_layers, kv=chosen.n_kv_heads, dh=chosen.d_head,
                           b=f"{K.bytes_per_value(dtype):g}", bytes=f"{per_token:,.0f}"))
        contexts = sorted({int(round(2 ** (e / 4))) for e in range(28, 81)} | {context})
        series = []
        for colour, key in zip(theme.OKABE_ITO, PRESETS):
            s = shapes[key]
            series.append((f"{s.name} ({s.kind} {s.n_heads}/{s.n_kv_heads})",
                           [K.kv_bytes(s, c, dtype) / 2**30 for c in contexts], colour, "solid"))
        if variant != "actual":
            series.append((page.t("fig.what_if", name=chosen.name, kind=chosen.kind),
                           [K.kv_bytes(chosen, c, dtype) / 2**30 for c in contexts], "#000000", "dash"))
        win_shape = chosen if preset == "this" else this      # the window is this model's, whatever the preset
        if this.window:
            series.append((page.t("fig.window_aware", name=win_shape.name),
                           [K.kv_bytes_windowed(win_shape, c, dtype) / 2**30 for c in contexts], theme.OKABE_ITO[0], "dot"))
        theme.plot(F.kv_memory_figure(series, contexts, context, page.t), key="kv_chart",     # taller in presenter mode:
                   height=theme.presenter_height(460),       # 7 decades of 20 px ticks
                   title_width=theme.THREE_QUARTERS_TITLE)
    if this.window:
        full, win = K.kv_bytes(win_shape, context, dtype), K.kv_bytes_windowed(win_shape, context, dtype)
        fmt = "{:.4g} {}".format
        window_fields = dict(name=win_shape.name, n_win=this.n_window_layers, layers=this.n_layers, w=this.window,
                             globals=globals_text, n=f"{context:,}", full=fmt(*K.human_bytes(full)),
                             win=fmt(*K.human_bytes(win)), ratio=f"{full / win:.2g}", dtype=dtype,
                             max=f"{cfg.max_position:,}",
                             full_max=fmt(*K.human_bytes(K.kv_bytes(win_shape, cfg.max_position, dtype))),
                             win_max=fmt(*K.human_bytes(K.kv_bytes_windowed(win_shape, cfg.max_position, dtype))))
        st.markdown(join_sentences([page.t("window_kv", **window_fields),
                                    page.t("window_kv_fits" if context <= this.window else "window_kv_saves",
                                           **window_fields),
                                    page.t("window_app")]))
        theme.plot(F.kv_layers_figure(K.positions_needed_by_layer(cfg, context), context,
                                      [cfg.window(layer) is not None for layer in range(cfg.n_layers)], page.t,
                                      page.t("fig.layers_title", n=f"{context:,}")),
                   key="kv_layers_chart", height=theme.presenter_height(380),
                   title_width=theme.WIDE_TITLE)     # taller in presenter mode: room for the axis title above the legend
    kv_cache = K.kv_cache_of_run(run, cfg.n_layers)        # this pass's keys and values, as generation keeps them
    positions, measured = len(kv_cache), sum(kv_cache.nbytes(layer) for layer in range(cfg.n_layers))
    st.caption(page.t("kv_measured_one" if positions == 1 else "kv_measured", n=positions, bytes=f"{measured:,}",
                      per=f"{K.kv_bytes_per_token(this, 'fp32'):,.0f}"))

    # --- What to notice --------------------------------------------------------------------------------------
    total_heads = cfg.n_layers * cfg.n_heads
    lang = current_lang()
    if n < 2:
        found = [N.one_token_notice(label=md_tok)]
    else:
        early, late, third = H.depth_means(measures["sink"])
        found = N.measure_notices(
            n=n, previous=H.leaders(measures["previous"], tol=TIE), sink=H.leaders(measures["sink"], tol=TIE),
            n_sinks=int((measures["sink"] > 0.5).sum()), total_heads=total_heads, early=early, late=late, third=third,
            n_layers=cfg.n_layers, flat=H.leaders(measures["entropy"], tol=TIE),
            sharp=H.leaders(measures["entropy"], largest=False, tol=TIE),
            induction=H.leaders(measures["induction"], tol=TIE) if has_repeats else None,
            head_name=head_name, label=md_tok, lang=lang)
    if len(members) > 1:                          # a group of one (MHA) has no second head to compare
        found.append(N.group_notice(contrast=H.group_contrast(group_weights[0], group_weights[1]), layer=layer,
                                    members=members, query=query, head_name=head_name, label=md_tok))
    llama = K.PRESETS["llama2_70b"]
    found.append(N.kv_notice(name=chosen.name, per_token=bytes_text(per_token), context=context, total=bytes_text(total),
                             llama_ratio=K.kv_bytes_per_token(llama.with_kv_heads(llama.n_heads))
                             / K.kv_bytes_per_token(llama)))
    if this.window:
        found.append(N.window_notice(context=context, window=this.window, fields=window_fields))
    page.notices(found)
    page.try_this()

    fp16 = K.kv_bytes_per_token(this, "fp16")
    worked = [page.t("math_example", layers=cfg.n_layers, kv=cfg.n_kv_heads, dh=cfg.d_head, fp16=f"{fp16:,.0f}",
                     ctx=f"{cfg.max_position:,}", total="{:.4g} {}".format(*K.human_bytes(fp16 * cfg.max_position)),
                     mha=f"{K.kv_bytes_per_token(this.with_kv_heads(cfg.n_heads), 'fp16'):,.0f}", h=cfg.n_heads)]
    if this.window:
        worked.append(page.t("math_window", n_win=this.n_window_layers, n_global=this.n_global_layers, w=this.window,
                             ctx=f"{cfg.max_position:,}", per=f"{K.kv_bytes_per_layer_position(this, 'fp16'):,.0f}",
                             win="{:.4g} {}".format(*K.human_bytes(K.kv_bytes_windowed(this, cfg.max_position, "fp16")))))
    if cfg.qk_norm:
        worked.append(page.t("math_qk_norm"))
    page.math(join_sentences(worked))
    page.code(Attention.forward, KVCache, K.kv_cache_of_run, H.head_measures, K.kv_bytes_per_token)


render()
