"""A live Streamlit server and headless Debian Chromium, shared by the browser tests and
bench/bench_app.py. Loopback only; the server is stopped by its own pid."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
# Debian's chromium-headless-shell: the same Blink and V8 without the browser's user interface
# (Chrome's "old" headless mode, what Playwright itself runs headless). It draws the same pages
# with less work: over six pages' loads, axe runs, resizes and model switches, 121 CPU-s of
# Chromium against 136 for chromium --headless (two runs each, alternated). Used where it is
# installed; chromium otherwise.
HEADLESS_SHELL = "/usr/bin/chromium-headless-shell"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
VIEWPORT = {"width": 1400, "height": 900}

# Selectors of Streamlit 1.67 (pinned in requirements.txt).
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"
TITLE = "[data-testid='stMain'] h1"
EXCEPTION = "[data-testid='stException']"
PLACEHOLDER = ".st-key-coming_soon"
CHARTS_DRAWN = """() => {
    const main = document.querySelector("[data-testid='stMain']");
    if (!main || main.querySelector("[data-testid='stSkeleton']")) return false;
    const plots = [...main.querySelectorAll("[data-testid='stPlotlyChart']")];
    const graphs = [...main.querySelectorAll("[data-testid='stGraphVizChart']")];
    return plots.every(p => p.querySelector('.main-svg')) && graphs.every(g => g.querySelector('svg'));
}"""


def chromium_available() -> bool:
    return chromium_path() is not None


def chromium_path() -> str | None:
    """The headless browser to run: the headless shell where installed, else Debian's chromium."""
    for path in (HEADLESS_SHELL, CHROMIUM):
        if Path(path).exists():
            return path
    return shutil.which("chromium-headless-shell") or shutil.which("chromium")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_STARTED: dict[int, subprocess.Popen] = {}      # servers this process started, by pid


def start_server(env: dict | None = None, timeout: float = 120, log_path: str | os.PathLike | None = None,
                 args: list[str] | None = None, detached: bool = False) -> tuple[subprocess.Popen, str]:
    """Start the app (python -m server.serve, as ./lab app does) on a free loopback port and wait
    until it answers; returns (its Popen, its base URL). Stop it with ``stop_server``.
    ``detached``: in a session of its own, so it outlives this process (a server that several
    test workers share; tests/browser/conftest.py stops it by its pid)."""
    port = free_port()
    log = open(log_path or os.devnull, "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "server.serve", "--server.address", "127.0.0.1",
         "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none", *(args or [])],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={"DECODER_LAB_WARMUP": "0", **os.environ, **(env or {})},
        start_new_session=detached,
    )
    log.close()              # the child has its own copy
    _STARTED[proc.pid] = proc
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        try:
            if urllib.request.urlopen(f"{base}/_stcore/health", timeout=2).read() == b"ok":
                return proc, base
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_server(proc.pid)
            raise RuntimeError(f"streamlit did not start on port {port}")
        time.sleep(0.2)


def is_gone(pid: int) -> bool:
    """True when ``pid`` has exited (a zombie another process has not reaped yet counts as gone)."""
    try:
        os.kill(pid, 0)
    except OSError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def stop_server(pid: int, timeout: float = 20) -> None:
    """Stop the server ``pid`` (SIGTERM, then SIGKILL after ``timeout``), whoever started it."""
    import signal
    proc = _STARTED.pop(pid, None)
    if proc is not None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return
    deadline = time.monotonic() + timeout
    while not is_gone(pid):
        if time.monotonic() > deadline:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            return
        time.sleep(0.1)


@contextmanager
def streamlit_server(env: dict | None = None, timeout: float = 120, procs: list | None = None,
                     log_path: str | os.PathLike | None = None, args: list[str] | None = None):
    """Run the app on a free loopback port for the ``with`` block (start_server); yields the
    base URL (the server's Popen is appended to ``procs`` when given, e.g. to read its memory;
    its output goes to ``log_path`` when given; ``args``: more ``streamlit run`` options). Its
    start-up warm-up is off unless ``env`` or the environment turns it on (DECODER_LAB_WARMUP=1):
    tests and screenshots want the CPU."""
    proc, base = start_server(env, timeout, log_path, args)
    if procs is not None:
        procs.append(proc)
    try:
        yield base
    finally:
        stop_server(proc.pid)


def launch(playwright, extra_args: list[str] | None = None):
    return playwright.chromium.launch(executable_path=chromium_path(), args=[*CHROMIUM_ARGS, *(extra_args or [])])


def page_url(base: str, page: str, **params) -> str:
    from urllib.parse import urlencode
    path = "" if page == "home" else page
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return f"{base}/{path}" + (f"?{query}" if query else "")


def screenshot(page, path) -> None:
    """The whole page: Streamlit scrolls inside its main area, so grow the viewport to fit."""
    height = page.evaluate("() => document.querySelector(\"[data-testid='stMain']\").scrollHeight")
    page.set_viewport_size({"width": VIEWPORT["width"], "height": min(max(height, VIEWPORT["height"]), 12000)})
    page.wait_for_timeout(600)
    page.wait_for_function(CHARTS_DRAWN)
    page.screenshot(path=str(path))
    page.set_viewport_size(VIEWPORT)


def wait_until_drawn(page, timeout_ms: int = 240_000) -> None:
    """Wait for the script run to finish and every chart in the main area to be drawn."""
    page.wait_for_selector(TITLE, timeout=timeout_ms)
    page.wait_for_selector(IDLE, state="attached", timeout=timeout_ms)
    page.wait_for_function(CHARTS_DRAWN, timeout=timeout_ms)
    page.wait_for_selector(IDLE, state="attached", timeout=timeout_ms)
