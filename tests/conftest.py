"""Shared fixtures: the corpus from $LITREPRO_CORPUS, tiny configs, a CLI runner; the ``guards`` marker.

``@pytest.mark.guards("check_name", ...)`` on a fault test names the check(s) (or, for a
metric-kind fault, the metric) that its fault turns false.  ``pytest --collect-only -q
--guards-registry PATH`` writes ``{check: [test node ids]}`` to PATH at collection time, without
running a test; the book's trust report (``litrepro.trust``) reads it.  ``--fault-results PATH`` (given by
``make test``) writes each fault test's outcome in that run, ``{"tests": {node id: passed|failed|skipped|error}}``
with the commit it ran at, to PATH when the session ends; the trust report shows it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from litrepro.paths import ROOT

CORPUS = os.environ.get("LITREPRO_CORPUS", "")

#: matplotlib's font cache in a folder of this session's own (unless the caller chose one), inherited by every
#: kernel, worker and JupyterLab the tests start: a cache in the home folder that another process (or a run killed
#: while writing it) leaves half-written would otherwise break figures in the tests. Removed when the session ends.
_MPL_OWN = None
if not os.environ.get("MPLCONFIGDIR"):
    import tempfile

    _MPL_OWN = tempfile.mkdtemp(prefix="litrepro-tests-mplconfig-")
    os.environ["MPLCONFIGDIR"] = _MPL_OWN


@pytest.fixture(scope="session")
def corpus_path() -> Path:
    if not CORPUS or not Path(CORPUS).is_file():
        pytest.skip("LITREPRO_CORPUS does not point at the Hamlet corpus (make test sets it from ../shared)")
    return Path(CORPUS)


#: Small but complete configurations for end-to-end runs (seconds, not tens of seconds).
TINY = {
    "pinterest_rlbp": ["n_campaigns=16", "logged_days=1", "eval_days=2", "critic_steps=20", "actor_steps=10",
                       "batch_size=32"],
    "waypoint_opd": ["comparison_steps=2", "comparison_eval_prompts=16"],
}


def run_cli(*args: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """``python -m litrepro ARGS`` from a neutral working directory."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "litrepro", *args], capture_output=True, text=True,
                          cwd=ROOT.parent, env=full_env, timeout=timeout)


def pytest_addoption(parser):
    parser.addoption("--guards-registry", metavar="PATH", default=None,
                     help="write {check: [node ids of the fault tests marked guards(check)]} as JSON to PATH "
                          "after collection (with --collect-only nothing runs)")
    parser.addoption("--fault-results", metavar="PATH", default=None,
                     help="write the outcome of every test marked guards in this run as JSON to PATH at the end")


def pytest_configure(config):
    config.addinivalue_line("markers", "guards(*checks): the named checks (or metrics) this fault test turns false")


def guards_registry(items) -> dict[str, list[str]]:
    """``{check: sorted node ids}`` of the items marked ``guards``; a mark without a name is an error."""
    registry: dict[str, set[str]] = {}
    for item in items:
        for mark in item.iter_markers("guards"):
            if not mark.args or not all(isinstance(a, str) and a for a in mark.args):
                raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.guards needs one or more check names")
            for name in mark.args:
                registry.setdefault(name, set()).add(item.nodeid)
    return {name: sorted(ids) for name, ids in sorted(registry.items())}


def pytest_collection_finish(session):
    path = session.config.getoption("--guards-registry")
    if path:
        out = Path(path)
        tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(guards_registry(session.items), indent=1, sort_keys=True) + "\n")
        tmp.replace(out)                                      # atomic: a reader never sees half a registry


_FAULT_OUTCOMES: dict[str, str] = {}


def pytest_runtest_logreport(report):
    """Record the outcome of a fault test: its call's, or its setup's when setup did not pass."""
    if not report.keywords.get("guards"):
        return
    if report.when == "call" or (report.when == "setup" and not report.passed):
        outcome = report.outcome if report.when == "call" else ("skipped" if report.skipped else "error")
        _FAULT_OUTCOMES[report.nodeid] = outcome
    elif report.when == "teardown" and report.failed:
        _FAULT_OUTCOMES[report.nodeid] = "error"


def _commit() -> str:
    try:
        proc = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, timeout=30)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (proc.stdout.strip() or "unknown") + ("+changes" if dirty else "")


def pytest_sessionfinish(session, exitstatus):
    path = session.config.getoption("--fault-results")
    if not path or session.config.getoption("collectonly"):
        return
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    data = {"source": "make test (pytest --fault-results)", "commit": _commit(),
            "date": __import__("datetime").date.today().isoformat(), "tests": dict(sorted(_FAULT_OUTCOMES.items()))}
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(out)                                          # atomic: the last complete run, never half of one


def _corpus_available() -> bool:
    from litrepro.errors import LitreproError
    from litrepro.waypoint.corpus import resolve_path

    try:
        return resolve_path("").is_file()
    except LitreproError:
        return False


def pytest_collection_modifyitems(config, items):
    """Without a corpus, the waypoint notebooks' nbval cells are skipped with one line saying so."""
    if _corpus_available():
        return
    reason = ("Hamlet corpus not found: set LITREPRO_CORPUS to a verified copy or run "
              "`python -m litrepro fetch-corpus` (make test sets it from ../shared)")
    marker = pytest.mark.skip(reason=reason)
    for item in items:
        if "waypoint_opd" in str(item.path) and item.path.suffix == ".ipynb":
            item.add_marker(marker)


def pytest_unconfigure(config):
    """Remove the session's own matplotlib folder (made by ``mkdtemp`` above, so provably this session's)."""
    if _MPL_OWN is not None and os.environ.get("MPLCONFIGDIR") == _MPL_OWN:
        import shutil

        shutil.rmtree(_MPL_OWN, ignore_errors=True)
        del os.environ["MPLCONFIGDIR"]
