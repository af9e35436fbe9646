"""What the Graphviz diagrams (st.graphviz_chart) share: the text size Streamlit draws dot
labels at, and the font size the boxes are laid out for."""

from __future__ import annotations

from course.figures import style

# Streamlit draws a dot graph's text at 9.6 units whatever fontsize says; the figure modules size
# their boxes and the page's pixel width from it (course/figures/heads.py, position.py).
STREAMLIT_DOT_TEXT = 9.6
DIAGRAM_FONT = 10


def diagram_font() -> int:
    """The font size Graphviz lays the boxes out for: Streamlit's 9.6 units, a little more for
    Chinese, whose full-width characters Graphviz measures too narrow."""
    return 12 if style.view().lang in ("zh-Hant", "zh-Hans") else DIAGRAM_FONT
