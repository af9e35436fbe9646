"""The class queue of the Training lab: trainings shared by settings, one at a time per process.

A class of thirty opening the same teacher's link must not start thirty trainings on the
server's CPU. So:

- **one worker thread** per queue runs at most ONE training at a time; other jobs wait in
  order (``position(job)``: 0 = running, n = the n-th waiting);
- **shared by settings**: the key is the clamped ``TrainSettings``. A second request for
  settings already queued or running joins that job as another watcher; a request for
  settings already trained replays the cached result at once (a bounded LRU of finished
  jobs, ``cache_size``);
- **watchers**: every job has the set of sessions waiting for it. ``cancel(job, watcher)``
  removes one; when none is left the job is cancelled (a queued job leaves the queue, a
  running one stops at its next step through ``should_stop``). A watcher that stops calling
  ``touch`` for ``heartbeat_s`` seconds (a student who closed the tab) counts as gone, so
  nobody leaves a training running for ever; the training is bounded in steps (clamp) and
  in seconds (``max_seconds``) anyway.

Plain Python and threads, no streamlit: the page (app_pages/train.py) polls ``Job`` objects.
The train function is injected (``TrainQueue(train_fn=...)``; default
``lesson_model.training.train``), so the queue is tested with fakes.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

QUEUED, RUNNING, DONE, CANCELLED, FAILED = "queued", "running", "done", "cancelled", "failed"
ACTIVE = (QUEUED, RUNNING)
FINISHED = (DONE, CANCELLED, FAILED)

CACHE_SIZE = 32          # finished trainings kept for replay
HEARTBEAT_S = 20.0       # a watcher silent this long counts as gone
IDLE_POLL_S = 1.0        # how often the idle worker looks for watchers that left a queued job
SECONDS_ENV = "DECODER_LAB_TRAIN_SECONDS"   # the app's bound on one training (default: training.train's)


@dataclass(eq=False)
class Job:
    """One training, shared by every watcher that asked for its settings. Read it through
    its methods (thread-safe copies); the queue's worker writes it."""

    settings: Hashable
    notes: list = field(default_factory=list)        # what clamp changed: [(field, given, used)]
    state: str = QUEUED
    error: str | None = None
    result: Any = None                               # the TrainResult when done
    created: float = 0.0
    started: float | None = None
    finished: float | None = None
    _events: list = field(default_factory=list, repr=False)
    _watchers: dict = field(default_factory=dict, repr=False)   # watcher id -> last touch (clock)
    _stop: bool = field(default=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def events(self) -> list:
        """The events so far (Progress and Checkpoint objects, in order): a copy."""
        with self._lock:
            return list(self._events)

    def history(self) -> list:
        """The Progress events so far."""
        return [e for e in self.events() if _kind(e) == "Progress"]

    def checkpoints(self) -> list:
        return [e for e in self.events() if _kind(e) == "Checkpoint"]

    def latest(self):
        """The last Progress event, or None before the first evaluation."""
        with self._lock:
            for event in reversed(self._events):
                if _kind(event) == "Progress":
                    return event
        return None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    @property
    def watchers(self) -> list:
        with self._lock:
            return list(self._watchers)

    def _add(self, event) -> None:
        with self._lock:
            self._events.append(event)


def _kind(event) -> str:
    return type(event).__name__


class TrainQueue:
    """At most one training at a time, shared by settings; see the module docstring."""

    def __init__(self, train_fn: Callable[..., Iterator] | None = None, *,
                 clamp_fn: Callable | None = None, cache_size: int = CACHE_SIZE,
                 heartbeat_s: float = HEARTBEAT_S, max_seconds: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self._train_fn = train_fn
        self._clamp_fn = clamp_fn
        self.cache_size = cache_size
        self.heartbeat_s = heartbeat_s
        self.max_seconds = max_seconds
        self.clock = clock
        self._cond = threading.Condition()
        self._waiting: list[Job] = []                    # queued jobs, in order
        self._running: Job | None = None
        self._active: dict[Hashable, Job] = {}           # settings -> queued/running job
        self._cache: OrderedDict[Hashable, Job] = OrderedDict()   # settings -> done job (LRU)
        self._worker: threading.Thread | None = None
        self._closed = False
        self.trainings = 0                               # trainings started (tests, the page's footer)

    # --- the training function and its bounds ----------------------------------------------
    def _train(self):
        if self._train_fn is None:
            from lesson_model import training
            self._train_fn = training.train
        return self._train_fn

    def clamp(self, settings) -> tuple[Hashable, list]:
        """(clamped settings, notes); the clamped settings are the cache key."""
        if self._clamp_fn is None:
            try:
                from lesson_model import training
            except ImportError:            # a fake-train queue in tests without the module
                return settings, []
            self._clamp_fn = training.clamp
        return self._clamp_fn(settings)

    # --- asking ----------------------------------------------------------------------------
    def submit(self, settings, watcher_id: Hashable) -> Job:
        """The job for ``settings`` with ``watcher_id`` watching it: the cached result (state
        done, instantly), the queued or running job for the same settings, or a new job at
        the end of the queue."""
        key, notes = self.clamp(settings)
        now = self.clock()
        with self._cond:
            if self._closed:
                raise RuntimeError("the training queue is closed")
            self._reap(now)
            done = self._cache.get(key)
            if done is not None:
                self._cache.move_to_end(key)
                return done
            job = self._active.get(key)
            if job is None or job._stop:
                job = Job(settings=key, notes=list(notes), created=now)
                self._active[key] = job
                self._waiting.append(job)
                self._ensure_worker()
            with job._lock:
                job._watchers[watcher_id] = now
            self._cond.notify_all()
            return job

    def cached(self, settings) -> Job | None:
        """The finished job for ``settings`` if this process has trained them (no new job)."""
        key, _ = self.clamp(settings)
        with self._cond:
            job = self._cache.get(key)
            if job is not None:
                self._cache.move_to_end(key)
            return job

    def active_job(self, settings) -> Job | None:
        """The queued or running job for ``settings``, if any (a classmate's, say)."""
        key, _ = self.clamp(settings)
        with self._cond:
            job = self._active.get(key)
            return None if job is None or job._stop else job

    def touch(self, job: Job, watcher_id: Hashable) -> None:
        """The watcher's heartbeat: it is still looking at the job. A watcher that had been
        dropped (silent too long) comes back only while the job is still active."""
        now = self.clock()
        with self._cond:
            if job.state in ACTIVE and not job._stop:
                with job._lock:
                    job._watchers[watcher_id] = now

    def cancel(self, job: Job, watcher_id: Hashable) -> None:
        """``watcher_id`` no longer waits for ``job``; the job is cancelled when nobody does."""
        with self._cond:
            with job._lock:
                job._watchers.pop(watcher_id, None)
                left = bool(job._watchers)
            if not left:
                self._stop_job(job)
            self._cond.notify_all()

    def position(self, job: Job) -> int | None:
        """0 while running, n when n-th in the queue, None once finished."""
        with self._cond:
            self._reap(self.clock())
            if job is self._running and job.state == RUNNING:
                return 0
            try:
                return self._waiting.index(job) + 1
            except ValueError:
                return None

    def ahead(self, job: Job) -> int:
        """How many trainings will run before this job starts (the running one included)."""
        with self._cond:
            if job not in self._waiting:
                return 0
            return self._waiting.index(job) + (self._running is not None)

    def busy(self) -> tuple[int, int]:
        """(running, waiting) counts."""
        with self._cond:
            return int(self._running is not None), len(self._waiting)

    def wait(self, job: Job, timeout: float | None = None) -> bool:
        """Block until ``job`` has finished (tests, scripts); False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while job.state in ACTIVE:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(IDLE_POLL_S if left is None else min(left, IDLE_POLL_S))
        return True

    def close(self, timeout: float = 10.0) -> None:
        """Cancel everything and stop the worker (tests)."""
        with self._cond:
            self._closed = True
            for job in list(self._waiting) + ([self._running] if self._running else []):
                self._stop_job(job)
            self._cond.notify_all()
            worker = self._worker
        if worker is not None:
            worker.join(timeout)

    # --- inside the lock ---------------------------------------------------------------------
    def _alive(self, job: Job, now: float) -> bool:
        """Drop the job's silent watchers; True when someone is still watching."""
        with job._lock:
            for watcher, last in list(job._watchers.items()):
                if now - last > self.heartbeat_s:
                    del job._watchers[watcher]
            return bool(job._watchers)

    def _reap(self, now: float) -> None:
        for job in list(self._waiting) + ([self._running] if self._running else []):
            if not job._stop and not self._alive(job, now):
                self._stop_job(job)

    def _stop_job(self, job: Job) -> None:
        job._stop = True
        if self._active.get(job.settings) is job:
            del self._active[job.settings]
        if job in self._waiting:
            self._waiting.remove(job)
            job.state = CANCELLED
            job.finished = self.clock()
        # a running job sees _stop through should_stop and ends as cancelled

    def _ensure_worker(self) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._work, name="train-queue", daemon=True)
            self._worker.start()

    # --- the worker ----------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._closed:
                    self._cond.wait(IDLE_POLL_S)
                    self._reap(self.clock())
                if self._closed and not self._waiting:
                    return
                self._reap(self.clock())
                if not self._waiting:
                    continue
                job = self._waiting.pop(0)
                self._running = job
                job.state = RUNNING
                job.started = self.clock()
                self.trainings += 1
            state, result, error = self._run(job)
            with self._cond:             # the outcome, the cache and the next job in one step
                job.result, job.error = result, error
                job.state = state
                job.finished = self.clock()
                self._running = None
                if self._active.get(job.settings) is job:
                    del self._active[job.settings]
                if state == DONE and _cacheable(result):
                    self._cache[job.settings] = job
                    self._cache.move_to_end(job.settings)
                    while len(self._cache) > self.cache_size:
                        self._cache.popitem(last=False)
                self._cond.notify_all()

    def _should_stop(self, job: Job) -> bool:
        if job._stop:
            return True
        now = self.clock()
        with job._lock:
            alive = any(now - last <= self.heartbeat_s for last in job._watchers.values())
        if not alive:
            with self._cond:
                self._reap(now)
        return job._stop

    def _run(self, job: Job) -> tuple[str, Any, str | None]:
        """Train ``job`` (outside the lock): (state, TrainResult or None, error text or None)."""
        kwargs = {"should_stop": lambda: self._should_stop(job)}
        if self.max_seconds is not None:
            kwargs["max_seconds"] = self.max_seconds
        result = None
        try:
            for event in self._train()(job.settings, **kwargs):
                if _kind(event) == "TrainResult":
                    result = event
                else:
                    job._add(event)
        except Exception as exc:       # the page shows the error; the next job still runs
            return FAILED, None, f"{type(exc).__name__}: {exc}"
        if result is None:
            return FAILED, None, "the training ended without a result"
        return (CANCELLED if getattr(result, "stopped", "done") == "cancelled" else DONE), result, None


def _cacheable(result) -> bool:
    """Only a training that ran all its steps is replayed to others: one cut by the time
    bound depends on how busy the machine was."""
    return getattr(result, "stopped", "done") == "done"


_SHARED: TrainQueue | None = None
_SHARED_LOCK = threading.Lock()


def shared_queue() -> TrainQueue:
    """The process-wide queue every session of the app uses."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            seconds = os.environ.get(SECONDS_ENV)
            _SHARED = TrainQueue(max_seconds=float(seconds) if seconds else None)
        return _SHARED
