"""The many-seed study of ``pinterest_rlbp`` (``make rlbp-study``): policies, lambda, backups, headroom, data.

Per seed, :func:`litrepro.rlbp.experiment.run_arms` runs the notebook's pipeline once
for every critic backup (``max_min``, the seed's, and our ``fused_greedy``, ``policy``
and ``none``), on the same campaigns, logged data and evaluation days, with common
random numbers; it also scores the nine constant actions on those days (the headroom).
A second pass repeats ``max_min`` and the best other backup with more logged days.
``python -m litrepro study rlbp-study`` writes, into ``rendered/pinterest_rlbp/``:

* ``policy_comparison.json``: the seed's backup, learned vs each baseline and IPS - truth;
* ``lambda_frontier.json``: value and CPC overshoot per lambda, with paired intervals
  between neighbouring lambdas;
* ``backup_study.json``: per backup, learned - fixed gain and learned - each oracle, the
  share of the headroom, and the data-scaling rows;
* their PNGs.

Every interval is a paired per-seed difference with a 95% Student-t interval
(:func:`litrepro.stats.paired_ci`), except the headroom share, a ratio of paired means
with a 95% paired bootstrap interval (scipy.stats.bootstrap); error bars are standard
errors (:func:`litrepro.stats.standard_error`).  A study refuses to summarise a seed on
which any check or extra check failed, or two seeds that share evaluation days
(:func:`verify`); and it writes nothing when any row differs from its recomputation by a
plain loop over the per-seed values, paired by seed (:func:`check_comparisons`,
:func:`check_frontier`, :func:`check_backups`, :func:`refuse_mismatches`; the headroom
share is recomputed as a ratio of paired means, its bootstrap interval is not).
"""

from __future__ import annotations

import math
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
#: plots), ``seeding.py``, ``stats.py`` (every interval and error bar) and the parameter file.
#: Other studies' own modules: they run the stages but cannot change these studies' numbers; each of them
#: hashes its own module beside :func:`source_hashes`.
OTHER_STUDIES = ("rlbp/diagnosis.py", "rlbp/td_calibration.py")
DISPLAY_ONLY = (".ipynb", "rlbp/plots.py", "litrepro/plotting.py", "litrepro/report.py", "litrepro/recorded.py",
                "recorded_figures/pinterest_rlbp.json", "litrepro/atomic.py", "litrepro/errors.py",
                "litrepro/params.py", "litrepro/paths.py", "litrepro/guard.py", "litrepro/__init__.py")


def source_hashes() -> dict[str, str]:
    """sha256 of the files that determine the study's numbers: the method's sources less :data:`DISPLAY_ONLY`."""
    import hashlib

    from litrepro.paths import ROOT
    from litrepro.provenance import source_hashes as method_hashes

    out = {k: v for k, v in method_hashes("pinterest_rlbp").items() if not k.endswith(DISPLAY_ONLY + OTHER_STUDIES)}
    out["src/litrepro/stats.py"] = hashlib.sha256((ROOT / "src/litrepro/stats.py").read_bytes()).hexdigest()  # intervals
    return out


class StudyRefused(ValueError):
    """A seed's checks failed, or the seeds are not independent: no interval is written over them."""


def failed_checks(result: Mapping[str, Any]) -> list[str]:
    """Names of the checks and extra checks that are false in one seed's results."""
    both = {**result["checks"], **result.get("extra_checks", {})}
    return sorted(k for k, v in both.items() if v is not True)


def refused_seeds(results: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """``{seed: failed check names}`` for the seeds of one arm whose checks failed (empty when all passed)."""
    return {str(r["seed"]): failed_checks(r) for r in results if failed_checks(r)}


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


# --- Every row recomputed by a plain loop over the per-seed values (refuse on a mismatch) ------

#: Largest relative gap between a row and its plain-loop recomputation.
REL_TOL = 1e-9


def _by_seed(results: Sequence[Mapping[str, Any]], value) -> dict[int, float]:
    """{seed: value(result)}; a seed that appears twice is refused (the pairing would be ambiguous)."""
    out: dict[int, float] = {}
    for r in results:
        if r["seed"] in out:
            raise StudyRefused(f"seed {r['seed']} appears twice; rows cannot be paired by seed")
        out[r["seed"]] = value(r)
    return out


def _plain_row(a: Mapping[int, float], b: Mapping[int, float]) -> tuple[int, float, float, float]:
    """(n, mean, low, high) of a - b paired by seed, by a plain loop: mean = sum d / n,
    s^2 = sum (d - mean)^2 / (n - 1), half-width t_{0.975, n-1} s / sqrt(n) (0 when s = 0)."""
    from scipy import stats as scipy_stats

    if set(a) != set(b):
        raise StudyRefused(f"arms cover different seeds: {sorted(set(a) ^ set(b))}")
    d = [a[s] - b[s] for s in sorted(a)]
    n = len(d)
    mean = sum(d) / n
    var = sum((x - mean) ** 2 for x in d) / (n - 1) if n > 1 else 0.0
    half = float(scipy_stats.t.ppf(0.975, n - 1)) * math.sqrt(var / n) if var > 0 else 0.0
    return n, mean, mean - half, mean + half


def _plain_mean_se(values: Mapping[int, float]) -> tuple[float, float]:
    xs = [values[s] for s in sorted(values)]
    n = len(xs)
    mean = sum(xs) / n
    se = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) / math.sqrt(n) if n > 1 else 0.0
    return mean, se


def _close(got: Sequence[float], want: Sequence[float]) -> bool:
    scale = max([abs(x) for x in want] + [1e-12])
    return all(abs(g - w) <= REL_TOL * scale for g, w in zip(got, want))


def _row_ok(row: Mapping[str, Any], a: Mapping[int, float], b: Mapping[int, float]) -> bool:
    n, mean, low, high = _plain_row(a, b)
    return row["n"] == n and _close((row["mean_difference"], row["ci95_low"], row["ci95_high"]), (mean, low, high))


def _beyond(key: str):
    return lambda r: r["beyond_seed_metrics"][key]


def check_comparisons(results: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The rows of :func:`comparisons` that differ from a plain-loop recomputation (labels parsed afresh)."""
    bad = []
    for row in rows:
        label = row["comparison"]
        if label.startswith("IPS - truth ("):
            policy = label[len("IPS - truth ("):-1]
            keys = (f"{policy}_ips", f"{policy}_true_value_heldout")
        else:
            arm_a, arm_b = label.split(" - ")
            keys = (f"{arm_a}_{row['metric']}", f"{arm_b}_{row['metric']}")
        if not _row_ok(row, _by_seed(results, _beyond(keys[0])), _by_seed(results, _beyond(keys[1]))):
            bad.append(f"policy_comparison: {label} ({row['metric']})")
    expected = len(POLICY_PAIRS) * len(TRUTH_METRICS) + 3
    if len(rows) != expected:
        bad.append(f"policy_comparison: {len(rows)} rows, expected {expected}")
    return bad


def check_frontier(results: Sequence[Mapping[str, Any]], front: Mapping[str, Any]) -> list[str]:
    """Each lambda's mean and standard error, and each neighbour difference, recomputed by plain loops."""
    bad = []

    def at(lam, metric):
        return _by_seed(results, lambda r: next(x[metric] for x in r["lambda_sweep"] if x["lambda"] == lam))
    for p in front["points"]:
        for metric in ("value", "cpc_overshoot"):
            mean, se = _plain_mean_se(at(p["lambda"], metric))
            if not _close((p[metric], p[f"{metric}_err"]), (mean, se)):
                bad.append(f"lambda_frontier: lambda {p['lambda']:g} {metric}")
        if p["seeds"] != sorted(r["seed"] for r in results):
            bad.append(f"lambda_frontier: lambda {p['lambda']:g} seeds")
    for row in front["neighbour_differences"]:
        hi, lo = (float(x.split()[1]) for x in row["comparison"].split(" - "))
        if not _row_ok(row, at(hi, row["metric"]), at(lo, row["metric"])):
            bad.append(f"lambda_frontier: {row['comparison']} ({row['metric']})")
    return bad


def check_backups(arms: Mapping[str, Sequence[Mapping[str, Any]]], rows: Sequence[Mapping[str, Any]],
                  head: Mapping[str, Any], scaling: Sequence[Mapping[str, Any]],
                  by_days: Mapping[int, Mapping[str, Sequence[Mapping[str, Any]]]]) -> list[str]:
    """Every backup row, headroom row and scaling row recomputed by plain loops, paired by seed."""
    bad = []
    for row in rows:
        results = arms[row["backup"]]
        learned = _by_seed(results, _beyond("learned_true_value"))
        fixed = _by_seed(results, lambda r: r["headroom"]["fixed_gain"])
        checks = [("learned_minus_fixed", learned, fixed),
                  ("cpc_overshoot_minus_fixed", _by_seed(results, _beyond("learned_cpc_overshoot")),
                   _by_seed(results, _beyond("fixed_gain_cpc_overshoot")))]
        for o in ORACLES:
            oracle = _by_seed(results, lambda r, o=o: r["headroom"][o])
            checks.append((f"learned_minus_{o}", learned, oracle))
            gain = sum(learned[s] - fixed[s] for s in learned) / len(learned)
            room = sum(oracle[s] - fixed[s] for s in oracle) / len(oracle)
            if not _close((row[f"share_of_{o}_headroom"]["share"],), (gain / room,)):
                bad.append(f"backup_study: {row['backup']} share_of_{o}_headroom")
        for key, a, b in checks:
            if row["n"] != len(a) or not _row_ok(row[key], a, b):
                bad.append(f"backup_study: {row['backup']} {key}")
    base = arms["max_min"]
    fixed = _by_seed(base, lambda r: r["headroom"]["fixed_gain"])
    for row, o in zip(head["oracle_minus_fixed"], ORACLES):
        if not _row_ok(row, _by_seed(base, lambda r, o=o: r["headroom"][o]), fixed):
            bad.append(f"backup_study: headroom {o} - fixed_gain")
    for row in scaling:
        results = by_days[row["logged_days"]][row["backup"]]
        learned = _by_seed(results, _beyond("learned_true_value"))
        for key, other in (("learned_minus_fixed", "fixed_gain"), ("learned_minus_best_per_kind", "best_per_kind")):
            if not _row_ok(row[key], learned, _by_seed(results, lambda r, k=other: r["headroom"][k])):
                bad.append(f"backup_study: scaling {row['logged_days']} days {row['backup']} {key}")
    return bad


def refuse_mismatches(bad: Sequence[str]) -> None:
    """Raise :class:`StudyRefused` when any row differs from its plain-loop recomputation."""
    if bad:
        raise StudyRefused(f"rows differ from their plain-loop recomputation: {'; '.join(bad[:5])}"
                           f"{' ...' if len(bad) > 5 else ''}")
