"""ui.theme's layout rules that keep chart text inside its chart (no model, no server): long
subplot titles and legend entries are broken into lines, legends under a plot hang from their
y, and presenter mode grows heights, lowers legends and fits fewer title characters. The
browser tests (tests/browser/test_presenter_browser.py) check the drawn result."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from ui import presenter, theme

LONG = "after: divided by its size (learned weights left out of this comparison)"


@pytest.fixture
def presenting(monkeypatch):
    monkeypatch.setattr(presenter, "active", lambda: True)


def lines(text: str) -> list[str]:
    return text.split("<br>")


def test_the_residual_norm_chart_breaks_its_long_subplot_title():
    """plotly never breaks a subplot title: the norm chart's second one ran past a laptop's
    column; it is broken at the chart's title width."""
    from ui.figures_residual import norm_compare_figure

    names = {"ln.before": "before: the residual vector", "ln.after": LONG}
    fig = norm_compare_figure(lambda key, **kw: names.get(key, key), [0.0, 1.0], [0.0, 1.0], [0.0, 1.0], "t")
    before, after = (note.text for note in fig.layout.annotations[:2])
    assert before == names["ln.before"]
    assert len(lines(after)) >= 2 and all(theme.width_units(line) <= theme.THREE_QUARTERS_TITLE + 2 for line in lines(after))
    assert "".join(lines(after)).replace(" ", "") == LONG.replace(" ", "")   # nothing lost, only broken


def test_a_legend_under_the_plot_hangs_from_its_y():
    fig = go.Figure(go.Scatter(x=[0], y=[0], name="a"))
    fig.update_layout(legend=dict(orientation="h", y=-0.22))
    theme.style(fig)
    assert fig.layout.legend.yanchor == "top"
    above = go.Figure(go.Scatter(x=[0], y=[0], name="a"))
    above.update_layout(legend=dict(orientation="h", y=1.02, yanchor="bottom"))
    theme.style(above)
    assert above.layout.legend.yanchor == "bottom"


def test_legend_entries_wrap_narrower_on_a_laptop_than_their_text():
    entry = "GELU（GPT-2、BERT；它的 tanh 近似是 GeGLU 的閘門：Gemma、本模型）"
    wrapped = theme.legend_text(entry)
    assert len(lines(wrapped)) >= 2
    assert all(theme.width_units(line) <= theme.LAPTOP_LEGEND_WIDTH for line in lines(wrapped))
    assert theme.legend_text("SiLU") == "SiLU"


def test_presenter_mode_grows_heights_lowers_legends_and_room_above_titles(presenting):
    assert theme.presenter_height(300) > 300
    assert theme.legend_below(-0.25) < -0.25
    assert theme.room_above_subplot_titles() >= 1.8 * theme.PRESENT_MIN_PX
    assert theme.title_chars(40) < 40


def test_laptop_mode_keeps_heights_and_legends():
    assert theme.presenter_height(300) == 300
    assert theme.legend_below(-0.25) == -0.25
    assert theme.title_chars(40) == 40
