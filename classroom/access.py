"""Keyboard, screen-reader and eyesight help around every page, and the dark theme.

- A "Skip to the lesson" link, the first thing Tab reaches on every page (in the learner's
  language; it replaces Streamlit's English "Skip to main content"), that moves the focus to
  the lesson's title, so the next Tab goes on into the lesson; and the focus kept on a widget that
  Streamlit draws anew on the rerun its own change starts (a slider moved with the arrow keys).
- Streamlit's own markup, repaired in the browser where axe-core (tests/browser) finds it wrong:
  the sidebar's lesson list holds each section in a <div> inside the <ul> (the section becomes
  the list, the <ul> a plain group), and the pages' section headings are <h3> right under the
  <h1> (read as level 2).
- On a narrow screen (a phone) the charts' toolbar is hidden (it covered the right edge of
  every chart), a chart or subplot title wider than its chart is moved inside and scaled down
  to fit, and tick labels that would be drawn over each other are thinned out (every label that
  overlaps the last one kept is left out, as plotly does with its own automatic ticks).
- ``?theme=dark`` (a shell URL parameter like lang and present, and a sidebar switch): Streamlit's
  own dark theme, chosen the way its settings menu chooses it (the browser's local storage,
  read when a page loads, so switching reloads the page once; .streamlit/config.toml sets no
  theme, which would rule the choice out), and charts drawn dark (course/figures/style.py,
  ``View.dark``). Without the parameter the course is light, whatever the system's setting.

Captions and focus are restyled in CSS (classroom/shell.py) to reach WCAG AA contrast.
"""

from __future__ import annotations

import json

import streamlit as st

from course import nav, state
from course.figures import style
from course.i18n import t
from course.text import code_span, shorten

PARAM = "theme"
_CANON = "_url.theme"
THEMES = ("light", "dark")
TOGGLE = "theme_toggle"


def dark() -> bool:
    """Whether this session draws the dark theme."""
    return st.session_state.get(_CANON) == "dark"


def init() -> str | None:
    """Read ``?theme=`` the first time a session meets it and claim it for this run (shell.start).
    Returns a note when the value is neither light nor dark."""
    raw = state.url_raw(PARAM)
    note = None
    if raw is not None:
        word = raw.strip().lower()
        st.session_state[_CANON] = word if word in THEMES else "light"
        if word not in THEMES:
            note = t("shell.bad_theme", param=code_span(f"{PARAM}={shorten(raw, 40)}"))
    st.session_state.setdefault(_CANON, "light")
    state.claim(PARAM, "dark" if dark() else None)
    return note


def _on_toggle() -> None:
    st.session_state[_CANON] = "dark" if st.session_state.get(TOGGLE) else "light"
    state.claim(PARAM, "dark" if dark() else None)


def toggle() -> None:
    """The sidebar's dark-theme switch (inside ``with st.sidebar``); sets this run's chart look."""
    st.session_state[TOGGLE] = dark()
    st.toggle(t("shell.dark"), key=TOGGLE, on_change=_on_toggle, help=t("shell.dark_help"))
    style.set_view(dark=dark())


# One script for the document, installed by the first run that draws it and given this run's
# words and theme on every run (window.__decoderLab). A MutationObserver repairs what Streamlit
# draws again (page switches, reruns, charts redrawn at a new width).
_SCRIPT = """<script>
(() => {
  const cfg = %(cfg)s;
  window.__decoderLab = cfg;
  const doc = document;
  function skipLink() {
    let a = doc.getElementById('dl-skip');
    if (!a) {
      a = doc.createElement('a');
      a.id = 'dl-skip'; a.className = 'dl-skip'; a.href = '#';
      a.addEventListener('click', e => {
        e.preventDefault();
        const main = doc.querySelector("[data-testid='stMain']");
        const target = (main && main.querySelector('h1')) || main;
        if (!target) return;
        if (!target.hasAttribute('tabindex')) target.setAttribute('tabindex', '-1');
        target.focus(); target.scrollIntoView({block: 'start'});
      });
    }
    if (doc.body.firstChild !== a) doc.body.insertBefore(a, doc.body.firstChild);
    if (a.textContent !== window.__decoderLab.skip) a.textContent = window.__decoderLab.skip;
  }
  function navList() {
    const ul = doc.querySelector("[data-testid='stSidebarNavItems']");
    if (!ul) return;
    if (ul.getAttribute('role') !== 'none') ul.setAttribute('role', 'none');
    for (const group of ul.children) {
      if (group.tagName === 'LI') continue;
      const header = group.querySelector("[data-testid='stNavSectionHeader']");
      if (group.getAttribute('role') !== 'list') group.setAttribute('role', 'list');
      if (header) {
        const label = header.textContent.replace(/expand_(more|less)/g, '').trim();
        if (group.getAttribute('aria-label') !== label) group.setAttribute('aria-label', label);
        if (header.getAttribute('role') !== 'none') header.setAttribute('role', 'none');
      }
    }
  }
  function headings() {
    const main = doc.querySelector("[data-testid='stMain']");
    if (!main || main.querySelector('h2')) return;
    for (const [tag, level] of [['h3', '2'], ['h4', '3'], ['h5', '4']]) {
      main.querySelectorAll(tag).forEach(h => { if (h.getAttribute('aria-level') !== level) h.setAttribute('aria-level', level); });
    }
  }
  function fitTitles() {
    // a chart title, axis title or subplot title wider than its chart: moved inside, scaled down to fit
    doc.querySelectorAll("[data-testid='stPlotlyChart'] .main-svg").forEach(svg => {
      const s = svg.getBoundingClientRect();
      svg.querySelectorAll('.gtitle, .annotation').forEach(title => {
        title.style.transform = '';
        const r = title.getBoundingClientRect();
        if (!r.width || (r.right <= s.right - 2 && r.left >= s.left + 2)) return;
        const k = Math.max(0.5, Math.min(1, (s.width - 6) / r.width));
        const left = Math.min(Math.max(r.left, s.left + 3), s.right - 3 - r.width * k);
        title.style.transformBox = 'fill-box'; title.style.transformOrigin = '0 0';
        title.style.transform = 'translateX(' + (left - r.left).toFixed(1) + 'px) scale(' + k.toFixed(3) + ')';
      });
    });
  }
  function thinTicks() {
    // tick labels drawn over each other (a token axis, a log axis' minor labels on a narrow
    // chart): every label that would overlap the last one kept is left out, as plotly does for its
    // own automatic ticks; the hover and the chart's table keep every label
    doc.querySelectorAll("[data-testid='stPlotlyChart'] .xaxislayer-above, [data-testid='stPlotlyChart'] .yaxislayer-above").forEach(layer => {
      const ticks = [...layer.querySelectorAll('.xtick text, .ytick text')];
      ticks.forEach(t => { if (t.style.display === 'none') t.style.display = ''; });
      let kept = null;
      for (const t of ticks) {
        const r = t.getBoundingClientRect();
        if (!r.width) continue;
        if (kept && Math.min(r.right, kept.right) - Math.max(r.left, kept.left) > 1
            && Math.min(r.bottom, kept.bottom) - Math.max(r.top, kept.top) > 1) { t.style.display = 'none'; continue; }
        kept = r;
      }
    });
  }
  // Streamlit may draw a widget anew on the rerun its own change starts (a slider moved with the
  // arrow keys is replaced): the focus would fall back to the page's start. The element that had
  // it is remembered by its widget key; when it is gone from the page and nothing else has the
  // focus, the same kind of control under the same key gets it back.
  let lastFocus = null;
  function keyOf(el) {
    const host = el && el.closest && el.closest('[class*="st-key-"]');
    return host ? [...host.classList].find(c => c.startsWith('st-key-')) : null;
  }
  function refocus() {
    if (!lastFocus || lastFocus.el.isConnected || Date.now() - lastFocus.at > 30000) return;
    const active = doc.activeElement;
    if (active && active !== doc.body) { lastFocus = null; return; }
    const host = doc.querySelector('.' + CSS.escape(lastFocus.key));
    const el = host && [...host.querySelectorAll(lastFocus.tag)].find(e => (e.type || '') === lastFocus.type && !e.disabled);
    if (el) { el.focus({preventScroll: true}); lastFocus = null; }
  }
  function theme() {
    const app = doc.querySelector('.stApp');
    if (!app) return;
    const rgb = (getComputedStyle(app).backgroundColor.match(/\\d+/g) || [255, 255, 255]).map(Number);
    const isDark = rgb[0] + rgb[1] + rgb[2] < 384;
    const wantDark = window.__decoderLab.theme === 'dark';
    const url = new URL(window.location.href);
    // Streamlit keeps the chosen theme per path, read when a page loads: set it for every lesson.
    const parts = url.pathname.split('/');
    const last = parts.pop();
    const base = (last === '' || window.__decoderLab.pages.includes(last)) ? parts.join('/') : url.pathname;
    for (const page of window.__decoderLab.pages) {
      const path = base + '/' + (page === window.__decoderLab.home ? '' : page);
      localStorage.setItem('stActiveTheme-' + path + '-v2', JSON.stringify(wantDark ? 'Dark' : 'Light'));
    }
    if (isDark === wantDark) { sessionStorage.removeItem('dl-theme'); return; }
    if (sessionStorage.getItem('dl-theme') === url.pathname + wantDark) return;   // tried once: no loop
    sessionStorage.setItem('dl-theme', url.pathname + wantDark);
    if (wantDark) url.searchParams.set('theme', 'dark'); else url.searchParams.delete('theme');
    window.location.replace(url.toString());
  }
  function fix() {
    try { refocus(); skipLink(); navList(); headings(); if (window.innerWidth <= 640) { fitTitles(); thinTicks(); } } catch (e) {}
  }
  window.__decoderLabFix = fix;
  if (!window.__decoderLabObserver) {
    let pending = false;
    window.__decoderLabObserver = new MutationObserver(() => {
      if (pending) return;
      pending = true;
      setTimeout(() => { pending = false; fix(); }, 50);
    });
    window.__decoderLabObserver.observe(doc.body, {childList: true, subtree: true});
    window.addEventListener('resize', () => setTimeout(fix, 300));
    doc.addEventListener('focusin', e => {
      const key = keyOf(e.target);
      lastFocus = key ? {el: e.target, key, tag: e.target.tagName, type: e.target.type || '', at: Date.now()} : null;
    }, true);
  }
  fix();
  setTimeout(theme, 0);
})();
</script>"""


def script() -> str:
    """This run's copy of the document script (its words and theme)."""
    cfg = {"skip": t("shell.skip"), "theme": "dark" if dark() else "light", "pages": list(nav.PAGES),
           "home": nav.HOME}
    # json.dumps escapes nothing HTML-special: the words are ours (catalogs), and "</" cannot
    # end the script early once written as "<\\/".
    return _SCRIPT % {"cfg": json.dumps(cfg, ensure_ascii=False).replace("</", "<\\/")}


def draw() -> None:
    """Put this run's script on the page (in the hidden container of classroom/shell.py)."""
    st.html(script(), unsafe_allow_javascript=True)
