"""Lesson 2: embeddings. Each token id looks up one row of a learned table; the rows form a
space where related tokens sit close together, where some vector arithmetic works, and
where word order does not exist yet. A model with ``cfg.embed_scale`` (Gemma) multiplies the
row by √d_model before the first block reads it: the page shows the rows as stored (W_E,
which the unembedding reuses) and says what the first block reads (hook_embed)."""

import math


import pandas as pd
import streamlit as st
import torch

from lesson_model.analysis import embeddings as E
from lesson_model.decoder import Decoder
from ui import i18n, state, theme
from ui.figures_embeddings import (ANALOGIES, GROUPS, MAPS, bar_figure, cosine_heatmap, map_figure,
                                   strip_figure)
from ui.figures_tokens import url_text
from ui.lesson import Lesson
from ui.text import md_escape
from ui.text import code_span
from ui.tokens import axis_labels, label, md_label, plot_label, readable_texts

CAP = 48          # prompt tokens used on this page (the similarity matrix stays readable)
K_MIN, K_MAX, K_DEFAULT = 5, 30, 12
ANALOGY_TOP = 10

page = Lesson("embeddings")
page.header()
lm = page.model()
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
    """A typed word -> (token id, or None when it is not one token; the pieces it makes).
    Inside a sentence words carry their leading space, so " word" is tried first."""
    word = word.strip()
    for form in (" " + word, word):
        try:
            return E.token_id_of(lm, form), []
        except ValueError:
            continue
    return None, lm.encode(" " + word)


def pieces_text(pieces: list[int]) -> str:
    return " ".join(md_label(lm.token_text(i)) for i in pieces)


def same_word(a: str, b: str) -> bool:
    return a.strip().lower() == b.strip().lower()


# Whole-vocabulary searches are one pass over the 113 MB table each: keep their small results,
# shared by every session (the model name is part of the key).
@st.cache_data(max_entries=512, show_spinner=False)
def neighbours_of(model_name: str, token_id: int, k: int, _lm) -> list[E.Neighbour]:
    return E.nearest_neighbours(_lm, token_id, k=k)


@st.cache_data(max_entries=256, show_spinner=False)
def analogy_of(model_name: str, a: int, b: int, c: int, expected: int | None, k: int, _lm) -> E.Analogy:
    return E.analogy(_lm, a, b, c, k=k, expected=expected)


# --- 1. one row of the table --------------------------------------------------------------------
st.subheader(page.t("row.title"), anchor=False)
figure, controls = page.columns()
with controls:
    pos = state.url_int("pos", page.t("row.pos"), 0, len(tokens) - 1, min(1, len(tokens) - 1), widget="select",
                        format_func=lambda i: f"{i}: {label(readable[i])}", help=page.t("row.pos_help"))
token = tokens[pos]
row = rows[pos]
nearest = neighbours_of(lm.name, token.id, K_MAX, lm)[0]
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
st.subheader(page.t("nb.title"), anchor=False)
page.prose("neighbours")
figure, controls = page.columns()
with controls:
    word = url_text("word", page.t("nb.word"), "", max_chars=40, placeholder=page.t("nb.word_placeholder"),
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
neighbours = neighbours_of(lm.name, query_id, K_MAX, lm)[:k]
with figure:
    theme.plot(bar_figure(axis_labels([n.text for n in neighbours]), [n.cosine for n in neighbours],
                          page.t("nb.chart_title", token=plot_label(query_label), k=k), page.t("nb.x"),
                          ids=[n.id for n in neighbours], hover_id=page.t("nb.hover_id")),
               key="neighbours_chart", height=140 + 30 * k, title_width=44)
    with st.expander(page.t("nb.table"), icon=":material/table:"):
        st.dataframe(pd.DataFrame({page.t("nb.col_rank"): range(1, len(neighbours) + 1),
                                   page.t("nb.col_token"): [label(n.text, 40) for n in neighbours],
                                   page.t("nb.col_id"): [n.id for n in neighbours],
                                   page.t("nb.x"): [round(n.cosine, 4) for n in neighbours]}),
                     hide_index=True, width="stretch")
variants = [n for n in neighbours if same_word(n.text, query_text)]

# --- 3. analogies ----------------------------------------------------------------------------------
st.subheader(page.t("ana.title"), anchor=False)
page.prose("analogy")


@state.detached      # held by its widget in the session: keep only the names it uses
def pick(example: tuple[str, str, str, str]) -> None:
    for key, value in zip(("a", "b", "c", "expect"), example):
        state.set_value(key, value)


preset_cols = st.columns(4)
for n, example in enumerate(ANALOGIES):
    a_, b_, c_, _ = example
    preset_cols[n % 4].button(f"{a_} − {b_} + {c_}", key=f"analogy_{n}", on_click=pick, args=(example,),
                              width="stretch")
cols = st.columns(4)
a = url_text("a", page.t("ana.a"), ANALOGIES[0][0], max_chars=30, container=cols[0])
b = url_text("b", page.t("ana.b"), ANALOGIES[0][1], max_chars=30, container=cols[1])
c = url_text("c", page.t("ana.c"), ANALOGIES[0][2], max_chars=30, container=cols[2])
expect = url_text("expect", page.t("ana.expect"), ANALOGIES[0][3], max_chars=30, container=cols[3],
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
    analogy = analogy_of(lm.name, resolved["a"][0], resolved["b"][0], resolved["c"][0], expect_id, ANALOGY_TOP, lm)
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
st.subheader(page.t("map.title"), anchor=False)
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
        map_words += [" " + w for w in GROUPS[g]]
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
            pairs = [(i, n_c + i) for i in range(n_c)]
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
st.subheader(page.t("matrix.title"), anchor=False)
labels = axis_labels(tokens)
theme.plot(cosine_heatmap(cos_prompt, labels, labels, page.t("matrix.chart_title"), page.t("matrix.x"),
                          page.t("matrix.y"), page.t("matrix.colorbar"), show_values=len(tokens) <= 14),
           key="prompt_cosines", height=max(380, 170 + 22 * len(tokens)), title_width=70)
pairs_prompt = [(i, j) for i in range(len(tokens)) for j in range(i) if ids[i] != ids[j]]

# --- 6. order does not exist yet ---------------------------------------------------------------------
st.subheader(page.t("order.title"), anchor=False)
page.prose("order")
cols = st.columns(2)
sent_a = url_text("order_a", page.t("order.a"), page.t("order.default_a"), max_chars=120, container=cols[0])
sent_b = url_text("order_b", page.t("order.b"), page.t("order.default_b"), max_chars=120, container=cols[1])
order_note = None
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
        moved = [(j, m) for j, m in enumerate(match.match) if m is not None and m != j]
        if moved and len(match.tokens_a) <= 256 and len(match.tokens_b) <= 256:
            j, i = moved[0]
            last = cfg.n_layers - 1
            names = ["blocks.0.hook_resid_post", f"blocks.{last}.hook_resid_post"]
            run_a = page.run(lm, match.tokens_a, names=names)
            run_b = page.run(lm, match.tokens_b, names=names)

            def cos_at(name: str) -> float:
                va, vb = run_a.cache[name][0, i].float(), run_b.cache[name][0, j].float()
                return float(va @ vb / (va.norm() * vb.norm()))

            order_note = page.t("order.after", token=code_span(label(readable_texts(toks_b)[j])), pa=i, pb=j, c0=f"{cos_at(names[0]):.3f}",
                                cl=f"{cos_at(names[1]):.3f}", layers=cfg.n_layers)
            st.markdown(order_note)

# --- 7. not the "embeddings" an API gives you ------------------------------------------------------------
with st.expander(page.t("api.title"), icon=":material/help:"):
    page.prose("api")

# --- what to notice ----------------------------------------------------------------------------------
notes = [page.t("notice.row", token=md_at(pos), d=cfg.d_model, norm=f"{float(row.norm()):.2f}", vocab=f"{cfg.vocab_size:,}",
                nearest=md_label(nearest.text), cos=f"{nearest.cosine:.3f}")]
if cfg.embed_scale:
    notes.append(page.t("notice.scale", model=lm.name, d=cfg.d_model, scale=f"{scale:.2f}",
                        scaled=f"{float(row.norm()) * scale:.2f}"))
if variants:
    notes.append(page.t("notice.variants", token=md_label(query_label), n=len(variants), k=k,
                        examples=i18n.join_list(md_label(v.text) for v in variants[:4])))
else:
    notes.append(page.t("notice.neighbours", token=md_label(query_label),
                        examples=i18n.join_list(md_label(v.text) for v in neighbours[:4])))
if analogy is not None:
    best = analogy.top[0]
    line = page.t("notice.analogy", a=md_label(lm.token_text(analogy.a)), b=md_label(lm.token_text(analogy.b)),
                  c=md_label(lm.token_text(analogy.c)), best=md_label(best.text), cos=f"{best.cosine:.3f}")
    if analogy.expected is not None:
        line = i18n.join_sentences([line, page.t("notice.analogy_rank", rank=f"{analogy.expected_rank:,}",
                                                 expected=md_label(lm.token_text(analogy.expected)))])
    if analogy.top_with_inputs[0].id in (analogy.a, analogy.b, analogy.c):
        line = i18n.join_sentences([line, page.t("notice.analogy_inputs",
                                                 token=md_label(analogy.top_with_inputs[0].text))])
    notes.append(line)
if projection is not None and which == "capitals":
    n_c = len(GROUPS["countries"])
    pc1 = projection.coords[:, 0]
    notes.append(page.t("notice.map_capitals", pct=f"{float(projection.explained[:2].sum()):.0%}",
                        countries=f"{float(pc1[:n_c].mean()):+.2f}", capitals=f"{float(pc1[n_c:].mean()):+.2f}"))
elif projection is not None:
    notes.append(page.t("notice.map", pct=f"{float(projection.explained[:min(2, dims)].sum()):.0%}", n=len(map_ids),
                        d=cfg.d_model))
if pairs_prompt:
    hi = max(pairs_prompt, key=lambda p: float(cos_prompt[p]))
    lo = min(pairs_prompt, key=lambda p: float(cos_prompt[p]))
    if len({(ids[i], ids[j]) if ids[i] < ids[j] else (ids[j], ids[i]) for i, j in pairs_prompt}) > 1:
        notes.append(page.t("notice.matrix", a=md_at(hi[0]), b=md_at(hi[1]), hi=f"{float(cos_prompt[hi]):.2f}",
                            c=md_at(lo[0]), d=md_at(lo[1]), lo=f"{float(cos_prompt[lo]):.2f}"))
    else:   # only two different tokens: one pair
        notes.append(page.t("notice.matrix_one", a=md_at(hi[0]), b=md_at(hi[1]), hi=f"{float(cos_prompt[hi]):.2f}"))
repeats = len(ids) - len(set(ids))
if repeats:
    notes.append(page.t("notice.repeats", n=repeats))
if order_note:
    notes.append(order_note)
page.notice(notes)
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
