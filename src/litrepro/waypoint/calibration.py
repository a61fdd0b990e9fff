"""The calibration table: every recorded figure of the seed file beside this run's.

One row per figure: each of the seed file's metrics, each field of the per-step
OPD ``history`` and of the teacher-RL audit history (pooled over steps and
seeds, the way the seed file's six and 24 values were logged), and the reward
at the last RL update.  ``z`` is

    z = (run_mean - recorded_mean) / recorded_std        (recorded sample std, ddof = 1)

``null`` when the recorded std is 0 and the means differ (z = 0 when they are
equal).  Each row also has ``z_per_seed``, against the SD of the seed file's
three per-seed means, and a Welch test over seeds (:mod:`litrepro.calibration`
defines both); :func:`verdicts` says which figures are off at which scale.
``explanation`` says why a figure with |z| > 3 differs, and which notebook
experiment tests that reason.  Pure Python: no torch import.
"""

from __future__ import annotations

from typing import Any, Mapping

from litrepro import calibration as shared

HISTORY_FIELDS = ("loss", "gradient_norm", "mean_gate", "zero_gate_fraction", "batch_scale", "valid_tokens")
RL_FIELDS = ("mean_rule_reward", "gradient_norm")

#: Why a figure differs from the recorded one, and the experiment that tests it (notebook Section 9).
#: The mean gate needed one until the calibration of Section 2 brought it within 3 recorded SDs.
EXPLANATIONS: dict[str, str] = {
    "opd_history.batch_scale": "follows from mean_gate: batch_scale = 0.8 / mean_gate exactly (Section 4).",
    "opd_history.loss": ("ours is exactly 0 by construction (the surrogate subtracts before it reduces); the recorded "
                         "1e-11 are float32 rounding residue around 0. Both are 0 in exact arithmetic."),
}


def _figures(per_seed: list[Mapping[str, Any]]) -> dict[str, list[list[float]]]:
    """Each history figure's values, one list per seed (its steps or updates), as the seed file logs them."""
    out: dict[str, list[list[float]]] = {}
    for f in HISTORY_FIELDS:
        out[f"opd_history.{f}"] = [[h[f] for h in row["history"]] for row in per_seed]
    for f in RL_FIELDS:
        out[f"teacher_rl_history.{f}"] = [[h[f] for h in row["teacher_rl_audit"]["history"]] for row in per_seed]
    out["teacher_rl_history.mean_rule_reward_at_last_update"] = [
        [row["teacher_rl_audit"]["history"][-1]["mean_rule_reward"]] for row in per_seed]
    return out


def calibration_rows(results: list[Mapping[str, Any]], seed_file: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The table (see the module docstring); empty without the recorded figures."""
    if not seed_file or not results:
        return []
    rows = [shared.row(f"metrics.{name}", [[r["metrics"][name]] for r in results], recorded_stats=agg,
                       explanation=EXPLANATIONS.get(f"metrics.{name}", ""))
            for name, agg in seed_file["metrics"].items()]  # the seed file's aggregate (per-seed rows lack some)
    rec, run = _figures(seed_file["per_seed"]), _figures(list(results))
    return rows + [shared.row(figure, run[figure], rec[figure], explanation=EXPLANATIONS.get(figure, ""))
                   for figure in rec]


def verdicts(rows: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Which figures are off at each scale, and the sentence that says so (:func:`litrepro.calibration.verdicts`)."""
    return shared.verdicts(rows)


def table(rows: list[Mapping[str, Any]]):
    """The rows as a DataFrame of rounded strings, both scales and Welch's p (:func:`litrepro.calibration.table`)."""
    return shared.table(rows)
