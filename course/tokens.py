"""Token labels for figures and text: whitespace made visible, byte pieces readable,
escaped for where they go, and made unique for plotly's category axes."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

from course.i18n import with_paren
from course.text import code_span, html_escape, isolate, md_escape, shorten, shorten_to_width, show_format

VISIBLE = {" ": "·", "\n": "↵", "\t": "⇥", "\r": "␍"}
LABEL_LIMIT = 16
BYTE_PIECE = re.compile(r"^<[0-9A-F]{2}( [0-9A-F]{2})*>$")   # lesson_model's form for split characters


def visible(text: str) -> str:
    """Whitespace and control characters as visible marks ("·" space, "↵" newline, "\\x00"),
    and characters that show nothing but act on the text around them (direction controls such
    as U+202E, zero-width joiners, the soft hyphen: course.text.is_hidden) as chips such as
    "<U+202E>"; a byte piece such as "<E5 A4>" stays as it is."""
    if BYTE_PIECE.match(text):
        return text
    out = []
    for ch in text:
        if ch in VISIBLE:
            out.append(VISIBLE[ch])
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return show_format("".join(out)) or "∅"


def _text(token) -> str:
    """A Token's display text, or a plain string as it is."""
    return token if isinstance(token, str) else token.text


def label(token, limit: int = LABEL_LIMIT) -> str:
    """Plain-text label: visible whitespace, shortened. Not escaped: for widget options
    rendered as plain text (selectbox options, dataframe cells)."""
    return shorten(visible(_text(token)), limit)


def sentence_label(token, limit: int = LABEL_LIMIT) -> str:
    """Plain label for a field of a plain-text sentence (hover text, a chart title before it is
    HTML-escaped): visible, shortened, isolated (course.text.isolate) where it could reorder
    the sentence around it."""
    return isolate(label(token, limit))


def plot_label(token, limit: int = LABEL_LIMIT) -> str:
    """Label for plotly text (titles, hover, annotations): visible, HTML-escaped, isolated
    (course.text.isolate) where it could reorder the text around it."""
    return isolate(label(token, limit), html_escape)


def cell_label(token, columns: int) -> str:
    """plot_label for text inside a chart's cell: visible, cut to ``columns`` (course.text.text_width,
    a Chinese character two) and HTML-escaped."""
    return isolate(shorten_to_width(visible(_text(token)), columns), html_escape)


def md_label(token, limit: int = LABEL_LIMIT) -> str:
    """Label for Markdown (st.markdown, catalog strings, widget labels): an inline code span."""
    return code_span(label(token, limit))


def md_text(token, limit: int = LABEL_LIMIT) -> str:
    """Label for Markdown without code styling (e.g. button labels), escaped."""
    return md_escape(label(token, limit))


_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def _utf8_len(first: int) -> int:
    """How many bytes a UTF-8 character takes, from its first byte (1 for a stray byte)."""
    return 2 if 0xC0 <= first < 0xE0 else 3 if 0xE0 <= first < 0xF0 else 4 if 0xF0 <= first < 0xF8 else 1


def readable_texts(tokens: Sequence) -> list[str]:
    """Each token's display text, with byte pieces shown as the character they belong to
    and which piece they are: 我 split as <E6 88> + <91> reads "我¹", "我²". A piece that
    holds parts of two characters shows both ("我²魚¹"); whole tokens keep their text.
    Plain strings pass through unchanged."""
    out = [tok if isinstance(tok, str) else tok.text for tok in tokens]
    i = 0
    while i < len(tokens):
        if isinstance(tokens[i], str) or not tokens[i].is_partial:
            i += 1
            continue
        j = i   # a run of consecutive byte pieces: i .. j-1
        while j < len(tokens) and not isinstance(tokens[j], str) and tokens[j].is_partial:
            j += 1
        data = b"".join(tokens[k].bytes for k in range(i, j))
        # the characters of the run: (first byte offset, byte length, text)
        chars, pos = [], 0
        while pos < len(data):
            size = min(_utf8_len(data[pos]), len(data) - pos)
            piece = data[pos:pos + size]
            chars.append((pos, size, piece.decode("utf-8", errors="replace")))
            pos += size
        ranges, offset = [], 0   # each token's bytes within the run: [lo, hi)
        for k in range(i, j):
            ranges.append((offset, offset + len(tokens[k].bytes)))
            offset = ranges[-1][1]
        for k, (lo, hi) in zip(range(i, j), ranges):
            parts = []
            for start, size, text in chars:
                end = start + size
                if not (start < hi and lo < end):
                    continue                                # none of this character's bytes
                if lo <= start and end <= hi:
                    parts.append(text)                      # the whole character
                else:                                       # which of the character's pieces this is
                    nth = sum(1 for m_lo, m_hi in ranges if m_lo <= lo and m_lo < end and start < m_hi)
                    parts.append(text + str(nth).translate(_SUPERSCRIPT))
            joined = "".join(parts)
            out[k] = joined if joined and "\ufffd" not in joined else tokens[k].text   # stray bytes stay as bytes
        i = j
    return out


def unique_labels(tokens: Sequence, limit: int = LABEL_LIMIT) -> list[str]:
    """Plain labels in which a label that occurs more than once gets its position appended,
    e.g. "·cat (3)", so each token can be told apart. Byte pieces read as their character
    ("我¹", "我²"; see readable_texts)."""
    plain = [label(text, limit) for text in readable_texts(tokens)]
    counts = Counter(plain)
    return [with_paren(text, pos) if counts[text] > 1 else text for pos, text in enumerate(plain)]


def axis_labels(tokens: Sequence, limit: int = LABEL_LIMIT) -> list[str]:
    """Unique, escaped plotly category labels (plotly would merge repeated categories), each
    isolated where it could reorder the text around it (hover text, titles)."""
    return [isolate(text, html_escape) for text in unique_labels(tokens, limit)]


def md_labeler(tokens: Sequence, limit: int = LABEL_LIMIT) -> Callable[[int], str]:
    """md(i): token i as a Markdown code span, with its position when its text occurs more than once."""
    return [code_span(text) for text in unique_labels(tokens, limit)].__getitem__


def position_label(tokens: Sequence, pos: int, limit: int = LABEL_LIMIT) -> str:
    """Plain text "3: ·cat" for choosing a position (selectbox format_func, slider captions)."""
    return f"{pos}: {label(tokens[pos], limit)}"


def next_token_texts(lm, context: Sequence, ids: Sequence[int]) -> list[str]:
    """Display text of each candidate id as the token after ``context`` (the prompt's Tokens):
    a byte piece that completes a character split at the end of the context reads as that
    character and its piece number ("我²", see readable_texts); a piece that only
    starts a new character stays as bytes ("<E8>"), since no character is known yet."""
    tail = list(context[-3:])          # a UTF-8 character has at most 4 bytes: 3 earlier pieces at most
    out = []
    for tok in lm.tokenizer.tokens([int(i) for i in ids]):
        out.append(readable_texts(tail + [tok])[-1] if tail and tok.is_partial else tok.text)
    return out


def sequence_texts(lm, context: Sequence, ids: Sequence[int]) -> list[str]:
    """Display texts of generated ids continuing ``context`` (the prompt's Tokens), byte pieces
    read as their characters across the whole sequence ("我¹", "我²")."""
    new = lm.tokenizer.tokens([int(i) for i in ids])
    tail = list(context[-3:])
    return readable_texts(tail + new)[len(tail):]
