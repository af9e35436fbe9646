"""The Training lab's class queue (server/training_queue.py): one training at a time,
results shared by settings, watchers, heartbeats, cancel, failures. A fake train function
stands in for lesson_model.training.train (same event types by name), so these run in
milliseconds; one test at the end runs the real thing, a few steps."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest
import torch

from server.training_queue import CANCELLED, DONE, FAILED, QUEUED, RUNNING, OwnerBusy, QueueFull, TrainQueue


@dataclass(frozen=True)
class Settings:
    n_layers: int = 2
    seed: int = 0
    steps: int = 5


@dataclass
class Progress:
    step: int
    steps: int


@dataclass
class Checkpoint:
    step: int


@dataclass
class TrainResult:
    settings: Settings
    history: list = field(default_factory=list)
    stopped: str = "done"


class FakeTrain:
    """A train function that records how many run at once, can be held at a gate, and
    checks should_stop every step like the real one."""

    def __init__(self, step_s: float = 0.002, fail_on: int | None = None):
        self.step_s = step_s
        self.fail_on = fail_on
        self.lock = threading.Lock()
        self.running = 0
        self.max_running = 0
        self.calls: list[Settings] = []
        self.gate = threading.Event()
        self.gate.set()
        self.started = threading.Event()

    def __call__(self, settings, *, should_stop=lambda: False, max_seconds=None):
        with self.lock:
            self.running += 1
            self.max_running = max(self.max_running, self.running)
            self.calls.append(settings)
        self.started.set()
        try:
            history = []
            for step in range(1, settings.steps + 1):
                while not self.gate.wait(0.005):
                    if should_stop():
                        break
                if should_stop():
                    yield TrainResult(settings, history, "cancelled")
                    return
                if self.fail_on is not None and settings.seed == self.fail_on:
                    raise ValueError("boom")
                time.sleep(self.step_s)
                history.append(Progress(step, settings.steps))
                yield history[-1]
                if step % 2 == 0:
                    yield Checkpoint(step)
            yield TrainResult(settings, history, "done")
        finally:
            with self.lock:
                self.running -= 1


def identity_clamp(settings):
    return settings, []


@pytest.fixture
def make_queue():
    queues = []

    def make(train, **kwargs):
        q = TrainQueue(train, clamp_fn=kwargs.pop("clamp_fn", identity_clamp), **kwargs)
        queues.append(q)
        return q

    yield make
    for q in queues:
        q.close()


def wait_until(predicate, timeout=10.0):
    """True once ``predicate()`` holds (polled), False after ``timeout`` s (a busy machine is slow)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.002)
    return False


def test_concurrent_same_settings_train_once(make_queue):
    train = FakeTrain()
    train.gate.clear()
    q = make_queue(train)
    jobs = [None] * 12
    barrier = threading.Barrier(12)

    def ask(i):
        barrier.wait()
        jobs[i] = q.submit(Settings(), f"student{i}")

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(12)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len({id(j) for j in jobs}) == 1
    job = jobs[0]
    assert sorted(job.watchers) == sorted(f"student{i}" for i in range(12))
    train.gate.set()
    assert q.wait(job, 5)
    assert job.state == DONE and train.calls == [Settings()] and q.trainings == 1
    assert [p.step for p in job.history()] == [1, 2, 3, 4, 5]
    assert [c.step for c in job.checkpoints()] == [2, 4]
    assert job.result.stopped == "done" and job.result.settings == Settings()


def test_different_settings_one_at_a_time_in_order(make_queue):
    train = FakeTrain(step_s=0.003)
    q = make_queue(train, max_waiting=None)
    jobs = [q.submit(Settings(seed=s), f"w{s}") for s in range(5)]
    for job in jobs:
        assert q.wait(job, 10)
    assert [j.state for j in jobs] == [DONE] * 5
    assert train.max_running == 1
    assert [s.seed for s in train.calls] == [0, 1, 2, 3, 4]
    # each started after the previous finished
    for a, b in zip(jobs, jobs[1:]):
        assert a.finished <= b.started


def test_positions_and_ahead(make_queue):
    train = FakeTrain()
    train.gate.clear()
    q = make_queue(train)
    first = q.submit(Settings(seed=1), "a")
    assert train.started.wait(2)
    assert wait_until(lambda: q.position(first) == 0)
    second = q.submit(Settings(seed=2), "b")
    third = q.submit(Settings(seed=3), "c")
    assert first.state == RUNNING and second.state == QUEUED
    assert (q.position(first), q.position(second), q.position(third)) == (0, 1, 2)
    assert (q.ahead(first), q.ahead(second), q.ahead(third)) == (0, 1, 2)
    assert q.busy() == (1, 2)
    # a fourth student asking for the second's settings joins it: same place
    assert q.submit(Settings(seed=2), "d") is second and q.position(second) == 1
    q.cancel(second, "b")                 # "d" still waits for it
    assert second.state == QUEUED
    q.cancel(second, "d")                 # nobody left: it leaves the queue
    assert second.state == CANCELLED and q.position(second) is None
    assert q.position(third) == 1 and q.ahead(third) == 1
    train.gate.set()
    assert q.wait(third, 5)
    assert q.position(first) is None and q.position(third) is None
    assert [s.seed for s in train.calls] == [1, 3]


def test_cancel_by_last_watcher_stops_the_run(make_queue):
    train = FakeTrain()
    train.gate.clear()
    q = make_queue(train)
    job = q.submit(Settings(steps=1000), "a")
    q.submit(Settings(steps=1000), "b")
    assert train.started.wait(2)
    q.cancel(job, "a")
    time.sleep(0.05)
    assert job.state == RUNNING           # "b" still watches
    q.cancel(job, "b")
    assert q.wait(job, 5)
    assert job.state == CANCELLED and job.result.stopped == "cancelled"
    assert q.cached(Settings(steps=1000)) is None          # a cancelled run is not replayed
    # asking again starts a fresh job
    train.gate.set()
    again = q.submit(Settings(steps=3), "a")
    assert again is not job and q.wait(again, 5) and again.state == DONE


def test_silent_watcher_is_dropped_and_job_cancelled(make_queue):
    now = [0.0]
    train = FakeTrain()
    train.gate.clear()
    q = make_queue(train, heartbeat_s=20, clock=lambda: now[0])
    running = q.submit(Settings(seed=1, steps=1000), "left")
    waiting = q.submit(Settings(seed=2), "also_left")
    stays = q.submit(Settings(seed=3), "stays")
    assert train.started.wait(2)
    now[0] = 15.0
    q.touch(stays, "stays")
    now[0] = 25.0                         # "left" and "also_left" silent for 25 s; "stays" for 10 s
    assert q.wait(running, 5)
    assert running.state == CANCELLED and running.watchers == []
    assert waiting.state == CANCELLED and q.position(waiting) is None
    train.gate.set()
    assert q.wait(stays, 5) and stays.state == DONE
    assert [s.seed for s in train.calls] == [1, 3]


def test_touch_keeps_a_watcher(make_queue):
    now = [0.0]
    train = FakeTrain()
    train.gate.clear()
    q = make_queue(train, heartbeat_s=20, clock=lambda: now[0])
    job = q.submit(Settings(steps=4), "a")
    assert train.started.wait(2)
    for t in range(10, 100, 10):
        now[0] = float(t)
        q.touch(job, "a")
        time.sleep(0.01)
        assert job.state == RUNNING
    train.gate.set()
    assert q.wait(job, 5) and job.state == DONE


def test_cached_replay_is_instant_and_shared(make_queue):
    train = FakeTrain(step_s=0.01)
    q = make_queue(train)
    job = q.submit(Settings(), "teacher")
    assert q.wait(job, 5)
    t0 = time.perf_counter()
    again = q.submit(Settings(), "student")
    assert time.perf_counter() - t0 < 0.01
    assert again is job and again.state == DONE and again.result is job.result
    assert q.cached(Settings()) is job and q.trainings == 1 and len(train.calls) == 1


def test_cache_is_bounded_lru(make_queue):
    q = make_queue(FakeTrain(step_s=0), cache_size=3)
    jobs = {}
    for seed in range(4):
        jobs[seed] = q.submit(Settings(seed=seed, steps=1), "w")
        assert q.wait(jobs[seed], 5)
        if seed == 2:
            assert q.cached(Settings(seed=0, steps=1)) is jobs[0]    # used: 1 is now the oldest
    assert q.cached(Settings(seed=1, steps=1)) is None
    assert all(q.cached(Settings(seed=s, steps=1)) is jobs[s] for s in (0, 2, 3))


def test_failing_train_marks_failed_and_next_runs(make_queue):
    train = FakeTrain(fail_on=7)
    q = make_queue(train)
    bad = q.submit(Settings(seed=7), "a")
    good = q.submit(Settings(seed=8), "b")
    assert q.wait(good, 5)
    assert bad.state == FAILED and "ValueError: boom" in bad.error
    assert good.state == DONE
    assert q.cached(Settings(seed=7)) is None
    retry = q.submit(Settings(seed=7), "a")
    assert retry is not bad


def test_time_cut_run_is_done_but_not_replayed(make_queue):
    def train(settings, *, should_stop, max_seconds=None):
        yield Progress(1, settings.steps)
        yield TrainResult(settings, [], "time")

    q = make_queue(train, max_seconds=0.5)
    job = q.submit(Settings(), "a")
    assert q.wait(job, 5)
    assert job.state == DONE and job.result.stopped == "time"
    assert q.cached(Settings()) is None


def test_max_seconds_is_passed_on(make_queue):
    seen = {}

    def train(settings, *, should_stop, max_seconds=None):
        seen["max_seconds"] = max_seconds
        yield TrainResult(settings)

    q = make_queue(train, max_seconds=7.5)
    assert q.wait(q.submit(Settings(), "a"), 5)
    assert seen == {"max_seconds": 7.5}


def test_events_copy_is_safe_while_training(make_queue):
    train = FakeTrain(step_s=0.0005)
    q = make_queue(train)
    job = q.submit(Settings(steps=400), "a")
    lengths = []
    while job.active:
        events = job.events()
        lengths.append(len(events))
        events.append("junk")             # a copy: the job's list is untouched
    assert q.wait(job, 5)
    assert "junk" not in job.events() and len(job.history()) == 400
    assert lengths == sorted(lengths)


def test_clamped_settings_are_the_key(make_queue):
    def clamp(s):
        used = Settings(n_layers=min(max(s.n_layers, 1), 3), seed=s.seed, steps=s.steps)
        return used, ([("n_layers", s.n_layers, used.n_layers)] if used != s else [])

    q = make_queue(FakeTrain(step_s=0), clamp_fn=clamp)
    a = q.submit(Settings(n_layers=9), "a")
    assert a.settings == Settings(n_layers=3) and a.notes == [("n_layers", 9, 3)]
    assert q.wait(a, 5)
    assert q.submit(Settings(n_layers=3), "b") is a


def test_real_training_through_the_queue():
    training = pytest.importorskip("lesson_model.training")
    q = TrainQueue(heartbeat_s=3600, max_seconds=600)       # nobody touches the job; a busy machine is slow
    threads = torch.get_num_threads()
    torch.set_num_threads(1)                # the tiny model trains faster on one thread
    try:
        settings, _ = training.clamp(training.TrainSettings(n_layers=1, steps=training.LIMITS["steps"][0]))
        job = q.submit(settings, "a")
        assert q.wait(job, 600)
        assert job.state == DONE, job.error
        assert job.result.stopped == "done" and job.result.settings == settings
        assert job.history() and job.history()[-1].step == settings.steps
        assert q.submit(settings, "b") is job
    finally:
        q.close()
        torch.set_num_threads(threads)


# --- the limits: one job per watcher, one new job per owner (a class), a bounded line ------------

@pytest.fixture
def held(make_queue):
    """A queue whose worker is busy with a gated job of watcher "hog" (so later jobs wait)."""
    def make(**kwargs):
        train = FakeTrain()
        train.gate.clear()
        q = make_queue(train, **kwargs)
        hog = q.submit(Settings(seed=99, steps=1000), "hog", owner="hog")
        assert train.started.wait(2) and wait_until(lambda: hog.state == RUNNING)
        return q, train, hog
    return make


def test_a_second_submit_from_one_watcher_replaces_its_queued_job(held):
    q, train, hog = held()
    first = q.submit(Settings(seed=1), "w")
    assert first.state == QUEUED and q.busy() == (1, 1)
    second = q.submit(Settings(seed=2), "w")
    assert second is not first
    assert first.state == CANCELLED and q.position(first) is None
    assert q.watching("w") == [second] and q.busy() == (1, 1)
    # the same settings again: the same job, still one
    assert q.submit(Settings(seed=2), "w") is second and q.busy() == (1, 1)


def test_a_second_submit_from_one_watcher_stops_its_running_job(make_queue):
    train = FakeTrain()
    train.gate.clear()
    q = make_queue(train)
    first = q.submit(Settings(seed=1, steps=1000), "w")
    assert train.started.wait(2)
    second = q.submit(Settings(seed=2, steps=3), "w")
    assert q.wait(first, 5) and first.state == CANCELLED
    train.gate.set()
    assert q.wait(second, 5) and second.state == DONE
    assert [s.seed for s in train.calls] == [1, 2]


def test_a_stale_touch_does_not_put_a_watcher_back_on_its_old_job(held):
    q, train, hog = held()
    old = q.submit(Settings(seed=1), "w")
    assert q.submit(Settings(seed=1), "x") is old
    new = q.submit(Settings(seed=2), "w")
    q.touch(old, "w")                     # an old page's poll, after the new Start
    assert old.watchers == ["x"] and q.watching("w") == [new]


def test_leaving_a_job_others_watch_keeps_it(held):
    q, train, hog = held()
    shared = q.submit(Settings(seed=1), "w")
    assert q.submit(Settings(seed=1), "x") is shared
    other = q.submit(Settings(seed=2), "w")
    assert shared.state == QUEUED and shared.watchers == ["x"]
    assert q.watching("w") == [other] and q.watching("x") == [shared]


def test_a_replay_takes_the_watcher_off_its_active_job(make_queue):
    train = FakeTrain(step_s=0)
    q = make_queue(train)
    done = q.submit(Settings(seed=1, steps=2), "a")
    assert q.wait(done, 5)
    train.gate.clear()
    long = q.submit(Settings(seed=2, steps=1000), "w")
    assert q.submit(Settings(seed=1, steps=2), "w") is done      # looking at a finished one instead
    assert q.wait(long, 5) and long.state == CANCELLED


def test_one_new_job_per_class(held):
    q, train, hog = held()
    a = "class:ABC234"
    job = q.submit(Settings(seed=1), "s1", owner=a)
    # 25 students of the class on the teacher's settings: one job
    assert all(q.submit(Settings(seed=1), f"s{i}", owner=a) is job for i in range(2, 26))
    assert q.busy() == (1, 1) and q.owned(a) is job
    # a student of the class on other settings: refused, nothing queued, the class's job untouched
    with pytest.raises(OwnerBusy) as refused:
        q.submit(Settings(seed=2), "s2", owner=a)
    assert refused.value.job is job and q.busy() == (1, 1)
    assert job.state == QUEUED and "s2" not in job.watchers and len(job.watchers) == 24
    # another class may queue its own, and a student of the first class may join that one (free)
    b = q.submit(Settings(seed=3), "t1", owner="class:XYZ789")
    assert q.busy() == (1, 2)
    assert q.submit(Settings(seed=3), "s3", owner=a) is b
    # once nobody of the class watches the class's job, the class may queue another
    for i in range(1, 26):
        q.cancel(job, f"s{i}")
    assert job.state == CANCELLED and q.owned(a) is None
    again = q.submit(Settings(seed=4), "s4", owner=a)
    assert again.state == QUEUED and again.owner == a and q.owned(a) is again


def test_a_student_alone_on_the_class_job_replaces_it(held):
    q, train, hog = held()
    first = q.submit(Settings(seed=1), "s1", owner="class:A")
    second = q.submit(Settings(seed=2), "s1", owner="class:A")
    assert first.state == CANCELLED and second.state == QUEUED and q.owned("class:A") is second
    assert q.busy() == (1, 1)


def test_the_slot_is_freed_when_the_owners_watchers_leave_a_shared_job(held):
    q, train, hog = held()
    job = q.submit(Settings(seed=1), "s1", owner="class:A")
    assert q.submit(Settings(seed=1), "t1", owner="class:B") is job     # B joins A's job
    with pytest.raises(OwnerBusy):
        q.submit(Settings(seed=2), "s2", owner="class:A")
    q.cancel(job, "s1")                   # nobody of A watches it; B still does, so it stays queued
    assert job.state == QUEUED
    assert q.submit(Settings(seed=2), "s2", owner="class:A").state == QUEUED


def test_the_owners_slot_frees_when_its_watchers_go_silent(held):
    now = [0.0]
    q, train, hog = held(heartbeat_s=20, clock=lambda: now[0])
    job = q.submit(Settings(seed=1), "s1", owner="class:A")
    now[0] = 25.0
    q.touch(hog, "hog")
    fresh = q.submit(Settings(seed=2), "s2", owner="class:A")
    assert job.state == CANCELLED and fresh.state == QUEUED and q.busy() == (1, 1)


def test_without_an_owner_each_watcher_is_its_own(held):
    q, train, hog = held()
    jobs = [q.submit(Settings(seed=s), f"w{s}") for s in range(3)]
    assert len({id(j) for j in jobs}) == 3 and q.busy() == (1, 3)
    assert {j.owner for j in jobs} == {"w0", "w1", "w2"}


def test_the_line_is_bounded(held):
    q, train, hog = held(max_waiting=3)
    jobs = [q.submit(Settings(seed=s), f"w{s}") for s in range(3)]
    assert q.busy() == (1, 3)
    with pytest.raises(QueueFull) as full:
        q.submit(Settings(seed=9), "late")
    assert (full.value.waiting, full.value.limit) == (3, 3) and q.busy() == (1, 3)
    assert q.watching("late") == []
    assert q.submit(Settings(seed=1), "late") is jobs[1]          # joining a waiting job is free
    # a watcher of a waiting job that asks for other settings gives its place up first
    replaced = q.submit(Settings(seed=7), "w0")
    assert jobs[0].state == CANCELLED and replaced.state == QUEUED and q.busy() == (1, 3)
    q.cancel(jobs[2], "w2")
    late = q.submit(Settings(seed=9), "late2")
    assert late.state == QUEUED
    train.gate.set()
    for job in (hog, jobs[1], replaced, late):
        assert q.wait(job, 30) and job.state == DONE


def test_the_line_bound_counts_after_silent_watchers_are_reaped(held):
    now = [0.0]
    q, train, hog = held(max_waiting=2, heartbeat_s=20, clock=lambda: now[0])
    q.submit(Settings(seed=1), "gone1")
    q.submit(Settings(seed=2), "gone2")
    now[0] = 25.0
    q.touch(hog, "hog")
    assert q.submit(Settings(seed=3), "here").state == QUEUED and q.busy() == (1, 1)


def test_shared_queue_reads_its_bounds_from_the_environment(monkeypatch):
    from server import training_queue

    for raw, expected in (("7", 7), ("", training_queue.MAX_WAITING), ("many", training_queue.MAX_WAITING),
                          ("0", training_queue.MAX_WAITING), ("-2", training_queue.MAX_WAITING)):
        monkeypatch.setenv(training_queue.WAITING_ENV, raw)
        monkeypatch.setenv(training_queue.SECONDS_ENV, "banana" if raw == "many" else "30")
        monkeypatch.setattr(training_queue, "_SHARED", None)
        q = training_queue.shared_queue()
        assert q.max_waiting == expected
        assert q.max_seconds == (None if raw == "many" else 30.0)
