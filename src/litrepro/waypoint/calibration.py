"""The calibration table: every recorded figure of the seed file beside this run's.

One row per figure: each of the seed file's metrics, each field of the per-step
OPD ``history`` and of the teacher-RL audit history (pooled over steps and
seeds, the way the seed file's six and 24 values were logged), and the reward
at the last RL update.  ``z`` is

    z = (run_mean - recorded_mean) / recorded_std        (recorded sample std, ddof = 1)

``null`` when the recorded std is 0 and the means differ (z = 0 when they are
equal).  ``explanation`` says why a figure with |z| > 3 differs, and which
notebook experiment tests that reason.  Pure Python: no torch import.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

HISTORY_FIELDS = ("loss", "gradient_norm", "mean_gate", "zero_gate_fraction", "batch_scale", "valid_tokens")
RL_FIELDS = ("mean_rule_reward", "gradient_norm")

#: Why a figure differs from the recorded one, and the experiment that tests it (notebook Section 9).
#: The mean gate needed one until the calibration of Section 2 brought it within 3 recorded SDs.
EXPLANATIONS: dict[str, str] = {
    "opd_history.batch_scale": "follows from mean_gate: batch_scale = 0.8 / mean_gate exactly (Section 4).",
    "opd_history.loss": ("ours is exactly 0 by construction (the surrogate subtracts before it reduces); the recorded "
                         "1e-11 are float32 rounding residue around 0. Both are 0 in exact arithmetic."),
}


def _stats(values: Iterable[float]) -> tuple[float, float | None, int]:
    xs = [float(v) for v in values]
    mean = math.fsum(xs) / len(xs)
    std = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else None
    return mean, std, len(xs)


def _row(figure: str, rec: tuple, run: tuple) -> dict[str, Any]:
    (rm, rs, rn), (um, us, un) = rec, run
    if rs:
        z = (um - rm) / rs
    else:
        z = 0.0 if um == rm else None
    return {"figure": figure, "recorded_mean": rm, "recorded_std": rs, "recorded_n": rn, "run_mean": um,
            "run_std": us, "run_n": un, "z": z, "explanation": EXPLANATIONS.get(figure, "")}


def _figures(per_seed: list[Mapping[str, Any]]) -> dict[str, list[float]]:
    """History values per figure, pooled over steps and seeds as the seed file logs them."""
    out: dict[str, list[float]] = {}
    for f in HISTORY_FIELDS:
        out[f"opd_history.{f}"] = [h[f] for row in per_seed for h in row["history"]]
    for f in RL_FIELDS:
        out[f"teacher_rl_history.{f}"] = [h[f] for row in per_seed for h in row["teacher_rl_audit"]["history"]]
    out["teacher_rl_history.mean_rule_reward_at_last_update"] = [
        row["teacher_rl_audit"]["history"][-1]["mean_rule_reward"] for row in per_seed]
    return out


def calibration_rows(results: list[Mapping[str, Any]], seed_file: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The table (see the module docstring); empty without the recorded figures."""
    if not seed_file or not results:
        return []
    rows = []
    for name, agg in seed_file["metrics"].items():                   # the seed file's aggregate (per-seed rows lack some)
        rows.append(_row(f"metrics.{name}", (agg["mean"], agg["std"], agg["n"]),
                         _stats(r["metrics"][name] for r in results)))
    rec, run = _figures(seed_file["per_seed"]), _figures(list(results))
    return rows + [_row(figure, _stats(rec[figure]), _stats(run[figure])) for figure in rec]


def table(rows: list[Mapping[str, Any]]):
    """The rows as a DataFrame of rounded strings (z to 2 decimals, figures to 4 digits)."""
    import pandas as pd

    def num(x: Any, digits: int = 4) -> str:
        return "-" if x is None else f"{x:.{digits}g}"

    return pd.DataFrame([{"figure": r["figure"], "recorded": f"{num(r['recorded_mean'])} ± {num(r['recorded_std'], 2)}",
                          "this run": num(r["run_mean"]) if r["run_std"] is None
                          else f"{num(r['run_mean'])} ± {num(r['run_std'], 2)}",
                          "z": "-" if r["z"] is None else f"{r['z']:.2f}",
                          "explained": "yes" if r["explanation"] else ""} for r in rows]).set_index("figure")
