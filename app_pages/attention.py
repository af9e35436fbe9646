"""Lesson 4: attention. One head, one query token, step by step with the real numbers:
q and the keys, dot products, the 1/sqrt(d_head) scale, the causal mask, softmax, the
weighted sum of values; the head's whole pattern; the what-if without the scale; a search
for the heads that link two tokens; on a model with sliding-window layers, what a sliding and
a global layer see on a long prompt; and how the work grows with the prompt's length."""


import streamlit as st

from course import i18n, state, theme
from course.cache import attention as cache
from course.figures import attention as F
from course.lesson import Lesson
from course.model import model_tag
from course.notices import attention as N
from course.notices import toys as TN
from course.text import num
from course.tokens import axis_labels, md_labeler, position_label, readable_texts
from lesson_model.analysis import attention as A
from lesson_model.analysis import toys
from lesson_model.decoder import Attention

CAP = cache.CAP     # tokens of the prompt this page runs
SEARCH_TOP = 8      # heads listed by the search
OPEN_BUTTONS = 3    # of which this many get an "open" button
SIDE_BY_SIDE = 24   # longer prompts draw the pattern and the lines view one under the other
WIDE, THREE_QUARTERS = theme.WIDE_TITLE, theme.THREE_QUARTERS_TITLE   # title widths of a chart that spans
                                                                      # the page or 3/4 of it


def find_token(texts: list[str], want: str, last: bool = False) -> int | None:
    """The position of the token whose text is ``want`` (the last such with ``last``), else of
    one that contains it (因为它 holds 它 when the tokenizer joins them), else None."""
    for match in (lambda t: t == want, lambda t: want in t):
        found = [i for i, t in enumerate(texts) if match(t)]
        if found:
            return found[-1] if last else found[0]
    return None


def readable(x: float) -> str:
    """A positive number for the worked example: plain digits while they stay short."""
    return f"{x:,.2f}" if x < 1e9 else f"{x:.3e}"


def render() -> None:
    """The lesson, top to bottom: its variables live only while it runs (a widget's callback
    keeps just the names it uses, never this run's tensors)."""
    page = Lesson("attention")
    page.header()
    lm = page.model()
    page.predict(lm)                  # Predict, then see: before the figures that answer it
    cfg = lm.cfg
    tokens = page.tokens(lm, cap=CAP)
    n = len(tokens)
    labels = axis_labels(tokens)                # escaped, unique, byte pieces read as characters
    token_texts = readable_texts(tokens)        # the same for plain-text options (我¹, 我²)

    md_tok = md_labeler(tokens)

    run = cache.lesson_run(lm, tokens)
    LONG = cache.long_length(cfg)                 # the long prompt of the window section: past the window


    def has(key: str) -> bool:
        return i18n.has(f"attention.{model_tag()}.{key}") or i18n.has(f"attention.{key}")


    def try_examples() -> list[tuple]:
        """The Try-this prompts, each with the query and key its "why" is about (try.<n>.query /
        .key, a piece of token text), found in the prompt's tokens on the loaded model."""
        out = []
        for number in page.try_numbers():
            prompt, why = page.t(f"try.{number}.prompt"), page.t(f"try.{number}.why")
            values = {}
            if has(f"try.{number}.query"):
                texts = [tok.text.strip() for tok in lm.tokenize(prompt)]
                query = find_token(texts, page.t(f"try.{number}.query"), last=True)
                if query is not None:
                    values["pos"] = query
                    key = find_token(texts[:query], page.t(f"try.{number}.key"))
                    if key is not None:
                        values["key"] = key
            out.append((prompt, why, values))
        return out


    def open_head(layer: int, head: int) -> None:
        state.set_value("layer", layer)
        state.set_value("head", head)


    def head_name(layer: int, head: int) -> str:
        return page.t("fig.head_name", layer=layer, head=head)


    # --- controls: the query token first, then the head (by default the head that makes this
    # token's strongest long-range link, found by search) ----------------------------------
    figure_area, controls = page.columns()
    with controls:
        query = state.url_int("pos", page.t("query_label"), 0, n - 1, n - 1, widget="select",
                              format_func=lambda i: position_label(token_texts, i), help=page.t("query_help"))
        link = A.strongest_link(lm, run, query)
        default_layer, default_head = (link[1].layer, link[1].head) if link else (cfg.n_layers // 2, 0)
        layer = state.url_int("layer", page.t("layer_label"), 0, cfg.n_layers - 1, default_layer,
                              help=page.t("layer_help"))
        head = state.url_int("head", page.t("head_label"), 0, cfg.n_heads - 1, default_head,
                             help=page.t("head_help", group=cfg.group_size))
        if link and (layer, head) == (default_layer, default_head):
            st.caption(page.t("default_head_note", head=head_name(layer, head),
                              query=md_tok(query), target=md_tok(link[0])))

    steps = A.attention_steps(lm, run, layer, head, query)
    weights = steps.weights
    visible = list(range(query + 1))
    qlabel = labels[query]

    # --- 1. step by step ----------------------------------------------------------------------
    with figure_area:
        page.part("steps", page.t("steps_title", head=head_name(layer, head), query=md_tok(query)))
        page.prose("steps", more=page.t("steps_numbers", d=cfg.d_head, s=f"{cfg.d_head ** 0.5:g}",
                                        group=cfg.group_size, heads=cfg.n_heads, kv=cfg.n_kv_heads,
                                        last=cfg.group_size - 1))
        theme.plot(F.qk_figure(steps.q.tolist(), steps.keys[: query + 1].tolist(), labels[: query + 1], qlabel, page.t),
                   key="qk_chart", height=F.rows_height(query + 2), title_width=THREE_QUARTERS)
    theme.plot(F.score_steps_figure(steps.raw.tolist(), steps.scaled.tolist(), weights.tolist(), labels,
                                    query, cfg.d_head, page.t),
               key="steps_chart", height=780, title_width=WIDE)
    theme.plot(F.weighted_sum_figure(steps.weighted_values[: query + 1].tolist(), steps.z.tolist(),
                                     labels[: query + 1], weights[: query + 1].tolist(), page.t),
               key="sum_chart", height=F.rows_height(query + 2), title_width=WIDE)
    st.caption(page.t("check_caption", w_err=f"{steps.max_weight_error:.1e}", z_err=f"{steps.max_z_error:.1e}"))

    # --- 1b. the classroom analogy: Q, K, V with heights and weights, beside this step ----------
    toy_found = _toy_section(page, [float(w) for w in weights[: query + 1]], [float(v) for v in steps.scaled[: query + 1]],
                             md_tok, query, token_texts)

    # --- 2. the whole pattern and the lines view ----------------------------------------------
    page.part("pattern", page.t("pattern_title", head=head_name(layer, head)))
    page.prose("pattern")
    pattern = run.cache[f"blocks.{layer}.attn.hook_pattern"][0, head]          # [q_pos, k_pos]
    left, right = st.columns(2, gap="medium") if n <= SIDE_BY_SIDE else (st.container(), st.container())
    with left:
        theme.plot(F.pattern_figure(pattern.tolist(), labels, query,
                                    page.t("fig.pattern_title", head=head_name(layer, head)), page.t),
                   key="pattern_chart", height=260 + 16 * n)
    with right:
        lines, drawn = F.lines_figure(weights.tolist(), labels, query, page.t)
        theme.plot(lines, key="lines_chart")
        if len(drawn) < query + 1:
            rest = 1.0 - sum(float(weights[j]) for j in drawn)
            st.caption(page.t("lines_hidden", k=len(drawn), n=query + 1 - len(drawn), pct=f"{max(0.0, rest):.0%}"))

    # --- 3. what if the scale is dropped -------------------------------------------------------
    page.part("scale", page.t("scale_title", s=f"{steps.scale:g}"))
    page.prose("scale")
    st.markdown(page.t("scale_numbers", d=cfg.d_head, s=f"{steps.scale:g}"))
    what_if = A.unscaled_what_if(steps)
    left, right = st.columns([3, 1], gap="medium")
    with left:
        theme.plot(F.scale_figure(weights.tolist(), what_if.weights_unscaled.tolist(), labels, query, cfg.d_head,
                                  page.t), key="scale_chart", height=420, title_width=THREE_QUARTERS)
    with right:
        st.metric(page.t("entropy_with"), page.t("bits", v=num(what_if.entropy_scaled)))
        st.metric(page.t("entropy_without"), page.t("bits", v=num(what_if.entropy_unscaled)),
                  delta=page.t("bits", v=num(what_if.entropy_unscaled - what_if.entropy_scaled, "+.2f")),
                  delta_color="off")
        st.metric(page.t("top_without"), f"{what_if.max_unscaled:.1%}",
                  delta=page.t("pp", v=num((what_if.max_unscaled - what_if.max_scaled) * 100, "+.1f")),
                  delta_color="off")

    # --- 4. search: which heads link two tokens? ------------------------------------------------
    page.part("search", page.t("search_title"))
    page.prose("search")
    left, right = st.columns([3, 1], gap="medium")
    with right:
        default_key = link[0] if link else 0
        key_pos = state.url_int("key", page.t("key_label"), 0, query, min(default_key, query), widget="select",
                                format_func=lambda i: position_label(token_texts, i), help=page.t("key_help"))
    hits = A.find_heads_attending(lm, run, query, key_pos, top=SEARCH_TOP)
    tied = A.heads_tied_for_most(run, cfg.n_layers, query, key_pos)
    with left:
        theme.plot(F.search_figure(hits, page.t, page.t("fig.search_title", query=qlabel, target=labels[key_pos])),
                   key="search_chart", height=140 + 40 * len(hits), title_width=THREE_QUARTERS)
    with right:
        st.markdown(page.t("open_label"))
        for rank, hit in enumerate(hits[:OPEN_BUTTONS]):
            st.button(page.t("open_button", head=head_name(hit.layer, hit.head), pct=f"{hit.weight:.0%}"),
                      key=f"open_{rank}", on_click=open_head, args=(hit.layer, hit.head), width="stretch",
                      icon=":material/visibility:", disabled=(hit.layer, hit.head) == (layer, head))

    # --- 5. the sliding window on a long prompt (models that have one) ---------------------------
    page.part("window", page.t("window_title"))
    page.prose("window")
    pair = A.window_layers(cfg)
    demo = None
    if pair is not None:
        # The default prompt by default: the demo is the same lesson on any text, and a new prompt of
        # the learner's would run six blocks over LONG tokens each time (the page's costliest part).
        default_tokens = cache.window_tokens(lm)
        own = [tok.id for tok in tokens] != [tok.id for tok in default_tokens]
        mine = not own or state.url_bool("window_mine", page.t("window_mine"), False,      # the toggle: own prompts only
                                         help=page.t("window_mine_help", n=f"{LONG:,}"))
        long_tokens = tokens if mine else default_tokens
        with st.spinner(page.t("window_spinner", n=f"{LONG:,}")):
            demo = cache.demo(lm, long_tokens)
        source = "mine" if mine else "default"
        s_layer, g_layer = demo.layers
        theme.plot(F.window_figure([demo.pooled[s_layer], demo.pooled[g_layer]], demo.pool, demo.n, demo.window,
                                   [page.t("fig.window_sliding", layer=s_layer, w=f"{demo.window:,}"),
                                    page.t("fig.window_global", layer=g_layer)], page.t),
                   key="window_chart", height=520, title_width=WIDE)
        st.caption(page.t(f"window_caption_{source}", n=f"{demo.n:,}", pool=demo.pool, w=f"{demo.window:,}"))

    # --- 6. cost ---------------------------------------------------------------------------------
    page.part("cost", page.t("cost_title"))
    page.prose("cost")
    crossover = A.crossover_length(cfg)
    top_len = max(cfg.max_position, 2 * n)
    lengths = sorted({max(1, round(top_len * i / 200)) for i in range(201)} | {n})
    costs = [A.block_cost(cfg, m) for m in lengths]
    sliding_costs = [A.block_cost(cfg, m, cfg.sliding_layers[0]).attention for m in lengths] if cfg.sliding_layers else None
    theme.plot(F.cost_figure(lengths, [c.attention for c in costs], [c.linear for c in costs], n, crossover, page.t,
                             sliding=sliding_costs, window=cfg.sliding_window),
               key="cost_chart", height=420, title_width=WIDE)
    now, doubled = A.block_cost(cfg, n), A.block_cost(cfg, 2 * n)

    # --- What to notice -------------------------------------------------------------------------
    best = hits[0]
    found = N.top_notices(query=query, n=n, weights=weights.tolist(), raw=steps.raw.tolist(),
                          scale=steps.scale, head=head_name(layer, head), label=md_tok)
    found.append(N.scale_notice(query=query, max_scaled=what_if.max_scaled, max_unscaled=what_if.max_unscaled,
                                entropy_scaled=what_if.entropy_scaled, entropy_unscaled=what_if.entropy_unscaled))
    found.append(N.search_notice(query=query, key=key_pos, best_head=head_name(best.layer, best.head),
                                 best_weight=best.weight, tied=tied, total_heads=cfg.n_layers * cfg.n_heads,
                                 label=md_tok))
    found.append(N.cost_notice(n=n, pairs=A.causal_pairs(n), pairs_doubled=A.causal_pairs(2 * n),
                               attention_ratio=doubled.attention / now.attention, linear_ratio=doubled.linear / now.linear,
                               crossover=crossover))
    if demo is not None:
        s_far, g_far = demo.beyond(s_layer), demo.beyond(g_layer)
        found += N.window_notices(
            source=source, n=demo.n, window=demo.window, s_layer=s_layer, g_layer=g_layer,
            s_beyond_max=float(s_far.max()), g_beyond_min=float(g_far.min()), g_beyond_max=float(g_far.max()),
            first=md_labeler(long_tokens)(0), g_first=float(demo.last_row[g_layer][:, 0].max()),
            outside_zero=bool(demo.outside_zero[s_layer]), outside_count=demo.outside_count[s_layer],
            per_token=A.sliding_attention_per_token(cfg), linear_per_token=A.linear_macs_per_token(cfg))
    found += toy_found
    page.notices(found)
    page.try_this(try_examples())

    # --- The math: a worked example with this head's numbers ------------------------------------
    order = sorted(visible, key=lambda j: -float(weights[j]))[:3]
    rows = "\n".join(
        page.t("math_row", target=md_tok(j), raw=num(float(steps.raw[j])),
               scaled=num(float(steps.scaled[j])), w=f"{float(weights[j]):.1%}")
        for j in order)
    denominator = float(steps.masked[: query + 1].double().exp().sum())


    page.math(page.t("math_example_first" if query == 0 else "math_example", head=head_name(layer, head),
                     query=md_tok(query), d=cfg.d_head,
                     s=f"{steps.scale:g}", n=query + 1, denom=readable(denominator),
                     e=readable(float(steps.scaled[order[0]].double().exp())), w=f"{float(weights[order[0]]):.1%}",
                     target=md_tok(order[0])) + "\n\n" + page.t("math_table" if query >= 3 else "math_table_all")
              + "\n" + rows)
    page.code(Attention.forward, A.attention_steps)


def _toy_section(page: Lesson, weights: list[float], scaled: list[float], md_tok, query: int,
                 token_texts: list[str]) -> list:
    """The height-and-weight analogy, computed (a table), then this head's real step in the same
    words: its query's three strongest keys with their scaled scores and weights. Returns this
    section's notices."""
    page.part("toy", page.t("toy.title"))
    page.prose("toy")
    slider, result = st.columns([3, 2], gap="medium")      # the query, then the whole table below
    with slider:
        height = state.url_float("toy_h", page.t("toy.height"), 1.50, 2.00, toys.QUERY_HEIGHT, 0.01,
                                 help=page.t("toy.height_help"))
    hw = toys.height_weight(height)
    names = [page.t(f"toy.name.{i}") for i in range(len(hw.heights))]
    with result:
        st.metric(page.t("toy.estimate"), page.t("toy.kg", v=f"{hw.estimate:.1f}"))
    st.dataframe(theme.arrow_table({
        page.t("toy.col_name"): names,
        page.t("toy.col_k"): [f"{h:.2f}" for h in hw.heights],
        page.t("toy.col_v"): [f"{w:g}" for w in hw.weights],
        page.t("toy.col_diff"): [f"{d:+.0f}" for d in hw.diffs_cm],
        page.t("toy.col_score"): [f"{x:.2f}" for x in hw.scores],
        page.t("toy.col_share"): [f"{a:.1%}" for a in hw.attention],
        page.t("toy.col_contrib"): [f"{c:.2f}" for c in hw.contributions],
    }), hide_index=True, width="stretch", key="toy_table")
    st.markdown(page.t("toy.formula", q=f"{hw.query:.2f}", w=f"{toys.WIDTH_CM:g}"))
    order = sorted(range(len(weights)), key=lambda j: -weights[j])[:3]
    st.markdown(page.t("toy.real_title", query=md_tok(query)))
    st.dataframe(theme.arrow_table({page.t("toy.col_key"): [position_label(token_texts, j) for j in order],
                               page.t("toy.col_real_score"): [f"{scaled[j]:.2f}" for j in order],
                               page.t("toy.col_share"): [f"{weights[j]:.1%}" for j in order]}),
                 hide_index=True, width="stretch", key="toy_real_table")
    found = TN.height_notice(query=hw.query, heights=hw.heights, weights=hw.weights, attention=hw.attention,
                             estimate=hw.estimate, names=names)
    found.append(TN.real_step_notice(query=md_tok(query), best=md_tok(order[0]), weight=weights[order[0]],
                                     n_keys=len(weights)))
    return found


render()
