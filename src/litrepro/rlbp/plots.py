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


def market_histograms(cpc_ratio, spent_end, kinds, kind_names) -> Figure:
    """Under the behaviour policy: CPC / target per campaign-segment, and end-of-day spend, by kind.

    ``cpc_ratio`` (D, K, C), ``spent_end`` (D, C), ``kinds`` (C,) indices into ``kind_names``.
    """
    import numpy as np

    fig = Figure(figsize=(9.6, 3.6))
    ax_cpc, ax_spend = fig.subplots(1, 2)
    ratio, spent, kinds = np.asarray(cpc_ratio), np.asarray(spent_end), np.asarray(kinds)
    bins_cpc, bins_spend = np.linspace(0, 2.5, 51), np.linspace(0, 1.0, 41)
    for k, name in enumerate(kind_names):
        ax_cpc.hist(ratio[:, :, kinds == k].ravel().clip(max=2.5), bins=bins_cpc, alpha=0.55, label=name)
        ax_spend.hist(spent[:, kinds == k].ravel(), bins=bins_spend, alpha=0.55, label=name)
    ax_cpc.axvline(1.0, color="k", lw=1, ls="--")
    ax_cpc.set(xlabel="segment CPC / target CPC (clipped at 2.5)", ylabel="campaign-segments",
               title="CPC against target (behaviour policy)")
    ax_spend.set(xlabel="spent fraction of budget at end of day", ylabel="campaign-days", title="spend")
    ax_cpc.legend(fontsize=8)
    fig.tight_layout()
    return fig


def lambda_frontier(rows: list[Mapping[str, Any]], points: Mapping[str, tuple[float, float]],
                    title: str) -> Figure:
    """Value reward against CPC overshoot: one marker per fusion weight, plus reference policies.

    ``rows``: ``{lambda, value, cpc_overshoot}`` (optionally ``value_err``, ``cpc_overshoot_err``);
    ``points``: ``{policy name: (cpc_overshoot, value)}``.
    """
    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.subplots()
    xs = [r["cpc_overshoot"] for r in rows]
    ys = [r["value"] for r in rows]
    ax.errorbar(xs, ys, xerr=[r.get("cpc_overshoot_err", 0.0) for r in rows],
                yerr=[r.get("value_err", 0.0) for r in rows], fmt="o-", capsize=3, label="learned, by lambda")
    for r in rows:
        ax.annotate(f"λ={r['lambda']:g}", (r["cpc_overshoot"], r["value"]), textcoords="offset points",
                    xytext=(6, 4), fontsize=8)
    for (name, (x, y)), marker in zip(points.items(), ("s", "^", "D")):
        ax.plot([x], [y], marker, ms=8, label=name)
    ax.set(xlabel="CPC overshoot: mean max(0, CPC / target - 1)", ylabel="value reward per decision", title=title)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig
