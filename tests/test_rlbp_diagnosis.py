"""The pinterest_rlbp diagnosis (``litrepro.rlbp.diagnosis``, ``make rlbp-diagnosis``).

The committed study is checked for freshness by source hashes (never re-run here), for
completeness, for intervals that recompute, and for pairing with the backup study (its
``max_min`` arm and its gamma-0 arm are the backup study's ``max_min`` and ``none`` on the
same seeds, to the last bit).  The counterfactual replays, the regression targets, the
study's refusals and its finding sentences are tested on tiny worlds and hand-made rows.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from litrepro import figcheck
from litrepro.rlbp import diagnosis as dg
from litrepro.rlbp import audit as rlbp_audit
from litrepro.rlbp import experiment as ex
from litrepro.rlbp import study
from litrepro.rlbp.config import RLBPConfig


@pytest.fixture(scope="module")
def data():
    if not dg.PATH.exists():
        pytest.fail(f"{dg.PATH} is missing: run `make rlbp-diagnosis`")
    return json.loads(dg.PATH.read_text())


def test_diagnosis_is_complete_checked_and_recomputes(data):
    assert data["n_seeds"] >= 20 and [r["seed"] for r in data["per_seed"]] == data["seeds"]
    assert [a["arm"] for a in data["summary"]["arms"]] == list(dg.ARMS)
    assert not {r["seed"]: dg.failed(r) for r in data["per_seed"] if dg.failed(r)}
    dg.check_intervals(data["per_seed"], data["summary"])                     # every interval, by a plain loop
    assert dg.summarise(data["per_seed"]) == data["summary"]
    assert 0 < data["wall_seconds"] < 20 * 60
    assert dg.PLOT.stat().st_size > 1000


def _current(path):
    """The committed study at ``path`` if it was made by the current sources, else skip (its freshness test
    in tests/test_studies.py fails then; the comparison waits until it is re-run)."""
    from litrepro import studyrunner

    other = json.loads(path.read_text())
    stale = studyrunner.stale(studyrunner.get("rlbp-study"), other)
    if stale:
        pytest.skip(f"{path.name} is stale for {stale[:3]}: run `make rlbp-study`, then compare")
    return other


def test_max_min_is_the_policy_comparisons_max_min(data):
    """The diagnosis's max_min is the study's max_min on the same seeds, to the last bit (same data, days, draws)."""
    comparison = _current(study.COMPARISON)
    assert data["seeds"] == comparison["seeds"]
    for row in data["per_seed"]:
        assert row["arms"]["max_min"]["learned_true_value"] == comparison["per_seed"][str(row["seed"])]["learned_true_value"]


def test_gamma_0_is_the_backup_studys_none_backup(data):
    """gamma 0 under the max/min backup is the backup study's none backup, to the last bit."""
    backups = _current(study.BACKUP_STUDY)
    for row in data["per_seed"]:
        seed = str(row["seed"])
        assert row["arms"]["gamma_0"]["learned_true_value"] == backups["per_seed"]["none"][seed]["learned_true_value"]
        assert row["arms"]["max_min"]["learned_true_value"] == backups["per_seed"]["max_min"][seed]["learned_true_value"]


def test_regression_margins_sit_above_each_arms_clean_spread(data):
    """The margin an arm is judged by (its backup's, or :data:`diagnosis.MARGIN_OF`) is above max + 4 sd of its
    measured clean control ratios, as the backup study's test requires of the backups, except for the arms
    :data:`diagnosis.THIN_MARGIN_ARMS` names (every seed below the margin, but closer than 4 sd)."""
    thin = []
    for arm, (_, changes, target) in dg.ARMS.items():
        backup = dg.MARGIN_OF.get(arm, changes.get("critic_backup", "max_min") if target in ("td", "placebo") else "none")
        flagged = {s for s, checks in dg.flagged(data["per_seed"], arm).items() if "actual_reward_regression_update" in checks}
        ratios = np.array([r["arms"][arm]["control_ratio"] for r in data["per_seed"] if str(r["seed"]) not in flagged])
        assert ratios.max() < rlbp_audit.CONTROL_MARGIN[backup], (arm, ratios.max())
        if not ratios.max() + 4 * ratios.std(ddof=1) < rlbp_audit.CONTROL_MARGIN[backup]:
            thin.append(arm)
    assert tuple(thin) == dg.THIN_MARGIN_ARMS


def test_diagnosis_figure_fits_its_canvas_and_findings_read_the_json(data):
    assert figcheck.outside_canvas(dg.plot(data)) == []
    lines = dg.findings(data)
    assert lines and all(isinstance(x, str) and x for x in lines)
    assert any(x.startswith("Untested by any arm here") for x in lines)
    assert dg.table(data).shape[0] == len(dg.ARMS)


# --- Hand-made rows: the summary, its refusals and the finding sentences ----------------------------------

def _rows(effects: dict[str, float], seeds=range(42, 62), noise: float = 0.004) -> list[dict]:
    rows = []
    for seed in seeds:
        rng = random.Random(seed)
        fixed = 1.6 + 0.1 * rng.random()
        arms = {a: {"learned_true_value": fixed + effects.get(a, -0.013) + rng.gauss(0, noise), "fixed_gain": fixed,
                    "best_constant": fixed + 0.047 + rng.gauss(0, 0.001), "best_constant_action": 8,
                    "action_shares": [1 / 9] * 9, "control_ratio": 0.2, "draws_sha256": "same", "checks": {"c": True}}
                for a in dg.ARMS}
        rows.append({"seed": seed, "eval_day_hashes": [f"{seed}-{d}" for d in range(4)],
                     "alignment": {"agreement": 0.4 + 0.01 * rng.random(), "segment_best_is_8": 0.2 + 0.01 * rng.random(),
                                   "day_best_is_8": 0.38 + 0.01 * rng.random(), "segment_regret_of_day_best": 0.16},
                     "replay": {"counterfactual_state_error": 0.0, "counterfactual_reward_error": 0.0,
                                "counterfactual_action_error": 0.0, "alignment_reference_agrees": True}, "arms": arms})
    return rows


def _findings(effects):
    rows = _rows(effects)
    return dg.findings({"n_seeds": len(rows), "summary": dg.summarise(rows)})


def test_findings_name_the_cause_the_intervals_support():
    lines = _findings({"monte_carlo": 0.03, "truth_target": 0.03})
    text = "\n".join(lines)
    assert ("Changing bootstrapping from the learned critic's next-state values, together with what else its arm "
            "changes (see the caveat), lifts the policy above max_min and above the fixed gain") in text
    assert "Caveat: monte_carlo also drops" in text                   # a confounded arm says so
    assert "The per-segment reward does not by itself explain the deficit" in text
    assert "the same critic and actor are above the fixed gain" in text and "does not say which part" in text
    assert "Changing the target network's sync period leaves the policy below the fixed gain" in text


def test_a_lift_within_the_placebos_reach_is_not_called_a_lift():
    """Both sync arms above max_min by a little, the placebo (a reseeded max_min) by as much: no lift is claimed."""
    text = "\n".join(_findings({"sync_1": -0.013 + 0.006, "sync_100": -0.013 + 0.006, "placebo": -0.013 + 0.006}))
    line = next(x for x in text.splitlines() if x.startswith("Changing the target network's sync period"))
    assert "lies within the placebo's" in line and "lifts" not in line, line
    text = "\n".join(_findings({"sync_1": -0.013 + 0.006, "sync_100": -0.013 + 0.006}))   # the placebo at max_min
    line = next(x for x in text.splitlines() if x.startswith("Changing the target network's sync period"))
    assert "lifts the policy above max_min" in line, line


def test_findings_rule_out_bootstrapping_when_removing_it_leaves_the_deficit():
    text = "\n".join(_findings({"monte_carlo": -0.013, "truth_target": 0.03}))
    assert ("Changing bootstrapping from the learned critic's next-state values, together with what else its arm "
            "changes (see the caveat), leaves the policy below") in text
    assert "not sufficient on its own" in text and "Ruled out" not in text
    assert "Not isolated by these arms: the per-segment reward" in text
    text = "\n".join(_findings({"truth_target": -0.013}))
    assert "does not tell whether the targets are the cause" in text


def test_cause_verdicts_follow_the_intervals():
    def arm(fixed, base):
        return {"minus_fixed_gain": {"ci95_low": fixed[0], "ci95_high": fixed[1]},
                "minus_max_min": {"ci95_low": base[0], "ci95_high": base[1]}}
    assert dg.cause_verdict([arm((0.01, 0.02), (0.02, 0.03))]) == "finds_headroom"
    assert dg.cause_verdict([arm((-0.01, 0.01), (0.005, 0.02))]) == "lifts_to_fixed"   # not below the fixed gain
    # one arm reaches the fixed gain, the other is still below it: not "closes the deficit"
    assert dg.cause_verdict([arm((-0.01, 0.01), (0.005, 0.02)), arm((-0.02, -0.001), (0.005, 0.02))]) == "lifts"
    assert dg.cause_verdict([arm((-0.02, -0.01), (0.001, 0.01))]) == "lifts"
    assert dg.cause_verdict([arm((-0.02, -0.01), (-0.01, 0.01))]) == "not_sufficient"
    assert dg.cause_verdict([arm((-0.02, 0.01), (-0.01, 0.01))]) == "open"


def test_summary_refuses_failed_checks_shared_days_unpaired_draws_and_unpaired_intervals(monkeypatch):
    rows = _rows({})
    assert dg.summarise(rows)
    bad = _rows({})
    bad[3]["arms"]["sync_1"]["checks"]["c"] = False
    with pytest.raises(dg.StudyRefused, match=r"45: \['sync_1.c'\]"):
        dg.summarise(bad)
    bad = _rows({})
    bad[1]["arms"]["monte_carlo"]["draws_sha256"] = "other"                # the generator was not reset
    with pytest.raises(dg.StudyRefused, match="arms_share_minibatches"):
        dg.summarise(bad)
    bad = _rows({})
    bad[1]["replay"]["counterfactual_state_error"] = 1e-3
    with pytest.raises(dg.StudyRefused, match="counterfactual_state_replays_log"):
        dg.summarise(bad)
    bad = _rows({})
    bad[1]["eval_day_hashes"] = bad[0]["eval_day_hashes"]
    with pytest.raises(dg.StudyRefused, match="share an evaluation day"):
        dg.summarise(bad)
    from litrepro import stats
    real = stats.paired_ci
    monkeypatch.setattr(stats, "paired_ci", lambda a, b, **k: real(sorted(a), sorted(b), **k))
    with pytest.raises(dg.StudyRefused, match="plain-loop"):
        dg.summarise(_rows({}))


def test_an_outcome_check_flags_a_seed_and_keeps_the_arm():
    """issue 28: an outcome check that fails is reported with the seed, the arm keeps its interval over every seed
    and gets one without the flagged seeds; an integrity check still refuses."""
    rows = _rows({"oracle_bootstrap": 0.03})
    rows[5]["arms"]["oracle_bootstrap"]["checks"]["fusion_changes_preference"] = False
    out = dg.summarise(rows)
    arm = next(a for a in out["arms"] if a["arm"] == "oracle_bootstrap")
    assert arm["flagged_seeds"] == {str(rows[5]["seed"]): ["fusion_changes_preference"]} and arm["n"] == 20
    assert arm["without_flagged"]["n"] == 19 and arm["without_flagged"]["minus_fixed_gain"]["n"] == 19
    text = "\n".join(dg.findings({"n_seeds": 20, "summary": out}))
    assert f"oracle_bootstrap: an outcome check failed on seed(s) {rows[5]['seed']} (fusion_changes_preference)" in text
    forged = json.loads(json.dumps(out))                                    # a flag dropped from the summary
    next(a for a in forged["arms"] if a["arm"] == "oracle_bootstrap")["flagged_seeds"] = {}
    with pytest.raises(dg.StudyRefused, match="oracle_bootstrap flagged seeds"):
        dg.check_intervals(sorted(rows, key=lambda r: r["seed"]), forged)
    rows[5]["arms"]["oracle_bootstrap"]["checks"]["stage_draws_replayed"] = False
    with pytest.raises(dg.StudyRefused, match="oracle_bootstrap.stage_draws_replayed"):
        dg.summarise(rows)


def test_the_ablation_table_is_one_row_per_factor_with_holm_beside_raw():
    rows = _rows({"expected_sarsa": 0.0, "steps_3000": 0.03, "placebo": -0.013})
    out = dg.summarise(rows)
    assert [r["factor"] for r in out["ablation"]] == [f for f, *_ in dg.ABLATIONS]
    steps = next(r for r in out["ablation"] if r["arm"] == "steps_3000")
    assert steps["raw"]["verdict"] == ">0" and steps["holm"]["reads"] == "higher"
    assert steps["holm"]["low"] <= steps["raw"]["ci95_low"] and steps["holm"]["high"] >= steps["raw"]["ci95_high"]
    assert all(r["holm"]["p_holm"] >= r["holm"]["p_raw"] for r in out["ablation"])
    forged = json.loads(json.dumps(out))
    forged["ablation"][4]["raw"]["mean_difference"] += 1e-3
    with pytest.raises(dg.StudyRefused, match="ablation budget"):
        dg.check_intervals(sorted(rows, key=lambda r: r["seed"]), forged)
    lines = dg.ablation_findings({"summary": out})
    assert len(lines) == len(dg.ABLATIONS) + 1 and "Holm-adjusted higher" in lines[5]


def test_holm_matches_its_formula_on_hand_made_p_values(monkeypatch):
    from litrepro import holm as h
    p = {"a": 0.01, "b": 0.04, "c": 0.03}
    monkeypatch.setattr(h, "t_test", lambda d: (d[0], 0.1, p[d[1]]))
    out = h.holm({k: [1.0, k] for k in p})
    assert out["a"]["p_holm"] == pytest.approx(0.03) and out["c"]["p_holm"] == pytest.approx(0.06)
    assert out["b"]["p_holm"] == pytest.approx(0.06)                      # monotone: never below an earlier step
    assert [out[k]["rank"] for k in "acb"] == [1, 2, 3] and out["a"]["level"] == pytest.approx(1 - 0.05 / 3)
    assert out["a"]["reads"] == "higher" and out["b"]["reads"] == "no detectable difference"


def test_the_study_writes_nothing_when_a_seed_fails(monkeypatch, tmp_path):
    from litrepro import studyrunner

    rows = {r["seed"]: r for r in _rows({}, seeds=(42, 43))}
    rows[43]["arms"]["gamma_0"]["checks"]["c"] = False
    monkeypatch.setattr(dg, "run_seed", lambda seed: rows[seed])
    out = tmp_path / "out"
    assert studyrunner.run(studyrunner.get("rlbp-diagnosis"), seeds=[42, 43], jobs=1, out=out,
                           state_root=tmp_path / "state", progress=False) == 1
    assert not out.exists()


# --- Mechanisms on a tiny world ---------------------------------------------------------------------

TINY = dict(n_campaigns=24, opportunities_per_step=8, logged_days=2, steps_per_day=12, segments_per_day=3)


@pytest.fixture(scope="module")
def tiny():
    cfg = RLBPConfig(seed=5, **TINY)
    g = torch.Generator().manual_seed(5)
    world = ex.build_world(cfg, g, torch.device("cpu"))
    data = ex.collect_logged_data(world, g)
    return world, data, dg.counterfactuals(world, data, cfg.lambda_cpc)


def test_counterfactual_replays_reproduce_the_log(tiny):
    world, data, cf = tiny
    d, k, c = len(data["logs"]), world.cfg.segments_per_day, world.cfg.n_campaigns
    assert cf["fused"].shape == (d, k, 9, k, c) and cf["states"].shape[:4] == (d, k, 9, c)
    replay = dg.replay_checks(cf, {**data, "target_cpc": world.campaigns.target_cpc}, world.cfg.lambda_cpc)
    assert replay == {"counterfactual_state_error": 0.0, "counterfactual_reward_error": 0.0,
                      "counterfactual_action_error": 0.0, "alignment_reference_agrees": True}
    # the replay that takes action a from segment k on keeps it: its gains are the grid's for a after k
    assert (cf["value"][:, 0] != cf["value"][:, 0, :1]).any()                  # the action changes the day


def test_a_replay_that_switches_one_segment_late_is_caught(tiny, monkeypatch):
    world, data, _ = tiny
    real = dg.switch_policy
    monkeypatch.setattr(dg, "switch_policy", lambda logged, switch, action: real(logged, switch + 1, action))
    cf = dg.counterfactuals(world, data, world.cfg.lambda_cpc)
    replay = dg.replay_checks(cf, {**data, "target_cpc": world.campaigns.target_cpc}, world.cfg.lambda_cpc)
    assert replay["counterfactual_action_error"] > 0
    row = {"replay": replay, "arms": {}}
    assert "counterfactual_takes_its_action" in dg.failed(row)


def test_a_replay_that_ignores_the_log_before_its_switch_is_caught(tiny, monkeypatch):
    world, data, _ = tiny
    real = dg.switch_policy
    monkeypatch.setattr(dg, "switch_policy", lambda logged, switch, action: real(logged, torch.zeros_like(switch), action))
    cf = dg.counterfactuals(world, data, world.cfg.lambda_cpc)
    replay = dg.replay_checks(cf, {**data, "target_cpc": world.campaigns.target_cpc}, world.cfg.lambda_cpc)
    assert replay["counterfactual_state_error"] > 0 and replay["counterfactual_action_error"] > 0
    assert {"counterfactual_state_replays_log", "counterfactual_takes_its_action"} <= set(dg.failed({"replay": replay, "arms": {}}))


def test_discounted_sums_and_targets_match_plain_loops(tiny):
    world, data, cf = tiny
    gamma = 0.9
    g = dg.discounted_from(cf["value"], gamma)                                  # (D, K, 9, C)
    d, k, a, c = 1, 1, 8, 3
    assert float(g[d, k, a, c]) == pytest.approx(sum(gamma ** (j - k) * float(cf["value"][d, k, a, j, c])
                                                     for j in range(k, cf["value"].shape[3])), rel=1e-12)
    mc_v, mc_c = dg.regression_targets("monte_carlo", cf, data, gamma)
    log = data["logs"][d]
    assert float(mc_v[d, 0, c]) == pytest.approx(sum(gamma ** j * float(log.value_reward[j, c])
                                                     for j in range(log.actions.shape[0])), rel=1e-12)
    truth_v, truth_c = dg.regression_targets("truth", cf, data, gamma)
    last = log.actions.shape[0] - 1                                             # the day's last segment: its own reward
    assert torch.allclose(truth_v[:, last], torch.stack([lg.value_reward[last] for lg in data["logs"]]), rtol=0, atol=1e-12)
    orc_v, orc_c = dg.regression_targets("oracle", cf, data, gamma)
    assert torch.equal(orc_c[:, last], torch.stack([lg.cpc_cost[last] for lg in data["logs"]]))
    nxt = max(float(dg.discounted_from(cf["value"], gamma)[d, 1, b, c]) for b in range(9))
    assert float(orc_v[d, 0, c]) == pytest.approx(float(log.value_reward[0, c]) + gamma * nxt, rel=1e-12)


def test_with_targets_keeps_the_transitions_order(tiny):
    world, data, _ = tiny
    value = torch.stack([lg.value_reward for lg in data["logs"]])
    cost = torch.stack([lg.cpc_cost for lg in data["logs"]])
    same = dg.with_targets(world, data, value, cost)
    for part in ("train", "heldout"):
        assert torch.equal(same[part].value_reward, data[part].value_reward)
        assert torch.equal(same[part].cpc_cost, data[part].cpc_cost)
        assert torch.equal(same[part].state, data[part].state)


def test_alignment_on_a_hand_made_table():
    fused = torch.zeros(1, 2, 9, 2, 1, dtype=torch.float64)                    # (D, K, 9, K, C)
    fused[0, 0, 3, 0, 0] = 1.0                                                 # segment 0: action 3 best now ...
    fused[0, 0, 8, 1, 0] = 2.0                                                 # ... action 8 best over the day
    fused[0, 1, 8, 1, 0] = 1.0                                                 # segment 1: action 8 best either way
    out = dg.alignment({"fused": fused}, torch.zeros(1, 2, 1, dtype=torch.long))
    assert out["agreement"] == 0.5 and out["day_best_is_8"] == 1.0 and out["segment_best_is_8"] == 0.5
    assert out["segment_regret_of_day_best"] == pytest.approx(0.5)
    assert dg.alignment_reference({"fused": fused}, 0, 0, 0) == (3, 8)


# --- The placebo, the critic diagnostics and the tuned constant on a small world ---------------------------

SMALL = dict(n_campaigns=32, critic_steps=60, actor_steps=30)


@pytest.fixture(scope="module")
def small_seed():
    fqe = dict(dg.FQE)
    dg.FQE["steps"] = 30
    try:
        return dg.run_seed(7, arms=["max_min", "placebo", "expected_sarsa", "monte_carlo"], overrides=SMALL)
    finally:
        dg.FQE.update(fqe)


def test_the_placebo_changes_only_the_critics_draws(small_seed):
    arms = small_seed["arms"]
    integrity = lambda a: {k: v for k, v in arms[a]["checks"].items() if k not in dg.OUTCOME_CHECKS}
    assert all(integrity("placebo").values()), integrity("placebo")
    assert arms["placebo"]["checks"]["placebo_changes_critic_draws"] is True
    assert arms["placebo"]["draws_sha256"] != arms["max_min"]["draws_sha256"]
    assert arms["placebo"]["learned_true_value"] != arms["max_min"]["learned_true_value"]
    assert not dg.failed(small_seed)


def test_a_placebo_that_draws_max_mins_streams_or_an_unnamed_stream_is_caught(monkeypatch):
    monkeypatch.setattr(dg.ReseededStreams, "generator", lambda self, name: self.base.generator(name))
    same = dg.run_seed(7, arms=["max_min", "placebo"], overrides=SMALL, tune=False, replays=False)
    assert same["arms"]["placebo"]["checks"]["placebo_changes_critic_draws"] is False
    assert "placebo.placebo_changes_critic_draws" in dg.failed(same)

    from litrepro.rlbp.streams import stream_seed
    monkeypatch.setattr(dg.ReseededStreams, "generator", lambda self, name: torch.Generator().manual_seed(
        stream_seed(self.seed, name + "/other")) if name in dg.RESEEDED else self.base.generator(name))
    other = dg.run_seed(7, arms=["max_min", "placebo"], overrides=SMALL, tune=False, replays=False)
    assert other["arms"]["placebo"]["checks"]["stage_draws_replayed"] is False


def test_critic_diagnostics_match_scipy_on_the_runs_states(small_seed):
    from scipy import stats as sps
    cfg = RLBPConfig(seed=7, **SMALL)
    world = ex.build_world(cfg, torch.Generator().manual_seed(7), torch.device("cpu"))
    from litrepro.rlbp.streams import Streams
    g = Streams(7)
    world = ex.build_world(cfg, g, torch.device("cpu"))
    data = ex.collect_logged_data(world, g)
    cf = dg.counterfactuals(world, data, cfg.lambda_cpc)
    critic, _ = ex.fit_critic(world, data, g)
    held = ex.heldout_campaigns(world)
    got = dg.critic_diagnostics(critic, cf, data, held, cfg.lambda_cpc, cfg.gamma)
    assert got["rank_correlation"] == pytest.approx(small_seed["arms"]["max_min"]["critic"]["rank_correlation"], abs=0)
    truth = dg.discounted_from(cf["fused"], cfg.gamma)                        # (D, K, 9, C)
    cols = torch.nonzero(held).squeeze(1).tolist()
    rhos, bias, constant, n = [], [0.0] * 9, 0, 0
    for d in range(truth.shape[0]):
        for k in range(truth.shape[1]):
            for c in cols:                                                   # a plain loop over states, scipy's rho
                s = data["logs"][d].states[k, c][None]
                with torch.no_grad():
                    qv, qc = critic(s)
                score = (qv - cfg.lambda_cpc * qc)[0].tolist()
                t = truth[d, k, :, c].tolist()
                if len(set(t)) > 1 and len(set(score)) > 1:                  # scipy's rho is undefined otherwise
                    rhos.append(sps.spearmanr(score, t).statistic)
                else:
                    constant += 1
                bias = [b + x - y for b, x, y in zip(bias, score, t)]
                n += 1
    assert got["rank_correlation"] == pytest.approx(sum(rhos) / len(rhos), rel=1e-9)
    assert got["action_bias"] == pytest.approx([b / n for b in bias], rel=1e-9)
    assert got["constant_states"] == pytest.approx(constant / n, rel=1e-12) and got["states"] == n
    ties = torch.tensor([[1.0, 1.0, 3.0, 2.0]], dtype=torch.float64)             # average ranks of a tie
    assert dg.average_ranks(ties).tolist() == [[0.5, 0.5, 3.0, 2.0]]


def test_the_tuned_constant_is_the_argmax_of_its_estimates(small_seed):
    t = small_seed["tuned_constant"]
    assert t["action"] == max(range(9), key=lambda a: (t["fqe"][a], -a))
    assert t["ips_action"] == max(range(9), key=lambda a: (t["ips"][a], -a))
    cfg = RLBPConfig(seed=7, **SMALL)
    from litrepro.rlbp.streams import Streams
    g = Streams(7)
    world = ex.build_world(cfg, g, torch.device("cpu"))
    train = ex.collect_logged_data(world, g)["train"]
    for a in (0, 8):                                                         # ordinary IPS by a plain loop
        total = sum(float(r) / float(p) for r, p, x in zip(train.reward, train.propensity, train.action) if int(x) == a)
        assert t["ips"][a] == pytest.approx(total / len(train), rel=1e-12)
