"""The many-seed study of ``pinterest_rlbp`` (``make rlbp-study``): policies, lambda, backups, headroom, data.

Per seed, :func:`litrepro.rlbp.experiment.run_arms` runs the notebook's pipeline once
for every critic backup (``max_min``, the seed's, and our ``fused_greedy``, ``policy``
and ``none``), on the same campaigns, logged data and evaluation days, with common
random numbers; it also scores the nine constant actions on those days (the headroom).
A second pass repeats ``max_min`` and the best other backup with more logged days.
``studies/rlbp_policy_study.py`` writes, into ``rendered/pinterest_rlbp/``:

* ``policy_comparison.json``: the seed's backup, learned vs each baseline and IPS - truth;
* ``lambda_frontier.json``: value and CPC overshoot per lambda, with paired intervals
  between neighbouring lambdas;
* ``backup_study.json``: per backup, learned - fixed gain and learned - each oracle, the
  share of the headroom, and the data-scaling rows;
* their PNGs.

Every interval is a paired per-seed difference with a 95% Student-t interval
(:func:`litrepro.stats.paired_ci`), except the headroom share, a ratio of paired means
with a 95% paired bootstrap interval (scipy.stats.bootstrap).  A study refuses to
summarise a seed on which any check or extra check failed, or two seeds that share
evaluation days (:func:`verify`).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from litrepro.paths import RENDERED
from litrepro.stats import paired_ci, standard_error, verdict

FOLDER = RENDERED / "pinterest_rlbp"
COMPARISON = FOLDER / "policy_comparison.json"
FRONTIER = FOLDER / "lambda_frontier.json"
BACKUP_STUDY = FOLDER / "backup_study.json"
BACKUPS = ("max_min", "fused_greedy", "policy", "none")
SCALING_DAYS = (4, 8, 16)
#: (comparison, arm a, arm b) for the simulated-truth differences a - b.
POLICY_PAIRS = (("learned - fixed_gain", "learned", "fixed_gain"), ("learned - behaviour", "learned", "behaviour"))
#: metric name in the comparison -> key suffix in ``beyond_seed_metrics``.
TRUTH_METRICS = {"true_value": "true_value", "value": "value", "cpc_overshoot": "cpc_overshoot"}
ORACLES = ("best_constant", "best_per_kind", "best_per_campaign")


#: Method sources that cannot change the study's numbers: the study calls the package directly, so the
#: notebook, the figures and printing, and the plumbing (file writing, parameter validation, paths, the
#: offline guard, error types) can change without making it stale.  What remains: ``rlbp/`` (less its
#: plots), ``seeding.py`` and the parameter file.
DISPLAY_ONLY = (".ipynb", "rlbp/plots.py", "litrepro/plotting.py", "litrepro/report.py", "litrepro/recorded.py",
                "recorded_figures/pinterest_rlbp.json", "litrepro/atomic.py", "litrepro/errors.py",
                "litrepro/params.py", "litrepro/paths.py", "litrepro/guard.py", "litrepro/__init__.py")


def source_hashes() -> dict[str, str]:
    """sha256 of the files that determine the study's numbers: the method's sources less :data:`DISPLAY_ONLY`."""
    from litrepro.provenance import source_hashes as method_hashes

    return {k: v for k, v in method_hashes("pinterest_rlbp").items() if not k.endswith(DISPLAY_ONLY)}


class StudyRefused(ValueError):
    """A seed's checks failed, or the seeds are not independent: no interval is written over them."""


def failed_checks(result: Mapping[str, Any]) -> list[str]:
    """Names of the checks and extra checks that are false in one seed's results."""
    both = {**result["checks"], **result.get("extra_checks", {})}
    return sorted(k for k, v in both.items() if v is not True)


def verify(results: Sequence[Mapping[str, Any]], label: str) -> None:
    """Refuse (raise :class:`StudyRefused`) a seed whose checks failed, and seeds that share evaluation days."""
    bad = {r["seed"]: failed_checks(r) for r in results if failed_checks(r)}
    if bad:
        raise StudyRefused(f"{label}: checks failed on seeds {bad}; no interval is written over them")
    seen: dict[str, int] = {}
    for r in results:
        for h in r["eval_day_hashes"]:
            if h in seen and seen[h] != r["seed"]:
                raise StudyRefused(f"{label}: seeds {seen[h]} and {r['seed']} share an evaluation day")
            seen[h] = r["seed"]


def _ci_row(label: str, metric: str, a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    ci = paired_ci(a, b)
    return {"comparison": label, "metric": metric, **ci, "verdict": verdict(ci)}


def comparisons(results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Paired differences over seeds: learned vs each baseline on simulated truth, and IPS - truth.

    IPS re-weights the held-out campaigns' logged decisions, so it is compared with the
    truth over those same campaigns (``true_value_heldout``).
    """
    b = [r["beyond_seed_metrics"] for r in sorted(results, key=lambda r: r["seed"])]
    rows = [_ci_row(label, metric, [x[f"{arm_a}_{key}"] for x in b], [x[f"{arm_b}_{key}"] for x in b])
            for label, arm_a, arm_b in POLICY_PAIRS for metric, key in TRUTH_METRICS.items()]
    for policy in ("learned", "behaviour", "fixed_gain"):
        rows.append(_ci_row(f"IPS - truth ({policy})", "true_value_heldout", [x[f"{policy}_ips"] for x in b],
                            [x[f"{policy}_true_value_heldout"] for x in b]))
    return rows


def per_seed_figures(results: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """``{seed: {figure: value}}``: every figure the comparisons use, so they can be recomputed."""
    keys = sorted({f"{p}_{k}" for p in ("learned", "behaviour", "fixed_gain")
                   for k in ("ips", *TRUTH_METRICS.values(), "true_value_heldout")} | {"control_ratio"})
    return {str(r["seed"]): {k: r["beyond_seed_metrics"][k] for k in keys} for r in results}


def comparisons_from_figures(per_seed: Mapping[str, Mapping[str, float]]) -> list[dict[str, Any]]:
    """:func:`comparisons` recomputed from :func:`per_seed_figures` (what the freshness test does)."""
    return comparisons([{"seed": int(s), "beyond_seed_metrics": f} for s, f in per_seed.items()])


def check_pass_rates(results: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Share of seeds on which each check and extra check is true."""
    names = sorted({**results[0]["checks"], **results[0]["extra_checks"]})
    return {n: sum({**r["checks"], **r["extra_checks"]}[n] is True for r in results) / len(results) for n in names}


def frontier(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per lambda: mean value reward and CPC overshoot with standard errors, and paired
    intervals of each between neighbouring lambdas (same seed, data and days)."""
    rows = sorted(results, key=lambda r: r["seed"])
    lambdas = [x["lambda"] for x in rows[0]["lambda_sweep"]]
    table = {lam: [next(x for x in r["lambda_sweep"] if x["lambda"] == lam) for r in rows] for lam in lambdas}
    points = []
    for lam in lambdas:
        value = np.array([x["value"] for x in table[lam]])
        over = np.array([x["cpc_overshoot"] for x in table[lam]])
        points.append({"lambda": lam, "value": float(value.mean()), "cpc_overshoot": float(over.mean()),
                       "value_err": standard_error(value), "cpc_overshoot_err": standard_error(over),
                       "seeds": [r["seed"] for r in rows]})
    steps = [_ci_row(f"lambda {hi:g} - lambda {lo:g}", metric, [x[metric] for x in table[hi]],
                     [x[metric] for x in table[lo]])
             for lo, hi in zip(lambdas, lambdas[1:]) for metric in ("cpc_overshoot", "value")]
    return {"points": points, "neighbour_differences": steps}


def reference_points(results: Sequence[Mapping[str, Any]]) -> dict[str, tuple[float, float]]:
    """Mean (CPC overshoot, value) of the fixed-gain and behaviour policies over seeds."""
    b = [r["beyond_seed_metrics"] for r in results]
    return {p: (float(np.mean([x[f"{p}_cpc_overshoot"] for x in b])), float(np.mean([x[f"{p}_value"] for x in b])))
            for p in ("fixed_gain", "behaviour")}


def headroom_share(learned_minus_fixed: Sequence[float], oracle_minus_fixed: Sequence[float]) -> dict[str, float]:
    """mean(learned - fixed) / mean(oracle - fixed), with a 95% paired bootstrap interval over seeds.

    scipy.stats.bootstrap (BCa, 9999 resamples, a fixed numpy generator), resampling
    seeds with their pair of differences together.
    """
    from scipy import stats

    a, b = np.asarray(learned_minus_fixed, float), np.asarray(oracle_minus_fixed, float)
    share = float(a.mean() / b.mean())
    res = stats.bootstrap((a, b), lambda x, y, axis=-1: x.mean(axis) / y.mean(axis), paired=True,
                          vectorized=True, n_resamples=9999, confidence_level=0.95, method="BCa",
                          random_state=np.random.default_rng(0))
    return {"share": share, "ci95_low": float(res.confidence_interval.low), "ci95_high": float(res.confidence_interval.high)}


def headroom_summary(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Mean truth of each constant action and each oracle, and paired intervals of oracle - fixed gain."""
    rows = sorted(results, key=lambda r: r["seed"])
    h = [r["headroom"] for r in rows]
    fixed = [x["fixed_gain"] for x in h]
    return {"constant_actions_mean": np.mean([x["constant"] for x in h], axis=0).tolist(),
            "best_constant_action_counts": {str(a): sum(x["best_constant_action"] == a for x in h) for a in range(9)},
            "fixed_gain_mean": float(np.mean(fixed)),
            **{f"{o}_mean": float(np.mean([x[o] for x in h])) for o in ORACLES},
            "oracle_minus_fixed": [_ci_row(f"{o} - fixed_gain", "true_value", [x[o] for x in h], fixed)
                                   for o in ORACLES]}


def backup_rows(arms: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Per backup: learned - fixed gain, learned - each oracle (paired CIs), and the share of each headroom."""
    out = []
    for backup, results in arms.items():
        rows = sorted(results, key=lambda r: r["seed"])
        learned = [r["beyond_seed_metrics"]["learned_true_value"] for r in rows]
        fixed = [r["headroom"]["fixed_gain"] for r in rows]
        entry = {"backup": backup, "n": len(rows),
                 "learned_minus_fixed": _ci_row("learned - fixed_gain", "true_value", learned, fixed),
                 "cpc_overshoot_minus_fixed": _ci_row(
                     "learned - fixed_gain", "cpc_overshoot",
                     [r["beyond_seed_metrics"]["learned_cpc_overshoot"] for r in rows],
                     [r["beyond_seed_metrics"]["fixed_gain_cpc_overshoot"] for r in rows])}
        for o in ORACLES:
            oracle = [r["headroom"][o] for r in rows]
            entry[f"learned_minus_{o}"] = _ci_row(f"learned - {o}", "true_value", learned, oracle)
            entry[f"share_of_{o}_headroom"] = headroom_share([x - y for x, y in zip(learned, fixed)],
                                                             [x - y for x, y in zip(oracle, fixed)])
        out.append(entry)
    return out


def best_other(rows: Sequence[Mapping[str, Any]]) -> str:
    """The non-seed backup with the highest mean learned - fixed gain."""
    others = [r for r in rows if r["backup"] != "max_min"]
    return max(others, key=lambda r: r["learned_minus_fixed"]["mean_difference"])["backup"]


def scaling_rows(by_days: Mapping[int, Mapping[str, Sequence[Mapping[str, Any]]]]) -> list[dict[str, Any]]:
    """Per (logged_days, backup): learned - fixed gain and learned - best_per_kind, paired CIs."""
    out = []
    for days, arms in sorted(by_days.items()):
        for backup, results in arms.items():
            rows = sorted(results, key=lambda r: r["seed"])
            learned = [r["beyond_seed_metrics"]["learned_true_value"] for r in rows]
            out.append({"logged_days": days, "backup": backup,
                        "learned_minus_fixed": _ci_row("learned - fixed_gain", "true_value", learned,
                                                       [r["headroom"]["fixed_gain"] for r in rows]),
                        "learned_minus_best_per_kind": _ci_row("learned - best_per_kind", "true_value", learned,
                                                               [r["headroom"]["best_per_kind"] for r in rows])})
    return out


def comparison_plot(rows: Sequence[Mapping[str, Any]]):
    """Each paired difference with its 95% interval; zero marked."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.0, 4.6))
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


def backup_plot(data: Mapping[str, Any]):
    """Forest plot: per backup, learned - fixed gain and learned - the per-kind oracle; the headroom band."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.0, 5.2))
    ax = fig.subplots()
    rows, labels = [], []
    for r in data["backups"]:
        rows += [r["learned_minus_fixed"], r["learned_minus_best_per_kind"]]
        labels += [f"{r['backup']}: learned - fixed gain", f"{r['backup']}: learned - per-kind oracle"]
    for r in data["scaling"]:
        if r["logged_days"] != SCALING_DAYS[0]:
            rows.append(r["learned_minus_fixed"])
            labels.append(f"{r['backup']}, {r['logged_days']} logged days: learned - fixed gain")
    y = np.arange(len(rows))[::-1]
    for yi, r in zip(y, rows):
        color = "C0" if "fixed_gain" in r["comparison"] else "C1"
        ax.errorbar(r["mean_difference"], yi, xerr=[[r["mean_difference"] - r["ci95_low"]],
                                                     [r["ci95_high"] - r["mean_difference"]]],
                    fmt="o", color=color, capsize=3)
    head = next(x for x in data["headroom"]["oracle_minus_fixed"] if x["comparison"].startswith("best_per_kind"))
    ax.axvspan(0.0, head["mean_difference"], color="C2", alpha=0.15, label="headroom: per-kind oracle - fixed gain")
    ax.axvline(0.0, color="k", lw=1, ls="--")
    ax.set_yticks(y, labels, fontsize=8)
    ax.legend(loc="lower left", fontsize=8)
    ax.set(xlabel=f"paired difference in fused true value, 95% CI (n = {data['n_seeds']} seeds)",
           title="pinterest_rlbp: which critic backup lets the learned policy win")
    fig.tight_layout()
    return fig
