"""The fault tests' recorded outcomes: written by ``pytest --fault-results``, committed, shown in the trust report."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys


from litrepro import fault_results, trust
from litrepro.paths import ROOT


def test_the_committed_outcomes_vouch_for_every_fault_test(tmp_path):
    """Every collected fault test is in ``rendered/fault_tests.json`` and passed there (else: make test, then
    make fault-results)."""
    registry = trust.collect_fault_registry(tmp_path / "registry.json", root=ROOT)
    collected = {t for ids in registry.values() for t in ids}
    assert len(collected) > 100
    results = json.loads(trust.FAULT_RESULTS.read_text())
    assert fault_results.problems(results, collected) == []


def test_problems_names_missing_extra_and_failing_tests():
    results = {"commit": "abc", "date": "2026-12-06",
               "tests": {"t::a": "passed", "t::b": "failed", "t::gone": "passed", "t::c": "skipped"}}
    bad = fault_results.problems(results, {"t::a", "t::b", "t::c", "t::new"})
    assert bad == ["t::new: not in the run", "t::gone: recorded but no longer collected", "t::b: failed",
                   "t::c: skipped"]
    assert fault_results.problems({"tests": {"t::a": "passed"}}, {"t::a"}) == ["the run names no commit or date"]


SUITE = '''
import pytest

@pytest.mark.guards("check_a")
def test_passes():
    assert True

@pytest.mark.guards("check_b")
def test_fails():
    assert False

@pytest.mark.guards("check_c")
def test_skips():
    pytest.skip("no corpus")

@pytest.fixture()
def broken():
    raise RuntimeError("setup fails")

@pytest.mark.guards("check_d")
def test_setup_error(broken):
    pass

def test_unmarked():
    assert True
'''


def test_pytest_records_each_fault_tests_outcome(tmp_path):
    """The conftest hook records exactly the marked tests, with the outcome of their call (or setup)."""
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_suite.py").write_text(SUITE)
    out = tmp_path / "out" / "fault_tests.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path),
                           "--fault-results", str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:]
    data = json.loads(out.read_text())
    assert data["tests"] == {"test_suite.py::test_fails": "failed", "test_suite.py::test_passes": "passed",
                             "test_suite.py::test_setup_error": "error", "test_suite.py::test_skips": "skipped"}
    assert data["commit"] and data["date"]


def _row(tests: list[str]) -> trust.CheckRow:
    return trust.CheckRow("m", "c", [], "stage", "", {}, fault_tests=tests)


def test_the_trust_cell_shows_each_outcome_and_flags_any_that_did_not_pass():
    results = {"commit": "abc", "date": "d", "tests": {"t::a": "passed", "t::b": "failed"}}
    html, cls = trust.faults_cell(_row(["t::a"]), results)
    assert cls == "ok" and "1 passed" in html and ">passed<" in html
    html, cls = trust.faults_cell(_row(["t::a", "t::b", "t::c"]), results)
    assert cls == "bad" and "1 failed" in html and "1 not run" in html and ">not run<" in html


def test_make_fault_results_refuses_a_bad_run_in_one_line(tmp_path):
    dest = tmp_path / "dest.json"
    missing = subprocess.run([sys.executable, "-m", "litrepro.fault_results", str(tmp_path / "none.json"), str(dest)],
                             capture_output=True, text=True, timeout=300)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1 and "none.json" in missing.stderr
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"commit": "abc", "date": "d", "tests": {"tests/x.py::t": "failed"}}))
    bad = subprocess.run([sys.executable, "-m", "litrepro.fault_results", str(run), str(dest)],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "not copied" in bad.stderr
    assert not dest.exists()
