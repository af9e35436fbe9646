"""Presenter mode (?present=1), "Share this view" and chart downloads, in AppTest (classroom/presenter.py).

The real-browser side (font sizes at 1024x768, the menu hidden, no horizontal overflow) is in
tests/browser/test_presenter_browser.py.
"""

from __future__ import annotations

import base64
import json
import re
from urllib.parse import parse_qsl, urlsplit

import pytest
import segno

from classroom import presenter, qr
from course import i18n, nav
from tests._apptest import errors, url_value
from tests.conftest import APP, APP_TIMEOUT

BASE = "https://class.example.org:8443/course"
XSS = "<img src=x onerror=alert(1)> **bold** [link](http://evil) $x$"


@pytest.fixture
def present(warm_app):
    """present(page, params=..., lang=..., url=...) -> AppTest opened on ``page`` like a browser at
    ``url/<page>?present=1&...`` (st.context.url is what the browser reports): its first run is
    the page's, as open_page's (tests/conftest.py)."""
    from streamlit.testing.v1 import AppTest

    def _open(page: str = nav.HOME, *, lang: str = "en", params: dict | None = None, prompt: str | None = None,
              model: str | None = "smollm2-135m", url: str | None = BASE, present: str | None = "1"):
        at = AppTest.from_file(str(APP), default_timeout=APP_TIMEOUT)
        for key, value in (("lang", lang), ("model", model), ("prompt", prompt), ("present", present)):
            if value is not None:
                at.query_params[key] = value
        for key, value in (params or {}).items():
            at.query_params[key] = str(value)
        if page == nav.HOME:
            at.context["url"] = url + "/" if url else None
        else:
            at.switch_page(nav.page_file(page))
            at.context["url"] = f"{url}/{page}" if url else None
        return at.run()
    return _open


def title(at) -> str:
    return at.title[0].value


def keys(at) -> set[str]:
    return {b.key for b in at.button}


def test_present_survives_page_switches_and_can_be_left(present):
    at = present(nav.HOME)
    assert not errors(at)
    assert url_value(at, "present") == "1"
    assert "present_next" in keys(at) and "present_prev" not in keys(at)
    at.switch_page(nav.page_file("tokens")).run()                 # the sidebar's navigation
    assert title(at) == i18n.catalog("en")["nav.tokens"]
    assert url_value(at, "present") == "1"
    assert {"present_prev", "present_next", "present_exit"} <= keys(at)
    at.button(key="present_exit").click().run()
    assert url_value(at, "present") is None
    assert not keys(at) & {"present_prev", "present_next"}
    at.toggle(key="present_toggle").set_value(True).run()         # back on from the sidebar
    assert url_value(at, "present") == "1"
    assert "present_prev" in keys(at)


def test_not_present_by_default_and_bad_value_is_noted(present):
    at = present(nav.HOME, present=None)
    assert url_value(at, "present") is None
    assert not keys(at) & {"present_prev", "present_next", "present_exit"}
    assert at.toggle(key="present_toggle").value is False
    at = present(nav.HOME, present="maybe")
    assert not errors(at)
    assert url_value(at, "present") is None
    assert any("present=maybe" in w.value for w in at.warning)


@pytest.mark.parametrize("page", [nav.PAGES[0], "attention", nav.PAGES[-1]])
def test_previous_and_next_go_to_the_neighbouring_lessons(present, page):
    i = nav.PAGES.index(page)
    at = present(page)
    names = i18n.catalog("en")
    assert ("present_prev" in keys(at)) == (i > 0)
    assert ("present_next" in keys(at)) == (i + 1 < len(nav.PAGES))
    if i + 1 < len(nav.PAGES):
        nxt = present(page)
        nxt.button(key="present_next").click().run()
        assert title(nxt) == names[f"nav.{nav.PAGES[i + 1]}"]
        assert url_value(nxt, "present") == "1"
    if i > 0:
        at.button(key="present_prev").click().run()
        assert title(at) == names[f"nav.{nav.PAGES[i - 1]}"]
        assert url_value(at, "present") == "1"


PROMPT_LABEL = i18n.catalog("en")["present.prompt"].split("{")[0]      # "**Prompt:** "


def header_line(at) -> str:
    """The header's middle line: where the page is in the course, then the prompt."""
    lines = [m.value for m in at.markdown if PROMPT_LABEL in m.value or "Lesson " in m.value or "Lab " in m.value]
    assert lines, [m.value for m in at.markdown][:5]
    return lines[0]


def test_compact_header_escapes_the_prompt(present):
    at = present("tokens", prompt=XSS)
    assert not errors(at)
    line = header_line(at)
    assert line.startswith("**Lesson 1 of 11** · ")
    shown = line.split(PROMPT_LABEL, 1)[1]
    assert "\\<img" in shown and not re.search(r"(?<!\\)[<*\[$]", shown)   # all escaped
    assert "\\*\\*bold\\*\\*" in shown and "\\[link\\]" in shown and "\\$x\\$" in shown


def test_compact_header_cuts_a_long_prompt(present):
    at = present("tokens", prompt="word " * 200)
    shown = header_line(at).split(PROMPT_LABEL, 1)[1]
    assert len(shown) <= presenter.PROMPT_CHARS and shown.endswith("…")


@pytest.mark.parametrize("page, where", [("attention", "**Lesson 4 of 11**"), ("whatif", "**Lab 1 of 2**"),
                                         ("train", "**Lab 2 of 2**")])
def test_header_says_where_the_page_is_and_no_prompt_on_the_training_lab(present, page, where):
    at = present(page, prompt="A prompt the training lab does not read")
    assert not errors(at)
    line = header_line(at)
    assert line.startswith(where)
    assert (PROMPT_LABEL in line) == (page not in nav.NO_MODEL)
    assert where.strip("*") in [c.value for c in at.caption]                  # the footer says it too


def scrolls_to(at) -> list[str]:
    """The sections this run's scroll script goes to."""
    return re.findall(r'const id = "section-(\w+)"', "\n".join(e.value for e in at.get("html")))


def test_sections_listed_in_page_order_and_a_jump_is_in_the_url(present):
    at = present("attention")
    assert not errors(at)
    shown = list(at.selectbox(key=presenter.PICK).options)
    names = i18n.catalog("en")
    assert shown[0] == names["nav.attention"] and shown[-2:] == [names["lesson.notice"], names["lesson.try"]]
    assert names["attention.search_title"] in shown and names["attention.toy.title"] in shown
    assert names["predict.title"] == shown[1]                               # Predict, then see: before the figures
    assert len(shown) == 11              # intro, Predict then see, seven parts (steps, toy ... cost), notice, try
    assert url_value(at, "section") is None and scrolls_to(at) == []
    at.selectbox(key=presenter.PICK).select("pattern").run()
    assert not errors(at)
    assert url_value(at, "section") == "pattern" and scrolls_to(at) == ["pattern"]
    at.slider(key="layer").set_value(1).run()              # another control: the section stays, no scroll again
    assert url_value(at, "section") == "pattern" and scrolls_to(at) == []
    at.button(key="present_next").click().run()            # another page starts at its top
    assert url_value(at, "section") is None and scrolls_to(at) == []


def test_a_link_opens_its_section_and_an_unknown_one_is_dropped(present):
    at = present("residual", params={"section": "lens"})
    assert not errors(at)
    assert url_value(at, "section") == "lens" and scrolls_to(at) == ["lens"]
    at = present("residual", params={"section": "nope<b>"})
    assert not errors(at)
    assert url_value(at, "section") is None and scrolls_to(at) == []
    at = present("residual", params={"section": "lens"}, present=None)   # a student's laptop view scrolls too
    assert url_value(at, "section") == "lens" and scrolls_to(at) == ["lens"]


def test_presenter_folds_prose_under_its_heading(present):
    label = i18n.catalog("en")["lesson.prose_folded"]
    big = present("attention")
    normal = present("attention", present=None)
    assert folded(big, label) >= 7                 # intro and every part's prose (beside its heading)
    assert folded(normal, label) == 0
    intro = i18n.lesson_sections("attention", "en")["intro"]
    assert not [m for m in big.markdown if m.value == intro] or folded(big, label)


def folded(at, label: str) -> int:
    """Prose folded under ``label``: popovers beside a heading, or expanders."""
    blocks = [node for node in _walk(at._tree) if getattr(node, "type", None) in ("popover", "expandable")]
    return sum(getattr(b.proto, b.type).label == label for b in blocks)


def _walk(node):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _walk(child)


def share_urls(at) -> list[str]:
    return [c.value for c in at.code if c.value.startswith(("http://", "https://"))]


def open_share(at):
    """Open both share popovers (the header's, the sidebar's) as a click does: they draw their
    link and QR code only while open."""
    for key in presenter.SHARE_POPOVERS:
        at.session_state[key] = True
    return at.run()


def test_share_popovers_draw_nothing_until_opened(present):
    """A closed popover's QR code is not encoded on every rerun (28 ms each)."""
    at = present("heads")
    assert share_urls(at) == [] and len(at.get("image")) == 0
    assert len(share_urls(open_share(at))) == 2 and len(at.get("image")) == 2


def test_share_url_is_the_exact_view(present):
    params = {"layer": 7, "head": 1}
    at = open_share(present("attention", lang="zh-Hant", model="gemma-3-270m", prompt="我吃魚，魚吃我。", params=params))
    assert not errors(at)
    urls = share_urls(at)
    assert len(urls) == 2 and urls[0] == urls[1]          # the header's popover and the sidebar's
    parts = urlsplit(urls[0])
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == BASE + "/attention"
    query = dict(parse_qsl(parts.query))
    url_now = {k: url_value(at, k) for k in at.query_params}
    assert url_now.pop("present") == "1"                    # the projector's big type is not shared:
    assert query == url_now                                 # every other parameter the URL holds
    assert query["prompt"] == "我吃魚，魚吃我。" and query["lang"] == "zh-Hant"
    assert query["layer"] == "7" and query["head"] == "1" and query["model"] == "gemma-3-270m"


def test_share_url_follows_a_changed_control_and_falls_back_without_context(present):
    at = open_share(present("attention", present=None))
    at.slider(key="layer").set_value(1).run()
    query = dict(parse_qsl(urlsplit(share_urls(at)[0]).query))
    assert query["layer"] == "1" and "present" not in query
    at = open_share(present(nav.HOME, url=None))
    assert share_urls(at)[0].startswith(presenter.FALLBACK_BASE + "?")


def test_share_popover_draws_the_qr_of_the_url(present):
    at = open_share(present("heads"))
    url = share_urls(at)[0]
    images = at.get("image")
    assert len(images) == 2                                 # the header's popover and the sidebar's
    scale = presenter.qr_scale(url)
    svg = qr.qr_svg(url, scale=scale, border=presenter.QR_BORDER)
    assert images[0].proto.imgs[0].url == "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()
    assert qr_matrix(svg) == modules(url)
    assert len(modules(url)) * scale >= presenter.QR_PX - scale      # about QR_PX wide


def modules(url: str) -> list[list[int]]:
    """segno's own module matrix of ``url``, with the quiet zone."""
    code = segno.make(url, error=presenter.QR_ERROR, micro=False)
    size = len(code.matrix) + 2 * presenter.QR_BORDER
    grid = [[0] * size for _ in range(size)]
    for y, row in enumerate(code.matrix):
        for x, dark in enumerate(row):
            grid[y + presenter.QR_BORDER][x + presenter.QR_BORDER] = 1 if dark else 0
    return grid


def qr_matrix(svg: str) -> list[list[int]]:
    """Read the dark modules back out of segno's SVG (M/m moves, h runs of dark modules, in
    module units under a scale transform)."""
    scale = float(re.search(r'scale\(([\d.]+)\)', svg).group(1)) if "scale(" in svg else 1.0
    size = round(float(re.search(r'<svg[^>]* width="([\d.]+)', svg).group(1)) / scale)
    path = re.search(r'class="qrline"[^>]* d="([^"]+)"', svg).group(1)
    grid = [[0] * size for _ in range(size)]
    x = y = 0.0
    for op, a, b in re.findall(r"([Mmh])(-?[\d.]+)(?: (-?[\d.]+))?", path):
        if op == "M":
            x, y = float(a), float(b)
        elif op == "m":
            x, y = x + float(a), y + float(b)
        else:
            for i in range(int(x), int(x + float(a))):
                grid[int(y)][i] = 1
            x += float(a)
    return grid


def test_qr_svg_round_trip_and_size():
    url = BASE + "/attention?lang=zh-Hant&model=gemma-3-270m&prompt=%E6%88%91&present=1&layer=2&head=3"
    scale = presenter.qr_scale(url)
    svg = qr.qr_svg(url, scale=scale, border=presenter.QR_BORDER)
    assert svg.startswith("<svg") and url not in svg
    assert qr_matrix(svg) == modules(url)
    assert qr_matrix(svg) != modules(url + "x")
    # a longer link gets a bigger code at 4 px per module or more; one too long for any QR code, None
    assert presenter.qr_scale(url + "&x=" + "%E6%88%91" * 100) >= 4
    assert presenter.qr_scale(url + "&x=" + "%E6%88%91" * 700) is None


def test_share_says_when_the_link_is_too_long_for_a_qr_code(present):
    at = open_share(present("tokens", prompt="我吃魚，魚吃我。" * 250))     # 2,000 characters, ~18,000 in the URL
    assert not errors(at)
    assert not at.get("image")
    assert sum(i.value == i18n.catalog("en")["share.too_long"] for i in at.info) == 2


def test_chart_download_options(present):
    at = present("attention", present=None)
    configs = {c.proto.id.rsplit("-", 1)[-1]: json.loads(c.proto.config) for c in at.get("plotly_chart")}
    assert configs
    for key, config in configs.items():
        if config.get("staticPlot"):
            continue
        options = config["toImageButtonOptions"]
        assert options["filename"] == f"decoder-lab_attention_{key}"
        assert options["format"] == "png" and 2 <= options["scale"] <= 3
        assert options["width"] * options["scale"] >= 1920
    at.segmented_control(key=presenter.EXPORT_FORMAT).set_value("svg").run()
    configs = [json.loads(c.proto.config) for c in at.get("plotly_chart")]
    assert all(c["toImageButtonOptions"]["format"] == "svg" for c in configs if not c.get("staticPlot"))


def test_present_mode_enlarges_chart_text(present):
    from course import theme
    normal = present("attention", present=None)
    big = present("attention")
    for at, low in ((normal, 10), (big, theme.PRESENT_MIN_PX)):
        for element in at.get("plotly_chart"):
            spec = json.loads(element.proto.spec)["layout"]
            assert spec["font"]["size"] >= low
            for axis in [v for k, v in spec.items() if re.match(r"[xy]axis\d*$", k)]:
                assert axis["tickfont"]["size"] >= low
            for note in spec.get("annotations", []):
                size = note.get("font", {}).get("size")
                assert size is None or size >= low
    sizes = [json.loads(e.proto.spec)["layout"]["font"]["size"] for e in big.get("plotly_chart")]
    assert min(sizes) >= theme.PRESENT_MIN_PX
