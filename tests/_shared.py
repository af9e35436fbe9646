"""What the test workers of one run share (pytest-xdist: each worker is its own process): a
folder, and a lock on a file in it, so the first worker to need something expensive builds it
while the others wait and then reuse it."""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path


def run_folder(tmp_path_factory) -> Path:
    """The run's temporary folder, the same for every worker (pytest-N; a worker's own is
    pytest-N/popen-gwK)."""
    folder = tmp_path_factory.getbasetemp()
    return folder.parent if os.environ.get("PYTEST_XDIST_WORKER") else folder


@contextmanager
def locked(path: Path):
    """Hold an exclusive lock on ``path`` (created if missing) for the ``with`` block."""
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
