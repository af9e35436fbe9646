"""User and model text cannot reorder or hide the course's own sentences (course.text.isolate):
format characters (a right-to-left override, zero-width joiners, the soft hyphen...) are shown
as chips such as <U+202E>, and text that could still reorder its neighbours is wrapped in
FIRST STRONG ISOLATE ... POP DIRECTIONAL ISOLATE. No model, no app."""

from __future__ import annotations

import random
import unicodedata

import pytest

from course.figures.generation import running_text
from course.figures.tokens import chip, chips_markdown, split_lines
from course.text import (
    FSI,
    PDI,
    code_span,
    could_reorder,
    hidden_chars,
    hidden_names,
    is_hidden,
    isolate,
    md_escape,
    show_format,
)
from course.tokens import axis_labels, cell_label, label, md_label, md_text, plot_label, sentence_label, visible
from lesson_model.analysis.tokenization import CharacterGroup
from lesson_model.tokens import Token

RLO, PDF, LRO, RLE, LRE = "\u202e", "\u202c", "\u202d", "\u202b", "\u202a"
LRI, RLI = "\u2066", "\u2067"
EXPLICIT = {LRE, RLE, LRO, RLO, PDF, LRI, RLI, FSI, PDI}        # every explicit direction control
FORMAT = [LRE, RLE, PDF, LRO, RLO, LRI, RLI, FSI, PDI, "\u200e", "\u200f", "\u200b", "\u200c", "\u200d",
          "\u2060", "\ufeff", "\u00ad", "\u061c", "\u180e", "\U000e0041"]
ATTACK = f"{RLO}evil{PDF}"


def explicit_controls(text: str) -> list[str]:
    return [ch for ch in text if unicodedata.bidirectional(ch) in
            {"LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"}]


def inside(text: str) -> str:
    """``text`` without the isolates around it, if it has them."""
    return text[1:-1] if text.startswith(FSI) and text.endswith(PDI) else text


def contained(text: str) -> bool:
    """The only direction controls in ``text`` are isolates wrapping the whole string, balanced:
    nothing inside can act on what comes before or after it."""
    controls = explicit_controls(text)
    if not controls:
        return True
    return controls == [FSI, PDI] and text.startswith(FSI) and text.endswith(PDI)


# --------------------------------------------------------------------------- the helpers

@pytest.mark.parametrize("ch", FORMAT)
def test_a_format_character_becomes_a_visible_chip(ch):
    assert unicodedata.category(ch) == "Cf" and is_hidden(ch)
    chip_text = f"<U+{ord(ch):04X}>"
    assert show_format(f"a{ch}b") == f"a{chip_text}b"
    assert visible(ch) == chip_text and label(ch) == chip_text
    assert inside(code_span(ch)) == f"`{chip_text}`" and contained(code_span(ch))
    assert inside(md_escape(ch)) == chip_text.replace("<", "\\<").replace("+", "\\+").replace(">", "\\>")


def test_separators_and_controls_are_shown_but_not_tab_and_newline():
    assert show_format("a\u2028b\u2029c\x85") == "a<U+2028>b<U+2029>c<U+0085>"
    assert show_format("a\tb\nc\r") == "a\tb\nc\r"
    assert visible("a\x00b\u200b") == "a\\x00b<U+200B>"       # C0 controls keep their \x form
    assert visible("<E2 80>") == "<E2 80>"                     # a byte piece stays a byte piece


def test_ordinary_text_is_unchanged():
    for text in ["plain words", "貓坐在墊子上。", "3.14 + x", "🐱 naïve café", "**b** [l](u)", "a`b"]:
        assert show_format(text) == text and not could_reorder(text) and isolate(text) == text
    assert code_span("a") == "`a`" and code_span("a`b") == "``a`b``" and md_label(" hi") == "`·hi`"
    assert plot_label(" <b>") == "·&lt;b&gt;" and axis_labels([" cat", " cat"]) == ["·cat (0)", "·cat (1)"]


def test_an_override_cannot_escape_its_isolate():
    out = isolate(ATTACK)
    assert out == f"{FSI}<U+202E>evil<U+202C>{PDI}"
    assert RLO not in out and PDF not in out and contained(out)
    assert code_span(ATTACK) == f"{FSI}`<U+202E>evil<U+202C>`{PDI}"
    assert md_escape(ATTACK) == f"{FSI}\\<U\\+202E\\>evil\\<U\\+202C\\>{PDI}"
    # the text's own isolates cannot close ours early, nor open one that stays open
    for nasty in [f"{PDI}{RLO}x", f"{FSI}x", f"x{PDI}{PDI}{RLI}", f"{LRI}{RLE}{LRO}"]:
        assert contained(isolate(nasty)) and contained(code_span(nasty)) and contained(md_escape(nasty))


def test_right_to_left_text_is_isolated_and_left_to_right_text_is_not():
    assert isolate("שלום") == f"{FSI}שלום{PDI}" and code_span("مرحبا") == f"{FSI}`مرحبا`{PDI}"
    assert isolate("٣") == f"{FSI}٣{PDI}"                      # an Arabic-Indic digit reorders too
    assert could_reorder("\u200f") and isolate("\u200f") == f"{FSI}<U+200F>{PDI}"
    assert not could_reorder("\u200b") and isolate("\u200b") == "<U+200B>"   # invisible, but not directional
    assert plot_label("שלום") == f"{FSI}שלום{PDI}" and sentence_label("שלום") == f"{FSI}שלום{PDI}"
    assert cell_label("שלום", 3) == f"{FSI}של…{PDI}"


def test_random_text_never_leaks_a_direction_control():
    rng = random.Random(7)
    alphabet = FORMAT + list("ab `*[]<>&\"'\n\t") + ["ש", "م", "٣", "貓", "\u2028", "\u2029", "\x85"]
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        for out in (isolate(text), code_span(text), md_escape(text), md_label(text), md_text(text),
                    plot_label(text), cell_label(text, 8), sentence_label(text), *axis_labels([text, text])):
            assert contained(out), (text, out)
            assert not any(is_hidden(ch) for ch in inside(out).replace("\n", "").replace("\t", "")), (text, out)


def test_hidden_characters_are_listed_once_with_their_names():
    assert hidden_chars(f"a{RLO}b{RLO}\u200b\t\n") == [RLO, "\u200b"]
    assert hidden_chars("plain 貓") == []
    assert hidden_names(ATTACK) == [("<U+202E>", "RIGHT-TO-LEFT OVERRIDE"), ("<U+202C>", "POP DIRECTIONAL FORMATTING")]


# --------------------------------------------------------------------------- where the course shows tokens

def tok(text: str, data: bytes | None = None, token_id: int = 7) -> Token:
    data = text.encode("utf-8") if data is None else data
    return Token(token_id, data, text, 0, 1)


def test_token_chips_show_the_controls():
    chips = chips_markdown([tok(RLO), tok("evil"), tok(PDF)], show_ids=True)
    assert RLO not in chips and PDF not in chips
    assert "\\<U\\+202E\\> :gray[7]" in chips and "\\<U\\+202C\\>" in chips and "evil" in chips
    assert RLO not in chip(ATTACK, "blue") and contained(chip("שלום", "blue").split("[", 1)[1].rstrip("]"))


def test_split_line_of_a_control_spelled_in_bytes():
    """SmolLM2 spells U+202E as the byte tokens <E2 80> + <AE>: the line names it <U+202E>, and
    nothing in it can turn the rest of the line around."""
    pieces = (tok("<E2 80>", b"\xe2\x80"), tok("<AE>", b"\xae"))
    line = split_lines([CharacterGroup(pieces, RLO, 0, 1)], lambda **f: "{char} = {pieces} ({n} for {bytes})".format(**f))[0]
    assert line == "`<U+202E>` = `<E2 80>` + `<AE>` (2 for 3)"
    assert not explicit_controls(line)


def test_generated_text_shows_the_prompt_controls():
    out = running_text(f"Say {ATTACK} twice.", [RLO, " evil"], newest=True)
    assert RLO not in out and PDF not in out
    assert f":gray[{FSI}Say \\<U\\+202E\\>evil\\<U\\+202C\\> twice\\.{PDI}]" in out
    assert f"[{FSI}\\<U\\+202E\\>{PDI}]" in out


# --------------------------------------------------------------------------- the page tests' checker

class _Proto:
    def __init__(self, text: str):
        self.text = text

    def SerializeToString(self) -> bytes:
        return self.text.encode("utf-8")


class _Node:
    def __init__(self, type_: str, text: str):
        self.type, self.proto = type_, _Proto(text)


class _Page:
    def __init__(self, *nodes):
        self._tree = list(nodes)


def test_direction_leaks_finds_what_a_page_must_not_draw():
    from tests._apptest import direction_leaks
    assert direction_leaks(_Page(_Node("markdown", code_span(ATTACK)), _Node("caption", isolate("שלום")))) == []
    assert direction_leaks(_Page(_Node("text_area", ATTACK))) == []            # the learner's own input
    assert [kind for kind, _ in direction_leaks(_Page(_Node("markdown", f"`{ATTACK}`")))] == ["markdown"]
    assert direction_leaks(_Page(_Node("plotly_chart", '{"x": ["\\u202eevil"]}')))          # JSON-escaped
    assert direction_leaks(_Page(_Node("markdown", f"{FSI}x")))                             # never closed
    assert direction_leaks(_Page(_Node("markdown", f"x{PDI}{FSI}")))                        # closed before opened


def test_shortening_never_cuts_a_chip_in_two():
    from course.text import shorten, shorten_to_width
    assert shorten("·<U+202E>", 8) == "·…" and shorten("·<U+202E>", 9) == "·<U+202E>"
    assert shorten("ab<U+202E>cd", 6) == "ab…" and shorten("abcdefghij", 5) == "abcd…"
    assert shorten_to_width("a<U+202E>b", 6) == "a…" and shorten_to_width("貓<U+202E>", 12) == "貓<U+202E>"
    assert label(f"x{RLO}" * 4, 12) == "x<U+202E>x…"
