"""course.theme's layout rules that keep chart text inside its chart (no model, no server): long
subplot titles and legend entries are broken into lines, legends under a plot hang from their
y, and presenter mode grows heights, lowers legends and fits fewer title characters. The
browser tests (tests/browser/test_presenter_browser.py) check the drawn result."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots

from course import theme
from course.figures import style

LONG = "after: divided by its size (learned weights left out of this comparison)"


@pytest.fixture
def presenting(monkeypatch):
    token = style._VIEW.set(style.View(presenting=True))
    yield
    style._VIEW.reset(token)


def lines(text: str) -> list[str]:
    return text.split("<br>")


def test_the_residual_norm_chart_breaks_its_long_subplot_title():
    """plotly never breaks a subplot title: the norm chart's second one ran past a laptop's
    column; it is broken at the chart's title width."""
    from course.figures.residual import norm_compare_figure

    names = {"ln.before": "before: the residual vector", "ln.after": LONG}
    fig = norm_compare_figure(lambda key, **kw: names.get(key, key), [0.0, 1.0], [0.0, 1.0], [0.0, 1.0], "t")
    before, after = (note["text"] for note in fig.to_dict()["layout"]["annotations"][:2])
    assert before == names["ln.before"]
    assert len(lines(after)) >= 2 and all(theme.width_units(line) <= theme.THREE_QUARTERS_TITLE + 2 for line in lines(after))
    assert "".join(lines(after)).replace(" ", "") == LONG.replace(" ", "")   # nothing lost, only broken


def test_a_y_axis_title_longer_than_its_plot_is_tall_breaks_into_two_lines(monkeypatch):
    """plotly never breaks an axis title: the residual page's running sum, kept 340 px tall in
    presenter type to fit the first screen, had its y-axis title cut at the chart's top and
    bottom. A title longer than the chart (or its subplot) allows, at the type's size, breaks
    into two lines; on the page's laptop height (480 px, 16 px type) it stays one line."""
    title = "length along the final vector"
    fig = go.Figure(go.Bar(x=["a"], y=[1]))
    fig.update_layout(yaxis_title=title, xaxis_title=title)
    for present, height, broken in [(True, 340, True), (True, 700, False), (False, 480, False), (False, 300, True)]:
        monkeypatch.setattr(style, "view", lambda present=present: style.View(presenting=present))
        layout = theme.style(fig, height=height)["layout"]
        y = layout["yaxis"]["title"]["text"]
        assert (len(lines(y)) == 2) is broken, (present, height, y)
        assert y.replace("<br>", " ") == title and layout["xaxis"]["title"]["text"] == title   # nothing lost; x stays
        assert go.Figure(theme.style(fig, height=height)).to_dict()["layout"]["yaxis"]["title"]["text"] == y
    monkeypatch.setattr(style, "view", lambda: style.View(presenting=True))
    halves = make_subplots(rows=2, cols=1)
    halves.add_trace(go.Bar(x=["a"], y=[1]), 1, 1)
    halves.update_yaxes(title_text=title)
    layout = theme.style(halves, height=560)["layout"]
    assert "<br>" in layout["yaxis"]["title"]["text"] and "<br>" in layout["yaxis2"]["title"]["text"]   # half the height each


def test_a_legend_under_the_plot_hangs_from_its_y():
    fig = go.Figure(go.Scatter(x=[0], y=[0], name="a"))
    fig.update_layout(legend=dict(orientation="h", y=-0.22))
    assert theme.style(fig)["layout"]["legend"]["yanchor"] == "top"
    above = go.Figure(go.Scatter(x=[0], y=[0], name="a"))
    above.update_layout(legend=dict(orientation="h", y=1.02, yanchor="bottom"))
    assert theme.style(above)["layout"]["legend"]["yanchor"] == "bottom"


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


def busy_figure() -> go.Figure:
    """A figure with what the pages' charts hold: subplots, a log axis, a heatmap's colour bar,
    bar text, an annotation, a long title, a legend under the plot, a polar subplot."""
    fig = make_subplots(rows=2, cols=2, subplot_titles=["one", "two", "three", ""],
                        specs=[[{}, {}], [{}, {"type": "polar"}]])
    fig.add_scatter(x=[1, 2], y=[3, 4], name="a", row=1, col=1)
    fig.add_bar(x=["p", "q"], y=[1, 2], text=["1", "2"], textfont=dict(size=12), row=1, col=2)
    fig.add_heatmap(z=[[0, 1], [1, 0]], colorbar=dict(tickfont=dict(size=11), title=dict(text="w", font=dict(size=13))),
                    row=2, col=1)
    fig.add_scatterpolar(r=[1, 2], theta=[0, 90], row=2, col=2)
    fig.add_annotation(text="note", x=1, y=3, font=dict(size=10), row=1, col=1)
    fig.update_yaxes(type="log", row=1, col=1)
    fig.update_layout(title=dict(text=LONG), legend=dict(orientation="h", y=-0.2))
    return fig


@pytest.mark.parametrize("present", [False, True])
def test_the_styled_json_is_what_plotly_validates_unchanged(monkeypatch, present):
    """style() writes the look into the figure's JSON without plotly's validators (they cost
    13 ms a figure): plotly's validators must accept the result and change nothing."""
    monkeypatch.setattr(style, "view", lambda: style.View(presenting=present))
    spec = theme.style(busy_figure(), height=500)
    assert go.Figure(spec).to_dict() == spec


@pytest.mark.parametrize("present", [False, True])
def test_style_sizes_every_axis_title_and_legend(monkeypatch, present):
    monkeypatch.setattr(style, "view", lambda: style.View(presenting=present))
    before = busy_figure().to_dict()["layout"]
    layout = theme.style(busy_figure(), height=500)["layout"]
    px = theme.font_px
    axes = [k for k in layout if k.startswith(("xaxis", "yaxis"))]
    assert len(axes) == 6
    for name in axes:
        assert layout[name]["automargin"] is True
        assert layout[name]["tickfont"]["size"] == px(theme.FONT_SIZE - 2)
        assert layout[name]["title"]["font"]["size"] == px(theme.FONT_SIZE)
    assert layout["font"]["size"] == px(theme.FONT_SIZE) and layout["legend"]["font"]["size"] == px(theme.FONT_SIZE - 2)
    assert layout["legend"]["yanchor"] == "top" and layout["height"] == 500
    title = layout["title"]["text"]
    assert title != LONG and title.replace("<br>", " ") == LONG        # broken into lines, nothing lost
    assert layout["title"]["font"]["size"] == px(theme.TITLE_SIZE)
    line_px = round(theme.TITLE_LINE_PX * px(theme.TITLE_SIZE) / theme.TITLE_SIZE)
    assert layout["margin"]["t"] == 40 + line_px * (title.count("<br>") + 1)
    assert [a["font"].get("size") for a in layout["annotations"]][-1] == (px(10) if present else 10)
    assert layout["yaxis"].get("dtick") == (1 if present else None)                 # the log axis
    assert before["yaxis"]["type"] == "log" and "dtick" not in before["yaxis"]


def test_presenter_mode_enlarges_the_sizes_a_figure_set_itself(presenting):
    spec = theme.style(busy_figure())
    bar, heatmap = spec["data"][1], spec["data"][2]
    assert bar["textfont"]["size"] == theme.font_px(12) > 12
    assert heatmap["colorbar"]["tickfont"]["size"] == theme.font_px(11) > 11
    assert heatmap["colorbar"]["title"]["font"]["size"] == theme.font_px(13)
    assert spec["layout"]["polar"]["radialaxis"]["tickfont"]["size"] == theme.font_px(theme.FONT_SIZE - 2)


@pytest.mark.parametrize("title", ["前一个词元的注意力：67%，其余（大部分）落在第一个词元「<bos>」上。",
                                   "第 3 層的注意力頭（頭 5）把 61% 的注意力放在前一個詞元：貓，而不是自己。",
                                   "Attention of head 5.3 (layer 5): 67% on the previous token",
                                   "up_proj · down_proj 的奇異值，第 15 層"])
def test_titles_break_by_chinese_line_rules(title):
    """No line starts with closing punctuation (，。：）」...) or ends with opening punctuation
    (（「...), at any width; nothing is lost or reordered, and no line runs past the width
    (or past its one piece that is wider)."""
    title = title.replace("<bos>", "bos")                 # wrap_title leaves markup alone
    widest = max(theme.width_units(piece) for piece, space in style._pieces(title) if not space)
    for width in range(8, theme.width_units(title) + 1):
        lines = theme.wrap_title(title, width).split("<br>")
        assert " ".join(lines).replace(" ", "") == title.replace(" ", ""), (width, lines)
        assert not any(line[0] in style._CLOSING for line in lines[1:]), (width, lines)
        assert not any(line[-1] in style._OPENING for line in lines[:-1]), (width, lines)
        assert all(theme.width_units(line) <= max(width, widest) for line in lines), (width, lines)


@pytest.mark.parametrize("title,unit", [("up_proj · down_proj 的奇異值，第 15 層", "第 15 層"),
                                        ("上面這張圖裡共有 1,024 個數字，都來自模型", "1,024 個")])
def test_a_count_and_its_measure_word_stay_on_one_line(title, unit):
    """「第 15 層」 (and a number with its measure word) is one unit: no width breaks inside it."""
    for width in range(8, theme.width_units(title) + 1):
        lines = theme.wrap_title(title, width).split("<br>")
        assert any(unit in line for line in lines), (width, lines)


def test_one_sessions_view_never_reaches_another_sessions_charts():
    """Each session's script runs in its own thread; a View set in one (presenter mode, Chinese)
    is not what a figure built in another thread sees."""
    import threading

    seen = {}

    def session(name, view):
        if view is not None:
            style.set_view(view)
        seen[name] = (style.view(), theme.font_px(16), style.font_family())

    teacher = threading.Thread(target=session, args=("teacher", style.View(lang="zh-Hant", presenting=True)))
    teacher.start()
    teacher.join()
    student = threading.Thread(target=session, args=("student", None))
    student.start()
    student.join()
    assert seen["teacher"][0].presenting and seen["teacher"][1] > 16 and "TC" in seen["teacher"][2]
    assert seen["student"] == (style.View(), 16, style.FONTS["en"])


def test_the_dark_theme_draws_on_the_dark_background_with_light_ink(monkeypatch):
    """?theme=dark (View.dark): the dark template, light text, the figures' own dark ink made
    light and white label boxes dark; per-point colours and colour scales untouched; plotly's
    validators accept the result unchanged."""
    monkeypatch.setattr(style, "view", lambda: style.View(dark=True))
    fig = busy_figure()
    fig.add_annotation(text="boxed", x=1, y=2, font=dict(color="#1f2937"), bgcolor="white", row=1, col=1)
    fig.add_annotation(text="veiled", x=1, y=1, bgcolor="rgba(255,255,255,0.85)", row=1, col=1)
    fig.update_layout(plot_bgcolor="white", paper_bgcolor="black")      # a figure's own backgrounds
    fig.add_bar(x=[1, 2], y=[1, 2], marker=dict(color=["black", "#1f2937"]), row=1, col=2)
    fig.add_heatmap(z=[[1, 2]], colorscale=[[0, "black"], [1, "white"]], row=1, col=2)
    spec = theme.style(fig)
    layout = spec["layout"]
    assert layout["template"]["layout"]["paper_bgcolor"] == style.DARK_BG
    assert layout["template"]["layout"]["plot_bgcolor"] == style.DARK_BG
    assert layout["font"]["color"] == style.DARK_TEXT
    boxed = next(a for a in layout["annotations"] if a.get("text") == "boxed")
    assert boxed["font"]["color"] == style.DARK_TEXT and boxed["bgcolor"] == style.DARK_BG
    assert next(a for a in layout["annotations"] if a.get("text") == "veiled")["bgcolor"] == "rgba(14,17,23,0.85)"
    assert layout["plot_bgcolor"] == layout["paper_bgcolor"] == style.DARK_BG
    assert spec["data"][-2]["marker"]["color"] == ["black", "#1f2937"]
    assert spec["data"][-1]["colorscale"] == [[0, "black"], [1, "white"]]
    assert go.Figure(spec).to_dict() == spec
    monkeypatch.setattr(style, "view", lambda: style.View())
    light = theme.style(busy_figure())
    assert light["layout"]["template"]["layout"]["paper_bgcolor"] == "white"
    assert light["layout"]["font"]["color"] == "#1f2937"
