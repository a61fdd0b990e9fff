"""Calibration against a seed file at two scales, and a Welch test over seeds.

A seed file logs some figures once per seed (a metric) and some once per step
and seed (a field of a per-step history).  For each recorded figure this
module sets this run's values beside the recorded ones at two scales:

    z             = (m_run - m_rec) / s_rec          s_rec: SD of the values as logged
                                                     (per step, pooled over steps and seeds)
    z_per_seed    = (m_run - m_rec) / s_rec_seeds    s_rec_seeds: SD of the seed file's
                                                     per-seed means (the seed-to-seed spread)

with sample SDs (ddof = 1) and m the pooled mean (equal to the mean of the
per-seed means when every seed logs the same number of steps).  For a metric,
logged once per seed, the two scales coincide.  A history field's per-step SD
holds the within-seed spread too, so its ``z`` is usually the gentler of the two
(not always: with little within-seed spread the pooled SD can be the smaller).

Beside them, a Welch t-test over seeds compares this run's per-seed means with
the seed file's (unequal variances):

    t  = (mean(u) - mean(r)) / sqrt(s_u^2 / n_u + s_r^2 / n_r)
    df = (s_u^2/n_u + s_r^2/n_r)^2 / ((s_u^2/n_u)^2 / (n_u - 1) + (s_r^2/n_r)^2 / (n_r - 1))

two-sided p from ``scipy.stats.ttest_ind_from_stats(equal_var=False)``.  With
three seeds on each side it has little power, so p >= 0.05 is not evidence of
agreement; it is printed so that a reader sees which gaps the seeds can tell apart.

A figure the seed file records as exactly 0 on every seed, and this run below
:data:`ZERO_BOUND` on every seed, is equal up to rounding: both z are 0 and no
test runs (whether a float sum comes out as 0.0 or 2e-16 depends on the CPU).

"Calibrated" means here what :data:`DEFINITION` says: |z| <= 3 on the recorded
scale.  :func:`verdicts` lists the figures that are off at either scale, and
says so in one sentence built from the rows.  Pure Python; scipy is imported
only when a Welch test runs (``litrepro.kernels`` does not preload scipy).
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

#: |z| above this is "off" (the project's standard: a gap larger than 3 recorded SDs needs an experiment).
THRESHOLD = 3.0
#: A figure the seed file records as exactly 0 on every seed, and this run below this bound on every seed,
#: is equal up to rounding (the same bound as :data:`litrepro.report.ZERO_BOUND`).
ZERO_BOUND = 1e-12
#: Welch p below this is listed in :func:`verdicts`.
ALPHA = 0.05
#: What "calibrated" means in this project, for the prose to print.
DEFINITION = ("'calibrated' here means within 3 SDs on the recorded scale: |z| <= 3, where z = (this run's mean - the "
              "recorded mean) / the recorded SD of the values as the seed file logs them (per step, pooled over steps "
              "and seeds, for a history field; one value per seed for a metric); the SD of the seed file's per-seed "
              "means (the seed-to-seed spread) gives the second z, reported beside it")


def _mean_sd(values: Iterable[float]) -> tuple[float, float | None, int]:
    """(mean, sample SD with ddof = 1 or None when n < 2, n), summed with math.fsum."""
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("no values")
    mean = math.fsum(xs) / len(xs)
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else None
    return mean, sd, len(xs)


def z_score(run_mean: float, recorded_mean: float, recorded_sd: float | None) -> float | None:
    """(run_mean - recorded_mean) / recorded_sd; 0 when the SD is 0 and the means are equal, else None."""
    if recorded_sd:
        return (run_mean - recorded_mean) / recorded_sd
    return 0.0 if run_mean == recorded_mean else None


def welch(run: tuple[float, float | None, int], recorded: tuple[float, float | None, int]) -> dict[str, Any]:
    """Welch's t-test of two samples given as (mean, sample SD, n): ``{t, df, p, note}``.

    ``t``/``df``/``p`` are None, with a ``note`` saying why, when a side has fewer than
    two seeds or neither side varies (t would be 0/0 or ±inf).
    """
    (mu, su, nu), (mr, sr, nr) = run, recorded
    if nu < 2 or nr < 2 or su is None or sr is None:
        return {"t": None, "df": None, "p": None, "note": "needs at least 2 seeds on each side"}
    if su == 0 and sr == 0:
        return {"t": None, "df": None, "p": None,
                "note": "no seed-to-seed spread on either side: " + ("equal" if mu == mr else "the means differ")}
    from scipy import stats

    res = stats.ttest_ind_from_stats(mu, su, nu, mr, sr, nr, equal_var=False)
    a, b = su * su / nu, sr * sr / nr
    df = (a + b) ** 2 / (a * a / (nu - 1) + b * b / (nr - 1))
    return {"t": float(res.statistic), "df": float(df), "p": float(res.pvalue), "note": ""}


def row(figure: str, run: Sequence[Sequence[float]], recorded: Sequence[Sequence[float]] | None = None, *,
        recorded_stats: Mapping[str, Any] | None = None, explanation: str = "") -> dict[str, Any]:
    """One calibration row: this run's values beside the recorded ones, at both scales, with Welch.

    ``run`` and ``recorded`` hold the values of each seed as logged (one list per seed: one
    value for a metric, one per step for a history field).  A metric whose recorded per-seed
    values are not available passes ``recorded_stats`` ``{mean, std, n}`` (the seed file's
    aggregate) instead: for a per-seed figure both scales use it.
    """
    run_pooled = _mean_sd(v for seed in run for v in seed)
    run_seeds = _mean_sd(_mean_sd(seed)[0] for seed in run)
    if recorded is not None:
        rec_pooled = _mean_sd(v for seed in recorded for v in seed)
        rec_seed_means = [_mean_sd(seed)[0] for seed in recorded]
        rec_seeds = _mean_sd(rec_seed_means)
        rec_zero = all(v == 0 for seed in recorded for v in seed)
    elif recorded_stats is not None:
        std = recorded_stats.get("std")
        rec_pooled = rec_seeds = (float(recorded_stats["mean"]), None if std is None else float(std),
                                  int(recorded_stats["n"]))
        rec_seed_means = None
        rec_zero = rec_pooled[0] == 0 and not rec_pooled[1]
    else:
        raise ValueError(f"{figure}: give the recorded values or their mean/std/n")
    out = {"figure": figure, "recorded_mean": rec_pooled[0], "recorded_std": rec_pooled[1], "recorded_n": rec_pooled[2],
           "run_mean": run_pooled[0], "run_std": run_pooled[1], "run_n": run_pooled[2],
           "recorded_seed_means": rec_seed_means, "recorded_seed_sd": rec_seeds[1], "recorded_seeds": rec_seeds[2],
           "run_seed_means": [_mean_sd(seed)[0] for seed in run], "run_seed_sd": run_seeds[1], "run_seeds": run_seeds[2],
           "explanation": explanation}
    if rec_zero and all(abs(v) < ZERO_BOUND for seed in run for v in seed):
        out.update(z=0.0, z_per_seed=0.0, welch_t=None, welch_df=None, welch_p=None, zero_at_rounding=True,
                   welch_note=f"recorded exactly 0, this run below {ZERO_BOUND:.0e} on every seed: equal up to rounding")
        return out
    test = welch(run_seeds, rec_seeds)
    out.update(z=z_score(run_pooled[0], rec_pooled[0], rec_pooled[1]),
               z_per_seed=z_score(run_seeds[0], rec_seeds[0], rec_seeds[1]),
               welch_t=test["t"], welch_df=test["df"], welch_p=test["p"], welch_note=test["note"],
               zero_at_rounding=False)
    return out


def metric_rows(results: Sequence[Mapping[str, Any]], seed_file: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """One row per metric the seed file records (its aggregate ``{mean, std, n}``), this run's per-seed values beside it.

    A metric absent from some of this run's seeds is left out (it has no run value to set beside the record).
    """
    if not seed_file or not results:
        return []
    rows = []
    for name, agg in sorted(seed_file["metrics"].items()):
        if all(name in r["metrics"] for r in results):
            rows.append(row(f"metrics.{name}", [[r["metrics"][name]] for r in results], recorded_stats=agg))
    return rows


def _off(z: float | None, zero: bool) -> bool:
    return not zero and (z is None or abs(z) > THRESHOLD)


def verdicts(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Which figures are off at each scale, which a Welch test separates, and one sentence that says so.

    ``off_at_recorded_scale``: |z| > 3 or no z (recorded SD 0, the means differ);
    ``off_at_per_seed_scale``: the same with ``z_per_seed``; ``welch_p_below_0.05``: p < 0.05;
    ``explained``: the off figures that carry an explanation.  Figures equal up to rounding are calibrated.
    """
    rows = list(rows)
    off_rec = [r["figure"] for r in rows if _off(r["z"], r.get("zero_at_rounding", False))]
    off_seed = [r["figure"] for r in rows if _off(r.get("z_per_seed"), r.get("zero_at_rounding", False))]
    tested = [r for r in rows if r.get("welch_p") is not None]
    low_p = [r["figure"] for r in tested if r["welch_p"] < ALPHA]
    explained = [f for f in dict.fromkeys(off_rec + off_seed) if next(r for r in rows if r["figure"] == f)["explanation"]]
    by = {r["figure"]: r for r in rows}

    def zs(names: list[str], key: str) -> str:
        return ", ".join(f"{n} (z = {by[n][key]:+.1f})" if by[n][key] is not None else f"{n} (no z: recorded SD 0)"
                         for n in names)

    seeds = "/".join(str(n) for n in sorted({r["recorded_seeds"] for r in rows}))
    per_step = [r for r in rows if r["recorded_n"] != r["recorded_seeds"]]     # logged more than once per seed
    words = [f"Calibrated here means on the recorded scale: |z| <= {THRESHOLD:g} against the SD of the values as the "
             f"seed file logs them; {len(rows) - len(off_rec)} of {len(rows)} recorded figures are within it"
             + (f", and {zs(off_rec, 'z')} {'is' if len(off_rec) == 1 else 'are'} not." if off_rec else ".")]
    if not per_step:
        words.append("Every figure here is logged once per seed, so the SD of the per-seed means is the same SD.")
    elif off_seed:
        words.append(f"Against the SD of the seed file's per-seed means ({seeds} seeds), "
                     f"{zs(off_seed, 'z_per_seed')} {'lies' if len(off_seed) == 1 else 'lie'} beyond {THRESHOLD:g}.")
    else:
        words.append(f"Against the SD of the seed file's per-seed means ({seeds} seeds), every figure lies within "
                     f"{THRESHOLD:g}.")
    if explained:
        words.append(f"Of the figures off at either scale, {', '.join(explained)} "
                     f"{'carries' if len(explained) == 1 else 'carry'} an explanation.")
    if tested:
        words.append(f"A Welch test over seeds gives p < {ALPHA:g} for {len(low_p)} of {len(tested)} tested figures"
                     + (f" ({', '.join(low_p)})." if low_p else "."))
    return {"definition": DEFINITION, "threshold": THRESHOLD, "alpha": ALPHA,
            "figures": len(rows), "off_at_recorded_scale": off_rec, "off_at_per_seed_scale": off_seed,
            "welch_tested": len(tested), "welch_p_below_0.05": low_p, "explained": explained,
            "sentence": " ".join(words)}


def table(rows: Sequence[Mapping[str, Any]]):
    """The rows as a DataFrame of rounded strings: figures to 4 digits, SDs to 2, z to 2 decimals, p to 2 digits."""
    import pandas as pd

    from litrepro.report import fmt_zero

    def num(x: Any, digits: int = 4) -> str:
        return "-" if x is None else f"{x:.{digits}g}"

    def z(x: Any) -> str:
        return "-" if x is None else f"{x:+.2f}"

    out = []
    for r in rows:
        zero = r.get("zero_at_rounding", False)
        run = fmt_zero(r["run_mean"]) if zero else num(r["run_mean"])
        out.append({"figure": r["figure"], "recorded": f"{num(r['recorded_mean'])} ± {num(r['recorded_std'], 2)}",
                    "this run": run if r["run_std"] is None or zero else f"{run} ± {num(r['run_std'], 2)}",
                    "z (per-step SD)": "= up to rounding" if zero else z(r["z"]),
                    "SD of recorded seed means": num(r.get("recorded_seed_sd"), 2),
                    "z (seed-mean SD)": "= up to rounding" if zero else z(r.get("z_per_seed")),
                    "Welch p (seeds)": "-" if r.get("welch_p") is None else f"{r['welch_p']:.2g}",
                    "explained": "yes" if r["explanation"] else ""})
    return pd.DataFrame(out).set_index("figure")
