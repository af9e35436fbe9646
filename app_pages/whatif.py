"""The What-if lab: break one thing (or several) in the real model on the learner's prompt and
compare with the intact model: the next-token candidates, the loss at every position, one
attention pattern. Every switch is a hook function of lesson_model.whatif, passed to one call."""


import streamlit as st

from course import state, theme
from course.cache import whatif as cache
from course.figures import whatif as F
from course.i18n import mark_width
from course.lesson import Lesson
from course.notices import whatif as N
from course.text import code_span
from course.tokens import axis_labels, label, md_label, plot_label
from lesson_model import whatif as W
from lesson_model.analysis import whatif as A

CAP = cache.CAP      # tokens of the prompt this page runs (two runs, every position's loss)
TOP_K = 8            # next-token candidates drawn
SEED_MAX = 999
DEFAULT_ON = cache.DEFAULT_ON


def render() -> None:
    """The lab, top to bottom: its variables live only while it runs."""
    page = Lesson("whatif")
    page.header()
    lm = page.model()
    page.predict(lm)                  # Predict, then see: before the figures that answer it
    cfg = lm.cfg
    tokens = page.tokens(lm, cap=CAP)
    n = len(tokens)
    mid = cfg.n_layers // 2

    # Which switches the loaded model can have (decided from its config, not its name).
    bools = cache.bool_switches(cfg)


    def try_examples() -> list[tuple]:
        """Try-this prompts, each with the switch its "why" is about (try.<n>.switch, a URL key) and,
        for skip/zero, the block (try.<n>.layer: "first" or "middle"); every other switch is turned off."""
        out = []
        for number in page.try_numbers():
            values = {key: False for key in [*bools, "skip", "zhead", "zmlp"]}
            switch = page.t(f"try.{number}.switch")
            values[switch] = True
            where = page.t(f"try.{number}.layer") if switch in ("skip", "zhead", "zmlp") else None
            layer = 0 if where == "first" else mid
            values |= {"skip": {"skip_layer": layer}, "zhead": {"zh_layer": layer, "zh_head": 0},
                       "zmlp": {"zm_layer": layer}}.get(switch, {})
            out.append((page.t(f"try.{number}.prompt"), page.t(f"try.{number}.why"), values))
        return out


    # --- controls: the switches ------------------------------------------------------------------
    figure_area, controls = page.columns()
    with controls:
        st.markdown(page.t("switches_title"))
        on = {}
        for key, field in bools.items():
            on[field] = state.url_bool(key, page.t(f"switch.{field}"), key == DEFAULT_ON, help=page.t(f"help.{field}"))
        seed = 0
        if on["shuffle"]:
            seed = state.url_int("shuffle_seed", page.t("seed_label"), 0, SEED_MAX, 0, widget="number",
                                 help=page.t("seed_help"))
        skip = zero_head = zero_mlp = None
        if state.url_bool("skip", page.t("switch.skip_block"), False, help=page.t("help.skip_block")):
            skip = state.url_int("skip_layer", page.t("block_label"), 0, cfg.n_layers - 1, mid)
        if state.url_bool("zhead", page.t("switch.zero_head"), False, help=page.t("help.zero_head")):
            zero_head = (state.url_int("zh_layer", page.t("block_label"), 0, cfg.n_layers - 1, mid),
                         state.url_int("zh_head", page.t("head_label"), 0, cfg.n_heads - 1, 0))
        if state.url_bool("zmlp", page.t("switch.zero_mlp"), False, help=page.t("help.zero_mlp")):
            zero_mlp = state.url_int("zm_layer", page.t("block_label"), 0, cfg.n_layers - 1, mid)

    sw = W.Switches(skip_block=skip, zero_head=zero_head, zero_mlp=zero_mlp, seed=seed, **on)
    ids = [tok.id for tok in tokens]
    with controls, st.spinner(page.t("computing"), show_time=True):
        before, after = cache.lesson_runs(lm, tokens, sw)
        # Both runs' losses and last logits from one pass over the unembedding.
        runs = [(before.cache[A.FINAL], ids)] + ([(after.cache[A.FINAL], A.read_ids(ids, sw))] if sw.any() else [])
        read = A.read_runs(lm, runs)
        read_before, read_after = read[0], read[-1]
    patterns_before = A.stacked_patterns(before.cache, cfg.n_layers)
    patterns_after = A.stacked_patterns(after.cache, cfg.n_layers)
    order = W.shuffle_order(n, seed) if sw.shuffle else list(range(n))
    tokens_after = [tokens[j] for j in order]

    # --- the attention pattern shown: by default the head whose pattern changed the most ----------
    loss_area = st.container()           # filled below (the loss chart needs no head, the comparison does)
    page.part("pattern", page.t("pattern_subheader"))
    layer_column, head_column, _ = st.columns([1, 1, 2], gap="medium")
    best = A.most_changed_head(patterns_before, patterns_after)
    with layer_column:
        layer = state.url_int("layer", page.t("layer_label"), 0, cfg.n_layers - 1, best[0], help=page.t("layer_help"))
    with head_column:
        head = state.url_int("head", page.t("head_label"), 0, cfg.n_heads - 1, best[1], help=page.t("head_help"))
    pattern_area = st.container()
    cmp = A.compare(lm, sw, ids, read_before, read_after, patterns_before, patterns_after, layer, head,
                    A.streams(after.cache, cfg.n_layers), k=TOP_K)


    def tok_md(token_id: int) -> str:
        return code_span(label(lm.token_text(token_id)))


    def head_name(L: int, H: int) -> str:
        return page.t("head_name", layer=L, head=H)


    # --- 1. the next token, 2. the loss at every position ----------------------------------------
    with figure_area:
        if not sw.any():
            st.info(page.t("none_on"), icon=":material/toggle_off:")
        bars_before = [(mark_width(plot_label(lm.token_text(i)), lm.token_text(i)), p) for i, p in cmp.top_before]
        bars_after = [(mark_width(plot_label(lm.token_text(i)), lm.token_text(i)), p) for i, p in cmp.top_after]
        theme.plot(F.top_figure(bars_before, bars_after, page.t), key="top_chart", height=380)
        if not cmp.finite:
            st.error(page.t("overflow_box"), icon=":material/warning:")
    with loss_area:
        if n >= 2:
            theme.plot(F.loss_figure(axis_labels(tokens)[1:], cmp.loss_before, cmp.loss_after,
                                     [plot_label(t) for t in tokens_after[1:]], page.t), key="loss_chart", height=400)
            if sw.shuffle:
                st.caption(page.t("shuffle_caption"))
            if sw.no_mask:          # the training setup the mask protects: shift-right
                st.caption(page.t("shift_right_caption", a=md_label(tokens[0]), b=md_label(tokens[1])))
        else:
            st.info(page.t("one_token"), icon=":material/info:")
        if cmp.stream_sizes:
            theme.plot(F.stream_figure(cmp.stream_sizes, page.t), key="stream_chart", height=340)

    # --- 3. one attention pattern ------------------------------------------------------------------
    with pattern_area:
        theme.plot(F.patterns_figure(cmp.pattern_before.tolist(), cmp.pattern_after.tolist(), axis_labels(tokens),
                                     axis_labels(tokens_after), head_name(layer, head), page.t),
                   key="pattern_chart", height=max(440, 180 + 12 * n))
        if (layer, head) == best and sw.any():
            st.caption(page.t("default_head_note", head=head_name(*best)))

    # --- What to notice ------------------------------------------------------------------------------
    page.notices(N.notices(on={name: getattr(sw, name) for name in sw.on()}, cmp=cmp, n=n, n_layers=cfg.n_layers,
                           n_heads=cfg.n_heads, d_head=cfg.d_head, cap=CAP, token=tok_md,
                           label=lambda i: md_label(tokens[i]), head_name=head_name))
    page.try_this(try_examples())
    page.math(page.t("math_example", s=f"{cfg.d_head ** 0.5:g}", d=cfg.d_head))
    shown = {"no_rope": W.no_rope_hooks, "no_scale": W.no_scale_hook, "no_mask": W.unmasked_scores_hooks,
             "no_window": W.unmasked_scores_hooks, "no_norms": W.divide_by_one_hook, "no_qk_norm": W.divide_by_one_hook,
             "skip_block": W.skip_block_hooks, "zero_head": W.zero_head_hook, "zero_mlp": W.zero_mlp_hook,
             "shuffle": W.shuffle_hook}
    functions = list(dict.fromkeys(shown[f] for f in sw.on())) or list(dict.fromkeys(shown.values()))
    page.code(*functions, W.hooks_for)


render()
