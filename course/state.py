"""State that belongs in the URL, so a teacher's link opens the same view for everyone.

Each bound value has a canonical copy in the session (``_url.<key>``) that survives page
switches, a keyed widget that mirrors it, and a query parameter written at the end of
every run (``sync_url``): parameters nobody claimed in this run are dropped, and a value
equal to its default is left out. A value arriving in the URL is read the first time a
session meets its key; a malformed or out-of-range one is ignored or clamped with a
visible note, never an exception.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from course.i18n import t
from course.text import code_span, md_escape, shorten

_CANON = "_url."
_CLAIMS = "_url_claims"
SHELL_KEYS = ("lang", "prompt", "model", "present", "theme")   # present: classroom/presenter.py, theme: classroom/access.py
PROMPT_MAX_CHARS = 2000


def begin_run() -> None:
    """Start a run's record of URL parameters (app.py, before anything claims one)."""
    st.session_state[_CLAIMS] = {}


def claim(key: str, text: str | None) -> None:
    """Keep ``?key=text`` in the URL after this run (None: leave the parameter out)."""
    st.session_state.setdefault(_CLAIMS, {})[key] = text


def sync_url() -> None:
    """Make the URL match this run's claims (app.py, after the page ran)."""
    claims = st.session_state.get(_CLAIMS, {})
    for key in list(st.query_params.keys()):
        if claims.get(key) is None:
            del st.query_params[key]
    for key, text in claims.items():
        if text is not None and st.query_params.get(key) != text:
            st.query_params[key] = text


def url_values() -> dict[str, str]:
    """The parameters this run claimed so far (what sync_url will put in the URL), e.g. for
    classroom.follow to publish a teacher's view."""
    return {key: text for key, text in st.session_state.get(_CLAIMS, {}).items() if text is not None}


def forget_values(keep: Sequence[str] = SHELL_KEYS) -> None:
    """Drop the canonical copy of every URL-bound control except ``keep``, so each reads the
    URL again (or its default) the next time its page runs: classroom.follow uses it to open a
    teacher's view exactly as if the student had opened the teacher's link."""
    for name in [k for k in st.session_state if isinstance(k, str) and k.startswith(_CANON)]:
        if name[len(_CANON):] not in keep:
            del st.session_state[name]


def url_raw(key: str) -> str | None:
    """The URL's value for ``key`` the first time this session meets it, else None."""
    if _CANON + key in st.session_state:
        return None
    return st.query_params.get(key)


def _note(key: str, raw: str, message_key: str, **fields) -> str:
    return t(message_key, param=code_span(f"{key}={shorten(raw, 40)}"), **fields)


def _bound(key: str, default: Any, parse: Callable[[str], tuple[Any, str | None]],
           fix: Callable[[Any], Any], render: Callable[..., Any], to_url: Callable[[Any], str],
           container) -> Any:
    """The common life of a URL-bound widget (see the module docstring)."""
    if key in SHELL_KEYS or not key.isidentifier():
        raise ValueError(f"URL key {key!r} is reserved or not an identifier")
    canon = _CANON + key
    note = None
    if canon not in st.session_state:
        raw = st.query_params.get(key)
        value = default
        if raw is not None:
            value, note = parse(raw)
        st.session_state[canon] = value
    value = fix(st.session_state[canon])
    st.session_state[canon] = value
    st.session_state[key] = value
    render(on_change=_copy_to_canon, args=(key,))
    if note:
        container.warning(note, icon=":material/link_off:")
    claim(key, None if value == default else to_url(value))
    return value


def _copy_to_canon(key: str) -> None:
    st.session_state[_CANON + key] = st.session_state[key]


def set_value(key: str, value: Any) -> None:
    """Set a URL-bound control from code, e.g. in an on_click callback ("open this head"):
    its widget shows the value (clamped as usual) from the next run on."""
    st.session_state[_CANON + key] = value


def _parse_number(raw: str, cast: Callable[[str], Any]):
    try:
        value = cast(raw.strip())
    except ValueError:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _int(raw: str) -> int | None:
    value = _parse_number(raw, float)
    return int(value) if value is not None and float(value).is_integer() else None


def url_int(key: str, label: str, lo: int, hi: int, default: int, *, widget: str = "slider",
            format_func: Callable[[int], str] | None = None, help: str | None = None,
            container=None) -> int:
    """An integer in [lo, hi] bound to ``?key=``: widget "slider", "number" or "select"
    (a selectbox over lo..hi, labelled by ``format_func``, e.g. token positions)."""
    container = container or st
    lo, hi = int(lo), max(int(lo), int(hi))
    default = min(max(int(default), lo), hi)

    def parse(raw: str):
        value = _int(raw)
        if value is None:
            return default, _note(key, raw, "state.ignored", value=default)
        if not lo <= value <= hi:
            clamped = min(max(value, lo), hi)
            return clamped, _note(key, raw, "state.clamped", lo=lo, hi=hi, value=clamped)
        return value, None

    def render(**cb):
        common = dict(key=key, help=help, **cb)
        if lo == hi:
            container.selectbox(label, [lo], format_func=format_func or str, disabled=True, **common)
        elif widget == "slider":
            container.slider(label, min_value=lo, max_value=hi, step=1, **common)
        elif widget == "number":
            container.number_input(label, min_value=lo, max_value=hi, step=1, **common)
        elif widget == "select":
            container.selectbox(label, list(range(lo, hi + 1)), format_func=format_func or str,
                                **common)
        else:
            raise ValueError(f"unknown widget {widget!r}")

    return _bound(key, default, parse, lambda v: min(max(int(v), lo), hi), render, str, container)


def url_float(key: str, label: str, lo: float, hi: float, default: float, step: float, *,
              help: str | None = None, container=None) -> float:
    """A number in [lo, hi] (a slider with ``step``) bound to ``?key=``."""
    container = container or st
    decimals = max(0, -math.floor(math.log10(step))) if step < 1 else 0

    def snap(value: float) -> float:
        return round(min(max(lo + round((value - lo) / step) * step, lo), hi), decimals)

    default = snap(default)

    def parse(raw: str):
        value = _parse_number(raw, float)
        if value is None:
            return default, _note(key, raw, "state.ignored", value=default)
        if not lo <= value <= hi:
            return snap(value), _note(key, raw, "state.clamped", lo=lo, hi=hi, value=snap(value))
        return snap(value), None

    def render(**cb):
        container.slider(label, min_value=float(lo), max_value=float(hi), step=float(step),
                         key=key, help=help, **cb)

    return _bound(key, default, parse, lambda v: snap(float(v)), render, lambda v: f"{v:g}", container)


def url_choice(key: str, label: str, options: Sequence[str], default: str, *, widget: str = "select",
               format_func: Callable[[str], str] | None = None, help: str | None = None,
               container=None) -> str:
    """One of ``options`` (plain ASCII ids; show translated names with ``format_func``) bound
    to ``?key=``: widget "select", "radio" or "segmented"."""
    container = container or st
    options = list(options)

    def parse(raw: str):
        if raw in options:
            return raw, None
        return default, _note(key, raw, "state.ignored", value=(format_func or str)(default))

    def render(**cb):
        common = dict(key=key, help=help, format_func=format_func or str, **cb)
        if widget == "select":
            container.selectbox(label, options, **common)
        elif widget == "radio":
            container.radio(label, options, horizontal=True, **common)
        elif widget == "segmented":
            container.segmented_control(label, options, selection_mode="single", required=True, **common)
        else:
            raise ValueError(f"unknown widget {widget!r}")

    return _bound(key, default, parse, lambda v: v if v in options else default, render, str, container)


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_bool(raw: str) -> bool | None:
    """A URL's yes or no (1/true/yes/on, 0/false/no/off, any case), or None when it is neither."""
    word = raw.strip().lower()
    return word in _TRUE if word in _TRUE | _FALSE else None


def url_bool(key: str, label: str, default: bool, *, help: str | None = None, container=None) -> bool:
    """A toggle bound to ``?key=1`` / ``?key=0``."""
    container = container or st

    def parse(raw: str):
        value = parse_bool(raw)
        if value is not None:
            return value, None
        return default, _note(key, raw, "state.ignored", value=t("state.on") if default else t("state.off"))

    def render(**cb):
        container.toggle(label, key=key, help=help, **cb)

    return _bound(key, default, parse, bool, render, lambda v: "1" if v else "0", container)


# The shared prompt: canonical "_url.prompt"; None means "this language's default prompt".

def prompt() -> str:
    """The course's shared prompt (the language's default until the learner changes it)."""
    text = st.session_state.get(_CANON + "prompt")
    return t("prompt.default") if text is None else text


def set_prompt(text: str) -> None:
    """Replace the shared prompt (use as an on_click callback; the page reruns after it)."""
    st.session_state[_CANON + "prompt"] = None if text == t("prompt.default") else text


def init_prompt() -> str | None:
    """Read ``?prompt=`` the first time a session runs; returns a note when it was cut."""
    raw = url_raw("prompt")
    note = None
    if raw is not None:
        if len(raw) > PROMPT_MAX_CHARS:
            raw = raw[:PROMPT_MAX_CHARS]
            note = t("prompt.url_cut", n=PROMPT_MAX_CHARS)
        set_prompt(raw)
    st.session_state.setdefault(_CANON + "prompt", None)
    return note


def claim_prompt() -> None:
    claim("prompt", st.session_state.get(_CANON + "prompt"))


def url_text(key: str, label_text: str, default: str, *, max_chars: int = 60, help: str | None = None,
             placeholder: str | None = None, container=None) -> str:
    """A short text input bound to ``?key=`` like the other url_ controls (a word to look up).

    A value from the link longer than ``max_chars`` is cut, with the state's visible note.
    """
    container = container or st

    def parse(raw: str):
        if len(raw) > max_chars:
            return raw[:max_chars], _note(key, raw, "state.ignored", value=md_escape(shorten(raw[:max_chars], 20)))
        return raw, None

    def render(**cb):
        container.text_input(label_text, key=key, max_chars=max_chars, help=help, placeholder=placeholder, **cb)

    return _bound(key, default, parse, lambda v: str(v)[:max_chars], render, str, container)
