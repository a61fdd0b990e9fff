"""Helpers for the tests of the study scripts under ``studies/`` (loaded by path: ``studies/`` is not a package)."""

from __future__ import annotations

import importlib.util

import pytest

from litrepro.paths import ROOT


def load(name: str):
    """The module ``studies/<name>.py``."""
    spec = importlib.util.spec_from_file_location(f"study_script_{name}", ROOT / "studies" / f"{name}.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def assert_refuses_in_one_line(name: str, argv: list[str], capsys) -> None:
    """``studies/<name>.py`` given ``argv`` exits with status 2 and prints one line."""
    with pytest.raises(SystemExit) as err:
        load(name).main(argv)
    assert err.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
