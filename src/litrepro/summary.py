"""Cross-seed summaries in the seed files' schema.

``summary.json`` of a method holds ``schema_version``, ``method``, ``seeds``,
``per_seed`` (seed, metrics, checks, device), ``metrics`` as
``{name: {mean, std, n}}`` with the *sample* standard deviation (ddof = 1, as
in the seed files; ``null`` when n < 2), ``checks`` (true only when true for
every seed), the same statistics for our beyond-seed figures, a comparison
with the recorded figures, and provenance.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from litrepro import calibration, methods, recorded
from litrepro.paths import ROOT
from litrepro.provenance import package_versions, rendered_hashes
from litrepro.report import fmt, fmt_zero
from litrepro.results import read_result, seed_result_names  # noqa: F401  (both re-exported)
from litrepro.stats import fmt_ci, verdict

SCHEMA_VERSION = 2
#: Per-seed keys copied verbatim from a seed's results when present (waypoint's audit trail).
PER_SEED_EXTRAS = ("history", "teacher_snapshot_lineage", "teacher_rl_reward", "teacher_rl_audit",
                   "frozen_teacher_parameter_deltas_l2", "frozen_rl_snapshot_parameter_deltas_l2", "extra_checks")


def mean_std(values: Iterable[float]) -> dict[str, Any]:
    """{mean, std (ddof = 1, None when n < 2), n}."""
    xs = [float(v) for v in values]
    n = len(xs)
    if n == 0:
        raise ValueError("mean_std of no values")
    mean = math.fsum(xs) / n
    std = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else None
    return {"mean": mean, "std": std, "n": n}


def _aggregate(rows: list[Mapping[str, float]]) -> dict[str, dict]:
    names = sorted(set().union(*rows)) if rows else []
    return {name: mean_std(r[name] for r in rows if name in r) for name in names}


def _combine_checks(rows: list[Mapping[str, Any]]) -> dict[str, Any]:
    """A boolean check is true when true for every seed; a string value is kept when all seeds agree."""
    out = {}
    for name in sorted(set().union(*rows)) if rows else []:
        values = [r.get(name) for r in rows]
        if all(isinstance(v, bool) for v in values):
            out[name] = all(values)
        else:
            out[name] = values[0] if len(set(map(str, values))) == 1 else values
    return out


def comparison(method: str, metrics: Mapping[str, dict]) -> dict[str, dict]:
    """This run's mean/std beside the seed file's, per metric (recorded side null if absent)."""
    rec = recorded.aggregate_metrics(method)
    return {name: {"this_run": metrics.get(name), "recorded": rec.get(name)} for name in sorted(set(metrics) | set(rec))}


def summarise(method: str, results: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The summary of ``results`` (one dict per seed, as written to ``seed-<N>.json``)."""
    results = sorted(results, key=lambda r: r["seed"])
    per_seed = []
    for r in results:
        row = {"seed": r["seed"], "metrics": r["metrics"], "checks": r["checks"],
               "execution_device": r["execution_device"], "execution_accelerator": r["execution_accelerator"]}
        row.update({k: r[k] for k in PER_SEED_EXTRAS if k in r})
        per_seed.append(row)
    metrics = _aggregate([r["metrics"] for r in results])
    seed_file = recorded.load(method)
    summary = {
        "schema_version": SCHEMA_VERSION,
        "method": method,
        "seeds": [r["seed"] for r in results],
        "per_seed": per_seed,
        "metrics": metrics,
        "checks": _combine_checks([r["checks"] for r in results]),
        "check_notes": results[0].get("check_notes", {}) if results else {},
        # Our own checks beyond the seed file's names, kept apart from them.
        "extra_checks": _combine_checks([r.get("extra_checks", {}) for r in results]),
        "beyond_seed_metrics": _aggregate([r.get("beyond_seed_metrics", {}) for r in results]),
        "comparison_with_recorded": comparison(method, metrics),
        "recorded_seed_file": seed_file["_file"] if seed_file else None,
        "provenance": {
            "source_sha256": rendered_hashes(method),
            "dataset_fingerprints": {str(r["seed"]): r["dataset_fingerprint"] for r in results},
            "parameters": {str(r["seed"]): r["provenance"]["parameters"] for r in results},
            "packages": package_versions(),
        },
    }
    summary.update(calibration_extras(results, seed_file))
    summary.update(methods.get(method).summary_extras(results))        # a method's own calibration replaces it
    return summary


def calibration_extras(results: list[Mapping[str, Any]], seed_file: Mapping[str, Any] | None) -> dict[str, Any]:
    """``calibration`` (one row per recorded metric, z at both scales and a Welch test over seeds, see
    :mod:`litrepro.calibration`) and ``calibration_verdicts``; a method whose ``summary_extras`` writes its own
    (``waypoint_opd``, with its per-step histories) overrides both."""
    rows = calibration.metric_rows(results, seed_file)
    return {"calibration": rows, "calibration_verdicts": calibration.verdicts(rows) if rows else None}


# --- Helpers of the cross-seed summary notebook (notebooks/summary.ipynb) -------------------

def load_seed_results(results_dir: str | Path, method: str) -> list[dict[str, Any]]:
    """Every readable ``<results_dir>/<method>/seed-<N>.json`` that the folder's journal records, sorted by
    seed: the seeds the runner's summary.json covers (:func:`litrepro.results.journalled_seed_results`), and
    files whose bytes git has committed (as a run adopts them); any other seed file is named in one warning
    line on stderr and ignored."""
    import sys

    from litrepro import outdir
    from litrepro.results import committed_blobs, ignored_line, journalled_seed_results, parse_result

    root = Path(results_dir)
    root = root if root.is_absolute() else ROOT / root
    if not (root / method).is_dir():
        return []
    found, ignored, _refused = journalled_seed_results(outdir.OutDir(root), method, committed_blobs(root / method))
    if ignored:
        print(ignored_line(root / method, ignored), file=sys.stderr)
    return [r for r in (parse_result(data) for _, data in found) if r is not None]


def _pm(stats: Mapping[str, Any] | None, digits: int = 4, zero: bool = False, count: bool = False) -> str:
    """``mean ± std (n=..)``; with ``zero``, both through :func:`report.fmt_zero` (rounding residue as a bound);
    with ``count`` (integer figures such as call counts), plainly, without a bound."""
    if not stats:
        return "-"
    if count:
        std = "n/a" if stats.get("std") is None else fmt(float(stats["std"]), 2)
        return f"{fmt(float(stats['mean']), digits)} ± {std} (n={stats['n']})"
    show = fmt_zero if zero else (lambda v: fmt(v, digits))
    std = "n/a" if stats.get("std") is None else (fmt_zero(stats["std"]) if zero else fmt(stats["std"], 2))
    return f"{show(stats['mean'])} ± {std} (n={stats['n']})"


def metrics_table(method: str, results: list[Mapping[str, Any]]):
    """This run's mean ± std per metric beside the seed file's, as a DataFrame of strings.

    A metric the seed file records as exactly 0 prints as a bound when it is rounding
    residue (see :func:`litrepro.report.fmt_zero`).
    """
    ours = _aggregate([r["metrics"] for r in results])
    rec = recorded.aggregate_metrics(method)
    counts = {n for n in ours if all(isinstance(r["metrics"].get(n), int) and not isinstance(r["metrics"].get(n), bool)
                                     for r in results)}
    rows = []
    for n in sorted(set(ours) | set(rec)):
        zero = n in rec and rec[n]["mean"] == 0 and not rec[n].get("std") and n not in counts
        rows.append({"metric": n, "this run": _pm(ours.get(n), zero=zero, count=n in counts),
                     "recorded (seed file)": _pm(rec.get(n), count=n in counts)})
    return pd.DataFrame(rows).set_index("metric")


def calibration_table(method: str, results: list[Mapping[str, Any]]):
    """The calibration rows of ``method`` over ``results`` (both scales, Welch), as strings, and their verdicts.

    ``(table, verdicts)``; ``(None, None)`` without recorded figures.  The same rows as ``summary.json``'s.
    """
    extras = {**calibration_extras(results, recorded.load(method)), **methods.get(method).summary_extras(results)}
    rows = extras.get("calibration") or []
    return (calibration.table(rows), extras["calibration_verdicts"]) if rows else (None, None)


def study_table(path: str | Path, key: str | None = None):
    """The paired comparisons of a many-seed study JSON as strings, or ``None`` when absent.

    Accepts ``{"comparisons": [...]}`` (pinterest_rlbp) and ``{"differences": [...]}`` or a
    plain list of rows; each row has comparison, metric, n, mean_difference, ci95_low/high.
    ``key`` names another list of such rows, dotted for a nested one (``"neighbour_differences"``
    of ``lambda_frontier.json``, ``"headroom.oracle_minus_fixed"`` of ``backup_study.json``).
    """
    path = Path(path)
    path = path if path.is_absolute() else ROOT / path
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    if key is not None:
        for part in key.split("."):
            data = data[part]
    rows = data if isinstance(data, list) else data.get("comparisons") or data.get("differences") or []
    standard = {"comparison", "metric", "n", "mean_difference", "ci95_low", "ci95_high", "verdict"}
    extra = sorted({k for r in rows for k in r} - standard)       # e.g. student_start, teacher_rl_rollouts
    table = [{**{k: str(r.get(k, "")) for k in extra}, "comparison": r["comparison"], "metric": r["metric"],
              "n": r["n"], "mean difference": fmt(r["mean_difference"], 2),
              "95% CI (bounds rounded outward)": fmt_ci(r["ci95_low"], r["ci95_high"]),
              "verdict": verdict(r)} for r in rows]
    return pd.DataFrame(table).set_index([*extra, "comparison", "metric"])


def backup_table(path: str | Path):
    """``pinterest_rlbp``'s backup study as strings, or ``None`` when absent: per backup (and logged days),
    learned - fixed gain and learned - per-kind oracle with 95% CIs, and the share of the per-kind headroom."""
    path = Path(path)
    path = path if path.is_absolute() else ROOT / path
    if not path.is_file():
        return None
    data = json.loads(path.read_text())

    def ci(r: Mapping[str, Any]) -> str:
        return f"{fmt(r['mean_difference'], 2)} {fmt_ci(r['ci95_low'], r['ci95_high'])}"

    rows = [{"backup": r["backup"], "logged days": 4, "learned - fixed gain": ci(r["learned_minus_fixed"]),
             "learned - per-kind oracle": ci(r["learned_minus_best_per_kind"]),
             "share of per-kind headroom": f"{fmt(r['share_of_best_per_kind_headroom']['share'], 2)} "
             + fmt_ci(r["share_of_best_per_kind_headroom"]["ci95_low"], r["share_of_best_per_kind_headroom"]["ci95_high"])}
            for r in data["backups"]]
    rows += [{"backup": r["backup"], "logged days": r["logged_days"], "learned - fixed gain": ci(r["learned_minus_fixed"]),
              "learned - per-kind oracle": ci(r["learned_minus_best_per_kind"]), "share of per-kind headroom": ""}
             for r in data["scaling"] if r["logged_days"] != 4]
    return pd.DataFrame(rows).set_index(["backup", "logged days"])


def backup_figure(path: str | Path):
    """The backup study's forest plot (``litrepro.rlbp.study.backup_plot``), or ``None`` when absent."""
    from litrepro.rlbp.study import backup_plot

    path = Path(path)
    path = path if path.is_absolute() else ROOT / path
    return backup_plot(json.loads(path.read_text())) if path.is_file() else None


def frontier_figure(folder: str | Path):
    """``pinterest_rlbp``'s λ frontier with the fixed gain marked (``litrepro.rlbp.plots.frontier_figure``) from
    ``folder``'s ``lambda_frontier.json`` and ``policy_comparison.json``, or ``None`` when either is absent."""
    from litrepro.rlbp.plots import frontier_figure as draw

    folder = Path(folder)
    folder = folder if folder.is_absolute() else ROOT / folder
    front, comparison = folder / "lambda_frontier.json", folder / "policy_comparison.json"
    if not (front.is_file() and comparison.is_file()):
        return None
    return draw(json.loads(front.read_text()), json.loads(comparison.read_text()))


def checks_per_seed(results: list[Mapping[str, Any]]):
    """One column per seed, one row per check."""
    return pd.DataFrame({f"seed {r['seed']}": {k: str(v) for k, v in r["checks"].items()} for r in results})
