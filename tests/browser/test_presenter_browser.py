"""Presenter mode (?present=1) in a real Chromium at 1024x768: type of 20 px or more (body text,
captions, labels, metric values, chart ticks and titles, diagram labels), Streamlit's menu
hidden, the sidebar collapsed, no horizontal overflow; the header's Next button and the
"Share this view" link (classroom/presenter.py)."""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, urlsplit

import pytest

from course import i18n, nav
from tools import browser as harness

pytestmark = pytest.mark.browser

if not harness.chromium_available() and not os.environ.get("CI"):
    pytest.skip("chromium not found at /usr/bin/chromium", allow_module_level=True)

SIZE = {"width": 1024, "height": 768}
MIN_PX = 20

# Every visible piece of text in the main area under MIN_PX: HTML text (not the source listings
# of "In the code", not icons, not KaTeX's sub- and superscripts or its hidden MathML), plotly
# text, and graphviz labels (drawn at font-size x the SVG's scale on screen). And plotly text
# that runs past its chart's edges (cut off): a subplot title above a 20 px top margin, a
# legend entry past the right edge, a colour bar's title below the bottom. And a chart's x-axis
# title drawn over its legend (larger ticks and titles push the title down onto a legend placed
# under it: seen on the heads page's KV chart and the training lab's).
MEASURE = """() => {
  const main = document.querySelector("[data-testid='stMain']");
  const visible = el => { const r = el.getBoundingClientRect(); const s = getComputedStyle(el);   // (1 px: screen-reader only)
    return r.width > 1 && r.height > 1 && s.visibility !== 'hidden' && s.display !== 'none'; };
  const small = [];
  for (const el of main.querySelectorAll('*')) {
    if (el.closest('svg') || el.closest('[data-testid="stCode"]') || el.closest('.st-key-doc_lang')
        || el.closest('[data-testid="stIconMaterial"]') || el.closest('.msupsub') || el.closest('.vlist-t')
        || el.closest('.katex-mathml') || el.querySelector('[data-testid="stIconMaterial"]')
        || /Material/.test(getComputedStyle(el).fontFamily)) continue;
    if (![...el.childNodes].some(n => n.nodeType === 3 && /[^\\s\\u200b]/.test(n.textContent)) || !visible(el)) continue;
    const px = parseFloat(getComputedStyle(el).fontSize);
    if (px < %(min)d) small.push([el.closest('[data-testid]')?.dataset.testid, px, el.textContent.trim().slice(0, 30)]);
  }
  for (const input of main.querySelectorAll('input[type="text"], input[type="number"], textarea')) {   // a selectbox's value
    const px = parseFloat(getComputedStyle(input).fontSize);
    if (visible(input) && px < %(min)d) small.push(['input', px, input.value.slice(0, 30)]);
  }
  for (const t of main.querySelectorAll("[data-testid='stPlotlyChart'] svg text")) {
    if (!t.textContent.trim() || t.closest('.hoverlayer') || !visible(t)) continue;
    const px = parseFloat(getComputedStyle(t).fontSize);
    if (px < %(min)d) small.push(['plotly', px, t.textContent.trim().slice(0, 30)]);
  }
  const cut = [];
  for (const chart of main.querySelectorAll("[data-testid='stPlotlyChart']")) {
    const svg = chart.querySelector('.main-svg'); if (!svg) continue;
    const b = svg.getBoundingClientRect();
    for (const t of chart.querySelectorAll('svg text')) {
      if (!t.textContent.trim() || t.closest('.hoverlayer')) continue;
      const r = t.getBoundingClientRect();
      const beyond = Math.max(b.top - r.top, r.bottom - b.bottom, b.left - r.left, r.right - b.right);
      if (r.width > 1 && beyond > 1)
        cut.push([chart.closest('[class*="st-key-"]')?.className.match(/st-key-(\\S+)/)?.[1], t.textContent.trim().slice(0, 30),
                  Math.round(beyond)]);
    }
  }
  const clash = [];   // text boxes hold some leading: glyphs only meet when the boxes overlap by more than 4 px
  const meet = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 4
                         && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 4;
  for (const chart of main.querySelectorAll("[data-testid='stPlotlyChart']")) {
    const entries = [...chart.querySelectorAll('.legend text')].filter(e => e.textContent.trim());
    for (const t of chart.querySelectorAll('text[class*="xtitle"]')) {
      const r = t.getBoundingClientRect();
      const hit = entries.find(e => meet(r, e.getBoundingClientRect()));
      if (t.textContent.trim() && hit)
        clash.push([chart.closest('[class*="st-key-"]')?.className.match(/st-key-(\\S+)/)?.[1], t.textContent.trim().slice(0, 30),
                    hit.textContent.trim().slice(0, 30)]);
    }
  }
  const diagrams = [];
  for (const svg of main.querySelectorAll("[data-testid='stGraphVizChart'] svg")) {
    const box = svg.viewBox.baseVal; const k = box && box.width ? svg.getBoundingClientRect().width / box.width : 1;
    diagrams.push(Math.min(...[...svg.querySelectorAll('text')].map(t => parseFloat(getComputedStyle(t).fontSize) * k)));
  }
  const menu = document.querySelector('[data-testid="stMainMenu"]');
  return {small, cut, clash, diagrams, overflow: Math.max(main.scrollWidth - main.clientWidth,
                                              document.documentElement.scrollWidth - document.documentElement.clientWidth),
          menu: !!menu && visible(menu), collapsed: document.querySelector('[data-testid="stSidebar"]')?.dataset.collapsed};
}""" % {"min": MIN_PX}

# Pages whose Graphviz diagrams must be drawn at 20 px or more in presenter mode: residual's are
# stretched to the column; heads, ffn and position draw theirs at a pixel width that gives
# theme.font_px of their laptop text size (course/figures/heads.py, figures_ffn.py, figures_position.py).
DIAGRAMS_CHECKED = {"residual", "heads", "ffn", "position"}


@pytest.fixture
def tab(warm_tab):
    """A tab at SIZE, English, with nothing stored (tests/browser/conftest.py)."""
    warm_tab.set_viewport_size(SIZE)
    return warm_tab


@pytest.mark.parametrize("name, lang", [("home", "en"), ("attention", "en"), ("sampling", "en"),
                                        ("residual", "zh-Hant"), ("tokens", "zh-Hans"),
                                        ("heads", "en"), ("heads", "zh-Hant"), ("ffn", "zh-Hant"),
                                        ("position", "zh-Hans")])
def test_presenter_type_is_large_menu_hidden_no_overflow(tab, base_url, name, lang):
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


@pytest.mark.parametrize("name, lang", [("ffn", "zh-Hant"), ("attention", "zh-Hans"), ("position", "zh-Hant"),
                                        ("position", "en"), ("residual", "en"), ("home", "zh-Hans")])
def test_laptop_chart_text_stays_inside_its_chart(tab, base_url, name, lang):
    """At 1024 px with the sidebar open (a student's laptop) the charts are narrower than in
    presenter mode: no text past a chart's edges, no axis title over a legend. (A sweep of every
    page, language and both sizes found these pages' cuts: long legend entries, subplot titles,
    a legend's title beside its entries.)"""
    tab.goto(harness.page_url(base_url, name, lang=lang))
    harness.wait_until_drawn(tab)
    assert not tab.query_selector(harness.EXCEPTION)
    found = tab.evaluate(MEASURE)
    assert found["cut"] == [], found["cut"][:20]
    assert found["clash"] == [], found["clash"][:20]
    assert found["overflow"] <= 0


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
# text). Measured on the default prompt and model of English (SmolLM2).
@pytest.mark.parametrize("name", nav.PAGES)
def test_presenter_first_screen_shows_the_first_chart_whole(tab, base_url, name):
    tab.goto(harness.page_url(base_url, name, lang="en", present=1))
    harness.wait_until_drawn(tab)
    found = tab.evaluate(FIRST_SCREEN)
    assert found["chart"] is not None, "no chart on the page"
    chart = found["chart"]
    assert chart["top"] >= found["header"] - 1, found         # not under the sticky header
    assert chart["bottom"] <= found["viewport"] + 1, found     # whole on the first screen


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
