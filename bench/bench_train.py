"""The Training lab's speed: training steps per second of lesson_model.training at 1 and 2 torch threads.

    python -m bench.bench_train            # from the repository root; prints the table
    python -m bench.bench_train --quick    # fewer steps and repeats: a smoke run
    python -m bench.bench_train --output bench/RESULTS_train.md

Each measurement is train() itself (evaluations every EVAL_EVERY steps and checkpoints
included, as the page runs it) for a fixed number of steps, stopped through should_stop.
Medians of interleaved repeats (every thread count and setting once per round), so a burst of
load from other processes hits all variants alike. The ratio compares with 1 thread.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from bench.bench_model import load_average, machine_description
from lesson_model import training as tr

VARIANTS = {
    "2 layers, attention only": tr.TrainSettings(n_layers=2),
    "1 layer, attention only": tr.TrainSettings(n_layers=1),
    "2 layers, with MLP": tr.TrainSettings(n_layers=2, mlp=True),
    "2 layers, no positions": tr.TrainSettings(n_layers=2, positions=False),
}


def steps_per_second(settings: tr.TrainSettings, steps: int) -> float:
    calls = {"n": 0}

    def should_stop():
        calls["n"] += 1
        return calls["n"] > steps

    start = time.perf_counter()
    result = list(tr.train(settings, should_stop=should_stop, max_seconds=600.0))[-1]
    seconds = time.perf_counter() - start
    assert result.steps_done == steps
    return steps / seconds


def measure(threads_list, steps: int, repeats: int) -> list[dict]:
    before = torch.get_num_threads()
    times = {(name, t): [] for name in VARIANTS for t in threads_list}
    try:
        for t in threads_list:                      # warm-up: one short run per thread count
            torch.set_num_threads(t)
            steps_per_second(VARIANTS["2 layers, attention only"], 10)
        for _ in range(repeats):
            for name, settings in VARIANTS.items():
                for t in threads_list:
                    torch.set_num_threads(t)
                    times[(name, t)].append(steps_per_second(settings, steps))
                    print(f"  {name}, threads={t}: {times[(name, t)][-1]:.1f} steps/s", file=sys.stderr, flush=True)
    finally:
        torch.set_num_threads(before)
    rows = []
    for name in VARIANTS:
        base = statistics.median(times[(name, threads_list[0])])
        for t in threads_list:
            sps = statistics.median(times[(name, t)])
            rows.append({"variant": name, "threads": t, "steps_s": sps, "vs_1": sps / base,
                         "run_s": VARIANTS[name].steps / sps})
    return rows


def render(rows, meta) -> str:
    lines = ["# Benchmark: the Training lab (lesson_model.training)", "",
             f"{meta['when']} · {meta['machine']}, load average {meta['load']} · torch {meta['torch']} · "
             f"{meta['steps']} steps per measurement, {meta['repeats']} interleaved repeats, medians", "",
             f"| variant | threads | steps/s | vs {rows[0]['threads']} thread | a default run ({tr.TrainSettings().steps} steps) s |",
             "|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['variant']} | {r['threads']} | {r['steps_s']:.1f} | {r['vs_1']:.2f}x | {r['run_s']:.0f} |")
    lines += ["", f"A step: one batch of {tr.BATCH} sequences × {tr.SEQ_LEN} tokens (vocabulary {tr.VOCAB}, "
              f"d_model {tr.D_MODEL}, {tr.N_HEADS} heads), forward, backward, AdamW; an evaluation with every "
              f"head's pattern every {tr.EVAL_EVERY} steps is included.", ""]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--output", help="also write the table to this file")
    args = parser.parse_args(argv)
    steps = args.steps or (25 if args.quick else 100)
    repeats = args.repeats or (1 if args.quick else 3)
    load_at_start = load_average()
    rows = measure(args.threads, steps, repeats)
    load_at_end = load_average()
    load = "n/a" if load_at_start is None else f"{load_at_start:.1f} at start, {load_at_end:.1f} at end"
    meta = {"when": time.strftime("%Y-%m-%d %H:%M"), "machine": machine_description(), "load": load,
            "torch": torch.__version__, "steps": steps, "repeats": repeats}
    table = render(rows, meta)
    print(table)
    if args.output:
        Path(args.output).write_text(table, encoding="utf-8")


if __name__ == "__main__":
    main()
