"""The models inside the server process: each loaded once (ModelShelf) and shared by every
session, with a memory-bounded cache of runs shared too (a run depends only on its inputs), and
the script slots that bound how many lesson scripts run at once. No session state here: the
session's choice of model and the progress bar live in course/model.py.

Cached results are shared between sessions: treat every tensor you get as read-only.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field

import streamlit as st
import torch

import lesson_model
from lesson_model.analysis.kv_memory import kv_cache_names, kv_cache_of_run
from lesson_model.model import Captures, continue_capture
from server.heap import release_free_heap

RUN_CACHE_MB = int(os.environ.get("DECODER_LAB_RUN_CACHE_MB", "256"))
FORWARDS = int(os.environ.get("DECODER_LAB_FORWARDS", "1"))      # forward passes at once (bench/bench_class.py)
SCRIPTS = int(os.environ.get("DECODER_LAB_SCRIPTS", "0"))        # lesson scripts at once (0: no limit)
THREADS_ENV = "DECODER_LAB_THREADS"   # torch intra-op threads of the app process (bench/bench_app.py)
# A new prompt that starts with at least this many of a kept run's tokens (and half its own)
# continues from that run's keys and values instead of running from its first token.
RESUME_MIN = 4

log = logging.getLogger(__name__)


MODELS = tuple(lesson_model.BUNDLED)           # the keys ?model= takes: "smollm2-135m", "gemma-3-270m"
DEFAULT_MODEL = lesson_model.DEFAULT_MODEL


@dataclass
class ModelLoad:
    """One bundled model's load in this process: how far it has got, then the model or the error."""

    key: str
    stage: str = "waiting"          # lesson_model.load_model's stages: preparing, converting, writing, loading
    fraction: float = 0.0
    repairing: bool = False         # the load found a damaged cached file and is rebuilding it ("repairing")
    started: float = field(default_factory=time.monotonic)
    model: object = None
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def report(self, stage: str, fraction: float) -> None:
        self.stage, self.fraction = stage, fraction
        self.repairing = self.repairing or stage == "repairing"


class ModelShelf:
    """Each bundled model loaded at most once per process and shared by every session. A load
    runs in its own thread, so every session that needs the model meanwhile can show how far it
    has got (a cold first start converts the packaged weights: up to a minute); a failed load
    (a missing or damaged package) is logged, with its traceback unless the package is simply
    missing, and tried again by the next session that asks."""

    def __init__(self):
        self._lock = threading.Lock()
        self._loads: dict[str, ModelLoad] = {}

    def load(self, key: str) -> ModelLoad:
        """The load of ``key``, started now unless it is running or done."""
        with self._lock:
            load = self._loads.get(key)
            if load is None or load.error is not None:
                load = self._loads[key] = ModelLoad(key)
                threading.Thread(target=self._run, args=(load,), daemon=True).start()
            return load

    def _run(self, load: ModelLoad) -> None:
        try:
            if os.environ.get(THREADS_ENV):
                torch.set_num_threads(int(os.environ[THREADS_ENV]))
            load.model = lesson_model.load_model(load.key, progress=load.report)
            release_free_heap()      # the tokenizer's parse leaves freed pages behind (server.heap)
        except BaseException as exc:   # noqa: BLE001 - handed to every session that waits
            load.error = exc
            # The page shows a short message; the operator gets the traceback (one line for a missing package).
            missing = isinstance(exc, lesson_model.ModelNotInstalledError)
            log.log(logging.WARNING if missing else logging.ERROR, "Decoder Lab: loading %s failed: %s",
                    load.key, exc, exc_info=None if missing else exc)
        finally:
            load.done.set()

    def ready(self, key: str) -> bool:
        """Whether ``key`` is loaded (without starting a load)."""
        with self._lock:
            load = self._loads.get(key)
        return load is not None and load.done.is_set() and load.error is None

    def __call__(self, key: str):
        """The model, waiting for its load (raises what the load raised)."""
        load = self.load(key)
        load.done.wait()
        if load.error is not None:
            raise load.error
        return load.model

    def clear(self) -> None:
        with self._lock:
            self._loads.clear()


shelf = ModelShelf()      # the process's models


class CachedRun:
    """What a page asked of one forward pass. Tensors keep lesson_model's batch dim (1).

    The last position's logits are unembedded when first read: half the pages never read them,
    and with Gemma's 262,144-entry vocabulary that one product reads 671 MB of weights (55 ms,
    a third of an 18-token pass). Either give ``last_logits``, or ``final`` (the last position
    after the final norm, [1, 1, d_model]) with the model's ``unembedding`` [d_model, vocab]."""

    def __init__(self, ids: tuple[int, ...], *, last_logits: torch.Tensor | None = None,
                 logits: torch.Tensor | None = None, cache: Captures | None = None,
                 final: torch.Tensor | None = None, unembedding: torch.Tensor | None = None):
        if last_logits is None and (final is None or unembedding is None):
            raise ValueError("CachedRun: give last_logits, or final with the unembedding")
        self.ids = ids
        self.logits = logits                   # [1, pos, vocab] when asked with all_logits=True
        self.cache = cache if cache is not None else Captures([], {})   # the hook tensors asked for
        self._last_logits = last_logits
        self._final = final
        self._unembedding = unembedding
        self._vocab = last_logits.numel() if last_logits is not None else unembedding.shape[1]

    @property
    def last_logits(self) -> torch.Tensor:
        """[vocab], the prediction for the next token (two threads may both compute it: same value)."""
        if self._last_logits is None:
            with torch.inference_mode():
                w = self._unembedding
                self._last_logits = (self._final.to(w.device) @ w)[0, -1].cpu()
        return self._last_logits

    @property
    def nbytes(self) -> int:
        """What it holds, counting the last position's logits whether they are read yet or not."""
        tensors = [t for t in (self.logits, self._final) if t is not None]
        return self.cache.held_bytes() + sum(x.element_size() * x.nelement() for x in tensors) + 4 * self._vocab


class RunCache:
    """LRU of CachedRun bounded by bytes. At most ``forwards`` forward passes at a time (the CPU
    is the bottleneck: more at once only fight over the cores), one per key (a second session
    asking for the same run waits for the first's), and lookups never wait for them."""

    def __init__(self, budget_bytes: int, forwards: int = 1):
        self.budget = budget_bytes
        self._items: OrderedDict[Hashable, CachedRun] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._slots = threading.Semaphore(max(1, forwards))
        self._running: dict[Hashable, threading.Event] = {}
        self.computed = 0             # forward passes run (not found here): the warm-up's test reads it

    def _get(self, key: Hashable) -> CachedRun | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
            return hit

    def _put(self, key: Hashable, value: CachedRun) -> None:
        with self._lock:
            if key in self._items or value.nbytes > self.budget:
                return
            self._items[key] = value
            self._bytes += value.nbytes
            while self._bytes > self.budget:
                _, old = self._items.popitem(last=False)
                self._bytes -= old.nbytes

    def get_or_run(self, key: Hashable, compute) -> CachedRun:
        hit = self._get(key)
        if hit is not None:
            return hit
        with self._lock:
            running = self._running.get(key)
            if running is None:
                running = self._running[key] = threading.Event()
                mine = True
            else:
                mine = False
        if not mine:
            running.wait()
            hit = self._get(key)      # None if it failed, or was too big to keep: run it here
            if hit is not None:
                return hit
        try:
            with self._slots:
                value = compute()
                self.computed += 1
            self._put(key, value)
            return value
        finally:
            if mine:
                with self._lock:
                    self._running.pop(key, None)
                running.set()

    def longest_start(self, family: Hashable, ids: tuple[int, ...]) -> tuple[CachedRun | None, int]:
        """Of the kept runs keyed (family, their ids), the one whose ids start with the most of
        ``ids``, and how many tokens the two share from the start (None, 0 if none is kept)."""
        with self._lock:
            kept = [(key[1], run) for key, run in self._items.items()
                    if isinstance(key, tuple) and len(key) == 2 and key[0] == family]
        best, shared = None, 0
        for other, run in kept:
            n = next((i for i, (a, b) in enumerate(zip(other, ids)) if a != b), min(len(other), len(ids)))
            if n > shared:
                best, shared = run, n
        return best, shared

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        """Forget every kept run (the tests start from an empty cache)."""
        with self._lock:
            self._items.clear()
            self._bytes = 0


class LRU:
    """A thread-safe dict of at most max_entries, the least recently used dropped first."""

    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self._items: OrderedDict[Hashable, object] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable):
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: Hashable, value) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


@st.cache_resource(show_spinner=False)
def shared_lru(name: str, max_entries: int) -> LRU:
    """One LRU per name for the whole process: every session reads and fills the same one."""
    return LRU(max_entries)


@st.cache_resource(show_spinner=False)
def _script_slots() -> threading.Semaphore:
    return threading.Semaphore(SCRIPTS)


@contextmanager
def script_slot(first: bool = False):
    """Run a lesson's script while at most DECODER_LAB_SCRIPTS others run (server.serve sets it).

    A class's sessions all run their scripts at once. Their Python (figures, Streamlit) takes
    turns on the GIL in 5 ms slices, so a forward pass, which needs the GIL back between its
    tensor operations, waits behind every other script; with 25 at once the server kept only
    1.4 of 2 cores busy (bench/bench_class.py). A few scripts at a time, the rest waiting
    their turn in order, keep the cores busy and finish the first ones sooner.

    first=True (the teacher's session, whose screen the room watches and whose view the class
    follows) never waits for a slot."""
    if SCRIPTS <= 0 or first:
        yield
        return
    with _script_slots():
        yield


@st.cache_resource(show_spinner=False)
def run_cache() -> RunCache:
    return RunCache(RUN_CACHE_MB * 2**20, forwards=FORWARDS)


def cached_run(lm, ids: Iterable[int], names: Iterable[str] = (), *, all_logits: bool = False,
               hooks: dict | None = None, hooks_key: Hashable = None) -> CachedRun:
    """Run the model on ``ids`` (cached and shared), keeping only what the page needs:
    the hook tensors in ``names``, the last position's logits, and all logits if asked.

    ``hooks`` (interventions, e.g. an ablation) must come with ``hooks_key``, a hashable
    description of them such as ``("zero_heads", ((5, 1), (6, 3)))``.

    Without hooks a run also keeps every layer's keys and values, and a later prompt that
    starts with the same tokens (a learner adding to their text) continues from them: only its
    new tokens go through the model (LessonModel.run with a KV cache) and each capture is
    joined to the kept run's (continue_capture). Under the causal mask that is the same
    computation as a pass from the first token, up to float rounding.
    """
    ids = tuple(int(i) for i in ids)
    names = tuple(sorted(set(names)))
    # Each head's write (hook_result, n_heads times the attention output) is kept as its layer's
    # hook_z and computed from it at every read, as lesson_model.Captures defers it within a run.
    results = lm.deferred_results(names, hooks)
    z_names = {n.replace(".hook_result", ".hook_z") for n in results}
    if hooks and hooks_key is None:
        raise ValueError("cached_run: pass hooks_key, a hashable description of the hooks")
    resumable = not hooks       # a hook may depend on every position: such runs start from the first token
    kv_names = set(kv_cache_names(lm.cfg.n_layers)) if resumable else set()
    captured = sorted((set(names) - set(results)) | z_names | kv_names)
    family = (lm.name, names, all_logits, hooks_key)
    key = (family, ids)

    def compute() -> CachedRun:
        start, n_start = run_cache().longest_start(family, ids) if resumable else (None, 0)
        n_start = min(n_start, len(ids) - 1)          # the last token always runs: its final stream is read
        if start is None or n_start < max(RESUME_MIN, len(ids) // 2):
            start, n_start = None, 0
        kv = kv_cache_of_run(start, lm.cfg.n_layers, n_start) if start is not None else None
        x = torch.tensor([ids[n_start:]], dtype=torch.long)
        # Only the last position's logits are kept unless all are asked for: skip unembedding the others,
        # and the last one too until a page reads it (CachedRun.last_logits).
        run = lm.run(x, names=captured, hooks=hooks, last_only=not all_logits, unembed=all_logits, kv_cache=kv)

        def whole(name: str, new: torch.Tensor) -> torch.Tensor:       # the capture over all of ids, a tensor of its own
            if start is None:
                return new.detach().clone()
            return continue_capture(name, start.logits if name == "logits" else start.cache[name], new, n_start)

        if all_logits:
            logits = whole("logits", run.logits)                          # [1, pos, vocab]
            kept = dict(last_logits=logits[0, -1].clone(), logits=logits)
        else:
            kept = dict(final=run.final.detach().clone(), unembedding=lm.decoder.W_U.detach())
        tensors = {name: whole(name, run.cache[name]) for name in captured}
        deferred = {n: lm.head_results_of(n, tensors[n.replace(".hook_result", ".hook_z")]) for n in results}
        return CachedRun(ids, cache=Captures(list(names), tensors, deferred, hold=False), **kept)

    return run_cache().get_or_run(key, compute)
