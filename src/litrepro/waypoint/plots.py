"""The ``waypoint_opd`` figures written beside ``summary.json``."""

from __future__ import annotations

from typing import Any, Mapping

from matplotlib.figure import Figure

from litrepro import plotting
from litrepro.waypoint.experiment import ARMS


def summary_plots(results: list[Mapping[str, Any]]) -> dict[str, Figure]:
    """Teacher-RL reward curves across seeds, and the three-arm comparison."""
    figures = {"teacher_rl_reward.png": plotting.curves_across_seeds(
        {r["seed"]: r["curves"]["teacher_rl_reward"] for r in results}, xlabel="RL update",
        ylabel="mean rule reward (even first byte)", title="teacher RL reward across seeds")}
    with_comparison = [r for r in results if "comparison_none_validation_nll" in r["beyond_seed_metrics"]]
    if with_comparison:
        for key, label in (("expected_parity_rate", "P(even first byte)"), ("validation_nll", "validation NLL (nats/byte)")):
            rows = {arm: [r["beyond_seed_metrics"][f"comparison_{arm}_{key}"] for r in with_comparison] for arm in ARMS}
            figures[f"opd_comparison_{key}.png"] = plotting.arm_comparison(
                rows, ylabel=label, title=f"OPD arms across seeds: {label}")
    return figures
