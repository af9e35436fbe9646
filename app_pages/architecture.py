"""Lesson 11: architecture vs weights. The two bundled models side by side (their cards read from
configs and tensors), where the parameters live (a calculator with presets), training in one
picture (the loss at every position of one forward pass), and post-training (the same question
to the instruct model and to the base model)."""

from dataclasses import replace

import streamlit as st

from course import nav, state, theme
from course.cache import architecture as cache
from course.figures import architecture as F
from course.figures import context as F_CTX
from course.i18n import big_number, t
from course.lesson import Lesson
from course.model import MODELS, get_model
from course.notices import architecture as N
from course.notices import decoder_only as N_DEC
from course.text import code_span, html_escape, md_escape, shorten, show_format
from course.tokens import axis_labels, md_label
from lesson_model.analysis import architecture as AR
from lesson_model.analysis import decoder_only as DO
from lesson_model.analysis import params as P
from lesson_model.decoder import MLP, Attention

CAP = cache.CAP       # tokens of the prompt the loss section runs
NEW_TOKENS = 36       # tokens each model writes in the post-training comparison
# The calculator's fields: (URL key, ArchConfig attribute)
FIELDS = (("n_layers", "n_layers"), ("d_model", "d_model"), ("n_heads", "n_heads"), ("n_kv", "n_kv_heads"),
          ("d_head", "d_head"), ("d_ff", "d_ff"), ("vocab", "vocab_size"), ("n_exp", "n_experts"),
          ("k_exp", "experts_per_token"))
SEEN = "_architecture_preset_seen"      # the preset the fields were last filled from
ASKED = "_architecture_asked"           # the question the post-training comparison was run on


def fmt(value) -> str:
    """A card fact as text: 49152 -> 49,152; 100000.0 -> 100,000; 2.67 stays."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and not value.is_integer():
        return f"{value:g}"
    if isinstance(value, (int, float)):
        return f"{int(value):,}"
    return str(value)


def render() -> None:
    """The lesson, top to bottom: its variables live only while it runs."""
    page = Lesson("architecture")
    page.header()
    lm = page.model()
    page.predict(lm)                  # Predict, then see: before the figures that answer it
    cfg = lm.cfg
    models = {key: get_model(key) for key in MODELS}        # both bundled models (cached per process)
    names = {key: m.name for key, m in models.items()}


    def cell(row: AR.CardRow) -> str:
        facts = {k: fmt(v) for k, v in row.facts.items()}
        if row.key == "params":
            facts["total"] = big_number(row.facts["total"])
        return page.t(f"card.{row.key}.{row.variant}", **facts)


    # --- 0. decoder-only, and the encoder-decoder it came from ---------------------------------
    dec_found = _decoder_only_section(page, lm)

    # --- 1. same skeleton, different choices ----------------------------------------------------
    page.part("card", page.t("card_title"))
    page.prose("card")
    card_rows = cache.cards(tuple(names.values()), _models=models)
    by_key = dict(zip(MODELS, card_rows))
    differ = AR.differing(*card_rows)
    with st.container(border=True, key="card"):
        head = st.columns([4, 5, 5], vertical_alignment="bottom")
        head[0].markdown(f"**{page.t('card.property')}**")
        for col, key in zip(head[1:], MODELS):
            col.markdown(f"**{page.t('card.loaded' if key == lm.bundled.key else 'card.other', name=names[key])}**")
        for i, ckey in enumerate(AR.CARD_KEYS):
            lesson = by_key[MODELS[0]][i].lesson
            cols = st.columns([4, 5, 5], vertical_alignment="center")
            cols[0].page_link(nav.page_file(lesson), label=page.t(f"card.{ckey}.label"), icon=nav.ICONS[lesson],
                              help=page.t("card.link_help", lesson=t(f"nav.{lesson}")))
            for col, key in zip(cols[1:], MODELS):
                text = cell(by_key[key][i])
                col.markdown(f":orange-background[{text}]" if ckey in differ else text)
    st.caption(page.t("card.caption", n=len(differ), total=len(AR.CARD_KEYS)))

    # --- 2. where the parameters live -------------------------------------------------------------
    page.part("calc", page.t("calc_title"))
    page.prose("calc")
    presets = {key: P.config_of(m) for key, m in models.items()} | dict(P.PRESETS)
    with st.container(border=True, key="calc"):
        top = st.columns([3, 2, 3], vertical_alignment="bottom")
        preset = state.url_choice("arch", page.t("calc.preset"), list(presets), lm.bundled.key,
                                  format_func=lambda k: names.get(k) or presets[k].name, container=top[0])
        base = presets[preset]
        seen = st.session_state.get(SEEN)
        if seen is not None and seen != preset:          # a new preset: its values fill the fields
            for key, attr in FIELDS:
                state.set_value(key, getattr(base, attr))
            state.set_value("tied", base.tied_embeddings)
        st.session_state[SEEN] = preset
        values = {}
        grid = st.columns(5)
        for n, (key, attr) in enumerate(FIELDS):
            lo, hi = AR.LIMITS[attr]
            values[attr] = state.url_int(key, page.t(f"calc.field.{key}"), lo, hi, getattr(base, attr), widget="number",
                                         help=page.t(f"calc.help.{key}"), container=grid[n % 5])
        values["tied_embeddings"] = state.url_bool("tied", page.t("calc.field.tied"), base.tied_embeddings,
                                                   help=page.t("calc.help.tied"), container=top[1])
        edited = [key for key, attr in FIELDS if values[attr] != getattr(base, attr)]
        if values["tied_embeddings"] != base.tied_embeddings:
            edited.append("tied")
        shown_name = names.get(preset) or base.name
        with top[2]:
            if edited:
                st.markdown(page.t("calc.edited", name=shown_name, fields=", ".join(code_span(k) for k in edited)))
            else:
                st.markdown(page.t("calc.as_published", name=shown_name))
        config = replace(base, **values)
        bad = AR.problems(config)
        for reason, fields in bad:
            if reason == "range":
                fields = dict(fields, field=code_span(next(k for k, a in FIELDS if a == fields["field"])))
            st.warning(page.t(f"bad.{reason}", **{k: fmt(v) if k != "field" else v for k, v in fields.items()}),
                       icon=":material/error:")

    real = {key: P.model_breakdown(m) for key, m in models.items()}           # the real tensors
    calc = None
    if not bad:
        calc = AR.calculate(config)
        moe = config.n_experts > 1
        m = st.columns(4)
        m[0].metric(page.t("calc.total"), big_number(calc["total"]), help=f"{calc['total']:,}")
        if moe:
            m[1].metric(page.t("calc.active"), big_number(calc["active"]), help=f"{calc['active']:,}")
        else:
            m[1].metric(page.t("calc.embedding_share"), f"{calc['shares']['embedding']:.0%}")
        mem = calc["memory"]
        m[2].metric(page.t("calc.memory"), page.t("calc.gb", n=f"{mem['bf16'] / 1e9:,.2f}"),
                    help=page.t("calc.memory_help", fp32=f"{mem['fp32'] / 1e9:,.2f}", bf16=f"{mem['bf16'] / 1e9:,.2f}",
                                int4=f"{mem['int4'] / 1e9:,.2f}"))
        m[3].metric(page.t("calc.kv"), page.t("calc.kib", n=f"{calc['kv_bytes']['bf16'] / 1024:,.1f}"),
                    help=page.t("calc.kv_help", values=f"{calc['kv_values']:,}", L=config.n_layers, kv=config.n_kv_heads,
                                dh=config.d_head))
        st.markdown(page.t("calc.memory_line", fp32=f"{mem['fp32'] / 1e9:,.2f}", bf16=f"{mem['bf16'] / 1e9:,.2f}",
                           int4=f"{mem['int4'] / 1e9:,.2f}"))
        rows = [(html_escape(names[key]), real[key].parts) for key in MODELS]
        if edited or preset not in MODELS:
            label = page.t("split.edited", name=shown_name) if edited else shown_name
            rows.append((html_escape(label), calc["parts"]))
        theme.plot(F.split_figure(page.t, [r[0] for r in rows], [r[1] for r in rows], lambda n: f"{n:,}"),
                   key="split_chart", height=230 + 50 * len(rows))

    # --- 3. training in one picture ----------------------------------------------------------------
    page.part("train", page.t("train_title"))
    page.prose("train")
    font = theme.font_family().split(",")[0]
    theme.diagram(F.training_diagram(page.t, font))
    page.prose("parallel")
    tokens = page.tokens(lm, cap=CAP)
    if len(tokens) >= 3:     # shift-right, on the prompt's first tokens
        st.markdown(page.t("shift_right", a=md_label(tokens[0]), b=md_label(tokens[1]), c=md_label(tokens[2])))
    loss = None
    if len(tokens) < 2:
        st.info(page.t("loss.one_token"), icon=":material/info:")
    else:
        run = cache.lesson_run(lm, tokens)
        loss = AR.position_losses(run.ids, run.logits)
        labels = axis_labels(tokens)[1:]                 # position t predicts token t + 1
        theme.plot(F.loss_figure(page.t, labels, loss.tolist(), float(loss.mean())), key="loss_chart", height=360)
    st.page_link(nav.page_file("train"), label=page.t("train_link", title=t("nav.train")), icon=nav.ICONS["train"])

    # --- 4. post-training ----------------------------------------------------------------------------
    page.part("post", page.t("post_title"))
    page.prose("post")
    instruct_key = next((k for k in MODELS if models[k].tokenizer.chat_template is not None), None)
    base_key = next((k for k in MODELS if models[k].tokenizer.chat_template is None), None)
    post = None
    if instruct_key is None or base_key is None:
        st.info(page.t("post.unavailable"))
    else:
        with st.container(border=True, key="post"):
            q_col, b_col = st.columns([3, 1], vertical_alignment="bottom")
            sources = {o: page.t(f"post.source_{o}") for o in ("example", "prompt")}   # labels fixed now, in this language
            source = state.url_choice("ask", page.t("post.source"), list(sources), "example", widget="radio",
                                      format_func=sources.__getitem__, container=q_col)
            question = page.t("post.question") if source == "example" else state.prompt().strip()
            q_col.markdown(page.t("post.asking", question=md_escape(shorten(question, 120))))
            if b_col.button(page.t("post.run"), key="post_run", icon=":material/play_arrow:", type="primary",
                            disabled=not question):
                st.session_state[ASKED] = question
            if st.session_state.get(ASKED) == question and question:
                with st.spinner(page.t("post.spinner", a=names[instruct_key], b=names[base_key], n=NEW_TOKENS)):
                    pair = (models[instruct_key], models[base_key])
                    post = [AR.Reply(**r) for r in cache.replies(question, (names[instruct_key], names[base_key]),
                                                                NEW_TOKENS, _models=pair)]
                for col, reply in zip(st.columns(2), post):
                    with col:
                        st.markdown(f"**{page.t('post.instruct' if reply.chat else 'post.base', name=reply.model)}**")
                        st.caption(page.t("post.fed"))
                        st.code(show_format(reply.prompt), language=None, wrap_lines=True)
                        st.caption(page.t("post.wrote", n=len(reply.ids)))
                        st.code(show_format(reply.text), language=None, wrap_lines=True)
            else:
                st.caption(page.t("post.hint", n=NEW_TOKENS))

    # --- What to notice --------------------------------------------------------------------------------
    def side(key: str) -> N.Side:
        return N.Side(names[key], models[key].cfg.vocab_size, models[key].cfg.d_model, real[key].parts["embedding"],
                      real[key].total)


    found = [N.embedding_notice(side(MODELS[0]), side(MODELS[1]), big=big_number),
             N.differ_notice(n=len(differ), total=len(AR.CARD_KEYS))]
    if calc is not None:
        found += N.moe_notices(name=shown_name, n_experts=config.n_experts, experts_per_token=config.experts_per_token,
                               total=calc["total"], active=calc["active"], big=big_number)
    if loss is not None:
        found.append(N.loss_notice(n=len(tokens), losses=loss.tolist(), mean=float(loss.mean()),
                                   label=lambda i: md_label(tokens[i])))
    if post is not None:
        found += N.post_notices(*post)
    page.notices(dec_found + found)
    page.try_this()

    # --- The math ----------------------------------------------------------------------------------------
    mine = P.count_params(P.config_of(lm))
    page.math(page.t("math_example", name=lm.name, d=cfg.d_model, h=cfg.n_heads, kv=cfg.n_kv_heads, dh=cfg.d_head,
                     f=cfg.d_ff, V=f"{cfg.vocab_size:,}", L=cfg.n_layers, attn=f"{mine.per_layer['attention']:,}",
                     mlp=f"{mine.per_layer['mlp']:,}", norms=f"{mine.per_layer['norms']:,}",
                     emb=f"{mine.parts['embedding']:,}", final=f"{mine.final_norm:,}", total=f"{mine.total:,}",
                     real=f"{real[lm.bundled.key].total:,}"))
    page.code(P.count_params, Attention.__init__, MLP.__init__, AR.position_losses, AR.post_training)


def _decoder_only_section(page: Lesson, lm) -> list:
    """The original encoder-decoder beside the decoder-only model loaded here (a diagram with its
    text alternative), what this model keeps and drops (read from its modules), and why most
    LLMs today are decoder-only. Returns the facts as notices."""
    page.part("decoder", page.t("dec.title"))
    page.prose("decoder_only")
    facts = DO.decoder_only_facts(lm)
    font = theme.font_family().split(",")[0]
    # (presenter mode: narrower than the column, so the whole diagram is on the first screen)
    theme.diagram(F_CTX.encoder_decoder_diagram(page.t, font, facts.n_blocks), width=theme.projected("stretch", 640))
    st.caption(page.t("dec.caption", n=facts.n_blocks))
    found = N_DEC.decoder_only_notices(model=lm.name, n_blocks=facts.n_blocks,
                                       attention_per_block=facts.attention_per_block,
                                       encoder_modules=facts.encoder_modules, causal=facts.causal,
                                       embedding_tables=facts.embedding_tables)
    st.markdown("\n".join(f"- {page.t(key, **fields)}" for key, fields in found))
    page.prose("decoder_why")
    return found


render()
