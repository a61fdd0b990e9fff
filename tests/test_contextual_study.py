"""``litrepro.contextual.study`` (issue 29): the contextual market's oracles, the learned bidder there, the
off-policy table; a tiny run that holds every check, faults that turn a named check false, the summary's
refusals and recomputation, and the committed study's freshness."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch


from litrepro import prose
from litrepro.contextual import market, ope, oracle
from litrepro.contextual import study as cs
from litrepro.rlbp import experiment as ex

F64 = torch.float64
TINY = cs.StudySettings(fit_days=2, eval_days=2, logged_days=2, budgets=(20, 60), table_sweeps=1, grid_points=3,
                        widen=2.0, wpdis_reps=20, fqe_reps=4)
OVERRIDES = {"n_campaigns": 16, "opportunities_per_step": 8}


def tiny(seed: int = 5) -> dict:
    return cs.run_seed(seed, settings=TINY, overrides=OVERRIDES)


@pytest.fixture(scope="module")
def tiny_rows() -> list[dict]:
    return [tiny(s) for s in (5, 6, 7)]


def test_the_tiny_run_holds_every_check_and_is_deterministic(tiny_rows):
    row = tiny_rows[0]
    assert cs.failed(row) == [], cs.failed(row)
    assert len(row["checks"]) >= 10
    assert tiny(5) == row                                     # bit for bit, rerun in the same process
    assert set(row["arms"]) == set(cs.ORACLES) | {"learned_20", "learned_60"}
    for name in row["ope"]["estimates"]:
        assert set(row["ope"]["estimates"][name]) == set(cs.ESTIMATORS)
        for e in row["ope"]["estimates"][name].values():
            assert e["low"] <= e["estimate"] <= e["high"] or e["interval"] == "bootstrap"


def test_the_oracles_are_ordered_as_their_freedom_on_the_fit_days():
    """A policy with more freedom, chosen on the same days, is never worse there (fit days, not eval days)."""
    cfg = ex.RLBPConfig(seed=3, **OVERRIDES)
    world = ex.build_world(cfg, torch.Generator().manual_seed(3), torch.device("cpu"))
    ctx = market.ContextualSettings()
    days = cs._days(3, "fit_days", 2, world, ctx)
    const = oracle.constant_values(world.campaigns, days, world.settings, ctx, 1.0)        # (A, C)
    n = const.shape[1]
    best = float(const.mean(1).max())
    kind = world.campaigns.kind
    per_kind = float(oracle.group_mean(const, kind).max(0).values.mean())
    per_campaign = float(const.max(0).values.mean())
    assert best <= per_kind + 1e-12 <= per_campaign + 2e-12
    table, trace = oracle.search_table(world.campaigns, days, world.settings, ctx, 1.0, const.argmax(0),
                                       torch.arange(n), sweeps=1)
    assert trace[0] >= per_campaign - 1e-12 and all(b >= a - 1e-12 for a, b in zip(trace, trace[1:]))


def test_the_decomposition_is_its_plain_loop_and_zero_for_a_constant():
    g = torch.Generator().manual_seed(0)
    constants = torch.rand(9, 5, generator=g, dtype=F64)
    actions = torch.randint(9, (3, 6, 5), generator=g)
    value = torch.rand(5, generator=g, dtype=F64)
    assert cs._same(oracle.decomposition(value, actions, constants),
                    oracle.decomposition_reference(value, actions, constants))
    const = oracle.decomposition(constants[2], torch.full((3, 6, 5), 2), constants)
    assert abs(const["state_gain"]) < 1e-12 and abs(const["within_campaign_gain"]) < 1e-12


def test_interior_reads_the_grid_edge():
    v = torch.zeros(9, dtype=F64)
    v[4] = 1.0
    assert oracle.interior(v, 3) == (True, 4)
    v[4], v[5] = 0.0, 1.0
    assert oracle.interior(v, 3) == (False, 5)


# --- faults: each turns a named check false ------------------------------------------------------

def _wrong_decomposition(value, actions, constants):
    out = _REAL_DECOMPOSITION(value, actions, constants)
    out["state_gain"] += 1e-3                                       # the mix computed with the wrong weights
    out["mix_value"] -= 1e-3
    return out


_REAL_DECOMPOSITION = oracle.decomposition
_REAL_SEARCH = oracle.search_table
_REAL_PDIS = ope.pdis
_REAL_KIND = oracle.kind_of_share


def _search_that_undoes(*args, **kwargs):
    table, trace = _REAL_SEARCH(*args, **kwargs)
    table = table.clone()
    table[:, -1, -1] = (table[:, -1, -1] + 4) % 9                   # the last cell's update written to the wrong action
    return table, trace


def _pdis_without_the_cumulative_ratio(reward, target_prob, logging_prob, **kw):
    return ope.one_step_ips(reward, target_prob, logging_prob)     # PDIS by one-step weights


def _kind_off_by_a_threshold(share):
    kind = _REAL_KIND(share)
    kind[(share >= 0.25) & (share < 0.45)] = 0                      # unconstrained read as cpc_constrained
    return kind


@pytest.mark.parametrize("target, fault, checks", [
    ("decomposition", _wrong_decomposition, ("campaign_table_decomposition_recomputes",
                                             "learned_60_decomposition_recomputes")),
    ("search_table", _search_that_undoes, ("kind_table_search_never_worse", "campaign_table_search_never_worse")),
    ("kind_of_share", _kind_off_by_a_threshold, ("kinds_read_off_budget_share",)),
])
def test_a_faulty_oracle_stage_is_caught(monkeypatch, target, fault, checks):
    monkeypatch.setattr(oracle, target, fault)
    row = tiny()
    assert all(row["checks"][check] is False for check in checks), checks


def test_a_faulty_estimator_is_caught(monkeypatch):
    monkeypatch.setattr(ope, "pdis", _pdis_without_the_cumulative_ratio)
    row = tiny()
    assert row["checks"]["learned_60_estimators_recompute"] is False


def test_logged_propensities_that_are_not_the_behaviour_policys_are_caught(monkeypatch):
    real = ex.behaviour_policy

    def skewed(epsilon):
        policy = real(epsilon)

        def wrong(state, generator):
            action, prob = policy(state, generator)
            return action, prob * 1.01                              # a propensity recorded off by 1%
        return wrong
    monkeypatch.setattr(ex, "behaviour_policy", skewed)
    assert tiny()["checks"]["logged_propensities_are_uniform"] is False


# --- the summary -------------------------------------------------------------------------------

def test_the_summary_pairs_by_seed_recomputes_and_refuses(tiny_rows):
    summary = cs.refuse_or_summarise(tiny_rows, TINY)
    assert summary["n_seeds"] == 3 and summary["interior"]["n"] == 3
    key = "campaign_table_minus_best_constant"
    d = [r["arms"]["campaign_table"] - r["arms"]["best_constant"] for r in tiny_rows]
    assert abs(summary["comparisons"][key]["mean_difference"] - sum(d) / 3) < 1e-12
    assert cs.check_intervals(tiny_rows, summary, TINY) == []
    tampered = copy.deepcopy(summary)
    tampered["comparisons"][key]["ci95_low"] += 1e-3
    assert key in cs.check_intervals(tiny_rows, tampered, TINY)
    tampered = copy.deepcopy(summary)
    tampered["ope"]["pdis"]["coverage"]["k"] += 1
    assert "pdis coverage" in cs.check_intervals(tiny_rows, tampered, TINY)
    broken = copy.deepcopy(tiny_rows)
    broken[1]["checks"]["kinds_read_off_budget_share"] = False
    with pytest.raises(cs.StudyRefused, match="failed checks"):
        cs.summarise(broken, TINY)
    shared = copy.deepcopy(tiny_rows)
    shared[1]["day_hashes"]["eval"] = shared[0]["day_hashes"]["eval"]
    with pytest.raises(cs.StudyRefused, match="share an evaluation day"):
        cs.summarise(shared, TINY)


def test_the_findings_take_their_words_from_the_intervals(tiny_rows):
    data = {"summary": cs.refuse_or_summarise(tiny_rows, TINY), "settings": dataclasses.asdict(TINY)}
    row = data["summary"]["comparisons"]["best_per_kind_minus_best_constant"]
    row.update(mean_difference=0.01, ci95_low=0.005, ci95_high=0.015)
    assert any("the best constant per campaign kind has higher true value than the best constant" in f.lower()
               for f in cs.findings(data))
    row.update(ci95_low=-0.005)
    text = " ".join(cs.findings(data)).lower()
    assert "per campaign kind against the best constant, true value: " + prose.NO_DIFFERENCE in text
    assert cs.plot(data) is not None


# --- the committed study -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def committed() -> dict:
    return cs.load()


def test_the_committed_study_records_the_modules_settings(committed):
    """Its freshness (sources and settings) is tests/test_studies.py's, from the declaration."""
    assert committed["market_settings"] == dataclasses.asdict(market.ContextualSettings())
    assert committed["settings"] == dataclasses.asdict(cs.StudySettings()) | {"budgets": list(cs.StudySettings().budgets)}


def test_the_committed_study_holds_every_check_and_recomputes(committed):
    rows = committed["per_seed"]
    assert committed["n_seeds"] == len(rows) >= 20
    assert all(cs.failed(r) == [] for r in rows)
    settings = cs.StudySettings()
    assert cs.check_intervals(rows, committed["summary"], settings) == []
    assert cs.summarise(rows, settings) == committed["summary"]


def test_the_committed_study_meets_the_issues_bar_or_says_it_does_not(committed):
    """Issue 29's bars, read from the JSON: the findings report the interior count and the oracle's interval
    whatever they are, so this test checks that the sentences carry them."""
    s = committed["summary"]
    text = " ".join(cs.findings(committed))
    assert prose.count(s["interior"]["k"], s["interior"]["n"], "seeds") in text
    assert prose.estimate(s["comparisons"]["campaign_table_minus_best_constant"]) in text
    assert prose.estimate(s["state_gain"][f"learned_{settings_top()}/within_campaign_gain"]) in text


def settings_top() -> int:
    return cs.StudySettings().budgets[-1]
