"""Lesson 8: the residual stream as a running sum, its size, normalization, the logit lens
and direct logit attribution."""

import streamlit as st
import torch

from classroom import presenter
from course import state, theme
from course.cache import residual as cache
from course.figures import residual as F
from course.i18n import current_lang, join_list, join_sentences
from course.lesson import Lesson
from course.notices import residual as N
from course.text import html_escape, md_escape, num
from course.tokens import axis_labels, cell_label, label, md_label, plot_label, readable_texts
from lesson_model.analysis import attribution as A
from lesson_model.analysis import lens as LL
from lesson_model.analysis import norms as NO
from lesson_model.decoder import Block, RMSNorm

CAP = cache.CAP     # tokens of the prompt this page runs
LENS_COLUMNS = cache.LENS_COLUMNS   # most positions shown in the logit-lens grid (ending at the chosen one)
CANDIDATES = cache.CANDIDATES       # next-token candidates offered for attribution
# The lens grid's cells share about this many pixels at a laptop's 1024 px with the sidebar open
# (more in presenter mode, whose sidebar is closed); a cell's text takes 0.55 of its font size
# per column (course.text.text_width: a Chinese character two), so a long token is cut to fit.
LENS_GRID_PX, LENS_GRID_PX_PRESENT, LENS_CELL_FONT = 400, 700, 13


def lens_cell_columns(n_columns: int) -> int:
    grid = LENS_GRID_PX_PRESENT if presenter.active() else LENS_GRID_PX
    return max(2, int(grid / n_columns / (0.55 * theme.font_px(LENS_CELL_FONT))))


def render() -> None:
    """The lesson, top to bottom: its variables live only while it runs (a widget's callback
    keeps just the names it uses, never this run's tensors)."""
    page = Lesson("residual")
    page.header()
    lm = page.model()
    page.predict(lm)                  # Predict, then see: before the figures that answer it
    cfg = lm.cfg
    L_LAST = cfg.n_layers - 1
    font = theme.font_family().split(",")[0]

    tokens = page.tokens(lm, cap=CAP)
    texts = readable_texts(tokens)               # byte pieces read as their character (我¹ 我²)
    ids = tuple(tok.id for tok in tokens)
    n_pos = len(tokens)
    labels = axis_labels(tokens)
    SINK_LAYERS = cache.sink_layers(cfg)      # second half: where the sink is measured

    def part_label(kind: str, layer: int) -> str:
        return cache.part_label(page.t, kind, layer)

    def depth_label(depth: int) -> str:
        """Row d of residual_norms / the lens with the embedding: 0 = embedding, d = after block d-1."""
        return cache.depth_label(page.t, depth)

    # --- 1. the running sum -------------------------------------------------------------------
    page.part("sum", page.t("sum_title"))
    page.prose("sum")
    with st.container(border=True, key="residual_controls"):
        c1, c2, c3 = st.columns([3, 2, 2], gap="medium", vertical_alignment="bottom")
        with c1:
            pos = state.url_int("pos", page.t("pos"), 0, n_pos - 1, n_pos - 1, widget="select",
                                format_func=lambda i: f"{i}: {label(texts[i])}", help=page.t("pos_help"))
    run = cache.lesson_run(lm, ids)
    dec = A.residual_decomposition(lm, run, pos)
    along = dec.along_final
    final_norm = float(dec.final.norm())
    part_names = [part_label(kind, layer) for kind, layer in dec.labels]
    c2.metric(page.t("sum.final_metric"), f"{final_norm:,.0f}", help=page.t("sum.final_help", norm=f"{final_norm:,.2f}"))
    c3.metric(page.t("sum.check_metric"), f"{dec.max_error:.0e}", help=page.t("sum.check_help", n=len(part_names)))
    title = html_escape(page.t("sum.title", token=label(texts[pos]), n=len(part_names)))
    theme.plot(F.waterfall_figure(page.t, part_names, along.tolist(), dec.norms.tolist(), final_norm, title),
               key="sum_chart", height=theme.projected(480, 340), title_width=theme.projected(theme.TITLE_WIDTH, 64))
    biggest = int(along.argmax())                    # the part adding most along the final direction (> 0)

    # --- 2. how big the stream gets -------------------------------------------------------------
    page.part("norms", page.t("norms_title"))
    page.prose("norms")
    norms = NO.residual_norms(lm, run)                                   # [n_layers + 1, pos]
    depths = [depth_label(d) for d in range(cfg.n_layers + 1)]
    short_depths = [page.t("depth.short_embed")] + [str(d) for d in range(cfg.n_layers)]   # row d: after block d-1
    theme.plot(F.norm_heatmap(page.t, depths, labels, norms.tolist(), short_depths), key="norms_chart", height=760)
    massive = NO.massive_activations(lm, run, ratio=10.0)
    if massive:
        worst = max(massive, key=lambda m: m.norm)
        at_pos = [m for m in massive if m.position == worst.position]
        writers = A.residual_decomposition(lm, run, worst.position).parts[:, worst.dim]   # each part's write into that dim
        toward = writers * (1.0 if worst.value >= 0 else -1.0)          # > 0: makes the outlier bigger
        up_i, down_i = int(toward.argmax()), int(toward.argmin())
        box = [page.t("norms.massive", token=md_label(texts[worst.position]), pos=worst.position, norm=f"{worst.norm:,.0f}",
                      ratio=f"{worst.ratio:,.0f}", depth=depth_label(worst.depth), dim=worst.dim,
                      share=f"{worst.dim_share:.0%}", first=depth_label(min(m.depth for m in at_pos)),
                      last=depth_label(max(m.depth for m in at_pos)))]
        box.append(page.t("norms.massive_writer", writer=part_label(*dec.labels[up_i]), wrote=f"{float(writers[up_i]):+,.0f}"))
        if float(toward[down_i]) < 0 and round(abs(float(writers[down_i]))) > 0:
            box.append(page.t("norms.massive_eraser", eraser=part_label(*dec.labels[down_i]),
                              erased=f"{abs(float(writers[down_i])):,.0f}"))
        others = sorted({m.position for m in massive} - {worst.position})
        if others:
            box.append(page.t("norms.massive_others", tokens=join_list(md_label(texts[p]) for p in others[:6])))
    else:
        box = [page.t("norms.no_massive" if n_pos >= 3 else "norms.no_massive_short")]
    sink_share = None
    if n_pos >= 3:
        sink_share = float(NO.first_token_attention(lm, run, layers=SINK_LAYERS).mean())
        box.append(page.t("norms.sink" if sink_share >= 0.5 else "norms.sink_weak", a=SINK_LAYERS[0], b=SINK_LAYERS[-1],
                          share=f"{sink_share:.0%}", token=md_label(texts[0])))
    massive_line = join_sentences(box)
    st.info(massive_line, icon=":material/bolt:")

    # --- 3. logit lens --------------------------------------------------------------------------
    page.part("lens", page.t("lens_title"))
    page.prose("lens")
    lens_note, lens_control = st.columns([3, 1], gap="medium", vertical_alignment="bottom")
    with lens_control:
        columns = state.url_int("lens_cols", page.t("lens.columns"), 1, LENS_COLUMNS, LENS_COLUMNS, widget="number",
                                help=page.t("lens.columns_help", k=LENS_COLUMNS))
    window = cache.lens_window(pos, columns)
    with lens_note:
        st.caption(page.t("lens.window_one" if n_pos == 1 else "lens.window_all" if len(window) == n_pos else "lens.window",
                          a=window[0], b=window[-1],
                          n=n_pos, k=len(window)))

    top_ids, top_probs, target_ids, target_ranks, target_probs, lens_layers = cache.lens_table(lm, ids, window)
    lens_depths = [depth_label(d + 1) for d in lens_layers]
    fit = lens_cell_columns(len(window))
    cell_labels = [[cell_label(lm.token_text(i), fit) for i in row] for row in top_ids]
    hover_labels = [[plot_label(lm.token_text(i)) for i in row] for row in top_ids]      # the whole token
    theme.plot(F.lens_figure(page.t, [labels[p] for p in window], lens_depths, cell_labels, top_probs,
                             [short_depths[d + 1] for d in lens_layers], hover_labels=hover_labels, font=LENS_CELL_FONT),
               key="lens_chart", height=220 + 24 * len(lens_depths))
    col = len(window) - 1                                               # the chosen position's column
    predicted = target_ids[col]
    ranks_here = [row[col] for row in target_ranks]
    probs_here = [row[col] for row in target_probs]
    theme.plot(F.rank_figure(page.t, short_depths, ranks_here, probs_here, plot_label(lm.token_text(predicted))),
               key="rank_chart", height=420)
    echo = sum(1 for j, p in enumerate(window) if top_ids[0][j] == ids[p])   # embedding row reads back its own token

    # --- 4. direct logit attribution -------------------------------------------------------------
    page.part("dla", page.t("dla_title"))
    page.prose("dla")
    cand_ids, cand_probs = cache.candidates(lm, run, pos)
    figure_area, controls = page.columns()
    with controls:
        st.caption(page.t("dla.where", token=md_label(texts[pos]), pos=pos))
        target = state.url_int("target", page.t("dla.target"), 0, CANDIDATES - 1, 0, widget="select",
                               format_func=lambda r: page.t("dla.option", rank=r + 1, token=label(lm.token_text(cand_ids[r])),
                                                            p=f"{cand_probs[r]:.1%}"), help=page.t("dla.target_help"))
        versus = state.url_int("versus", page.t("dla.versus"), -1, CANDIDATES - 1, -1, widget="select",
                               format_func=lambda r: page.t("dla.none") if r < 0 else page.t(
                                   "dla.option", rank=r + 1, token=label(lm.token_text(cand_ids[r])), p=f"{cand_probs[r]:.1%}"),
                               help=page.t("dla.versus_help"))
    token_id = cand_ids[target]
    other_id = cand_ids[versus] if versus >= 0 and versus != target else None
    dla = A.direct_logit_attribution(lm, run, token_id, pos, other_token=other_id)
    what = (page.t("dla.what_diff", token=label(lm.token_text(token_id)), other=label(lm.token_text(other_id)))
            if other_id is not None else page.t("dla.what_logit", token=label(lm.token_text(token_id))))
    with figure_area:
        title = html_escape(page.t("dla.title", what=what, total=f"{dla.total:.2f}", logit=f"{dla.logit:.2f}"))
        theme.plot(F.dla_figure(page.t, dla.embed, dla.attn.tolist(), dla.mlp.tolist(), title), key="dla_chart", height=440)
    st.info(page.t("dla.frozen", s=f"{dla.scale:.2f}", embed=num(dla.embed, "+.2f"), attn=num(dla.attn.sum(), "+.2f"),
                   mlp=num(dla.mlp.sum(), "+.2f"), total=f"{dla.total:.3f}", logit=f"{dla.logit:.3f}"),
            icon=":material/lock:")
    strongest_attn = int(dla.attn.abs().argmax())
    figure_area, controls = page.columns()
    with controls:
        head_layer = state.url_int("head_layer", page.t("heads.layer"), 0, L_LAST, strongest_attn,
                                   help=page.t("heads.layer_help"))
    heads = A.head_logit_attribution(lm, run, token_id, head_layer, pos, other_token=other_id)
    with figure_area:
        theme.plot(F.head_figure(page.t, heads.tolist(), head_layer, html_escape(what)), key="heads_chart", height=380)
    with controls:
        st.metric(page.t("heads.sum"), f"{float(heads.sum()):+.3f}",
                  help=page.t("heads.sum_help", layer=head_layer, attn=f"{float(dla.attn[head_layer]):+.3f}"))

    # --- 5. normalization ------------------------------------------------------------------------
    page.part("norm", page.t("norm_title"))
    page.prose("normalization")
    figure_area, controls = page.columns()
    with controls:
        layer = state.url_int("layer", page.t("layer"), 0, L_LAST, cfg.n_layers // 3, help=page.t("layer_help"))
    vector = run.cache["hook_embed"][0, pos] if layer == 0 else run.cache[f"blocks.{layer - 1}.hook_resid_post"][0, pos]
    cmp = NO.compare_norms(vector, lm.decoder.blocks[layer].ln1.eps)
    with figure_area:
        title = html_escape(page.t("ln.title", layer=layer, token=label(texts[pos])))
        theme.plot(F.norm_compare_figure(page.t, cmp.x.tolist(), cmp.layer_normed.tolist(), cmp.rms_normed.tolist(), title),
                   key="norm_chart", height=560)
    with controls:
        st.metric(page.t("ln.mean"), f"{cmp.mean:+.3f}")
        st.metric(page.t("ln.rms_metric"), f"{cmp.rms:.3f}")
        st.metric(page.t("ln.gap"), f"{cmp.max_gap:.3f}", help=page.t("ln.gap_help"))
    st.markdown(page.t("ln.after_numbers", ln_mean=f"{cmp.ln_mean:+.3f}", ln_std=f"{cmp.ln_std:.3f}",
                       rms_mean=f"{cmp.rms_mean:+.3f}", rms_rms=f"{cmp.rms_rms:.3f}"))

    st.markdown(f"#### {page.t('prepost_title')}")
    page.prose("prepost")
    for title_key, diagram in (("diag.pre_title", F.prenorm_diagram), ("diag.post_title", F.postnorm_diagram),
                               ("diag.sandwich_title", F.sandwich_diagram)):
        st.markdown(f"**{page.t(title_key)}**")
        theme.diagram(diagram(page.t, font))

    # what each sub-layer computes and what it adds: the post-norms at work (Gemma), or nothing between (SmolLM2)
    writes = NO.sublayer_writes(lm, run, pos)
    theme.plot(F.post_norm_figure(page.t, writes.computed.tolist(), writes.written.tolist(), writes.post_norms,
                                  html_escape(page.t("post.title", token=label(texts[pos])))),
               key="post_chart", height=440)
    st.caption(page.t("post.caption" if writes.post_norms else "post.caption_none"))

    st.markdown(f"#### {page.t('grad_title')}")
    page.prose("gradient")
    grad_norms, branch = cache.gradient_table(lm.name, ids, token_id, pos, _lm=lm)
    grad_depths = [str(i) for i in range(cfg.n_layers)] + [page.t("grad.out")]
    theme.diagram(F.gradient_diagram(page.t, font, cfg.n_layers))
    theme.plot(F.gradient_figure(page.t, grad_depths, grad_norms), key="grad_chart", height=400)
    skip_wins = sum(1 for a, m in branch if a < 1 and m < 1)
    grad_note = [page.t("grad.caption", token=md_label(lm.token_text(token_id)), pos=pos)]
    later_median = float(norms[1:].median())                  # the stream's typical length after the blocks
    if grad_norms[0] >= max(grad_norms) and float(norms[0].mean()) < later_median:
        grad_note.append(page.t("grad.caption_first", embed=f"{float(norms[0].mean()):.1f}", later=f"{later_median:,.0f}"))
    st.caption(join_sentences(grad_note))

    # --- what to notice ---------------------------------------------------------------------------
    lang = current_lang()
    found = [N.sum_notice(token=md_label(texts[pos]), n_parts=len(part_names), max_error=dec.max_error,
                          embed_norm=float(norms[0, pos]), final_norm=final_norm, part=part_label(*dec.labels[biggest]),
                          along=float(along[biggest]))]
    if massive:
        found.append(N.massive_notice(token=md_label(texts[max(massive, key=lambda m: m.norm).position]),
                                      ratio=max(m.ratio for m in massive)))
    lens_line = N.lens_notice(ranks=ranks_here, lens_layers=lens_layers, depths=lens_depths, n_layers=cfg.n_layers,
                              token=md_label(texts[pos]), pred=md_label(lm.token_text(predicted)), p=probs_here[-1])
    if lens_line is not None:
        found.append(lens_line)
    found.append(N.echo_notice(echo=echo, n=len(window)))
    layer_parts = torch.cat([dla.attn, dla.mlp])                          # [2 * n_layers]: attn 0.., then mlp 0..
    found.append(N.dla_notice(what=md_escape(what), layer_parts=layer_parts.tolist(),
                              order=torch.argsort(layer_parts.abs(), descending=True)[:3].tolist(),
                              n_layers=cfg.n_layers, total=dla.total, mlp=float(dla.mlp.sum()),
                              attn=float(dla.attn.sum()), part_label=part_label, lang=lang))
    found.append(N.head_notice(layer=head_layer, heads=heads.tolist(), attn=float(dla.attn[head_layer])))
    found.append(N.post_notice(post_norms=writes.post_norms, computed=writes.computed.tolist(),
                               written=writes.written.tolist(), token=md_label(texts[pos]), part_label=part_label))
    found.append(N.grad_notice(grad_norms=grad_norms, n_layers=cfg.n_layers,
                               skip_wins=skip_wins))
    page.notices(found)

    # --- try this: each example's claims, computed on its own prompt --------------------------
    page.try_this([(page.t(f"try.{n}.prompt"),
                    join_sentences([page.t(f"try.{n}.why"), cache.try_detail(lm.name, lang, n, _lm=lm)]))
                   for n in cache.TRY_EXAMPLES])

    # --- the math ---------------------------------------------------------------------------------
    page.math(page.t("math_example", token=md_label(texts[pos]), what=md_escape(what), s=f"{dla.scale:.3f}",
                     embed=num(dla.embed, "+.3f"), attn=num(dla.attn.sum(), "+.3f"), mlp=num(dla.mlp.sum(), "+.3f"),
                     total=f"{dla.total:.3f}", logit=f"{dla.logit:.3f}", mean=f"{cmp.mean:.3f}", rms=f"{cmp.rms:.3f}",
                     std=f"{cmp.std:.3f}", layer=layer, d=cfg.d_model))
    page.code(Block.forward, RMSNorm.forward, LL.decode_residual, A.direct_logit_attribution, A.head_writes,
              NO.sublayer_writes)


render()
