"""Each check and metric of pinterest_rlbp catches the faulty version it is named after.

Every test swaps one plausible bug into the real pipeline (``monkeypatch`` on the name
the pipeline actually calls), runs it end to end on a small configuration, and asserts
that the named check turns false or the named metric turns non-zero.  The first test
runs the same configuration unpatched and asserts the opposite, so a fault test can
only pass because of its fault.
"""

from __future__ import annotations

import pytest
import torch

from litrepro.rlbp import actor as actor_mod
from litrepro.rlbp import critic as critic_mod
from litrepro.rlbp import experiment as ex
from litrepro.rlbp import fixtures, pid, simulator
from litrepro.rlbp.config import RLBPConfig
from litrepro.rlbp.reward import cpc_reduction

SMALL = RLBPConfig(seed=7, n_campaigns=96, logged_days=2, eval_days=1, critic_steps=400, actor_steps=300)
F64 = torch.float64


@pytest.fixture(scope="module")
def clean():
    return ex.run(SMALL, sweep=False)


def test_the_small_configuration_passes_every_check(clean):
    assert all(clean["checks"].values()), clean["checks"]
    assert clean["extra_checks"] == {"heldout_campaigns_not_trained": True}
    assert clean["beyond_seed_metrics"]["td_loss_reference_error"] < 1e-12
    m = clean["metrics"]
    assert m["max_min_backup_error"] == 0 and m["derivative_gain_error"] == 0


def _zero_targets(value_reward, cpc_cost, q_value_next, q_cpc_next, done, gamma):
    return torch.zeros_like(value_reward), torch.zeros_like(cpc_cost)


def _random_targets(value_reward, cpc_cost, q_value_next, q_cpc_next, done, gamma):
    g = torch.Generator().manual_seed(int(value_reward.numel()))
    return (torch.randn(value_reward.shape, generator=g, dtype=F64) * value_reward.std() + value_reward.mean(),
            torch.randn(cpc_cost.shape, generator=g, dtype=F64) * cpc_cost.std() + cpc_cost.mean())


def _no_gamma(value_reward, cpc_cost, q_value_next, q_cpc_next, done, gamma):
    keep = 1.0 - done                                                   # the fault: gamma dropped
    return value_reward + keep * q_value_next.max(1).values, cpc_cost + keep * q_cpc_next.min(1).values


def _abs_total_reward(value_reward, cpc, target_cpc, lam):
    return value_reward + lam * cpc_reduction(cpc, target_cpc).abs()     # the fault: abs() on the reduction


def _abs_cost(cpc, target_cpc):
    return ((cpc - target_cpc) / target_cpc).abs()                      # the fault: abs() on the CPC head's cost


def _sum_fusion(q_value, q_cpc, lam):
    return q_value + lam * q_cpc                                        # the fault: CPC added, not subtracted


def _kick(e, e_prev, kd, dt):
    return kd * (e - (torch.zeros_like(e) if e_prev is None else e_prev)) / dt   # the fault: e_{-1} := 0


def _td_losses_cpc_max(critic, target, batch, gamma):
    """td_losses with the CPC target backed up by a max, written inline (backup_targets untouched)."""
    with torch.no_grad():
        qv_next, qc_next = target(batch.next_state)
        keep = gamma * (1.0 - batch.done)
        y_value = batch.value_reward + keep * qv_next.max(1).values
        y_cpc = batch.cpc_cost + keep * qc_next.max(1).values              # the fault: max for a cost
    q_value, q_cpc = critic(batch.state)
    taken = batch.action[:, None]
    return ((q_value.gather(1, taken).squeeze(1) - y_value).pow(2).mean(),
            (q_cpc.gather(1, taken).squeeze(1) - y_cpc).pow(2).mean())


def _td_losses_swapped_heads(original):
    def losses(critic, target, batch, gamma):
        class Swapped(torch.nn.Module):                                  # the fault: heads read the wrong way round
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, state):
                value, cpc = self.inner(state)
                return cpc, value
        return original(Swapped(critic), Swapped(target), batch, gamma)
    return losses


def _train_mask_keeps_everything(original):
    def flatten(logs, campaigns, lam, keep):
        if int(keep.sum()) * 2 > keep.numel():                           # the training split ...
            keep = torch.ones_like(keep)                                 # ... the fault: it keeps held-out campaigns too
        return original(logs, campaigns, lam, keep)
    return flatten


def _critic_fitted_on_heldout(original):
    def train(critic, train, heldout, **kw):
        return original(critic, heldout, heldout, **kw)                  # the fault: regress on the held-out set
    return train


def _concat(a, b):
    return type(a)(*(torch.cat([getattr(a, f), getattr(b, f)]) for f in a.__dataclass_fields__))


def _actor_data(original, make_train):
    def fit(world, critic, data, generator, lam=None):
        return original(world, critic, {**data, "train": make_train(data)}, generator, lam=lam)
    return fit


FAULTS = {
    # name: (patches [(module, attribute, replacement)], kind, name that must catch it)
    "critic regressed onto zeros": ([(critic_mod, "backup_targets", _zero_targets)], "check",
                                    "actual_reward_regression_update"),
    "critic regressed onto random labels": ([(critic_mod, "backup_targets", _random_targets)], "check",
                                            "actual_reward_regression_update"),
    "backup ignores gamma": ([(critic_mod, "backup_targets", _no_gamma), (fixtures, "backup_targets", _no_gamma)],
                             "metric", "max_min_backup_error"),
    "abs() on the pipeline's reward": ([(ex, "total_reward", _abs_total_reward)], "check",
                                       "CPC_reduction_retains_negative_sign"),
    "abs() on the critic's cost": ([(simulator, "cpc_cost", _abs_cost)], "check",
                                   "CPC_reduction_retains_negative_sign"),
    "actor trained on Qv + lambda Qc": ([(actor_mod, "fused_scores", _sum_fusion)], "check",
                                        "fusion_changes_preference"),
    "derivative kick (e_-1 := 0)": ([(pid, "derivative", _kick)], "metric", "derivative_gain_error"),
    "TD loss backs up the cost with max (td_losses only)": ([(critic_mod, "td_losses", _td_losses_cpc_max)], "check",
                                                            "opposite_backup_directions"),
    "TD loss reads the heads swapped": ([(critic_mod, "td_losses", _td_losses_swapped_heads(critic_mod.td_losses))],
                                        "check", "opposite_backup_directions"),
    "held-out campaigns leak into the training split": ([(ex, "_flatten", _train_mask_keeps_everything(ex._flatten))],
                                                        "extra", "heldout_campaigns_not_trained"),
    "critic fitted on the held-out set": ([(ex, "train_critic", _critic_fitted_on_heldout(ex.train_critic))], "extra",
                                          "heldout_campaigns_not_trained"),
    "actor fitted on the held-out set": ([(ex, "fit_actor", _actor_data(ex.fit_actor, lambda d: d["heldout"]))], "extra",
                                         "heldout_campaigns_not_trained"),
    "actor fitted on train plus held-out": ([(ex, "fit_actor", _actor_data(
        ex.fit_actor, lambda d: _concat(d["train"], d["heldout"])))], "extra", "heldout_campaigns_not_trained"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fault_is_caught(fault, monkeypatch):
    patches, kind, name = FAULTS[fault]
    for module, attribute, replacement in patches:
        assert hasattr(module, attribute), f"{module.__name__}.{attribute} is gone: the fault no longer applies"
        monkeypatch.setattr(module, attribute, replacement)
    results = ex.run(SMALL, sweep=False)
    if kind == "check":
        assert results["checks"][name] is False, f"{fault}: {name} stayed true"
    elif kind == "extra":
        assert results["extra_checks"][name] is False, f"{fault}: {name} stayed true"
    else:
        assert results["metrics"][name] > 1e-9, f"{fault}: {name} stayed {results['metrics'][name]}"


def _served_full_softmax(original):
    def probs(name, actor, state, cfg):
        if name == "learned":
            with torch.no_grad():
                return torch.softmax(actor(state), -1)                  # the fault: no top-k truncation when served
        return original(name, actor, state, cfg)
    return probs


def _propensity_one(original):
    def make(epsilon):
        policy = original(epsilon)

        def logged(state, generator):
            action, prob = policy(state, generator)
            return action, torch.ones_like(prob)                        # the fault: propensity logged as 1
        return logged
    return make


def test_served_policy_without_top_k_is_caught(monkeypatch):
    monkeypatch.setattr(ex, "_target_probs", _served_full_softmax(ex._target_probs))
    assert ex.run(SMALL, sweep=False)["checks"]["exact_top_k_support"] is False


def test_wrong_logged_propensities_are_caught(monkeypatch):
    monkeypatch.setattr(ex, "behaviour_policy", _propensity_one(ex.behaviour_policy))
    results = ex.run(SMALL, sweep=False)
    assert results["checks"]["ordinary_IPS_not_self_normalized"] is False
    assert results["beyond_seed_metrics"]["propensity_error"] > 0.5


@pytest.fixture(scope="module")
def logged():
    g = torch.Generator().manual_seed(3)
    world = ex.build_world(SMALL, g, torch.device("cpu"))
    return world, ex.collect_logged_data(world, g)["logs"]


def test_controller_replay_is_exact_on_the_real_simulator(logged):
    world, logs = logged
    assert ex.controller_replay_error(world, logs) < 1e-9 and ex.bounded_actions_applied(world, logs)


@pytest.mark.parametrize("fault", ["action ignored (fixed gains)", "Ki read from the Kp grid", "D term not added",
                                   "phi not clipped"])
def test_a_simulator_that_misapplies_the_action_is_caught(logged, fault):
    """Faulty simulators, as the logs they would write: the replay of gains and phi disagrees."""
    import dataclasses

    world, logs = logged
    log = logs[0]
    s = world.settings
    if fault == "action ignored (fixed gains)":
        bad = dataclasses.replace(log, kp=torch.full_like(log.kp, float(s.kp[4])), ki=torch.full_like(log.ki, float(s.ki[4])))
    elif fault == "Ki read from the Kp grid":
        bad = dataclasses.replace(log, ki=log.kp.clone())
    elif fault == "D term not added":
        bad = dataclasses.replace(log, phi=(log.phi - log.d_term).clamp(-s.phi_max, s.phi_max))
    else:
        unclipped = log.phi.clone()
        unclipped[log.phi.abs() >= s.phi_max] *= 1.5
        assert (log.phi.abs() >= s.phi_max).any(), "no step hits the clip: the fault would be invisible"
        bad = dataclasses.replace(log, phi=unclipped)
    assert not ex.bounded_actions_applied(world, [bad, *logs[1:]])


def test_served_actor_trained_without_fusion_is_caught(monkeypatch):
    """The fused check compares with a value-only control from the same generator state, so an actor
    served with lambda = 0 is that control exactly: its fused-score gain is 0, not > 0."""
    original = ex.fit_actor

    def value_only(world, critic, data, generator, lam=None):
        return original(world, critic, data, generator, lam=0.0)           # the fault: fusion weight ignored
    monkeypatch.setattr(ex, "fit_actor", value_only)
    results = ex.run(SMALL, sweep=False)
    assert results["beyond_seed_metrics"]["fused_score_gain"] == 0.0
    assert results["checks"]["fusion_changes_preference"] is False
