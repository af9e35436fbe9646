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

Limits, so that one client or one class cannot fill the server's afternoon (each training may
take up to ``max_seconds``):

- **one job per watcher**: a watcher (one browser session) watches at most one active job.
  ``submit`` first takes the watcher off every other job it watched (a job left with nobody
  is cancelled, as by ``cancel``), so a second Start from one session replaces its earlier
  job rather than adding one.
- **one new job per owner**: ``submit(settings, watcher, owner=...)`` names who a new job is
  charged to: the page passes the class code for a teacher and every student of a class
  (following or paused), and nothing for anyone else (the owner is then the watcher itself).
  While one of an owner's jobs is active and still watched by a watcher of that owner, the
  owner gets no second one: ``submit`` raises ``OwnerBusy`` (carrying that job). Joining an
  active job for the same settings, or replaying a finished one, is always allowed: it costs
  the server nothing. So 25 students of one class who press Start on the teacher's settings
  share one job; a student of that class who asks for other settings meanwhile is told the
  class already has its training, and gets a new one only when nobody of the class watches
  the class's job any more (a student alone on the class's job replaces it, as above). A
  paused student still belongs to the class: pausing is one click, so it must not open a
  second slot. A job joined by another owner stays charged to the owner who created it only
  while a watcher of that owner still watches it.
- **a bounded queue**: at most ``max_waiting`` jobs wait (``DECODER_LAB_TRAIN_QUEUE``,
  default ``MAX_WAITING``); a new job beyond that raises ``QueueFull`` and the page says to
  try again in a minute. With one running, nobody waits more than ``max_waiting + 1``
  trainings.

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
MAX_WAITING = 4          # jobs that may wait behind the running one (each up to max_seconds)
HEARTBEAT_S = 20.0       # a watcher silent this long counts as gone
IDLE_POLL_S = 1.0        # how often the idle worker looks for watchers that left a queued job
SECONDS_ENV = "DECODER_LAB_TRAIN_SECONDS"   # the app's bound on one training (default: training.train's)
WAITING_ENV = "DECODER_LAB_TRAIN_QUEUE"     # the app's bound on waiting jobs (default MAX_WAITING)


class Refused(Exception):
    """``submit`` would not add a job (the page says why; nothing was queued)."""


class QueueFull(Refused):
    """``max_waiting`` jobs already wait."""

    def __init__(self, waiting: int, limit: int):
        super().__init__(f"{waiting} trainings already wait (at most {limit})")
        self.waiting, self.limit = waiting, limit


class OwnerBusy(Refused):
    """The owner (a class, a session) already has an active job, watched by one of its own."""

    def __init__(self, job: "Job"):
        super().__init__("this owner already has a training queued or running")
        self.job = job


@dataclass(eq=False)
class Job:
    """One training, shared by every watcher that asked for its settings. Read it through
    its methods (thread-safe copies); the queue's worker writes it."""

    settings: Hashable
    owner: Hashable = None                           # who the job is charged to (submit's owner)
    notes: list = field(default_factory=list)        # what clamp changed: [(field, given, used)]
    state: str = QUEUED
    error: str | None = None
    result: Any = None                               # the TrainResult when done
    created: float = 0.0
    started: float | None = None
    finished: float | None = None
    _events: list = field(default_factory=list, repr=False)
    _watchers: dict = field(default_factory=dict, repr=False)   # watcher id -> last touch (clock)
    _owner_of: dict = field(default_factory=dict, repr=False)   # watcher id -> its owner (kept after it leaves)
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
                 max_waiting: int | None = MAX_WAITING, clock: Callable[[], float] = time.monotonic):
        self._train_fn = train_fn
        self._clamp_fn = clamp_fn
        self.cache_size = cache_size
        self.heartbeat_s = heartbeat_s
        self.max_seconds = max_seconds
        self.max_waiting = max_waiting                   # None: no bound (scripts)
        self.clock = clock
        self._cond = threading.Condition()
        self._waiting: list[Job] = []                    # queued jobs, in order
        self._running: Job | None = None
        self._active: dict[Hashable, Job] = {}           # settings -> queued/running job
        self._owned: dict[Hashable, Job] = {}            # owner -> the active job it created
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
    def submit(self, settings, watcher_id: Hashable, owner: Hashable = None) -> Job:
        """The job for ``settings`` with ``watcher_id`` watching it: the cached result (state
        done, instantly), the queued or running job for the same settings, or a new job at
        the end of the queue, charged to ``owner`` (default: the watcher).

        The watcher leaves every other job it watched first (one job per watcher). A new job
        is refused with ``OwnerBusy`` while the owner has another active job that one of its
        watchers still watches, and with ``QueueFull`` when ``max_waiting`` jobs wait."""
        key, notes = self.clamp(settings)
        owner = watcher_id if owner is None else owner
        now = self.clock()
        with self._cond:
            if self._closed:
                raise RuntimeError("the training queue is closed")
            self._reap(now)
            done = self._cache.get(key)
            if done is not None:
                self._cache.move_to_end(key)
                self._release(watcher_id, keep=None)
                self._cond.notify_all()
                return done
            job = self._active.get(key)
            if job is not None and job._stop:
                job = None
            self._release(watcher_id, keep=job)
            if job is None:
                busy = self._owned.get(owner)
                if busy is not None and self._holds(busy, owner):
                    self._cond.notify_all()
                    raise OwnerBusy(busy)
                if self.max_waiting is not None and len(self._waiting) >= self.max_waiting:
                    self._cond.notify_all()
                    raise QueueFull(len(self._waiting), self.max_waiting)
                job = Job(settings=key, owner=owner, notes=list(notes), created=now)
                self._active[key] = job
                self._owned[owner] = job
                self._waiting.append(job)
                self._ensure_worker()
            with job._lock:
                job._watchers[watcher_id] = now
                job._owner_of[watcher_id] = owner
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

    def watching(self, watcher_id: Hashable) -> list[Job]:
        """The active jobs ``watcher_id`` watches (at most one, by submit's rule)."""
        with self._cond:
            return [job for job in self._jobs() if watcher_id in job.watchers]

    def owned(self, owner: Hashable) -> Job | None:
        """The owner's active job while one of its watchers watches it, else None."""
        with self._cond:
            job = self._owned.get(owner)
            return job if job is not None and self._holds(job, owner) else None

    def touch(self, job: Job, watcher_id: Hashable) -> None:
        """The watcher's heartbeat: it is still looking at the job. A watcher that had been
        dropped (silent too long) comes back only while the job is still active, and only if
        it has not asked for another job since (one job per watcher)."""
        now = self.clock()
        with self._cond:
            if job.state not in ACTIVE or job._stop:
                return
            with job._lock:
                if watcher_id in job._watchers:
                    job._watchers[watcher_id] = now
                    return
            if any(watcher_id in other.watchers for other in self._jobs() if other is not job):
                return
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
        """(running, waiting) counts (without the jobs whose watchers have all gone silent)."""
        with self._cond:
            self._reap(self.clock())
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
            for job in self._jobs():
                self._stop_job(job)
            self._cond.notify_all()
            worker = self._worker
        if worker is not None:
            worker.join(timeout)

    # --- inside the lock ---------------------------------------------------------------------
    def _jobs(self) -> list[Job]:
        """The queued jobs in order, then the running one."""
        return list(self._waiting) + ([self._running] if self._running else [])

    def _holds(self, job: Job, owner: Hashable) -> bool:
        """Whether ``job`` still occupies ``owner``'s slot: active, not stopping, and watched
        by at least one watcher of that owner."""
        if job._stop or job.state not in ACTIVE:
            return False
        with job._lock:
            return any(job._owner_of.get(w) == owner for w in job._watchers)

    def _release(self, watcher_id: Hashable, keep: Job | None) -> None:
        """Take ``watcher_id`` off every active job but ``keep``; cancel those left unwatched."""
        for job in self._jobs():
            if job is keep or job._stop:
                continue
            with job._lock:
                if job._watchers.pop(watcher_id, None) is None:
                    continue
                left = bool(job._watchers)
            if not left:
                self._stop_job(job)

    def _alive(self, job: Job, now: float) -> bool:
        """Drop the job's silent watchers; True when someone is still watching."""
        with job._lock:
            for watcher, last in list(job._watchers.items()):
                if now - last > self.heartbeat_s:
                    del job._watchers[watcher]
            return bool(job._watchers)

    def _reap(self, now: float) -> None:
        for job in self._jobs():
            if not job._stop and not self._alive(job, now):
                self._stop_job(job)

    def _stop_job(self, job: Job) -> None:
        job._stop = True
        self._forget(job)
        if job in self._waiting:
            self._waiting.remove(job)
            job.state = CANCELLED
            job.finished = self.clock()
        # a running job sees _stop through should_stop and ends as cancelled

    def _forget(self, job: Job) -> None:
        """The job no longer answers for its settings nor holds its owner's slot."""
        if self._active.get(job.settings) is job:
            del self._active[job.settings]
        if self._owned.get(job.owner) is job:
            del self._owned[job.owner]

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
                self._forget(job)
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
            _SHARED = TrainQueue(max_seconds=_env_number(SECONDS_ENV, None, float),
                                 max_waiting=_env_number(WAITING_ENV, MAX_WAITING, int))
        return _SHARED


def _env_number(name: str, default, kind):
    """A positive number from the environment; ``default`` when unset or not one (a typo in
    a setting must not take the Training lab down)."""
    raw = os.environ.get(name, "").strip()
    try:
        value = kind(raw)
    except ValueError:
        return default
    return value if value > 0 else default
