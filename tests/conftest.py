"""Shared fixtures: the corpus from $LITREPRO_CORPUS, tiny configs, a CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from litrepro.paths import ROOT

CORPUS = os.environ.get("LITREPRO_CORPUS", "")


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
