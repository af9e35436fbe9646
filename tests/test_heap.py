"""server/heap.py: freed memory goes back to the system (the server itself is started by
tests/test_server_load.py and the browser tests)."""

from __future__ import annotations

import pytest

from server import heap


def _rss_anon_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon in /proc/self/status")


@pytest.mark.parity
@pytest.mark.skipif(heap._libc() is None, reason="glibc's malloc_trim is Linux only")
def test_the_tokenizer_parse_leaves_freed_pages_that_release_free_heap_gives_back(gemma):
    """Reading Gemma's tokenizer goes through some 290 MB of short-lived allocations; after it,
    glibc keeps most of the freed pages until malloc_trim (server.heap.release_free_heap, which
    course.model calls after each model load)."""
    from tokenizers import Tokenizer

    from lesson_model.loading import bundled_cache_folder

    path = bundled_cache_folder("gemma-3-270m") / "tokenizer.json"
    heap.release_free_heap()
    for _ in range(2):
        tok = Tokenizer.from_file(str(path))
        assert tok.get_vocab_size() > 200_000 and gemma.cfg.vocab_size > 200_000
        del tok
    held = _rss_anon_mb()
    assert heap.release_free_heap()
    assert held - _rss_anon_mb() > 50          # measured here: about 190 MB back
