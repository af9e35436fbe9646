"""axe-core (the accessibility checker, pinned in package.json; ./lab test installs it into
node_modules/) run in a page the browser tests opened: WCAG 2.0 and 2.1, levels A and AA."""

from __future__ import annotations

import os

import pytest

from tools import browser as harness

SCRIPT = harness.ROOT / "node_modules" / "axe-core" / "axe.min.js"
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
FAILING = ("critical", "serious")      # what fails a test; moderate and minor are reported by axe only

_RUN = """async tags => {
  const r = await axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']});
  return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => n.target.join(' ') + ': ' + (n.failureSummary || '').split('\\n').slice(1, 2).join(' ').trim())}));
}"""


def available() -> bool:
    return SCRIPT.exists()


def require() -> None:
    """Skip (fail under CI) when axe-core is not installed."""
    if available():
        return
    message = f"axe-core not found at {SCRIPT}: run `npm ci` (./lab test does) to run the accessibility checks"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def violations(page) -> list[dict]:
    """axe's violations of the page as it is now (every impact)."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(SCRIPT))
    return page.evaluate(_RUN, TAGS)


def serious(page, where: str) -> list[str]:
    """The critical and serious violations, one line each: where, rule, impact, up to 5 nodes."""
    return [f"{where}: {v['id']} ({v['impact']}, {len(v['nodes'])} nodes: {v['help']}): " + " | ".join(v["nodes"][:5])
            for v in violations(page) if v["impact"] in FAILING]
