"""The waypoint effect study's and Holm table's independent recomputation (``litrepro.recompute_waypoint``).

The committed files recompute; each fault test changes one figure of a deep copy, or rebuilds the Holm table
with a faulty adjustment, and asserts that the check names the field.
"""

from __future__ import annotations

import copy

import pytest

from litrepro import recompute_waypoint as rw
from study_json import load, names



@pytest.fixture(scope="module")
def committed() -> dict:
    return {"study": load(rw.EFFECT_STUDY), "holm": load(rw.EFFECT_HOLM)}


@pytest.fixture()
def study(committed) -> dict:
    return copy.deepcopy(committed["study"])


@pytest.fixture()
def holm(committed) -> dict:
    return copy.deepcopy(committed["holm"])



def test_the_committed_files_recompute(committed):
    assert rw.check_effect_study(committed["study"]) == []
    assert rw.check_effect_holm(committed["holm"], committed["study"]) == []


def test_a_moved_difference_bound_is_caught(study):
    study["differences"][7]["ci95_high"] += 1e-6
    assert names(rw.check_effect_study(study), "differences[7]")


def test_a_difference_of_the_wrong_condition_is_caught(study):
    """The row keeps its numbers but names the other student start."""
    row = study["differences"][0]
    row["student_start"] = "waypoint0" if row["student_start"] == "independent" else "independent"
    problems = rw.check_effect_study(study)
    assert names(problems, "differences[0]") and names(problems, "missing")


def test_a_dropped_difference_is_caught(study):
    del study["differences"][3]
    assert names(rw.check_effect_study(study), "differences (condition x comparison x metric): missing")


def test_a_condition_mean_of_the_last_seed_is_caught(study):
    row = study["condition_means"][2]
    cond = [r for r in study["per_seed"] if all(r[k] == row[k] for k in rw.KEYS)]
    row["mean_gate"] = max(cond, key=lambda r: r["seed"])["mean_gate"]
    assert names(rw.check_effect_study(study), "condition_means[2].mean_gate")


def test_holm_without_the_step_down_maximum_is_caught(holm, committed):
    """A Holm p that is the plain (m - i + 1) p, not the running maximum, shows wherever the two differ."""
    rows = sorted(holm["rows"], key=lambda r: r["rank"])
    m = len(rows)
    changed = 0
    for i, r in enumerate(rows):
        plain = min(1.0, (m - i) * r["p_raw"])
        changed += plain != r["p_holm"]
        r["p_holm"] = plain
    assert changed
    assert names(rw.check_effect_holm(holm, committed["study"]), ".p_holm")


def test_holm_words_and_interval(holm, committed):
    row = next(r for r in holm["rows"] if r["holm_reads"] != "no detectable difference")
    row["holm_reads"] = "no detectable difference"
    other = next(r for r in holm["rows"] if r is not row)
    other["holm_low"] = other["ci95_low"]                  # the raw bound shown as the adjusted one
    problems = rw.check_effect_holm(holm, committed["study"])
    assert names(problems, ".holm_reads") and names(problems, ".holm_low")


def test_holm_effect_sizes_with_the_population_sd(holm, committed):
    n = holm["rows"][0]["n"]
    for r in holm["rows"]:
        if r["effect_size_dz"] is not None:
            r["effect_size_dz"] *= ((n - 1) / n) ** -0.5
    assert names(rw.check_effect_holm(holm, committed["study"]), ".effect_size_dz")


def test_holm_raw_words_and_missing_source(holm, committed):
    row = next(r for r in holm["rows"] if r["raw_reads"] == "no detectable difference")
    row["raw_reads"] = "higher" if row["mean_difference"] > 0 else "lower"
    assert names(rw.check_effect_holm(holm, committed["study"]), ".raw_reads")
    assert names(rw.check_effect_holm(holm, None), "is missing")
