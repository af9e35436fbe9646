"""Screenshots for looking at pages (not a test): starts the app on a free loopback port
and saves, for each page and language, the first screen and the whole page at 1280x720
and 1024x768.

    .venv/bin/python -m tests.browser.shots --pages ffn residual --langs en zh-Hant --out /tmp/shots
    .venv/bin/python -m tests.browser.shots --pages attention --prompt "我吃魚，魚吃我。" --expand
    .venv/bin/python -m tests.browser.shots --pages home heads --params present=1    # presenter mode
    .venv/bin/python -m tests.browser.shots --pages train --click start --wait ".st-key-ckpt"   # after training

Screenshots are never committed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tools.browser import launch, page_url, streamlit_server, wait_until_drawn

SIZES = [(1280, 720), (1024, 768)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", nargs="+", required=True)
    ap.add_argument("--langs", nargs="+", default=["en", "zh-Hant"])
    ap.add_argument("--prompt", default=None)
    ap.add_argument("--models", nargs="+", default=[None], help="smollm2-135m and/or gemma-3-270m (default: the language's)")
    ap.add_argument("--out", default="/tmp/shots")
    ap.add_argument("--expand", action="store_true", help="open every expander (The math, In the code)")
    ap.add_argument("--sizes", nargs="+", default=[f"{w}x{h}" for w, h in SIZES])
    ap.add_argument("--params", nargs="+", default=[], metavar="KEY=VALUE",
                    help="more URL parameters for every page, e.g. present=1")
    ap.add_argument("--click", default=None, metavar="KEY", help="press the button with this widget key first")
    ap.add_argument("--wait", default=None, metavar="SELECTOR",
                    help="after --click, wait for this CSS selector (e.g. .st-key-ckpt once training is done)")
    args = ap.parse_args()
    extra = dict(p.split("=", 1) for p in args.params)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright
    with streamlit_server() as base, sync_playwright() as pw:
        browser = launch(pw)
        for size in args.sizes:
            w, h = map(int, size.split("x"))
            for lang, model in [(lang, model) for lang in args.langs for model in args.models]:
                ctx = browser.new_context(viewport={"width": w, "height": h})
                page = ctx.new_page()
                for name in args.pages:
                    page.goto(page_url(base, name, lang=lang, prompt=args.prompt, model=model, **extra))
                    wait_until_drawn(page)
                    if args.click:
                        button = page.locator(f".st-key-{args.click} button").first
                        if button.is_enabled():          # disabled: done already (a shared result)
                            button.click()
                        if args.wait:
                            page.wait_for_selector(args.wait, timeout=900_000)
                        wait_until_drawn(page)
                    if args.expand:
                        for summary in page.query_selector_all("[data-testid='stExpander'] summary"):
                            summary.click()
                        page.wait_for_timeout(800)
                    stem = f"{name}_{lang}_{model or 'default'}_{w}x{h}" + "".join(f"_{k}{v}" for k, v in extra.items()) \
                        + (f"_after-{args.click}" if args.click else "")
                    page.screenshot(path=str(out / f"{stem}_top.png"))
                    height = page.evaluate("() => document.querySelector(\"[data-testid='stMain']\").scrollHeight")
                    page.set_viewport_size({"width": w, "height": min(max(height, h), 14000)})
                    page.wait_for_timeout(800)
                    page.screenshot(path=str(out / f"{stem}_full.png"))
                    page.set_viewport_size({"width": w, "height": h})
                    print(out / f"{stem}_full.png", height)
                ctx.close()
        browser.close()


if __name__ == "__main__":
    main()
