"""Off-policy evaluation with ordinary (not self-normalised) IPS.

    IPS   = (1/n) sum_i  pi(a_i|s_i) / mu(a_i|s_i) * r_i
    SNIPS = sum_i w_i r_i / sum_i w_i,   w_i = pi / mu

Ordinary IPS is unbiased when mu > 0 wherever pi > 0; SNIPS trades that for
lower variance.  The seed's check ``ordinary_IPS_not_self_normalized`` asks
for the former.
"""

from __future__ import annotations


import torch
from torch import Tensor


def _validated(reward: Tensor, target_prob: Tensor, logging_prob: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    reward, target_prob, logging_prob = (torch.as_tensor(x, dtype=torch.float64)
                                         for x in (reward, target_prob, logging_prob))
    shapes = {"reward": tuple(reward.shape), "target_prob": tuple(target_prob.shape),
              "logging_prob": tuple(logging_prob.shape)}
    if len(set(shapes.values())) != 1 or reward.dim() != 1:
        raise ValueError(f"ordinary_ips needs three 1-D tensors of equal length, got shapes {shapes}")
    if reward.numel() == 0:
        raise ValueError("ordinary_ips needs at least one logged sample")
    for name, x in (("reward", reward), ("target_prob", target_prob), ("logging_prob", logging_prob)):
        if torch.isnan(x).any():
            raise ValueError(f"ordinary_ips: {name} contains NaN at index {int(torch.isnan(x).nonzero()[0])}")
    bad = (logging_prob <= 0).nonzero()
    if bad.numel():
        i = int(bad[0])
        raise ValueError(f"ordinary_ips: logging_prob must be > 0, got {float(logging_prob[i])} at index {i}")
    if ((target_prob < 0) | (target_prob > 1)).any():
        raise ValueError("ordinary_ips: target_prob must lie in [0, 1]")
    return reward, target_prob, logging_prob


def ordinary_ips(reward: Tensor, target_prob: Tensor, logging_prob: Tensor) -> Tensor:
    """(1/n) sum_i (pi_i / mu_i) r_i; inputs (n,), returns a 0-d float64 tensor."""
    reward, target_prob, logging_prob = _validated(reward, target_prob, logging_prob)
    return (target_prob / logging_prob * reward).mean()


def snips(reward: Tensor, target_prob: Tensor, logging_prob: Tensor) -> Tensor:
    """Self-normalised IPS, for contrast only."""
    reward, target_prob, logging_prob = _validated(reward, target_prob, logging_prob)
    w = target_prob / logging_prob
    return (w * reward).sum() / w.sum()


def ips_standard_error(reward: Tensor, target_prob: Tensor, logging_prob: Tensor) -> float:
    """Standard error of the IPS mean: sd(w r, n - 1) / sqrt(n) (:func:`litrepro.stats.standard_error`)."""
    from litrepro.stats import standard_error

    reward, target_prob, logging_prob = _validated(reward, target_prob, logging_prob)
    terms = target_prob / logging_prob * reward                                     # (n,)
    return standard_error(terms.tolist())


def ips_reference(reward, target_prob, logging_prob) -> float:
    """Ordinary IPS as a plain Python loop (the independent recomputation)."""
    total = 0.0
    for r, p, m in zip(reward, target_prob, logging_prob):
        total += float(p) / float(m) * float(r)
    return total / len(reward)
