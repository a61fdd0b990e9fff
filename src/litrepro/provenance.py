"""Source hashes and package versions that make a rendered result traceable.

A method's *sources* are the files whose change can change its notebook's
output: its own subpackage, the shared modules its notebook imports, its
notebook and its parameter file.  The runner records their sha256 in every
``seed-<N>.json``; a rerun skips a seed whose recorded hashes still match,
and ``tests/test_rendered.py`` fails when ``rendered/`` is stale.
"""

from __future__ import annotations

import hashlib
import platform
from importlib import metadata
from pathlib import Path

from litrepro.paths import NOTEBOOKS, PACKAGE, PARAMETERS, ROOT

#: Shared modules every method notebook imports (the runner and CLI are not sources).
SHARED_MODULES = ("__init__.py", "atomic.py", "errors.py", "guard.py", "params.py", "paths.py",
                  "plotting.py", "recorded.py", "report.py", "seeding.py", "stats.py")
#: Modules that only word what a notebook prints: they change a rendered notebook, never a computed number.
WORDING_MODULES = ("prose.py", "findings.py")
#: Committed study outputs a method notebook reads and prints findings from (``litrepro.findings``).
STUDY_OUTPUTS = {"pinterest_rlbp": ("backup_study.json",), "waypoint_opd": ("effect_study.json",)}
SUBPACKAGE = {"pinterest_rlbp": "rlbp", "waypoint_opd": "waypoint"}
PACKAGES = ("torch", "numpy", "pandas", "matplotlib", "papermill", "nbclient", "ipykernel", "pyyaml")


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def source_files(method: str) -> list[Path]:
    """The code and settings whose content determines ``method``'s numbers (what a study depends on)."""
    files = [PACKAGE / name for name in SHARED_MODULES]
    files += sorted((PACKAGE / SUBPACKAGE[method]).glob("*.py"))
    files += [NOTEBOOKS / f"{method}.ipynb", PARAMETERS / f"{method}.yaml", PACKAGE / "recorded_figures" / f"{method}.json"]
    return files


def rendered_files(method: str) -> list[Path]:
    """Everything a rendered notebook of ``method`` depends on: :func:`source_files`, the wording modules and the
    committed study JSON it prints findings from (a study output is never a source of that study itself)."""
    files = source_files(method) + [PACKAGE / name for name in WORDING_MODULES]
    files += [p for p in (ROOT / "rendered" / method / name for name in STUDY_OUTPUTS.get(method, ())) if p.exists()]
    return files


def source_hashes(method: str) -> dict[str, str]:
    """``{path relative to the repo: sha256}`` for :func:`source_files` (a study's freshness)."""
    return {str(p.relative_to(ROOT)): sha256_file(p) for p in source_files(method)}


def rendered_hashes(method: str) -> dict[str, str]:
    """``{path relative to the repo: sha256}`` for :func:`rendered_files` (a rendered seed's freshness)."""
    return {str(p.relative_to(ROOT)): sha256_file(p) for p in rendered_files(method)}


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:  # pragma: no cover
            versions[name] = "not installed"
    return versions
