"""End to end in a real Chromium: every page in all three languages, charts drawn, no exception,
nothing cut off at projector sizes, HTML in the prompt stays text, the URL carries the shared state.

With DECODER_LAB_SHOTS set to a folder, the page tests also save each page's whole-page screenshot
there (off by default: a screenshot checks nothing, and takes a second or two of the stage's CPU a
page; to look at pages, tests/browser/shots.py takes them at every projector size).
Skipped only when chromium is missing and CI is not set; under CI they must run.
"""

from __future__ import annotations

import ast
import os
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from course import i18n, nav
from course import model as models
from tests.browser import axe
from tests.browser.layout import MEASURE
from tools import browser as harness

pytestmark = pytest.mark.browser

if not harness.chromium_available() and not os.environ.get("CI"):
    pytest.skip("chromium not found at /usr/bin/chromium: install it with "
                "`apt-get install -y chromium fonts-noto-cjk` to run the browser tests",
                allow_module_level=True)

XSS = "<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def shots() -> Path | None:
    """The folder for screenshots (DECODER_LAB_SHOTS), or None: no screenshots."""
    if not os.environ.get("DECODER_LAB_SHOTS"):
        return None
    folder = Path(os.environ["DECODER_LAB_SHOTS"])
    folder.mkdir(parents=True, exist_ok=True)
    sys.__stderr__.write(f"\n[browser tests] screenshots in {folder}\n")
    return folder


def screenshot(page, shots: Path | None, name: str) -> None:
    if shots is not None:
        harness.screenshot(page, shots / name)


@pytest.fixture
def tab(warm_tab):
    """A tab at harness.VIEWPORT, English, with nothing stored (tests/browser/conftest.py)."""
    return warm_tab


def charts_on_open(page_id: str) -> bool:
    """False when app_pages/<id>.py declares ``CHARTS_ON_OPEN = False`` (its figures appear only
    after the learner presses a button)."""
    tree = ast.parse((harness.ROOT / nav.page_file(page_id)).read_text("utf-8"))
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "CHARTS_ON_OPEN" for t in node.targets)
                and isinstance(node.value, ast.Constant)):
            return bool(node.value.value)
    return True


def query(page) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlparse(page.url).query, keep_blank_values=True).items()}


def assert_no_exception(page) -> None:
    errors = page.locator(harness.EXCEPTION)
    assert errors.count() == 0, errors.first.inner_text()[:2000]


def rerun(page, action) -> None:
    """Do something that reruns the script, then wait until it is drawn again."""
    action()
    try:
        page.wait_for_selector("[data-testid='stApp'][data-test-script-state='running']", state="attached",
                               timeout=3000)
    except Exception:   # a quick rerun may finish before we look
        pass
    harness.wait_until_drawn(page)


@pytest.mark.parametrize("page_id", ["home", "tokens"])
def test_html_in_prompt_stays_text(tab, base_url, shots, page_id):
    dialogs = []
    tab.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    tab.goto(harness.page_url(base_url, page_id, lang="en", prompt=XSS + " **bold** $x$"))
    harness.wait_until_drawn(tab)
    time.sleep(0.5)
    screenshot(tab, shots, f"xss-{page_id}.png")
    assert not dialogs
    assert tab.locator("[data-testid='stMain'] img[src='x']").count() == 0
    assert tab.locator("[data-testid='stSidebar'] textarea").input_value().startswith(XSS)
    assert_no_exception(tab)


def test_url_carries_shared_state_across_pages(tab, base_url):
    tab.goto(harness.page_url(base_url, "home", lang="zh-Hant", prompt="Hello world", top="5"))
    harness.wait_until_drawn(tab)
    # A Chinese visitor starts on Gemma, and the link says so (a teacher's link fixes the model).
    assert query(tab) == {"lang": "zh-Hant", "prompt": "Hello world", "top": "5", "model": "gemma-3-270m"}
    rerun(tab, lambda: tab.locator("[data-testid='stSidebarNav'] a[href$='/tokens']").click())
    assert tab.locator(harness.TITLE).first.inner_text().strip() == i18n.catalog("zh-Hant")["nav.tokens"]
    assert tab.locator("[data-testid='stSidebar'] textarea").input_value() == "Hello world"
    params = query(tab)
    assert params.get("lang") == "zh-Hant" and params.get("prompt") == "Hello world" and "top" not in params
    assert params.get("model") == "gemma-3-270m"


def test_controls_and_append_update_the_url(tab, base_url):
    tab.goto(harness.page_url(base_url, "home", lang="en", prompt="The capital of France is", top="99"))
    harness.wait_until_drawn(tab)
    assert tab.get_by_text("top=99").count() >= 1               # the visible note
    assert query(tab).get("top") == "20"
    rerun(tab, lambda: tab.locator(".st-key-append_0 button").click())
    prompt = query(tab).get("prompt", "")
    assert prompt.startswith("The capital of France is") and len(prompt) > len("The capital of France is")
    assert tab.locator("[data-testid='stSidebar'] textarea").input_value() == prompt


def test_language_switch_in_sidebar(tab, base_url):
    tab.goto(harness.page_url(base_url, "home", lang="en"))
    harness.wait_until_drawn(tab)
    tab.locator(".st-key-language [role='combobox']").click()
    rerun(tab, lambda: tab.get_by_role("option", name="简体中文").click())
    assert tab.locator(harness.TITLE).first.inner_text().strip() == i18n.catalog("zh-Hans")["nav.home"]
    assert query(tab).get("lang") == "zh-Hans"


def test_the_sidebar_lists_every_lesson_in_the_learners_language(tab, base_url):
    """No "View 4 more" from Streamlit's collapsed menu (English on a Chinese page)."""
    tab.goto(harness.page_url(base_url, "home", lang="zh-Hant"))
    harness.wait_until_drawn(tab)
    links = tab.locator("[data-testid='stSidebarNav'] a")
    assert links.count() == len(nav.PAGES)
    # each link reads its icon (a Material ligature such as "home"), then its title
    assert [a.inner_text().strip().split("\n")[-1] for a in links.all()] == [i18n.catalog("zh-Hant")[f"nav.{p}"] for p in nav.PAGES]
    assert "View" not in tab.locator("[data-testid='stSidebarNav']").inner_text()


def test_unknown_params_are_dropped(tab, base_url):
    tab.goto(harness.page_url(base_url, "tokens", lang="en", top="5", nonsense="1"))
    harness.wait_until_drawn(tab)
    params = query(tab)
    assert "top" not in params and "nonsense" not in params and params.get("lang") == "en"


def test_deep_link_as_first_request_of_a_fresh_server(browser):
    with harness.streamlit_server() as base:
        context = browser.new_context(viewport=harness.VIEWPORT)
        page = context.new_page()
        page.goto(harness.page_url(base, "tokens", lang="zh-Hant", prompt="Hello"))
        harness.wait_until_drawn(page)
        title = page.locator(harness.TITLE).first.inner_text().strip()
        context.close()
    assert title == i18n.catalog("zh-Hant")["nav.tokens"]


# --- Chinese as Chinese, and nothing cut on a projector -----------------------------------

def _platform_fonts(page, selector: str) -> list[str]:
    """The fonts Chromium really used to draw the text of the first element matching selector."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    return [f["familyName"] for f in fonts]


@pytest.mark.parametrize("lang,script", [("zh-Hant", "TC"), ("zh-Hans", "SC")])
def test_chinese_draws_with_a_chinese_font(tab, base_url, lang, script):
    tab.goto(harness.page_url(base_url, "home", lang=lang))
    harness.wait_until_drawn(tab)
    assert tab.evaluate("() => document.documentElement.lang").startswith(lang)
    fonts = _platform_fonts(tab, "[data-testid='stMain'] h1")
    cjk = [f for f in fonts if "CJK" in f or "Sans TC" in f or "Sans SC" in f]
    assert cjk and all(script in f for f in cjk) and not any(" JP" in f for f in fonts), fonts


def test_no_deploy_button_or_developer_menu(tab, base_url):
    tab.goto(harness.page_url(base_url, "home", lang="en"))
    harness.wait_until_drawn(tab)
    assert tab.get_by_text("Deploy", exact=True).count() == 0
    assert tab.get_by_text("Press Ctrl+Enter to apply").count() == 0     # Streamlit's own English hint


def test_next_lesson_link_at_the_end_of_a_page(tab, base_url):
    tab.goto(harness.page_url(base_url, "attention", lang="en", prompt="The cat sat"))
    harness.wait_until_drawn(tab)
    link = tab.locator("[data-testid='stMain'] [data-testid='stPageLink'] a[href$='heads']")
    assert link.count() == 1
    rerun(tab, lambda: link.click())
    assert tab.locator(harness.TITLE).first.inner_text().strip() == i18n.catalog("en")["nav.heads"]


CUT_OFF = """() => {
  const out = [];
  const main = document.querySelector("[data-testid='stMain']");
  const cut = el => el.scrollWidth > el.clientWidth + 2;
  main.querySelectorAll("[data-testid='stMetricValue'], [data-testid='stMetricLabel'], .stButton button p, "
                        + "[data-testid='stWidgetLabel'] p, [role='tab'] p").forEach(el => {
    if (el.offsetParent !== null && cut(el)) out.push('cut: ' + el.innerText.slice(0, 60));
  });
  main.querySelectorAll("[data-testid='stPlotlyChart']").forEach(c => {
    const svg = c.querySelector('.main-svg'), title = c.querySelector('.gtitle');
    if (!svg || !title || !title.textContent) return;
    const r = title.getBoundingClientRect(), s = svg.getBoundingClientRect();
    if (r.width > 0 && (r.right > s.right + 2 || r.left < s.left - 2)) out.push('chart title: ' + title.textContent.slice(0, 60));
  });
  main.querySelectorAll("[data-testid='stGraphVizChart'] svg").forEach(svg => {
    const box = svg.viewBox && svg.viewBox.baseVal;
    if (!box || !box.width) return;
    const scale = svg.getBoundingClientRect().width / box.width;
    svg.querySelectorAll('text').forEach(t => {
      const px = parseFloat(getComputedStyle(t).fontSize) * scale;   // Streamlit's CSS overrides the DOT size
      if (px < 12) out.push('diagram text ' + px.toFixed(1) + ' px: ' + t.textContent.slice(0, 40));
    });
  });
  return out;
}"""


PROJECTORS = [(1024, 768), (1280, 720)]      # the first is where a page opens, the second after a resize


def choose_model(page, key: str) -> None:
    """Pick a model in the sidebar's model menu and wait for the page to be drawn again."""
    box = page.locator(".st-key-model_choice input")
    box.click()
    box.fill(models.model_name(key))                   # the menu keeps the matching option
    rerun(page, lambda: page.keyboard.press("Enter"))


@pytest.mark.parametrize("lang", ["en", "zh-Hant", "zh-Hans"])
@pytest.mark.parametrize("page_id", nav.PAGES)
def test_page_draws_whole_on_a_projector(warm_tab, base_url, shots, page_id, lang):
    """Every page in every language, opened at a projector's (or a student's laptop's) size with
    the sidebar open: the title in the learner's language, no exception, every chart drawn;
    nothing cut off (metric values and labels, button and tab labels, widget labels and chart
    titles whole, diagram text at least 12 px) at 1024x768 and again after the window grows to
    1280x720 (charts redrawn at the new width); at 1024x768, as a student's laptop first draws
    the page, also no chart text past its chart's edges, no x-axis title over a legend and no
    horizontal overflow (layout.MEASURE). One load per page and language serves both sizes (and
    the screenshot, with DECODER_LAB_SHOTS).

    The same load checks accessibility: axe-core (WCAG 2.0/2.1 A and AA) finds no critical or
    serious violation, on the language's first model and again after the sidebar switches to the
    other model (both models, one load)."""
    axe.require()
    width, height = PROJECTORS[0]
    page = warm_tab
    page.set_viewport_size({"width": width, "height": height})
    accessibility = []
    page.goto(harness.page_url(base_url, page_id, lang=lang))
    harness.wait_until_drawn(page)
    assert_no_exception(page)
    assert page.locator(harness.TITLE).first.inner_text().strip() == i18n.catalog(lang)[f"nav.{page_id}"]
    if page.locator(harness.PLACEHOLDER).count() == 0 and charts_on_open(page_id):
        charts = page.locator("[data-testid='stMain'] [data-testid='stPlotlyChart']")
        assert charts.count() >= 1, f"{page_id} draws no chart"
        for i in range(charts.count()):
            assert charts.nth(i).locator(".main-svg").first.is_visible()
    first = query(page)["model"]
    accessibility += axe.serious(page, first)
    problems = {}
    for n, (width, height) in enumerate(PROJECTORS):
        if n:
            page.set_viewport_size({"width": width, "height": height})
            page.wait_for_timeout(600)                 # plotly redraws at the container's new width
            page.wait_for_function(harness.CHARTS_DRAWN)
        page.wait_for_timeout(300)
        problems[f"{width}x{height}"] = page.evaluate(CUT_OFF)
        if not n:                                      # as the page first draws, at a laptop's size
            found = page.evaluate(MEASURE)
            problems[f"{width}x{height}"] += [f"{kind}: {item}" for kind in ("cut", "clash") for item in found[kind]] + (
                [f"overflow: {found['overflow']} px"] if found["overflow"] > 0 else [])
    screenshot(page, shots, f"{page_id}-{lang}.png")
    other = next(key for key in models.MODELS if key != first)
    choose_model(page, other)
    assert_no_exception(page)
    assert query(page)["model"] == other
    accessibility += axe.serious(page, other)
    assert not any(problems.values()), f"{page_id} ({lang}): " + "; ".join(
        f"{size}: {p}" for size, found in problems.items() for p in found)
    assert not accessibility, f"{page_id} ({lang}), axe: " + "\n".join(accessibility)
