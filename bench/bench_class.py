"""A class on one server: N students open the teacher's link at once, each on a lesson page.

    .venv/bin/python -m bench.bench_class [--students 1 10 25] [--output bench/RESULTS_class.md]
    .venv/bin/python -m bench.bench_class --apps 2 --students 25 --cases own      # deploy/: 2 processes

Starts the app on a loopback port with its start-up warm-up (server/warmup.py: both models, every
lesson once per model and language) and waits for it, as a teacher's server is warm before the
class comes in. Then for each N
drives N simulated students over Streamlit's websocket (tools/protocol.py: what a browser
sends, without the browser). Student i opens page i of the course (every page, wrapping
round), in English, 繁體中文 or 简体中文 in turn, on SmolLM2 or Gemma in turn; all at the same
moment (first view), then all type a new prompt at the same moment (rerun). Two cases:

    (a) teacher's prompt   every student opens the link with the same prompt
    (b) own prompts        every student opens it with their own prompt

It prints, per N and case: first-view and rerun latency (median, p90, max, seconds from the
request to the end of the run), errors (exception elements, runs that did not finish), the
bytes each run sent, and the server's peak resident memory so far (VmHWM of the server
process, both models loaded). Every N uses prompts no earlier run used, so the shared run
cache cannot answer from a previous N; the per-model analyses the warm-up filled stay warm.

With ``--repeat K`` each class runs K times on the same warm server, each time with prompts of
its own, and the medians of their p90s are printed: this machine's speed varies from run to
run (the same class took 5.2-7.3 server CPU-s for its reruns within an hour), so single runs
of two versions are hard to compare.

With ``--apps K`` (K > 1) the server is deploy/'s: K app processes behind nginx, one Redis
(deploy/cluster.py; needs the nginx and redis-server packages). The students are dealt out to
the processes in turn by nginx's route cookie. CPU seconds are the processes' together, and
the peak memory is their peaks added up with the file-backed pages they share (the
memory-mapped weights, the libraries) counted once: an upper bound of their peak together.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import deploy.cluster
from course import nav
from server import warmup
from tools import browser as harness
from tools.protocol import Client, Result

LANGS = ("en", "zh-Hant", "zh-Hans")
MODELS = ("smollm2-135m", "gemma-3-270m")
# What a student might type: a sentence of their own, in their language (a number makes each unique).
OWN = {
    "en": "Student {i} wrote: my dog {k} chased the ball across the park because it was",
    "zh-Hant": "學生{i}寫道：我的狗追著球跑過公園，因為牠{k}",
    "zh-Hans": "学生{i}写道：我的狗追着球跑过公园，因为它{k}",
}
TEACHER = {
    "en": "The cat sat on the mat because it was tired. The cat {k}",
    "zh-Hant": "貓坐在墊子上，因為牠累了。貓{k}",
    "zh-Hans": "猫坐在垫子上，因为它累了。猫{k}",
}
# Pages whose work grows with a parameter: keep them on the course's defaults (what a link gives).
PAGE_PARAMS: dict[str, dict] = {}
RESULTS = Path(__file__).resolve().parent / "RESULTS_class.md"


@dataclass
class Student:
    index: int
    page: str
    lang: str
    model: str
    first: Result | None = None
    rerun: Result | None = None
    errors: list[str] = field(default_factory=list)


def students(n: int) -> list[Student]:
    pages = nav.PAGES
    return [Student(i, pages[i % len(pages)], LANGS[i % len(LANGS)], MODELS[(i // len(LANGS)) % len(MODELS)])
            for i in range(n)]


def prompt_for(student: Student, case: str, salt: str) -> str:
    if case == "teacher":
        return TEACHER[student.lang].format(k=salt)
    return OWN[student.lang].format(i=student.index, k=salt)


def drive(base: str, student: Student, case: str, salt: str, barrier: threading.Barrier, timeout: float,
          cookie: str | None = None) -> None:
    query = {"lang": student.lang, "model": student.model, **PAGE_PARAMS.get(student.page, {})}
    try:
        with Client(base, timeout=timeout, cookie=cookie) as client:
            barrier.wait(timeout=timeout)
            student.first = client.open(student.page, {**query, "prompt": prompt_for(student, case, salt)})
            barrier.wait(timeout=timeout)
            student.rerun = client.set_text("prompt", prompt_for(student, case, salt + "+"), student.page, query)
    except threading.BrokenBarrierError:
        student.errors.append("another student failed")
    except Exception as exc:  # noqa: BLE001 - reported in the table
        student.errors.append(f"{type(exc).__name__}: {exc}")
        barrier.abort()


def wait_for_warmup(log: Path, timeout: float) -> str:
    """The server's own warm-up line (server/warmup.py), once it has opened every lesson."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith(warmup.DONE_LINE):
                return line[len(warmup.DONE_LINE):].strip()
        time.sleep(1)
    raise TimeoutError(f"no warm-up line in {log} after {timeout:.0f} s")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process pid has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_mb(pid: int) -> dict[str, float]:
    """Process pid's memory counters from /proc/pid/status, in MB: VmHWM (its peak), VmRSS,
    RssAnon (heap, tensors) and RssFile (file-backed: the memory-mapped weights and the
    libraries, which every app process maps from the same files and so shares)."""
    fields = (line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {k: int(v.split()[0]) / 1024 for k, v in fields if v.strip().endswith("kB")}


def peak_mb(pid: int) -> float:
    return status_mb(pid).get("VmHWM", float("nan"))


def resident(pid: int) -> str:
    """The server's resident memory now: all, anonymous (heap, tensors) and file-backed (the
    memory-mapped weights, shared with any other app process)."""
    mb = status_mb(pid)
    return f"{mb.get('VmRSS', 0):.0f} MB now (anonymous {mb.get('RssAnon', 0):.0f}, files {mb.get('RssFile', 0):.0f})"


class Server:
    """The app processes a class talks to: their CPU seconds, their memory, and the cookie
    that sends a student to one of them (None: there is one process)."""

    def __init__(self, base: str, pids: list[int], cookies: list[str | None]):
        self.base, self.pids, self.cookies = base, pids, cookies

    def cookie_for(self, student: Student) -> str | None:
        return self.cookies[student.index % len(self.cookies)]

    def cpu_seconds(self) -> float:
        return sum(cpu_seconds(pid) for pid in self.pids)

    def peak_mb(self) -> float:
        """The processes' peaks (VmHWM) added up, the file-backed pages they share counted once:
        an upper bound of their peak together (their peaks need not come at the same moment).
        Reading the exact shared total (Pss in smaps_rollup) often enough costs 20-50 ms of CPU
        a process each time, taken from the server it measures."""
        shared = min(status_mb(pid)["RssFile"] for pid in self.pids)
        return sum(peak_mb(pid) for pid in self.pids) - (len(self.pids) - 1) * shared

    def resident(self) -> str:
        if len(self.pids) == 1:
            return resident(self.pids[0])
        return "; ".join(f"process {i}: {resident(pid)}" for i, pid in enumerate(self.pids))


@contextmanager
def server(apps: int, log_dir: Path):
    """Yield a warm Server: one app process (python -m server.serve), or ``apps`` behind nginx."""
    env = {warmup.ENV: "1"}
    start = time.monotonic()
    if apps == 1:
        procs: list = []
        log = log_dir / "server.log"
        with harness.streamlit_server(procs=procs, env=env, log_path=log) as base:
            done = wait_for_warmup(log, timeout=1800)
            srv = Server(base, [procs[0].pid], [None])
            yield _warm(srv, start, done)
        return
    with deploy.cluster.cluster(apps, env=env, timeout=600) as c:
        done = "; ".join(wait_for_warmup(c.run_dir / f"app{i}.log", timeout=1800) for i in range(apps))
        cookies = [f"{deploy.cluster.ROUTE_COOKIE}={route}" for route in deploy.cluster.routes(c, apps).values()]
        srv = Server(c.base, [c.pid(f"app{i}") for i in range(apps)], cookies)
        yield _warm(srv, start, done)


def _warm(srv: Server, start: float, done: str) -> Server:
    print(f"server warm in {time.monotonic() - start:.0f} s after its start ({done}), "
          f"peak {srv.peak_mb():.0f} MB, {srv.resident()}", flush=True)
    return srv


def p90(values: list[float]) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(0.9 * len(values)) - 1))]


def summary(values: list[float]) -> str:
    if not values:
        return "–"
    return f"{statistics.median(values):.2f} / {p90(values):.2f} / {max(values):.2f}"


def problems(result: Result | None) -> list[str]:
    if result is None:
        return ["no run"]
    return result.exceptions + result.problems + ([] if result.status == "FINISHED_SUCCESSFULLY" else [result.status])


def run_class(srv: Server, n: int, case: str, salt: str, timeout: float,
              marks: list | None = None) -> list[Student]:
    """Drive the class; ``marks`` gets (time, server CPU-s) each time every student is ready:
    before the first views and before the reruns."""
    class_ = students(n)
    barrier = threading.Barrier(n, action=None if marks is None else
                                lambda: marks.append((time.monotonic(), srv.cpu_seconds())))
    threads = [threading.Thread(target=drive, args=(srv.base, s, case, salt, barrier, timeout, srv.cookie_for(s)),
                                daemon=True)
               for s in class_]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=3 * timeout)
    return class_


def start_profile(pid: int, path: str):
    import shutil
    import subprocess
    import sys
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    return subprocess.Popen([exe, "record", "--pid", str(pid), "--rate", "50", "--format", "raw",
                             "--output", path, "--threads", "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_profile(spy, path: str, top: int = 25) -> None:
    """Stop py-spy and print the functions with the most samples, inclusive and self."""
    import collections
    import signal
    spy.send_signal(signal.SIGINT)
    spy.wait(timeout=60)
    inclusive: collections.Counter = collections.Counter()
    self_: collections.Counter = collections.Counter()
    total = 0
    for line in Path(path).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [f.split(" (")[0] + " " + f.split("/")[-1].rstrip(")") for f in stack.split(";")[1:]]
        n = int(count)
        total += n
        for frame in set(frames):
            inclusive[frame] += n
        if frames:
            self_[frames[-1]] += n
    print(f"profile: {total} samples (50 per second per busy thread)")
    for name, counter in (("inclusive", inclusive), ("self", self_)):
        print(f"top {top} {name}:")
        for frame, n in counter.most_common(top):
            print(f"  {100 * n / max(total, 1):5.1f}%  {frame}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_class", description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, nargs="+", default=[1, 10, 25])
    parser.add_argument("--cases", nargs="+", default=["teacher", "own"], choices=["teacher", "own"])
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds one run may take")
    parser.add_argument("--output", help=f"write the table here too (default {RESULTS.name} after a full run)")
    parser.add_argument("--apps", type=int, default=1,
                        help="app processes: more than one runs deploy/'s nginx and Redis in front of them")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run each class this many times on the same warm server (new prompts each time): "
                             "this machine's speed varies from run to run, so compare medians")
    parser.add_argument("--profile", metavar="FILE",
                        help="sample the server with py-spy (pip install py-spy) while the classes run; "
                             "writes collapsed stacks to FILE and prints where the time went")
    args = parser.parse_args(argv)

    if args.profile and args.apps > 1:
        parser.error("--profile samples one server process: use it without --apps")
    rows = []
    repeats: dict[tuple, list[tuple[float, float, float]]] = {}     # (n, case) -> (first p90, rerun p90, rerun CPU-s) per run
    with server(args.apps, Path(tempfile.mkdtemp(prefix="bench-class-"))) as srv:
        spy = start_profile(srv.pids[0], args.profile) if args.profile else None
        for n, case, rep in ((n, case, rep) for n in args.students for case in args.cases for rep in range(args.repeat)):
            cpu0, own0, wall0 = srv.cpu_seconds(), time.process_time(), time.monotonic()
            marks: list = []
            class_ = run_class(srv, n, case, salt=f"{n}{case[0]}{rep or ''}", timeout=args.timeout, marks=marks)
            cpu, own, wall = srv.cpu_seconds() - cpu0, time.process_time() - own0, time.monotonic() - wall0
            marks.append((time.monotonic(), srv.cpu_seconds()))
            first = [s.first.seconds for s in class_ if s.first and s.first.ok]
            rerun = [s.rerun.seconds for s in class_ if s.rerun and s.rerun.ok]
            errors = [f"{s.page}/{s.lang}/{s.model}: {p}" for s in class_
                      for p in s.errors + problems(s.first) + problems(s.rerun)]
            kb = [r.payload_bytes / 1024 for s in class_ for r in (s.first, s.rerun) if r]
            slowest = sorted(((s.first.seconds, s.page) for s in class_ if s.first), reverse=True)[:3]
            row = (n, case, summary(first), summary(rerun), len(errors), f"{statistics.median(kb):.0f}" if kb else "–",
                   f"{srv.peak_mb():.0f}", ", ".join(p for _, p in slowest))
            rows.append(row)
            repeats.setdefault((n, case), []).append((p90(first) if first else float("nan"),
                                                      p90(rerun) if rerun else float("nan"),
                                                      marks[-1][1] - marks[-2][1] if len(marks) >= 3 else float("nan")))
            print(" | ".join(str(c) for c in row), flush=True)
            print(f"   {wall:.1f} s for the class (both views): the server used {cpu:.1f} CPU-s "
                  f"({cpu / wall:.2f} cores), these simulated browsers {own:.1f} CPU-s; {srv.resident()}", flush=True)
            print("   " + "; ".join(f"{phase}: {c1 - c0:.1f} CPU-s in {t1 - t0:.1f} s ({(c1 - c0) / max(t1 - t0, 1e-9):.2f} cores)"
                                 for phase, (t0, c0), (t1, c1) in zip(("first views", "reruns"), marks, marks[1:])),
                  flush=True)
            reruns = sorted(((s.rerun.seconds, s) for s in class_ if s.rerun), key=lambda r: -r[0])[:6]
            print("   slowest reruns: " + ", ".join(f"{t:.2f} s {s.page}/{s.model}/{s.lang}" for t, s in reruns),
                  flush=True)
            for error in errors[:5]:
                print("   error:", error[:300], flush=True)
        if spy is not None:
            stop_profile(spy, args.profile)
    for (n, case), runs in repeats.items():
        if len(runs) > 1:
            first_p90, rerun_p90, rerun_cpu = (statistics.median(r[i] for r in runs) for i in range(3))
            print(f"{n} students, {case} prompts, median of {len(runs)} classes: first-view p90 {first_p90:.2f} s, "
                  f"rerun p90 {rerun_p90:.2f} s, reruns {rerun_cpu:.1f} CPU-s "
                  f"(rerun p90s: {', '.join(f'{r[1]:.2f}' for r in runs)})", flush=True)
    header = ["students", "prompts", "first view s (median / p90 / max)", "rerun s (median / p90 / max)",
              "errors", "KB per run (median)", "server peak MB", "slowest first views"]
    table = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    table += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    text = "\n".join(["# A class on one server (python -m bench.bench_class)", "", "\n\n".join(__doc__.split("\n\n")[2:5]), "",
                      *table, ""])
    print("\n".join(table))
    output = args.output or (RESULTS if args.students == [1, 10, 25] and len(args.cases) == 2 and args.apps == 1 else None)
    if output:
        Path(output).write_text(with_table(Path(output), table, text))
        print(f"written to {output}")


def with_table(path: Path, table: list[str], text: str) -> str:
    """The file at path with its first table replaced by this one (the notes around it kept),
    or ``text`` when there is no such file or table yet."""
    lines = path.read_text().splitlines() if path.exists() else []
    start = next((i for i, line in enumerate(lines) if line.startswith("| students")), None)
    if start is None:
        return text
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "\n".join(lines[:start] + table + lines[end:]) + "\n"


if __name__ == "__main__":
    main()
