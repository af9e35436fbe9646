"""Translations: short strings from JSON catalogs, lesson prose from Markdown files.

Catalogs: ``assets/i18n/<lang>.json`` holds the app-wide strings; each lesson may add
``assets/i18n/<lang>/<page>.json``, whose keys are read as ``"<page>.<key>"``. Nested
objects are flattened with dots. Lesson prose: ``assets/lessons/<lang>/<page>.md``, split
into sections by ``## <section_id>`` headings; a line break between two CJK characters is
removed (Markdown would show it as a space), so Chinese paragraphs may be wrapped.

The language lives in each session's state (never process-wide), so two students can
read the course in two languages at the same time.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from string import Formatter

ASSETS = Path(__file__).resolve().parent.parent / "assets"
LANGS: dict[str, str] = {"en": "English", "zh-Hant": "繁體中文", "zh-Hans": "简体中文"}
DEFAULT_LANG = "en"
_LANG_KEY = "_lang"
_SECTION = re.compile(r"^##[ \t]+([A-Za-z0-9_-]+)[ \t]*$", re.MULTILINE)
_CJK = "\u2e80-\u9fff\u3000-\u303f\uff00-\uffef"
# A single line break inside a paragraph next to a CJK character (Markdown would show it
# as a space), unless the other side is Latin text, the next line starts a block, or the
# line ends with "*" (joined, a closing "**" before a CJK letter would no longer close).
_CJK_PUNCT_END = "。，、：；！？）」』"
_CJK_BREAK = re.compile(
    rf"(?<=[{_CJK}])\n(?![A-Za-z0-9(\[`$]|[-+*] |\d+\. |#|>|\||\n)"
    rf"|(?<=[^A-Za-z0-9)\]`$*\n])\n(?=\**[{_CJK}])"
    # a line that ends with a closing "**" right after a letter or digit (after punctuation it
    # would no longer close when joined to a letter)
    # and a next line that starts with CJK text or full-width punctuation
    rf"|(?<=[^\W_]\*\*)\n(?=[{_CJK}])"
    # Chinese sentence punctuation at the end of a line, Latin text on the next
    rf"|(?<=[{_CJK_PUNCT_END}])\n(?=[A-Za-z0-9`$*(])(?!\d+\. |[-+*] )"
)


def _flatten(data: dict, prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


@lru_cache(maxsize=None)
def catalog(lang: str) -> dict[str, str]:
    """Every short string of one language: the app catalog merged with each lesson's."""
    table = _flatten(json.loads((ASSETS / "i18n" / f"{lang}.json").read_text("utf-8")))
    for path in sorted((ASSETS / "i18n" / lang).glob("*.json")):
        page_keys = _flatten(json.loads(path.read_text("utf-8")), path.stem + ".")
        clash = table.keys() & page_keys.keys()
        if clash:
            raise ValueError(f"{path}: keys already defined elsewhere: {sorted(clash)}")
        table.update(page_keys)
    return table


@lru_cache(maxsize=None)
def lesson_sections(page: str, lang: str) -> dict[str, str]:
    """The sections of ``assets/lessons/<lang>/<page>.md``: {section_id: markdown}."""
    path = ASSETS / "lessons" / lang / f"{page}.md"
    if not path.exists():
        return {}
    text = _CJK_BREAK.sub("", path.read_text("utf-8"))
    heads = list(_SECTION.finditer(text))
    return {
        m.group(1): text[m.end(): heads[i + 1].start() if i + 1 < len(heads) else len(text)].strip()
        for i, m in enumerate(heads)
    }


def is_cjk(lang: str | None = None) -> bool:
    """True for the Chinese languages (whose lists, brackets and sentences join differently)."""
    return (lang or current_lang()).startswith("zh")


def join_list(items, lang: str | None = None) -> str:
    """Items as a list in running text: "a, b, c" in English, 「a、b、c」 in Chinese."""
    return ("、" if is_cjk(lang) else ", ").join(str(item) for item in items)


def with_paren(head, inner, lang: str | None = None) -> str:
    """``head`` followed by a bracketed remark: "MLP 29 (+13.84)" / 「MLP 29（+13.84）」."""
    return f"{head}（{inner}）" if is_cjk(lang) else f"{head} ({inner})"


def mark_width(shown: str, text: str, lang: str | None = None) -> str:
    """A candidate token's label ``shown`` for ``text``, with its width named where the reader
    could mistake it for its twin: 「?（半形）」 in Chinese, "？ (full-width)" in English."""
    from course.text import width_kind
    kind = width_kind(text)
    if kind == ("half" if is_cjk(lang) else "full"):
        return with_paren(shown, catalog(lang or current_lang())[f"token.{kind}_width"], lang)
    return shown


def join_sentences(sentences, lang: str | None = None) -> str:
    """Whole sentences run together: a space between them in English, none after 「。」."""
    parts = [str(s).strip() for s in sentences if str(s).strip()]
    return ("" if is_cjk(lang) else " ").join(parts)


_UNITS = {
    "en": [(1e12, "trillion"), (1e9, "billion"), (1e6, "million"), (1e3, "thousand")],
    "zh-Hant": [(1e12, "兆"), (1e8, "億"), (1e4, "萬")],
    "zh-Hans": [(1e12, "万亿"), (1e8, "亿"), (1e4, "万")],
}


def big_number(n: float, digits: int = 3, lang: str | None = None) -> str:
    """A large count in words, the way each language writes it: 134,515,008 -> "135 million",
    「1.35 億」, 「1.35 亿」 (``digits`` significant digits; below the smallest unit, digits
    with thousands separators)."""
    lang = lang or current_lang()
    value = float(n)
    for size, unit in _UNITS.get(lang, _UNITS["en"]):
        if abs(value) >= size:
            scaled = value / size
            decimals = max(0, digits - len(str(int(abs(scaled)))))
            text = f"{scaled:,.{decimals}f}"
            if "." in text:
                text = text.rstrip("0").rstrip(".")
            return f"{text} {unit}"
    return f"{value:,.0f}"


def placeholders(text: str) -> set[str]:
    """The ``{name}`` fields of a format string."""
    return {field for _, field, _, _ in Formatter().parse(text) if field is not None}


def lang_from_locale(locale: str | None) -> str:
    """Map a browser locale to a course language (zh-TW/HK/MO -> zh-Hant, other zh -> zh-Hans)."""
    tag = (locale or "").replace("_", "-").lower()
    if not tag.startswith("zh"):
        return DEFAULT_LANG
    if "hant" in tag or tag.split("-")[-1] in {"tw", "hk", "mo"}:
        return "zh-Hant"
    return "zh-Hans"


def parse_lang(value: str) -> str | None:
    """A ``?lang=`` value as a course language, accepting locale spellings; None if unknown."""
    for code in LANGS:
        if value.strip().lower() == code.lower():
            return code
    if value.strip().lower().startswith("zh"):
        return lang_from_locale(value)
    return None


def current_lang() -> str:
    import streamlit as st  # here, not at the top: figures use this module's text helpers without Streamlit
    return st.session_state.get(_LANG_KEY, DEFAULT_LANG)


def set_lang(lang: str) -> None:
    import streamlit as st
    st.session_state[_LANG_KEY] = lang


def t(key: str, **fields) -> str:
    """The string for ``key`` in the session's language, formatted with ``fields``.

    Falls back to English when a translation is missing (the i18n test makes that a
    failure); a key missing in English is a programming error and raises KeyError.
    """
    text = catalog(current_lang()).get(key)
    if text is None:
        text = catalog(DEFAULT_LANG).get(key)
    if text is None:
        raise KeyError(f"no string {key!r} in the English catalogs (assets/i18n/en.json, assets/i18n/en/*.json)")
    return text.format(**fields) if fields else text


def has(key: str) -> bool:
    return key in catalog(DEFAULT_LANG)


def text_in(lang: str, key: str, **fields) -> str:
    """t() in ``lang`` rather than the session's language (English when missing there)."""
    text = catalog(lang).get(key)
    if text is None:
        text = catalog(DEFAULT_LANG)[key]
    return text.format(**fields) if fields else text


def lesson_key(page: str, tag: str, key: str) -> str:
    """A lesson's catalog key for a model: ``<page>.<tag>.<key>`` (what differs on that model,
    tag "gemma" or "smollm2") when the catalog has it, else ``<page>.<key>``."""
    variant = f"{page}.{tag}.{key}"
    return variant if has(variant) else f"{page}.{key}"


_TRY_KEY = re.compile(r"^try\.(\d+)\.prompt$")


def try_numbers(page: str, tag: str) -> list[int]:
    """The n of a lesson's ``try.<n>.prompt`` keys: the model's own set when its variant tree
    has any (``<page>.<tag>.try.<n>``), else the plain one."""
    english = catalog(DEFAULT_LANG)
    for prefix in (f"{page}.{tag}.", f"{page}."):
        numbers = sorted(int(m.group(1)) for key in english
                         if key.startswith(prefix) and (m := _TRY_KEY.match(key[len(prefix):])))
        if numbers:
            return numbers
    return []


def section(page: str, section_id: str) -> str:
    """One lesson prose section in the session's language (English if missing there)."""
    text = lesson_sections(page, current_lang()).get(section_id)
    if text is None:
        text = lesson_sections(page, DEFAULT_LANG).get(section_id)
    if text is None:
        raise KeyError(f"no '## {section_id}' section in assets/lessons/{DEFAULT_LANG}/{page}.md")
    return text
