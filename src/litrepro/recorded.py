"""The figures recorded in the seed files, for side-by-side comparison.

The seed files themselves live outside this repository (``../shared/seeds`` or
``$LITREPRO_SEEDS_DIR``) and are never copied into it.  What the package ships
instead is their *numbers*: ``recorded_figures/<method>.json`` holds every
metric, check, OPD history row and RL-audit figure of a seed file, with the
file's name and sha256 as provenance, and none of its prose.  So the
comparison cells print the same thing on any clone, with or without
``../shared``; ``tests/test_recorded.py`` re-extracts the numbers from the seed
file when it is present and fails if the shipped copy differs.

Regenerate after a seed file changes with ``python -m litrepro.recorded``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from litrepro import atomic
from litrepro.paths import PACKAGE, seeds_dir

#: Our method names and the ``method`` field of their seed files.
SEED_METHOD = {"pinterest_rlbp": "pinterest-rlbp", "waypoint_opd": "waypoint-opd"}
FIGURES = PACKAGE / "recorded_figures"

#: Top-level keys of a seed file whose values are figures, checks or seed lists (no prose).
_TOP = ("method", "seeds", "metrics", "execution_checks")
#: Per-seed keys kept; ``teacher_rl_audit`` keeps only its numeric fields and history.
_PER_SEED = ("seed", "metrics", "checks", "history", "frozen_teacher_parameter_deltas_l2",
             "frozen_rl_snapshot_parameter_deltas_l2", "teacher_snapshot_lineage")
_AUDIT = ("updates", "rollouts_per_update", "rollout_horizon", "checkpoint_steps", "total_sampled_actions",
          "learning_rate", "history")


def _numbers_only(row: dict[str, Any], metric_names: set[str]) -> dict[str, Any]:
    out = {k: row[k] for k in _PER_SEED if k in row}
    flat = {k: v for k, v in row.items() if k in metric_names}  # waypoint's per-seed metrics are flat
    if flat:
        out["metrics"] = flat
    if "teacher_rl_audit" in row:
        out["teacher_rl_audit"] = {k: row["teacher_rl_audit"][k] for k in _AUDIT if k in row["teacher_rl_audit"]}
    return out


def extract(path: Path) -> dict[str, Any]:
    """The figures of one seed file, with ``_file`` and ``_sha256`` naming where they came from."""
    raw = path.read_bytes()
    data = json.loads(raw)
    out = {k: data[k] for k in _TOP if k in data}
    out["per_seed"] = [_numbers_only(row, set(data["metrics"])) for row in data["per_seed"]]
    out["_file"] = path.name
    out["_sha256"] = hashlib.sha256(raw).hexdigest()
    return out


def find_seed_file(method: str, folder: Path | None = None) -> Path | None:
    """The seed file of ``method`` in ``folder`` (default: :func:`litrepro.paths.seeds_dir`), if any."""
    folder = folder or seeds_dir()
    if not folder.is_dir():
        return None
    for path in sorted(folder.glob("*.txt")):
        try:
            if json.loads(path.read_text(encoding="utf-8")).get("method") == SEED_METHOD[method]:
                return path
        except (OSError, ValueError):
            continue
    return None


@lru_cache(maxsize=None)
def load(method: str) -> dict[str, Any] | None:
    """The shipped figures of ``method``'s seed file, or ``None`` when none is shipped."""
    path = FIGURES / f"{method}.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def per_seed_metrics(method: str) -> dict[int, dict[str, float]]:
    """``{seed: {metric: value}}`` as recorded."""
    data = load(method)
    return {} if data is None else {int(row["seed"]): dict(row.get("metrics", {})) for row in data["per_seed"]}


def per_seed_rows(method: str) -> dict[int, dict[str, Any]]:
    """``{seed: row}``: every recorded figure of one seed (metrics, history, RL audit)."""
    data = load(method)
    return {} if data is None else {int(row["seed"]): row for row in data["per_seed"]}


def aggregate_metrics(method: str) -> dict[str, dict[str, float]]:
    """``{metric: {mean, std, n}}`` as recorded."""
    data = load(method)
    return {} if data is None else dict(data["metrics"])


def check_names(method: str) -> list[str]:
    """Every check name of the seed file (``checks`` per seed or ``execution_checks``)."""
    data = load(method)
    if data is None:
        return []
    if "execution_checks" in data:
        return sorted(data["execution_checks"])
    return sorted({k for row in data["per_seed"] for k in row.get("checks", {})})


def recorded_checks(method: str, seed: int) -> dict[str, Any]:
    data = load(method)
    if data is None:
        return {}
    if "execution_checks" in data:
        return dict(data["execution_checks"])
    for row in data["per_seed"]:
        if int(row["seed"]) == seed:
            return dict(row.get("checks", {}))
    return {}


def main(argv: list[str]) -> int:
    """Re-extract the shipped figures from the seed files (``python -m litrepro.recorded [FOLDER]``)."""
    folder = Path(argv[0]) if argv else seeds_dir()
    for method in SEED_METHOD:
        path = find_seed_file(method, folder)
        if path is None:
            print(f"litrepro: error: no seed file for {method} in {folder}", file=sys.stderr)
            return 2
        atomic.write_json(FIGURES / f"{method}.json", extract(path))
        print(f"{method}: {path.name} -> {FIGURES / (method + '.json')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
