"""Putting user or model text safely into Markdown and plotly labels.

Streamlit renders Markdown (and never raw HTML, since this app does not use
unsafe_allow_html), so user text must still be escaped: otherwise "**x**", "[a](b)",
"$x$" or ":red[x]" in a prompt would turn into formatting, links or maths.
Plotly reads a small HTML subset in labels, so text going there is HTML-escaped.

User or model text must not change how the course's own sentence around it reads either:
a right-to-left override (U+202E) in a prompt would show the rest of the line backwards,
and zero-width or soft-hyphen characters would be invisible. ``isolate`` is the one place
that handles it: format characters become visible chips such as "<U+202E>" (like the byte
chips "<E2 80 AE>"), and text that can still reorder its neighbours (right-to-left letters,
Arabic digits, or text that held direction controls) is wrapped in FIRST STRONG ISOLATE ...
POP DIRECTIONAL ISOLATE. ``code_span`` and ``md_escape`` go through it.
"""

from __future__ import annotations

import html
import re
import string
import unicodedata
from collections.abc import Callable

_MD_SPECIAL = re.compile("([" + re.escape(string.punctuation) + "])")
_BACKTICKS = re.compile("`+")

FSI, PDI = "\u2068", "\u2069"     # FIRST STRONG ISOLATE ... POP DIRECTIONAL ISOLATE
# Bidi classes that can reorder text around them: right-to-left letters, Arabic digits,
# and the explicit embeddings, overrides and isolates (these last are shown as chips anyway).
_REORDERS = frozenset({"R", "AL", "AN", "LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"})


def is_hidden(ch: str) -> bool:
    """True for a character that shows nothing but acts on the text around it: a format
    character (Unicode category Cf: direction controls, zero-width spaces and joiners, the
    byte-order mark, the soft hyphen...), a line or paragraph separator (U+2028, U+2029), or
    a control character other than tab, line feed and carriage return."""
    category = unicodedata.category(ch)
    return category in ("Cf", "Zl", "Zp") or (category == "Cc" and ch not in "\t\n\r")


def code_point(ch: str) -> str:
    """A character as its visible chip: "<U+202E>"."""
    return f"<U+{ord(ch):04X}>"


def show_format(text: str) -> str:
    """``text`` with every hidden character (``is_hidden``) written as its chip "<U+202E>";
    the rest unchanged."""
    if text.isprintable():       # fast path: no Cf, Zl, Zp or Cc character in it
        return text
    return "".join(code_point(ch) if is_hidden(ch) else ch for ch in text)


def hidden_chars(text: str) -> list[str]:
    """The distinct hidden characters of ``text`` (``is_hidden``), in the order they first occur."""
    if text.isprintable():
        return []
    return [ch for ch in dict.fromkeys(text) if is_hidden(ch)]


def hidden_names(text: str) -> list[tuple[str, str]]:
    """Each distinct hidden character of ``text`` as its chip and Unicode name:
    ("<U+202E>", "RIGHT-TO-LEFT OVERRIDE"); the name is "" for a character without one."""
    return [(code_point(ch), unicodedata.name(ch, "")) for ch in hidden_chars(text)]


def could_reorder(text: str) -> bool:
    """True when ``text`` holds a character that can move its neighbours in a left-to-right
    sentence: a right-to-left letter, an Arabic-Indic digit, or a direction control."""
    return any(unicodedata.bidirectional(ch) in _REORDERS for ch in text)


def isolate(text: str, escape: Callable[[str], str] | None = None) -> str:
    """User or model text ready to sit inside one of the course's sentences: hidden characters
    shown as chips (``show_format``), then ``escape``d for where it goes (Markdown, HTML), and
    wrapped in FSI ... PDI when it could reorder the sentence around it (``could_reorder``), so
    it reads as one unit whatever direction it has. Text that cannot reorder anything (English,
    Chinese, digits) comes back without the isolates, character for character as before.
    The result's isolates are always balanced: the text's own are shown as chips."""
    shown = show_format(text)
    if escape is not None:
        shown = escape(shown)
    return f"{FSI}{shown}{PDI}" if could_reorder(text) else shown


def _md_escaped(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", text)


def md_escape(text: str) -> str:
    """Text shown literally inside Markdown: every ASCII punctuation mark backslash-escaped,
    line breaks turned into spaces, hidden characters shown and the text isolated (``isolate``)."""
    return isolate(text.replace("\r", " ").replace("\n", " "), _md_escaped)


def _fenced(text: str) -> str:
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def code_span(text: str) -> str:
    """Text as an inline code span (shown literally, monospace), whatever backticks it holds;
    hidden characters shown and the span isolated (``isolate``)."""
    return isolate(text.replace("\r", " ").replace("\n", " "), _fenced)


def html_escape(text: str) -> str:
    """Text for plotly labels, hover text and titles (plotly understands <b>, <a>, <br>...).
    Quotes become numeric entities: plotly decodes &#34; but shows &quot; literally."""
    return html.escape(text, quote=False).replace('"', "&#34;").replace("'", "&#39;")


# ASCII punctuation whose full-width form Chinese text uses (？ and ? are different tokens that
# look alike in a chart), and those full-width forms with 「。」「、」.
HALF_WIDTH_MARKS = frozenset("!?,.:;()")
FULL_WIDTH_MARKS = frozenset("！？，：；（）。、")


def width_kind(text: str) -> str | None:
    """"half" for a token that is only ASCII punctuation with a full-width twin ("?", "?!"),
    "full" for one that is only full-width punctuation (「？」), None for anything else: what a
    candidate's label should say so that 「？」 and 「?」 are told apart."""
    if text and all(ch in HALF_WIDTH_MARKS for ch in text):
        return "half"
    if text and all(ch in FULL_WIDTH_MARKS for ch in text):
        return "full"
    return None


def num(x: float, spec: str = ".2f") -> str:
    """A number formatted with ``spec``, never "-0.00": a value that rounds to zero shows
    without a sign."""
    text = format(float(x), spec)
    if text.startswith("-") and float(text.rstrip("%").replace(",", "") or 0) == 0:
        text = text[1:]
    return text


_CHIP = re.compile(r"<U\+[0-9A-F]{4,6}>")     # a hidden character's chip (code_point)


def _cut(text: str, end: int) -> str:
    """``text[:end]``, moved back to the start of a "<U+202E>" chip the cut would split."""
    for m in _CHIP.finditer(text, max(0, end - 10), end + 10):
        if m.start() < end < m.end():
            return text[:m.start()]
    return text[:end]


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, with "…" where it was cut; a "<U+202E>" chip
    is kept whole or left out, never cut in two."""
    return text if len(text) <= limit else _cut(text, limit - 1) + "…"


def text_width(text: str) -> int:
    """How many columns ``text`` takes: a Chinese character (East Asian wide or fullwidth) two,
    other characters one."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def shorten_to_width(text: str, columns: int) -> str:
    """``text`` cut to at most ``columns`` (text_width), with "…" (one column) where it was cut;
    a "<U+202E>" chip is kept whole or left out."""
    if text_width(text) <= columns:
        return text
    out, used = [], 0
    for ch in text:
        w = text_width(ch)
        if used + w > columns - 1:
            break
        out.append(ch)
        used += w
    return _cut(text, len(out)) + "…"


def bytes_text(n: float) -> str:
    """Bytes in binary units, as the lessons write them: 765 KiB, 360 MiB, 1.055 GiB."""
    from lesson_model.analysis.kv_memory import human_bytes
    return "{:.4g} {}".format(*human_bytes(n))
