"""Project-level contracts: environment files agree, CI runs the README's test command."""

from __future__ import annotations

import re
import tomllib

import yaml

from litrepro.paths import ROOT


def _pins(requirements):
    out = {}
    for req in requirements:
        name, _, version = re.split(r"(==|=)", req.strip(), maxsplit=1)
        out[name.strip().lower().replace("_", "-")] = version.strip()
    return out


def test_environment_yml_names_the_same_dependencies_as_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = _pins(project["dependencies"] + project["optional-dependencies"]["test"])
    env = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    conda = _pins(d for d in env if isinstance(d, str) and d not in ("pip",) and not d.startswith("python="))
    pip = _pins(d for d in next(d["pip"] for d in env if isinstance(d, dict)) if "==" in d)
    assert {**conda, **pip} == wanted


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make reproduce" in readme


def test_nothing_from_shared_is_tracked():
    import subprocess

    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert not [f for f in files if f.startswith("shared/") or f.endswith("hamlet.txt")]
