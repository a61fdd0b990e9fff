"""The ``waypoint_opd`` figures written beside ``summary.json``."""

from __future__ import annotations

from typing import Any, Mapping

from matplotlib.figure import Figure

import numpy as np

from litrepro import plotting, recorded
from litrepro.waypoint.experiment import ARMS


def recorded_rl_rewards() -> dict[int, list[float]]:
    """The seed file's teacher-RL reward curve per seed (empty without the recorded figures)."""
    data = recorded.load("waypoint_opd")
    if not data:
        return {}
    return {int(r["seed"]): [h["mean_rule_reward"] for h in r["teacher_rl_audit"]["history"]] for r in data["per_seed"]}


def reward_with_recorded(run: Mapping[int, list[float]], title: str) -> Figure:
    """This run's teacher-RL reward curves with the recorded ones overlaid (dashed)."""
    fig = plotting.curves_across_seeds(dict(run), xlabel="RL update", ylabel="mean rule reward (even first byte)",
                                       title=title)
    ax = fig.axes[0]
    rec = recorded_rl_rewards()
    for seed, values in sorted(rec.items()):
        ax.plot(np.arange(1, len(values) + 1), values, ls="--", lw=0.8, color="tab:gray",
                label="recorded (seed file)" if seed == min(rec) else None)
    if rec:
        ax.axhline(0.5, color="k", lw=0.5, ls=":")
        ax.legend(fontsize=7)
    return fig


def history_beside_recorded(history: list[Mapping[str, Any]], seed: int):
    """This run's OPD history beside the recorded one of the same seed (strings, 5 digits)."""
    import pandas as pd

    from litrepro import report

    data = recorded.load("waypoint_opd")
    rec = {int(r["seed"]): r["history"] for r in data["per_seed"]} if data else {}
    rows = []
    for h in history:
        r = next((x for x in rec.get(seed, []) if x["step"] == h["step"]), {})
        for key in ("loss", "gradient_norm", "mean_gate", "zero_gate_fraction", "batch_scale", "valid_tokens"):
            show = report.fmt_zero if key == "loss" else report.fmt
            rows.append({"step": h["step"], "field": key, "this run": show(h[key]),
                         "recorded": report.fmt(r[key], 3) if key in r else "-"})
    return pd.DataFrame(rows).pivot(index="field", columns="step", values=["this run", "recorded"])


def summary_plots(results: list[Mapping[str, Any]]) -> dict[str, Figure]:
    """Teacher-RL reward curves across seeds (recorded ones overlaid), and the arm comparison."""
    figures = {"teacher_rl_reward.png": reward_with_recorded(
        {r["seed"]: r["curves"]["teacher_rl_reward"] for r in results}, "teacher RL reward across seeds")}
    with_comparison = [r for r in results if "comparison_none_validation_nll" in r["beyond_seed_metrics"]]
    if with_comparison:
        for key, label in (("expected_parity_rate", "P(even first byte)"), ("validation_nll", "validation NLL (nats/byte)")):
            rows = {arm: [r["beyond_seed_metrics"][f"comparison_{arm}_{key}"] for r in with_comparison] for arm in ARMS
                    if all(f"comparison_{arm}_{key}" in r["beyond_seed_metrics"] for r in with_comparison)}
            figures[f"opd_comparison_{key}.png"] = plotting.arm_comparison(
                rows, ylabel=label, title=f"OPD arms across seeds: {label}")
    return figures
