"""The reward's CPC term, kept signed.

    CPC_k        = (spend_k + eps * tau) / (clicks_k + eps)        (eps pseudo-clicks at target)
    cost_k       = (CPC_k - tau) / tau                              (the CPC head's cost)
    reduction_k  = (tau - CPC_k) / tau = -cost_k                    (negative when CPC rises above tau)
    r_k          = value_k + lambda * reduction_k = value_k - lambda * cost_k

The reduction is never passed through abs() or clipped at zero: a segment
whose CPC overshoots the target is penalised (``CPC_reduction_retains_negative_sign``).
The pseudo-clicks keep CPC defined for a segment with no clicks.
"""

from __future__ import annotations

from torch import Tensor


def smoothed_cpc(spend: Tensor, clicks: Tensor, target_cpc: Tensor, eps: float) -> Tensor:
    """CPC = (spend + eps tau) / (clicks + eps); all (C,)."""
    return (spend + eps * target_cpc) / (clicks + eps)


def cpc_cost(cpc: Tensor, target_cpc: Tensor) -> Tensor:
    """(CPC - tau) / tau: what the CPC head learns to minimise."""
    return (cpc - target_cpc) / target_cpc


def cpc_reduction(cpc: Tensor, target_cpc: Tensor) -> Tensor:
    """(tau - CPC) / tau, signed: negative when CPC is above the target."""
    return (target_cpc - cpc) / target_cpc


def total_reward(value_reward: Tensor, cpc: Tensor, target_cpc: Tensor, lam: float) -> Tensor:
    """r = value + lambda * CPC reduction (the scalar the policies are evaluated on)."""
    return value_reward + lam * cpc_reduction(cpc, target_cpc)
