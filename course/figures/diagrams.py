"""What the Graphviz diagrams (st.graphviz_chart) share: the text size Streamlit draws dot
labels at, and the font size the boxes are laid out for."""

from __future__ import annotations

import html
import re

from course.figures import style
from course.i18n import is_cjk, with_paren

# Streamlit draws a dot graph's text at 9.6 units whatever fontsize says; the figure modules size
# their boxes and the page's pixel width from it (course/figures/heads.py, position.py).
STREAMLIT_DOT_TEXT = 9.6
DIAGRAM_FONT = 10


def diagram_font() -> int:
    """The font size Graphviz lays the boxes out for: Streamlit's 9.6 units, a little more for
    Chinese, whose full-width characters Graphviz measures too narrow."""
    return 12 if style.view().lang in ("zh-Hant", "zh-Hans") else DIAGRAM_FONT


# --- text alternatives ---------------------------------------------------------------------------
# A diagram's alt text is read from its own DOT: the boxes' (translated) labels along its arrows,
# "Text → Predict every next token → Compare with the answer (loss)", so it says what the picture
# draws in the learner's language with nothing to keep in step by hand.

_STATEMENT = re.compile(r'(?P<chain>[A-Za-z_]\w*(?:\s*->\s*[A-Za-z_]\w*)*)\s*'
                        r'(?P<attrs>\[(?:[^\]"<]|"(?:[^"\\]|\\.)*"|<(?:[^<>]|<[^<>]*>)*>)*\])?', re.S)
_LABEL = re.compile(r'\blabel\s*=\s*(<(?:[^<>]|<[^<>]*>)*>|"(?:[^"\\]|\\.)*")', re.S)
_KEYWORDS = frozenset({"node", "edge", "graph", "digraph", "subgraph", "strict"})


def one_line(label: str) -> str:
    """A box's label on one line: its line breaks (\\n, <br/>, tags of an HTML label) joined with a
    space, or with nothing after a hyphen or between Chinese characters ("Feed-\\nforward" ->
    "Feed-forward", 「注意力\\n（詞元之間」 -> 「注意力（詞元之間」)."""
    text = re.sub(r"<br\s*/?>", "\n", label, flags=re.I)
    text = html.unescape(re.sub(r"<[^<>]*>", "", text)).replace("\\n", "\n").replace('\\"', '"')
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    out = ""
    for line in lines:
        if out and not (out.endswith("-") or (_wide(out[-1]) and _wide(line[0]))
                        or _full_width_mark(out[-1]) or _full_width_mark(line[0])):
            out += " "
        out += line
    return out


def _wide(ch: str) -> bool:
    return "\u2e80" <= ch <= "\uffef"


def _full_width_mark(ch: str) -> bool:
    return "\u3000" <= ch <= "\u303f" or "\uff00" <= ch <= "\uffef"


def _unquote(raw: str) -> str:
    return raw[1:-1]


def dot_chains(dot: str, lang: str = "en") -> list[str]:
    """The diagram's arrows as chains of box labels, "A → B → C", in the order the DOT draws
    them; an arrow drawn backwards (dir=back) reads the way it points, and an arrow's own label
    follows it in brackets. Boxes with no label use their name."""
    labels: dict[str, str] = {}
    edges: list[tuple[str, str, str]] = []
    for m in _STATEMENT.finditer(dot):
        names = [n.strip() for n in m.group("chain").split("->")]
        attrs = m.group("attrs") or ""
        label = _LABEL.search(attrs)
        if len(names) == 1:
            if label and names[0] not in _KEYWORDS:
                labels[names[0]] = one_line(_unquote(label.group(1)))
            continue
        back = re.search(r'\bdir\s*=\s*"?back', attrs) is not None
        note = one_line(_unquote(label.group(1))) if label else ""
        for a, b in zip(names, names[1:]):
            edges.append((b, a, note) if back else (a, b, note))
    chains: list[list[str]] = []
    notes: list[str] = []
    for a, b, note in edges:
        if chains and chains[-1][-1] == a and not notes[-1]:
            chains[-1].append(b)
            notes[-1] = note
        else:
            chains.append([a, b])
            notes.append(note)
    name = lambda n: labels.get(n, n)                                  # noqa: E731
    return [with_paren(" → ".join(map(name, chain)), note, lang) if note else " → ".join(map(name, chain))
            for chain, note in zip(chains, notes)]


def dot_alt(dot: str, lang: str = "en") -> tuple[str, dict]:
    """The diagram's alt text as (catalog key, fields): its chains of arrows (dot_chains)."""
    return "chart.diagram", dict(chains=("；" if is_cjk(lang) else "; ").join(dot_chains(dot, lang)))
