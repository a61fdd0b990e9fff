"""The TD calibration experiment (``litrepro.rlbp.td_calibration``): identities on tiny cases, a tiny
end-to-end seed, a fault its check catches, and the freshness of the committed study (not re-run)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from litrepro.rlbp import td_calibration as tc
from litrepro.rlbp.config import RLBPConfig
from litrepro.rlbp.critic import Transitions, TwoHeadCritic, heldout_td_loss

TINY = dict(n_campaigns=8, steps_per_day=6, segments_per_day=3, opportunities_per_step=4, logged_days=1,
            critic_steps=12, hidden=8, actor_steps=3, batch_size=16, actor_batch_size=16, target_update_every=4)


def _batch(n: int = 40, seed: int = 0) -> Transitions:
    g = torch.Generator().manual_seed(seed)
    f64 = torch.float64
    r = lambda *s: torch.randn(*s, generator=g, dtype=f64)   # noqa: E731
    done = (torch.rand(n, generator=g, dtype=f64) < 0.3).to(f64)
    return Transitions(state=r(n, 8), action=torch.randint(9, (n,), generator=g), propensity=torch.full((n,), 1 / 9, dtype=f64),
                       value_reward=2 + r(n), cpc_cost=r(n), reward=r(n), cpc=r(n), target_cpc=torch.ones(n, dtype=f64),
                       next_state=r(n, 8), done=done, campaign=torch.zeros(n, dtype=torch.long))


def _critic(seed: int = 1) -> TwoHeadCritic:
    torch.manual_seed(seed)
    return TwoHeadCritic(8, 16)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_relaxation_step_gives_0_9025_on_any_data(seed):
    got = tc.relaxation_ratio(_critic(seed), _batch(seed=seed), gamma=0.9)
    assert abs(got["ratio"] - 0.9025) < 1e-12
    q0, y0 = torch.randn(50, dtype=torch.float64), torch.randn(50, dtype=torch.float64)
    q1 = tc.relaxation_step(q0, y0, 0.05)
    assert abs(float((q1 - y0).pow(2).mean() / (q0 - y0).pow(2).mean()) - 0.95 ** 2) < 1e-12


def test_the_quadratic_law_matches_direct_recomputation():
    critic, batch = _critic(), _batch()
    abc = tc.quadratic(tc.head_terms(critic, batch, 0.9))
    for c, s in ((0.1, 1.0), (3.0, 1.0), (0.5, 0.5), (2.0, 0.3)):
        direct = sum(heldout_td_loss(tc.scaled_critic(critic, s), tc.rescaled(batch, c), 0.9))
        assert tc.loss_at(abc, c, s) == pytest.approx(direct, rel=1e-10)


def test_a_change_of_units_has_exponent_2_and_rewards_alone_do_not():
    critic, batch = _critic(), _batch()
    joint = [sum(heldout_td_loss(tc.scaled_critic(critic, k), tc.rescaled(batch, k), 0.9)) for k in (0.1, 1.0)]
    assert tc.slope(0.1, joint[0], 1.0, joint[1]) == pytest.approx(2.0, abs=1e-10)
    alone = [sum(heldout_td_loss(critic, tc.rescaled(batch, c), 0.9)) for c in (0.01, 0.1)]
    assert tc.slope(0.01, alone[0], 0.1, alone[1]) < 1.9          # the initial critic's floor bends the law


def test_a_zero_initialised_critic_gives_exponent_2_for_rewards_alone():
    critic, batch = tc.scaled_critic(_critic(), 0.0), _batch()
    abc = tc.quadratic(tc.head_terms(critic, batch, 0.9))
    assert abc[1] == 0 and abc[2] == 0
    assert tc.reward_only_exponent(abc, 0.37) == pytest.approx(2.0, abs=1e-12)
    assert tc.reward_only_floor(abc) == 0


@pytest.mark.parametrize("cv_a, n_a, cv_b, n_b", [(0.59, 3, 0.10, 20), (0.2, 3, 0.10, 20), (0.1, 5, 0.3, 12),
                                                    (0.15, 10, 0.12, 10)])
def test_the_spread_ratio_interval_excludes_1_exactly_when_the_f_test_rejects(cv_a, n_a, cv_b, n_b):
    from scipy import stats as sps

    got = tc.spread_ratio(cv_a, n_a, cv_b, n_b)
    f = (cv_a / cv_b) ** 2
    p = 2 * min(sps.f.cdf(f, n_a - 1, n_b - 1), sps.f.sf(f, n_a - 1, n_b - 1))   # two-sided variance-ratio test
    assert got["ci95_low"] < got["estimate"] < got["ci95_high"]
    assert (got["ci95_low"] > 1 or got["ci95_high"] < 1) == (p < 0.05)


def test_first_step_at_or_below():
    assert tc.first_step_at_or_below([1.0, 0.95, 0.9, 0.8], 0.9025) == 2
    assert tc.first_step_at_or_below([1.0, 0.95], 0.9025) is None
    assert tc.first_step_at_or_below([0.5, 0.95], 0.9025) is None   # index 0 is before training


@pytest.fixture(scope="module")
def tiny_row():
    cfg = RLBPConfig(seed=3, **TINY)
    return tc.seed_figures(cfg, unit=0.1)


def test_a_tiny_seed_passes_every_check(tiny_row):
    assert all(tiny_row["checks"].values()), tiny_row["gaps"]
    assert tiny_row["unit"]["td_loss_before"] == pytest.approx(0.01 * tiny_row["td_loss_before"], rel=1e-9)
    assert tiny_row["ratio_curve"][0] == 1.0 and len(tiny_row["ratio_curve"]) == TINY["critic_steps"] + 1


@pytest.mark.guards("loop_matches_pipeline")
def test_a_curve_loop_that_never_syncs_its_target_is_caught(monkeypatch):
    monkeypatch.setattr(tc, "sync_target", lambda target, critic: None)   # the plausible bug: a forgotten sync
    row = tc.seed_figures(RLBPConfig(seed=3, **TINY))
    assert row["checks"]["loop_matches_pipeline"] is False
    assert row["gaps"]["loop_matches_pipeline"] > 1e-6


@pytest.mark.guards("relaxation_identity")
def test_a_relaxation_that_re_bootstraps_its_targets_is_caught(monkeypatch):
    """A relaxation whose step also moves the targets (alpha applied to y - Q with y recomputed) is not 0.95^2."""
    monkeypatch.setattr(tc, "relaxation_step", lambda q0, y0, alpha=tc.ALPHA: q0 + alpha * (y0 - q0) + 0.01 * y0)
    row = tc.seed_figures(RLBPConfig(seed=3, **TINY))
    assert row["checks"]["relaxation_identity"] is False


@pytest.mark.guards("quadratic_matches_direct")
def test_a_quadratic_with_the_cross_term_sign_flipped_is_caught(monkeypatch):
    monkeypatch.setattr(tc, "loss_at", lambda abc, c, s=1.0: abc[0] * c * c + 2.0 * abc[1] * c * s + abc[2] * s * s)
    row = tc.seed_figures(RLBPConfig(seed=3, **TINY))
    assert row["checks"]["quadratic_matches_direct"] is False


@pytest.mark.guards("decomposition_sums")
def test_a_cross_moment_taken_from_the_target_alone_is_caught(monkeypatch):
    """A copy-paste slip: mean y*y where mean q*y belongs; the pieces then no longer sum to the loss."""
    original = tc.head_terms

    def slipped(critic, batch, gamma):
        out = original(critic, batch, gamma)
        for t in out.values():
            t["cross"] = t["target_second_moment"]
        return out

    monkeypatch.setattr(tc, "head_terms", slipped)
    row = tc.seed_figures(RLBPConfig(seed=3, **TINY))
    assert row["checks"]["decomposition_sums"] is False


@pytest.mark.guards("unit_law_exact")
def test_a_retraining_unit_that_forgets_the_cpc_cost_is_caught(monkeypatch):
    """``rescaled`` that scales r^v and the fused reward but leaves the CPC cost in unit 1."""
    monkeypatch.setattr(tc, "rescaled", lambda batch, c: dataclasses.replace(
        batch, value_reward=c * batch.value_reward, reward=c * batch.reward))
    row = tc.seed_figures(RLBPConfig(seed=3, **TINY), unit=0.1)
    assert row["checks"]["unit_law_exact"] is False


def test_every_study_check_is_registered(tiny_row):
    assert set(tiny_row["checks"]) == set(tc.STUDY_GUARDS)
    assert all(stage and line for stage, line in tc.STUDY_GUARDS.values())


# --- the committed study (not re-run) -----------------------------------------------------------

@pytest.fixture(scope="module")
def study():
    path = tc.OUT
    assert path.is_file(), f"{path} missing: run make rlbp-td-calibration"
    return json.loads(path.read_text())


def test_td_calibration_has_twenty_seeds_passing_checks_and_recomputable_rows(study):
    rows = list(study["per_seed"].values())
    assert study["n_seeds"] >= 20 and len(rows) == study["n_seeds"]
    assert all(all(r["checks"].values()) for r in rows)
    assert tc.recompute_rows(rows, study) == []
    for row in study["calibration_table"]:
        if row["z_explained"] is not None:
            assert row["z_explained"] == pytest.approx((row["ours_explained"] - row["recorded_mean"]) / row["recorded_std"])


def test_findings_read_the_json(study):
    lines = tc.findings(study)
    assert len(lines) >= 8 and all(isinstance(x, str) and x for x in lines)
    assert not any("nan" in x.lower() for x in lines)
    k = study["scale"]["joint_unit"]["k"]
    assert any(f"{k:.3g}" in x for x in lines)
