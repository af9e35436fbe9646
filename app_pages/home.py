"""Lesson 0, the big picture: the decoder loop, a live next-token demo on the shared
prompt, and the card of the model that is running."""

import streamlit as st
import torch

from course import i18n, nav, state, theme
from course.cache import home as cache
from course.figures import chart as go
from course.figures.diagrams import one_line
from course.i18n import big_number, join_list, t, with_paren
from course.lesson import Lesson
from course.notices import home as N
from course.text import code_span, html_escape, md_escape
from course.tokens import label, readable_texts
from lesson_model.analysis.tokenization import finish_characters
from lesson_model.decoder import Decoder
from lesson_model.sampling import next_token_distribution

CAP = cache.CAP      # tokens of the prompt this page runs
SHOWN_TOKENS = 48    # tokens listed under "tokens in" (the last ones: the model continues from there)
MAX_COMPLETION = 3   # extra greedy tokens to finish a character split across byte tokens
APPENDED = "_home_appended"   # session key: (prompt after an append, the ids appended)

# Bits per weight of the GGUF storage formats (block formats also store a scale per block).
FORMAT_BITS = {"F32": 32, "F16": 16, "BF16": 16, "Q8_0": 8, "Q8_1": 8, "Q8_K": 8, "Q6_K": 6, "Q5_0": 5,
               "Q5_1": 5, "Q5_K": 5, "Q4_0": 4, "Q4_1": 4, "Q4_K": 4, "IQ4_NL": 4, "IQ4_XS": 4, "Q3_K": 3,
               "Q2_K": 2}

# --- the loop diagram: an SVG laid out from the translated labels ------------------------------
FONT = 22            # px in the picture's own units; it is drawn at most at its natural size
PAD_X, PAD_Y, GAP, LINE = 12, 12, 34, 1.25


def text_width(line: str, size: float = FONT) -> float:
    """Estimated width of a line in px: CJK characters are square, Latin ones narrower."""
    return sum(size * (1.0 if "\u2e80" <= ch <= "\uffef" else 0.56) for ch in line)


def loop_svg(page: Lesson, cfg) -> tuple[str, int]:
    """The decoder loop as an SVG picture, and its natural width.

    Top row: text -> tokens -> vectors -> [attention -> feed-forward] x n blocks; bottom
    row, right to left: last vector -> scores -> pick one token, and a dashed arrow back to
    the tokens: append it and run again. Boxes are sized to their (translated) text, and
    the whole picture scales with the column, text included, so nothing spills out."""
    def box(text: str) -> dict:
        lines = text.split("\n")
        return dict(lines=lines, w=max(text_width(s) for s in lines) + 2 * PAD_X,
                    h=len(lines) * FONT * LINE + 2 * PAD_Y)

    top = [box(page.t("diagram.text")), box(page.t("diagram.tokens")),
           box(page.t("diagram.vectors", d_model=cfg.d_model)), box(page.t("diagram.attention")),
           box(page.t("diagram.ffn"))]
    scores = box(page.t("diagram.scores", vocab=f"{cfg.vocab_size:,}"))
    pick = box(page.t("diagram.pick"))
    fills = ["#f3f4f6", "#f3f4f6", "#f3f4f6", "#cfe3f3", "#fbe3bf"]
    block_label, append_label = page.t("diagram.block", n=cfg.n_layers), page.t("diagram.append")
    frame_pad = 14
    y_top = FONT * 1.6 + frame_pad                       # room for the block label above the frame
    row_h = max(b["h"] for b in top)
    x = 4.0
    for i, b in enumerate(top):
        if i == 3:
            x += frame_pad                               # the block frame starts before attention
        b["x"], b["y"], b["h"] = x, y_top, row_h
        x += b["w"] + GAP
    right = top[-1]["x"] + top[-1]["w"]
    frame = (top[3]["x"] - frame_pad, y_top - frame_pad, right + frame_pad, y_top + row_h + frame_pad)
    y_bottom = frame[3] + 44
    bottom_h = max(scores["h"], pick["h"])
    scores.update(x=right - scores["w"], y=y_bottom, h=bottom_h)
    pick.update(x=scores["x"] - GAP - pick["w"], y=y_bottom, h=bottom_h)
    back_y = y_bottom + bottom_h / 2
    tokens_cx = top[1]["x"] + top[1]["w"] / 2
    label_w = text_width(append_label, FONT - 2)
    label_x = max(min((tokens_cx + pick["x"]) / 2, pick["x"] - 8 - label_w / 2), 4 + label_w / 2)
    label_y = back_y + FONT + 6
    width = max(frame[2], right) + 8
    height = max(y_bottom + bottom_h, label_y) + 12
    grey, blue, back = "#6b7280", theme.OKABE_ITO[0], theme.OKABE_ITO[3]

    def esc(s: str) -> str:
        return html_escape(s)

    def rect(b: dict, fill: str) -> str:
        cx = b["x"] + b["w"] / 2
        first = b["y"] + b["h"] / 2 - (len(b["lines"]) - 1) * FONT * LINE / 2 + FONT * 0.35
        spans = "".join(f'<tspan x="{cx:.1f}" y="{first + k * FONT * LINE:.1f}">{esc(s)}</tspan>'
                        for k, s in enumerate(b["lines"]))
        return (f'<rect x="{b["x"]:.1f}" y="{b["y"]:.1f}" width="{b["w"]:.1f}" height="{b["h"]:.1f}" rx="8" '
                f'fill="{fill}" stroke="{grey}" stroke-width="1.5"/>'
                f'<text text-anchor="middle" fill="#1f2937">{spans}</text>')

    def arrow(x1, y1, x2, y2, colour=grey, marker="a", dash="") -> str:
        return (f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{colour}" '
                f'stroke-width="2" {dash} marker-end="url(#{marker})"/>')

    cy = y_top + row_h / 2
    parts = [f'<rect x="{frame[0]:.1f}" y="{frame[1]:.1f}" width="{frame[2] - frame[0]:.1f}" '
             f'height="{frame[3] - frame[1]:.1f}" rx="10" fill="none" stroke="{blue}" stroke-width="2" '
             f'stroke-dasharray="7 5"/>',
             f'<text x="{(frame[0] + frame[2]) / 2:.1f}" y="{frame[1] - 10:.1f}" text-anchor="middle" '
             f'fill="{blue}">{esc(block_label)}</text>']
    parts += [rect(b, fill) for b, fill in zip(top, fills)]
    parts += [rect(scores, "#f3f4f6"), rect(pick, "#c9ede0")]
    for a, b in zip(top, top[1:]):
        parts.append(arrow(a["x"] + a["w"], cy, b["x"] - 2, cy))
    parts.append(arrow(right - scores["w"] / 2, frame[3], right - scores["w"] / 2, y_bottom - 2))
    parts.append(arrow(scores["x"], back_y, pick["x"] + pick["w"] + 2, back_y))
    parts.append(f'<polyline points="{pick["x"]:.1f},{back_y:.1f} {tokens_cx:.1f},{back_y:.1f} '
                 f'{tokens_cx:.1f},{y_top + row_h + 2:.1f}" fill="none" stroke="{back}" stroke-width="2.5" '
                 f'stroke-dasharray="8 6" marker-end="url(#b)"/>')
    parts.append(f'<text x="{label_x:.1f}" y="{label_y:.1f}" text-anchor="middle" fill="{back}" '
                 f'font-size="{FONT - 2}">{esc(append_label)}</text>')
    defs = "".join(f'<marker id="{m}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
                   f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{c}"/></marker>'
                   for m, c in (("a", grey), ("b", back)))
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
           f'width="{width:.0f}" height="{height:.0f}" font-family="{esc(theme.font_family())}" '
           f'font-size="{FONT}"><defs>{defs}</defs>{"".join(parts)}</svg>')
    return svg, int(width)


def loop_alt(page: Lesson, cfg) -> str:
    """The loop diagram's alt text, from the same labels as the picture."""
    chain = [page.t("diagram.text"), page.t("diagram.tokens"), page.t("diagram.vectors", d_model=cfg.d_model),
             page.t("diagram.attention"), page.t("diagram.ffn"), page.t("diagram.scores", vocab=f"{cfg.vocab_size:,}"),
             page.t("diagram.pick")]
    return t("chart.loop", chains=" → ".join(one_line(label) for label in chain),
             n=cfg.n_layers, back=one_line(page.t("diagram.append")))


# --- the model card ------------------------------------------------------------------------------

def param_figure(page: Lesson, counts: dict[str, int]) -> go.Figure:
    kinds = [k for k in ("embedding", "attention", "mlp", "norms", "unembedding") if counts.get(k)]
    total = counts["total"]
    scale = 1e8 if i18n.is_cjk() else 1e6            # 億 / 亿 in Chinese, millions in English
    fig = go.Figure()
    for i, kind in enumerate(kinds):
        share = counts[kind] / total
        name = page.t(f"card.kind.{kind}")
        fig.add_bar(
            x=[counts[kind] / scale], y=[""], orientation="h", name=name,
            marker_color=theme.OKABE_ITO[i], text=[f"{share:.0%}" if share >= 0.04 else ""],
            textposition="inside", insidetextanchor="middle",
            hovertext=[html_escape(f"{big_number(counts[kind])} · {share:.1%}")],
            hovertemplate="%{hovertext}<extra>" + html_escape(name) + "</extra>",
        )
    fig.update_layout(barmode="stack", showlegend=True, title=page.t("card.chart_title", total=big_number(total)),
                      legend=dict(orientation="h", yanchor="top", y=theme.legend_below(-0.55), xanchor="left", x=0,
                                  traceorder="normal"),
                      margin=dict(l=10, r=10, t=60, b=10))
    fig.update_xaxes(title=page.t("card.axis"))
    return fig


def quantization_text(page: Lesson, lm) -> str:
    """What the loaded weights really are, from lm.weight_formats / lm.embedding_format."""
    formats = getattr(lm, "weight_formats", None)
    embed = getattr(lm, "embedding_format", None)
    dtype = str(lm.decoder.W_E.dtype).replace("torch.", "")
    if not formats:
        return page.t("card.not_gguf", dtype=dtype)

    def fmt(name: str) -> str:
        bits = FORMAT_BITS.get(name)
        return with_paren(name, page.t("card.bits", bits=bits)) if bits else name

    items = join_list(page.t("card.quant_item", n=big_number(n), fmt=fmt(name)) for name, n in formats.items())
    low = min((FORMAT_BITS[name] for name in formats if name in FORMAT_BITS), default=None)
    if low is None or low >= 16:
        return page.t("card.full_precision", items=items, dtype=dtype)
    text = page.t("card.quantized", items=items, dtype=dtype, bits=low, levels=2 ** low)
    if embed:
        text = i18n.join_sentences([text, page.t("card.quant_embed", fmt=fmt(embed))])
    return i18n.join_sentences([text, page.t("card.quant_numbers")])


def design_lines(page: Lesson, lm) -> list[str]:
    """How this model is built, read from its config: the choices where decoders differ."""
    cfg = lm.cfg
    spec = getattr(lm, "bundled", None)      # the registry entry of a bundled model (None for other checkpoints)
    instruct = spec.instruct if spec is not None else lm.tokenizer.chat_template is not None
    lines = [page.t("card.design.instruct" if instruct else "card.design.base")]
    if cfg.n_kv_heads == 1:
        attention = "mqa"
    elif cfg.n_kv_heads < cfg.n_heads:
        attention = "gqa"
    else:
        attention = "mha"
    lines.append(page.t(f"card.design.{attention}", heads=cfg.n_heads, kv=cfg.n_kv_heads, group=cfg.group_size))
    if cfg.n_heads * cfg.d_head != cfg.d_model:
        lines.append(page.t("card.design.head_width", heads=cfg.n_heads, d_head=cfg.d_head,
                            width=f"{cfg.n_heads * cfg.d_head:,}", d_model=f"{cfg.d_model:,}"))
    local = [layer for layer in range(cfg.n_layers) if cfg.window(layer)]
    if local:
        glob = [layer for layer in range(cfg.n_layers) if not cfg.window(layer)]
        lines.append(page.t("card.design.window", window=f"{cfg.sliding_window:,}", n_local=len(local),
                            n=cfg.n_layers, theta_local=f"{cfg.rope_theta_sliding or cfg.rope_theta:,.0f}",
                            layers=join_list(glob), theta=f"{cfg.rope_theta:,.0f}"))
    else:
        lines.append(page.t("card.design.global", theta=f"{cfg.rope_theta:,.0f}"))
    lines.append(page.t("card.design.mlp_gelu" if cfg.activation == "gelu_tanh" else "card.design.mlp_silu",
                        d_ff=f"{cfg.d_ff:,}"))
    lines.append(page.t("card.design.norms_sandwich" if cfg.post_norms else "card.design.norms_pre"))
    if cfg.qk_norm:
        lines.append(page.t("card.design.qk_norm", d_head=cfg.d_head))
    embed = page.t("card.design.embed_scaled" if cfg.embed_scale else "card.design.embed_plain",
                   d_model=cfg.d_model, scale=f"{cfg.d_model ** 0.5:.1f}")
    if cfg.tie_embeddings:
        embed = i18n.join_sentences([embed, page.t("card.design.tied")])
    lines.append(embed)
    return lines


# --- the live demo --------------------------------------------------------------------------------

def is_piece(lm, token_id: int) -> bool:
    """True when the token is only part of a character's UTF-8 bytes (<E6 88> of 我)."""
    return lm.tokenizer.tokens([token_id])[0].is_partial


def candidate_label(lm, token_id: int) -> str:
    """A candidate's plain label; a byte piece ends in "…": its character is not finished."""
    return label(lm.token_text(token_id)) + ("…" if is_piece(lm, token_id) else "")


def candidate_axis(lm, token_ids: list[int]) -> list[str]:
    """Escaped, unique category labels for the candidates chart."""
    plain = [candidate_label(lm, i) for i in token_ids]
    return [html_escape(with_paren(text, i) if plain.count(text) > 1 else text) for i, text in zip(token_ids, plain)]


def candidates_figure(page: Lesson, labels: list[str], probs: list[float]) -> go.Figure:
    fig = go.Figure(go.Bar(
        x=[p * 100 for p in probs], y=labels, orientation="h", marker_color=theme.OKABE_ITO[0],
        text=[f"{p:.1%}" for p in probs], textposition="outside", cliponaxis=False,
        hovertemplate="%{y}: %{x:.2f}%<extra></extra>",
    ))
    fig.update_yaxes(autorange="reversed", title=page.t("demo.axis_token"), type="category")
    fig.update_xaxes(title=page.t("demo.axis_prob"), range=[0, max(probs) * 118])
    fig.update_layout(title=page.t("demo.chart_title"))
    return fig


def render() -> None:
    """The lesson, top to bottom: its variables live only while it runs (a widget's callback
    keeps just the names it uses, never this run's tensors)."""
    page = Lesson("home")
    page.header()
    lm = page.model()
    cfg = lm.cfg
    spec = getattr(lm, "bundled", None)      # the registry entry of a bundled model (None for other checkpoints)

    def append_token(ids: tuple[int, ...], token_id: int) -> None:
        """Append the chosen token to the shared prompt; when it is only part of a character's
        bytes, the model's own top choices finish the character (and the page says so)."""
        seq = finish_characters(lm, list(ids), [token_id], MAX_COMPLETION)[token_id]
        text = (state.prompt() + lm.decode(seq))[-state.PROMPT_MAX_CHARS:]
        state.set_prompt(text)
        st.session_state[APPENDED] = (text, tuple(seq))

    # --- 0. who it is for, and where to start ----------------------------------------------------------
    with st.container(border=True, key="home_start"):
        page.prose("start")
        first = nav.PAGES[1]
        st.page_link(nav.page_file(first), label=f"**{page.t('start_link', title=t(f'nav.{first}'))}**",
                     icon=":material/arrow_forward:", icon_position="right")

    # --- 1. the loop -------------------------------------------------------------------------
    st.subheader(page.t("loop_title"), anchor=False)
    page.prose("loop")
    svg, natural_width = loop_svg(page, cfg)
    st.image(svg, width=natural_width, alt=loop_alt(page, cfg))
    st.caption(page.t("links_caption"))
    number = 0
    sections = nav.SECTIONS[1:]
    for row in range(0, len(sections), 2):      # two sections a row: the titles stay on one line at 1024 px
        for col, (section, pages) in zip(st.columns(2), sections[row:row + 2]):
            col.markdown(f"**{t(f'nav.section.{section}')}**")
            for lesson, icon in pages:
                number += 1
                col.page_link(nav.page_file(lesson), label=f"{number}. {t(f'nav.{lesson}')}", icon=icon,
                              help=t(f"about.{lesson}"))

    # --- 2. the model card --------------------------------------------------------------------
    st.subheader(page.t("card.title", name=md_escape(lm.name)), anchor=False)
    page.prose("card")
    counts = lm.param_counts()
    facts = [
        ("layers", cfg.n_layers), ("heads", cfg.n_heads), ("kv_heads", cfg.n_kv_heads),
        ("d_model", cfg.d_model), ("d_head", cfg.d_head), ("d_ff", cfg.d_ff), ("vocab", cfg.vocab_size),
    ]
    for row in (facts[:4], facts[4:]):     # two rows: seven metrics side by side cut 262,144 at 1024 px
        for col, (fact, value) in zip(st.columns(4), row):
            col.metric(page.t(f"card.{fact}"), f"{value:,}", help=page.t(f"card.{fact}_help"))
    st.markdown(page.t("card.design_title") + "\n\n" + "\n".join(f"- {line}" for line in design_lines(page, lm)))
    theme.plot(param_figure(page, counts), key="param_chart", height=theme.presenter_height(250), title_width=70)
    st.markdown(quantization_text(page, lm))
    if spec is not None:
        st.markdown(page.t("card.licence", licence=spec.licence))   # the registry's own line

    # --- 3. live demo -------------------------------------------------------------------------
    st.subheader(page.t("demo.title"), anchor=False)
    page.prose("demo")
    tokens = page.tokens(lm, cap=CAP)
    ids = tuple(tok.id for tok in tokens)
    figure_area, controls = page.columns()
    with controls:
        top_n = state.url_int("top", page.t("demo.top_label"), 3, 20, 10, help=page.t("demo.top_help"))
    run = cache.lesson_run(lm, tokens)
    probs = next_token_distribution(run.last_logits)
    top = torch.topk(probs, top_n)
    top_ids = [int(i) for i in top.indices]
    top_probs = [float(p) for p in top.values]
    readable = readable_texts(tokens)
    with figure_area:
        appended = st.session_state.get(APPENDED)
        if appended and appended[0] == state.prompt() and len(appended[1]) > 1:
            pieces = [lm.token_text(i) for i in appended[1]]
            st.info(page.t("demo.appended_piece", char=code_span(label(lm.decode(list(appended[1])))),
                           first=code_span(pieces[0]), rest=" + ".join(code_span(p) for p in pieces[1:]),
                           n=len(pieces)), icon=":material/merge:")
        shown = " ".join(code_span(label(text)) for text in readable[-SHOWN_TOKENS:])
        lead = page.t("demo.earlier", n=len(tokens) - SHOWN_TOKENS) + " " if len(tokens) > SHOWN_TOKENS else ""
        st.markdown(page.t("demo.tokens_in", n=len(tokens)) + "\n\n" + lead + shown)
        theme.plot(candidates_figure(page, candidate_axis(lm, top_ids), top_probs),
                   key="candidates_chart", height=120 + 34 * top_n, title_width=50)
        if any(is_piece(lm, i) for i in top_ids):
            st.caption(page.t("demo.piece_caption"))
    with controls:
        st.markdown(page.t("demo.append_label"))
        for rank, (token_id, p) in enumerate(zip(top_ids, top_probs)):
            st.button(f"{md_escape(candidate_label(lm, token_id))}  ({p:.0%})", key=f"append_{rank}",
                      on_click=append_token, args=(ids, token_id), width="stretch", icon=":material/add:",
                      help=page.t("demo.append_piece_help") if is_piece(lm, token_id) else None)

    entropy_bits = float(-(probs[probs > 0] * probs[probs > 0].log2()).sum())
    page.notices(N.demo_notices(chars=len(state.prompt()), n_all=page.prompt_tokens,
                                top_token=code_span(candidate_label(lm, top_ids[0])),
                                top_is_piece=is_piece(lm, top_ids[0]), top_p=top_probs[0], top_n=top_n,
                                covered=sum(top_probs), vocab=cfg.vocab_size, n_tokens=len(tokens),
                                layers=cfg.n_layers, entropy_bits=entropy_bits))
    page.try_this()

    z = run.last_logits[top_ids[:3]].tolist()
    page.math(page.t("math_example", z1=f"{z[0]:.2f}", z2=f"{z[1]:.2f}", z3=f"{z[2]:.2f}",
                     p1=f"{top_probs[0]:.1%}", p2=f"{top_probs[1]:.1%}", p3=f"{top_probs[2]:.1%}",
                     vocab=f"{cfg.vocab_size:,}", emb=f"{counts['embedding']:,}", d_model=cfg.d_model))
    page.code(Decoder.forward, next_token_distribution, finish_characters)


render()
