"""The stages (pytest.ini's markers, tests/conftest.py's stage_of) against the collected tests: each
``-m <stage>`` selection, as .ci/run makes it, partitions the collection (every test in exactly
one stage, none without), and each stage holds what its line in pytest.ini says.

Collection only: one subprocess collects the whole suite, then once per stage with ``-m``
(pytest.main again in the same process, so the test modules are imported once: ~12 s in all).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from functools import cache

import pytest

from tests._shared import locked, run_folder
from tests.conftest import PAGE_FIXTURES, REAL_WEIGHTS_FIXTURES, ROOT, SERVER_FIXTURES, STAGES

# One worker runs them all (under --dist loadgroup, lab: the unit stage): they read one
# collection, which the first to ask makes while any other would wait on its lock.
pytestmark = [pytest.mark.unit, pytest.mark.xdist_group("markers")]

# The collecting subprocess: the whole suite, then each stage's selection, as {"code", "items"}.
COLLECT = textwrap.dedent("""
    import json, sys
    import pytest

    class Report:
        def __init__(self):
            self.items = []

        def pytest_collection_finish(self, session):
            for item in session.items:
                spec = getattr(item, "callspec", None)
                self.items.append({
                    "id": item.nodeid,
                    "marks": sorted({mark.name for mark in item.iter_markers()}),
                    "fixtures": sorted(getattr(item, "fixturenames", ())),
                    "params": sorted({v for v in (spec.params.values() if spec else ()) if isinstance(v, str)}),
                })

    # A warm-up collection first, not kept: pytest keeps the ids it generated for a parametrize
    # mark on the mark (the test modules stay imported between runs), so the first run's ids of
    # escaped non-ASCII values differ from every later run's, which agree with each other.
    pytest.main(["--co", "-q", "-p", "no:cacheprovider"])
    out = {}
    for stage in ["", *sys.argv[2:]]:
        report = Report()
        code = pytest.main(["--co", "-q", "-p", "no:cacheprovider", *(["-m", stage] if stage else [])],
                           plugins=[report])
        out[stage] = {"code": int(code), "items": report.items}
    with open(sys.argv[1], "w") as f:
        json.dump(out, f)
""")


@cache
def collected(tmp: str) -> dict:
    """{"": the whole collection, stage: what ``-m stage`` selects}, each {"code", "items"}."""
    path = f"{tmp}/collected.json"
    done = subprocess.run([sys.executable, "-c", COLLECT, path, *STAGES], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with open(path) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The collections, made once per test run: under pytest-xdist the workers share them through
    the run's temporary folder (the first to ask collects while another waits on the lock)."""
    shared = run_folder(tmp_path_factory)
    folder = shared / "markers"
    with locked(shared / "markers.lock"):
        if not (folder / "collected.json").exists():
            folder.mkdir(exist_ok=True)
            collected(str(folder))
        with open(folder / "collected.json") as f:
            return json.load(f)


@pytest.fixture(scope="module")
def tests(runs):
    """Every collected test: {node id: item}."""
    assert runs[""]["code"] == 0, "the collection itself failed"
    return {item["id"]: item for item in runs[""]["items"]}


def stage_marks(item) -> set[str]:
    return set(item["marks"]) & set(STAGES)


def test_every_test_has_exactly_one_stage(tests):
    wrong = {node: sorted(stage_marks(item)) for node, item in tests.items() if len(stage_marks(item)) != 1}
    assert not wrong, wrong


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_selects_tests(runs, stage):
    assert runs[stage]["code"] == 0 and runs[stage]["items"], f"-m {stage} selects no test (pytest exit {runs[stage]['code']})"


def test_the_stages_partition_the_collection(runs, tests):
    seen: dict[str, list[str]] = {}
    for stage in STAGES:
        for item in runs[stage]["items"]:
            seen.setdefault(item["id"], []).append(stage)
    twice = {node: stages for node, stages in seen.items() if len(stages) > 1}
    assert not twice, twice
    assert set(seen) == set(tests), {"in no stage": sorted(set(tests) - set(seen))[:50],
                                     "not in the collection": sorted(set(seen) - set(tests))[:50]}
    for stage in STAGES:        # -m selected by the mark the test carries
        assert all(stage_marks(item) == {stage} for item in runs[stage]["items"]), stage


def test_unit_tests_use_no_weights_no_app_no_server(runs):
    heavy = REAL_WEIGHTS_FIXTURES | PAGE_FIXTURES | SERVER_FIXTURES
    wrong = {item["id"]: sorted((set(item["fixtures"]) | set(item["params"])) & heavy)
             for item in runs["unit"]["items"]
             if (set(item["fixtures"]) | set(item["params"])) & heavy}   # params: request.getfixturevalue("lm")
    assert not wrong, wrong
    assert not [item["id"] for item in runs["unit"]["items"] if item["id"].startswith("tests/browser/")]


def test_every_apptest_is_a_page_test(tests):
    wrong = {node: sorted(stage_marks(item)) for node, item in tests.items()
             if set(item["fixtures"]) & PAGE_FIXTURES and stage_marks(item) != {"page"}}
    assert not wrong, wrong


def test_parity_tests_run_no_app(runs):
    wrong = [item["id"] for item in runs["parity"]["items"] if set(item["fixtures"]) & PAGE_FIXTURES]
    assert not wrong, wrong


def test_browser_tests_are_the_ones_in_tests_browser(tests):
    inside = {node for node in tests if node.startswith("tests/browser/")}
    marked = {node for node, item in tests.items() if stage_marks(item) == {"browser"}}
    assert inside == marked, {"unmarked": sorted(inside - marked), "elsewhere": sorted(marked - inside)}


def test_slow_is_retired(tests):
    """``slow`` meant "loads the real SmolLM2" and came to cover every AppTest and browser test:
    gone, and unregistered (pytest.ini's --strict-markers refuses it)."""
    files = {node.split("::")[0] for node, item in tests.items() if "slow" in item["marks"]}
    assert files == set(), f"pytest.mark.slow means nothing now; use a stage mark: {sorted(files)}"


def test_lab_runs_the_stages_in_order():
    """./lab test-stages (and .ci/run through it) runs exactly these stages, in this order."""
    line = next(line for line in (ROOT / "lab").read_text().splitlines() if line.startswith("STAGES="))
    assert line.split("=", 1)[1].strip('"').split() == list(STAGES)


def test_loadgroup_hands_out_the_groups_the_workers_wrote(pytestconfig, monkeypatch, tmp_path):
    """lab's --dist loadgroup (unit, parity): a worker writes each grouped test's group as it
    collects (xdist 3.8's own "@group" node ids do nothing on pytest 9.2), and the controller's
    scheduler makes each group one work unit; a test without a group is a unit of its own."""
    import types

    from tests import conftest
    monkeypatch.setenv("DECODER_LAB_XDIST_GROUPS", str(tmp_path))
    (tmp_path / "gw0.json").write_text(json.dumps({"tests/test_a.py::test_x": "gemma-reference",
                                                   "tests/test_b.py::test_y[1]": "gemma-reference"}))
    monkeypatch.setattr(pytestconfig.option, "dist", "loadgroup")
    monkeypatch.setattr(pytestconfig.option, "tx", ["2*popen"], raising=False)
    scheduler = conftest.pytest_xdist_make_scheduler(pytestconfig, None)
    assert scheduler._split_scope("tests/test_a.py::test_x") == scheduler._split_scope("tests/test_b.py::test_y[1]") \
        == "gemma-reference"
    assert scheduler._split_scope("tests/test_a.py::test_z") == "tests/test_a.py::test_z"
    monkeypatch.setattr(pytestconfig.option, "dist", "load")
    assert conftest.pytest_xdist_make_scheduler(pytestconfig, None) is None, "xdist's own for another --dist"
    # What a worker writes: the groups of XDIST_GROUPS and of the marks, nothing for the others.
    item = lambda fixtures, marks=(): types.SimpleNamespace(    # noqa: E731
        fixturenames=fixtures, iter_markers=lambda name: [m for m in marks if m.name == name])
    assert conftest.xdist_group_of(item(["gemma", "gemma_reference"])) == "gemma-reference"
    assert conftest.xdist_group_of(item(["empty_cache"])) == "smollm2-conversion"
    assert conftest.xdist_group_of(item(["lm"])) is None
    assert conftest.xdist_group_of(item(["gemma_reference"], [pytest.mark.xdist_group("markers").mark])) == "markers"
