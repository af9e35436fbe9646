"""Accessibility in a real Chromium (classroom/access.py): the skip link and a lesson walked with
the keyboard alone, charts whole on a phone, and the dark theme (axe-core's contrast check on it,
charts drawn dark, the switch and ?theme=dark). The per-page axe check of every page, language
and model is in test_browser.py (test_page_draws_whole_on_a_projector), on the same load."""

from __future__ import annotations

import os

import pytest

from course import i18n
from tests.browser import axe
from tests.browser.test_browser import assert_no_exception, query, rerun, shots  # noqa: F401 - shots: a fixture
from tools import browser as harness

pytestmark = pytest.mark.browser

if not harness.chromium_available() and not os.environ.get("CI"):
    pytest.skip("chromium not found at /usr/bin/chromium: install it with "
                "`apt-get install -y chromium fonts-noto-cjk` to run the browser tests",
                allow_module_level=True)

ACTIVE = """() => { const e = document.activeElement; if (!e) return {};
  const main = document.querySelector("[data-testid='stMain']"), side = document.querySelector("[data-testid='stSidebar']");
  return {tag: e.tagName, id: e.id, role: e.getAttribute('role') || (e.type === 'range' ? 'slider' : ''),
          text: (e.innerText || '').trim().slice(0, 80), href: e.getAttribute('href') || '',
          value: e.getAttribute('aria-valuenow') || (e.type === 'range' ? e.value : ''),
          main: !!(main && main.contains(e)), sidebar: !!(side && side.contains(e)),
          key: (e.closest('[class*="st-key-"]') || {className: ''}).className.split(' ').filter(c => c.startsWith('st-key-')).join(' ')}; }"""


def tab_to(page, wanted, limit: int = 400) -> dict:
    """Press Tab until the focused element satisfies ``wanted(active)``; returns it."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        active = page.evaluate(ACTIVE)
        if wanted(active):
            return active
    raise AssertionError(f"not reached with {limit} Tab presses; last focus {page.evaluate(ACTIVE)}")


def test_a_lesson_walked_with_the_keyboard_alone(warm_tab, base_url):
    """Tab, Enter, arrow keys and typing only: the skip link is the first stop and lands in the
    lesson; a slider moves with the arrows (and the URL follows); a Try-this button loads its
    prompt; the prompt box takes a typed prompt; Next goes on to the next lesson. (Streamlit's
    slider is a native range input: its role is implicit, its value the input's.)"""
    page = warm_tab
    page.set_viewport_size({"width": 1280, "height": 720})
    for lang in ("zh-Hant", "en"):
        page.goto(harness.page_url(base_url, "attention", lang=lang, prompt="The cat sat on the mat."))
        harness.wait_until_drawn(page)
        page.keyboard.press("Tab")
        first = page.evaluate(ACTIVE)
        assert first["id"] == "dl-skip" and first["text"] == i18n.catalog(lang)["shell.skip"], first
    page.keyboard.press("Enter")
    landed = page.evaluate(ACTIVE)
    assert landed["main"] and landed["tag"] == "H1", landed
    # a slider, moved with the arrow keys
    slider = tab_to(page, lambda a: a["main"] and a["role"] == "slider")
    before = query(page)
    rerun(page, lambda: page.keyboard.press("ArrowRight"))
    page.wait_for_timeout(300)
    moved = page.evaluate(ACTIVE)
    changed = {k: v for k, v in query(page).items() if before.get(k) != v}
    assert list(changed.values()) == [str(int(slider["value"]) + 1)], (slider, before, query(page))
    # a Try-this button, pressed with Enter
    button = tab_to(page, lambda a: a["main"] and a["tag"] == "BUTTON" and "st-key-try_0" in a["key"])
    rerun(page, lambda: page.keyboard.press("Enter"))
    assert query(page)["prompt"].startswith(button["text"].replace("play_arrow", "").strip().rstrip("…")[:20]), \
        (button, query(page))
    assert_no_exception(page)
    # Next lesson, from the footer
    tab_to(page, lambda a: a["main"] and a["tag"] == "A" and a["href"].endswith("heads"))
    rerun(page, lambda: page.keyboard.press("Enter"))
    assert page.locator(harness.TITLE).first.inner_text().strip() == i18n.catalog("en")["nav.heads"]
    # the prompt box, from the top of the page: typed, applied with Ctrl+Enter
    page.keyboard.press("Shift+Tab")            # into the page again from wherever Enter left the focus
    tab_to(page, lambda a: a["tag"] == "TEXTAREA" and a["sidebar"])
    page.keyboard.press("Control+a")
    page.keyboard.type("A keyboard is enough.")
    rerun(page, lambda: page.keyboard.press("Control+Enter"))
    assert query(page)["prompt"] == "A keyboard is enough.", query(page)
    assert moved["role"] == "slider", moved     # the focus stayed on the slider through the rerun


# --- a phone -----------------------------------------------------------------------------

PHONE = {"width": 390, "height": 844}

# Chart titles whose text runs outside the chart's drawing, tick labels of one axis that overlap
# their neighbours, and a visible chart toolbar (it covered the right edge of every chart).
PHONE_PROBLEMS = """() => {
  const out = [];
  document.querySelectorAll("[data-testid='stMain'] [data-testid='stPlotlyChart']").forEach(chart => {
    const svg = chart.querySelector('.main-svg');
    if (!svg) return;
    const s = svg.getBoundingClientRect();
    chart.querySelectorAll('.gtitle, .g-xtitle text, .g-ytitle text, .annotation-text').forEach(t => {
      const r = t.getBoundingClientRect();
      if (r.width > 0 && (r.right > s.right + 2 || r.left < s.left - 2))
        out.push('clipped: ' + t.textContent.slice(0, 50) + ' (' + Math.round(r.left) + '..' + Math.round(r.right) + ' of ' + Math.round(s.left) + '..' + Math.round(s.right) + ')');
    });
    chart.querySelectorAll('.xaxislayer-above, .yaxislayer-above').forEach(layer => {
      const boxes = [...layer.querySelectorAll('.xtick text, .ytick text')].map(t => [t.textContent, t.getBoundingClientRect()])
        .filter(([, r]) => r.width > 0);
      for (let i = 1; i < boxes.length; i++) {
        const [a, r] = boxes[i - 1], [b, q] = boxes[i];
        const w = Math.min(r.right, q.right) - Math.max(r.left, q.left), h = Math.min(r.bottom, q.bottom) - Math.max(r.top, q.top);
        if (w > 2 && h > 2) { out.push('overlapping labels: ' + a.slice(0, 20) + ' / ' + b.slice(0, 20)); break; }
      }
    });
    const bar = chart.querySelector('.modebar-container');
    if (bar && bar.getBoundingClientRect().width > 0 && getComputedStyle(bar).display !== 'none')
      out.push('toolbar over the chart');
  });
  return out;
}"""


@pytest.mark.parametrize("page_id", ["embeddings", "position", "attention", "ffn", "whatif"])
def test_charts_whole_on_a_phone(browser, base_url, shots, page_id):
    """At 390x844 with touch: no chart title or axis title outside its chart, no tick labels drawn
    over each other, no toolbar over the chart (the pages the last review found cut on a phone)."""
    context = browser.new_context(viewport=PHONE, locale="en-US", is_mobile=True, has_touch=True,
                                  device_scale_factor=2)
    page = context.new_page()
    page.set_default_timeout(120_000)
    try:
        page.goto(harness.page_url(base_url, page_id, lang="en"))
        harness.wait_until_drawn(page)
        page.wait_for_timeout(800)
        assert_no_exception(page)
        problems = page.evaluate(PHONE_PROBLEMS)
        if shots is not None:
            page.screenshot(path=str(shots / f"phone-{page_id}.png"), full_page=False)
    finally:
        context.close()
    assert not problems, f"{page_id} at 390x844: " + "; ".join(problems)


# --- the dark theme ----------------------------------------------------------------------

# Each chart's paper (the first svg's background) and the plot areas and legend boxes it fills
# (plotly draws a transparent box as black at fill-opacity 0: those are left out).
CHART_BACKGROUNDS = """() => [...document.querySelectorAll("[data-testid='stMain'] [data-testid='stPlotlyChart']")].flatMap(chart => {
  const svg = chart.querySelector('.main-svg');
  return [getComputedStyle(svg).backgroundColor, ...[...chart.querySelectorAll('.main-svg rect.bg')]
    .filter(r => Number(getComputedStyle(r).fillOpacity) > 0).map(r => getComputedStyle(r).fill)];
})"""


def wait_background(page, test: str) -> None:
    """Wait until the app's background colour c (three numbers) passes `test`, then the page drawn.

    A theme switch may reload the page, so `.stApp` can be missing for a moment: that is a wait,
    not an error."""
    page.wait_for_function("() => { const a = document.querySelector('.stApp'); if (!a) return false;"
                           " const m = getComputedStyle(a).backgroundColor.match(/\\d+/g); if (!m) return false;"
                           f" const c = m.map(Number); return {test}; }}", timeout=120_000)
    harness.wait_until_drawn(page)


def wait_dark(page) -> None:
    """Wait for the dark theme (the first load may reload once to apply it) and the page drawn."""
    wait_background(page, "c[0] + c[1] + c[2] < 384")


def wait_light(page) -> None:
    """Wait for the light theme (white) and the page drawn."""
    wait_background(page, "c[0] === 255 && c[1] === 255 && c[2] === 255")


@pytest.mark.parametrize("page_id,lang", [("home", "en"), ("tokens", "zh-Hant"), ("attention", "en"),
                                          ("generation", "zh-Hans")])
def test_dark_theme_reads(warm_tab, base_url, shots, page_id, lang):
    """?theme=dark: Streamlit's dark theme, the charts drawn on the dark background, the link keeps
    theme=dark, and axe-core finds no critical or serious violation (contrast included)."""
    axe.require()
    page = warm_tab
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(harness.page_url(base_url, page_id, lang=lang, theme="dark"))
    wait_dark(page)
    page.wait_for_timeout(500)
    assert_no_exception(page)
    assert query(page).get("theme") == "dark"
    backgrounds = page.evaluate(CHART_BACKGROUNDS)
    assert backgrounds and all(b.replace(" ", "") in ("rgb(14,17,23)", "#0e1117") for b in backgrounds), backgrounds
    found = axe.serious(page, f"{page_id} {lang} dark")
    if shots is not None:
        harness.screenshot(page, shots / f"dark-{page_id}-{lang}.png")
    assert not found, "\n".join(found)


def test_dark_theme_switch(warm_tab, base_url):
    """The sidebar switch turns the dark theme on (the link gets theme=dark) and off again."""
    page = warm_tab
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(harness.page_url(base_url, "tokens", lang="en"))
    wait_light(page)
    page.locator(".st-key-theme_toggle label").click()
    wait_dark(page)
    page.wait_for_function("() => new URLSearchParams(location.search).get('theme') === 'dark'")
    page.locator(".st-key-theme_toggle label").click()
    wait_light(page)
    page.wait_for_function("() => !new URLSearchParams(location.search).has('theme')")
