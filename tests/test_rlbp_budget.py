"""The pinterest_rlbp budget study (``litrepro.studies.rlbp_budget``, ``make rlbp-budget``).

The committed study is checked for freshness by source hashes (never re-run here), for
every integrity check on every seed and arm, for rows that recompute by plain loops, and
for pairing with the diagnosis and the backup study (its ``max_min`` at 600 steps is theirs
to the last bit).  Its mechanics (the grid, the convergence rule, refusals, the script's
bounds and resuming) are tested on a tiny world and on hand-made rows.
"""

from __future__ import annotations

import json
import random

import pytest

from litrepro import figcheck
from litrepro.paths import RENDERED
from litrepro.rlbp import diagnosis as dg
from litrepro.studies import rlbp_budget as bs


@pytest.fixture(scope="module")
def data():
    if not bs.PATH.exists():
        pytest.fail(f"{bs.PATH} is missing: run `make rlbp-budget`")
    return json.loads(bs.PATH.read_text())


def test_budget_study_covers_the_grid_every_integrity_check_holds_and_rows_recompute(data):
    assert data["n_seeds"] >= 20 and [r["seed"] for r in data["per_seed"]] == data["seeds"]
    grid = {(g["backup"], g["steps"]) for g in data["summary"]["grid"]}
    assert grid == {(b, n) for b in bs.BACKUPS for n in bs.BUDGETS} and len(bs.BUDGETS) >= 5 and len(bs.BACKUPS) >= 4
    for row in data["per_seed"]:
        names = set(row["arms"])
        assert {bs.arm_name(b, n) for b in bs.BACKUPS for n in bs.BUDGETS} <= names
        assert all(row["arms"][bs.arm_name(b, n)]["critic_steps"] == n for b in bs.BACKUPS for n in bs.BUDGETS)
    assert bs.integrity_failures(data["per_seed"]) == {}
    assert bs.check_rows(data["per_seed"], data["summary"]) == []             # every row, the rule's picks, by plain loops
    assert bs.summarise(data["per_seed"]) == data["summary"]
    assert all(set(c["picks"]) == {str(s) for s in data["seeds"]} for c in data["summary"]["converged"])
    assert bs.PLOT.stat().st_size > 1000


def _current(name):
    from litrepro import studyrunner

    study = studyrunner.get(name)
    other = json.loads((RENDERED / study.main_output).read_text())
    stale = studyrunner.stale(study, other)
    if stale:
        pytest.skip(f"{study.main_output} is stale for {stale[:3]}: re-run it, then compare")
    return other


def test_max_min_at_the_seed_budget_is_the_diagnosis_and_backup_studys_max_min(data):
    """Same seed, data, days and streams: the grid's max_min@600 is the other studies' max_min, to the last bit."""
    diag = _current("rlbp-diagnosis")
    backups = _current("rlbp-study")
    by_seed = {r["seed"]: r for r in diag["per_seed"]}
    for row in data["per_seed"]:
        ours = row["arms"][bs.arm_name("max_min", bs.SEED_BUDGET)]
        assert ours["learned_true_value"] == by_seed[row["seed"]]["arms"]["max_min"]["learned_true_value"]
        assert ours["learned_true_value"] == backups["per_seed"]["max_min"][str(row["seed"])]["learned_true_value"]
        assert row["arms"][bs.arm_name("max_min", 3000)]["learned_true_value"] == \
            by_seed[row["seed"]]["arms"]["steps_3000"]["learned_true_value"]
        assert row["tuned_constant"] == by_seed[row["seed"]]["tuned_constant"]


def test_budget_figure_fits_and_findings_and_table_read_the_json(data):
    assert figcheck.outside_canvas(bs.plot(data)) == []
    lines = bs.findings(data)
    assert lines and all(isinstance(x, str) and x for x in lines)
    assert any("convergence rule" in x for x in lines)
    assert bs.table(data).shape[0] == len(bs.BACKUPS) * (len(bs.BUDGETS) + 1)


# --- Hand-made rows: the rule, the recomputation and the refusals ---------------------------------------

def _rows(seeds=range(42, 62), budgets=bs.BUDGETS) -> list[dict]:
    rows = []
    for seed in seeds:
        rng = random.Random(seed)
        fixed = 1.6 + 0.1 * rng.random()
        constant = [fixed - 0.05 + 0.0125 * a + rng.gauss(0, 0.001) for a in range(9)]
        arms = {}
        for b in bs.BACKUPS:
            for i, n in enumerate(budgets):
                arms[bs.arm_name(b, n)] = {"learned_true_value": fixed - 0.02 + 0.01 * i + rng.gauss(0, 0.004),
                                           "heldout_td_loss": [0.5 / (1 + i) + rng.random() * 0.01, 0.02],
                                           "critic_steps": n, "checks": {"c": True}}
        for days, steps in bs.SCALING:
            for b in bs.SCALING_BACKUPS:
                arms[bs.arm_name(b, steps, days)] = {"learned_true_value": fixed + rng.gauss(0, 0.004),
                                                     "heldout_td_loss": [0.3, 0.02], "critic_steps": steps,
                                                     "checks": {"c": True}}
        fqe = [rng.random() for _ in range(9)]
        tuned = max(range(9), key=lambda a: (fqe[a], -a))
        rows.append({"seed": seed, "eval_day_hashes": [f"{seed}-{d}" for d in range(4)], "arms": arms,
                     "headroom": {"constant": constant, "fixed_gain": constant[4], "best_constant": max(constant),
                                  "best_constant_action": 8, "best_per_kind": max(constant),
                                  "best_per_campaign": max(constant) + 0.01},
                     "tuned_constant": {"action": tuned, "fqe": fqe, "ips_action": 0, "ips": [0.0] * 9},
                     "baselines": {"fixed_gain": constant[4], "tuned_constant": constant[tuned],
                                   "best_constant": max(constant), "best_per_campaign": max(constant) + 0.01,
                                   "behaviour": fixed - 0.01}})
    return rows


def test_the_convergence_rule_takes_the_lowest_heldout_td_loss():
    row = _rows(seeds=[42])[0]
    assert bs.converged_budget(row, "max_min") == max(bs.BUDGETS)            # the loss falls with the budget here
    row["arms"][bs.arm_name("max_min", 1500)]["heldout_td_loss"] = [0.01, 0.0]
    assert bs.converged_budget(row, "max_min") == 1500


def test_summary_recomputes_and_refuses_what_does_not(monkeypatch):
    rows = _rows()
    out = bs.summarise(rows)
    assert bs.check_rows(rows, out) == []
    forged = json.loads(json.dumps(out))
    forged["converged"][0]["picks"]["42"] = 600                                # a pick the rule would not make
    assert "converged max_min pick on seed 42" in bs.check_rows(rows, forged)
    forged = json.loads(json.dumps(out))
    forged["grid"][3]["minus_tuned_constant"]["ci95_low"] -= 1e-3
    assert any(x.startswith("grid max_min@6000 - tuned_constant") for x in bs.check_rows(rows, forged))
    bad = json.loads(json.dumps(rows))
    wrong = 8 if bad[2]["tuned_constant"]["action"] != 8 else 0
    bad[2]["baselines"]["tuned_constant"] = bad[2]["headroom"]["constant"][wrong]   # the truth of another action
    assert "tuned constant on seed 44" in bs.check_rows(bad, out)
    bad = _rows()
    bad[4]["arms"]["none@3000"]["checks"]["stage_draws_replayed"] = False         # integrity: refuse
    with pytest.raises(bs.StudyRefused, match="none@3000.stage_draws_replayed"):
        bs.summarise(bad)
    flag = _rows()
    flag[4]["arms"]["none@3000"]["checks"]["fusion_changes_preference"] = False   # outcome: flagged, kept
    out = bs.summarise(flag)
    assert out["outcome_flags"] == {"none@3000": {"46": ["fusion_changes_preference"]}}
    assert all(g["minus_fixed_gain"]["n"] == 20 for g in out["grid"])
    bad = _rows()
    bad[1]["eval_day_hashes"] = bad[0]["eval_day_hashes"]
    with pytest.raises(bs.StudyRefused, match="share an evaluation day"):
        bs.summarise(bad)
    from litrepro import stats
    real = stats.paired_ci
    monkeypatch.setattr(stats, "paired_ci", lambda a, b, **k: real(sorted(a), sorted(b), **k))   # unpaired
    with pytest.raises(bs.StudyRefused, match="plain-loop"):
        bs.summarise(_rows())


# --- The grid on a tiny world ---------------------------------------------------------------------------

TINY = dict(n_campaigns=48, actor_steps=30)


@pytest.fixture(scope="module")
def tiny(request):
    fqe = dict(dg.FQE)
    dg.FQE["steps"] = 20
    try:
        return bs.run_seed(11, overrides=TINY, budgets=(20, 60), scaling=((8, 40),))
    finally:
        dg.FQE.update(fqe)


def test_each_budget_is_its_own_run_on_shared_draws(tiny):
    arms = tiny["arms"]
    assert set(arms) == {bs.arm_name(b, n) for b in bs.BACKUPS for n in (20, 60)} | \
        {bs.arm_name(b, 40, 8) for b in bs.SCALING_BACKUPS}
    integrity = {a: [k for k, v in x["checks"].items() if v is not True and k not in dg.OUTCOME_CHECKS]
                 for a, x in arms.items()}
    assert not any(integrity.values()), integrity
    # arms of one budget drew the same critic rows; a longer budget drew more (its replay checks the prefix)
    assert len({arms[bs.arm_name(b, 20)]["draws_sha256"] for b in bs.BACKUPS}) == 1
    assert arms["max_min@20"]["draws_sha256"] != arms["max_min@60"]["draws_sha256"]
    one = dg.run_seed(11, table={"x": ("max_min 60", {"critic_steps": 60}, "td")}, overrides=TINY, replays=False,
                      tune=False)
    assert one["arms"]["x"]["learned_true_value"] == arms["max_min@60"]["learned_true_value"]   # a run of its own
    assert tiny["baselines"]["tuned_constant"] == tiny["headroom"]["constant"][tiny["tuned_constant"]["action"]]


def test_a_scaled_run_on_other_evaluation_days_is_refused(monkeypatch):
    real = dg.run_seed

    def other_days(seed, **kw):
        out = real(seed, **kw)
        if kw.get("overrides", {}).get("logged_days") == 8:
            out["eval_day_hashes"] = ["elsewhere"] * len(out["eval_day_hashes"])
        return out
    monkeypatch.setattr(dg, "run_seed", other_days)
    monkeypatch.setitem(dg.FQE, "steps", 5)
    with pytest.raises(ValueError, match="other evaluation days"):
        bs.run_seed(11, overrides=TINY, budgets=(20,), scaling=((8, 40),))


# (The study's command line, dry run and resuming are the runner's: tests/test_studies.py.)
