"""What the browser tests measure on a drawn page of the app, in its own JavaScript
(tests/browser/test_browser.py, test_presenter_browser.py, and the layout sweep in sweep.py)."""

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
