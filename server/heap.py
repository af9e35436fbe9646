"""The C heap of the app server (glibc malloc on Linux; elsewhere these do nothing).

Tensors and tokenizers are allocated with the C library's malloc, and what glibc keeps after a
free counts in the server's resident memory: bench/bench_class.py measures it."""

from __future__ import annotations

import ctypes
import functools
import os
import sys

M_ARENA_MAX, M_MMAP_THRESHOLD = -8, -3      # mallopt parameters (malloc.h)


@functools.cache
def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def tune_malloc() -> None:
    """Many session threads allocate and free big tensors: glibc's default gives each thread
    its own heap arena and raises its mmap threshold as it goes, so freed tensors stay in the
    process (resident memory grew by a gigabyte over one class in bench/bench_class.py).
    Two arenas and a fixed 1 MB threshold give big tensors back to the system when freed.
    DECODER_LAB_MALLOC=default keeps glibc's defaults."""
    libc = _libc()
    if libc is None or os.environ.get("DECODER_LAB_MALLOC", "") == "default":
        return
    libc.mallopt(M_ARENA_MAX, 2)
    libc.mallopt(M_MMAP_THRESHOLD, 1 << 20)


def release_free_heap() -> bool:
    """Give the heap's free pages back to the system (malloc_trim). Reading Gemma's tokenizer
    parses a 14 MB JSON file through about 290 MB of short-lived allocations, and glibc keeps
    the freed pages (about 190 MB) in the process, where tensors, above the mmap threshold,
    never reuse them. True if any memory went back."""
    libc = _libc()
    return bool(libc.malloc_trim(0)) if libc is not None else False
