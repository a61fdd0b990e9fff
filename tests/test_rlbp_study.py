"""The committed 20-seed pinterest_rlbp study is current, complete, internally consistent and checked.

``make rlbp-study`` writes it; these tests never re-run it.  They check that it was
made by the current sources and parameters, that every interval recomputes from the
stored per-seed figures, that every seed's checks held, that the regression-control
margin sits above the measured clean spread, and what the issue asks of the frontier.
The refusal logic of the study is tested on hand-made results.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from litrepro.rlbp import experiment as ex
from litrepro.rlbp import study
from litrepro.stats import fmt_ci, paired_ci


@pytest.fixture(scope="module")
def comparison():
    assert study.COMPARISON.is_file(), "run `make rlbp-study` and commit rendered/pinterest_rlbp/"
    return json.loads(study.COMPARISON.read_text())


@pytest.fixture(scope="module")
def backups():
    assert study.BACKUP_STUDY.is_file(), "run `make rlbp-study` and commit rendered/pinterest_rlbp/"
    return json.loads(study.BACKUP_STUDY.read_text())


def test_study_has_twenty_seeds_and_recomputable_intervals(comparison):
    assert comparison["n_seeds"] >= 20 and len(comparison["per_seed"]) == comparison["n_seeds"]
    assert study.comparisons_from_figures(comparison["per_seed"]) == comparison["comparisons"]
    for row in comparison["comparisons"]:
        assert row["n"] == comparison["n_seeds"]
        assert row["ci95_low"] <= row["mean_difference"] <= row["ci95_high"]
    names = {(r["comparison"], r["metric"]) for r in comparison["comparisons"]}
    assert {("learned - fixed_gain", "true_value"), ("learned - behaviour", "true_value"),
            ("IPS - truth (learned)", "true_value_heldout"), ("IPS - truth (behaviour)", "true_value_heldout"),
            ("IPS - truth (fixed_gain)", "true_value_heldout")} <= names


def test_every_seed_and_backup_passed_every_check(comparison, backups):
    """Every arm with intervals passed every check on every seed; an arm that did not is named, with its
    failing seeds and checks, under ``refused_arms``, and has no interval."""
    assert set(comparison["check_pass_rates"].values()) == {1.0}
    refused = backups.get("refused_arms", {})
    assert "max_min" not in refused
    for backup, rates in backups["check_pass_rates"].items():
        if backup in refused:
            failing = {c for checks in refused[backup].values() for c in checks}
            assert failing and all(rates[c] < 1.0 for c in failing), backup
        else:
            assert set(rates.values()) == {1.0}, backup


def test_regression_margin_sits_above_the_measured_clean_spread(backups):
    """The margin of actual_reward_regression_update comes from the clean ratios' spread, per backup."""
    for backup, seeds in backups["per_seed"].items():
        ratios = np.array([s["control_ratio"] for s in seeds.values()])
        assert ratios.max() + 4 * ratios.std(ddof=1) < ex.CONTROL_MARGIN[backup], (backup, ratios.max())


def test_backup_study_recomputes_and_covers_every_backup(backups):
    assert backups["n_seeds"] >= 20
    refused = backups.get("refused_arms", {})
    assert [r["backup"] for r in backups["backups"]] == [b for b in study.BACKUPS if b not in refused]
    assert set(per := backups["per_seed"]) == {r["backup"] for r in backups["backups"]}
    per = backups["per_seed"]
    for row in backups["backups"]:
        seeds = sorted(per[row["backup"]], key=int)
        learned = [per[row["backup"]][s]["learned_true_value"] for s in seeds]
        fixed = [per[row["backup"]][s]["headroom"]["fixed_gain"] for s in seeds]
        again = paired_ci(learned, fixed)
        assert {k: row["learned_minus_fixed"][k] for k in again} == again
        oracle = [per[row["backup"]][s]["headroom"]["best_per_kind"] for s in seeds]
        assert row["learned_minus_best_per_kind"]["mean_difference"] == pytest.approx(np.mean(np.subtract(learned, oracle)))
    # the data and days are shared: the headroom is the same for every backup
    heads = {b: {s: v["headroom"] for s, v in seeds.items()} for b, seeds in per.items()}
    assert all(h == heads["max_min"] for h in heads.values())
    days = {r["logged_days"] for r in backups["scaling"]}
    assert days == set(study.SCALING_DAYS)
    assert {r["backup"] for r in backups["scaling"]} == {"max_min", backups["best_other_backup"]}


def test_lambda_frontier_covers_the_grid_and_neighbours_are_paired():
    front = json.loads(study.FRONTIER.read_text())
    assert [row["lambda"] for row in front["points"]] == list(ex.LAMBDAS)
    assert all(len(row["seeds"]) >= 20 for row in front["points"])
    assert len(front["neighbour_differences"]) == 2 * (len(ex.LAMBDAS) - 1)
    for name in ("lambda_frontier.png", "policy_comparison.png", "backup_study.png"):
        assert (study.FOLDER / name).stat().st_size > 1000


def _result(seed, hashes, ok=True):
    return {"seed": seed, "checks": {"a": True}, "extra_checks": {"b": ok}, "eval_day_hashes": hashes}


def test_study_refuses_a_seed_whose_checks_failed():
    study.verify([_result(1, ["x"]), _result(2, ["y"])], "clean")
    with pytest.raises(study.StudyRefused, match="seeds {2: \\['b'\\]}"):
        study.verify([_result(1, ["x"]), _result(2, ["y"], ok=False)], "faulty")


def test_study_refuses_seeds_that_share_evaluation_days():
    """Evaluation days drawn from a generator that ignores the seed would repeat across seeds."""
    with pytest.raises(study.StudyRefused, match="share an evaluation day"):
        study.verify([_result(1, ["x", "z"]), _result(2, ["z", "w"])], "shared")


def test_interval_bounds_print_rounded_outward():
    assert fmt_ci(-0.023, -0.0015) == "[-0.023, -0.0015]"
    assert fmt_ci(-0.0234, 0.0105) == "[-0.024, +0.011]"
    assert fmt_ci(0.0105, 0.0213) == "[+0.010, +0.022]"
    assert fmt_ci(-0.00149, 0.00149) == "[-0.0015, +0.0015]"
    assert fmt_ci(2.7158, 36.213) == "[+2.7, +37]"                    # no bare trailing point
    assert fmt_ci(-150.2, 9.96) == "[-1.6e+02, +10]"
    assert fmt_ci(0.5, 1.0) == "[+0.50, +1.0]"                       # trailing zeros kept


def test_headroom_share_interval_contains_the_share():
    rng = np.random.default_rng(1)
    head = rng.normal(0.05, 0.01, 20)
    gain = 0.3 * head + rng.normal(0, 0.005, 20)
    out = study.headroom_share(gain, head)
    assert out["ci95_low"] < out["share"] < out["ci95_high"]
    assert out["share"] == pytest.approx(gain.mean() / head.mean())


# --- The study refuses rows that its plain-loop recomputation does not reproduce -------------------

def _fake_results(n=8, offset=0.0, seed0=100):
    rng = np.random.default_rng(seed0)
    out = []
    for s in range(seed0, seed0 + n):
        beyond = {f"{p}_{k}": float(rng.normal(1.0, 0.1)) for p in ("learned", "behaviour", "fixed_gain")
                  for k in ("true_value", "value", "cpc_overshoot", "ips", "true_value_heldout")}
        beyond["learned_true_value"] += offset
        fixed = beyond["fixed_gain_true_value"]
        head = {"fixed_gain": fixed, "best_constant": fixed + 0.02 + float(rng.normal(0, 0.005)),
                "best_per_kind": fixed + 0.05 + float(rng.normal(0, 0.01)),
                "best_per_campaign": fixed + 0.09 + float(rng.normal(0, 0.01)), "constant": [fixed] * 9,
                "best_constant_action": 4}
        sweep = [{"lambda": lam, "value": float(rng.normal(1.5, 0.05)), "cpc_overshoot": float(rng.normal(0.06, 0.01))}
                 for lam in ex.LAMBDAS]
        out.append({"seed": s, "beyond_seed_metrics": beyond, "headroom": head, "lambda_sweep": sweep})
    return out


def _all_rows(arms):
    results = arms["max_min"]
    rows = study.backup_rows(arms)
    by_days = {4: {"max_min": results, "none": arms["none"]}}
    return (study.check_comparisons(results, study.comparisons(results))
            + study.check_frontier(results, study.frontier(results))
            + study.check_backups(arms, rows, study.headroom_summary(results), study.scaling_rows(by_days), by_days))


@pytest.fixture()
def arms():
    return {"max_min": _fake_results(), "fused_greedy": _fake_results(offset=0.01), "policy": _fake_results(offset=-0.01),
            "none": _fake_results(offset=0.02)}


def test_clean_study_rows_recompute(arms):
    assert _all_rows(arms) == []
    study.refuse_mismatches([])


def test_study_refuses_intervals_with_a_normal_quantile(arms, monkeypatch):
    from scipy import stats as scipy_stats

    def narrow(a, b, **_):
        d = np.subtract(a, b)
        half = scipy_stats.norm.ppf(0.975) * scipy_stats.sem(d)                 # the fault: z, not t with n - 1 df
        return {"n": len(d), "mean_difference": float(d.mean()), "ci95_low": float(d.mean() - half),
                "ci95_high": float(d.mean() + half)}
    monkeypatch.setattr(study, "paired_ci", narrow)
    bad = _all_rows(arms)
    assert any(b.startswith("policy_comparison") for b in bad) and any(b.startswith("backup_study") for b in bad)
    with pytest.raises(study.StudyRefused, match="plain-loop"):
        study.refuse_mismatches(bad)


def test_study_refuses_error_bars_with_divisor_n(arms, monkeypatch):
    monkeypatch.setattr(study, "standard_error", lambda v: float(np.std(v) / np.sqrt(len(v))))   # the fault: ddof 0
    assert [b for b in _all_rows(arms) if b.startswith("lambda_frontier")]


def test_study_refuses_rows_paired_across_seeds(arms, monkeypatch):
    original = study.backup_rows

    def misaligned(arms_):
        rows = original(arms_)
        for row, (backup, results) in zip(rows, arms_.items()):
            learned = [r["beyond_seed_metrics"]["learned_true_value"] for r in sorted(results, key=lambda r: r["seed"])]
            fixed = [r["headroom"]["fixed_gain"] for r in reversed(results)]        # the fault: paired by position
            row["learned_minus_fixed"] = study._ci_row("learned - fixed_gain", "true_value", learned, fixed)
        return rows
    monkeypatch.setattr(study, "backup_rows", misaligned)
    assert [b for b in _all_rows(arms) if "learned_minus_fixed" in b]


def test_study_refuses_a_seed_twice(arms):
    twice = arms["max_min"] + arms["max_min"][:1]
    with pytest.raises(study.StudyRefused, match="appears twice"):
        study.check_comparisons(twice, study.comparisons(twice))


def test_audit_cost_is_recorded_and_within_its_goal():
    """``benchmarks/rlbp_check_cost.py --write`` recorded the checks' share of a seed's run (issue 21: <= 15%)."""
    data = json.loads((study.FOLDER / "audit_cost.json").read_text())
    assert data["statistic"] == "median" and data["repeats"] >= 3
    assert data["checks_share_of_run"] == pytest.approx(data["checks_s"] / data["run_s"], abs=1e-3)
    assert data["checks_s"] == pytest.approx(sum(data["per_check_ms"].values()) / 1e3, abs=2e-3)
    assert data["checks_share_of_run"] <= data["goal_share"] == 0.15
