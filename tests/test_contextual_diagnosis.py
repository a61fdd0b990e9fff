"""``litrepro.contextual.diagnosis`` (issue 29, item 6): the seed market's one-factor arms in the contextual market.

A tiny run holds every check and its max_min reproduces the budget study's tiny run exactly; faults in the
arm's settings and in the decomposition turn named checks false; the summary pairs with the budget study,
recomputes and refuses; the committed output is current and recomputes."""

from __future__ import annotations

import copy

import pytest

from litrepro.contextual import budget, oracle
from litrepro.contextual import diagnosis as cd
from litrepro.rlbp import experiment as ex

TINY = budget.BudgetSettings(fit_days=2, eval_days=2, logged_days=2, budgets=(20, 60))
BUDGETS = (20, 60)
OVERRIDES = {"n_campaigns": 16, "opportunities_per_step": 8}


def tiny(seed: int = 5) -> dict:
    return cd.run_seed(seed, settings=TINY, budgets=BUDGETS, overrides=OVERRIDES)


@pytest.fixture(scope="module")
def pair() -> tuple[list[dict], dict]:
    rows = [tiny(s) for s in (5, 6)]
    reference = {"per_seed": [budget.run_seed(s, settings=TINY, overrides=OVERRIDES) for s in (5, 6)]}
    return rows, reference


def test_the_tiny_run_holds_every_check_and_pairs_with_the_budget_study(pair):
    rows, reference = pair
    assert all(budget.failed(r) == [] for r in rows)
    assert set(rows[0]["arms"]) == {"max_min_20"} | {f"{a}_{b}" for a in cd.ARMS for b in BUDGETS}
    assert [r["arms"]["max_min_20"] for r in rows] == [r["arms"]["max_min_20"] for r in reference["per_seed"]]
    summary = cd.refuse_or_summarise(rows, reference, BUDGETS)
    assert summary["replicated"] == {"arm": "max_min_20", "k": 2, "n": 2}
    key = "top_1_60_minus_placebo"
    d = [r["arms"]["top_1_60"] - t["arms"]["placebo_60"] for r, t in zip(rows, reference["per_seed"])]
    assert abs(summary["comparisons"][key]["mean_difference"] - sum(d) / 2) < 1e-12


def test_an_arm_whose_setting_is_not_applied_is_caught(monkeypatch):
    real = ex.fit_critic

    def ignores_sync(world, data, generator, **kw):
        import dataclasses
        return real(dataclasses.replace(world, cfg=dataclasses.replace(world.cfg, target_update_every=50)),
                    data, generator, **kw)                  # fault: the arm's target sync period dropped
    monkeypatch.setattr(ex, "fit_critic", ignores_sync)
    row = tiny()
    assert row["checks"]["sync_1_60_settings_applied"] is False and row["checks"]["sync_100_60_settings_applied"] is False


def test_a_wrong_decomposition_is_caught(monkeypatch):
    real = oracle.decomposition

    def wrong(value, actions, constants):
        out = real(value, actions, constants)
        out["value"] += 1e-3
        return out
    monkeypatch.setattr(oracle, "decomposition", wrong)
    assert tiny()["checks"]["top_1_60_decomposition_recomputes"] is False


def test_the_summary_recomputes_and_refuses(pair):
    rows, reference = pair
    summary = cd.refuse_or_summarise(rows, reference, BUDGETS)
    assert cd.check_intervals(rows, reference, summary, BUDGETS) == []
    tampered = copy.deepcopy(summary)
    tampered["comparisons"]["sync_1_20_minus_max_min"]["ci95_high"] += 1e-3
    assert "sync_1_20_minus_max_min" in cd.check_intervals(rows, reference, tampered, BUDGETS)
    moved = copy.deepcopy(reference)
    moved["per_seed"][1]["arms"]["max_min_20"] += 1e-12
    with pytest.raises(cd.StudyRefused, match="do not reproduce"):
        cd.summarise(rows, moved, BUDGETS)
    broken = copy.deepcopy(rows)
    broken[0]["checks"]["top_1_20_settings_applied"] = False
    with pytest.raises(cd.StudyRefused, match="failed checks"):
        cd.summarise(broken, reference, BUDGETS)
    with pytest.raises(cd.StudyRefused, match="has no seed"):
        cd.summarise(rows, {"per_seed": reference["per_seed"][:1]}, BUDGETS)


def test_the_findings_take_their_words_from_the_intervals(pair):
    rows, reference = pair
    data = {"summary": cd.refuse_or_summarise(rows, reference, BUDGETS), "budgets": list(BUDGETS)}
    data["summary"]["comparisons"]["top_1_60_minus_max_min"].update(mean_difference=0.01, ci95_low=0.005,
                                                                    ci95_high=0.015)
    assert "at 60 steps top_1 has higher true value than max_min" in " ".join(cd.findings(data))


@pytest.fixture(scope="module")
def committed() -> dict:
    return cd.load()


def test_the_committed_study_recomputes_and_pairs(committed):
    rows, reference = committed["per_seed"], budget.load()
    assert committed["n_seeds"] == len(rows) >= 20 and all(budget.failed(r) == [] for r in rows)
    assert cd.summarise(rows, reference) == committed["summary"]
    assert cd.check_intervals(rows, reference, committed["summary"]) == []
