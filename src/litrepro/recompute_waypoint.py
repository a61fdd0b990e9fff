"""The waypoint effect study and its Holm table, recomputed from the per-seed values (issue 34, item 1).

Part of :mod:`litrepro.recompute` and written in its spirit: it reads only the committed JSON files and
recomputes each summary figure by plain loops, importing none of the study, statistics or wording modules.
Definitions, restated from the studies' docstrings:

* a condition is (teacher, student start, teacher-RL rollouts); per condition the seeds' rows are paired;
* ``differences``: for every condition x comparison ``A - B`` x metric, the paired t interval of
  ``A.metric - B.metric`` per seed; every comparison of the study appears for every condition and metric;
* ``condition_means``: per condition, the mean over seeds of every numeric per-seed field, and ``n``;
* ``effect_holm.json``: one row per difference; the raw p of the two-sided one-sample t test of the per-seed
  differences; Holm's step-down p over the whole family (sorted by raw p, then by label); the row of rank i
  tested at level 1 - alpha / (m - i + 1) with its t interval at that level; "higher"/"lower" when the Holm p
  is below alpha, by the sign of the mean; the raw words from the raw interval; d_z = mean / SD of the
  differences; the difference in units of the comparator's between-seed SD (sample SDs, n - 1).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from litrepro.recompute import NO_DIFFERENCE, _holm, _is_number, _Ledger, _mean, _run, _sample_sd

EFFECT_STUDY = "rendered/waypoint_opd/effect_study.json"
EFFECT_HOLM = "rendered/waypoint_opd/effect_holm.json"
KEYS = ("teacher", "student_start", "teacher_rl_rollouts")

__all__ = ["EFFECT_STUDY", "EFFECT_HOLM", "check_effect_study", "check_effect_holm", "plan"]


def _conditions(per_seed) -> dict[tuple, list[Mapping[str, Any]]]:
    out: dict[tuple, list] = {}
    for r in per_seed:
        out.setdefault(tuple(r[k] for k in KEYS), []).append(r)
    return {c: sorted(rows, key=lambda r: r["seed"]) for c, rows in out.items()}


def _differences(cond_rows, comparison: str, metric: str) -> tuple[list[float], list[float]]:
    a, b = comparison.split(" - ")
    return ([r[f"{a}.{metric}"] - r[f"{b}.{metric}"] for r in cond_rows], [r[f"{b}.{metric}"] for r in cond_rows])


def _label(row: Mapping[str, Any]) -> str:
    return f"{row['comparison']} | {row['metric']} | " + " | ".join(str(row[k]) for k in KEYS)


def _check_effect_study(d: Mapping[str, Any], L: _Ledger) -> None:
    conds = _conditions(d["per_seed"])
    seeds = sorted(d["seeds"])
    for c, rows in conds.items():
        L.same(f"per_seed{list(c)}.seeds", [r["seed"] for r in rows], seeds)
    comparisons = sorted({r["comparison"] for r in d["differences"]})
    metrics = sorted({r["metric"] for r in d["differences"]})
    seen = []
    for i, row in enumerate(d["differences"]):
        path = f"differences[{i}] ({_label(row)})"
        with L.section(path):
            diffs, _ = _differences(conds[tuple(row[k] for k in KEYS)], row["comparison"], row["metric"])
            L.interval(path, row, diffs, verdict=None)
            seen.append((tuple(row[k] for k in KEYS), row["comparison"], row["metric"]))
    want = [(c, comp, m) for c in conds for comp in comparisons for m in metrics]
    L.members("differences (condition x comparison x metric)", seen, want)
    L.same("n_seeds", d.get("n_seeds"), len(seeds))
    for i, row in enumerate(d["condition_means"]):
        path = f"condition_means[{i}]"
        with L.section(path):
            rows = conds[tuple(row[k] for k in KEYS)]
            L.same(f"{path}.n", row["n"], len(rows))
            for key, got in row.items():
                if key in KEYS or key == "n" or not _is_number(got):
                    continue
                L.num(f"{path}.{key}", got, _mean([r[key] for r in rows]))
    L.members("condition_means (conditions)", [tuple(r[k] for k in KEYS) for r in d["condition_means"]], list(conds))


def _check_effect_holm(d: Mapping[str, Any], L: _Ledger, study: Mapping[str, Any] | None) -> None:
    if study is None:
        L.note("(source)", f"{EFFECT_STUDY} is missing: the Holm table is computed from it")
        return
    conds = _conditions(study["per_seed"])
    family, refs = {}, {}
    for row in study["differences"]:
        diffs, ref = _differences(conds[tuple(row[k] for k in KEYS)], row["comparison"], row["metric"])
        family[_label(row)], refs[_label(row)] = diffs, ref
    alpha = d["alpha"]
    adjusted = _holm(family, alpha)
    L.members("rows (labels)", [_label(r) for r in d["rows"]], list(family))
    for row in d["rows"]:
        label = _label(row)
        if label not in family:
            continue
        path = f"rows[{label}]"
        with L.section(path):
            h = adjusted[label]
            L.interval(path, row, family[label], verdict=False)
            raw = "higher" if row["ci95_low"] > 0 else "lower" if row["ci95_high"] < 0 else NO_DIFFERENCE
            L.same(f"{path}.raw_reads", row["raw_reads"], raw)
            L.holm(path, row, h)
            sd, sd_ref = _sample_sd(family[label]), _sample_sd(refs[label])
            mean = _mean(family[label])
            L.num(f"{path}.effect_size_dz", row["effect_size_dz"], mean / sd if sd > 0 else None)
            L.num(f"{path}.in_comparator_sds", row["in_comparator_sds"], mean / sd_ref if sd_ref > 0 else None)
    if not math.isclose(alpha, 0.05):
        L.note("alpha", f"the study family is adjusted at 0.05, the file says {alpha}")


def check_effect_study(data: Mapping[str, Any]) -> list[str]:
    """Problems in ``effect_study.json``'s differences and condition means (empty: all recomputed)."""
    return _run(EFFECT_STUDY, _check_effect_study, data).problems


def check_effect_holm(data: Mapping[str, Any], study: Mapping[str, Any] | None) -> list[str]:
    """Problems in ``effect_holm.json`` against the effect study's per-seed values."""
    return _run(EFFECT_HOLM, lambda d, L: _check_effect_holm(d, L, study), data).problems


def plan(load) -> list[tuple[str, Any]]:
    """``(file, fn(data, ledger))`` for :func:`litrepro.recompute.check`; ``load(file)`` reads a sibling or None."""
    return [(EFFECT_STUDY, _check_effect_study),
            (EFFECT_HOLM, lambda d, L: _check_effect_holm(d, L, load(EFFECT_STUDY)))]
