"""Page time in a real browser: from opening the home page to its last chart drawn.

    .venv/bin/python -m bench.bench_app [--runs 5] [--threads 1 2] [--sessions 5] [--model gemma-3-270m]

For each torch thread count (DECODER_LAB_THREADS of the server) it starts the app, warms the
model with one visit, then times, each in a fresh browser session (a student opening a
link): a 20-token and a 200-token prompt, first view (the forward pass runs) and repeat
view (the shared run cache answers); then N sessions opening at once, on one shared prompt
(a teacher's link) and on N different prompts. The same cases are then timed without a
browser, over the server's websocket (request -> script_finished), which separates the
server's share from the browser's. Loopback only; prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlencode

from tools import browser as harness

WORDS = ("time year people way day man thing woman life child world school state family student group "
         "country problem hand part place case week company system program question work government "
         "number night point home water room mother area money story fact month lot right study book "
         "eye job word business issue side kind head house service friend father power hour game line").split()


def make_prompts(lm, n_tokens: int, count: int) -> list[str]:
    """``count`` different prompts of exactly ``n_tokens`` tokens each."""
    prompts = []
    for k in range(count):
        words = [WORDS[(k * 7 + i * 3) % len(WORDS)] for i in range(n_tokens * 2)]
        text = f"Story {k}: " + " ".join(words)
        bos = 1 if lm.tokenizer.bos_id is not None else 0      # Gemma's <bos> counts, but is not text
        ids = lm.encode(text)[bos:n_tokens]
        text = lm.decode(ids)
        assert len(lm.encode(text)) == n_tokens, "prompt does not round-trip to the same length"
        prompts.append(text)
    return prompts


async def open_and_time(browser, url: str) -> float:
    context = await browser.new_context(viewport=harness.VIEWPORT)
    page = await context.new_page()
    start = time.perf_counter()
    await page.goto(url)
    await page.wait_for_selector(harness.TITLE, timeout=300_000)
    await page.wait_for_selector(harness.IDLE, state="attached", timeout=300_000)
    await page.wait_for_function(harness.CHARTS_DRAWN, timeout=300_000)
    elapsed = time.perf_counter() - start
    if await page.locator(harness.EXCEPTION).count():
        raise RuntimeError(f"exception on {url}")
    await context.close()
    return elapsed


async def bench_server(base: str, lm, runs: int, sessions: int, model: str) -> list[tuple[str, list[float]]]:
    from playwright.async_api import async_playwright

    rows = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=harness.chromium_path(), args=harness.CHROMIUM_ARGS)
        await open_and_time(browser, harness.page_url(base, "home", lang="en", model=model))   # load the model
        for n_tokens in (20, 200):
            fresh = make_prompts(lm, n_tokens, runs + 1 + sessions)
            url = lambda prompt: harness.page_url(base, "home", lang="en", prompt=prompt, model=model)  # noqa: E731
            await open_and_time(browser, url(fresh[0]))           # warm this size's code paths
            first = [await open_and_time(browser, url(prompt)) for prompt in fresh[1:runs + 1]]
            repeat = [await open_and_time(browser, url(fresh[1])) for _ in range(runs)]
            rows.append((f"{n_tokens} tokens, 1 session, first view", first))
            rows.append((f"{n_tokens} tokens, 1 session, repeat view", repeat))
            shared = fresh[runs + 1]
            same = await asyncio.gather(*(open_and_time(browser, url(shared)) for _ in range(sessions)))
            rows.append((f"{n_tokens} tokens, {sessions} sessions at once, one shared prompt", list(same)))
            others = make_prompts(lm, n_tokens, runs + 1 + 2 * sessions)[runs + 1 + sessions:]
            different = await asyncio.gather(*(open_and_time(browser, url(prompt)) for prompt in others))
            rows.append((f"{n_tokens} tokens, {sessions} sessions at once, different prompts", list(different)))
        await browser.close()
    return rows


def script_time(base: str, query: dict) -> float:
    """One new session over the websocket: send a run request, wait for script_finished.
    (Streamlit's internal protocol; pinned with streamlit in requirements.txt.)"""
    import websocket
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    ws = websocket.create_connection(base.replace("http://", "ws://") + "/_stcore/stream",
                                     subprotocols=["streamlit"], timeout=300)
    try:
        request = BackMsg()
        request.rerun_script.query_string = urlencode(query)
        start = time.perf_counter()
        ws.send_binary(request.SerializeToString())
        while True:
            msg = ForwardMsg()
            msg.ParseFromString(ws.recv())
            if msg.WhichOneof("type") == "script_finished":
                return time.perf_counter() - start
    finally:
        ws.close()


def bench_websocket(base: str, lm, runs: int, sessions: int, model: str) -> list[tuple[str, list[float]]]:
    rows = []
    query = lambda prompt: {"lang": "en", "prompt": prompt, "model": model}  # noqa: E731
    for n_tokens in (20, 200):
        fresh = make_prompts(lm, n_tokens, 100 + runs + 2 * sessions)[100:]      # unseen by the browser cases
        rows.append((f"{n_tokens} tokens, 1 session, first view [no browser]",
                     [script_time(base, query(prompt)) for prompt in fresh[:runs]]))
        rows.append((f"{n_tokens} tokens, 1 session, repeat view [no browser]",
                     [script_time(base, query(fresh[0])) for _ in range(runs)]))
        with ThreadPoolExecutor(sessions) as pool:
            shared = fresh[runs]
            rows.append((f"{n_tokens} tokens, {sessions} at once, one shared prompt [no browser]",
                         list(pool.map(lambda _: script_time(base, query(shared)), range(sessions)))))
            rows.append((f"{n_tokens} tokens, {sessions} at once, different prompts [no browser]",
                         list(pool.map(lambda p: script_time(base, query(p)), fresh[runs + 1:runs + 1 + sessions]))))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--model", default="smollm2-135m", help="smollm2-135m or gemma-3-270m")
    args = parser.parse_args(argv)
    if not harness.chromium_available():
        print("chromium not found at /usr/bin/chromium (apt-get install -y chromium fonts-noto-cjk)")
        return 1
    from lesson_model import load_model
    lm = load_model(args.model)
    print(f"Home page on {lm.name}: browser open -> last chart drawn (seconds), warm model")
    print(f"{'torch threads':>13} | {'case':<58} | {'median':>6} | {'max':>6}")
    sys.stdout.flush()
    for threads in args.threads:
        with harness.streamlit_server(env={"DECODER_LAB_THREADS": str(threads)}) as base:
            rows = asyncio.run(bench_server(base, lm, args.runs, args.sessions, args.model))
            rows += bench_websocket(base, lm, args.runs, args.sessions, args.model)
            for case, times in rows:
                print(f"{threads:>13} | {case:<58} | {statistics.median(times):6.2f} | {max(times):6.2f}")
                sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
