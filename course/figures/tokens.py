"""Figures and widgets for lesson 1 (tokens): token chips, cost comparison, vocabulary charts.

Every visible word comes in as an argument (translated by the page); token text is
escaped here for where it goes (Markdown chips, plotly labels).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from course.figures import chart as go
from course.figures import style
from course.text import code_span, html_escape, md_escape, shorten_to_width
from course.tokens import label, plot_label
from lesson_model.analysis.tokenization import CharacterGroup

# A fixed parallel corpus: the same sentence in English, Traditional and Simplified Chinese.
# These are data measured by the tokens lesson (shown identically in every UI language),
# not interface text.
PARALLEL: list[tuple[str, str, str]] = [
    ("The cat sat on the mat.", "貓坐在墊子上。", "猫坐在垫子上。"),
    ("I would like a cup of hot tea, please.", "請給我一杯熱茶。", "请给我一杯热茶。"),
    ("Machine learning is changing the world.", "機器學習正在改變世界。", "机器学习正在改变世界。"),
    ("The weather is nice today, so we are going to the park.", "今天天氣很好，所以我們要去公園。", "今天天气很好，所以我们要去公园。"),
    ("Language models read tokens, not letters.", "語言模型讀的是詞元，不是字母。", "语言模型读的是词元，不是字母。"),
]

# The Chinese "strawberry": characters written with one part repeated (森 is three 木). Facts
# about the script, the same on every model; the page asks the tokenizer how each is cut.
PARTS: list[tuple[str, str, int]] = [
    ("森", "木", 3), ("林", "木", 2), ("晶", "日", 3), ("品", "口", 3), ("鑫", "金", 3), ("淼", "水", 3), ("磊", "石", 3),
]

CHIP_COLOURS = ("blue", "orange")     # alternate, so neighbouring tokens stand apart (colour-blind safe pair)
BYTE_COLOUR = "gray"                  # a piece of a character's UTF-8 bytes
SPECIAL_COLOUR = "violet"             # <|im_start|> and friends
CHIP_LIMIT = 24                       # characters of one chip before it is shortened
CHAR_LIMIT = 12                       # characters of a split character's label: "·<U+202E>" fits whole


# --------------------------------------------------------------------------- chips

def chip(text: str, colour: str, token_id: int | None = None) -> str:
    """One token as a Markdown background chip, its text escaped; the id after it in grey."""
    body = md_escape(label(text, CHIP_LIMIT))
    if token_id is not None:
        body += f" :gray[{token_id}]"
    return f":{colour}-background[{body}]"


def chips_markdown(tokens: Sequence, show_ids: bool = False, start: int = 0) -> str:
    """The tokens as chips separated by spaces, with a line break after a token that holds a
    newline (so the chips keep the text's lines). ``start`` picks the colour phase."""
    parts: list[str] = []
    for n, tok in enumerate(tokens):
        if tok.special:
            colour = SPECIAL_COLOUR
        elif tok.is_partial:
            colour = BYTE_COLOUR
        else:
            colour = CHIP_COLOURS[(n + start) % 2]
        parts.append(chip(tok.text, colour, tok.id if show_ids else None))
        parts.append("  \n" if "\n" in tok.text else " ")
    return "".join(parts).rstrip()


def split_lines(groups: Sequence[CharacterGroup], template: Callable[..., str], limit: int = 12,
                dropped_template: Callable[..., str] | None = None) -> list[str]:
    """Markdown lines "猫 = <E7> + <8C> + <AB>" for characters spread over byte tokens.

    A group whose character lost bytes the vocabulary cannot hold (the lead byte F1 of
    U+40000) uses ``dropped_template``, with the character written as its code point."""
    lines = []
    for g in groups[:limit]:
        pieces = " + ".join(code_span(tok.text) for tok in g.tokens)
        n_bytes = len(g.text.encode("utf-8"))
        if g.dropped and dropped_template is not None:
            lines.append(dropped_template(char=char_code(g.text), pieces=pieces, n=len(g.tokens), bytes=n_bytes,
                                          kept=n_bytes - len(g.dropped),
                                          dropped=" ".join(f"{b:02X}" for b in g.dropped)))
        else:
            lines.append(template(char=code_span(label(g.text, CHAR_LIMIT)), pieces=pieces, n=len(g.tokens),
                                  bytes=n_bytes))
    return lines


def char_code(text: str) -> str:
    """Characters as their code points, "U+40000" (for characters a font cannot show)."""
    return " ".join(code_span(f"U+{ord(ch):04X}") for ch in text)


def letter_chips(tokens: Sequence, counts: Sequence[int]) -> str:
    """Chips for a word's pieces, each followed by how many times the letter is inside it."""
    parts = []
    for n, (tok, k) in enumerate(zip(tokens, counts)):
        parts.append(chip(tok.text, CHIP_COLOURS[n % 2]) + f" **×{k}**")
    return " ".join(parts)


# --------------------------------------------------------------------------- charts

def cost_figure(rows: Sequence[tuple[str, Sequence[int]]], series: Sequence[str], title: str,
                x_title: str, hover: Sequence[Sequence[str]] | None = None) -> go.Figure:
    """Grouped horizontal bars: one group per row (a text), one bar per series.

    rows: (row label, value per series); hover: optional extra hover text per row per series.
    """
    fig = go.Figure()
    labels = [html_escape(shorten_to_width(r[0], 56)) for r in rows]     # 56 columns: 28 Chinese characters
    for s, name in enumerate(series):
        values = [r[1][s] for r in rows]
        extra = [h[s] for h in hover] if hover is not None else [""] * len(rows)
        fig.add_bar(
            y=labels, x=values, name=name, orientation="h", marker_color=style.OKABE_ITO[s],
            text=[f"{v:,}" for v in values], textposition="outside", cliponaxis=False,
            customdata=extra, hovertemplate="%{y}<br>%{x:,} %{customdata}<extra>" + html_label(name) + "</extra>",
        )
    fig.update_layout(barmode="group", title=title, bargap=0.25, bargroupgap=0.05,
                      legend=dict(traceorder="normal", orientation="h", yanchor="bottom", y=1.0, x=0,
                                  xanchor="left"),
                      margin=dict(l=10, r=10, t=100, b=10))
    fig.update_yaxes(autorange="reversed", type="category")
    top = max((max(r[1]) for r in rows), default=1)
    fig.update_xaxes(title=x_title, range=[0, top * 1.15 + 1])
    return fig


def html_label(text: str, limit: int = 28) -> str:
    return plot_label(text, limit)


def length_histogram(length_counts: Sequence[tuple[int, int]], title: str, x_title: str, y_title: str,
                     marks: Sequence[tuple[int, str]] = ()) -> go.Figure:
    """How many vocabulary entries have each length in bytes (log count axis)."""
    xs = [n for n, _ in length_counts]
    fig = go.Figure(go.Bar(x=xs, y=[c for _, c in length_counts], marker_color=style.OKABE_ITO[0],
                           hovertemplate="%{x} B: %{y:,}<extra></extra>"))
    for x, text in marks:
        fig.add_annotation(x=x, y=0, yref="paper", text=text, showarrow=True, arrowhead=2, ax=0, ay=-40,
                           font=dict(size=style.FONT_SIZE - 3))
    fig.update_layout(title=title, bargap=0.1)
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title, type="log")
    return fig


def id_figure(tokens: Sequence, title: str, x_title: str, y_title: str, vocab_size: int,
              hover_id: str) -> go.Figure:
    """The id of each prompt token (log axis): low ids are the merges learned first."""
    from course.tokens import axis_labels
    labels = axis_labels(tokens, 12)
    ids = [max(tok.id, 1.6) for tok in tokens]     # so that ids 0 and 1 still show a bar on the log axis
    colours = [style.OKABE_ITO[5] if tok.special else style.OKABE_ITO[7] if tok.is_partial else style.OKABE_ITO[0]
               for tok in tokens]
    fig = go.Figure(go.Bar(x=labels, y=ids, marker_color=colours, customdata=[tok.id for tok in tokens],
                           hovertemplate="%{x}<br>" + hover_id + " %{customdata}<extra></extra>"))
    fig.update_layout(title=title)
    fig.update_xaxes(title=x_title, type="category", tickangle=-45 if len(tokens) > 12 else 0)
    fig.update_yaxes(title=y_title, type="log", range=[0, math.log10(max(vocab_size, 10)) + 0.1])   # 1 .. the vocabulary
    return fig


