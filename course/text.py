"""Putting user or model text safely into Markdown and plotly labels.

Streamlit renders Markdown (and never raw HTML, since this app does not use
unsafe_allow_html), so user text must still be escaped: otherwise "**x**", "[a](b)",
"$x$" or ":red[x]" in a prompt would turn into formatting, links or maths.
Plotly reads a small HTML subset in labels, so text going there is HTML-escaped.
"""

from __future__ import annotations

import html
import re
import string
import unicodedata

_MD_SPECIAL = re.compile("([" + re.escape(string.punctuation) + "])")
_BACKTICKS = re.compile("`+")


def md_escape(text: str) -> str:
    """Text shown literally inside Markdown: every ASCII punctuation mark backslash-escaped,
    line breaks turned into spaces."""
    return _MD_SPECIAL.sub(r"\\\1", text).replace("\r", " ").replace("\n", " ")


def code_span(text: str) -> str:
    """Text as an inline code span (shown literally, monospace), whatever backticks it holds."""
    text = text.replace("\r", " ").replace("\n", " ")
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def html_escape(text: str) -> str:
    """Text for plotly labels, hover text and titles (plotly understands <b>, <a>, <br>...).
    Quotes become numeric entities: plotly decodes &#34; but shows &quot; literally."""
    return html.escape(text, quote=False).replace('"', "&#34;").replace("'", "&#39;")


def num(x: float, spec: str = ".2f") -> str:
    """A number formatted with ``spec``, never "-0.00": a value that rounds to zero shows
    without a sign."""
    text = format(float(x), spec)
    if text.startswith("-") and float(text.rstrip("%").replace(",", "") or 0) == 0:
        text = text[1:]
    return text


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def text_width(text: str) -> int:
    """How many columns ``text`` takes: a Chinese character (East Asian wide or fullwidth) two,
    other characters one."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def shorten_to_width(text: str, columns: int) -> str:
    """``text`` cut to at most ``columns`` (text_width), with "…" (one column) where it was cut."""
    if text_width(text) <= columns:
        return text
    out, used = [], 0
    for ch in text:
        w = text_width(ch)
        if used + w > columns - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…"


def bytes_text(n: float) -> str:
    """Bytes in binary units, as the lessons write them: 765 KiB, 360 MiB, 1.055 GiB."""
    from lesson_model.analysis.kv_memory import human_bytes
    return "{:.4g} {}".format(*human_bytes(n))
