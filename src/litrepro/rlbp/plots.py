"""The ``pinterest_rlbp`` figures written beside ``summary.json``."""

from __future__ import annotations

from typing import Any, Mapping

from matplotlib.figure import Figure

from litrepro import plotting
from litrepro.rlbp.experiment import POLICIES


def ips_minus_truth(results: list[Mapping[str, Any]]) -> dict[str, list[float]]:
    """Per policy and seed: ordinary IPS minus the simulated truth on the same held-out campaigns.

    IPS re-weights the held-out campaigns' logged decisions, so its truth is
    ``true_value_heldout`` (as in :func:`litrepro.rlbp.study.comparisons`).
    """
    b = [r["beyond_seed_metrics"] for r in sorted(results, key=lambda r: r["seed"])]
    return {f"{p}: IPS − truth": [x[f"{p}_ips"] - x[f"{p}_true_value_heldout"] for x in b] for p in POLICIES}


def summary_plots(results: list[Mapping[str, Any]]) -> dict[str, Figure]:
    """TD-loss curves of both heads across seeds, and IPS against simulated truth as paired per-seed differences."""
    figures = {}
    for head in ("value", "cpc"):
        curves = {r["seed"]: r["curves"][f"td_loss_{head}"] for r in results}
        figures[f"td_loss_{head}.png"] = plotting.curves_across_seeds(
            curves, xlabel="critic step", ylabel="TD loss (minibatch)", log=True,
            title=f"{head} head: TD loss across seeds")
    seeds = ", ".join(str(r["seed"]) for r in sorted(results, key=lambda r: r["seed"]))
    figures["ips_vs_truth.png"] = plotting.paired_differences(
        ips_minus_truth(results), xlabel="IPS − simulated truth (reward per decision, held-out campaigns)",
        title=f"ordinary IPS minus simulated truth, per seed ({seeds}), 95% t CI", share_axis=True)
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
    ``points``: ``{policy name: (cpc_overshoot, value)}``.  The fixed gain, when given, is
    marked by dashed lines through it, and the quadrant of policies better on both axes
    (higher value, lower overshoot) is shaded: a λ inside it beats the fixed gain outright.
    """
    fig = Figure(figsize=(6.8, 4.0), layout="constrained")
    ax = fig.subplots()
    xs = [r["cpc_overshoot"] for r in rows]
    ys = [r["value"] for r in rows]
    ax.errorbar(xs, ys, xerr=[r.get("cpc_overshoot_err", 0.0) for r in rows],
                yerr=[r.get("value_err", 0.0) for r in rows], fmt="o-", capsize=3, label="learned, by lambda")
    for r in rows:
        ax.annotate(f"λ={r['lambda']:g}", (r["cpc_overshoot"], r["value"]), textcoords="offset points",
                    xytext=(6, 4), fontsize=8)
    for (name, (x, y)), marker in zip(points.items(), ("s", "^", "D")):
        ax.plot([x], [y], marker, ms=8, label=name, zorder=3)
    ax.margins(0.12)
    ax.autoscale_view()
    xlim, ylim = ax.get_xlim(), ax.get_ylim()
    if "fixed_gain" in points:
        fx, fy = points["fixed_gain"]
        ax.axhline(fy, color="0.35", lw=0.8, ls="--", zorder=1)
        ax.axvline(fx, color="0.35", lw=0.8, ls="--", zorder=1)
        ax.fill_between([xlim[0], fx], fy, ylim[1], color="C2", alpha=0.12, lw=0, zorder=0,
                        label="better than the fixed gain on both")
        ax.annotate("fixed gain", (fx, fy), textcoords="offset points", xytext=(-6, 6), ha="right", fontsize=8,
                    color="0.25")
        ax.set_xlim(xlim)
        ax.set_ylim(ylim)
    ax.set(xlabel="CPC overshoot: mean max(0, CPC / target - 1)", ylabel="value reward per decision", title=title)
    ax.legend(fontsize=8, loc="lower right")
    return fig


def frontier_per_seed(results: list[Mapping[str, Any]]) -> dict[str, list[dict[str, float]]]:
    """``{seed: [{lambda, value, cpc_overshoot}, ...]}`` from seed results' ``lambda_sweep`` (for the study JSON)."""
    return {str(r["seed"]): [{k: float(x[k]) for k in ("lambda", "value", "cpc_overshoot")} for x in r["lambda_sweep"]]
            for r in sorted(results, key=lambda r: r["seed"])}


def _frontier_at(sweep: list[Mapping[str, float]], overshoot: float) -> float | None:
    """The learned frontier's value at ``overshoot``: linear between the λ points that bracket it (sorted by
    overshoot); None outside the range the λ points span."""
    import numpy as np

    pts = sorted(sweep, key=lambda p: p["cpc_overshoot"])
    xs, ys = [p["cpc_overshoot"] for p in pts], [p["value"] for p in pts]
    if not xs[0] <= overshoot <= xs[-1]:
        return None
    return float(np.interp(overshoot, xs, ys))


def frontier_facts(front: Mapping[str, Any], comparison: Mapping[str, Any]) -> dict[str, Any]:
    """What the λ frontier figure shows about the fixed gain, computed from the study JSON, and a sentence.

    ``front``: ``lambda_frontier.json`` (``points``; ``per_seed`` when the study wrote it);
    ``comparison``: ``policy_comparison.json`` (``reference_points``, ``per_seed`` with
    ``fixed_gain_value``/``fixed_gain_cpc_overshoot``).  Facts:

    * ``fixed_gain``: its mean value and CPC overshoot;
    * ``lambdas``: per λ, mean value - fixed and overshoot - fixed, and, with per-seed λ
      values, the paired 95% t intervals of both (:func:`litrepro.stats.paired_ci`);
    * ``dominating_lambdas``: λ with a higher value *and* a lower overshoot than the fixed gain
      (paired: both intervals exclude 0 that way; otherwise by the means);
    * ``fixed_minus_frontier``: the fixed gain's value minus the learned frontier's at the fixed
      gain's overshoot (linear between the two λ that bracket it): by the means, and, with
      per-seed values, paired over the seeds whose sweep spans that overshoot.

    ``sentence`` states them, with bounds rounded outward and words from the intervals.
    """
    from litrepro.report import fmt
    from litrepro.stats import fmt_ci, paired_ci, verdict

    fx, fy = (float(v) for v in comparison["reference_points"]["fixed_gain"])
    points = sorted(front["points"], key=lambda p: p["lambda"])
    per_seed = front.get("per_seed")
    fixed = comparison.get("per_seed", {})
    seeds = sorted(set(per_seed or {}) & set(fixed), key=int) if per_seed else []
    paired = bool(seeds)
    lambdas = []
    for p in points:
        entry = {"lambda": p["lambda"], "value": p["value"], "cpc_overshoot": p["cpc_overshoot"],
                 "value_minus_fixed": p["value"] - fy, "overshoot_minus_fixed": p["cpc_overshoot"] - fx}
        if paired:
            lam = [next(x for x in per_seed[s] if x["lambda"] == p["lambda"]) for s in seeds]
            for metric, key in (("value", "fixed_gain_value"), ("cpc_overshoot", "fixed_gain_cpc_overshoot")):
                ci = paired_ci([x[metric] for x in lam], [fixed[s][key] for s in seeds])
                entry[f"{metric}_minus_fixed_ci"] = {**ci, "verdict": verdict(ci)}
        lambdas.append(entry)

    def dominates(e: Mapping[str, Any]) -> bool:
        if paired:
            return e["value_minus_fixed_ci"]["verdict"] == ">0" and e["cpc_overshoot_minus_fixed_ci"]["verdict"] == "<0"
        return e["value_minus_fixed"] > 0 and e["overshoot_minus_fixed"] < 0

    dominating = [e["lambda"] for e in lambdas if dominates(e)]
    at = _frontier_at(points, fx)
    facts: dict[str, Any] = {
        "n_seeds": comparison.get("n_seeds"), "paired": paired, "fixed_gain": {"value": fy, "cpc_overshoot": fx},
        "lambdas": lambdas, "dominating_lambdas": dominating,
        "frontier_value_at_fixed_overshoot": at, "fixed_minus_frontier": None if at is None else fy - at,
        "fixed_above_frontier": None if at is None else fy > at, "fixed_minus_frontier_ci": None}
    words = []
    if at is None:
        words.append(f"The fixed gain's CPC overshoot ({fmt(fx, 3)}) lies outside the range the learned λ span, so "
                     "the frontier is not compared with it there.")
    else:
        side = "above" if fy > at else "below" if fy < at else "on"
        words.append(f"By the means over {facts['n_seeds']} seeds, the fixed gain (value {fmt(fy, 5)}, CPC overshoot "
                     f"{fmt(fx, 3)}) lies {side} the learned λ frontier: at its overshoot the frontier's value is "
                     f"{fmt(at, 5)}.")
    if paired and at is not None:
        diffs = [(fixed[s]["fixed_gain_value"], _frontier_at(per_seed[s], fixed[s]["fixed_gain_cpc_overshoot"]))
                 for s in seeds]
        diffs = [(a, b) for a, b in diffs if b is not None]
        if len(diffs) >= 2:
            ci = paired_ci([a for a, _ in diffs], [b for _, b in diffs])
            facts["fixed_minus_frontier_ci"] = {**ci, "verdict": verdict(ci), "seeds_spanned": len(diffs)}
            v = verdict(ci)
            how = ("higher than" if v == ">0" else "lower than" if v == "<0" else "not detectably different from")
            words.append(f"Paired per seed (the {len(diffs)} of {len(seeds)} seeds whose λ sweep spans the fixed gain's "
                         f"overshoot), the fixed gain's value is {how} the frontier's there: "
                         f"{ci['mean_difference']:+#.2g} {fmt_ci(ci['ci95_low'], ci['ci95_high'])}.")
    basis = "by both paired intervals" if paired else "by the means"
    words.append(f"No learned λ has both a higher value and a lower CPC overshoot than the fixed gain ({basis})."
                 if not dominating else
                 f"λ = {', '.join(f'{x:g}' for x in dominating)} {'has' if len(dominating) == 1 else 'have'} both a "
                 f"higher value and a lower CPC overshoot than the fixed gain ({basis}).")
    if not paired:
        words.append("Paired intervals against the fixed gain need the per-seed λ values, which this "
                     "lambda_frontier.json does not hold (re-run `make rlbp-study`).")
    facts["sentence"] = " ".join(words)
    return facts


def frontier_figure(front: Mapping[str, Any], comparison: Mapping[str, Any]) -> Figure:
    """``lambda_frontier.png`` from the study's two JSON files: the λ points, the reference policies, the fixed gain
    marked, and no more text than the title (the finding is :func:`frontier_facts`' sentence)."""
    refs = {k: (float(v[0]), float(v[1])) for k, v in comparison["reference_points"].items()}
    return lambda_frontier(front["points"], refs,
                           title=f"value vs CPC overshoot by lambda, {comparison['n_seeds']} seeds (bars: s.e.)")


def headroom(room: Mapping[str, Any], learned: float, title: str) -> Figure:
    """The fused truth of each constant action, the three oracles and the learned policy (one seed).

    ``room`` is :func:`litrepro.rlbp.experiment.headroom`'s dict; ``learned`` the learned policy's truth.
    """
    fig = Figure(figsize=(7.2, 3.8))
    ax = fig.subplots()
    constant = list(room["constant"])
    ax.bar(range(len(constant)), constant, color=["C1" if a == 4 else "C0" for a in range(len(constant))])
    for value, label, style in ((room["best_per_campaign"], "best constant per campaign (hindsight)", ":"),
                                (room["best_per_kind"], "best constant per kind", "--"),
                                (learned, "learned policy", "-")):
        ax.axhline(value, color="k" if label != "learned policy" else "C3", ls=style, lw=1.2, label=label)
    low = min(constant + [learned])
    high = max(constant + [learned, room["best_per_campaign"]])
    ax.set_ylim(low - 0.1 * (high - low), high + 0.35 * (high - low))
    ax.set_xticks(range(len(constant)), [f"{a}" + (" (fixed)" if a == 4 else "") for a in range(len(constant))], fontsize=8)
    ax.set(xlabel="constant action", ylabel="fused true value per decision", title=title)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig
