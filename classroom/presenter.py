"""Presenter mode and teacher tools: ``?present=1``, "Share this view", chart downloads.

Presenter mode is a shell-level URL parameter (like lang, prompt and model): read the first
time a session meets it, kept in the session (``_url.present``) and claimed on every run, so
it survives page switches and is in every link the teacher copies. In presenter mode the
sidebar starts collapsed, type is large enough for the back of a room (CSS here, plotly
sizes in course/figures/style.py), Streamlit's menu is hidden, and a compact header at the top shows
the shared prompt with big Previous / Next lesson buttons and "Share this view".

The share popover is drawn at the END of the run (``finish``), once the page has claimed its
own URL parameters (layer, head, ...), so the link is the exact view: every parameter the
URL will hold after this run, and the current page.

A projected page fits the screen: the header is one row (where this page is in the course,
the prompt, the page's sections, Previous / Next), a part's prose is folded under its heading
and "Predict, then see" to one line, its question (course/lesson.py), so that at 1024x768 the
first screen shows the page's first chart whole, and the page's sections are listed in the
header to jump to. ``?section=``
is the part on screen: the header's list sets it, the browser scrolls there once per jump,
and, being a URL parameter of the run, it is in the shared link and in a teacher's view, so a
class's followers are taken to the teacher's section (classroom/follow.py publishes every URL
parameter). Keys (a listener in the page, presenter mode only): ← and → go to the previous and
next lesson, S opens the list of sections.
"""

from __future__ import annotations

import json
from urllib.parse import quote, urlencode, urlsplit

import segno
import streamlit as st

from classroom.qr import qr_svg
from course import lesson, nav, state
from course.figures import style
from course.i18n import current_lang, t
from course.text import code_span, md_escape, shorten

PARAM = "present"
_CANON = "_url.present"
_PAGE = "_present_page"           # the page this run draws (chart download names)
_SLOT = "_present_share_slot"     # where the header keeps room for the share popover
EXPORT_FORMAT = "export_format"   # widget key: "png" | "svg", the format of the charts' download
EXPORT_FORMATS = ("png", "svg")
PROMPT_CHARS = 90                 # the compact header's prompt, cut with an ellipsis
SECTION = "section"               # URL parameter: the part of the page the presenter jumped to
_SECTION = "_url.section"         # (page, section id); a follower's view forgets it (state.forget_values)
_SECTION_SLOT = "_present_section_slot"
_JUMP = "_present_jump"           # how many jumps this session made (a second jump to a part scrolls again)
_SCROLLED = "_present_scrolled"   # the (page, section, jump) this session's browser was last scrolled to
PICK = "present_section"          # widget key: the header's list of sections
QR_PX = 300                       # the QR's width in the popover (scannable from a projected slide)
QR_ERROR = "m"                    # as classroom.qr draws it
QR_BORDER = 4                     # the quiet zone the QR standard asks for, in modules
# The share popovers' keys (the header's, the sidebar's). Their link and QR code are drawn only
# while one is open: encoding a QR code cost 28 ms, and every rerun drew two (a tenth of a rerun).
SHARE_POPOVERS = ("share_header", "share_sidebar")
FALLBACK_BASE = "http://localhost:8501"


# Presenter-mode type, checked at 1024x768 by tests/browser/test_presenter.py: body text,
# captions, widget labels, metric values and the header's buttons at 20 px or more. The
# toolbar's menu and deploy button are hidden (the sidebar's open button stays).
PRESENT_CSS = """
.stApp [data-testid="stMarkdownContainer"] p, .stApp [data-testid="stMarkdownContainer"] li,
.stApp [data-testid="stCaptionContainer"], .stApp [data-testid="stCaptionContainer"] p,
.stApp [data-testid="stWidgetLabel"] p, .stApp label p, .stApp [data-testid="stMetricLabel"] p,
.stApp button p, .stApp [data-testid="stPageLink"] p, .stApp [data-testid="stAlertContentInfo"] p,
.stApp .stSelectbox div, .stApp [data-testid="stTickBarMin"], .stApp [data-testid="stTickBarMax"],
.stApp [data-testid="stSliderThumbValue"], .stApp td, .stApp th, .stApp [data-testid="stExpander"] summary p {
  font-size: 20px !important; line-height: 1.45;
}
.stApp code:not(pre code) { font-size: 20px !important; }
.stApp .katex { font-size: 24px !important; }
.stApp [data-baseweb="select"] div, .stApp input, .stApp textarea { font-size: 20px !important; }
[data-testid="stMainBlockContainer"] { padding-top: 0.75rem !important; }
[data-testid="stHeader"] { background: transparent !important; }
[data-testid="stHeader"], [data-testid="stHeader"] * { pointer-events: none !important; }
[data-testid="stHeader"] button, [data-testid="stHeader"] a { pointer-events: auto !important; }
.stApp [data-testid="stMetricValue"], .stApp [data-testid="stMetricValue"] > div,
.stApp [data-testid="stMetricValue"] [data-testid="stMarkdownContainer"] p {
  font-size: clamp(30px, 3.4vw, 44px) !important; line-height: 1.15; font-weight: 600;
}
.stApp h1 { font-size: 34px !important; padding-top: 0 !important; padding-bottom: 0 !important; }
.stApp h2 { font-size: 32px !important; }
.stApp h3 { font-size: 26px !important; }
[data-testid="stMainMenu"], [data-testid="stToolbarActions"], [data-testid="stAppDeployButton"],
.stDeployButton, [data-testid="stDecoration"] { display: none !important; }
.st-key-present_header { position: sticky; top: 0; z-index: 5; background: white; padding: 0.25rem 0; }
.st-key-present_header button { min-height: 3rem; }
.st-key-present_header button p { font-size: 22px !important; font-weight: 600; }
.st-key-present_header .stButton button p {
  white-space: nowrap !important; overflow: hidden !important; text-overflow: ellipsis !important;
}
.st-key-present_header .stButton button > div { min-width: 0; overflow: hidden; }
.st-key-present_prompt p { font-size: 20px !important; margin: 0; white-space: nowrap; overflow: hidden;
  text-overflow: ellipsis; }
.st-key-present_keys { display: none; }
[data-testid="stMain"] [data-testid="stVerticalBlock"] { gap: 0.6rem; }
.stApp [id^="section-"], .stApp [class*="st-key-section-"] { scroll-margin-top: 5rem; }
"""

# Presenter mode's keys: installed once per browser tab; a key does nothing outside presenter mode
# (no header), in a text field, a list or on a slider (which use the arrows themselves).
KEYS_SCRIPT = """<script>
(() => {
  if (window.decoderLabPresenterKeys) return;
  window.decoderLabPresenterKeys = true;
  const skip = 'input, textarea, select, [contenteditable="true"], [role="slider"], [role="listbox"], '
             + '[role="option"], [role="combobox"], [role="radiogroup"], [role="tablist"], [role="menu"]';
  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    if (!document.querySelector(".st-key-present_header")) return;
    const target = event.target;
    if (target && target.closest && target.closest(skip)) return;
    const press = (selector) => {
      const element = document.querySelector(selector);
      if (!element) return;
      event.preventDefault();
      element.click();
    };
    if (event.key === "ArrowLeft") press(".st-key-present_prev button");
    else if (event.key === "ArrowRight") press(".st-key-present_next button");
    else if (event.key === "s" || event.key === "S") {
      const input = document.querySelector(".st-key-present_section input");
      if (!input) return;
      event.preventDefault();
      input.focus();
      input.click();
      input.dispatchEvent(new KeyboardEvent("keydown", {key: "ArrowDown", code: "ArrowDown", keyCode: 40, bubbles: true}));
    }
  }, true);
})();
</script>"""

# Scrolls to a section's heading once it is in the page (its charts above may still be
# drawing: once more a little later), then forgets itself.
SCROLL_SCRIPT = """<script>
(() => {
  const id = %s;
  let tries = 0;
  const go = () => {
    const heading = document.getElementById(id) || document.querySelector('.st-key-' + CSS.escape(id));
    if (!heading) { if (tries++ < 60) setTimeout(go, 150); return; }
    heading.scrollIntoView({block: "start"});
    setTimeout(() => heading.scrollIntoView({block: "start"}), 800);
  };
  go();
})();
</script>"""



def active() -> bool:
    """Whether this session is in presenter mode."""
    return bool(st.session_state.get(_CANON, False))


def _set(on: bool) -> None:
    st.session_state[_CANON] = bool(on)


def claim() -> None:
    state.claim(PARAM, "1" if active() else None)


def init() -> str | None:
    """Read ``?present=`` the first time a session meets it and claim it for this run (from
    shell.start, before st.set_page_config). Returns a note when the value is not understood."""
    raw = state.url_raw(PARAM)
    note = None
    if raw is not None:
        value = state.parse_bool(raw)
        if value is not None:
            _set(value)
        else:
            _set(False)
            note = t("present.bad_param", param=code_span(f"{PARAM}={shorten(raw, 40)}"))
    st.session_state.setdefault(_CANON, False)
    claim()
    return note


def sidebar_state() -> str:
    """st.set_page_config's initial_sidebar_state for this session."""
    return "collapsed" if active() else "auto"


def current_page() -> str:
    """The id of the page this run draws (set by ``begin``; home before that)."""
    return st.session_state.get(_PAGE) or nav.HOME


def export_format() -> str:
    value = st.session_state.get(EXPORT_FORMAT)
    return value if value in EXPORT_FORMATS else EXPORT_FORMATS[0]


# --------------------------------------------------------------------------- the share link

def base_url() -> str:
    """The app's address as the browser sees it (scheme, host, port and any base path), without
    the page: from st.context.url, else the Host header, else localhost."""
    url = st.context.url
    if not url:
        host = (st.context.headers or {}).get("host") if st.context.headers is not None else None
        return f"http://{host}" if host else FALLBACK_BASE
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    head, _, last = path.rpartition("/")
    if last in nav.PAGES:
        path = head
    return f"{parts.scheme}://{parts.netloc}{path}"


def share_url(page: str | None = None) -> str:
    """The exact URL of this view: the page and every parameter this run claimed, except
    presenter mode itself (a student opening the teacher's link gets the lesson at laptop size)."""
    page = page or current_page()
    claims = state.url_values()
    order = list(state.SHELL_KEYS) + [k for k in claims if k not in state.SHELL_KEYS]
    params = [(k, claims[k]) for k in order if k in claims and k != PARAM]
    path = "" if page == nav.HOME else "/" + page
    query = urlencode(params, quote_via=quote, safe="")
    return base_url() + path + ("?" + query if query else "")


def qr_scale(url: str) -> int | None:
    """Pixels per module that make the code about QR_PX wide (at least 4: a link with a long
    prompt is a bigger code, drawn wider); None when the link is too long for any QR code
    (about 2,300 bytes: a prompt of a few hundred Chinese characters)."""
    try:
        modules, _ = segno.make(url, error=QR_ERROR, micro=False).symbol_size(scale=1, border=QR_BORDER)
    except segno.DataOverflowError:
        return None
    return max(4, round(QR_PX / modules))


def _share_body(url: str) -> None:
    st.caption(t("share.caption"))
    st.code(url, language=None, wrap_lines=True)
    scale = qr_scale(url)
    if scale is None:
        st.info(t("share.too_long"), icon=":material/qr_code_2:")
    else:
        st.image(qr_svg(url, scale=scale, border=QR_BORDER), caption=t("share.qr_caption"))


# --------------------------------------------------------------------------- navigation

def _neighbours(page: str) -> tuple[str | None, str | None]:
    if page not in nav.PAGES:
        return None, None
    i = nav.PAGES.index(page)
    return (nav.PAGES[i - 1] if i > 0 else None), (nav.PAGES[i + 1] if i + 1 < len(nav.PAGES) else None)


def _go(target: str) -> None:
    st.switch_page(nav.page_file(target))


def place_text(page: str) -> str | None:
    """"Lesson 4 of 11", "Lab 1 of 2" (course/nav.py counts), or None for home."""
    where = nav.place(page)
    if where is None:
        return None
    kind, n, total = where
    return t("lesson.progress" if kind == "lesson" else "lesson.lab_progress", n=n, total=total)


def current_section(page: str | None = None) -> str | None:
    """The section of ``page`` (default: this run's) the presenter, a link or the teacher
    jumped to, or None."""
    value = st.session_state.get(_SECTION)
    page = page or current_page()
    return value[1] if isinstance(value, tuple) and len(value) == 2 and value[0] == page else None


def jump(section_id: str | None) -> None:
    """Go to a section of this page (None: none); the browser scrolls there at the end of the run."""
    if section_id:
        st.session_state[_SECTION] = (current_page(), section_id)
    else:
        st.session_state.pop(_SECTION, None)
    st.session_state[_JUMP] = st.session_state.get(_JUMP, 0) + 1


def _on_pick() -> None:
    jump(st.session_state.get(PICK))


def _read_section(page: str) -> None:
    """``?section=`` the first time the session meets it (a shared link, a teacher's view that a
    follower applies); a section of another page is forgotten on a page change."""
    raw = state.url_raw(SECTION)
    if raw is not None:
        st.session_state[_SECTION] = (page, raw.strip())
    value = st.session_state.get(_SECTION)
    if isinstance(value, tuple) and value[0] != page:
        st.session_state.pop(_SECTION, None)


def _on_toggle() -> None:
    _set(st.session_state.get("present_toggle", False))


def _exit() -> None:
    _set(False)


def begin(url_path: str | None) -> None:
    """Before the page runs: note which page this is, and in presenter mode draw the CSS and
    the compact header (prompt, Previous / Next, room for the share popover)."""
    page = url_path or nav.HOME
    st.session_state[_PAGE] = page
    st.session_state.pop(_SLOT, None)
    st.session_state.pop(_SECTION_SLOT, None)
    _read_section(page)
    lesson.begin_sections(fold_prose=active())
    # What this run's charts look like (course/figures/style.py): language, type size, download.
    style.set_view(style.View(lang=current_lang(), presenting=active(), page=page, export_format=export_format()))
    if not active():
        return
    st.html("<style>" + PRESENT_CSS + "</style>")
    with st.container(key="present_keys"):
        st.html(KEYS_SCRIPT, unsafe_allow_javascript=True)
    prev, nxt = _neighbours(page)
    with st.container(key="present_header"):
        left, middle, sections, right, share, leave = st.columns([1.9, 3.3, 2.2, 1.9, 0.6, 0.6],
                                                                 vertical_alignment="center")
        if prev is not None and left.button(t("present.prev", title=t(f"nav.{prev}")), key="present_prev",
                                            icon=":material/arrow_back:",
                                            help=t("present.prev_help", title=t(f"nav.{prev}")), width="stretch"):
            _go(prev)
        with middle.container(key="present_prompt"):
            where = place_text(page)
            parts = [f"**{where}**"] if where else []
            if page not in nav.NO_MODEL:        # the training lab reads no prompt: it is not shown there
                text = state.prompt()
                parts.append(t("present.prompt", prompt=md_escape(shorten(text, PROMPT_CHARS)))
                             if text.strip() else t("present.no_prompt"))
            st.markdown(" · ".join(parts))
        st.session_state[_SECTION_SLOT] = sections.empty()
        if nxt is not None and right.button(t("present.next", title=t(f"nav.{nxt}")), key="present_next",
                                            icon=":material/arrow_forward:",
                                            help=t("present.next_help", title=t(f"nav.{nxt}")),
                                            type="primary", width="stretch"):
            _go(nxt)
        st.session_state[_SLOT] = share.empty()
        leave.button("", key="present_exit", icon=":material/close_fullscreen:", help=t("present.exit"),
                     on_click=_exit, width="stretch")


def _sections() -> None:
    """Claim ``?section=`` when it names a section this run drew, fill the header's list of
    sections, and scroll the browser to the section once per jump (or per arrival by link or
    by following)."""
    page = current_page()
    found = dict(lesson.sections())
    section = current_section(page)
    if section not in found:
        section = None
    state.claim(SECTION, section)
    slot = st.session_state.pop(_SECTION_SLOT, None)
    if slot is not None and found:
        st.session_state[PICK] = section
        slot.selectbox(t("present.sections"), list(found), format_func=found.get, key=PICK, on_change=_on_pick,
                       placeholder=t("present.sections_placeholder"), label_visibility="collapsed",
                       help=t("present.sections_help"))
    target = (page, section, st.session_state.get(_JUMP, 0))
    if section is None:
        st.session_state.pop(_SCROLLED, None)
    elif st.session_state.get(_SCROLLED) != target:
        st.session_state[_SCROLLED] = target
        with st.container(key="present_scroll"):
            st.html("<style>.st-key-present_scroll { display: none; }</style>"
                    + SCROLL_SCRIPT % json.dumps(lesson.anchor(section)), unsafe_allow_javascript=True)


def finish() -> None:
    """After the page ran (every URL parameter claimed): "Share this view" (in the header in
    presenter mode, else at the end of the sidebar), the presenter-mode switch and the charts'
    download format. And the page's sections: the header's list (presenter mode), ``?section=``,
    and a scroll to a section the session has not been taken to yet."""
    _sections()
    url = share_url()
    slot = st.session_state.pop(_SLOT, None)
    if slot is not None:
        with slot.container():
            with st.popover("", icon=":material/qr_code_2:", help=t("share.title"), width="stretch",
                            key=SHARE_POPOVERS[0], on_change="rerun") as popover:
                if popover.open:
                    st.markdown(f"**{t('share.title')}**")
                    _share_body(url)
    with st.sidebar:
        st.divider()
        with st.popover(t("share.title"), icon=":material/qr_code_2:", width="stretch",
                        key=SHARE_POPOVERS[1], on_change="rerun") as popover:
            if popover.open:
                _share_body(url)
        st.session_state["present_toggle"] = active()
        st.toggle(t("present.toggle"), key="present_toggle", on_change=_on_toggle, help=t("present.help"))
        st.session_state.setdefault(EXPORT_FORMAT, EXPORT_FORMATS[0])
        st.segmented_control(t("export.label"), EXPORT_FORMATS, key=EXPORT_FORMAT, selection_mode="single",
                             required=True, format_func=lambda f: t(f"export.{f}"), help=t("export.help"))
