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
    figures["lambda_frontier.png"] = rplots.frontier_figure(front, comparison)
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


# --- Figures that carry the claims: paired differences, the fixed gain on the frontier, re-drawing -----

def _errorbar_interval(ax) -> tuple[float, float]:
    """The (low, high) x of the one horizontal error bar drawn on ``ax``."""
    from matplotlib.container import ErrorbarContainer

    (bar,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    (segment,) = bar.lines[2][0].get_segments()                      # [[low, y], [high, y]]
    return float(segment[0][0]), float(segment[1][0])


def test_paired_difference_figure_draws_scipys_interval():
    """d = (1, 2, 4): mean 7/3, 95% t interval mean ± t_{0.975, 2} · sd / sqrt 3, as scipy computes it."""
    from scipy import stats

    d = [1.0, 2.0, 4.0]
    rows = plotting.paired_difference_rows({"a − b": d})
    low, high = stats.t.interval(0.95, df=2, loc=sum(d) / 3, scale=stats.sem(d))
    assert rows[0]["mean_difference"] == pytest.approx(7 / 3)
    assert (rows[0]["ci95_low"], rows[0]["ci95_high"]) == (pytest.approx(low), pytest.approx(high))
    by_hand = 4.302652729911275 * stats.tstd(d) / 3 ** 0.5                       # t_{0.975, 2} = 4.3026527...
    assert high - 7 / 3 == pytest.approx(by_hand)
    fig = plotting.paired_differences({"a − b": d, "c − d": [-1e-6, -2e-6, -1.5e-6]}, xlabel="x", title="t")
    assert _errorbar_interval(fig.axes[0]) == (pytest.approx(low), pytest.approx(high))
    for ax in fig.axes:                                                           # 0 is on every panel's axis
        assert ax.get_xlim()[0] <= 0 <= ax.get_xlim()[1]
    assert figcheck.outside_canvas(fig) == []


def test_summary_figures_are_paired_per_seed_differences():
    """The OPD arms and IPS - truth figures draw per-seed differences of the committed seed results."""
    wp = _seed_results("waypoint_opd")
    diffs = wplots.arm_differences(wp, "expected_parity_rate")
    assert set(diffs) == {"waypoint − final_only", "waypoint − shuffled", "waypoint − matched_compute", "waypoint − none"}
    b = [r["beyond_seed_metrics"] for r in sorted(wp, key=lambda r: r["seed"])]
    assert diffs["waypoint − none"] == [x["comparison_waypoint_expected_parity_rate"] - x["comparison_none_expected_parity_rate"]
                                        for x in b]
    rl = _seed_results("pinterest_rlbp")
    ips = rplots.ips_minus_truth(rl)
    assert ips["learned: IPS − truth"] == [r["beyond_seed_metrics"]["learned_ips"] - r["beyond_seed_metrics"]["learned_true_value_heldout"]
                                          for r in sorted(rl, key=lambda r: r["seed"])]
    fig = rplots.summary_plots(rl)["ips_vs_truth.png"]
    rows = plotting.paired_difference_rows(ips)
    assert _errorbar_interval(fig.axes[0]) == (pytest.approx(rows[0]["ci95_low"]), pytest.approx(rows[0]["ci95_high"]))
    assert len({ax.get_xlim() for ax in fig.axes}) == 1                      # one scale: one shared axis


def _frontier(values, overshoots):
    return [{"lambda": lam, "value": v, "cpc_overshoot": o} for lam, v, o in zip((0.0, 1.0, 4.0), values, overshoots)]


def test_frontier_facts_by_hand():
    """λ points (0.08, 1.60), (0.06, 1.54), (0.04, 1.50); the fixed gain (0.07, 1.58): the frontier at 0.07 is
    (1.60 + 1.54) / 2 = 1.57, so the fixed gain lies 0.01 above it, and no λ beats it on both axes."""
    front = {"points": _frontier((1.60, 1.54, 1.50), (0.08, 0.06, 0.04))}
    comparison = {"n_seeds": 20, "reference_points": {"fixed_gain": [0.07, 1.58], "behaviour": [0.07, 1.56]}}
    facts = rplots.frontier_facts(front, comparison)
    assert facts["frontier_value_at_fixed_overshoot"] == pytest.approx(1.57)
    assert facts["fixed_minus_frontier"] == pytest.approx(0.01) and facts["fixed_above_frontier"]
    assert facts["dominating_lambdas"] == [] and not facts["paired"]
    assert "lies above the learned λ frontier" in facts["sentence"] and "need the per-seed λ values" in facts["sentence"]
    comparison["reference_points"]["fixed_gain"] = [0.07, 1.52]                  # now below; λ = 1 beats it on both
    facts = rplots.frontier_facts(front, comparison)
    assert not facts["fixed_above_frontier"] and facts["dominating_lambdas"] == [1.0]
    assert "lies below" in facts["sentence"] and "λ = 1 has both a higher value" in facts["sentence"]


def test_frontier_facts_paired_intervals_equal_scipys():
    """Three seeds whose λ sweeps bracket their fixed gain: the fixed - frontier interval is scipy's paired t interval."""
    from scipy import stats

    per_seed = {"1": _frontier((1.60, 1.54, 1.50), (0.08, 0.06, 0.04)),
                "2": _frontier((1.62, 1.55, 1.52), (0.08, 0.06, 0.04)),
                "3": _frontier((1.58, 1.50, 1.46), (0.08, 0.06, 0.04))}
    fixed = {"1": (1.58, 0.07), "2": (1.60, 0.07), "3": (1.55, 0.06)}
    front = {"points": _frontier((1.60, 1.53, 1.49), (0.08, 0.06, 0.04)), "per_seed": per_seed}
    comparison = {"n_seeds": 3, "reference_points": {"fixed_gain": [0.0667, 1.5767]},
                  "per_seed": {s: {"fixed_gain_value": v, "fixed_gain_cpc_overshoot": o} for s, (v, o) in fixed.items()}}
    facts = rplots.frontier_facts(front, comparison)
    d = [1.58 - 1.57, 1.60 - 1.585, 1.55 - 1.50]                               # fixed - frontier at each seed's overshoot
    ci = facts["fixed_minus_frontier_ci"]
    low, high = stats.t.interval(0.95, df=2, loc=sum(d) / 3, scale=stats.sem(d))
    assert ci["mean_difference"] == pytest.approx(sum(d) / 3)
    assert (ci["ci95_low"], ci["ci95_high"]) == (pytest.approx(low), pytest.approx(high))
    lam1 = next(e for e in facts["lambdas"] if e["lambda"] == 1.0)["value_minus_fixed_ci"]
    assert lam1["mean_difference"] == pytest.approx(((1.54 - 1.58) + (1.55 - 1.60) + (1.50 - 1.55)) / 3)
    assert facts["paired"] and "Paired per seed" in facts["sentence"]


def test_frontier_figure_marks_the_fixed_gain_and_its_facts_read_the_committed_json():
    comparison = json.loads((RENDERED / "pinterest_rlbp" / "policy_comparison.json").read_text())
    front = json.loads((RENDERED / "pinterest_rlbp" / "lambda_frontier.json").read_text())
    fig = rplots.frontier_figure(front, comparison)
    assert any(t.get_text() == "fixed gain" for t in fig.axes[0].texts)
    fx, fy = comparison["reference_points"]["fixed_gain"]
    lines = [ln for ln in fig.axes[0].get_lines() if ln.get_linestyle() == "--"]
    assert {tuple(ln.get_xdata()) for ln in lines} >= {(fx, fx)} and {tuple(ln.get_ydata()) for ln in lines} >= {(fy, fy)}
    facts = rplots.frontier_facts(front, comparison)
    assert facts["fixed_gain"] == {"value": fy, "cpc_overshoot": fx}
    assert [e["lambda"] for e in facts["lambdas"]] == [p["lambda"] for p in front["points"]]
    assert facts["sentence"]


def test_replot_redraws_every_figure_from_json(tmp_path):
    """``python -m litrepro.replot`` writes every study and runner PNG from the committed JSON alone."""
    from litrepro import replot

    assert replot.main(["--out", str(tmp_path)]) == 0
    written = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.png")}
    assert written >= {"pinterest_rlbp/lambda_frontier.png", "pinterest_rlbp/backup_study.png",
                       "pinterest_rlbp/policy_comparison.png", "pinterest_rlbp/ips_vs_truth.png",
                       "waypoint_opd/effect_study.png", "waypoint_opd/opd_comparison_expected_parity_rate.png"}
    assert all((tmp_path / w).stat().st_size > 1000 for w in written)


def test_study_tables_display_every_row(capsys):
    """The effect study's 112 rows and the frontier's neighbour rows print in full, not elided by pandas."""
    from litrepro import report, summary
    from litrepro.waypoint import effect_study

    data = effect_study.load()
    table = summary.study_table(effect_study.PATH)
    assert len(table) == len(data["differences"])
    report.display_full(table)
    shown = capsys.readouterr().out
    assert "..." not in shown and shown.count("\n") >= len(data["differences"]) + 2
    front = summary.study_table(RENDERED / "pinterest_rlbp" / "lambda_frontier.json", key="neighbour_differences")
    assert len(front) == len(json.loads((RENDERED / "pinterest_rlbp" / "lambda_frontier.json").read_text())["neighbour_differences"])
    head = summary.study_table(RENDERED / "pinterest_rlbp" / "backup_study.json", key="headroom.oracle_minus_fixed")
    assert list(head.index.get_level_values("comparison"))[0].endswith("- fixed_gain")
    assert summary.frontier_figure(RENDERED / "pinterest_rlbp") is not None
    plotting.show_file(effect_study.PLOT)
    plotting.show_file(RENDERED / "no-such-figure.png")
    assert "rendered/no-such-figure.png not found" in capsys.readouterr().out
