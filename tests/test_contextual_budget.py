"""``litrepro.contextual.budget`` (issue 29, item 6): the backups, budgets and placebo in the contextual market.

A tiny run that holds every check and reproduces the contextual study's own arms on the same days; faults in
the critic's stage, the placebo's streams, the backups' shared draws and the decomposition, each turning a
named check false; the summary's pairing, recomputation and refusals; and the committed study's freshness."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch


from litrepro import prose
from litrepro.contextual import budget, oracle
from litrepro.contextual import study as cs
from litrepro.rlbp import critic as rc
from litrepro.rlbp import diagnosis
from litrepro.rlbp import experiment as ex

TINY = budget.BudgetSettings(fit_days=2, eval_days=2, logged_days=2, budgets=(20, 60))
TINY_CONTEXTUAL = cs.StudySettings(fit_days=2, eval_days=2, logged_days=2, budgets=(20, 60), table_sweeps=1,
                                   grid_points=3, widen=2.0, wpdis_reps=20, fqe_reps=4)
OVERRIDES = {"n_campaigns": 16, "opportunities_per_step": 8}


def tiny(seed: int = 5) -> dict:
    return budget.run_seed(seed, settings=TINY, overrides=OVERRIDES)


@pytest.fixture(scope="module")
def tiny_rows() -> list[dict]:
    return [tiny(s) for s in (5, 6, 7)]


def test_the_tiny_run_holds_every_check_and_is_deterministic(tiny_rows):
    row = tiny_rows[0]
    assert budget.failed(row) == [], budget.failed(row)
    assert set(row["arms"]) == set(budget.BASELINES) | {f"{a}_{b}" for a in budget.ARMS for b in TINY.budgets}
    assert len(row["checks"]) == 3 * len(budget.ARMS) * len(TINY.budgets) + 2 * len(TINY.budgets)
    assert tiny(5) == row                                     # bit for bit, rerun in the same process


def test_the_shared_arms_reproduce_the_contextual_studys_on_the_same_days(tiny_rows):
    """The pairing is real: the contextual study's own run of seed 5 has the same evaluation days, and its fixed
    gain, best constants and learned bidder equal this study's fixed gain, best constants and max_min exactly."""
    theirs = cs.run_seed(5, settings=TINY_CONTEXTUAL, overrides=OVERRIDES)
    rep = budget.replication(tiny_rows, {"per_seed": [theirs]})
    assert rep == {"k": 1, "n": 1, "differs": [],
                   "arms": ["best_constant", "best_per_campaign", "fixed_gain", "max_min_20", "max_min_60"]}
    moved = copy.deepcopy(theirs)
    moved["arms"]["learned_60"] += 1e-12
    assert budget.replication(tiny_rows, {"per_seed": [moved]})["differs"] == [5]
    with pytest.raises(budget.StudyRefused, match="differ from the contextual study"):
        budget.summarise(tiny_rows, TINY, {"per_seed": [moved]})


# --- faults: each turns a named check false ------------------------------------------------------

def test_td_losses_that_bootstrap_from_the_online_critic_are_caught(monkeypatch):
    """issue 34's rlbp miss: the targets from the online network, the target network passed but unused."""
    real = rc.td_losses
    monkeypatch.setattr(rc, "td_losses", lambda critic, target, batch, gamma, **kw: real(critic, critic, batch, gamma, **kw))
    row = tiny()
    assert all(row["checks"][f"{a}_{b}_td_loss_recomputes"] is False
               for a in ("max_min", "fused_greedy", "expected_sarsa", "placebo") for b in TINY.budgets)


def test_a_target_network_synced_off_schedule_is_caught(monkeypatch):
    real = rc.sync_target

    def late(target, critic):
        real(target, critic)
        with torch.no_grad():
            next(target.parameters()).add_(1e-3)                # the copy is not the critic's weights
    monkeypatch.setattr(rc, "sync_target", late)
    row = tiny()
    assert row["checks"]["max_min_60_target_synced_on_schedule"] is False


def test_a_placebo_that_is_not_reseeded_is_caught(monkeypatch):
    monkeypatch.setattr(diagnosis, "ReseededStreams", lambda base, tag="placebo": base)
    row = tiny()
    assert all(row["checks"][f"placebo_{b}_reseeded"] is False for b in TINY.budgets)


def test_a_backup_that_draws_its_own_minibatches_is_caught(monkeypatch):
    real = ex.fit_critic

    def own(world, data, generator, **kw):
        if world.cfg.critic_backup == "none":
            generator = diagnosis.ReseededStreams(generator, "other")
        return real(world, data, generator, **kw)
    monkeypatch.setattr(ex, "fit_critic", own)
    row = tiny()
    assert all(row["checks"][f"backups_{b}_share_draws"] is False for b in TINY.budgets)


def test_a_wrong_decomposition_is_caught(monkeypatch):
    real = oracle.decomposition

    def wrong(value, actions, constants):
        out = real(value, actions, constants)
        out["campaign_mix_value"] += 1e-3
        return out
    monkeypatch.setattr(oracle, "decomposition", wrong)
    row = tiny()
    assert row["checks"]["max_min_60_decomposition_recomputes"] is False


# --- the summary -------------------------------------------------------------------------------

def test_the_summary_pairs_by_seed_recomputes_and_refuses(tiny_rows):
    summary = budget.refuse_or_summarise(tiny_rows, TINY)
    key = "placebo_60_minus_max_min_60"
    d = [r["arms"]["placebo_60"] - r["arms"]["max_min_60"] for r in tiny_rows]
    assert abs(summary["comparisons"][key]["mean_difference"] - sum(d) / 3) < 1e-12
    assert budget.check_intervals(tiny_rows, summary, TINY) == []
    assert sum(summary["rule_budgets"]["max_min"].values()) == 3
    for where, field, label in ((("comparisons", key), "ci95_low", key),
                                (("comparisons", "max_min_rule_minus_fixed_gain"), "mean_difference",
                                 "max_min_rule_minus_fixed_gain"),
                                (("state_gain", "none_20"), "ci95_high", "none_20")):
        tampered = copy.deepcopy(summary)
        tampered[where[0]][where[1]][field] += 1e-3
        assert label in budget.check_intervals(tiny_rows, tampered, TINY)
    tampered = copy.deepcopy(summary)
    rule = tampered["rule_budgets"]["none"]
    rule["20"], rule["60"] = rule["60"], rule["20"] + (rule["20"] == rule["60"])
    assert any(b.startswith("rule count none") for b in budget.check_intervals(tiny_rows, tampered, TINY))
    broken = copy.deepcopy(tiny_rows)
    broken[1]["checks"]["placebo_20_reseeded"] = False
    with pytest.raises(budget.StudyRefused, match="failed checks"):
        budget.summarise(broken, TINY)
    shared = copy.deepcopy(tiny_rows)
    shared[1]["day_hashes"]["eval"] = shared[0]["day_hashes"]["eval"]
    with pytest.raises(budget.StudyRefused, match="share an evaluation day"):
        budget.summarise(shared, TINY)


def test_the_rule_picks_the_lowest_heldout_loss_budget():
    row = {"heldout_td_loss": {"max_min_20": 0.5, "max_min_60": 0.4, "max_min_90": 0.4}, "arms": {}}
    assert budget.rule_budget(row, "max_min", (20, 60, 90)) == 60          # first of a tie


def test_the_findings_take_their_words_from_the_intervals(tiny_rows):
    data = {"summary": budget.refuse_or_summarise(tiny_rows, TINY), "settings": dataclasses.asdict(TINY)}
    c = data["summary"]["comparisons"]
    c["placebo_60_minus_fixed_gain"].update(mean_difference=0.01, ci95_low=0.005, ci95_high=0.015)
    assert "at 60 steps, placebo has higher true value than the fixed gain" in " ".join(budget.findings(data))
    c["placebo_60_minus_fixed_gain"].update(ci95_low=-0.005)
    assert "placebo against the fixed gain, true value: " + prose.NO_DIFFERENCE in " ".join(budget.findings(data))
    for b in TINY.budgets:
        c[f"placebo_{b}_minus_max_min_{b}"].update(mean_difference=-0.01, ci95_low=-0.015, ci95_high=-0.005)
    assert "against max_min at equal budget: lower at 2 of the 2 budgets" in " ".join(budget.findings(data))
    assert budget.plot(data) is not None


def test_the_reading_against_the_state_dependent_oracle_needs_the_bounds_apart(tiny_rows):
    """The closing sentence is written only when the learned bidder's upper bound over the best constant lies
    below the table policy's lower bound; its two numbers are those bounds, rounded outward."""
    data = {"summary": budget.refuse_or_summarise(tiny_rows, TINY), "settings": dataclasses.asdict(TINY)}
    top = data["summary"]["comparisons"]["max_min_60_minus_best_constant"]
    top.update(mean_difference=0.0, ci95_low=-0.0049, ci95_high=0.00451)
    contextual = {"summary": {"comparisons": {"campaign_table_minus_best_constant": {
        "mean_difference": 0.043, "ci95_low": 0.0409, "ci95_high": 0.045}}}}
    text = budget.findings(data, contextual)[-1]
    assert text.startswith("In this market") and "at most +0.0046" in text and "at least +0.040:" in text
    assert "do not overlap" in text and "not computed" in text        # two unpaired intervals: no direction word
    contextual["summary"]["comparisons"]["campaign_table_minus_best_constant"]["ci95_low"] = 0.004
    assert not budget.findings(data, contextual)[-1].startswith("In this market")
    pairing = {"rows": [{"arm": "max_min_60", "against": "campaign_table", "part": "value", "n": 3,
                         "mean_difference": -0.043, "ci95_low": -0.048, "ci95_high": -0.038}]}
    paired = budget.findings(data, contextual, pairing)[-1]           # with the paired difference: its words
    assert paired.startswith("In this market") and "it has lower true value than the table policy: -0.043" in paired
    contextual["summary"]["state_gain"] = {"campaign_table/within_campaign_gain": {
        "mean_difference": 0.019, "ci95_low": 0.018, "ci95_high": 0.021}}
    within = budget.findings(data, contextual)[-1]
    assert within.startswith("The part that reacting inside a campaign") and "[+0.018, +0.021]" in within


# --- the committed study -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def committed() -> dict:
    return budget.load()


def test_the_committed_study_records_the_modules_settings(committed):
    """Its freshness (sources and settings) is tests/test_studies.py's, from the declaration."""
    settings = dataclasses.asdict(budget.BudgetSettings())
    assert committed["settings"] == settings | {"budgets": list(settings["budgets"])}


def test_the_committed_study_holds_every_check_recomputes_and_reproduces_the_contextual_study(committed):
    rows = committed["per_seed"]
    assert committed["n_seeds"] == len(rows) >= 20
    assert all(budget.failed(r) == [] for r in rows)
    settings = budget.BudgetSettings()
    assert budget.check_intervals(rows, committed["summary"], settings) == []
    reference = cs.load()
    assert budget.summarise(rows, settings, reference) == committed["summary"]
    rep = committed["summary"]["replication"]
    assert rep["k"] == rep["n"] == len(rows) and {"max_min_600", "max_min_3000", "fixed_gain"} <= set(rep["arms"])
