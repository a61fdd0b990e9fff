"""The rlbp policy comparison, lambda frontier and budget study, recomputed independently
(``litrepro.recompute_rlbp``): each fault below is one a study's summary could make, and a named field fails."""

from __future__ import annotations

import copy
import math

import pytest

from litrepro import recompute_rlbp as rr
from study_json import load, names


def _sibling(rel: str):
    try:
        return copy.deepcopy(load(rel))
    except pytest.skip.Exception:
        return None


@pytest.fixture()
def comparison() -> dict:
    return copy.deepcopy(load(rr.POLICY_COMPARISON))


@pytest.fixture()
def frontier() -> dict:
    return copy.deepcopy(load(rr.LAMBDA_FRONTIER))


@pytest.fixture(scope="module")
def budget_clean() -> dict:
    return load(rr.BUDGET_STUDY)


@pytest.fixture()
def budget(budget_clean) -> dict:
    return copy.deepcopy(budget_clean)


def test_the_committed_files_recompute(comparison, frontier, budget):
    assert rr.check_policy_comparison(comparison, _sibling) == []
    assert rr.check_lambda_frontier(frontier, _sibling) == []
    assert rr.check_budget_study(budget, _sibling) == []


def test_an_unpaired_or_wrong_metric_comparison_is_caught(comparison):
    """IPS - truth compared with the truth over every campaign instead of the held-out ones."""
    per = [comparison["per_seed"][str(s)] for s in sorted(int(k) for k in comparison["per_seed"])]
    row = next(r for r in comparison["comparisons"] if r["comparison"] == "IPS - truth (learned)")
    row["mean_difference"] = sum(x["learned_ips"] - x["learned_true_value"] for x in per) / len(per)
    assert names(rr.check_policy_comparison(comparison), "IPS - truth (learned) on true_value_heldout")


def test_a_reference_point_of_the_wrong_policy_is_caught(comparison):
    per = comparison["per_seed"].values()
    comparison["reference_points"]["fixed_gain"][1] = sum(x["learned_value"] for x in per) / len(per)
    assert names(rr.check_policy_comparison(comparison), "reference_points.fixed_gain[1]")


def test_a_rate_below_one_is_caught(comparison):
    comparison["check_pass_rates"]["exact_top_k_support"] = 0.95
    assert names(rr.check_policy_comparison(comparison), "check_pass_rates.exact_top_k_support")


def test_the_population_sd_in_the_frontier_error_is_caught(frontier):
    """The standard error from the n divisor instead of n - 1."""
    p = frontier["points"][2]
    xs = [next(x for x in rows if x["lambda"] == p["lambda"])["value"] for rows in frontier["per_seed"].values()]
    m = sum(xs) / len(xs)
    p["value_err"] = math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs)) / math.sqrt(len(xs))
    assert names(rr.check_lambda_frontier(frontier), "points[lambda 1].value_err")


def test_a_sweep_that_refits_at_the_run_lambda_is_caught_by_the_served_row(frontier):
    """The earlier audit's one miss (S1): every row refits at the run's lambda.  The file is then
    self-consistent (each point and difference recomputed from the faulty rows); only the row at
    the run's lambda against the served policy in the policy comparison tells."""
    for rows in frontier["per_seed"].values():
        served = next(x for x in rows if x["lambda"] == 1.0)
        for x in rows:
            x["value"] *= 1.0 + 1e-3 * (x["lambda"] != 0.0)        # a moved row, served row included
            x["cpc_overshoot"] = served["cpc_overshoot"] if x["lambda"] != 1.0 else x["cpc_overshoot"] * 1.01
    # rebuild the summary from the faulty rows, as the study would have
    seeds = sorted(frontier["per_seed"], key=int)
    for p in frontier["points"]:
        for metric in ("value", "cpc_overshoot"):
            xs = [next(x for x in frontier["per_seed"][s] if x["lambda"] == p["lambda"])[metric] for s in seeds]
            m = sum(xs) / len(xs)
            p[metric] = m
            p[f"{metric}_err"] = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) / math.sqrt(len(xs))
    problems = rr.check_lambda_frontier(frontier, _sibling)
    assert names(problems, "(= the served policy's learned_cpc_overshoot)")
    assert not names(problems, "points[")            # the summary itself recomputes: the cross-file check is the guard


def test_the_value_head_alone_as_held_out_loss_is_caught(budget):
    g = budget["summary"]["grid"][3]
    rows = sorted(budget["per_seed"], key=lambda r: r["seed"])
    g["heldout_td_loss"]["values"] = [r["arms"][f"{g['backup']}@{g['steps']}"]["heldout_td_loss"][0] for r in rows]
    assert names(rr.check_budget_study(budget), f"summary.grid[{g['backup']}@{g['steps']}].heldout_td_loss.values")


def test_a_rule_that_picks_the_largest_budget_is_caught(budget):
    conv = budget["summary"]["converged"][0]
    conv["picks"] = {k: max(budget["arms"]["budgets"]) for k in conv["picks"]}
    assert names(rr.check_budget_study(budget), f"summary.converged[{conv['backup']}].picks")


def test_a_tuned_constant_from_ips_is_caught(budget):
    r = next(r for r in budget["per_seed"] if r["tuned_constant"]["ips_action"] != r["tuned_constant"]["action"])
    r["tuned_constant"]["action"] = r["tuned_constant"]["ips_action"]
    r["baselines"]["tuned_constant"] = r["headroom"]["constant"][r["tuned_constant"]["ips_action"]]
    problems = rr.check_budget_study(budget)
    assert names(problems, f"per_seed[{r['seed']}].tuned_constant.action")


def test_a_wrong_baseline_under_a_correct_label_is_caught(budget):
    """The grid's ``minus_best_constant`` computed against the best per-campaign action."""
    g = budget["summary"]["grid"][0]
    g["minus_best_constant"] = copy.deepcopy(g["minus_best_per_campaign"])
    assert names(rr.check_budget_study(budget), "summary.grid[max_min@600].minus_best_constant")


def test_dropped_flags_and_tallies_are_caught(budget):
    arm = next(iter(budget["summary"]["outcome_flags"]))
    del budget["summary"]["outcome_flags"][arm]
    budget["summary"]["tuned_constant"]["picks_best"] += 1
    problems = rr.check_budget_study(budget)
    assert names(problems, "summary.outcome_flags") and names(problems, "summary.tuned_constant.picks_best")


def test_a_failed_integrity_check_and_a_shared_day_are_caught(budget):
    a, b = budget["per_seed"][0], budget["per_seed"][1]
    next(iter(a["arms"].values()))["checks"]["stage_draws_replayed"] = False
    b["eval_day_hashes"][0] = a["eval_day_hashes"][0]
    problems = rr.check_budget_study(budget)
    assert names(problems, "failed integrity checks") and names(problems, "evaluation days shared")
