"""course/cache/stored.py: analyses kept on disk between processes, keyed by name, arguments and
the code that computes them; off without $DECODER_LAB_ANALYSIS_CACHE."""

from __future__ import annotations

import subprocess
import sys

import torch

from course.cache import stored


def counting():
    calls = []

    def compute():
        calls.append(1)
        return {"scores": torch.arange(6.0).reshape(2, 3), "n": len(calls)}

    return calls, compute


def test_off_without_a_folder_computes_every_time(monkeypatch):
    monkeypatch.delenv(stored.ENV, raising=False)
    calls, compute = counting()
    assert stored.kept(("x", 1), compute)["n"] == 1
    assert stored.kept(("x", 1), compute)["n"] == 2
    assert stored.file_for(("x", 1)) is None


def test_a_kept_result_is_read_back_not_recomputed(monkeypatch, tmp_path):
    monkeypatch.setenv(stored.ENV, str(tmp_path))
    calls, compute = counting()
    first = stored.kept(("x", 1), compute)
    again = stored.kept(("x", 1), compute)
    assert len(calls) == 1 and again["n"] == 1
    torch.testing.assert_close(again["scores"], first["scores"])
    stored.kept(("x", 2), compute)                                   # other arguments: computed
    assert len(calls) == 2
    assert sorted(p.suffix for p in tmp_path.iterdir() if p.suffix == ".pt") == [".pt", ".pt"]


def test_changed_code_is_never_answered_from_an_old_file(monkeypatch, tmp_path):
    monkeypatch.setenv(stored.ENV, str(tmp_path))
    calls, compute = counting()
    stored.kept(("x", 1), compute)
    before = stored.file_for(("x", 1))
    monkeypatch.setattr(stored, "code_version", lambda: "another version of lesson_model")
    assert stored.file_for(("x", 1)) != before
    assert stored.kept(("x", 1), compute)["n"] == 2


def test_the_code_version_covers_the_analyses_and_the_cached_computations():
    stored.code_version.cache_clear()
    version = stored.code_version()
    assert len(version) == 64 and version == stored.code_version()
    listed = {str(p.relative_to(stored.ROOT)) for top in stored.CODE for p in (stored.ROOT / top).rglob("*.py")}
    assert "lesson_model/analysis/induction.py" in listed and "course/cache/induction.py" in listed


def test_two_processes_asking_at_once_compute_once(tmp_path):
    """The second waits on the first's lock, then reads its file."""
    marks = tmp_path / "marks"
    marks.mkdir()
    child = f"""
import os, time
os.environ[{stored.ENV!r}] = {str(tmp_path / "kept")!r}
from course.cache import stored
def compute():
    open(os.path.join({str(marks)!r}, str(os.getpid())), "w").close()
    time.sleep(1.0)
    return 42
print(stored.kept(("slow",), compute))
"""
    procs = [subprocess.Popen([sys.executable, "-c", child], cwd=stored.ROOT, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert outs == ["42", "42"]
    assert len(list(marks.iterdir())) == 1
