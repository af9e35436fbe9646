"""The app shell around every page: language, shared prompt, navigation, model status."""

from __future__ import annotations

import copy
import functools
import re

import streamlit as st

from classroom import access, presenter
from course import i18n, nav, state
from course import model as models
from course.i18n import t
from course.model import get_model
from course.text import code_span, md_escape, shorten
from server import status as warmup

EXAMPLE_COUNT = 4

# The document's language and a font stack per script: without them Chromium draws Chinese
# with its Japanese fallback (Japanese glyph forms, punctuation placed the Japanese way).
HTML_LANG = {"en": "en", "zh-Hant": "zh-Hant-TW", "zh-Hans": "zh-Hans-CN"}
FONT_STACK = {
    "en": '"Source Sans", "Source Sans Pro", "Noto Sans", sans-serif',
    "zh-Hant": '"Source Sans", "Source Sans Pro", "Noto Sans TC", "Noto Sans CJK TC", "PingFang TC", '
               '"Microsoft JhengHei", sans-serif',
    "zh-Hans": '"Source Sans", "Source Sans Pro", "Noto Sans SC", "Noto Sans CJK SC", "PingFang SC", '
               '"Microsoft YaHei", sans-serif',
}
MONO_STACK = {
    "en": '"Source Code Pro", "Noto Sans Mono", monospace',
    "zh-Hant": '"Source Code Pro", "Noto Sans Mono CJK TC", "Noto Sans CJK TC", monospace',
    "zh-Hans": '"Source Code Pro", "Noto Sans Mono CJK SC", "Noto Sans CJK SC", monospace',
}
# Layout fixes for a projector at 1024x768 and 1280x720: metric values and labels, and
# button labels, wrap instead of being cut to "1,0…" or "N.."; Streamlit's English
# "Press Ctrl+Enter to apply" is replaced by a translated caption.
_CSS = """
html, body, .stApp, .stApp p, .stApp li, .stApp label, .stApp button, .stApp input, .stApp textarea,
.stApp h1, .stApp h2, .stApp h3, .stApp h4, .stApp [data-testid="stMetricValue"],
.stApp [data-testid="stMarkdownContainer"] {{ font-family: {font}; }}
.stApp code, .stApp pre, .stApp kbd {{ font-family: {mono}; }}
[data-testid^="stAlertContent"] :not(pre) > code {{
  background: rgba(255, 255, 255, 0.8); box-shadow: inset 0 0 0 1px rgba(0, 0, 0, 0.14);
}}
[data-testid="stMetricValue"], [data-testid="stMetricValue"] > div,
[data-testid="stMetricLabel"], [data-testid="stMetricLabel"] * {{
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
  overflow-wrap: anywhere;
}}
[data-testid="stMetricValue"] {{ font-size: clamp(1.3rem, 2.2vw, 2.25rem); line-height: 1.2; }}
.stButton button p, .stDownloadButton button p, [data-testid="stPageLink"] p {{
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
  overflow-wrap: anywhere;
}}
.stButton button, .stDownloadButton button {{ height: auto; min-height: 2.5rem; }}
[data-testid="stWidgetLabel"] p {{ white-space: normal !important; overflow: visible !important; }}
[data-testid="InputInstructions"] {{ display: none; }}
.st-key-doc_lang, .st-key-class_cookie {{ display: none; }}
.nowrap {{ white-space: nowrap; }}
/* classroom/access.py: the skip link (first on the page, seen when it has the focus; it replaces
   Streamlit's English one), a visible focus on the lesson links, captions at AA contrast, and no
   chart toolbar over the charts' right edge on a phone. */
[data-testid="stSkipToContent"] {{ display: none !important; }}
.dl-skip {{ position: fixed; left: -10000px; top: 0.5rem; z-index: 1000100; padding: 0.5rem 1rem;
  background: {bg}; color: {link}; border: 2px solid {link}; border-radius: 0.5rem; font-weight: 600; }}
.dl-skip:focus {{ left: 0.5rem; }}
[data-testid="stSidebarNavLink"]:focus-visible, .stApp a:focus-visible {{ outline: 2px solid {link}; outline-offset: -2px; }}
[data-testid="stMain"] h1:focus {{ outline: none; }}
.stApp [data-testid="stCaptionContainer"], .stApp [data-testid="stCaptionContainer"] * {{ color: {muted}; opacity: 1; }}
/* the chosen option of a segmented control: Streamlit draws it in its primary red on a pale red,
   #c53948 on #f3e5e6 (4.1:1); a darker red (light) or a pale one on a dark red (dark) reads at AA */
.stApp button[data-variant="segmented_control"][data-selected="true"]:not(:disabled),
.stApp button[data-variant="segmented_control"][data-selected="true"]:not(:disabled) * {{ color: {chosen}; }}
.stApp button[data-variant="segmented_control"][data-selected="true"]:not(:disabled) {{ background-color: {chosen_bg}; }}
@media (max-width: 640px) {{
  [data-testid="stPlotlyChart"] .modebar-container {{ display: none !important; }}
}}
{dark}
"""
# The light theme's captions (Streamlit's #828180 is 3.88:1 on white; this is 6.7:1, 6.2:1 on
# the sidebar's grey) and the dark theme's fixes of the course's own light-only CSS.
THEME_CSS = {
    "light": dict(bg="#ffffff", link="#0b57d0", muted="#5b5a58", chosen="#9b1c2c", chosen_bg="#f3e5e6", dark=""),
    "dark": dict(bg="#0e1117", link="#8ab4f8", muted="#c1c3c7", chosen="#ffc9ce", chosen_bg="#3b1c22", dark="""
[data-testid^="stAlertContent"] :not(pre) > code {{ background: rgba(0, 0, 0, 0.35); box-shadow: inset 0 0 0 1px rgba(255, 255, 255, 0.2); }}
.st-key-present_header {{ background: #0e1117 !important; }}
.stApp [data-testid="stSliderThumbValue"], .stApp [data-testid="stSliderThumbValue"] * {{ color: #ff9aa2; }}
"""),
}
_LANG_SCRIPT = "<script>document.documentElement.lang = {lang!r};</script>"


def page_style() -> None:
    """The document language and the course's CSS for this session's language."""
    lang = i18n.current_lang()
    colours = THEME_CSS["dark" if access.dark() else "light"]
    st.html("<style>" + _CSS.format(font=FONT_STACK[lang], mono=MONO_STACK[lang], **{
        **colours, "dark": colours["dark"].format()}) + "</style>")
    with st.container(key="doc_lang"):
        st.html(_LANG_SCRIPT.format(lang=HTML_LANG[lang]), unsafe_allow_javascript=True)
        access.draw()


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
    if "_model" not in st.session_state:
        # The first model follows the visitor's language (Gemma reads Chinese, SmolLM2 does not);
        # after that it changes only when they change it. A link's ?model= fixes it for everyone.
        raw = state.url_raw("model")
        asked = raw.strip().lower() if raw is not None else None      # ?model=Gemma-3-270M is fine too
        models.set_model_key(asked if asked in models.MODELS else models.default_model(i18n.current_lang()))
        if raw is not None and asked not in models.MODELS:
            notes.append(t("shell.bad_model", param=code_span(f"model={shorten(raw, 40)}"),
                           name=models.model_name(models.model_key())))
    note = state.init_prompt()
    if note:
        notes.append(note)
    note = presenter.init()        # ?present=1, claimed on every run (before set_page_config reads it)
    if note:
        notes.append(note)
    note = access.init()           # ?theme=dark, claimed on every run
    if note:
        notes.append(note)
    state.claim("lang", i18n.current_lang())
    state.claim("model", models.model_key())
    return notes


def navigation():
    """st.navigation over the course, titles translated for this run. Every lesson listed:
    collapsed, Streamlit's menu ended in its own "View 4 more", in English in every language.

    The pages are copies of one set per language made once for the process. Made anew, the 14
    st.Page objects resolve their files on disk: about 70 stat calls a run (0.6 ms), each giving
    the GIL away and waiting for it again behind every other session's thread when a class is on
    the server. Copies (0.03 ms), because st.navigation and page.run() mark the page they run
    on the object itself."""
    return st.navigation({section: [copy.copy(page) for page in pages]
                          for section, pages in _page_set(i18n.current_lang()).items()}, expanded=True)


@functools.cache
def _page_set(lang: str) -> dict[str, list]:
    """The course's pages with their titles in ``lang`` (the run's language, which t() reads)."""
    sections = {}
    for section, pages in nav.SECTIONS:
        sections[t(f"nav.section.{section}")] = [
            st.Page(nav.page_file(page), title=t(f"nav.{page}"), icon=icon,
                    url_path=page, default=page == nav.HOME)
            for page, icon in pages
        ]
    return sections


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
        access.toggle()
        st.session_state["prompt"] = state.prompt()
        st.text_area(t("prompt.label"), key="prompt", on_change=_on_prompt, height=110,
                     max_chars=state.PROMPT_MAX_CHARS, help=t("prompt.help"))
        st.caption(t("prompt.apply_hint", n=f"{state.PROMPT_MAX_CHARS:,}"))
        state.claim_prompt()
        with st.expander(t("prompt.examples"), icon=":material/lightbulb:"):
            for n in range(1, EXAMPLE_COUNT + 1):
                example = t(f"prompt.example.{n}")
                st.button(md_escape(shorten(example, 48)), key=f"example_{n}", width="stretch",
                          on_click=state.set_prompt, args=(example,))
            st.button(t("prompt.reset"), key="example_reset", width="stretch", icon=":material/restart_alt:",
                      on_click=state.set_prompt, args=(t("prompt.default"),))


def _on_model() -> None:
    models.set_model_key(st.session_state["model_choice"])


def _bits(fmt: str) -> int | None:
    """Bits per weight of a GGUF storage format: Q4_1 -> 4, Q6_K -> 6, IQ4_XS -> 4, F16 -> 16."""
    match = re.match(r"I?Q(\d)", fmt) or re.match(r"B?F(\d+)", fmt)
    return int(match.group(1)) if match else None


def model_caption(lm) -> str:
    """What the session's model is, for the sidebar: instruct or base, what it reads well, its
    size and device, and the precision its weights were stored in (read from the model)."""
    spec = lm.bundled
    kind = t("shell.instruct") if spec.instruct else t("shell.base")
    reads = t(f"shell.reads.{'_'.join(spec.reads)}")
    lines = [t("shell.model_status", kind=kind, reads=reads),
             t("shell.model_size", params=i18n.big_number(lm.param_counts()["total"]),
               device=md_escape(lm.device.type.upper()))]
    quantized = [f for f in (lm.weight_formats or ()) if (_bits(f) or 32) < 16]   # the norms stay float
    if quantized:
        bits = sorted({_bits(f) for f in quantized})
        key = "shell.quantized" if len(bits) > 1 else "shell.quantized_one"
        lines.append(t(key, low=bits[0], high=bits[-1], fmt=i18n.join_list(quantized)))
    return "  \n".join(lines)


def licence_caption(lm) -> str:
    """Whose terms apply to the weights: our own translated line for a bundled model (it links
    the terms), else the registry's line."""
    key = f"shell.licence_of.{models.MODEL_TAGS.get(lm.bundled.key, '')}"
    return t(key) if i18n.has(key) else t("shell.licence", licence=md_escape(lm.bundled.licence))


def model(url_path: str | None = None):
    """The model picker and what the chosen model is, in the sidebar; loads it on first use
    (not on the pages that run no bundled model, course.nav.NO_MODEL: the choice is kept for the
    next page, nothing is loaded)."""
    with st.sidebar:
        st.session_state["model_choice"] = models.model_key()
        st.selectbox(t("shell.model"), list(models.MODELS), format_func=models.model_name, key="model_choice",
                     on_change=_on_model, help=t("shell.model_help"))
    state.claim("model", models.model_key())
    # Written now, not only by state.sync_url at the end of the run: when the model's package is
    # missing, get_model stops the run, and the link must still say which model was asked for.
    for key, value in (("lang", i18n.current_lang()), ("model", models.model_key())):
        if st.query_params.get(key) != value:
            st.query_params[key] = value
    ready = warmup.progress()
    if ready is not None:          # the teacher can see when the server is ready for a class
        with st.sidebar:
            st.caption(t("model.warmup", done=ready[0], total=ready[1]))
    if url_path in nav.NO_MODEL:
        return None
    lm = get_model()
    with st.sidebar:
        st.caption(model_caption(lm))
        st.caption(licence_caption(lm))
    return lm


def lesson_footer(url_path: str) -> None:
    """Previous / next lesson links and "Lesson n of N" at the end of every page, so a
    teacher who has hidden the sidebar can move on without opening it."""
    page = url_path or nav.HOME
    if page not in nav.PAGES:
        return
    i = nav.PAGES.index(page)
    st.divider()
    left, middle, right = st.columns([2, 1, 2], vertical_alignment="center")
    if i > 0:
        prev = nav.PAGES[i - 1]
        left.page_link(nav.page_file(prev), label=t("lesson.prev", title=t(f"nav.{prev}")),
                       icon=":material/arrow_back:")
    where = presenter.place_text(page)          # "Lesson 4 of 11", "Lab 1 of 2" (course/nav.py)
    if where:
        middle.caption(where)
    if i + 1 < len(nav.PAGES):
        nxt = nav.PAGES[i + 1]
        key = "lesson.start" if i == 0 else "lesson.next"
        with right:
            st.page_link(nav.page_file(nxt), label=t(key, title=t(f"nav.{nxt}")), icon=":material/arrow_forward:")
