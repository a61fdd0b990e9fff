"""Every figure the project writes or shows renders inside its canvas.

``litrepro.figcheck.outside_canvas`` draws a figure and lists any text outside the
canvas and any marker outside the canvas or clipped away by its axes.  The figures are
built from the committed ``rendered/`` data and from the explorers' cached stages, the
way the runner, the studies, the notebooks and the explorers build them.
"""

from __future__ import annotations

import json
import os

import pytest
import torch
from matplotlib.figure import Figure

from litrepro import figcheck, plotting, recorded
from litrepro.paths import RENDERED
from litrepro.rlbp import plots as rplots
from litrepro.waypoint import plots as wplots


def _seed_results(method: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((RENDERED / method).glob("seed-*.json"))]


def _check(figures: dict[str, Figure]) -> None:
    bad = {name: problems for name, fig in figures.items() if (problems := figcheck.outside_canvas(fig))}
    assert not bad, bad


def test_outside_canvas_sees_a_cut_title_a_label_off_the_edge_and_a_clipped_marker():
    fig = Figure(figsize=(3, 2), layout="constrained")
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], "o")
    assert figcheck.outside_canvas(fig) == []
    ax.set_title("a title far too long for a figure three inches wide, so its end is cut off")
    assert any("title far too long" in p for p in figcheck.outside_canvas(fig))
    fig = Figure(figsize=(6, 2), layout="constrained")
    ax, _ = fig.subplots(1, 2)
    ax.plot([0, 1, 2], [0, 1, 2], "o")
    ax.set_xlim(0, 1.8)                     # the point at x = 2 is clipped away by its axes, inside the canvas
    assert any("marker" in p and "its axes" in p for p in figcheck.outside_canvas(fig))
    fig = Figure(figsize=(3, 2))
    fig.text(0.98, 0.5, "off the right edge")
    assert any("off the right edge" in p for p in figcheck.outside_canvas(fig))


def test_runner_and_study_figures_fit():
    from litrepro.rlbp import plots as rlbp_summary
    from litrepro.rlbp import study as rlbp_study
    from litrepro.waypoint import effect_study
    from litrepro.waypoint import plots as wp_summary

    figures = {f"pinterest_rlbp/{k}": v for k, v in rlbp_summary.summary_plots(_seed_results("pinterest_rlbp")).items()}
    figures.update({f"waypoint_opd/{k}": v for k, v in wp_summary.summary_plots(_seed_results("waypoint_opd")).items()})
    comparison = json.loads((RENDERED / "pinterest_rlbp" / "policy_comparison.json").read_text())
    figures["policy_comparison.png"] = rlbp_study.comparison_plot(comparison["comparisons"])
    front = json.loads((RENDERED / "pinterest_rlbp" / "lambda_frontier.json").read_text())
    figures["backup_study.png"] = rlbp_study.backup_plot(json.loads((RENDERED / "pinterest_rlbp" / "backup_study.json").read_text()))
    figures["lambda_frontier.png"] = rplots.lambda_frontier(
        front["points"], {k: tuple(v) for k, v in comparison["reference_points"].items()},
        title=f"value vs CPC overshoot by lambda, {comparison['n_seeds']} seeds (bars: s.e.)")
    figures["effect_study.png"] = effect_study.plot(effect_study.load())
    _check(figures)


def test_rlbp_notebook_and_explorer_figures_fit():
    from litrepro.explore import rlbp as xr
    from litrepro.rlbp import experiment as rlbp

    key = xr.BaseKey(seed=42)
    b = xr.base(key)
    actor, report = xr.actor(key, 1.0)
    world, data = b["world"], b["data"]
    result = _seed_results("pinterest_rlbp")[0]
    demo = rlbp.pid_demo(world, torch.Generator().manual_seed(0), actions=(0, 8))
    labels = [f"{a}: Kp={r['Kp']:g}, Ki={r['Ki']:g}" for a, r in enumerate(rlbp.actions_table(world))]
    bm = result["beyond_seed_metrics"]
    rows = {p: {"ips": [bm[f"{p}_ips"]], "ips_err": [bm[f"{p}_ips_se"]], "true_value": [bm[f"{p}_true_value"]],
                "true_value_err": [bm[f"{p}_true_se"]]} for p in rlbp.POLICIES}
    figures = {
        "pid_trajectories": plotting.pid_trajectories(demo),
        "market_histograms": rplots.market_histograms(data["cpc_ratio"], data["spent_end"], world.campaigns.kind, rlbp.KINDS),
        "td_loss_curves": plotting.td_loss_curves({"value head": b["critic_report"]["td_loss_value"],
                                                   "CPC head": b["critic_report"]["td_loss_cpc"]}),
        "action_distribution": plotting.action_distribution(report["mean_action_probs"], labels),
        "estimate_vs_truth": plotting.estimate_vs_truth(rows, title="seed 42: IPS vs simulator truth (bars: standard errors)"),
        "lambda_frontier (seed)": rplots.lambda_frontier(result["lambda_sweep"], {"fixed_gain": (0.06, 1.6)},
                                                         title="seed 42: value vs CPC overshoot by lambda"),
        "headroom": rplots.headroom(result["headroom"], bm["learned_true_value"],
                                    title="seed 42: fused truth of each constant action"),
    }
    for kind in xr.KINDS:
        figures[f"explorer ({kind}, top-9, lambda 4)"] = xr.figure(key, 4.0, 9, kind)[0]
    _check(figures)


@pytest.mark.skipif(not os.environ.get("LITREPRO_CORPUS"), reason="waypoint_opd needs LITREPRO_CORPUS")
def test_waypoint_notebook_and_explorer_figures_fit():
    from litrepro.explore import waypoint as xw
    from litrepro.waypoint import calibration

    key = xw.TeacherKey(seed=42)
    t, comp = xw.teacher(key), xw.arms(key)
    results = _seed_results("waypoint_opd")
    figures = {
        "teacher_rl_reward": wplots.reward_with_recorded({42: results[0]["curves"]["teacher_rl_reward"]}, "teacher RL reward (seed 42)"),
        "lineage": wplots.lineage_figure(t["lineage"], "seed 42: P(even first byte) along the teacher's RL"),
        "arm_curves": wplots.arm_curves_figure(comp, "seed 42: the arms over 40 OPD updates"),
        "calibration": wplots.calibration_figure(calibration.calibration_rows(results[:1], recorded.load("waypoint_opd")),
                                                 "seed 42: z of every recorded figure"),
        "gate_classes": wplots.gate_class_figure(xw.tokens(key, "straightness"), "seed 42: the gate by RL-sampling class"),
    }
    for gate in xw.GATES.values():
        figures[f"explorer ({gate}, 20 steps)"] = xw.figure(key, gate, 20)[0]
    _check(figures)


def test_waypoint_views_agree_with_the_pipeline():
    """The lineage view finds each waypoint at its step, and the per-token classes reproduce gate_legs' class means."""
    if not os.environ.get("LITREPRO_CORPUS"):
        pytest.skip("waypoint_opd needs LITREPRO_CORPUS")
    from litrepro.explore import waypoint as xw
    from litrepro.waypoint import experiment as wp
    from litrepro.waypoint import views

    key = xw.TeacherKey(seed=42)
    t = xw.teacher(key)
    lineage = t["lineage"]
    assert lineage["waypoint_found_at"] == [[s] for s in lineage["waypoint_steps"]]
    assert len(lineage["expected_parity_rate"]) == t["rl"]["audit"]["updates"] + 1
    legs = wp.gate_legs(t["cfg"], t["student"], t["rl"]["waypoints"], xw.corpus(), torch.device("cpu"), 42, t["rl"]["actions"])
    summary = views.class_summary(xw.tokens(key, "straightness"))
    for k, v in summary.items():
        assert v == legs[k] or (v != v and legs[k] != legs[k]), k
    shuffled = xw.tokens(key, "shuffled")                     # same tokens, same gate values, reassigned
    straight = xw.tokens(key, "straightness")
    assert torch.equal(shuffled["gate"].sort().values, straight["gate"].sort().values)
    assert not torch.equal(shuffled["gate"], straight["gate"])
