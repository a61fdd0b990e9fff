"""Where the project's files live, found from the package, never from the CWD.

nbval executes a notebook in the notebook's own folder and papermill may be
started from anywhere, so every path is derived from ``ROOT``.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(os.environ.get("LITREPRO_ROOT", Path(__file__).resolve().parents[2]))
NOTEBOOKS = ROOT / "notebooks"
PARAMETERS = ROOT / "parameters"
RENDERED = ROOT / "rendered"
PACKAGE = Path(__file__).resolve().parent


def seeds_dir() -> Path:
    """Folder of the recorded seed files: ``$LITREPRO_SEEDS_DIR`` or ``../shared/seeds``."""
    return Path(os.environ.get("LITREPRO_SEEDS_DIR", ROOT.parent / "shared" / "seeds"))


def cache_dir() -> Path:
    """User cache folder for downloaded data (``$XDG_CACHE_HOME/litrepro``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "litrepro"


def relative(path: Path) -> str:
    """``path`` relative to ``ROOT`` when inside it, so outputs carry no machine paths."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)
