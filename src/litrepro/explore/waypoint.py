"""The ``waypoint_opd`` explorer: teacher strength, RL rollouts per update, gate, OPD steps, seed.

Stages and their caches (``functools.lru_cache`` on frozen keys):

- :func:`teacher` (seed, pretraining lr, RL rollouts): the notebook's sequence
  (``seed_everything``, ``pretrained_policy``, ``teacher_rl``), the student that starts
  as waypoint 0 (``initial_student``) and the replayed lineage
  (:func:`litrepro.waypoint.views.lineage_parity`).
- :func:`arms` (same key): ``compare_arms(..., eval_every=EVAL_EVERY)`` over
  ``MAX_STEPS`` updates, every arm.  The OPD-steps control reads these curves: the
  point after s updates is exactly the arm trained for s updates (plain SGD, the
  evaluations draw from their own generators; see ``compare_arms``), so moving it
  trains nothing.
- :func:`tokens` (key, gate kind): 64 rollouts of the student before distillation
  (waypoint 0), with each byte's gate and RL-sampling class
  (:func:`litrepro.waypoint.views.gate_tokens`, the rollouts of ``gate_legs``).

The strong teacher (pretraining lr 0.05) is the effect study's; 0.015 is the calibrated default.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from litrepro.explore.common import Base
from litrepro.waypoint import experiment as wp
from litrepro.waypoint import views
from litrepro.waypoint.config import WaypointConfig

TEACHERS = {"calibrated (lr 0.015)": 0.015, "strong (lr 0.05)": 0.05}
ROLLOUTS = (8, 16, 32, 64)
GATES = {"waypoint (straightness)": "straightness", "final only": "final_only", "shuffled": "shuffled"}
ARM_OF_GATE = {"straightness": "waypoint", "final_only": "final_only", "shuffled": "shuffled"}
MAX_STEPS = 40
EVAL_EVERY = 10


@dataclass(frozen=True)
class TeacherKey:
    seed: int = 42
    pretrain_lr: float = 0.015
    teacher_rl_rollouts: int = 64

    def config(self) -> WaypointConfig:
        return WaypointConfig(seed=self.seed, pretrain_lr=self.pretrain_lr, teacher_rl_rollouts=self.teacher_rl_rollouts,
                              comparison_steps=MAX_STEPS, device="cpu")


@functools.lru_cache(maxsize=1)
def corpus():
    return wp.load_corpus(WaypointConfig())


@functools.lru_cache(maxsize=8)
def teacher(key: TeacherKey) -> dict:
    """Pretrained teacher, its RL, the waypoint-0 student and the replayed lineage."""
    from litrepro.seeding import seed_everything

    cfg, c, device = key.config(), corpus(), torch.device("cpu")
    generator = seed_everything(cfg.seed)
    policy, _ = wp.pretrained_policy(cfg, c, generator, device, steps=cfg.teacher_steps, stage="teacher_pretrain")
    rl = wp.teacher_rl(cfg, policy, c, generator, device)
    student = wp.initial_student(cfg, rl, c, device, cfg.seed, start="waypoint0")
    return {"cfg": cfg, "rl": rl, "student": student, "lineage": views.lineage_parity(cfg, rl, c, device, cfg.seed)}


@functools.lru_cache(maxsize=8)
def arms(key: TeacherKey) -> dict:
    """Every arm's NLL and parity curve over ``MAX_STEPS`` updates."""
    t = teacher(key)
    return wp.compare_arms(t["cfg"], t["student"], t["rl"]["waypoints"], corpus(), torch.device("cpu"), key.seed,
                           eval_every=EVAL_EVERY)


@functools.lru_cache(maxsize=32)
def tokens(key: TeacherKey, gate_kind: str) -> dict:
    t = teacher(key)
    return views.gate_tokens(t["cfg"], t["student"], t["rl"]["waypoints"], corpus(), torch.device("cpu"), key.seed,
                             t["rl"]["actions"], gate_kind=gate_kind)


def at_step(comparison: dict, arm: str, step: int) -> dict:
    """The arm's evaluation after ``step`` updates (a point of its curve)."""
    return next(p for p in comparison[arm]["curve"] if p["step"] == step)


def figure(key: TeacherKey, gate_kind: str, steps: int):
    """The explorer's picture and its line of numbers."""
    from matplotlib.figure import Figure

    from litrepro.waypoint import plots

    t, comp, tok = teacher(key), arms(key), tokens(key, gate_kind)
    arm = ARM_OF_GATE[gate_kind]
    fig = Figure(figsize=(13, 6.6))
    grid = fig.add_gridspec(2, 3)
    ax_roll = fig.add_subplot(grid[0, :2])
    ax_hist = fig.add_subplot(grid[0, 2])
    ax_lin, ax_nll, ax_par = (fig.add_subplot(grid[1, i]) for i in range(3))
    fig.subplots_adjust(left=0.06, right=0.985, top=0.95, bottom=0.08, wspace=0.3, hspace=0.35)
    plots.rollout_axes(ax_roll, tok, rows=6)
    plots.gate_class_axes(ax_hist, tok)
    plots.lineage_axes(ax_lin, t["lineage"])
    plots.arm_curve_axes(ax_nll, ax_par, comp, highlight=arm, until=steps, relative=True)
    now, final_only = at_step(comp, arm, steps), at_step(comp, "final_only", steps)
    parity = t["lineage"]["expected_parity_rate"]
    matched = at_step(comp, "matched_compute", steps)
    line = (f"seed {key.seed}, teacher lr {key.pretrain_lr:g}, {key.teacher_rl_rollouts} rollouts/update: "
            f"teacher P(even) {parity[0]:.4f} → {parity[-1]:.4f}; mean {gate_kind} gate {float(tok['gate'].mean()):.3f}; "
            f"after {steps} OPD updates, {arm}: NLL {now['validation_nll']:.5f}, P(even) {now['expected_parity_rate']:.5f} "
            f"({arm} − final_only: {now['expected_parity_rate'] - final_only['expected_parity_rate']:+.2e} parity, "
            f"{now['validation_nll'] - final_only['validation_nll']:+.2e} NLL; one seed, no interval); "
            f"matched compute, no teacher: NLL {matched['validation_nll']:.5f}, P(even) {matched['expected_parity_rate']:.5f}")
    return fig, line


class Explorer(Base):
    """Controls: teacher strength, RL rollouts per update, gate, OPD steps, seed."""

    def __init__(self, seed: int = 42):
        import ipywidgets as w

        style = {"description_width": "110px"}
        self.controls = {
            "gate": w.Dropdown(options=GATES, value="straightness", description="gate", style=style),
            "steps": w.IntSlider(value=MAX_STEPS, min=0, max=MAX_STEPS, step=EVAL_EVERY, description="OPD steps",
                                 continuous_update=False, style=style),
            "teacher_lr": w.Dropdown(options=TEACHERS, value=0.015, description="teacher", style=style),
            "rollouts": w.SelectionSlider(options=ROLLOUTS, value=64, description="RL rollouts",
                                          continuous_update=False, style=style),
            "seed": w.BoundedIntText(value=seed, min=0, max=2**32 - 1, description="seed", style=style),
        }
        super().__init__()

    def compute(self, *, gate, steps, teacher_lr, rollouts, seed):
        key = TeacherKey(seed=int(seed), pretrain_lr=float(teacher_lr), teacher_rl_rollouts=int(rollouts))
        return figure(key, gate, int(steps))
