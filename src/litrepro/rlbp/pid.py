"""PID terms and the nine bounded (Kp, Ki) actions.

Conventions (used by the simulator's online controller and by
:func:`pid_terms` alike):

    e_t = setpoint_t - measurement_t
    P_t = Kp * e_t
    I_t = Ki * sum_{j<=t} e_j * dt
    D_t = Kd * (e_t - e_{t-1}) / dt,   with e_{-1} := e_0 (no derivative kick)
"""

from __future__ import annotations

import torch
from torch import Tensor

N_ACTIONS = 9


def pid_terms(errors: Tensor, kp: Tensor | float, ki: Tensor | float, kd: Tensor | float,
              dt: float) -> tuple[Tensor, Tensor, Tensor]:
    """The P, I and D sequences of an error sequence, time on the last axis.

    Args:
        errors: (..., T) errors e_t; 1-D or batched.
        kp, ki, kd: scalars or tensors broadcastable to ``errors`` (time-varying
            gains multiply the running sum at each step, as the online controller does).
        dt: time step.

    Returns:
        (P, I, D), each shaped like ``errors``.
    """
    if dt <= 0:
        raise ValueError(f"dt must be positive, got {dt}")
    p = kp * errors                                              # P_t = Kp e_t
    i = ki * torch.cumsum(errors, dim=-1) * dt                   # I_t = Ki sum_{j<=t} e_j dt
    previous = torch.cat([errors[..., :1], errors[..., :-1]], dim=-1)  # e_{t-1}, e_{-1} := e_0
    d = kd * (errors - previous) / dt                            # D_t = Kd (e_t - e_{t-1}) / dt
    return p, i, d


def derivative(e: Tensor, e_prev: Tensor | None, kd: float, dt: float) -> Tensor:
    """The online controller's D_t = Kd (e_t - e_{t-1}) / dt, with e_{-1} := e_0 at the first step.

    ``e_prev`` is None at the first step of the day; all tensors (C,).
    """
    previous = e if e_prev is None else e_prev                   # e_{-1} := e_0: no derivative kick
    return kd * (e - previous) / dt


def action_grid(kp_base: float, ki_base: float, multipliers: list[float], *,
                kp_bounds: tuple[float, float], ki_bounds: tuple[float, float]) -> tuple[Tensor, Tensor]:
    """The 3x3 grid of (Kp, Ki) gains, each clipped to its bounds.

    Action ``a = 3 i + j`` uses ``Kp = clip(kp_base * m_i)`` and
    ``Ki = clip(ki_base * m_j)``; action 4 (both multipliers 1.0 in the
    default grid) is the fixed-gain baseline.

    Returns:
        kp (9,), ki (9,) float64.
    """
    m = torch.tensor(multipliers, dtype=torch.float64)                 # (3,)
    kp = (kp_base * m).clamp(*kp_bounds).repeat_interleave(3)           # (9,)  Kp of action 3i+j
    ki = (ki_base * m).clamp(*ki_bounds).repeat(3)                      # (9,)  Ki of action 3i+j
    return kp, ki


def actions_are_bounded(kp: Tensor, ki: Tensor, *, kp_bounds: tuple[float, float],
                        ki_bounds: tuple[float, float]) -> bool:
    """``nine_bounded_PID_actions``: nine distinct (Kp, Ki) pairs, all inside the bounds."""
    pairs = {(float(a), float(b)) for a, b in zip(kp.tolist(), ki.tolist())}
    inside = bool(((kp >= kp_bounds[0]) & (kp <= kp_bounds[1])).all()
                  and ((ki >= ki_bounds[0]) & (ki <= ki_bounds[1])).all())
    return kp.numel() == N_ACTIONS and ki.numel() == N_ACTIONS and len(pairs) == N_ACTIONS and inside
