"""The model inside the app: loaded once per process and shared by every session, with a
memory-bounded cache of runs shared too (a run depends only on its inputs).

Cached results are shared between sessions: treat every tensor you get as read-only.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

import streamlit as st
import torch

import lesson_model
from ui.i18n import t

RUN_CACHE_MB = int(os.environ.get("DECODER_LAB_RUN_CACHE_MB", "1024"))
THREADS_ENV = "DECODER_LAB_THREADS"   # torch intra-op threads of the app process (bench/bench_app.py)


MODELS = tuple(lesson_model.BUNDLED)           # the keys ?model= takes: "smollm2-135m", "gemma-3-270m"
DEFAULT_MODEL = lesson_model.DEFAULT_MODEL
_CHOSEN = "_model"                              # this session's model key (ui.shell sets it)


@st.cache_resource(show_spinner=False)
def _shared_model(key: str):
    """One copy of each bundled model per process, loaded the first time any session asks for it."""
    if os.environ.get(THREADS_ENV):
        torch.set_num_threads(int(os.environ[THREADS_ENV]))
    return lesson_model.load_model(key)


# The short tag of each model in lesson text: a catalog sub-tree "<page>.<tag>.<key>" and a prose
# section "## <id>-<tag>" say what differs on that model and override the plain key or section.
MODEL_TAGS = {"smollm2-135m": "smollm2", "gemma-3-270m": "gemma"}


def model_tag(key: str | None = None) -> str:
    return MODEL_TAGS[key or model_key()]


def model_name(key: str) -> str:
    """The published name of a bundled model (the picker's label)."""
    return lesson_model.BUNDLED[key].name


def model_key() -> str:
    """The key of the model this session is learning on."""
    key = st.session_state.get(_CHOSEN)
    return key if key in MODELS else DEFAULT_MODEL


def set_model_key(key: str) -> None:
    st.session_state[_CHOSEN] = key if key in MODELS else DEFAULT_MODEL


def get_model(key: str | None = None):
    """The shared model this session chose (or ``key``). Shows a spinner while the first load
    converts the weights, and a clear message (then stops the page) when its package is missing."""
    key = key or model_key()
    try:
        with st.spinner(t("model.loading", name=lesson_model.BUNDLED[key].name), show_time=True):
            return _shared_model(key)
    except lesson_model.ModelNotInstalledError as exc:
        st.error(t("model.missing", name=exc.model.name), icon=":material/error:")
        st.code(str(exc), language="text")
        st.stop()


@dataclass(frozen=True)
class CachedRun:
    """What a page asked of one forward pass. Tensors keep lesson_model's batch dim (1)."""

    ids: tuple[int, ...]
    last_logits: torch.Tensor                  # [vocab], the prediction for the next token
    logits: torch.Tensor | None                # [1, pos, vocab] when asked with all_logits=True
    cache: dict[str, torch.Tensor] = field(default_factory=dict)   # the hook tensors asked for

    @property
    def nbytes(self) -> int:
        tensors = [self.last_logits, *self.cache.values()] + ([self.logits] if self.logits is not None else [])
        return sum(x.element_size() * x.nelement() for x in tensors)


class RunCache:
    """LRU of CachedRun bounded by bytes. One forward pass at a time (the CPU is the
    bottleneck; two at once only fight over the cores), lookups never wait for it."""

    def __init__(self, budget_bytes: int):
        self.budget = budget_bytes
        self._items: OrderedDict[Hashable, CachedRun] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._compute = threading.Lock()

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
        with self._compute:
            hit = self._get(key)      # another session may have just computed it
            if hit is None:
                hit = compute()
                self._put(key, hit)
        return hit

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)


@st.cache_resource(show_spinner=False)
def run_cache() -> RunCache:
    return RunCache(RUN_CACHE_MB * 2**20)


def cached_run(lm, ids: Iterable[int], names: Iterable[str] = (), *, all_logits: bool = False,
               hooks: dict | None = None, hooks_key: Hashable = None) -> CachedRun:
    """Run the model on ``ids`` (cached and shared), keeping only what the page needs:
    the hook tensors in ``names``, the last position's logits, and all logits if asked.

    ``hooks`` (interventions, e.g. an ablation) must come with ``hooks_key``, a hashable
    description of them such as ``("zero_heads", ((5, 1), (6, 3)))``.
    """
    ids = tuple(int(i) for i in ids)
    names = tuple(sorted(set(names)))
    if hooks and hooks_key is None:
        raise ValueError("cached_run: pass hooks_key, a hashable description of the hooks")
    key = (lm.name, ids, names, all_logits, hooks_key)

    def compute() -> CachedRun:
        x = torch.tensor([ids], dtype=torch.long)
        # Only the last position's logits are kept unless all are asked for: skip unembedding the others
        # (unless a page reads the final norm, whose hooks would then hold the last position only).
        last_only = not all_logits and not any(n.startswith("ln_final.") for n in names)
        run = lm.run(x, names=list(names), hooks=hooks, last_only=last_only)
        return CachedRun(
            ids=ids,
            last_logits=run.logits[0, -1].detach().clone(),
            logits=run.logits.detach().clone() if all_logits else None,
            cache={name: run.cache[name].detach().clone() for name in names},
        )

    return run_cache().get_or_run(key, compute)
