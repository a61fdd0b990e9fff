"""The ``pinterest_rlbp`` figures written beside ``summary.json``."""

from __future__ import annotations

from typing import Any, Mapping

from matplotlib.figure import Figure

from litrepro import plotting
from litrepro.rlbp.experiment import POLICIES


def summary_plots(results: list[Mapping[str, Any]]) -> dict[str, Figure]:
    """TD-loss curves of both heads across seeds, and IPS against simulated truth."""
    figures = {}
    for head in ("value", "cpc"):
        curves = {r["seed"]: r["curves"][f"td_loss_{head}"] for r in results}
        figures[f"td_loss_{head}.png"] = plotting.curves_across_seeds(
            curves, xlabel="critic step", ylabel="TD loss (minibatch)", log=True,
            title=f"{head} head: TD loss across seeds")
    rows = {p: {k: [r["beyond_seed_metrics"][f"{p}_{k}"] for r in results] for k in ("ips", "true_value")}
            for p in POLICIES}
    figures["ips_vs_truth.png"] = plotting.estimate_vs_truth(
        rows, title=f"IPS vs simulator truth, seeds {', '.join(str(r['seed']) for r in results)} (bars: std)")
    return figures
