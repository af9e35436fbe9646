"""A class answering the teacher's question, over the websocket: how soon the teacher's count
is up to date after each answer, and how soon the reveal reaches every student.

    .venv/bin/python -m bench.bench_predict [--students 25] [--output bench/RESULTS_predict.md]

Starts the app on a loopback port (tools/browser.py ``streamlit_server``, without its start-up
warm-up unless ``--warmup``). Every tab is a tools/protocol.py ``LiveClient`` (bench/bench_follow.py
explains it): it reads what the server sends as it comes and runs the fragment timers the
browser runs, at their interval (the students' follow poll, the teacher's follower count and
answer count). A teacher's tab starts a class and types a
prompt; N student tabs open the join link at once, in English, 繁體中文 and 简体中文 in turn,
and follow the teacher to the lesson (``--page``). Then, on each model:

- **Asked**: the teacher presses "Ask the class" in the lesson's "Predict, then see" block; a
  student has the question when a run of theirs draws its answer form (from the teacher's press).
- **Answers**: every student answers within ``--spread`` seconds of the first (at a random
  moment, seeded): one message, as a press of "Send" inside the question's fragment does, with
  the guess (an option, or a number in the slider's range) and an empty nickname. The answer
  is kept when the server starts that run (the button's callback runs first); the student's
  own "answered" run shows it was.
- **Count**: the teacher's screen counts answers in a fragment of its own. The count is up to
  date for the k-th answer kept once a teacher's run shows k or more; its latency runs from
  the answer kept (the server starting the student's run) to the end of that teacher's run,
  and is also given from the student's press.
- **Reveal**: the teacher presses "Reveal"; it reaches a student with the first run of theirs
  that draws the reveal (its green "the class answered" line), from the teacher's press.

Before the question, it measures what a class that only follows costs the server on a page
without the block (home: the follow poll alone) and on the lesson with the block (every
timer a student's tab runs there), per second. It prints a table (median / p90 / max), the machine's load
(os.getloadavg(), other work on the machine included) and the server's CPU seconds.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench import results_file
from bench.bench_class import cpu_seconds, p90, start_profile, stop_profile, wait_for_warmup
from bench.bench_follow import LANGS, load, shows, start_class, teacher_does, view
from server import warmup
from tools import browser as harness
from tools.protocol import LiveClient

RESULTS = Path(__file__).resolve().parent / "RESULTS_predict.md"
PAGE = "embeddings"                       # a choice question (four options) on both models
COUNT = re.compile(r"^\*\*(\d+) answers? so far\.\*\*$")     # the teacher's count (English, predict.class.count_*)


@dataclass
class Row:
    what: str
    seconds: list[float] = field(default_factory=list)
    n: int = 0
    load: tuple = ()
    server_cpu: float | None = None
    note: str = ""


def summary(values: list[float]) -> str:
    if not values:
        return "–"
    return f"{statistics.median(values):.2f} / {p90(values):.2f} / {max(values):.2f}"


def counts(teacher: LiveClient, since: float) -> list[tuple[float, int]]:
    """(finished, count) of every teacher run since ``since`` that showed the answer count."""
    out = []
    with teacher._cond:
        runs = list(teacher.runs)
    for run in runs:
        if run.finished is None or run.finished < since:
            continue
        for body in run.markdown:
            m = COUNT.match(body.strip())
            if m:
                out.append((run.finished, int(m.group(1))))
    return sorted(out)


def idle_cost(pid: int, clients: list[LiveClient], seconds: float) -> tuple[float, float, int]:
    """(server CPU-s, wall s, fragment reruns sent) while the class only follows."""
    polls0, cpu0, wall0 = sum(c.fragment_reruns for c in clients), cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return cpu_seconds(pid) - cpu0, time.monotonic() - wall0, sum(c.fragment_reruns for c in clients) - polls0


def follow_to(teacher: LiveClient, students: list[LiveClient], change: tuple, model: str, salt: str,
              timeout: float) -> list[str]:
    """The teacher's change, and every student following it; returns the students who did not."""
    run, _ = teacher_does(teacher, change, model, salt, timeout=600)
    expected = (teacher.page(run.page_hash), view(run.query))
    missing = []
    for i, student in enumerate(students):
        if student.wait_for(shows(*expected), since=run.started, timeout=max(0.5, run.finished + timeout - time.time())) is None:
            missing.append(f"student {i}")
    return missing


def guess(widget, i: int) -> dict:
    """A student's guess for the answer widget: an option of a radio, or a number of a slider."""
    options = list(getattr(widget, "options", []) or [])
    if options:
        return {"string_value": options[i % len(options)]}
    low, high = float(widget.min), float(widget.max)
    return {"double_array_value": [low + (i % int(high - low + 1))]}


def one_question(teacher: LiveClient, students: list[LiveClient], pid: int, spread: float, seed: int,
                 label: str, timeout: float) -> list[Row]:
    rows = []
    n = len(students)
    ask_key = next((k for k in teacher.widget_ids if k.startswith("poll_ask_")), None)
    if ask_key is None:
        raise RuntimeError("no 'Ask the class' button on the teacher's page")
    qid = ask_key[len("poll_ask_"):]
    before = {id(s): {k for k in s.widget_ids if k.startswith("poll_send_")} for s in students}
    cpu0 = cpu_seconds(pid)
    asked = teacher.set_widget(ask_key, trigger_value=True)
    run = teacher.wait_for(lambda r, c: r.status == "FINISHED_SUCCESSFULLY" and f"poll_reveal_{qid}" in c.widget_ids,
                           since=asked, timeout=timeout)
    if run is None:
        raise RuntimeError("the teacher's ask did not open the question")
    teacher_ask_s = run.finished - asked

    # The question reaches each student: a run of theirs that draws the answer form.
    sends: dict[int, str] = {}
    reach, missing = [], []
    for i, s in enumerate(students):
        got = s.wait_for(lambda r, c: any(k.startswith("poll_send_") and k not in before[id(c)] for k in r.widgets),
                         since=asked, timeout=max(0.5, asked + timeout - time.time()), fragments=True)
        if got is None:
            missing.append(f"student {i}")
            continue
        sends[i] = next(k for k in got.widgets if k.startswith("poll_send_"))
        reach.append(got.finished - asked)
    rows.append(Row(f"{label}: the question reaches a student (from the teacher's press)", reach, len(reach),
                    os.getloadavg(), cpu_seconds(pid) - cpu0,
                    f"teacher's run {teacher_ask_s:.2f} s" + (f"; missing {missing[:3]}" if missing else "")))
    print(f"asked: teacher's run {teacher_ask_s:.2f} s; students have it {summary(reach)} s; load {load()}", flush=True)

    # Every student answers within `spread` seconds: one message each, at a seeded random moment.
    rng = random.Random(seed)
    start = time.time() + 0.3
    plan = sorted((start + rng.uniform(0, spread), i) for i in sends)
    clicks: dict[int, float] = {}
    cpu0 = cpu_seconds(pid)

    def press() -> None:
        for due, i in plan:
            time.sleep(max(0.0, due - time.time()))
            s, send = students[i], sends[i]
            poll_id = send.rsplit("_", 1)[1]
            answer = f"poll_in_{poll_id}"
            clicks[i] = s.set_fragment_widgets(s.widget_fragments[send], {
                answer: guess(s.widgets[answer], i), "poll_nick": {"string_value": ""}, send: {"trigger_value": True}})

    presser = threading.Thread(target=press)
    presser.start()
    presser.join()
    kept: dict[int, float] = {}
    lost = []
    for i, at in clicks.items():
        got = students[i].wait_for(lambda r, c: any(a[0] == "INFO" for a in r.alerts), since=at,
                                   timeout=max(0.5, at + timeout - time.time()), fragments=True)
        if got is None:
            lost.append(f"student {i}")
        else:
            kept[i] = got.started
    rows.append(Row(f"{label}: an answer kept (from the student's press to the server starting its run)",
                    [kept[i] - clicks[i] for i in kept], len(kept), os.getloadavg(), None,
                    f"{n} answers in {max(clicks.values()) - min(clicks.values()):.2f} s" +
                    (f"; not confirmed {lost[:3]}" if lost else "")))

    # The teacher's count: wait until it shows every kept answer.
    deadline = time.time() + timeout
    while time.time() < deadline:
        seen = counts(teacher, start)
        if seen and seen[-1][1] >= len(kept):
            break
        time.sleep(0.2)
    seen = counts(teacher, start)
    from_kept, from_click, late = [], [], []
    for k, i in enumerate(sorted(kept, key=kept.get), start=1):
        up = next((fin for fin, c in seen if fin >= kept[i] and c >= k), None)
        if up is None:
            late.append(f"answer {k}")
            continue
        from_kept.append(up - kept[i])
        from_click.append(up - clicks[i])
    cpu = cpu_seconds(pid) - cpu0
    rows.append(Row(f"{label}: the teacher's count up to date (from the answer kept)", from_kept, len(from_kept),
                    os.getloadavg(), cpu, f"{len(seen)} count runs" + (f"; never counted {late[:3]}" if late else "")))
    rows.append(Row(f"{label}: the teacher's count up to date (from the student's press)", from_click,
                    len(from_click), os.getloadavg(), None))
    print(f"answers: kept {summary(rows[-3].seconds)} s; count up to date {summary(from_kept)} s after the answer "
          f"({summary(from_click)} s after the press); load {load()}; server {cpu:.1f} CPU-s", flush=True)

    # The reveal.
    time.sleep(1.0)
    cpu0 = cpu_seconds(pid)
    revealed = teacher.set_widget(f"poll_reveal_{qid}", trigger_value=True)
    run = teacher.wait_for(lambda r, c: any(a[0] == "SUCCESS" for a in r.alerts), since=revealed, timeout=timeout)
    teacher_reveal_s = None if run is None else run.finished - revealed
    arrive, missing = [], []
    for i, s in enumerate(students):
        got = s.wait_for(lambda r, c: any(a[0] == "SUCCESS" for a in r.alerts), since=revealed,
                         timeout=max(0.5, revealed + timeout - time.time()), fragments=True)
        if got is None:
            missing.append(f"student {i}")
        else:
            arrive.append(got.finished - revealed)
    rows.append(Row(f"{label}: the reveal reaches a student (from the teacher's press)", arrive, len(arrive),
                    os.getloadavg(), cpu_seconds(pid) - cpu0,
                    (f"teacher's run {teacher_reveal_s:.2f} s" if teacher_reveal_s is not None else "teacher's run: none")
                    + (f"; missing {missing[:3]}" if missing else "")))
    print(f"reveal: teacher's run {teacher_reveal_s} s; students {summary(arrive)} s; load {load()}", flush=True)
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_predict", description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=25)
    parser.add_argument("--page", default=PAGE, help="the lesson the teacher asks on")
    parser.add_argument("--models", nargs="+", default=["smollm2-135m", "gemma-3-270m"])
    parser.add_argument("--spread", type=float, default=2.0, help="seconds within which every student answers")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of each idle measurement")
    parser.add_argument("--warmup", action="store_true", help="start the server with its start-up warm-up and wait for it")
    parser.add_argument("--output", help=f"write the table here (default {RESULTS.name} with 25 students)")
    parser.add_argument("--profile", metavar="FILE", help="sample the server with py-spy while the class answers")
    args = parser.parse_args(argv)

    salt = f"{os.getpid() % 1000}"
    log = Path(tempfile.mkdtemp(prefix="bench-predict-")) / "server.log"
    procs: list = []
    rows: list[Row] = []
    print(f"load before the server starts: {load()}", flush=True)
    with harness.streamlit_server(env={warmup.ENV: "1" if args.warmup else "0"}, procs=procs, log_path=log,
                                  timeout=300) as base:
        pid = procs[0].pid
        if args.warmup:
            print("warm-up:", wait_for_warmup(log, timeout=1800), flush=True)
        first = args.models[0]
        teacher, code = start_class(base, first, salt, timeout=600)
        for model in args.models[1:]:            # every model loaded before the class comes in
            with LiveClient(base, timeout=600) as other:
                asked = other.open("home", {"lang": "en", "model": model})
                other.wait_for(lambda r, c: True, since=asked, timeout=600)
        print(f"class {code} on {base}; load {load()}", flush=True)

        students = [LiveClient(base, timeout=600) for _ in range(args.students)]
        asked = [s.open("home", {"class": code, "lang": LANGS[i % len(LANGS)]}) for i, s in enumerate(students)]
        expected = (teacher.page(), view(teacher.query))
        for s, at in zip(students, asked):
            if s.wait_for(shows(*expected), since=at, timeout=120) is None:
                raise RuntimeError(f"a student did not join: {s.error or (s.runs[-1].query if s.runs else 'no run')}")
        time.sleep(2.0)
        home = idle_cost(pid, students, args.idle)
        missing = follow_to(teacher, students, ("page", args.page), first, salt, args.timeout)
        if missing:               # counted below: they are not asked (a row shows fewer than N)
            print(f"not on {args.page} after {args.timeout:g} s: {missing}", flush=True)
        time.sleep(2.0)
        lesson = idle_cost(pid, students, args.idle)
        idle_notes = [
            f"A class that only follows, {args.students} students: on home (no question block: the follow poll "
            f"alone) {home[2]} polls in {home[1]:.1f} s cost the server {home[0]:.2f} CPU-s ({home[0] / home[1]:.2f} "
            f"cores); on {args.page} (with the question block) {lesson[2]} polls in {lesson[1]:.1f} s, "
            f"{lesson[0]:.2f} CPU-s ({lesson[0] / lesson[1]:.2f} cores)."]
        print(idle_notes[0], flush=True)
        spy = start_profile(pid, args.profile) if args.profile else None
        for n, model in enumerate(args.models):
            short = "SmolLM2" if model.startswith("smollm2") else "Gemma"
            if model != first:
                missing = follow_to(teacher, students, ("model", None), model, f"{salt}m{n}", args.timeout)
                if missing:
                    print(f"not on {model} after {args.timeout:g} s: {missing}", flush=True)
                time.sleep(2.0)
            rows += one_question(teacher, students, pid, args.spread, seed=n, label=f"{short} ({args.page})",
                                 timeout=args.timeout)
            time.sleep(2.0)
        if spy is not None:
            stop_profile(spy, args.profile)
        for client in (teacher, *students):
            client.close()

    header = ["what", "seconds (median / p90 / max)", "n", "load (1 / 5 / 15 min)", "server CPU-s", "note"]
    table = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cpu = "–" if row.server_cpu is None else f"{row.server_cpu:.1f}"
        table.append(f"| {row.what} | {summary(row.seconds)} | {row.n}/{args.students} | "
                     f"{'{:.1f} / {:.1f} / {:.1f}'.format(*row.load)} | {cpu} | {row.note} |")
    table += ["", *idle_notes, f"{os.cpu_count()} cores."]
    print("\n".join(table), flush=True)
    output = args.output or (RESULTS if args.students == 25 else None)
    if output:
        Path(output).write_text(with_table(Path(output), table))
        print(f"written to {output}")
    if any(row.n < args.students for row in rows):
        sys.exit(1)


def with_table(path: Path, table: list[str]) -> str:
    """The file with its first table (and the notes right under it) replaced by this one; a new
    file with the module's description when there is none."""
    def note_end(lines: list[str], end: int) -> int:
        while end < len(lines) and (lines[end].startswith("A class that only follows") or not lines[end]
                                    or lines[end].endswith(" cores.")):
            end += 1
            if lines[end - 1].endswith(" cores."):
                break
        return end
    return results_file.with_table(path, table, "what",
                                   "A class answers the teacher's question (python -m bench.bench_predict)",
                                   __doc__, note_end, blank_after=True)

if __name__ == "__main__":
    main()
