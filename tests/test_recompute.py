"""The independent recomputation (``litrepro.recompute``): the committed files pass, and a changed figure is caught.

Every fault test changes one summary figure of a deep copy of a committed study file (as a
slip in the study would) and asserts that the per-study check names that field.  Nothing is
written outside pytest's ``tmp_path``.
"""

from __future__ import annotations

import copy
import json
import math
import shutil

import numpy as np
import pytest
from scipy import stats

from litrepro import recompute as rc
from litrepro.paths import ROOT, seeds_dir


def _load(rel: str) -> dict:
    path = ROOT / rel
    if not path.is_file():
        pytest.skip(f"{rel} is not present")
    return json.loads(path.read_text())


@pytest.fixture()
def diagnosis() -> dict:
    return copy.deepcopy(_load(rc.DIAGNOSIS))


@pytest.fixture()
def td() -> dict:
    return copy.deepcopy(_load(rc.TD_CALIBRATION))


@pytest.fixture()
def dose() -> dict:
    return copy.deepcopy(_load(rc.DOSE_RESPONSE))


@pytest.fixture()
def backup() -> dict:
    return copy.deepcopy(_load(rc.BACKUP_STUDY))


def _names(problems: list[str], field: str) -> bool:
    return any(field in p for p in problems)


def _arm(data: dict, name: str) -> dict:
    return next(a for a in data["summary"]["arms"] if a["arm"] == name)


# --- the committed files ------------------------------------------------------------------------

def test_committed_files_recompute():
    assert rc.check(ROOT) == []


def test_coverage_is_not_vacuous():
    cov = rc.coverage(ROOT)
    from litrepro import recompute_contextual as rcc
    from litrepro import recompute_d3rlpy as rd
    from litrepro import recompute_calibration as rca
    from litrepro import recompute_rlbp as rr
    from litrepro import recompute_transfer as rt
    from litrepro import recompute_waypoint as rw

    files = (rc.DIAGNOSIS, rc.TD_CALIBRATION, rc.DOSE_RESPONSE, rc.BACKUP_STUDY, rcc.CONTEXTUAL_STUDY,
             rcc.CONTEXTUAL_BUDGET, rcc.CONTEXTUAL_DIAGNOSIS, rcc.CONTEXTUAL_PAIRING, rw.EFFECT_STUDY, rw.EFFECT_HOLM,
             rd.D3RLPY, rr.POLICY_COMPARISON, rr.LAMBDA_FRONTIER, rr.BUDGET_STUDY, rt.TRANSFER, rca.OPD_CALIBRATION,
             rc.BENCHMARKS)
    present = [f for f in files if (ROOT / f).is_file()]
    assert sorted(cov) == sorted(present)
    for f in present:                        # the benchmark file holds 4 medians and 3 ratios; a study, hundreds
        assert cov[f] >= (7 if f == rc.BENCHMARKS else 100), (f, cov[f])


def test_missing_files_are_skipped_and_a_broken_one_is_reported(tmp_path):
    assert rc.check(tmp_path) == [] and rc.coverage(tmp_path) == {}
    if not (ROOT / rc.DOSE_RESPONSE).is_file():
        pytest.skip("dose_response.json is not present")
    target = tmp_path / rc.DOSE_RESPONSE
    target.parent.mkdir(parents=True)
    shutil.copy(ROOT / rc.DOSE_RESPONSE, target)
    assert rc.check(tmp_path) == []
    data = json.loads(target.read_text())
    del data["level_means"]
    target.write_text(json.dumps(data))
    assert _names(rc.check(tmp_path), "level_means")


def test_t_interval_and_holm_against_scipy():
    rng = np.random.default_rng(3)
    x = rng.normal(0.1, 1.0, 12)
    t = rc.t_interval(x)
    low, high = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert math.isclose(t["low"], low, rel_tol=1e-12) and math.isclose(t["high"], high, rel_tol=1e-12)
    family = {"a": rng.normal(1.0, 1.0, 10), "b": rng.normal(0.0, 1.0, 10), "c": rng.normal(0.5, 1.0, 10)}
    out = rc._holm(family)
    p = {k: stats.ttest_1samp(v, 0.0).pvalue for k, v in family.items()}
    order = sorted(p, key=p.get)
    adjusted = np.maximum.accumulate([min(1.0, (3 - i) * p[k]) for i, k in enumerate(order)])
    for i, k in enumerate(order):
        assert out[k]["rank"] == i + 1
        assert math.isclose(out[k]["p_raw"], p[k], rel_tol=1e-9)
        assert math.isclose(out[k]["p_holm"], adjusted[i], rel_tol=1e-9)


# --- diagnosis.json -----------------------------------------------------------------------------

def test_diagnosis_moved_interval_bound(diagnosis):
    row = _arm(diagnosis, "truth_target")["minus_fixed_gain"]
    row["ci95_low"] += 1e-6
    assert _names(rc.check_diagnosis(diagnosis), "summary.arms[truth_target].minus_fixed_gain.ci95_low")


def test_diagnosis_wrong_verdict(diagnosis):
    row = _arm(diagnosis, "monte_carlo")["minus_max_min"]
    row["verdict"] = "no detectable difference" if row["verdict"] != "no detectable difference" else ">0"
    assert _names(rc.check_diagnosis(diagnosis), "summary.arms[monte_carlo].minus_max_min.verdict")


def test_diagnosis_headroom_share_and_its_bootstrap(diagnosis):
    share = _arm(diagnosis, "monte_carlo")["share_of_headroom"]
    share["share"] *= 1.001
    assert _names(rc.check_diagnosis(diagnosis), "summary.arms[monte_carlo].share_of_headroom.share")
    bad = copy.deepcopy(diagnosis)
    b = _arm(bad, "sync_1")["share_of_headroom"]
    b["ci95_high"] += 0.5 * (b["ci95_high"] - b["ci95_low"])          # far from any paired bootstrap
    problems = rc.check_diagnosis(bad)
    assert _names(problems, "summary.arms[sync_1].share_of_headroom.ci95_high")
    assert _names(problems, "own paired percentile bootstrap")


def test_diagnosis_headroom_and_alignment(diagnosis):
    diagnosis["summary"]["headroom"]["mean_difference"] += 1e-7
    key = next(iter(diagnosis["summary"]["alignment"]))
    diagnosis["summary"]["alignment"][key]["ci95_high"] *= 1.01
    problems = rc.check_diagnosis(diagnosis)
    assert _names(problems, "summary.headroom.mean_difference")
    assert _names(problems, f"summary.alignment.{key}.ci95_high")


def test_diagnosis_mean_action_shares(diagnosis):
    _arm(diagnosis, "gamma_0")["mean_action_shares"][3] += 1e-4
    assert _names(rc.check_diagnosis(diagnosis), "summary.arms[gamma_0].mean_action_shares[3]")


def test_diagnosis_unflagged_failing_check(diagnosis):
    row = sorted(diagnosis["per_seed"], key=lambda r: r["seed"])[0]
    check = next(iter(row["arms"]["sync_100"]["checks"]))
    row["arms"]["sync_100"]["checks"][check] = False                # a failing seed the summary does not flag
    assert _names(rc.check_diagnosis(diagnosis), "summary.arms[sync_100].flagged_seeds")


def test_diagnosis_ablation_table_built_by_the_project(diagnosis):
    """An ablation table made by the project's own Holm and paired_ci passes; one changed Holm figure does not."""
    from litrepro.holm import holm
    from litrepro.stats import paired_ci, verdict

    rows = sorted(diagnosis["per_seed"], key=lambda r: r["seed"])
    arms = set(rows[0]["arms"])
    pairs = [(f"{x} vs {y}", x, y) for x, y in (("sync_1", "max_min"), ("sync_100", "max_min"),
                                                ("gamma_0.5", "max_min"), ("monte_carlo", "gamma_0"))
             if x in arms and y in arms]
    if len(pairs) < 2:
        pytest.skip("not enough arms for an ablation family")
    value = lambda r, a: r["arms"][a]["learned_true_value"]  # noqa: E731
    diffs = {label: [value(r, x) - value(r, y) for r in rows] for label, x, y in pairs}
    adjusted = holm(diffs)
    table = []
    for label, x, y in pairs:
        raw = paired_ci([value(r, x) for r in rows], [value(r, y) for r in rows])
        table.append({"factor": label, "arm": x, "against": y, "also_differs": "",
                      "raw": {**raw, "verdict": verdict(raw)}, "holm": adjusted[label]})
    diagnosis["summary"]["ablation"] = table
    assert rc.check_diagnosis(diagnosis) == []
    table[1]["holm"]["high"] += 1e-6
    table[0]["holm"]["rank"] = 99
    problems = rc.check_diagnosis(diagnosis)
    assert _names(problems, f"summary.ablation[{table[1]['factor']}].holm.high")
    assert _names(problems, f"summary.ablation[{table[0]['factor']}].holm.rank")


def test_diagnosis_holm_row(diagnosis):
    if not diagnosis["summary"].get("ablation"):
        pytest.skip("this diagnosis.json has no ablation table")
    row = diagnosis["summary"]["ablation"][0]
    p = row["holm"]["p_holm"]
    row["holm"]["p_holm"] = 0.5 * p if p > 0 else 0.01                  # as if the family were half as large
    assert _names(rc.check_diagnosis(diagnosis), f"summary.ablation[{row['factor']}].holm.p_holm")


def test_diagnosis_without_flagged_interval(diagnosis):
    flagged = [a for a in diagnosis["summary"]["arms"] if a.get("flagged_seeds")]
    if not flagged:
        pytest.skip("no arm of this diagnosis.json has a flagged seed")
    arm = flagged[0]
    arm["without_flagged"]["minus_fixed_gain"]["mean_difference"] = arm["minus_fixed_gain"]["mean_difference"]
    arm["flagged_seeds"] = {}
    problems = rc.check_diagnosis(diagnosis)
    assert _names(problems, f"summary.arms[{arm['arm']}].without_flagged.minus_fixed_gain.mean_difference")
    assert _names(problems, f"summary.arms[{arm['arm']}].flagged_seeds")


# --- td_calibration.json ------------------------------------------------------------------------

def _rows(td: dict) -> list[dict]:
    return sorted(td["per_seed"].values(), key=lambda r: int(r["seed"]))


def test_td_population_sd_in_cv(td):
    before = np.array([r["td_loss_before"] for r in _rows(td)])
    td["spread"]["ours_cv"] = float(before.std(ddof=0) / before.mean())
    assert _names(rc.check_td_calibration(td), "spread.ours_cv")


def test_td_fit_seed_in_test_seeds(td):
    ju = td["scale"]["joint_unit"]
    fit = ju["fit_seeds"][-1]
    ju["test_seeds"] = [fit] + ju["test_seeds"]
    by_seed = {int(r["seed"]): r for r in _rows(td)}
    values = [ju["k"] ** 2 * by_seed[s]["td_loss_before"] for s in ju["test_seeds"]]
    ju["test_td_loss_before"]["mean"] = float(np.mean(values))           # the summary over the leaky split
    ju["test_td_loss_before"]["n"] = len(values)
    problems = rc.check_td_calibration(td)
    assert _names(problems, "scale.joint_unit.test_seeds")
    assert _names(problems, "test seeds overlap the fit seeds")
    assert _names(problems, "scale.joint_unit.test_td_loss_before.mean")


def test_td_interval_and_z(td):
    td["scale"]["reward_only"]["floor_minus_recorded_mean"]["ci95_high"] += 1e-6
    td["calibration_table"][0]["z_explained"] += 0.01
    td["spread"]["cv_ratio"]["ci95_low"] *= 1.01
    td["calibration_table"][1]["explaining_arm"] += "0"                 # "seeds 45-61" -> "seeds 45-610"
    problems = rc.check_td_calibration(td)
    assert _names(problems, "scale.reward_only.floor_minus_recorded_mean.ci95_high")
    assert _names(problems, "calibration_table[0](td_loss_before).z_explained")
    assert _names(problems, "spread.cv_ratio.ci95_low")
    assert _names(problems, "calibration_table[1].explaining_arm (seed range)")


def test_td_budget_sd_and_closest_budget(td):
    budgets = td["ratio"]["by_budget"]
    t = "100" if "100" in budgets else next(iter(budgets))
    v = np.array([r["ratio_at_budget"][t] for r in _rows(td)])
    budgets[t]["sd"] = float(v.std(ddof=0))
    td["ratio"]["closest_budget"] = int(t) if int(t) != td["ratio"]["closest_budget"] else 1
    problems = rc.check_td_calibration(td)
    assert _names(problems, f"ratio.by_budget.{t}.sd")
    assert _names(problems, "ratio.closest_budget")


def test_td_recorded_std_is_sample_sd(td):
    name = td.get("provenance", {}).get("recorded_file")
    path = seeds_dir() / str(name)
    if not name or not path.is_file():
        pytest.skip("the recorded seed file is not available")
    assert rc.check_td_calibration(td, path) == []
    rows = [r for r in json.loads(path.read_text())["per_seed"]]
    values = np.array([r["metrics"]["td_loss_before"] for r in rows])
    td["recorded"]["td_loss_before"]["std"] = float(values.std(ddof=0))
    assert _names(rc.check_td_calibration(td, path), "recorded.td_loss_before.std")


# --- dose_response.json -------------------------------------------------------------------------

def test_dose_seed_sd_population(dose):
    row = dose["differences"][0]
    b = row["comparison"].split(" - ")[1]
    ref = np.array([r[f"{b}.{row['metric']}"] for r in dose["per_seed"] if r["level"] == row["level"]])
    row["seed_sd"] = float(ref.std(ddof=0))
    assert _names(rc.check_dose_response(dose),
                  f"differences[{row['level']}|{row['comparison']}|{row['metric']}].seed_sd")


def test_dose_interval_level_mean_and_missing_row(dose):
    row = dose["differences"][5]
    row["ci95_low"] -= 1e-3 * abs(row["ci95_high"] - row["ci95_low"])
    lm = dose["level_means"][2]
    lm["delta_p_even"] *= 1.001
    lm["delta_p_even_max"] *= 1.001
    dropped = dose["differences"].pop()
    problems = rc.check_dose_response(dose)
    assert _names(problems, f"differences[{row['level']}|{row['comparison']}|{row['metric']}].ci95_low")
    assert _names(problems, f"level_means[{lm['level']}].delta_p_even")
    assert _names(problems, f"level_means[{lm['level']}].delta_p_even_max")
    assert _names(problems, "differences (one row per level x comparison x metric)")
    assert dropped["level"] in " ".join(problems)


# --- backup_study.json --------------------------------------------------------------------------

def test_backup_share_bootstrap_and_interval(backup):
    row = next(r for r in backup["backups"] if r["backup"] == "none")
    row["share_of_best_per_kind_headroom"]["ci95_low"] -= 1e-3
    row["learned_minus_best_constant"]["ci95_high"] += 1e-6
    problems = rc.check_backup_study(backup)
    assert _names(problems, "backups[none].share_of_best_per_kind_headroom.ci95_low")
    assert _names(problems, "backups[none].learned_minus_best_constant.ci95_high")


def test_backup_unpaired_bootstrap_is_caught(backup):
    row = next(r for r in backup["backups"] if r["backup"] == "max_min")
    ps = backup["per_seed"]["max_min"]
    s = sorted(ps, key=int)
    x = np.array([ps[k]["learned_true_value"] - ps[k]["headroom"]["fixed_gain"] for k in s])
    y = np.array([ps[k]["headroom"]["best_constant"] - ps[k]["headroom"]["fixed_gain"] for k in s])
    res = stats.bootstrap((x, y), lambda a, b, axis=-1: a.mean(axis) / b.mean(axis), paired=False, vectorized=True,
                          n_resamples=9999, method="BCa", random_state=np.random.default_rng(0))
    row["share_of_best_constant_headroom"]["ci95_low"] = float(res.confidence_interval.low)
    row["share_of_best_constant_headroom"]["ci95_high"] = float(res.confidence_interval.high)
    assert _names(rc.check_backup_study(backup), "backups[max_min].share_of_best_constant_headroom.ci95_")


def test_backup_derived_tallies(backup):
    counts = backup["headroom"]["best_constant_action_counts"]
    counts["7"] += 1
    backup["headroom"]["oracle_minus_fixed"][1]["mean_difference"] += 1e-6
    backup["best_other_backup"] = "max_min"
    arm = next(iter(backup["check_pass_rates"]))
    key = next(iter(backup["check_pass_rates"][arm]))
    backup["check_pass_rates"][arm][key] -= 0.05
    problems = rc.check_backup_study(backup)
    assert _names(problems, "headroom.best_constant_action_counts")
    o = backup["headroom"]["oracle_minus_fixed"][1]["comparison"].split(" - ")[0]
    assert _names(problems, f"headroom.oracle_minus_fixed[{o}].mean_difference")
    assert _names(problems, "best_other_backup")
    assert _names(problems, f"check_pass_rates.{arm}.{key}")


def test_backup_scaling_row(backup):
    days = backup["provenance"]["parameters"]["logged_days"]
    row = next(r for r in backup["scaling"] if r["logged_days"] == days)
    row["learned_minus_fixed"]["mean_difference"] += 1e-5
    assert _names(rc.check_backup_study(backup), f"scaling[{days} days|{row['backup']}].learned_minus_fixed")
