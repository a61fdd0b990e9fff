"""The figures recorded in the seed files, for side-by-side comparison.

The seed files live outside this repository (``../shared/seeds`` or
``$LITREPRO_SEEDS_DIR``) and are never copied into it.  When they are absent
the comparison tables say so instead of showing numbers.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from litrepro.paths import seeds_dir

#: Our method names and the ``method`` field of their seed files.
SEED_METHOD = {"pinterest_rlbp": "pinterest-rlbp", "waypoint_opd": "waypoint-opd"}


@lru_cache(maxsize=None)
def load(method: str) -> dict[str, Any] | None:
    """The parsed seed file of ``method``, or ``None`` when no seed folder is present."""
    folder = seeds_dir()
    if not folder.is_dir():
        return None
    for path in sorted(folder.glob("*.txt")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if data.get("method") == SEED_METHOD[method]:
            data["_file"] = path.name
            return data
    return None


def per_seed_metrics(method: str) -> dict[int, dict[str, float]]:
    """``{seed: {metric: value}}`` as recorded (both seed-file layouts)."""
    data = load(method)
    if data is None:
        return {}
    names = set(data["metrics"])
    out = {}
    for row in data["per_seed"]:
        source = row.get("metrics", row)
        out[int(row["seed"])] = {k: v for k, v in source.items() if k in names}
    return out


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
