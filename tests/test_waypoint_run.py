"""``experiment.run(cfg)`` is the notebook: the same results, computed by the same section functions."""

from __future__ import annotations

import json

from conftest import TINY, run_cli
from litrepro import atomic
from litrepro.waypoint import experiment as wp
from litrepro.waypoint.config import WaypointConfig

KEYS = ("metrics", "checks", "extra_checks", "beyond_seed_metrics", "history", "teacher_rl_audit",
        "teacher_snapshot_lineage", "comparison_arms", "frozen_teacher_parameter_deltas_l2",
        "frozen_rl_snapshot_parameter_deltas_l2", "replayed_waypoint_steps")


def test_run_equals_a_notebook_execution(tmp_path, corpus_path):
    """Render the notebook for seed 42 (small comparison) and compare its seed JSON with run(cfg), exactly."""
    sets = [arg for s in TINY["waypoint_opd"] for arg in ("--set", s)]
    proc = run_cli("run", "--methods", "waypoint_opd", "--seeds", "42", "--out", str(tmp_path), "--no-progress",
                   "--no-summary-notebook", *sets, env={"LITREPRO_CORPUS": str(corpus_path)})
    assert proc.returncode == 0, proc.stderr
    rendered = json.loads(next((tmp_path / "waypoint_opd").rglob("seed-42.json")).read_text())
    overrides = {k: int(v) for k, v in (s.split("=") for s in TINY["waypoint_opd"])}
    ours = json.loads(atomic.dumps_json(wp.run(WaypointConfig(seed=42, **overrides))))
    for key in KEYS:
        assert ours[key] == rendered[key], key
    assert all(v is True for v in ours["extra_checks"].values())
