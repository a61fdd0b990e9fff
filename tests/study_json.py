"""Helpers of the recomputation tests: a committed study file (or a skip), and whether a problem names a field."""

from __future__ import annotations

import json

import pytest

from litrepro.paths import ROOT


def load(rel: str) -> dict:
    """The committed study JSON at ``rel`` (repository-relative); the test skips when it is not present."""
    path = ROOT / rel
    if not path.is_file():
        pytest.skip(f"{rel} is not present")
    return json.loads(path.read_text())


def names(problems: list[str], field: str) -> bool:
    """Whether some problem line names ``field``."""
    return any(field in p for p in problems)
