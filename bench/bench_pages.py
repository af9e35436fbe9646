"""Server CPU seconds per page view, one student at a time: where a class's work is.

    .venv/bin/python -m bench.bench_pages [--pages residual attention] [--models gemma-3-270m] [--lang en]

Starts the app with its start-up warm-up (as bench_class does) and waits for it, then opens
every page on each model in one fresh session with a prompt no earlier view used (first view:
the forward passes and page analyses run), then types another new prompt (rerun). For each view
it prints the wall time and the CPU seconds the server process spent on it (user + system, from
/proc), and at the end the total: what 25 students on 25 different pages ask of the machine.
A class of N on C cores cannot finish before (the sum of its views' CPU seconds) / C.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench.bench_class import MODELS, OWN, cpu_seconds, peak_mb, wait_for_warmup
from course import nav
from server import warmup
from tools import browser as harness
from tools.protocol import Client


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_pages", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", nargs="+", default=nav.PAGES, choices=nav.PAGES)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--lang", default="en", choices=sorted(OWN))
    args = parser.parse_args(argv)

    procs: list = []
    log = Path(tempfile.mkdtemp(prefix="bench-pages-")) / "server.log"
    with harness.streamlit_server(procs=procs, env={warmup.ENV: "1"}, log_path=log) as base:
        pid = procs[0].pid
        wait_for_warmup(log, timeout=1800)
        print(f"server warm, peak {peak_mb(pid):.0f} MB", flush=True)
        print(f"{'page':14} {'model':14} {'first s':>8} {'cpu s':>7} {'rerun s':>8} {'cpu s':>7}")
        totals = {"first": 0.0, "rerun": 0.0}
        for model in args.models:
            for i, page in enumerate(args.pages):
                query = {"lang": args.lang, "model": model}
                prompt = OWN[args.lang].format(i=i, k=f"p{model[:2]}")
                with Client(base, timeout=300) as client:
                    c0 = cpu_seconds(pid)
                    first = client.open(page, {**query, "prompt": prompt})
                    c1 = cpu_seconds(pid)
                    rerun = client.set_text("prompt", prompt + " again", page, query)
                    c2 = cpu_seconds(pid)
                bad = [p for r in (first, rerun) for p in r.exceptions + r.problems]
                totals["first"] += c1 - c0
                totals["rerun"] += c2 - c1
                print(f"{page:14} {model:14} {first.seconds:8.2f} {c1 - c0:7.2f} {rerun.seconds:8.2f} {c2 - c1:7.2f}"
                      + (f"  PROBLEM {bad[0][:120]}" if bad else ""), flush=True)
        print(f"total cpu s: first views {totals['first']:.1f}, reruns {totals['rerun']:.1f}; "
              f"server peak {peak_mb(pid):.0f} MB")


if __name__ == "__main__":
    main()
