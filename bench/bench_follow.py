"""Students following a teacher, over the websocket: how soon each has the teacher's new view.

    .venv/bin/python -m bench.bench_follow [--students 25] [--output bench/RESULTS_follow.md]
    .venv/bin/python -m bench.bench_follow --apps 2      # deploy/: 2 app processes behind nginx

Starts the app on a loopback port (tools/browser.py ``streamlit_server``; ``--warmup`` turns
its start-up warm-up on). With ``--apps K`` (K > 1) the server is deploy/'s, as
bench/bench_class.py starts it: K app processes behind nginx, one Redis for the class, each
process warmed up at its start; the teacher's tab goes to the first, the students' to each in
turn (nginx's route cookie), and the CPU seconds are the processes' together. Every tab is a tools/protocol.py ``LiveClient``: it reads what the
server sends as it comes and runs the fragment timers the browser would run, at their
interval (the students' follow poll, the teacher's follower count), so the poll is what a
browser sends. A teacher's tab opens home, presses "Start a class" (the class panel's button)
and types a prompt of its own. Then:

- **Joining**: the teacher on the embeddings lesson, N student tabs open the join link
  ``/?class=CODE`` at the same moment, in English, 繁體中文 and 简体中文 in turn. A student's first view runs from the request to
  the end of the run that shows the teacher's page with the teacher's parameters.
- **Following**: on each model (SmolLM2, then Gemma) the teacher changes the model, the page,
  the prompt, a layer and a head slider, the page again and the temperature, waiting for the
  whole class after each change. A student's latency runs from the end of the teacher's run
  (it publishes the view as it ends) to the end of that student's run showing the new view
  (its page and its URL parameters, the student's own language aside).

It prints a table (median / p90 / max per change, and over all changes), the machine's load
(os.getloadavg(), other work on the machine included), the server's CPU seconds and these
simulated browsers' own: they run on the same machine, a real class's browsers would not.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench import results_file
from bench import bench_class
from bench.bench_class import p90, start_profile, stop_profile, wait_for_warmup
from course import model as models
from server import warmup
from tools import browser as harness
from tools.protocol import UNFINISHED, LiveClient, Run

LANGS = ("en", "zh-Hant", "zh-Hans")
JOIN_PAGE = "embeddings"                    # where the teacher is when the class joins
VISITOR = ("lang", "class", "present")      # a visitor's own URL parameters, not the teacher's view
RESULTS = Path(__file__).resolve().parent / "RESULTS_follow.md"
CODE = re.compile(r"`([A-Z2-9]{6})`")
PROMPTS = {
    "smollm2-135m": "The teacher asks: why did the cat sit on the mat {k}? Because it was",
    "gemma-3-270m": "老師問：貓為什麼坐在墊子上 {k}？因為牠",
}
NEW_PROMPT = {
    "smollm2-135m": "A new prompt for the class {k}: the dog chased the ball across the park because it",
    "gemma-3-270m": "A new prompt for the class {k}: 小狗追著球跑過公園，因為牠",
}
# (what the teacher does, how): ("page", id) opens a page as the navigation does; ("slider", key,
# value); ("prompt", None) types a new prompt; ("model", None) picks the scenario's model.
CHANGES = {
    "smollm2-135m": [("model", None), ("page", "attention"), ("prompt", None), ("slider", "layer", 5),
                     ("slider", "head", 2), ("page", "sampling"), ("slider", "temperature", 1.5)],
    "gemma-3-270m": [("model", None), ("page", "attention"), ("prompt", None), ("slider", "layer", 7),
                     ("slider", "head", 1), ("page", "sampling"), ("slider", "temperature", 0.7)],
}


@dataclass
class Row:
    what: str
    teacher_s: float                 # the teacher's own run, from the change to its end
    seconds: list[float] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    load: tuple = ()
    server_cpu: float = 0.0
    unfinished: int = 0              # students whose view's run lost its script_finished (tools/protocol.py UNFINISHED)


def view(query: dict) -> dict:
    return {k: v for k, v in query.items() if k not in VISITOR}


def shows(page: str, params: dict):
    """A test for LiveClient.wait_for: a run of ``page`` whose URL holds the view ``params``,
    drawn to its end (its script_finished said so, or Streamlit dropped that message: the run's
    end is then when the next run began, tools/protocol.py UNFINISHED)."""
    def test(run: Run, client: LiveClient) -> bool:
        return (run.status in ("FINISHED_SUCCESSFULLY", UNFINISHED) and client.page(run.page_hash) == page
                and view(run.query) == params)
    return test


def teacher_does(teacher: LiveClient, change: tuple, model: str, salt: str, timeout: float) -> tuple[Run, float]:
    """Make the teacher's change; returns the teacher's run that made it and how long it took."""
    kind = change[0]
    if kind == "page":
        asked = teacher.open(change[1], {})
    elif kind == "slider":
        asked = teacher.set_widget(change[1], double_array_value=[float(change[2])])
    elif kind == "prompt":
        asked = teacher.set_widget("prompt", string_value=NEW_PROMPT[model].format(k=salt))
    elif kind == "model":
        asked = teacher.set_widget("model_choice", string_value=models.model_name(model))
    else:
        raise ValueError(kind)
    run = teacher.wait_for(lambda r, c: r.status == "FINISHED_SUCCESSFULLY", since=asked, timeout=timeout)
    if run is None or run.exceptions:
        raise RuntimeError(f"the teacher's run for {change} failed: {run}")
    return run, run.finished - asked


def label(change: tuple, model: str) -> str:
    short = "SmolLM2" if model.startswith("smollm2") else "Gemma"
    kind = change[0]
    if kind == "page":
        return f"{short}: page -> {change[1]}"
    if kind == "slider":
        return f"{short}: {change[1]} slider -> {change[2]:g}"
    return f"{short}: {kind}"


def summary(values: list[float]) -> str:
    if not values:
        return "–"
    return f"{statistics.median(values):.2f} / {p90(values):.2f} / {max(values):.2f}"


def load() -> str:
    return "{:.1f} / {:.1f} / {:.1f}".format(*os.getloadavg())


@contextmanager
def serving(args):
    """The server the class uses: one app process (its warm-up as ``--warmup`` says), or
    deploy/'s ``--apps`` processes behind nginx (bench_class.server, warmed up)."""
    if args.apps > 1:
        with bench_class.server(args.apps, Path(tempfile.mkdtemp(prefix="bench-follow-"))) as srv:
            yield srv
        return
    env = {warmup.ENV: "1" if args.warmup else "0"}
    log = Path(tempfile.mkdtemp(prefix="bench-follow-")) / "server.log"
    procs: list = []
    with harness.streamlit_server(env=env, procs=procs, log_path=log, timeout=300) as base:
        if args.warmup:
            print("warm-up:", wait_for_warmup(log, timeout=1800), flush=True)
        yield bench_class.Server(base, [procs[0].pid], [None])


def start_class(base: str, model: str, salt: str, timeout: float, cookie: str | None = None) -> tuple[LiveClient, str]:
    teacher = LiveClient(base, timeout=timeout, cookie=cookie)
    asked = teacher.open("home", {"lang": "en", "model": model})
    if teacher.wait_for(lambda r, c: True, since=asked, timeout=timeout) is None:
        raise RuntimeError("the teacher's home did not finish")
    asked = teacher.set_widget("class_start", trigger_value=True)
    run = teacher.wait_for(lambda r, c: any(CODE.search(m) for m in r.markdown), since=asked, timeout=timeout)
    if run is None:
        raise RuntimeError("no class code on the teacher's page")
    code = next(CODE.search(m).group(1) for m in run.markdown if CODE.search(m))
    teacher.set_widget("prompt", string_value=PROMPTS[model].format(k=salt))
    teacher.wait_for(lambda r, c: c.query.get("prompt", "").startswith(PROMPTS[model][:10]), since=asked, timeout=timeout)
    return teacher, code


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_follow", description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=25)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds a change may take to reach every student")
    parser.add_argument("--models", nargs="+", default=list(CHANGES), choices=list(CHANGES))
    parser.add_argument("--warmup", action="store_true", help="start the server with its start-up warm-up and wait for it")
    parser.add_argument("--pause", type=float, default=2.0, help="seconds between one change reaching the class and the next")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of a class that only follows (the polls' cost)")
    parser.add_argument("--output", help=f"write the table here (default {RESULTS.name} with 25 students and both models)")
    parser.add_argument("--profile", metavar="FILE", help="sample the server with py-spy while the class follows")
    parser.add_argument("--apps", type=int, default=1,
                        help="app processes: more than one runs deploy/'s nginx and Redis in front of them "
                             "(each warmed up at its start)")
    args = parser.parse_args(argv)
    if args.profile and args.apps > 1:
        parser.error("--profile samples one server process: use it without --apps")

    salt = f"{os.getpid() % 1000}"
    rows: list[Row] = []
    started = time.monotonic()
    print(f"load before the server starts: {load()}", flush=True)
    with serving(args) as srv:
        base, pid = srv.base, srv.pids[0]
        first_model = args.models[0]
        teacher, code = start_class(base, first_model, salt, timeout=600, cookie=srv.cookies[0])
        # Both models loaded before the class comes in, as on a teacher's warm server.
        for model in CHANGES:
            if model != first_model:
                for cookie in srv.cookies:
                    with LiveClient(base, timeout=600, cookie=cookie) as other:
                        asked = other.open("home", {"lang": "en", "model": model})
                        other.wait_for(lambda r, c: True, since=asked, timeout=600)
        print(f"class {code} on {base}, server ready in {time.monotonic() - started:.0f} s; load {load()}", flush=True)
        spy = start_profile(pid, args.profile) if args.profile else None

        # Joining: every student opens the join link at once, the teacher on a lesson.
        asked = teacher.open(JOIN_PAGE, {})
        teacher.wait_for(lambda r, c: c.page(r.page_hash) == JOIN_PAGE, since=asked, timeout=600)
        students = [LiveClient(base, timeout=600, cookie=srv.cookies[i % len(srv.cookies)])
                    for i in range(args.students)]
        expected = (teacher.page(), view(teacher.query))
        cpu0, own0 = srv.cpu_seconds(), time.process_time()
        asked = [s.open("home", {"class": code, "lang": LANGS[i % len(LANGS)]}) for i, s in enumerate(students)]
        first, missing = [], []
        for i, (student, at) in enumerate(zip(students, asked)):
            run = student.wait_for(shows(*expected), since=at, timeout=max(1.0, at + 120 - time.time()))
            if run is None:
                missing.append(f"student {i}: {student.error or (student.runs[-1].query if student.runs else 'no run')}")
            else:
                first.append(run.finished - at)
        join = Row(f"{args.students} students join at once", 0.0, first, missing, os.getloadavg(), srv.cpu_seconds() - cpu0)
        print(f"join: first view {summary(first)} s; load {load()}; server {join.server_cpu:.1f} CPU-s, "
              f"these browsers {time.process_time() - own0:.1f} CPU-s; missing {missing[:3]}", flush=True)
        # A class that only follows: what the polls cost the server while nothing changes.
        time.sleep(args.pause)
        polls0, cpu0, wall0 = sum(s.fragment_reruns for s in students), srv.cpu_seconds(), time.monotonic()
        time.sleep(args.idle)
        polls = sum(s.fragment_reruns for s in students) - polls0
        idle = (srv.cpu_seconds() - cpu0, time.monotonic() - wall0, polls)
        print(f"idle class: {polls} polls in {idle[1]:.1f} s, server {idle[0]:.2f} CPU-s "
              f"({1000 * idle[0] / max(polls, 1):.1f} ms a poll, {idle[0] / idle[1]:.2f} cores); load {load()}", flush=True)

        for model in args.models:
            for n, change in enumerate(CHANGES[model]):
                if change[0] == "model" and model == first_model:
                    continue                      # the class started on it
                cpu0, own0 = srv.cpu_seconds(), time.process_time()
                run, teacher_s = teacher_does(teacher, change, model, f"{salt}{n}", timeout=600)
                expected = (teacher.page(run.page_hash), view(run.query))
                seconds, missing, unfinished = [], [], 0
                for i, student in enumerate(students):
                    got = student.wait_for(shows(*expected), since=run.started,
                                           timeout=max(0.5, run.finished + args.timeout - time.time()))
                    if got is None:
                        last = student.runs[-1] if student.runs else None
                        missing.append(f"student {i}: {student.error or (last and (student.page(last.page_hash), view(last.query), last.status, last.fragment, last.exceptions[:1]))}")
                    else:
                        seconds.append(max(0.0, got.finished - run.finished))
                        unfinished += got.status == UNFINISHED
                row = Row(label(change, model), teacher_s, seconds, missing, os.getloadavg(), srv.cpu_seconds() - cpu0,
                          unfinished)
                rows.append(row)
                print(f"{row.what}: teacher's run {teacher_s:.2f} s; students {summary(seconds)} s (first {min(seconds, default=0):.2f}); "
                      f"load {load()}; server {row.server_cpu:.1f} CPU-s, these browsers "
                      f"{time.process_time() - own0:.1f} CPU-s"
                      + (f"; {unfinished} with no script_finished (dropped by Streamlit)" if unfinished else "")
                      + (f"; MISSING {len(missing)}: {missing[:2]} "
                                                                    f"expected {expected}" if missing else ""),
                      flush=True)
                time.sleep(args.pause)
        polls = sum(s.fragment_reruns for s in students)
        if spy is not None:
            stop_profile(spy, args.profile)
        for client in (teacher, *students):
            client.close()
    every = [s for r in rows for s in r.seconds]
    header = ["change", "teacher's run s", "students s (median / p90 / max)", "students with it", "load (1 / 5 / 15 min)",
              "server CPU-s"]
    table = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in [join, *rows]:
        table.append(f"| {row.what} | {row.teacher_s:.2f} | {summary(row.seconds)} | "
                     f"{len(row.seconds)}/{args.students} | {'{:.1f} / {:.1f} / {:.1f}'.format(*row.load)} | "
                     f"{row.server_cpu:.1f} |")
    table.append(f"| every change | – | {summary(every)} | {sum(len(r.seconds) for r in rows)}/{args.students * len(rows)} | "
                 f"– | {sum(r.server_cpu for r in rows):.1f} |")
    print("\n".join(table))
    notes = [f"Idle class: {idle[2]} follow polls in {idle[1]:.1f} s cost the server {idle[0]:.2f} CPU-s "
             f"({1000 * idle[0] / max(idle[2], 1):.1f} ms a poll). {polls} polls in the whole run; {os.cpu_count()} cores; "
             f"{args.apps} app process{'es' if args.apps > 1 else ''}. Updates whose run's script_finished Streamlit "
             f"dropped (counted as arrived, at the next run's start): {sum(r.unfinished for r in rows)}."]
    print(notes[0], flush=True)
    table += ["", *notes]
    output = args.output or (RESULTS if args.students == 25 and len(args.models) == 2 and args.apps == 1 else None)
    if output:
        Path(output).write_text(with_table(Path(output), table))
        print(f"written to {output}")
    if any(r.missing for r in [join, *rows]):
        sys.exit(1)


def with_table(path: Path, table: list[str]) -> str:
    """The file with its first table replaced by this one (the notes around it kept); a new
    file with the module's description when there is none."""
    def note_end(lines: list[str], end: int) -> int:
        if end + 1 < len(lines) and not lines[end] and lines[end + 1].startswith("Idle class:"):
            return end + 2                    # the table's own note
        return end
    return results_file.with_table(path, table, "change", "Following the teacher (python -m bench.bench_follow)",
                                   __doc__, note_end)

if __name__ == "__main__":
    main()
