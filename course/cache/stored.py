"""Analyses kept on disk between processes, when $DECODER_LAB_ANALYSIS_CACHE names a folder
(off by default: each process computes them, as the app always has).

The test stages set it (lab: one folder per run of the stages), so a computation that takes a
minute a model, such as the induction lesson's experiment on random tokens, runs once per test
run instead of once in every process that shows the lesson: each page-test worker and the
browser stage's app server. A result is keyed by its name and arguments and by the code that
computes it (every source file of lesson_model/ and course/cache/, and torch's version), so a
changed analysis is never answered from an old file. Processes that ask for the same result at
once compute it once: the first holds a lock on its file while it computes, the others wait and
read it. No Streamlit here: st.cache_data keeps a process's copy in memory around this.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Callable
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

ENV = "DECODER_LAB_ANALYSIS_CACHE"
ROOT = Path(__file__).resolve().parents[2]
CODE = ("lesson_model", "course/cache")      # the code whose results are kept

T = TypeVar("T")


def folder() -> Path | None:
    """The folder results are kept in, or None: not kept."""
    value = os.environ.get(ENV, "").strip()
    return Path(value) if value else None


@lru_cache(maxsize=1)
def code_version() -> str:
    """A digest of the code that computes what is kept: every .py file under CODE (path and
    bytes) and torch's version."""
    import torch
    digest = hashlib.sha256(torch.__version__.encode())
    for top in CODE:
        for path in sorted((ROOT / top).rglob("*.py")):
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def model_key(lm) -> tuple:
    """What of ``lm`` decides an analysis's numbers besides the code: its name, the weights it
    was loaded from (a bundled model's cache id: the file and the conversion format), where it
    runs and in which precision."""
    bundled = getattr(lm, "bundled", None)
    return (lm.name, bundled.cache_id() if bundled is not None else None, str(lm.device),
            str(lm.decoder.W_E.dtype))


def file_for(key: tuple) -> Path | None:
    """Where the result for ``key`` is kept (None when nothing is kept)."""
    where = folder()
    if where is None:
        return None
    name = hashlib.sha256(repr((key, code_version())).encode()).hexdigest()[:32]
    return where / f"{name}.pt"


@contextmanager
def _locked(path: Path):
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def kept(key: tuple, compute: Callable[[], T]) -> T:
    """compute(), or the result an earlier call with the same ``key`` (and the same code) kept
    on disk. ``key`` is plain values (names, numbers) that, with the code, decide the result."""
    path = file_for(key)
    if path is None:
        return compute()
    import torch
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path.with_suffix(".lock")):
        if path.exists():
            return torch.load(path, weights_only=False)
        value = compute()
        part = path.with_suffix(f".part{os.getpid()}")
        torch.save(value, part)
        os.replace(part, path)
        return value
