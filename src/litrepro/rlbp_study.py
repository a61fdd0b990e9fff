"""The 20-seed study of ``pinterest_rlbp`` (``make rlbp-study``): paired policy comparisons and the lambda frontier.

Reads the seed JSONs that ``python -m litrepro run`` wrote (one per seed, same
configuration) and writes, into ``rendered/pinterest_rlbp/``:

* ``policy_comparison.json``: per comparison ``{comparison, metric, n,
  mean_difference, ci95_low, ci95_high, verdict}`` from per-seed paired
  differences (``litrepro.stats.paired_ci``, a Student-t interval from
  scipy.stats), plus each check's pass rate and the provenance;
* ``lambda_frontier.json``: a list of ``{lambda, value, cpc_overshoot, seeds}``,
  means over seeds, with their standard errors;
* ``policy_comparison.png`` and ``lambda_frontier.png``.

Arms share a seed's campaigns, logged data and evaluation days, so they are
compared seed by seed, never as overlapping mean ± std.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from litrepro.paths import RENDERED
from litrepro.provenance import source_hashes
from litrepro.stats import paired_ci, verdict

FOLDER = RENDERED / "pinterest_rlbp"
COMPARISON = FOLDER / "policy_comparison.json"
FRONTIER = FOLDER / "lambda_frontier.json"
#: (comparison, arm a, arm b) for the simulated-truth differences a - b.
POLICY_PAIRS = (("learned - fixed_gain", "learned", "fixed_gain"), ("learned - behaviour", "learned", "behaviour"))
#: metric name in the comparison -> key suffix in ``beyond_seed_metrics``.
TRUTH_METRICS = {"true_value": "true_value", "value": "value", "cpc_overshoot": "cpc_overshoot"}


def comparisons(results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Paired differences over seeds: learned vs each baseline on simulated truth, and IPS - truth.

    IPS re-weights the held-out campaigns' logged decisions, so it is compared with the
    truth over those same campaigns (``true_value_heldout``).
    """
    b = [r["beyond_seed_metrics"] for r in sorted(results, key=lambda r: r["seed"])]
    rows = []
    for label, arm_a, arm_b in POLICY_PAIRS:
        for metric, key in TRUTH_METRICS.items():
            ci = paired_ci([x[f"{arm_a}_{key}"] for x in b], [x[f"{arm_b}_{key}"] for x in b])
            rows.append({"comparison": label, "metric": metric, **ci, "verdict": verdict(ci)})
    for policy in ("learned", "behaviour", "fixed_gain"):
        ci = paired_ci([x[f"{policy}_ips"] for x in b], [x[f"{policy}_true_value_heldout"] for x in b])
        rows.append({"comparison": f"IPS - truth ({policy})", "metric": "true_value_heldout", **ci,
                     "verdict": verdict(ci)})
    return rows


def per_seed_figures(results: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """``{seed: {figure: value}}``: every figure the comparisons use, so they can be recomputed."""
    keys = sorted({f"{p}_{k}" for p in ("learned", "behaviour", "fixed_gain")
                   for k in ("ips", *TRUTH_METRICS.values(), "true_value_heldout")})
    return {str(r["seed"]): {k: r["beyond_seed_metrics"][k] for k in keys} for r in results}


def comparisons_from_figures(per_seed: Mapping[str, Mapping[str, float]]) -> list[dict[str, Any]]:
    """:func:`comparisons` recomputed from :func:`per_seed_figures` (what the freshness test does)."""
    return comparisons([{"seed": int(s), "beyond_seed_metrics": f} for s, f in per_seed.items()])


def check_pass_rates(results: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Share of seeds on which each seed-file check is true."""
    names = sorted(results[0]["checks"])
    return {n: sum(bool(r["checks"][n]) for r in results) / len(results) for n in names}


def frontier(results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per lambda: mean value reward and CPC overshoot over seeds, with standard errors."""
    seeds = sorted(r["seed"] for r in results)
    by_lambda: dict[float, list[Mapping[str, float]]] = {}
    for r in results:
        for row in r["lambda_sweep"]:
            by_lambda.setdefault(row["lambda"], []).append(row)
    out = []
    for lam, rows in sorted(by_lambda.items()):
        value = np.array([x["value"] for x in rows])
        over = np.array([x["cpc_overshoot"] for x in rows])
        se = (lambda v: float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else 0.0)
        out.append({"lambda": lam, "value": float(value.mean()), "cpc_overshoot": float(over.mean()),
                    "value_err": se(value), "cpc_overshoot_err": se(over), "seeds": seeds})
    return out


def reference_points(results: Sequence[Mapping[str, Any]]) -> dict[str, tuple[float, float]]:
    """Mean (CPC overshoot, value) of the fixed-gain and behaviour policies over seeds."""
    b = [r["beyond_seed_metrics"] for r in results]
    return {p: (float(np.mean([x[f"{p}_cpc_overshoot"] for x in b])), float(np.mean([x[f"{p}_value"] for x in b])))
            for p in ("fixed_gain", "behaviour")}


def across_gamma(main: Sequence[Mapping[str, Any]], ablation: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Paired per seed: the learned policy at the run's gamma minus the learned policy at gamma = 0.

    Same seed, same campaigns, logged data and evaluation days (gamma changes neither the
    data collection nor the number of generator draws), so only the critic's backups differ.
    """
    a = {r["seed"]: r["beyond_seed_metrics"] for r in main}
    b = {r["seed"]: r["beyond_seed_metrics"] for r in ablation}
    seeds = sorted(set(a) & set(b))
    rows = []
    for metric, key in TRUTH_METRICS.items():
        ci = paired_ci([a[s][f"learned_{key}"] for s in seeds], [b[s][f"learned_{key}"] for s in seeds])
        rows.append({"comparison": "learned(gamma) - learned(gamma=0)", "metric": metric, **ci, "verdict": verdict(ci)})
    return rows


def load(folder: Path) -> list[dict[str, Any]]:
    """Every ``seed-<N>.json`` under ``folder`` (any depth), sorted by seed; refuses mixed configurations."""
    results = [json.loads(p.read_text()) for p in folder.rglob("seed-*.json")]
    results.sort(key=lambda r: r["seed"])
    if not results:
        raise FileNotFoundError(f"no seed-*.json in {folder}")
    params = [{k: v for k, v in r["provenance"]["parameters"].items() if k != "seed"} for r in results]
    if any(p != params[0] for p in params):
        raise ValueError(f"{folder}: seeds were run with different parameters")
    current = source_hashes("pinterest_rlbp")
    stale = [r["seed"] for r in results if r["provenance"]["source_sha256"] != current]
    if stale:
        raise ValueError(f"{folder}: seeds {stale} were run with other sources; rerun them")
    return results


def comparison_plot(rows: Sequence[Mapping[str, Any]]):
    """Each paired difference with its 95% interval; zero marked."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.2, 4.2))
    ax = fig.subplots()
    labels = [f"{r['comparison']}: {r['metric']}" for r in rows]
    y = np.arange(len(rows))[::-1]
    means = np.array([r["mean_difference"] for r in rows])
    err = np.array([[r["mean_difference"] - r["ci95_low"] for r in rows], [r["ci95_high"] - r["mean_difference"] for r in rows]])
    ax.errorbar(means, y, xerr=err, fmt="o", capsize=4)
    ax.axvline(0.0, color="k", lw=1, ls="--")
    ax.set_yticks(y, labels, fontsize=8)
    ax.set(xlabel=f"paired mean difference, 95% CI (n = {rows[0]['n']} seeds)",
           title="pinterest_rlbp: policy comparisons across seeds")
    fig.tight_layout()
    return fig
