"""Hand-made fixtures with known answers, one per seed check.

Each function runs the real mechanism on a small documented input and returns
the measured figure; nothing here returns a constant.
"""

from __future__ import annotations

import torch

from litrepro.rlbp.actor import fused_scores
from litrepro.rlbp.critic import backup_reference, backup_targets
from litrepro.rlbp.ope import ordinary_ips, snips
from litrepro.rlbp.reward import cpc_reduction, total_reward

F64 = torch.float64

#: Backup fixture.  Row 0 is the seed-comparable case: gamma = 1, not terminal, value
#: reward 1, CPC cost 5, and a CPC row spanning 10..80, so a CPC backup that wrongly took
#: the max would move the target by 80 - 10 = 70.  That 70 is a property of this row we
#: chose, not a measurement of the method: ``wrong_cpc_max_backup_gap`` matches the seed
#: file's 70 because the row was built to span 70, and it says nothing more.
#: Rows 1-2 are checked at the run's own gamma (< 1): row 1 bootstraps, row 2 is terminal,
#: so a backup that ignores gamma or done disagrees with the reference loop there.
BACKUP_FIXTURE = {
    "value_reward": [1.0], "cpc_cost": [5.0], "done": [0.0], "gamma": 1.0,
    "q_value_next": [[3.0, 9.0, 4.0, 1.0, 7.0, 2.0, 8.0, 5.0, 6.0]],
    "q_cpc_next": [[10.0, 80.0, 30.0, 45.0, 25.0, 60.0, 15.0, 70.0, 35.0]],
}
DISCOUNT_FIXTURE = {
    "value_reward": [0.5, -0.25], "cpc_cost": [-0.5, 0.75], "done": [0.0, 1.0],
    "q_value_next": [[2.0, -1.0, 4.0, 0.5, 3.0, 1.0, -2.0, 0.0, 1.5], [6.0, 1.0, 2.0, 3.0, 4.0, 5.0, 0.0, 1.0, 2.0]],
    "q_cpc_next": [[0.3, -0.6, 0.9, 0.1, 0.4, -0.2, 0.8, 0.0, 0.5], [1.0, 2.0, -3.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]],
}

#: Fusion fixture: action 0 has the best value but a high CPC; action 1 is
#: slightly worse on value and much cheaper.  Fusion flips the argmax when lambda > 0.25.
FUSION_FIXTURE = {"q_value": [[1.0, 0.9, 0.2, 0.1, 0.0, 0.3, 0.4, 0.5, 0.6]],
                  "q_cpc": [[0.5, 0.1, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3]]}

#: CPC fixture: a segment spending 150 for 100 clicks at target CPC 1.0 (CPC rose to 1.5).
CPC_FIXTURE = {"value_reward": 0.8, "cpc": 1.5, "target_cpc": 1.0}

#: IPS fixture: weights pi/mu = (2, 0.5, 0.2); IPS = 2.4 / 3 = 0.8, SNIPS = 2.4 / 2.7.
IPS_FIXTURE = {"reward": [1.0, 0.0, 2.0], "target_prob": [0.5, 0.2, 0.1], "logging_prob": [0.25, 0.4, 0.5]}


def _t(x):
    return torch.tensor(x, dtype=F64)


def backup_fixture(gamma: float) -> dict:
    """``max_min_backup_error``, ``wrong_cpc_max_backup_gap`` and ``opposite_backup_directions``.

    ``max_min_backup_error`` is the largest gap between the vectorised backup and the
    plain-loop reference over both fixtures: ``BACKUP_FIXTURE`` at gamma = 1 and
    ``DISCOUNT_FIXTURE`` at the run's ``gamma`` (a bootstrapping and a terminal row).
    """
    f = BACKUP_FIXTURE
    args = (_t(f["value_reward"]), _t(f["cpc_cost"]), _t(f["q_value_next"]), _t(f["q_cpc_next"]), _t(f["done"]))
    y_value, y_cpc = backup_targets(*args, f["gamma"])
    ref_value, ref_cpc = backup_reference(*args, f["gamma"])
    errors = [(y_value - _t(ref_value)).abs().max().item(), (y_cpc - _t(ref_cpc)).abs().max().item()]
    d = DISCOUNT_FIXTURE
    d_args = tuple(_t(d[k]) for k in ("value_reward", "cpc_cost", "q_value_next", "q_cpc_next", "done"))
    d_value, d_cpc = backup_targets(*d_args, gamma)
    d_ref_value, d_ref_cpc = backup_reference(*d_args, gamma)
    errors += [(d_value - _t(d_ref_value)).abs().max().item(), (d_cpc - _t(d_ref_cpc)).abs().max().item()]
    # The wrong backup: the CPC cost pushed through the value head's max rule.
    r_v, cost, qv_next, qc_next, done = args
    y_cpc_wrong, _ = backup_targets(cost, r_v, qc_next, qv_next, done, f["gamma"])
    gap = (y_cpc_wrong - y_cpc).abs().max().item()
    value_takes_max = bool(torch.equal(y_value, r_v + f["gamma"] * qv_next.max(1).values))
    cpc_takes_min = bool(torch.equal(y_cpc, cost + f["gamma"] * qc_next.min(1).values))
    return {"max_min_backup_error": max(errors), "wrong_cpc_max_backup_gap": gap,
            "opposite_backup_directions": value_takes_max and cpc_takes_min and gap > 0}


def fusion_fixture(lam: float) -> dict:
    """``fusion_changes_preference``: the fused argmax differs from the value-only argmax."""
    q_value, q_cpc = _t(FUSION_FIXTURE["q_value"]), _t(FUSION_FIXTURE["q_cpc"])
    value_choice = int(q_value.argmax(-1))
    fused_choice = int(fused_scores(q_value, q_cpc, lam).argmax(-1))
    return {"value_only_argmax": value_choice, "fused_argmax": fused_choice,
            "fusion_changes_preference": value_choice != fused_choice}


def cpc_sign_fixture(lam: float) -> dict:
    """``CPC_reduction_retains_negative_sign`` on a segment whose CPC rose to 1.5x target."""
    f = CPC_FIXTURE
    reduction = float(cpc_reduction(_t(f["cpc"]), _t(f["target_cpc"])))
    reward = float(total_reward(_t(f["value_reward"]), _t(f["cpc"]), _t(f["target_cpc"]), lam))
    expected = (f["target_cpc"] - f["cpc"]) / f["target_cpc"]          # -0.5 by hand
    keeps_sign = reduction < 0 and reduction == expected and reward == f["value_reward"] + lam * expected
    return {"cpc_reduction": reduction, "reward": reward, "CPC_reduction_retains_negative_sign": keeps_sign}


def ips_fixture() -> dict:
    """``ordinary_IPS_not_self_normalized``: IPS equals the hand value 0.8 and differs from SNIPS."""
    args = [_t(IPS_FIXTURE[k]) for k in ("reward", "target_prob", "logging_prob")]
    ips, sn = float(ordinary_ips(*args)), float(snips(*args))
    return {"ips": ips, "snips": sn,
            "ordinary_IPS_not_self_normalized": abs(ips - 0.8) < 1e-12 and abs(ips - sn) > 1e-6}
