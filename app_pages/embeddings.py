"""Lesson 2: embeddings. Each token id looks up one row of a learned table; the rows form a
space where related tokens sit close together, where some vector arithmetic works, and
where word order does not exist yet. A model with ``cfg.embed_scale`` (Gemma) multiplies the
row by √d_model before the first block reads it: the page shows the rows as stored (W_E,
which the unembedding reuses) and says what the first block reads (hook_embed)."""

import math

import streamlit as st
import torch

from course import i18n, state, theme
from course.cache import context as context_cache
from course.cache import embeddings as cache
from course.figures.context import context_figure
from course.figures.embeddings import bar_figure, cosine_heatmap, map_figure, strip_figure
from course.lesson import Lesson
from course.notices import context as CN
from course.notices import embeddings as N
from course.text import code_span, md_escape
from course.tokens import axis_labels, label, md_label, plot_label, readable_texts
from lesson_model.analysis import embeddings as E
from lesson_model.decoder import Decoder

CAP = cache.CAP   # prompt tokens used on this page (the similarity matrix stays readable)
K_MIN, K_MAX, K_DEFAULT = 5, cache.K_MAX, 12
ANALOGY_TOP = cache.ANALOGY_TOP


def render() -> None:
    """The lesson, top to bottom: its variables live only while it runs (a widget's callback
    keeps just the names it uses, never this run's tensors)."""
    page = Lesson("embeddings")
    page.header()
    lm = page.model()
    page.predict(lm)                  # Predict, then see: before the figures that answer it
    cfg = lm.cfg
    tokens = page.tokens(lm, cap=CAP)
    W_E = lm.decoder.W_E.detach()
    ids = [tok.id for tok in tokens]
    rows = W_E[ids].float().cpu()                     # [pos, d_model]: the rows as stored in the table
    # What the first block reads (hook_embed, lm.decoder.embed): the rows, times √d_model with embed_scale.
    scale = math.sqrt(cfg.d_model) if cfg.embed_scale else 1.0
    readable = readable_texts(tokens)                 # byte pieces read as their character (我¹, 我²)

    def md_at(i: int) -> str:
        """Token i of the prompt for Markdown, as the character it belongs to."""
        return code_span(label(readable[i]))

    def resolve(word: str) -> tuple[int | None, list[int]]:
        return cache.resolve(lm, word)

    def pieces_text(pieces: list[int]) -> str:
        return " ".join(md_label(lm.token_text(i)) for i in pieces)

    # --- 1. one row of the table --------------------------------------------------------------------
    page.part("row", page.t("row.title"))
    figure, controls = page.columns()
    with controls:
        pos = state.url_int("pos", page.t("row.pos"), 0, len(tokens) - 1, min(1, len(tokens) - 1), widget="select",
                            format_func=lambda i: f"{i}: {label(readable[i])}", help=page.t("row.pos_help"))
    token = tokens[pos]
    row = rows[pos]
    nearest = cache.neighbours(lm, token.id)[0]
    cos_prompt = E.cosine_matrix(rows)                # [pos, pos]
    others = [i for i in range(len(tokens)) if ids[i] != token.id]
    far = min(others, key=lambda i: float(cos_prompt[pos, i])) if others else None
    strip_rows = [row, W_E[nearest.id].float().cpu()] + ([rows[far]] if far is not None else [])
    strip_labels = [page.t("row.label_token", token=plot_label(readable[pos])),
                    page.t("row.label_nearest", token=plot_label(nearest.text), cos=f"{nearest.cosine:.2f}")]
    if far is not None:
        strip_labels.append(page.t("row.label_far", token=plot_label(readable[far]), cos=f"{float(cos_prompt[pos, far]):.2f}"))
    strip_labels = [text.replace("\n", "<br>") for text in strip_labels]   # a remark goes under its token
    with controls:
        st.metric(page.t("row.id"), f"{token.id:,}")
        st.metric(page.t("row.norm"), f"{float(row.norm()):.3f}", help=page.t("row.norm_help", d=cfg.d_model))
        st.markdown(page.t("row.range", lo=f"{float(row.min()):.3f}", hi=f"{float(row.max()):.3f}",
                           mean=f"{float(row.mean()):.4f}"))
    with figure:
        theme.plot(strip_figure(torch.stack(strip_rows), strip_labels, page.t("row.chart_title", d=cfg.d_model),
                                page.t("row.x"), page.t("row.colorbar")), key="row_strip", height=150 + 70 * len(strip_rows),
                   title_width=44)
        st.caption(page.t("row.caption", vocab=f"{cfg.vocab_size:,}", d=cfg.d_model,
                          params=f"{cfg.vocab_size * cfg.d_model:,}"))
        if cfg.embed_scale:
            st.info(page.t("row.scale", model=lm.name, d=cfg.d_model, scale=f"{scale:.2f}", norm=f"{float(row.norm()):.3f}",
                           scaled=f"{float(row.norm()) * scale:.3f}"), icon=":material/open_in_full:")

    # --- 2. nearest neighbours ------------------------------------------------------------------------
    page.part("nb", page.t("nb.title"))
    page.prose("neighbours")
    figure, controls = page.columns()
    with controls:
        word = state.url_text("word", page.t("nb.word"), "", max_chars=40, placeholder=page.t("nb.word_placeholder"),
                        help=page.t("nb.word_help"))
        k = state.url_int("k", page.t("nb.k"), K_MIN, K_MAX, K_DEFAULT)
    query_id, query_pieces = (token.id, [])
    if word.strip():
        found, query_pieces = resolve(word)
        if found is None:
            controls.warning(page.t("nb.not_one", word=md_label(word, 30), pieces=pieces_text(query_pieces)),
                             icon=":material/call_split:")
        else:
            query_id = found
    query_text = lm.token_text(query_id)
    query_label = readable[pos] if query_id == token.id else query_text   # the prompt's token reads as its character
    neighbours = cache.neighbours(lm, query_id)[:k]
    with figure:
        theme.plot(bar_figure(axis_labels([n.text for n in neighbours]), [n.cosine for n in neighbours],
                              page.t("nb.chart_title", token=plot_label(query_label), k=k), page.t("nb.x"),
                              ids=[n.id for n in neighbours], hover_id=page.t("nb.hover_id")),
                   key="neighbours_chart", height=140 + 30 * k, title_width=44)
        with st.expander(page.t("nb.table"), icon=":material/table:"):
            st.dataframe(theme.arrow_table({page.t("nb.col_rank"): range(1, len(neighbours) + 1),
                                       page.t("nb.col_token"): [label(n.text, 40) for n in neighbours],
                                       page.t("nb.col_id"): [n.id for n in neighbours],
                                       page.t("nb.x"): [round(n.cosine, 4) for n in neighbours]}),
                         hide_index=True, width="stretch")

    # --- 3. analogies ----------------------------------------------------------------------------------
    page.part("ana", page.t("ana.title"))
    page.prose("analogy")

    words = cache.words(lm, i18n.current_lang())            # Chinese words on Gemma in Chinese
    ANALOGIES, GROUPS, MAPS = words.analogies, words.groups, words.maps

    def pick(example: tuple[str, str, str, str]) -> None:
        for key, value in zip(("a", "b", "c", "expect"), example):
            state.set_value(key, value)

    preset_cols = st.columns(4)
    for n, example in enumerate(ANALOGIES):
        a_, b_, c_, _ = example
        preset_cols[n % 4].button(f"{a_} − {b_} + {c_}", key=f"analogy_{n}", on_click=pick, args=(example,),
                                  width="stretch")
    cols = st.columns(4)
    a = state.url_text("a", page.t("ana.a"), ANALOGIES[0][0], max_chars=30, container=cols[0])
    b = state.url_text("b", page.t("ana.b"), ANALOGIES[0][1], max_chars=30, container=cols[1])
    c = state.url_text("c", page.t("ana.c"), ANALOGIES[0][2], max_chars=30, container=cols[2])
    expect = state.url_text("expect", page.t("ana.expect"), ANALOGIES[0][3], max_chars=30, container=cols[3],
                      help=page.t("ana.expect_help"))
    resolved = {name: resolve(w) if w.strip() else (None, []) for name, w in (("a", a), ("b", b), ("c", c))}
    bad = [(name, w) for (name, w) in (("a", a), ("b", b), ("c", c)) if resolved[name][0] is None]
    analogy = None
    if bad:
        for name, w in bad:
            if w.strip():
                st.warning(page.t("ana.not_one", word=md_label(w, 30), pieces=pieces_text(resolved[name][1])),
                           icon=":material/call_split:")
            else:
                st.warning(page.t("ana.missing", which=page.t(f"ana.{name}")), icon=":material/edit:")
    else:
        expect_id = resolve(expect)[0] if expect.strip() else None
        if expect.strip() and expect_id is None:
            st.warning(page.t("ana.expect_not_one", word=md_label(expect, 30), pieces=pieces_text(resolve(expect)[1])),
                       icon=":material/call_split:")
        analogy = cache.analogy(lm, resolved["a"][0], resolved["b"][0], resolved["c"][0], expect_id)
        top_ids = [n.id for n in analogy.top]
        highlight = top_ids.index(expect_id) if expect_id in top_ids else None
        figure, controls = page.columns()
        name_a, name_b, name_c = (lm.token_text(analogy.a), lm.token_text(analogy.b), lm.token_text(analogy.c))
        with figure:
            theme.plot(bar_figure(axis_labels([n.text for n in analogy.top]), [n.cosine for n in analogy.top],
                                  page.t("ana.chart_title", a=plot_label(name_a), b=plot_label(name_b), c=plot_label(name_c)),
                                  page.t("nb.x"), highlight=highlight, ids=top_ids, hover_id=page.t("nb.hover_id")),
                       key="analogy_chart", height=140 + 30 * ANALOGY_TOP, title_width=34)
        with controls:
            if analogy.expected is not None:
                st.metric(page.t("ana.rank", token=md_escape(label(lm.token_text(analogy.expected)))), f"{analogy.expected_rank:,}",
                          help=page.t("ana.rank_help", vocab=f"{cfg.vocab_size:,}"))
                st.metric(page.t("ana.cos"), f"{analogy.expected_cosine:.3f}")
                st.metric(page.t("ana.rank_inputs"), f"{analogy.expected_rank_with_inputs:,}", help=page.t("ana.rank_inputs_help"))
            first = analogy.top_with_inputs[0]
            st.markdown(page.t("ana.with_inputs", token=md_label(first.text), cos=f"{first.cosine:.3f}"))

    # --- 4. a map of word groups ----------------------------------------------------------------------
    page.part("map", page.t("map.title"))
    page.prose("map")
    figure, controls = page.columns()
    with controls:
        which = state.url_choice("map", page.t("map.choice"), [*MAPS, "prompt"], "capitals", widget="radio",
                                 format_func=lambda o: page.t(f"map.option.{o}"))
        dims = int(state.url_choice("dims", page.t("map.dims"), ["2", "3"], "2", widget="segmented",
                                    format_func=lambda o: page.t(f"map.dims_{o}")))
    if which == "prompt":
        seen: dict[int, None] = {}
        for tok in tokens:
            if not tok.special:
                seen.setdefault(tok.id, None)
        map_ids = list(seen)
        map_words = [lm.token_text(i) for i in map_ids]
        map_groups = ["prompt"] * len(map_ids)
    else:
        map_words, map_groups = [], []
        for g in MAPS[which]:
            map_words += [words.prefix + w for w in GROUPS[g]]
            map_groups += [g] * len(GROUPS[g])
        map_ids = [E.token_id_of(lm, w) for w in map_words]
    projection = E.pca(W_E[map_ids].float().cpu(), dims) if len(map_ids) >= 2 else None
    with figure:
        if projection is None:
            st.info(page.t("map.too_few"), icon=":material/scatter_plot:")
        else:
            pairs = []
            if which == "capitals":
                n_c = len(GROUPS["countries"])
                pairs = [(i, n_c + i) for i in range(min(n_c, len(GROUPS["capitals"])))]
            got = projection.coords.shape[1]
            axis_key = "map.axis_short" if dims == 3 else "map.axis"
            axis_titles = [page.t(axis_key, n=i + 1, pct=f"{float(projection.explained[i]):.0%}") for i in range(got)]
            group_names = {g: page.t(f"map.group.{g}") for g in [*GROUPS, "prompt"]}
            coords = projection.coords if got >= 2 else torch.cat([projection.coords, torch.zeros(len(map_ids), 1)], 1)
            theme.plot(map_figure(coords, map_words, map_groups, group_names,
                                  axis_titles + [page.t("map.axis_none")] * (3 - len(axis_titles)),
                                  page.t("map.chart_title", n=len(map_ids)), pairs),
                       key="map_chart", height=620 if dims == 3 else 560, title_width=44)
            if dims == 3:
                st.caption(page.t("map.caption_3d"))

    # --- 5. your prompt's tokens compared ---------------------------------------------------------------
    page.part("matrix", page.t("matrix.title"))
    labels = axis_labels(tokens)
    theme.plot(cosine_heatmap(cos_prompt, labels, labels, page.t("matrix.chart_title"), page.t("matrix.x"),
                              page.t("matrix.y"), page.t("matrix.colorbar"), show_values=len(tokens) <= 14),
               key="prompt_cosines", height=max(380, 170 + 22 * len(tokens)), title_width=70)

    # --- 6. order does not exist yet ---------------------------------------------------------------------
    page.part("order", page.t("order.title"))
    page.prose("order")
    cols = st.columns(2)
    sent_a = state.url_text("order_a", page.t("order.a"), page.t("order.default_a"), max_chars=120, container=cols[0])
    sent_b = state.url_text("order_b", page.t("order.b"), page.t("order.default_b"), max_chars=120, container=cols[1])
    order_fields = None
    if sent_a.strip() and sent_b.strip():
        match = E.same_rows(lm, sent_a, sent_b)
        toks_a, toks_b = lm.tokenize(sent_a), lm.tokenize(sent_b)
        rows_a, rows_b = W_E[match.tokens_a].float().cpu(), W_E[match.tokens_b].float().cpu()
        unit_a = rows_a / rows_a.norm(dim=-1, keepdim=True)
        unit_b = rows_b / rows_b.norm(dim=-1, keepdim=True)
        cross = (unit_b @ unit_a.T).clamp(-1, 1)       # [n_b, n_a]
        figure, right = st.columns([3, 2], gap="medium")
        with figure:
            theme.plot(cosine_heatmap(cross, axis_labels(toks_a), axis_labels(toks_b), page.t("order.chart_title"),
                                      page.t("order.x"), page.t("order.y"), page.t("matrix.colorbar"),
                                      show_values=max(len(toks_a), len(toks_b)) <= 14),
                       key="order_chart", height=max(360, 170 + 30 * len(toks_b)))
        with right:
            if match.same_multiset:
                st.success(page.t("order.same", n=len(match.tokens_a)), icon=":material/check_circle:")
            else:
                read_b = readable_texts(toks_b)
                unmatched = [code_span(label(read_b[j])) for j, m in enumerate(match.match) if m is None]
                st.warning(page.t("order.different", tokens=i18n.join_list(unmatched[:6])),
                           icon=":material/compare_arrows:")
            # Once attention has run, the "same" token is no longer the same vector.
            moved = cache.moved(match)
            runs = cache.order_runs(lm, match)
            if runs is not None:
                j, i = moved[0]
                run_a, run_b = runs
                names = cache.order_names(cfg)

                def cos_at(name: str) -> float:
                    va, vb = run_a.cache[name][0, i].float(), run_b.cache[name][0, j].float()
                    return float(va @ vb / (va.norm() * vb.norm()))

                order_fields = dict(token=code_span(label(readable_texts(toks_b)[j])), pa=i, pb=j,
                                    c0=f"{cos_at(names[0]):.3f}", cl=f"{cos_at(names[1]):.3f}", layers=cfg.n_layers)
                st.markdown(page.t("order.after", **order_fields))

    # --- 6b. meaning from context: one word in two texts ------------------------------------------------
    context_found = _context_section(page, lm)

    # --- 7. not the "embeddings" an API gives you ------------------------------------------------------------
    with st.expander(page.t("api.title"), icon=":material/help:"):
        page.prose("api")

    # --- what to notice ----------------------------------------------------------------------------------
    found: list = N.row_notices(token=md_at(pos), d=cfg.d_model, norm=float(row.norm()), vocab=cfg.vocab_size,
                                nearest=md_label(nearest.text), cos=nearest.cosine, embed_scale=bool(cfg.embed_scale),
                                model=lm.name, scale=scale)
    found.append(N.neighbours_notice(token=md_label(query_label), query_text=query_text,
                                     neighbours=[n.text for n in neighbours], k=k, label=md_label, join=i18n.join_list))
    if analogy is not None:
        input_first = analogy.top_with_inputs[0]
        found.append(N.analogy_sentences(
            a=md_label(lm.token_text(analogy.a)), b=md_label(lm.token_text(analogy.b)),
            c=md_label(lm.token_text(analogy.c)), best=md_label(analogy.top[0].text), cos=analogy.top[0].cosine,
            expected=md_label(lm.token_text(analogy.expected)) if analogy.expected is not None else None,
            expected_rank=analogy.expected_rank,
            input_first=md_label(input_first.text) if input_first.id in (analogy.a, analogy.b, analogy.c) else None))
    found += N.map_notice(which=which, explained=projection.explained.tolist() if projection is not None else None,
                          pc1=projection.coords[:, 0].tolist() if projection is not None else [],
                          n_countries=len(GROUPS["countries"]), dims=dims, n=len(map_ids), d=cfg.d_model)
    found += N.prompt_notices(cos=cos_prompt.tolist(), ids=ids, label=md_at)
    if order_fields:
        found.append(("order.after", order_fields))
    found += context_found
    page.notices(found)
    page.try_this()

    # --- the math ------------------------------------------------------------------------------------
    va, vb = row.double(), W_E[nearest.id].double().cpu()
    page.math(page.t("math_example", a=md_at(pos), b=md_label(nearest.text), dot=f"{float(va @ vb):.3f}",
                     na=f"{float(va.norm()):.3f}", nb=f"{float(vb.norm()):.3f}",
                     cos=f"{float(va @ vb / (va.norm() * vb.norm())):.3f}", d=cfg.d_model,
                     first=", ".join(f"{v:.3f}" for v in row[:4].tolist()), id=f"{token.id:,}")
              + "\n\n" + page.t("math_size", vocab=f"{cfg.vocab_size:,}", d=cfg.d_model)
              + ("\n\n" + page.t("math_scale", d=cfg.d_model, scale=f"{scale:.4f}", na=f"{float(va.norm()):.3f}",
                                    scaled=f"{float(va.norm()) * scale:.3f}") if cfg.embed_scale else ""))
    page.code(E.cosine_to_all, E.nearest_neighbours, E.analogy_vector, Decoder.embed, Decoder.forward)


def _context_section(page: Lesson, lm) -> list:
    """Meaning from context: the learner's word in two texts, its embedding row (the same) and
    its vector after each block (moving apart), and the next token after it in each text.
    Returns this section's notices."""
    page.part("context", page.t("context.title"))
    page.prose("context")
    cols = st.columns([2, 2, 1])
    text_a = state.url_text("ctx_a", page.t("context.a"), page.t("context.default_a"), max_chars=200,
                            container=cols[0])
    text_b = state.url_text("ctx_b", page.t("context.b"), page.t("context.default_b"), max_chars=200,
                            container=cols[1])
    word = state.url_text("ctx_word", page.t("context.word"), page.t("context.default_word"), max_chars=20,
                          container=cols[2], help=page.t("context.word_help"))
    word = word.strip()
    missing = CN.missing_notice(word=md_label(word, 20) if word else "", in_a=bool(word) and word in text_a,
                                in_b=bool(word) and word in text_b)
    if missing is not None:
        st.warning(page.t(missing[0], **missing[1]), icon=":material/search_off:")
        return []
    result = context_cache.word_context(lm, text_a, text_b, word)
    if result is None:          # found as text but longer than the section runs
        st.warning(page.t("context.too_long", n=context_cache.MAX_TOKENS), icon=":material/content_cut:")
        return []
    last_a = lm.token_text(result.a.ids[result.a.position])
    last_b = lm.token_text(result.b.ids[result.b.position])
    figure, right = st.columns([3, 2], gap="medium")
    with figure:
        theme.plot(context_figure(result.embed_cosine, result.raw, result.centred, plot_label(word), page.t),
                   key="context_chart", height=420)
        st.caption(page.t("context.caption", layers=lm.cfg.n_layers))
    with right:
        st.metric(page.t("context.metric_embed"), f"{result.embed_cosine:.2f}")
        st.metric(page.t("context.metric_last", block=lm.cfg.n_layers - 1), f"{result.centred[-1]:+.2f}",
                  help=page.t("context.metric_last_help"))
        for side, top in (("a", result.top_a), ("b", result.top_b)):
            st.markdown(page.t(f"context.next_{side}"))
            st.dataframe(theme.arrow_table({page.t("context.col_token"): [label(lm.token_text(i), 30) for i, _ in top],
                                       page.t("context.col_p"): [f"{p:.1%}" for _, p in top]}),
                         hide_index=True, width="stretch", key=f"context_next_{side}")
    return CN.context_notices(word=md_label(word, 20), pieces_a=result.a.n_pieces, pieces_b=result.b.n_pieces,
                              last_a=md_label(last_a), last_b=md_label(last_b), same_token=result.same_token,
                              embed_cos=result.embed_cosine, centred=result.centred, raw=result.raw,
                              top_a=md_label(lm.token_text(result.top_a[0][0])), p_a=result.top_a[0][1],
                              top_b=md_label(lm.token_text(result.top_b[0][0])), p_b=result.top_b[0][1])


render()
