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


def test_arm_curves_leave_the_final_figures_and_the_audit_unchanged(corpus_path):
    """compare_arms(eval_every=k) trains in chunks: the same final figures, records and audit as one chunk."""
    import torch

    cfg = WaypointConfig(corpus_path=str(corpus_path), comparison_steps=3, comparison_eval_prompts=16)
    corpus = wp.load_corpus(cfg)
    g = torch.Generator().manual_seed(cfg.seed)
    teacher, _ = wp.pretrained_policy(cfg, corpus, g, torch.device("cpu"), steps=cfg.teacher_steps,
                                      stage="teacher_pretrain")
    rl = wp.teacher_rl(cfg, teacher, corpus, g, torch.device("cpu"))
    student = wp.initial_student(cfg, rl, corpus, torch.device("cpu"), cfg.seed)
    outs = [wp.compare_arms(cfg, student, rl["waypoints"], corpus, torch.device("cpu"), cfg.seed, eval_every=k)
            for k in (0, 2)]
    for arm in wp.ARMS:
        plain, chunked = outs[0][arm], dict(outs[1][arm])
        assert [p["step"] for p in chunked.pop("curve")] == [0, 2, 3]
        assert plain == chunked
        a, b = outs[0]["records"]["arms"][arm], outs[1]["records"]["arms"][arm]
        assert a["draws_sha256"] == b["draws_sha256"] and a["evaluated"] == b["evaluated"]
    audits = [wp.audit_comparison(cfg, out, student, rl["waypoints"], corpus, cfg.seed) for out in outs]
    assert audits[0]["checks"] == audits[1]["checks"] and all(audits[0]["checks"].values())
