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
    else:
        assert results["metrics"][name] > 1e-9, f"{fault}: {name} stayed {results['metrics'][name]}"
