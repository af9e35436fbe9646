"""Lesson 1: tokens. Text -> integer ids: the prompt as chips, what tokens cost in English
and Chinese, why letters are hard to count, special tokens and the chat template (or, for a
base model such as Gemma 3 270M, the lack of one), and facts about the vocabulary read from
the tokenizer itself. Byte-level BPE (SmolLM2) and SentencePiece-style BPE (Gemma) each get
the sentences that are true of them, chosen from the tokenizer's facts, not the model's name."""

import streamlit as st

from course import i18n, state, theme
from course.cache import tokens as cache
from course.figures.tokens import (
    CHAR_LIMIT,
    PARALLEL,
    PARTS,
    char_code,
    chips_markdown,
    cost_figure,
    id_figure,
    length_histogram,
    letter_chips,
    split_lines,
)
from course.lesson import Lesson
from course.notices import tokens as N
from course.text import code_span, hidden_names, html_escape, show_format
from course.tokens import label, md_label
from lesson_model.analysis import tokenization as T
from lesson_model.tokens import TokenizerView, bytes_as_text

CAP = 512            # tokens of the prompt shown as chips
COMPARE_MAX = 300    # characters of the second text
SPLIT_SHOWN = 6      # split characters listed under the chips
COMMON_RULES = 1000  # a merged piece among the first rules learned is "a very common string"
INJECT_MAX = 200     # characters of the special-token experiment
WORD = cache.DEFAULT_WORD   # the letter-counting word


def id_range(r) -> str:
    return f"{r.first:,}–{r.last:,}" if r is not None else "—"


def render() -> None:
    """The lesson, top to bottom: its variables live only while it runs."""
    page = Lesson("tokens")
    page.header()
    lm = page.model()
    page.predict(lm)                  # Predict, then see: before the figures that answer it
    text = state.prompt()
    tokens = page.tokens(lm, cap=CAP)
    counts = T.text_counts(lm, text)
    facts = cache.facts(lm)
    groups = T.character_groups(tokens, text)
    split = [g for g in groups if g.split]
    sentencepiece = not lm.tokenizer.byte_level        # characters, ▁ for a space, <0xE5> byte fallback
    bos = lm.token_text(lm.tokenizer.bos_id) if lm.tokenizer.bos_id is not None else None

    # --- 1. the prompt as tokens -----------------------------------------------------------------
    page.part("chips", page.t("chips.title"))
    figure, controls = page.columns()
    with controls:
        show_ids = state.url_bool("ids", page.t("chips.show_ids"), False, help=page.t("chips.show_ids_help"))
        st.metric(page.t("count.chars"), f"{counts.chars:,}")
        st.metric(page.t("count.bytes"), f"{counts.utf8_bytes:,}", help=page.t("count.bytes_help"))
        st.metric(page.t("count.tokens"), f"{counts.tokens:,}",
                  help=page.t("count.tokens_added", bos=bos, n=counts.tokens + counts.added) if counts.added else None)
        st.metric(page.t("count.cpt"), f"{counts.chars_per_token:.2f}", help=page.t("count.cpt_help"))
    with figure:
        dropped = lm.tokenizer.dropped_bytes(text)
        if dropped:   # bytes with no vocabulary entry: the tokenizer drops exactly those bytes
            items = []
            for ch, missing in dropped[:8]:
                kept = bytes(b for b in ch.encode("utf-8") if b not in missing)
                remark = (page.t("chips.dropped_part", dropped=" ".join(f"{b:02X}" for b in missing),
                                 kept=" ".join(f"{b:02X}" for b in kept)) if kept else page.t("chips.dropped_whole"))
                items.append(i18n.with_paren(char_code(ch), remark))
            st.warning(page.t("chips.dropped", n=len(dropped), chars=i18n.join_list(items)),
                       icon=":material/visibility_off:")
        with st.container(border=True, key="token_chips"):
            st.markdown(chips_markdown(tokens, show_ids=show_ids))
        hidden = hidden_names(text)      # direction controls, zero-width characters: shown as <U+202E>

        def chip_notes() -> None:
            """What the chips' colours and marks mean (in presenter mode under the chart, so the
            chart is on the first screen)."""
            st.caption(page.t("chips.legend"))
            if hidden:
                st.caption(page.t("chips.hidden", n=len(hidden), chars=i18n.join_list(
                    i18n.with_paren(code_span(chip), name) if name else code_span(chip) for chip, name in hidden[:8])))
            if counts.added and bos:
                st.caption(page.t("chips.bos", bos=code_span(bos), id=lm.tokenizer.bos_id))

        presenting = theme.view().presenting
        if not presenting:
            chip_notes()
        if split:
            st.markdown(page.t("chips.split_intro", n=len(split)))
            st.markdown("\n".join("- " + line for line in
                                  split_lines(split, lambda **f: page.t("chips.split_line", **f), SPLIT_SHOWN,
                                              lambda **f: page.t("chips.split_line_dropped", **f))))
        theme.plot(id_figure(tokens[:64], page.t("ids.title"), page.t("ids.x"), page.t("ids.y"), lm.cfg.vocab_size,
                             page.t("ids.hover")), key="token_ids", height=theme.projected(360, 300), title_width=44)
        if presenting:
            chip_notes()
        if facts.rank_is_id_offset:      # byte-level BPE: id first + n is merge rule n
            st.caption(page.t("ids.caption", special=id_range(facts.special_range), bytes=id_range(facts.byte_range),
                              first=f"{facts.merged_range.first:,}"))
        else:                            # SentencePiece style: blocks of bytes, merged pieces, characters
            st.caption(i18n.join_sentences([
                page.t("ids.caption_sp", bytes=id_range(facts.byte_range), merged=id_range(facts.merged_block),
                       chars=id_range(facts.char_range), bos=code_span(bos or "—"),
                       bos_id=lm.tokenizer.bos_id if bos else "—"),
                page.t("ids.caption_sp_order") if facts.merges_follow_ids else ""]))

    with st.expander(page.t("table.title"), icon=":material/table:"):
        char_of = {id(tok): g.text for g in groups for tok in g.tokens}
        st.dataframe(theme.arrow_table({
            page.t("table.pos"): range(len(tokens)),
            page.t("table.piece"): [label(tok, 40) for tok in tokens],
            page.t("table.id"): [tok.id for tok in tokens],
            page.t("table.bytes"): [" ".join(f"{b:02X}" for b in tok.bytes) for tok in tokens],
            page.t("table.chars"): [label(char_of.get(id(tok), ""), 40) for tok in tokens],
        }), hide_index=True, width="stretch", height=min(400, 38 + 35 * len(tokens)))

    # --- 2. the same sentence in English and Chinese ------------------------------------------------
    page.part("cost", page.t("cost.title"))
    page.prose("cost")
    series = [page.t("cost.series_en"), page.t("cost.series_hant"), page.t("cost.series_hans")]
    parallel = [[T.text_counts(lm, s) for s in row] for row in PARALLEL]
    shown = {"zh-Hant": 1, "zh-Hans": 2}.get(i18n.current_lang(), 0)     # each row named in the page's own language
    theme.plot(cost_figure([(row[shown], [c.tokens for c in cs]) for row, cs in zip(PARALLEL, parallel)], series,
                           page.t("cost.chart_title"), page.t("cost.x"),
                           [[page.t("cost.hover", text=html_escape(s), chars=c.chars) for s, c in zip(row, cs)]
                            for row, cs in zip(PARALLEL, parallel)]),
               key="cost_parallel", height=520, title_width=70)
    left, right = st.columns([2, 3], gap="medium")
    with left:
        default_second = page.t("cost.second_default")
        second = state.url_text("compare", page.t("cost.second_label"), default_second, max_chars=COMPARE_MAX,
                          help=page.t("cost.second_help"))
        mine = [counts, T.text_counts(lm, second)]
        if mine[1].tokens:
            st.markdown(page.t("cost.mine_line", a=counts.tokens, b=mine[1].tokens,
                               ca=f"{counts.chars_per_token:.2f}", cb=f"{mine[1].chars_per_token:.2f}"))
    with right:
        measures = [page.t("count.chars"), page.t("count.bytes"), page.t("count.tokens")]
        theme.plot(cost_figure([(page.t("cost.yours"), [mine[0].chars, mine[0].utf8_bytes, mine[0].tokens]),
                                (page.t("cost.second"), [mine[1].chars, mine[1].utf8_bytes, mine[1].tokens])],
                               measures, page.t("cost.mine_title"), page.t("cost.mine_x")),
                   key="cost_mine", height=320)

    # --- 3. strawberry ---------------------------------------------------------------------------
    page.part("letters", page.t("letters.title"))
    page.prose("letters")
    figure, controls = page.columns()
    with controls:
        word = state.url_text("word", page.t("letters.word"), WORD, max_chars=40).strip() or WORD
        letter = state.url_text("letter", page.t("letters.letter"), "r", max_chars=1).strip()[:1] or "r"
    variants = [("start", word), ("space", " " + word), ("capital", word[:1].upper() + word[1:])]
    with figure:
        for kind, form in variants:
            pieces = [tok for tok in lm.tokenize(form) if not tok.added]     # the word's own pieces, not <bos>
            found = T.letter_counts(pieces, letter)
            st.markdown(page.t(f"letters.{kind}", form=md_label(form, 40), n=len(pieces),
                               ids=i18n.join_list(str(tok.id) for tok in pieces)))
            st.markdown(letter_chips(pieces, [k for _, k in found]))
    true_count = word.lower().count(letter.lower())

    # The same puzzle in Chinese: how many 木 are in 森? (what the tokenizer hands the model)
    st.markdown(page.t("parts.title"))
    page.prose("parts")
    figure, controls = page.columns()
    with controls:
        which = int(state.url_choice("char", page.t("parts.choice"), [str(i) for i in range(len(PARTS))], "0",
                                     widget="segmented", format_func=lambda i: PARTS[int(i)][0]))
    char, part, count = PARTS[which]
    char_toks = [tok for tok in lm.tokenize(char) if not tok.added]       # without <bos>
    part_toks = [tok for tok in lm.tokenize(part) if not tok.added]
    key, fields = N.parts_notice(char=char, part=part, count=count, char_ids=[tok.id for tok in char_toks],
                                 part_ids=[tok.id for tok in part_toks], join=i18n.join_list)
    with figure:
        st.markdown(page.t("parts.tokens", char=char, part=part, count=count,
                           char_chips=chips_markdown(char_toks, show_ids=True),
                           part_chips=chips_markdown(part_toks, show_ids=True)))
        st.markdown(page.t(key, **fields))

    # --- 4. special tokens and the chat template ----------------------------------------------------
    page.part("chat", page.t("chat.title"))
    page.prose("chat")
    templated = T.has_chat_template(lm)
    eos = sorted(lm.eos_token_ids)
    if templated:
        rendered, chat_toks = T.chat_tokens(lm, text)
        left, right = st.columns(2, gap="medium")
        with left:
            st.caption(page.t("chat.rendered"))
            st.code(show_format(rendered), language=None, wrap_lines=True)   # U+202E as <U+202E>
        with right:
            st.caption(page.t("chat.as_tokens"))
            with st.container(border=True, key="chat_chips"):
                st.markdown(chips_markdown(chat_toks[:CAP], show_ids=show_ids))
    else:   # a base model: no template; the text goes in as it is, after the tokenizer's <bos>
        chat_toks = list(tokens)
        named = [(i, piece) for i, piece in facts.special if not piece.startswith("<unused")]   # the ones with a role
        st.info(page.t("chat.no_template", model=lm.name,
                       bos=code_span(bos or "—"), bos_id=lm.tokenizer.bos_id if bos else "—",
                       eos=i18n.join_list(code_span(lm.token_text(i)) for i in eos) or "—",
                       markers=i18n.join_list(i18n.with_paren(code_span(piece), i) for i, piece in named) or "—",
                       n=f"{len(facts.special):,}", unused=f"{len(facts.special) - len(named):,}"),
                icon=":material/chat_bubble_outline:")
    specials = [tok for tok in chat_toks if tok.special and not tok.added]
    typed = T.typed_special_tokens(lm, text)          # special tokens the learner's own text produced

    # Special tokens from ordinary text: what the tokenizer does with typed markers.
    st.markdown(page.t("chat.inject_title"))
    inject = state.url_text("inject", page.t("chat.inject_label"), page.t("chat.inject_default"), max_chars=INJECT_MAX,
                      help=page.t("chat.inject_help"))
    inject_toks = lm.tokenize(inject) if inject else []
    inject_specials = [tok for tok in inject_toks if tok.special and not tok.added]   # not the tokenizer's own <bos>
    left, right = st.columns(2, gap="medium")
    with left:
        st.caption(page.t("chat.inject_default_reading"))
        with st.container(border=True, key="inject_chips"):
            st.markdown(chips_markdown(inject_toks[:CAP], show_ids=True) if inject_toks else "—")
    with right:
        st.caption(page.t("chat.inject_literal_reading"))
        literal = T.literal_tokens(lm, inject) if inject else []
        with st.container(border=True, key="literal_chips"):
            st.markdown(chips_markdown(literal[:CAP], show_ids=True) if literal else "—")
    if inject_specials:
        st.markdown(page.t("chat.inject_found", n=len(inject_specials),
                           tokens=i18n.join_list(i18n.with_paren(code_span(tok.text), tok.id) for tok in inject_specials),
                           m=len(literal)))
    else:
        example = next((tok.text for tok in T.typed_special_tokens(lm, page.t("chat.inject_default"))), None)
        st.markdown(page.t("chat.inject_none", example=code_span(example or (lm.token_text(eos[0]) if eos else "—"))))

    # --- 5. the vocabulary ---------------------------------------------------------------------------
    page.part("vocab", page.t("vocab.title"))
    cols = st.columns(5 if facts.n_chars else 4)
    cols[0].metric(page.t("vocab.size"), f"{facts.size:,}")
    cols[1].metric(page.t("vocab.special"), f"{len(facts.special):,}")
    if sentencepiece:
        cols[2].metric(page.t("vocab.bytes"), f"{facts.n_single_bytes:,}", help=page.t("vocab.bytes_help_sp"))
    else:
        cols[2].metric(page.t("vocab.bytes"), f"{facts.n_single_bytes:,}", help=page.t("vocab.bytes_help"))
    if facts.n_chars:
        cols[3].metric(page.t("vocab.chars"), f"{facts.n_chars:,}", help=page.t("vocab.chars_help"))
    if facts.rank_is_id_offset:
        cols[-1].metric(page.t("vocab.merges"), f"{facts.n_merges:,}", help=page.t("vocab.merges_help"))
    else:
        cols[-1].metric(page.t("vocab.merges"), f"{facts.n_merges:,}",
                        help=page.t("vocab.merges_help_sp", merged=f"{facts.n_merged:,}"))

    if facts.rank_is_id_offset:
        st.markdown(page.t("vocab.ranges", special=id_range(facts.special_range), bytes=id_range(facts.byte_range),
                           merged=id_range(facts.merged_range)))
    else:
        st.markdown(page.t("vocab.ranges_sp", special=f"{len(facts.special):,}", added=f"{facts.n_added:,}",
                           bytes=f"{facts.n_single_bytes:,}", chars=f"{facts.n_chars:,}", merged=f"{facts.n_merged:,}",
                           size=f"{facts.size:,}"))
    if facts.missing_bytes:
        st.caption(page.t("vocab.missing", n=len(facts.missing_bytes),
                          bytes=", ".join(f"{b:02X}" for b in facts.missing_bytes)))
    theme.plot(length_histogram(facts.length_counts, page.t("vocab.hist_title"), page.t("vocab.hist_x"),
                                page.t("vocab.hist_y")),
               key="vocab_lengths", height=340, title_width=70)
    tab_words, tab_longest, tab_merges, tab_special = st.tabs(
        [page.t("vocab.tab_words"), page.t("vocab.tab_longest"), page.t("vocab.tab_merges"), page.t("vocab.tab_special")])
    col_id, col_piece, col_bytes = page.t("table.id"), page.t("table.piece"), page.t("vocab.col_bytes")
    tab_words.dataframe(theme.arrow_table({col_id: [i for i, _, _ in facts.longest_words],
                                      col_piece: [label(s, 40) for _, s, _ in facts.longest_words],
                                      col_bytes: [n for _, _, n in facts.longest_words]}), hide_index=True, width="stretch")
    tab_longest.dataframe(theme.arrow_table({col_id: [i for i, _, _ in facts.longest],
                                        col_piece: [label(s, 40) for _, s, _ in facts.longest],
                                        col_bytes: [n for _, _, n in facts.longest]}), hide_index=True, width="stretch")
    tab_merges.dataframe(theme.arrow_table({page.t("vocab.col_rank"): range(len(facts.first_merges)),
                                       page.t("vocab.col_pair"): [f"{label(a)} + {label(b)}" for a, b in facts.first_merges],
                                       col_id: list(facts.first_merge_ids)}),
                         hide_index=True, width="stretch")
    tab_special.dataframe(theme.arrow_table({col_id: [i for i, _ in facts.special], col_piece: [s for _, s in facts.special]}),
                          hide_index=True, width="stretch")

    # --- what to notice ---------------------------------------------------------------------------
    ordinary = [tok for tok in tokens if not tok.special and not tok.added]
    eos_text = i18n.join_list(code_span(lm.token_text(i)) for i in eos) or "—"
    found = [N.counts_notice(chars=counts.chars, utf8_bytes=counts.utf8_bytes, tokens=counts.tokens,
                             chars_per_token=counts.chars_per_token),
             N.split_notice(split=split, sentencepiece=sentencepiece, char=lambda s: code_span(label(s, CHAR_LIMIT)),
                            code_point=char_code)]
    found += N.longest_notice(ordinary=ordinary, label=lambda tok: md_label(tok, 30))
    found += N.ids_notice(merged=[tok for tok in ordinary if T.piece_kind(lm, tok.id) == "merged"], label=md_label,
                          rank_is_id_offset=facts.rank_is_id_offset, merges_follow_ids=facts.merges_follow_ids,
                          merged_first=facts.merged_range.first if facts.merged_range else None,
                          n_merges=facts.n_merges, common_rules=COMMON_RULES)
    found += N.chars_notice(char_ids=[tok.id for tok in ordinary if T.piece_kind(lm, tok.id) == "char"],
                            total=len(ordinary), char_first=facts.char_range.first if facts.char_range else None,
                            example=lambda i: i18n.with_paren(md_label(lm.token_text(i)), f"{i:,}"), join=i18n.join_list)
    found += N.digits_notice(n_digits=sum(tok.text.strip().isdigit() for tok in tokens))
    found.append(N.cost_notice(parallel=[[c.tokens for c in cs] for cs in parallel],
                               zh_chars=(sum(len(row[1]) for row in PARALLEL), sum(len(row[2]) for row in PARALLEL))))
    found.append(N.letters_notice(word=md_label(word, 30), letter=code_span(letter), count=true_count,
                                  pieces=" ".join(md_label(tok, 30) for tok in lm.tokenize(" " + word) if not tok.added)))
    found += N.chat_notices(templated=templated, tokens=counts.tokens, added=counts.added, chat_tokens=len(chat_toks),
                            chat_specials=len(specials), typed=typed, bos=code_span(bos or "—"), eos=eos_text,
                            typed_label=lambda tok: i18n.with_paren(code_span(tok.text), tok.id), join=i18n.join_list)
    page.notices(found)
    page.try_this()

    # --- the math: BPE, one merge at a time, on the chosen word ------------------------------------
    steps = cache.merge_steps(lm, word)
    example = ""
    if len(steps) > 1 and not sentencepiece:
        rows = [page.t("math_row", step=n, pieces=" · ".join(code_span(label(p)) for p in s.pieces),
                       pair=code_span(label(s.merged[0]) + "+" + label(s.merged[1])), rank=f"{s.rank:,}")
                for n, s in enumerate(steps) if s.merged]
        example = page.t("math_example", word=md_label(" " + word, 30), n_bytes=len((" " + word).encode("utf-8")),
                         start=" · ".join(code_span(label(p)) for p in steps[0].pieces[:40])) + "\n\n" + "\n".join(rows)
    elif len(steps) > 1:
        rows = [page.t("math_row_sp", step=n, pieces=" · ".join(code_span(label(p)) for p in s.pieces),
                       pair=code_span(label(s.merged[0]) + "+" + label(s.merged[1])), id=f"{s.piece_id:,}")
                for n, s in enumerate(steps) if s.merged]
        example = page.t("math_example_sp", word=md_label(" " + word, 30), n_chars=len(steps[0].pieces),
                         start=" · ".join(code_span(label(p)) for p in steps[0].pieces[:40])) + "\n\n" + "\n".join(rows)
    if facts.rank_is_id_offset:
        example += "\n\n" + page.t("math_vocab", special=len(facts.special), bytes=facts.n_single_bytes,
                                   merges=f"{facts.n_merges:,}", size=f"{facts.size:,}")
    else:
        example += "\n\n" + page.t("vocab.ranges_sp", special=f"{len(facts.special):,}", added=f"{facts.n_added:,}",
                                   bytes=f"{facts.n_single_bytes:,}", chars=f"{facts.n_chars:,}",
                                   merged=f"{facts.n_merged:,}", size=f"{facts.size:,}")
    page.math(example)
    page.code(T.bpe_merge_steps, TokenizerView.token_bytes, bytes_as_text, T.character_groups, T.literal_tokens)


render()
