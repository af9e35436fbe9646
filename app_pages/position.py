"""Lesson 3: position. Attention compares contents, not places, so the model needs position
information: sinusoidal and learned absolute encodings for comparison, then RoPE as this
model does it, on its real queries and keys. Every rotation uses the chosen layer's own
rotary module (lm.decoder.rope_for(layer)): Gemma 3 turns its sliding-window layers with
base 10,000 and its global layers with 1,000,000, both shown side by side."""

import math

import streamlit as st
import torch

from course import i18n, state, theme
from course.cache import position as cache
from course.figures.position import (
    before_after_figure,
    block_diagram,
    clock_figure,
    diagram_size,
    distance_figure,
    ladder_figure,
    period_text,
    relative_figure,
    same_vector_figure,
    sinusoid_heatmap,
    waves_figure,
    worked_example_figure,
)
from course.lesson import Lesson
from course.notices import position as N
from course.predict import builders as PB
from course.tokens import md_label, position_label, readable_texts
from lesson_model.analysis import rope as R
from lesson_model.decoder import RotaryEmbedding

CAP = cache.CAP           # prompt tokens this page runs
SIN_D = 128               # width of the sinusoidal example (a small d_model, readable as a picture)
SIN_POSITIONS = 64        # positions drawn at least
CLOCK_FRACTIONS = (0, 1 / 8, 1 / 4, 1 / 2, 3 / 4, 1)   # the clock's hands: these fractions of the pairs
REL_DISTANCES = PB.POSITION_DISTANCES     # (0, 1, 2, 4, 8, 16): the distances the question offers
REL_POSITIONS = (0, 10, 100, 1000, 4000, 8000)
CURVE_MAX = PB.POSITION_CURVE  # distances in the score-vs-distance curve (128), the question's too
DEFAULT_HEAD = 0          # the default head (the default layer: cache.default_layer)
DEGREES = 30.0            # the worked example's turn
WIDE = theme.WIDE_TITLE   # title width of a chart spanning the page


def layer_list(layers) -> str:
    """Layers as runs, "0–4, 6–10, 12–16" (the language's separator)."""
    runs, start = [], None
    for i, layer in enumerate(layers):
        start = layer if start is None else start
        if i + 1 == len(layers) or layers[i + 1] != layer + 1:
            runs.append(str(start) if start == layer else f"{start}–{layer}")
            start = None
    return i18n.join_list(runs)


def render() -> None:
    """The lesson, top to bottom: its variables live only while it runs (a widget's callback
    keeps just the names it uses, never this run's tensors)."""
    page = Lesson("position")
    page.header()
    lm = page.model()
    page.predict(lm)                  # Predict, then see: before the figures that answer it
    cfg = lm.cfg
    tokens = page.tokens(lm, cap=CAP)
    n = len(tokens)
    labels = readable_texts(tokens)           # plain text; byte pieces read as their character (我¹ 我²)

    def md_tok(i: int) -> str:
        """Token i for Markdown, read as characters (the notices give its position beside it)."""
        return md_label(labels[i])

    bases = R.rope_bases(lm)                                  # one per RoPE base (Gemma: sliding, then global)
    two_bases = len(bases) > 1
    n_pairs = cfg.d_head // 2
    half = n_pairs

    def base_name(b: R.RopeBase) -> str:
        return page.t(f"kind.{b.kind}", base=f"{b.base:,.0f}")

    # --- 1. absolute: sinusoidal waves and clock hands ---------------------------------------------------
    page.part("sin", page.t("sin.title"))
    page.prose("sinusoidal")
    n_sin = max(SIN_POSITIONS, n)
    pe = R.sinusoidal_encoding(n_sin, SIN_D)
    left, right = st.columns(2, gap="medium")
    with left:
        theme.plot(sinusoid_heatmap(pe, page.t("sin.heat_title"), page.t("sin.x_axis", last=SIN_D - 1), page.t("sin.y"),
                                    page.t("sin.colorbar"), hover_tokens=labels, x_word=page.t("sin.x")),
                   key="sin_heat", height=460)
    with right:
        wave_dims = [0, 8, 32, 64]
        wave_names = [page.t("sin.wave", dim=d, period=f"{2 * math.pi * 10000 ** (d / SIN_D):,.0f}") for d in wave_dims]
        theme.plot(waves_figure(pe, wave_dims, wave_names, page.t("sin.waves_title"), page.t("sin.y"), page.t("sin.value")),
                   key="sin_waves", height=theme.presenter_height(460))

    page.part("clock", page.t("clock.title"))
    page.prose("clock")
    # The position and three hands' arithmetic in a row above, so the dial gets the page's full width.
    row = st.columns(4, gap="medium")
    clock_pos = state.url_int("clock", page.t("clock.pos"), 0, cfg.max_position - 1, n - 1, widget="number",
                              help=page.t("clock.pos_help", n=f"{cfg.max_position:,}"), container=row[0])
    clock_base = bases[0]
    if two_bases:       # which layers' clock: the sliding-window layers' base or the global layers'
        kind = state.url_choice("base", page.t("clock.base"), [b.kind for b in bases], bases[0].kind,
                                widget="segmented", format_func=lambda k: page.t(f"clock.kind.{k}"),
                                help=page.t("clock.base_help"), container=row[0])
        clock_base = next(b for b in bases if b.kind == kind)
    thetas, periods = clock_base.thetas, clock_base.periods
    clock_pairs = sorted({min(n_pairs - 1, round(f * n_pairs)) for f in CLOCK_FRACTIONS})
    angles = [clock_pos * float(thetas[i]) for i in clock_pairs]
    hand_names = [page.t("clock.hand", pair=i, period=period_text(float(periods[i]))) for i in clock_pairs]
    hand_keys = [page.t("clock.hand_key", pair=i, period=period_text(float(periods[i]))) for i in clock_pairs]
    for cell, i, a in zip(row[1:], clock_pairs[:3], angles[:3]):
        cell.markdown(page.t("clock.line", pair=i, pos=clock_pos, theta=f"{float(thetas[i]):.4g}",
                             turns=f"{a / (2 * math.pi):,.2f}", deg=f"{math.degrees(a) % 360:.0f}"))
    theme.plot(clock_figure(angles, hand_keys, page.t("clock.chart_title", pos=clock_pos, base=f"{clock_base.base:,.0f}"),
                            legend_title=page.t("clock.legend_title"), hover_names=hand_names),
               key="clock_chart", height=480, title_width=WIDE)

    with st.expander(page.t("learned.title"), icon=":material/table_rows:"):
        page.prose("learned")

    # --- 2. RoPE: the frequency ladder ---------------------------------------------------------------------
    page.part("ladder", page.t("ladder.title"))
    page.prose("rope")
    page.prose("bases")

    def base_fields(b: R.RopeBase) -> dict:
        never = [i for i in range(n_pairs) if float(b.periods[i]) > b.reach]
        return dict(base=f"{b.base:,.0f}", fast=f"{float(b.periods[0]):.2f}", slow=f"{float(b.periods[-1]):,.0f}",
                    never=len(never), first=never[0] if never else n_pairs, n=f"{b.reach:,}", pairs=n_pairs,
                    layers=layer_list(b.layers), count=len(b.layers), window=f"{b.window or 0:,}")

    series = [(base_name(b), b.thetas, b.periods, b.reach,
               page.t(f"ladder.reach.{b.kind}", n=f"{b.reach:,}")) for b in bases]
    theme.plot(ladder_figure(series, page.t("ladder.chart_title_two" if two_bases else "ladder.chart_title",
                                            base=f"{bases[0].base:,.0f}", d=cfg.d_head, pairs=n_pairs),
                             page.t("ladder.x"), page.t("ladder.y"), page.t("ladder.hover")),
               key="ladder", height=theme.presenter_height(440 if two_bases else 400), title_width=WIDE)
    for b in bases:
        st.caption(page.t(f"ladder.caption_{b.kind}" if two_bases else "ladder.caption", **base_fields(b)))

    # --- 3. a real query turning -----------------------------------------------------------------------------
    page.part("turn", page.t("turn.title"))
    ex = R.rotate_pair([3.0, 0.0], math.radians(DEGREES)).tolist()        # the worked example: [2.598, 1.5]
    left, right = st.columns([2, 3], gap="medium", vertical_alignment="center")
    with left:
        theme.plot(worked_example_figure([3.0, 0.0], ex, DEGREES, ["[3, 0]", f"[{ex[0]:.3f}, {ex[1]:.3f}]"],
                                         page.t("turn.example_title", deg=f"{DEGREES:.0f}")), key="worked_example",
                   height=300)
    with right:
        page.prose("turn")
        st.markdown(page.t("turn.example_line", x=f"{ex[0]:.3f}", y=f"{ex[1]:.3f}"))
    controls = st.columns(4)
    layer = state.url_int("layer", page.t("layer"), 0, cfg.n_layers - 1, cache.default_layer(cfg),
                          container=controls[0])
    head = state.url_int("head", page.t("head"), 0, cfg.n_heads - 1, DEFAULT_HEAD, container=controls[1])
    pair = state.url_int("pair", page.t("turn.pair"), 0, n_pairs - 1, 0, help=page.t("turn.pair_help", half=half),
                         container=controls[2])
    qpos = state.url_int("qpos", page.t("turn.qpos"), 0, n - 1, n - 1, widget="select", container=controls[3],
                         format_func=lambda i: position_label(labels, i), help=page.t("turn.qpos_help"))
    layer_base = R.base_of(lm, layer)                                               # this layer's RoPE (rope_for)
    st.caption(page.t("turn.layer_note", layer=layer, kind=base_name(layer_base), theta=f"{float(layer_base.thetas[pair]):.4g}",
                      pair=pair))
    run = cache.lesson_run(lm, tokens, layer)
    track = R.pair_track(lm, run, layer, head, pair)
    i_dim, j_dim = track.dims
    q_pre = R.pre_rope(lm, run, layer, "q")[qpos, head].float()                      # [d_head], what RoPE turns
    placed = R.rotate_head(lm, q_pre[None].expand(n, -1), range(n), layer)           # the same q at positions 0..n-1
    same_pts = torch.stack([placed[:, i_dim], placed[:, j_dim]], dim=-1)             # [n, 2]
    axis = [page.t("turn.axis_x", i=i_dim), page.t("turn.axis_y", j=j_dim), page.t("turn.position")]
    left, right = st.columns(2, gap="medium")
    with left:
        theme.plot(same_vector_figure(same_pts, labels, page.t("turn.same_title"), axis,
                                      page.t("turn.hover_same"), highlight=qpos),
                   key="turn_same", height=theme.presenter_height(500))
    with right:
        theme.plot(before_after_figure(track.before.float(), track.after.float(), labels, page.t("turn.each_title"),
                                       axis, [page.t("turn.before"), page.t("turn.after")], page.t("turn.hover_each")),
                   key="turn_each", height=theme.presenter_height(500))
    st.caption(page.t("turn.same_caption", token=md_tok(qpos), pos=qpos))
    turn_error = track.max_turn_error
    norm_error = float((track.after.norm(dim=1) - track.before.norm(dim=1)).abs().max())

    # --- 4. the relative-position property --------------------------------------------------------------------
    page.part("rel", page.t("rel.title"))
    page.prose("relative")
    control, note = st.columns([1, 2], gap="medium", vertical_alignment="bottom")
    with control:
        kpos = state.url_int("kpos", page.t("rel.kpos"), 0, qpos, max(0, qpos - 1), widget="select",
                             format_func=lambda i: position_label(labels, i), help=page.t("rel.kpos_help"))
    with note:
        st.caption(page.t("rel.controls_note", layer=layer, head=head, kv=head // cfg.group_size))
    q, k = R.query_and_key(lm, run, layer, head, qpos, kpos)
    rel = R.relative_scores(lm, q, k, REL_DISTANCES, REL_POSITIONS, layer)
    curve = R.score_by_distance(lm, q, k, CURVE_MAX, layer)
    rot_q = run.cache[f"blocks.{layer}.attn.hook_rot_q"][0, qpos, head].float()
    rot_k = run.cache[f"blocks.{layer}.attn.hook_rot_k"][0, kpos, head // cfg.group_size].float()
    model_score = float(rot_q @ rot_k) / math.sqrt(cfg.d_head)
    distance = qpos - kpos
    # Two charts side by side (one under the other on a phone), not two subplots of one figure.
    left, right = st.columns(2, gap="medium")
    with left:
        theme.plot(relative_figure(REL_DISTANCES, REL_POSITIONS, rel.scores, page.t("rel.left_title"),
                                   page.t("rel.left_x"), page.t("rel.y"), page.t("rel.line"), page.t("rel.legend_title")),
                   key="relative", height=480)
    with right:
        theme.plot(distance_figure(REL_DISTANCES, list(range(CURVE_MAX + 1)), curve,
                                   (distance, model_score) if distance <= CURVE_MAX else None,
                                   page.t("rel.right_title"), page.t("rel.right_x"), page.t("rel.y"),
                                   page.t("rel.line"), page.t("rel.actual")),
                   key="relative_curve", height=480)

    # --- 5. where RoPE acts --------------------------------------------------------------------------------------
    page.part("where", page.t("where.title"))
    page.prose("where")
    diagram_labels = {key: page.t(f"where.node.{key}") for key in
                      ("resid", "norm", "wq", "wk", "wv", "qnorm", "knorm", "rope_q", "rope_k", "scores", "mix", "wo",
                       "add")}
    ropes = list({id(lm.decoder.rope_for(i)): lm.decoder.rope_for(i) for i in range(cfg.n_layers)}.values())
    rope_params = sum(p.numel() for rope in ropes for p in rope.parameters())
    attn_params = sum(p.numel() for p in lm.decoder.blocks[0].attn.parameters())
    # The numbers in a row, then the diagram at a fixed width: Streamlit scales it to that width
    # (or the column's, when narrower), which keeps its text at about 16 px or more from 1024 px
    # screens up; in a 3:2 split beside the numbers it was 12 px.
    cards = st.columns(3)
    cards[0].metric(page.t("where.params"), f"{rope_params:,}", help=page.t("where.params_help"))
    cards[1].metric(page.t("where.attn_params"), f"{attn_params:,}")
    cards[2].metric(page.t("where.buffer"), f"{sum(rope.inv_freq.numel() for rope in ropes):,}",
                    help=page.t("where.buffer_help", half=half, bases=len(ropes)))
    diagram_font, diagram_width = diagram_size(cfg.qk_norm)     # larger in presenter mode (course/figures/position.py)
    theme.diagram(block_diagram(diagram_labels, theme.font_family().split(",")[0], qk_norm=cfg.qk_norm,
                                fontsize=diagram_font), width=diagram_width)

    with st.expander(page.t("long.title"), icon=":material/menu_book:"):
        page.prose("long")

    # --- what to notice ------------------------------------------------------------------------------------------
    found = N.ladder_notices(bases=[(b.kind, base_fields(b)) for b in bases], d=cfg.d_head)
    found.append(N.turn_notice(pair=pair, layer=layer, head=head, theta=track.theta, turn_error=turn_error,
                               norm_error=norm_error, kind=base_name(layer_base)))
    found.append(N.relative_notice(q=md_tok(qpos), qpos=qpos, k=md_tok(kpos), kpos=kpos, score=model_score,
                                   spread=float(rel.spread.max()), far=REL_POSITIONS[-1], curve=curve.tolist(),
                                   maxd=CURVE_MAX))
    found.append(N.peak_notice(curve=curve.tolist(), layer=layer, head=head))
    found.append(N.params_notice(attn_params=attn_params, layers=cfg.n_layers))
    page.notices(found)
    page.try_this()

    # --- the math -------------------------------------------------------------------------------------------------
    p_ex = min(5, n - 1)
    by_hand = R.rotate_pair(track.before[p_ex].tolist(), p_ex * track.theta).tolist()
    page.math(page.t("math_example", x=f"{ex[0]:.3f}", y=f"{ex[1]:.3f}", pair=pair, theta=f"{track.theta:.6g}",
                     hx=f"{by_hand[0]:.4f}", hy=f"{by_hand[1]:.4f}",
                     pos=p_ex, angle=f"{p_ex * track.theta:.4f}", deg=f"{math.degrees(p_ex * track.theta):.1f}",
                     bx=f"{float(track.before[p_ex, 0]):.4f}", by=f"{float(track.before[p_ex, 1]):.4f}",
                     ax=f"{float(track.after[p_ex, 0]):.4f}", ay=f"{float(track.after[p_ex, 1]):.4f}",
                     layer=layer, head=head, i=i_dim, j=j_dim))
    page.code(RotaryEmbedding, R.relative_scores)


render()
