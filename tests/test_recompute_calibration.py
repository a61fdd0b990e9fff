"""The OPD calibration study recomputed independently (``litrepro.recompute_calibration``): each fault below is one
its summary could make, and a named field fails."""

from __future__ import annotations

import copy
import math

import pytest

from litrepro import recompute_calibration as rc
from study_json import load, names

GRAD = "opd_history.gradient_norm"


@pytest.fixture(scope="module")
def clean() -> dict:
    return load(rc.OPD_CALIBRATION)


@pytest.fixture()
def data(clean) -> dict:
    return copy.deepcopy(clean)


@pytest.fixture(scope="module")
def seed_file():
    found = rc.recorded_seed_file()
    if found is None:
        pytest.skip("the recorded waypoint-opd seed file is not under $LITREPRO_SEEDS_DIR")
    return found


def _arm(data, name="as_is"):
    return next(a for a in data["arms"] if a["arm"] == name)


def test_the_committed_file_recomputes_with_and_without_the_seed_file(data, seed_file):
    assert rc.check_opd_calibration(data, seed_file) == []
    assert rc.check_opd_calibration(data, None) == []


def test_z_over_the_seed_spread_in_place_of_the_logged_spread_is_caught(data):
    f = _arm(data)["figures"][GRAD]
    f["z"] = (f["run_mean"] - f["recorded_mean"]) / f["recorded_seed_sd"]
    assert names(rc.check_opd_calibration(data), f"arms[as_is].figures[{GRAD}].z")


def test_a_population_sd_is_caught(data):
    f = _arm(data)["figures"]["metrics.baseline_validation_nll"]
    xs = f["run_seed_means"]
    m = sum(xs) / len(xs)
    f["run_seed_sd"] = math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))
    assert names(rc.check_opd_calibration(data), "metrics.baseline_validation_nll].run_seed_sd")


def test_a_one_sided_welch_p_is_caught(data):
    f = _arm(data)["figures"][GRAD]
    f["welch_p"] /= 2
    assert names(rc.check_opd_calibration(data), f"figures[{GRAD}].welch_p")


def test_a_flipped_target_verdict_is_caught(data):
    """The targets' verdict is recomputed from both z-scores (each checked on its own above)."""
    for arm in data["arms"]:
        arm["targets_within_3sd"] = not arm["targets_within_3sd"]
    problems = rc.check_opd_calibration(data)
    assert all(names(problems, f"arms[{a['arm']}].targets_within_3sd") for a in data["arms"])


def test_a_dropped_contradicted_setting_and_a_wrong_verdict_are_caught(data):
    arm = _arm(data, "rl_lr_0.5")
    arm["recorded_settings_contradicted"] = []
    arm["calibrated_without_breaking"] = True
    problems = rc.check_opd_calibration(data)
    assert names(problems, "arms[rl_lr_0.5].recorded_settings_contradicted")
    assert names(problems, "arms[rl_lr_0.5].calibrated_without_breaking")


def test_a_recorded_side_from_the_wrong_seed_file_metric_is_caught(data, seed_file):
    f = _arm(data)["figures"]["metrics.baseline_validation_nll"]
    f["recorded_mean"] = seed_file["metrics"]["final_validation_nll"]["mean"]
    f["z"] = (f["run_mean"] - f["recorded_mean"]) / f["recorded_std"]
    assert names(rc.check_opd_calibration(data, seed_file), "metrics.baseline_validation_nll].recorded_mean")


def test_a_last_step_gate_in_place_of_the_pooled_one_is_caught(data):
    f = _arm(data)["figures"]["opd_history.mean_gate"]
    rows = sorted((r for r in data["per_seed"] if r["arm"] == "as_is"), key=lambda r: r["seed"])
    f["run_seed_means"] = [r["history"][-1]["mean_gate"] for r in rows]
    assert names(rc.check_opd_calibration(data), "opd_history.mean_gate].run_seed_means")
