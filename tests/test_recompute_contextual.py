"""The contextual studies' independent recomputation (``litrepro.recompute_contextual``).

The committed files recompute; each fault test changes one figure of a deep copy of a committed file, or
re-summarises its per-seed rows with a faulty study function, and asserts that the check names the field.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from litrepro import recompute as rc
from litrepro import recompute_contextual as rcc
from study_json import load, names



@pytest.fixture(scope="module")
def committed() -> dict:
    return {name: load(rel) for name, rel in (("study", rcc.CONTEXTUAL_STUDY), ("budget", rcc.CONTEXTUAL_BUDGET),
                                                ("diagnosis", rcc.CONTEXTUAL_DIAGNOSIS))}


@pytest.fixture()
def study(committed) -> dict:
    return copy.deepcopy(committed["study"])


@pytest.fixture()
def budget(committed) -> dict:
    return copy.deepcopy(committed["budget"])


@pytest.fixture()
def diagnosis(committed) -> dict:
    return copy.deepcopy(committed["diagnosis"])



def test_the_committed_contextual_files_recompute_and_are_covered(committed):
    assert rcc.check_contextual_study(committed["study"]) == []
    assert rcc.check_contextual_budget(committed["budget"], committed["study"]) == []
    assert rcc.check_contextual_diagnosis(committed["diagnosis"], committed["budget"]) == []
    cover = rc.coverage()
    assert cover[rcc.CONTEXTUAL_STUDY] > 300 and cover[rcc.CONTEXTUAL_BUDGET] > 800
    assert cover[rcc.CONTEXTUAL_DIAGNOSIS] > 200


# --- contextual_study.json ---------------------------------------------------------------------------

def test_study_moved_bound_and_wrong_verdict(study):
    row = study["summary"]["comparisons"]["learned_3000_minus_fixed_gain"]
    row["ci95_low"] -= 0.001
    assert names(rcc.check_contextual_study(study), "learned_3000_minus_fixed_gain.ci95_low")
    row = study["summary"]["comparisons"]["learned_3000_minus_best_constant"]
    row["verdict"] = ">0" if row["verdict"] != ">0" else "<0"
    assert names(rcc.check_contextual_study(study), "learned_3000_minus_best_constant.verdict")


def test_study_comparison_against_the_wrong_baseline(study):
    row = study["summary"]["comparisons"]["campaign_table_minus_best_constant"]
    row["baseline"] = "fixed_gain"                          # the label says best_constant, the figure is another
    problems = rcc.check_contextual_study(study)
    assert names(problems, "campaign_table_minus_best_constant.key")
    assert names(problems, "campaign_table_minus_best_constant.mean_difference")


def test_study_dropped_comparison(study):
    del study["summary"]["comparisons"]["learned_600_minus_fixed_gain"]
    assert names(rcc.check_contextual_study(study), "missing ['learned_600_minus_fixed_gain']")


def test_study_state_gain_against_the_other_mix(study):
    row = study["summary"]["state_gain"]["learned_3000/state_gain"]
    other = study["summary"]["state_gain"]["learned_3000/within_campaign_gain"]
    for k in ("mean_difference", "ci95_low", "ci95_high"):
        row[k] = other[k]
    assert names(rcc.check_contextual_study(study), "learned_3000/state_gain.mean_difference")


def test_study_tuned_action_and_oracles_per_seed(study):
    r = study["per_seed"][3]
    r["tuned_action"] = (r["tuned_action"] + 1) % 9
    problems = rcc.check_contextual_study(study)
    assert names(problems, f"per_seed[{r['seed']}].tuned_action")
    assert names(problems, "summary.tuned_actions")
    r = study["per_seed"][5]
    r["arms"]["fixed_gain"] = r["constants_eval"][5]        # the default read at the wrong action
    assert names(rcc.check_contextual_study(study), f"per_seed[{r['seed']}].arms.fixed_gain")


def test_study_interior_flag_and_tally(study):
    r = study["per_seed"][0]
    r["landscape"]["best_constant_interior"] = not r["landscape"]["best_constant_interior"]
    problems = rcc.check_contextual_study(study)
    assert names(problems, "landscape.best_constant_interior") and names(problems, "summary.interior")


def test_study_estimator_tallies(study):
    ope = study["summary"]["ope"]["ips"]
    ope["coverage"]["k"] += 1
    ope["ranks_three"]["n"] *= 3                              # "k of n" over the wrong n
    problems = rcc.check_contextual_study(study)
    assert names(problems, "summary.ope.ips.coverage") and names(problems, "summary.ope.ips.ranks_three")


def test_study_estimator_bias_of_the_wrong_role(study):
    bias = study["summary"]["ope"]["snips"]["bias"]
    bias["learned"], bias["default"] = bias["default"], bias["learned"]
    assert names(rcc.check_contextual_study(study), "summary.ope.snips.bias.learned.mean")


def test_study_regret_of_the_wrong_pick(study):
    study["summary"]["ope"]["pdis"]["pick_regret"]["mean"] += 1e-3
    assert names(rcc.check_contextual_study(study), "summary.ope.pdis.pick_regret.mean")


# --- contextual_budget.json --------------------------------------------------------------------------

def test_budget_rule_counts_and_rule_arm(budget, committed):
    counts = budget["summary"]["rule_budgets"]["max_min"]
    counts["6000"], counts["3000"] = counts["6000"] - 1, counts["3000"] + 1
    assert names(rcc.check_contextual_budget(budget, committed["study"]), "summary.rule_budgets.max_min")


def test_budget_rule_that_takes_the_largest_budget_is_caught(budget, committed):
    """A rule that always takes the largest budget moves ``<backup>_rule`` wherever the rule picked another."""
    rows = budget["per_seed"]
    assert any(rcc._rule_budget(r, "expected_sarsa", [600, 1500, 3000, 6000]) != 6000 for r in rows)
    values = [r["arms"]["expected_sarsa_6000"] for r in sorted(rows, key=lambda r: r["seed"])]
    row = budget["summary"]["arms"]["expected_sarsa_rule"]
    t = rc.t_interval(values)
    row.update(mean=t["mean"], ci95_low=t["low"], ci95_high=t["high"], se=t["se"])
    assert names(rcc.check_contextual_budget(budget, committed["study"]), "summary.arms.expected_sarsa_rule.mean")


def test_budget_population_sd_is_caught(budget, committed, monkeypatch):
    """Re-summarise the committed rows with a paired interval that uses the population SD."""
    from litrepro import stats
    from litrepro.contextual import budget as cb

    real = stats.paired_ci

    def population(a, b, **kw):
        row = real(a, b, **kw)
        d = np.asarray(a, float) - np.asarray(b, float)
        shrink = np.sqrt((len(d) - 1) / len(d))
        half = (row["ci95_high"] - row["ci95_low"]) / 2 * shrink
        return {**row, "ci95_low": row["mean_difference"] - half, "ci95_high": row["mean_difference"] + half}

    monkeypatch.setattr(stats, "paired_ci", population)
    budget["summary"] = cb.summarise(budget["per_seed"], cb.BudgetSettings(), committed["study"])
    assert names(rcc.check_contextual_budget(budget, committed["study"]), "ci95_low")


def test_budget_replication_tally(budget, committed):
    study = copy.deepcopy(committed["study"])
    study["per_seed"][2]["arms"]["learned_600"] += 1e-6       # one seed no longer reproduces
    assert names(rcc.check_contextual_budget(budget, study), "summary.replication.k")


def test_budget_heldout_loss_interval(budget, committed):
    budget["summary"]["heldout_td_loss"]["none_600"]["ci95_high"] *= 1.01
    assert names(rcc.check_contextual_budget(budget, committed["study"]), "heldout_td_loss.none_600.ci95_high")


# --- contextual_diagnosis.json -----------------------------------------------------------------------

def test_diagnosis_paired_with_the_wrong_budget(diagnosis, committed):
    """``top_1_6000_minus_max_min`` computed against max_min at 600 steps."""
    key = "top_1_6000_minus_max_min"
    diagnosis["summary"]["comparisons"][key]["baseline"] = "max_min_600"
    problems = rcc.check_contextual_diagnosis(diagnosis, committed["budget"])
    assert names(problems, f"{key}.key")


def test_diagnosis_moved_bound_and_missing_row(diagnosis, committed):
    diagnosis["summary"]["comparisons"]["sync_1_6000_minus_placebo"]["ci95_high"] += 1e-4
    del diagnosis["summary"]["comparisons"]["gamma_0.5_600_minus_fixed_gain"]
    problems = rcc.check_contextual_diagnosis(diagnosis, committed["budget"])
    assert names(problems, "sync_1_6000_minus_placebo.ci95_high")
    assert names(problems, "missing ['gamma_0.5_600_minus_fixed_gain']")


def test_diagnosis_that_does_not_reproduce_the_budget_study(diagnosis, committed):
    diagnosis["per_seed"][0]["arms"]["max_min_600"] += 1e-3
    problems = rcc.check_contextual_diagnosis(diagnosis, committed["budget"])
    assert names(problems, "arms.max_min_600") and names(problems, "summary.replicated")
    assert names(rcc.check_contextual_diagnosis(diagnosis, None), "is missing")


def test_diagnosis_state_gain_verdict(diagnosis, committed):
    row = diagnosis["summary"]["state_gain"]["top_1_6000"]
    row["verdict"] = "no detectable difference" if row["verdict"] != "no detectable difference" else ">0"
    assert names(rcc.check_contextual_diagnosis(diagnosis, committed["budget"]), "state_gain.top_1_6000.verdict")
