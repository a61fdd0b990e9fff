"""Keys that ``litrepro.summary`` merges into ``rendered/waypoint_opd/summary.json``."""

from __future__ import annotations

from typing import Any

from litrepro import recorded
from litrepro.waypoint.calibration import calibration_rows, verdicts


def extras(results: list[dict[str, Any]]) -> dict[str, Any]:
    """``calibration``: every recorded figure beside this run's, with z at both scales and a Welch test (see
    ``calibration``); ``calibration_verdicts``: what "calibrated" means, which figures are off at which scale."""
    rows = calibration_rows(results, recorded.load("waypoint_opd"))
    return {"calibration": rows, "calibration_verdicts": verdicts(rows) if rows else None}
