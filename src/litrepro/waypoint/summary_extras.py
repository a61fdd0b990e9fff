"""Keys that ``litrepro.summary`` merges into ``rendered/waypoint_opd/summary.json``."""

from __future__ import annotations

from typing import Any

from litrepro import recorded
from litrepro.waypoint.calibration import calibration_rows


def extras(results: list[dict[str, Any]]) -> dict[str, Any]:
    """``calibration``: every recorded figure beside this run's, with z (see ``calibration``)."""
    return {"calibration": calibration_rows(results, recorded.load("waypoint_opd"))}
