"""A layout sweep for looking at pages (not a test): starts the app on a free loopback port and,
for every page, language, size and presenter mode on and off, runs the browser tests'
measurement (tests/browser/layout.py: MEASURE) and prints one line per view:
"ok", or what it found: chart text cut at a chart's edge, an x-axis title over a legend entry,
a page wider than the window, an exception, and in presenter mode text under 20 px.

    .venv/bin/python -m tests.browser.sweep                       # all: 14 pages x 3 languages x 2 sizes x 2 modes
    .venv/bin/python -m tests.browser.sweep --pages ffn position --langs zh-Hant --sizes 1024x768

On every run the browser tests take this measurement on every page and language in laptop
mode at 1024x768 (test_browser.py), and on chosen views in presenter mode at 1024x768
(test_presenter_browser.py); this is the whole grid (about 12 minutes on a 2-core machine).
"""

from __future__ import annotations

import argparse
import json

from course import nav
from tests.browser.layout import MEASURE
from tools import browser as harness


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", nargs="+", default=nav.PAGES)
    ap.add_argument("--langs", nargs="+", default=["en", "zh-Hant", "zh-Hans"])
    ap.add_argument("--sizes", nargs="+", default=["1024x768", "1280x720"])
    ap.add_argument("--modes", nargs="+", type=int, default=[1, 0], help="1: presenter mode, 0: laptop")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright
    problems = 0
    with harness.streamlit_server() as base, sync_playwright() as pw:
        browser = harness.launch(pw)
        for size in args.sizes:
            w, h = map(int, size.split("x"))
            for present in args.modes:
                for lang in args.langs:
                    ctx = browser.new_context(viewport={"width": w, "height": h})
                    page = ctx.new_page()
                    page.set_default_timeout(180_000)
                    for name in args.pages:
                        page.goto(harness.page_url(base, name, lang=lang, **({"present": 1} if present else {})))
                        harness.wait_until_drawn(page)
                        found = page.evaluate(MEASURE)
                        bad = {k: found[k] for k in ("cut", "clash") if found[k]}
                        if found["overflow"] > 0:
                            bad["overflow"] = found["overflow"]
                        if present and found["small"]:
                            bad["small"] = found["small"][:5]
                        if page.query_selector(harness.EXCEPTION):
                            bad["exception"] = True
                        problems += bool(bad)
                        print(size, "presenter" if present else "laptop", lang, name,
                              json.dumps(bad, ensure_ascii=False) if bad else "ok", flush=True)
                    ctx.close()
        browser.close()
    print(f"{problems} views with problems")


if __name__ == "__main__":
    main()
