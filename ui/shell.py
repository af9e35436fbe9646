"""The app shell around every page: language, shared prompt, navigation, model status."""

from __future__ import annotations

import streamlit as st

from ui import i18n, nav, state
from ui.i18n import t
from ui.model import get_model
from ui.text import code_span, md_escape, shorten

EXAMPLE_COUNT = 4


def start() -> list[str]:
    """Set up the run: URL record, language, prompt. Returns notes about the URL to show."""
    state.begin_run()
    notes = []
    if "_lang" not in st.session_state:
        raw = state.url_raw("lang")
        lang = i18n.parse_lang(raw) if raw is not None else None
        if lang is None:
            lang = i18n.lang_from_locale(st.context.locale)
        i18n.set_lang(lang)
        if raw is not None and i18n.parse_lang(raw) is None:
            notes.append(t("shell.bad_lang", param=code_span(f"lang={shorten(raw, 40)}"),
                           lang=i18n.LANGS[lang]))
    note = state.init_prompt()
    if note:
        notes.append(note)
    state.claim("lang", i18n.current_lang())
    return notes


def navigation():
    """st.navigation over the course, titles translated for this run."""
    sections = {}
    for section, pages in nav.SECTIONS:
        sections[t(f"nav.section.{section}")] = [
            st.Page(nav.page_file(page), title=t(f"nav.{page}"), icon=icon,
                    url_path=page, default=page == nav.HOME)
            for page, icon in pages
        ]
    return st.navigation(sections)


def _on_lang() -> None:
    i18n.set_lang(st.session_state["language"])


def _on_prompt() -> None:
    state.set_prompt(st.session_state["prompt"])


def sidebar() -> None:
    """Language, and the shared prompt with examples."""
    with st.sidebar:
        st.session_state["language"] = i18n.current_lang()
        st.selectbox(t("shell.language"), list(i18n.LANGS), format_func=i18n.LANGS.get,
                     key="language", on_change=_on_lang)
        st.session_state["prompt"] = state.prompt()
        st.text_area(t("prompt.label"), key="prompt", on_change=_on_prompt, height=110,
                     max_chars=state.PROMPT_MAX_CHARS, help=t("prompt.help"))
        state.claim_prompt()
        with st.expander(t("prompt.examples"), icon=":material/lightbulb:"):
            for n in range(1, EXAMPLE_COUNT + 1):
                example = t(f"prompt.example.{n}")
                st.button(md_escape(shorten(example, 48)), key=f"example_{n}", width="stretch",
                          on_click=state.set_prompt, args=(example,))
            st.button(t("prompt.reset"), key="example_reset", width="stretch", icon=":material/restart_alt:",
                      on_click=state.set_prompt, args=(t("prompt.default"),))


def model():
    """The shared model (loading it on first use), with its status in the sidebar."""
    lm = get_model()
    st.sidebar.caption(t("shell.model_status", name=md_escape(lm.name), device=md_escape(str(lm.device)),
                         params=f"{lm.param_counts()['total'] / 1e6:.1f}"))
    return lm
