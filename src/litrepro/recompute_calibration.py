"""The waypoint OPD calibration study, recomputed from its per-seed runs and the recorded seed file (issue 34).

Part of :mod:`litrepro.recompute`: it reads ``rendered/waypoint_opd/opd_calibration.json`` and, when present,
the recorded ``waypoint-opd`` seed file, and imports none of the study, statistics or wording modules.
Definitions, restated from the studies' docstrings (``litrepro.calibration``):

* a figure's values per seed as logged: one per seed for ``metrics.<name>``, one per OPD step for
  ``opd_history.<name>``, one per teacher-RL update for ``teacher_rl_history.<name>``, and the last
  update's ``mean_rule_reward`` for ``..._at_last_update``;
* this run's pooled mean and sample SD over every logged value, and over the per-seed means;
* the recorded side from the seed file: its per-seed values for a history field, its ``{mean, std, n}``
  for a metric (both scales then use it);
* z = (run pooled mean - recorded mean) / recorded SD; z per seed = (mean of run seed means - mean of
  recorded seed means) / SD of the recorded seed means; Welch's t, df and two-sided p over seed means
  (none when a side has fewer than 2 seeds); a figure recorded as exactly 0 and below 1e-12 on every
  run seed is equal up to rounding (both z 0, no test);
* per arm: |A| and gradient norm / |A| pooled over every OPD step; a figure is within 3 SDs when
  |z| <= 3 (and, for the two targets, |z per seed| <= 3 too); the recorded settings (teacher-RL
  learning rate 0.2, 8 updates of 64 rollouts) the arm's own teacher-RL audit contradicts.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

from scipy import stats as sps

from litrepro.recompute import _Ledger, _mean, _run, _sample_sd

OPD_CALIBRATION = "rendered/waypoint_opd/opd_calibration.json"
METHOD = "waypoint-opd"
TARGETS = ("opd_history.gradient_norm", "metrics.parameter_delta_l2")
THRESHOLD, ZERO_BOUND = 3.0, 1e-12
RECORDED_SETTINGS = {"learning_rate": 0.2, "updates": 8, "rollouts_per_update": 64}

__all__ = ["OPD_CALIBRATION", "check_opd_calibration", "plan", "recorded_seed_file"]


def recorded_seed_file() -> Mapping[str, Any] | None:
    """The recorded waypoint-opd seed file under the seeds folder, or None when it is not there."""
    from litrepro.paths import seeds_dir

    folder = seeds_dir()
    if not folder or not Path(folder).is_dir():
        return None
    for path in sorted(Path(folder).glob("*.txt")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("method") == METHOD:
            return data
    return None


def _values(row: Mapping[str, Any], figure: str) -> list[float]:
    kind, name = figure.split(".", 1)
    if kind == "metrics":
        return [row["metrics"][name] if "metrics" in row else row[name]]
    if kind == "opd_history":
        return [h[name] for h in row["history"]]
    history = row["teacher_rl_audit"]["history"]
    if name == "mean_rule_reward_at_last_update":
        return [history[-1]["mean_rule_reward"]]
    return [h[name] for h in history]


def _z(run_mean, rec_mean, rec_sd):
    if rec_sd:
        return (run_mean - rec_mean) / rec_sd
    return 0.0 if run_mean == rec_mean else None


def _check_figure(L: _Ledger, path: str, got: Mapping[str, Any], run: list[list[float]], recorded) -> None:
    pooled = [v for seed in run for v in seed]
    means = [_mean(seed) for seed in run]
    L.num(f"{path}.run_mean", got["run_mean"], _mean(pooled))
    L.num(f"{path}.run_std", got["run_std"], _sample_sd(pooled) if len(pooled) > 1 else None)
    L.same(f"{path}.run_n", got["run_n"], len(pooled))
    L.vector(f"{path}.run_seed_means", got["run_seed_means"], means)
    L.num(f"{path}.run_seed_sd", got["run_seed_sd"], _sample_sd(means) if len(means) > 1 else None)
    L.same(f"{path}.run_seeds", got["run_seeds"], len(means))
    if recorded is None:                                  # no seed file here: the recorded side as the JSON says
        rec = (got["recorded_mean"], got["recorded_std"], got["recorded_n"])
        rec_seeds = (_mean(got["recorded_seed_means"]) if got["recorded_seed_means"] else got["recorded_mean"],
                     got["recorded_seed_sd"], got["recorded_seeds"])
        zero = got["recorded_mean"] == 0 and not got["recorded_std"]
    elif isinstance(recorded, Mapping):                   # a metric: the seed file's aggregate
        rec = rec_seeds = (float(recorded["mean"]), recorded.get("std"), int(recorded["n"]))
        zero = rec[0] == 0 and not rec[1]
        L.same(f"{path}.recorded_seed_means", got["recorded_seed_means"], None)
    else:
        flat = [v for seed in recorded for v in seed]
        rec_means = [_mean(seed) for seed in recorded]
        rec = (_mean(flat), _sample_sd(flat), len(flat))
        rec_seeds = (_mean(rec_means), _sample_sd(rec_means), len(rec_means))
        zero = all(v == 0 for v in flat)
        L.vector(f"{path}.recorded_seed_means", got["recorded_seed_means"], rec_means)
    L.num(f"{path}.recorded_mean", got["recorded_mean"], rec[0])
    L.num(f"{path}.recorded_std", got["recorded_std"], rec[1])
    L.same(f"{path}.recorded_n", got["recorded_n"], rec[2])
    L.num(f"{path}.recorded_seed_sd", got["recorded_seed_sd"], rec_seeds[1])
    L.same(f"{path}.recorded_seeds", got["recorded_seeds"], rec_seeds[2])
    if zero and all(abs(v) < ZERO_BOUND for v in pooled):
        L.same(f"{path}.zero_at_rounding", got["zero_at_rounding"], True)
        L.same(f"{path} (z, z per seed, Welch p)", [got["z"], got["z_per_seed"], got["welch_p"]], [0.0, 0.0, None])
        return
    L.same(f"{path}.zero_at_rounding", got["zero_at_rounding"], False)
    L.num(f"{path}.z", got["z"], _z(_mean(pooled), rec[0], rec[1]))
    L.num(f"{path}.z_per_seed", got["z_per_seed"], _z(_mean(means), rec_seeds[0], rec_seeds[1]))
    su, nu, sr, nr = _sample_sd(means), len(means), rec_seeds[1], rec_seeds[2]
    if nu < 2 or nr < 2 or sr is None or (su == 0 and sr == 0):
        L.same(f"{path}.welch_p", got["welch_p"], None)
        return
    a, b = su * su / nu, sr * sr / nr
    t = (_mean(means) - rec_seeds[0]) / math.sqrt(a + b)
    df = (a + b) ** 2 / (a * a / (nu - 1) + b * b / (nr - 1))
    L.num(f"{path}.welch_t", got["welch_t"], t)
    L.num(f"{path}.welch_df", got["welch_df"], df)
    L.num(f"{path}.welch_p", got["welch_p"], float(2 * sps.t.sf(abs(t), df)), scale=1e-6)


def _check_opd_calibration(d: Mapping[str, Any], L: _Ledger, seed_file: Mapping[str, Any] | None) -> None:
    seeds = sorted(d["seeds"])
    by_arm: dict[str, list] = {}
    for r in d["per_seed"]:
        by_arm.setdefault(r["arm"], []).append(r)
    L.members("arms", [a["arm"] for a in d["arms"]], list(by_arm))
    for arm in d["arms"]:
        name, path = arm["arm"], f"arms[{arm['arm']}]"
        rows = sorted(by_arm.get(name, []), key=lambda r: r["seed"])
        with L.section(path):
            L.same(f"{path}.seeds", arm["seeds"], [r["seed"] for r in rows])
            L.same(f"{path}.seeds (the study's)", [r["seed"] for r in rows], seeds)
            within = {}
            for figure, got in arm["figures"].items():
                L.same(f"{path}.figures[{figure}].figure", got["figure"], figure)
                recorded = None
                if seed_file is not None:
                    kind, metric = figure.split(".", 1)
                    recorded = (seed_file["metrics"][metric] if kind == "metrics"
                                else [_values(r, figure) for r in seed_file["per_seed"]])
                _check_figure(L, f"{path}.figures[{figure}]", got, [_values(r, figure) for r in rows], recorded)
                z, zs = got["z"], got["z_per_seed"]
                ok = z is not None and abs(z) <= THRESHOLD
                within[figure] = (ok, ok and zs is not None and abs(zs) <= THRESHOLD)
            steps = [h for r in rows for h in r["history"]]
            L.num(f"{path}.mean_abs_advantage", arm["mean_abs_advantage"], _mean([h["mean_abs_advantage"] for h in steps]))
            L.num(f"{path}.gradient_norm_per_abs_advantage", arm["gradient_norm_per_abs_advantage"],
                  _mean([h["gradient_norm_per_abs_advantage"] for h in steps]))
            targets = all(within[f][1] for f in TARGETS)
            off = sorted(f for f in within if f not in TARGETS and not within[f][0])
            audit = rows[0]["teacher_rl_audit"]
            contradicted = sorted(f"teacher_rl_audit.{k}" for k, v in RECORDED_SETTINGS.items() if audit[k] != v)
            L.same(f"{path}.targets_within_3sd", arm["targets_within_3sd"], targets)
            L.same(f"{path}.others_off", arm["others_off"], off)
            L.same(f"{path}.recorded_settings_contradicted", arm["recorded_settings_contradicted"], contradicted)
            L.same(f"{path}.calibrated_without_breaking", arm["calibrated_without_breaking"],
                   targets and not off and not contradicted)


def check_opd_calibration(data: Mapping[str, Any], seed_file: Mapping[str, Any] | None = None) -> list[str]:
    """Problems in ``opd_calibration.json`` (``seed_file``: the recorded file, for the recorded side)."""
    return _run(OPD_CALIBRATION, lambda d, L: _check_opd_calibration(d, L, seed_file), data).problems


def plan(load) -> list[tuple[str, Any]]:
    """``(file, fn(data, ledger))`` for :func:`litrepro.recompute.check`."""
    return [(OPD_CALIBRATION, lambda d, L: _check_opd_calibration(d, L, recorded_seed_file()))]
