"""Presenter mode (?present=1) in a real Chromium at 1024x768: type of 20 px or more (body text,
captions, labels, metric values, chart ticks and titles, diagram labels), Streamlit's menu
hidden, the sidebar collapsed, no horizontal overflow; the header's Next button and the
"Share this view" link (classroom/presenter.py)."""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, urlsplit

import pytest

from course import i18n, nav
from tests.browser.layout import MEASURE, MIN_PX
from tools import browser as harness

pytestmark = pytest.mark.browser

if not harness.chromium_available() and not os.environ.get("CI"):
    pytest.skip("chromium not found at /usr/bin/chromium", allow_module_level=True)

SIZE = {"width": 1024, "height": 768}

# Pages whose Graphviz diagrams must be drawn at 20 px or more in presenter mode: residual's are
# stretched to the column; heads, ffn and position draw theirs at a pixel width that gives
# theme.font_px of their laptop text size (course/figures/heads.py, figures_ffn.py, figures_position.py).
DIAGRAMS_CHECKED = {"residual", "heads", "ffn", "position"}


@pytest.fixture
def tab(warm_tab):
    """A tab at SIZE, English, with nothing stored (tests/browser/conftest.py)."""
    warm_tab.set_viewport_size(SIZE)
    return warm_tab


def query(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query))


def test_presenter_next_button_and_share_link(tab, base_url):
    tab.goto(harness.page_url(base_url, "position", lang="en", present=1, prompt="A cat <b>sat</b>"))
    harness.wait_until_drawn(tab)
    tab.locator(".st-key-present_next button:visible").first.click()
    tab.wait_for_url("**/attention?**")
    harness.wait_until_drawn(tab)
    assert query(tab.url)["present"] == "1" and query(tab.url)["prompt"] == "A cat <b>sat</b>"
    assert "<b>sat</b>" in tab.locator(".st-key-present_prompt").inner_text()     # shown as text
    tab.locator(".st-key-present_header [data-testid='stPopover'] button:visible").first.click()
    popover = tab.locator("[data-testid='stPopoverBody']")
    popover.wait_for()
    shared = popover.locator("[data-testid='stCode'] code").inner_text().strip()
    assert urlsplit(shared).path == urlsplit(tab.url).path == "/attention"
    assert urlsplit(shared).netloc == urlsplit(tab.url).netloc
    address = query(tab.url)
    assert address.pop("present") == "1" and "present" not in query(shared)   # students get laptop-size type
    assert query(shared) == address
    image = popover.locator("img")
    assert image.bounding_box()["width"] >= 280                    # big enough to scan off a slide


# --- presenter mode fits a screen: the first chart whole on the first screen, keys, sections ---

# The first chart of the page (plotly, graphviz, or home's loop picture) and the sticky header's
# bottom, in the 1024x768 viewport, before any scrolling.
FIRST_SCREEN = """() => {
  const main = document.querySelector("[data-testid='stMain']");
  const chart = main.querySelector("[data-testid='stPlotlyChart'], [data-testid='stGraphVizChart'], "
                                   + "[data-testid='stImage'] img, [data-testid='stHtml'] img");
  const header = document.querySelector('.st-key-present_header');
  const box = chart ? chart.getBoundingClientRect() : null;
  return {chart: box && {top: box.top, bottom: box.bottom, height: box.height},
          header: header ? header.getBoundingClientRect().bottom : null, viewport: window.innerHeight};
}"""

# Every page fits: in presenter mode "Predict, then see" is one line (its question, opening to the
# guess), and a first chart taller than the room left is drawn shorter or laid out wider
# (theme.projected; the MLP diagram in two rows; generation's and induction's chart beside their
# text). Measured on the default prompt and model of English (SmolLM2), on every page.
FIRST_SCREEN_LANG = "en"
# The views whose type is measured: every page in English, and pages in Chinese where the type
# runs longest (wide tables and diagrams, long chart titles and legends).
VIEWS = [(name, FIRST_SCREEN_LANG) for name in nav.PAGES] + [
    ("residual", "zh-Hant"), ("tokens", "zh-Hans"), ("heads", "zh-Hant"), ("ffn", "zh-Hant"), ("position", "zh-Hans")]


@pytest.mark.parametrize("name, lang", VIEWS)
def test_presenter_type_is_large_menu_hidden_no_overflow_first_chart_whole(tab, base_url, name, lang):
    """One load per view: type of MIN_PX or more, no chart text cut or over a legend, diagrams
    large enough, no horizontal overflow, the menu hidden and the sidebar collapsed; in English
    the first chart whole on the first screen, below the sticky header."""
    tab.goto(harness.page_url(base_url, name, lang=lang, present=1))
    harness.wait_until_drawn(tab)
    assert not tab.query_selector(harness.EXCEPTION)
    found = tab.evaluate(MEASURE)
    assert found["small"] == [], found["small"][:20]
    assert found["cut"] == [], found["cut"][:20]
    assert found["clash"] == [], found["clash"][:20]
    if name in DIAGRAMS_CHECKED:
        assert found["diagrams"] and min(found["diagrams"]) >= MIN_PX, found["diagrams"]
    assert found["overflow"] <= 0
    assert found["menu"] is False
    assert found["collapsed"] == "true"
    if lang == FIRST_SCREEN_LANG:
        screen = tab.evaluate(FIRST_SCREEN)
        assert screen["chart"] is not None, "no chart on the page"
        chart = screen["chart"]
        assert chart["top"] >= screen["header"] - 1, screen         # not under the sticky header
        assert chart["bottom"] <= screen["viewport"] + 1, screen    # whole on the first screen


def address(tab) -> str:
    return tab.evaluate("() => location.pathname + location.search")


def test_arrow_keys_go_to_the_previous_and_next_lesson(tab, base_url):
    tab.goto(harness.page_url(base_url, "position", lang="en", present=1))
    harness.wait_until_drawn(tab)
    tab.locator("[data-testid='stMain'] h1").first.click()       # focus in the page, not in a control
    tab.keyboard.press("ArrowRight")
    tab.wait_for_url("**/attention?**")
    harness.wait_until_drawn(tab)
    assert query(tab.url)["present"] == "1"
    # On a slider the arrows move the slider (the layer), not the page. (Streamlit 1.67's slider
    # is a native range input: its role is implicit, its value the input's.)
    slider = tab.locator("[data-testid='stMain'] .st-key-layer input[type='range']")
    layer = int(slider.input_value())
    down = slider.evaluate("e => e.value === e.max")
    slider.focus()
    tab.keyboard.press("ArrowLeft" if down else "ArrowRight")
    tab.wait_for_function("(want) => new URLSearchParams(location.search).get('layer') === want",
                          arg=str(layer - 1 if down else layer + 1))
    harness.wait_until_drawn(tab)
    assert "/attention" in address(tab)
    tab.locator("[data-testid='stMain'] h1").first.click()
    tab.keyboard.press("ArrowLeft")
    tab.wait_for_url("**/position?**")
    harness.wait_until_drawn(tab)


def test_s_lists_the_sections_and_a_jump_scrolls_there(tab, base_url):
    tab.goto(harness.page_url(base_url, "residual", lang="en", present=1))
    harness.wait_until_drawn(tab)
    tab.locator("[data-testid='stMain'] h1").first.click()
    tab.keyboard.press("s")
    listbox = tab.locator("[role='listbox']")
    listbox.wait_for()
    title = i18n.catalog("en")["residual.lens_title"]
    names = listbox.inner_text()
    assert i18n.catalog("en")["nav.residual"] in names and title in names
    listbox.get_by_text(title, exact=True).click()
    tab.wait_for_function("() => new URLSearchParams(location.search).get('section') === 'lens'")
    harness.wait_until_drawn(tab)
    tab.wait_for_timeout(1500)                                     # the scroll's second try
    heading = tab.locator("#section-lens").bounding_box()
    header = tab.locator(".st-key-present_header").bounding_box()
    assert header["y"] + header["height"] - 2 <= heading["y"] <= 300, (heading, header)
