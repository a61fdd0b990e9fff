"""Holm-adjusted intervals and standardised effects beside the effect study's raw ones (issue 30, item 6).

Reads the committed ``rendered/waypoint_opd/effect_study.json`` and computes nothing new about the
runs: for each of its paired differences (every condition x comparison x metric) the per-seed
differences d_s are re-read from ``per_seed``, and beside the raw 95% t interval it sets

- the Holm-adjusted p-value and interval over the whole family (:func:`litrepro.waypoint.transfer_study.holm`),
- the standardised effect d_z = mean d / sd d (the paired SD, which common random numbers make small),
- the difference in units of the comparator arm's between-seed SD (what one seed's figure varies by).

The family is every interval of the study; the adjustment is our reconstruction (the seed file makes no
comparison at all).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

KEYS = ("teacher", "student_start", "teacher_rl_rollouts")


def adjusted_rows(data: Mapping[str, Any], alpha: float = 0.05) -> list[dict[str, Any]]:
    """One row per difference of the study: raw interval, Holm interval and words, d_z and comparator SDs."""
    from litrepro.waypoint.transfer_study import holm

    family, meta = {}, {}
    for r in data["differences"]:
        cond = sorted((x for x in data["per_seed"] if all(x[k] == r[k] for k in KEYS)), key=lambda x: x["seed"])
        a, b = r["comparison"].split(" - ")
        d = [x[f"{a}.{r['metric']}"] - x[f"{b}.{r['metric']}"] for x in cond]
        ref = [x[f"{b}.{r['metric']}"] for x in cond]
        label = f"{r['comparison']} | {r['metric']} | " + " | ".join(str(r[k]) for k in KEYS)
        if len(d) != r["n"] or not math.isclose(sum(d) / len(d), r["mean_difference"], rel_tol=1e-9, abs_tol=1e-15):
            raise ValueError(f"{label}: per-seed differences do not give the study's mean")
        family[label] = d
        meta[label] = (r, d, ref)
    adjusted = holm(family, alpha)
    out = []
    for label, (r, d, ref) in meta.items():
        n, mean = len(d), sum(d) / len(d)
        sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1)) if n > 1 else 0.0
        mr = sum(ref) / n
        sd_ref = math.sqrt(sum((x - mr) ** 2 for x in ref) / (n - 1)) if n > 1 else 0.0
        raw_reads = "higher" if r["ci95_low"] > 0 else "lower" if r["ci95_high"] < 0 else "no detectable difference"
        out.append({**{k: r[k] for k in (*KEYS, "comparison", "metric", "n", "mean_difference", "ci95_low", "ci95_high")},
                    "raw_reads": raw_reads, **adjusted[label],
                    "effect_size_dz": mean / sd if sd > 0 else None,
                    "in_comparator_sds": mean / sd_ref if sd_ref > 0 else None})
    return out


def findings(data: Mapping[str, Any]) -> list[str]:
    """From the committed ``effect_holm.json`` (its ``rows``) or the effect study itself: how many of the study's intervals exclude 0 raw and after Holm, and the largest standardised effects of the
    gate comparisons that stay detectable (words from the intervals; bounds rounded outward)."""
    from litrepro.stats import fmt_ci

    rows = data["rows"] if "rows" in data else adjusted_rows(data)
    raw = [r for r in rows if r["raw_reads"] != "no detectable difference"]
    kept = [r for r in rows if r["holm_reads"] != "no detectable difference"]
    out = [f"Of the effect study's {len(rows)} paired intervals, {len(raw)} exclude 0 on their own and {len(kept)} "
           f"remain detectable after Holm's adjustment over all {len(rows)} (family-wise 95%)."]
    for comp in ("waypoint - final_only", "waypoint - shuffled"):
        for metric in ("expected_parity_rate", "validation_nll"):
            sub = [r for r in rows if r["comparison"] == comp and r["metric"] == metric]
            k = [r for r in sub if r["holm_reads"] != "no detectable difference"]
            if not k:
                out.append(f"{comp}, {metric}: detectable after Holm in none of {len(sub)} conditions.")
                continue
            big = max(k, key=lambda r: abs(r["in_comparator_sds"] or 0.0))
            out.append(f"{comp}, {metric}: detectable after Holm in {len(k)} of {len(sub)} conditions; the largest, "
                       f"{big['holm_reads']} by Holm {fmt_ci(big['holm_low'], big['holm_high'])} ({big['teacher']}, "
                       f"{big['student_start']}, {big['teacher_rl_rollouts']} rollouts), is d_z {big['effect_size_dz']:+.2g} "
                       f"but {big['in_comparator_sds']:+.2g} between-seed SDs of the comparator.")
    return out


EFFECT = "rendered/waypoint_opd/effect_study.json"
PATH = "rendered/waypoint_opd/effect_holm.json"


def build(root=None) -> dict[str, Any]:
    """The JSON ``make effect-holm`` commits, from the effect study under ``root`` (default: the repository)."""
    from pathlib import Path

    from litrepro.paths import ROOT

    return build_from(Path(root or ROOT) / EFFECT)


def build_from(path) -> dict[str, Any]:
    """Every adjusted row of the effect study at ``path``, and that file's sha256, so that a test can tell when
    it is stale (and the reader-side check can read the Holm bounds it prints)."""
    import hashlib
    import json
    from pathlib import Path

    raw = Path(path).read_bytes()
    return {"source": EFFECT, "source_sha256": hashlib.sha256(raw).hexdigest(), "alpha": 0.05,
            "rows": adjusted_rows(json.loads(raw))}
