"""A seeded, synthetic auto-bidding day, vectorised over campaigns and auctions.

Our reconstruction (the seed fixes only component contracts, not a simulator):

* Campaign c has a daily budget B_c, a target CPC tau_c, a base bid b_c and a
  time-of-day traffic curve a_{t,c} (chance that an opportunity is live).  It is
  one of three kinds (``KINDS``) that make the CPC target, the budget, or
  neither bind (see :func:`make_campaigns`).
* Each opportunity has a competing price p ~ s_c LogNormal(0, 0.5) and a click
  probability q = sigmoid(logit_c + 0.5 N(0, 1)).  A live opportunity is won
  when bid > p; the winner pays p (second price) and gets q expected clicks.
  Within a step the auctions are taken in order and a campaign stops at the
  first win it cannot afford, so spend never exceeds the budget.
* The bid is an exponential actuator:
  bid_{t,c} = b_c exp(phi_{t,c}),  phi = clip(P + I + D, -phi_max, phi_max),
  where the PID acts on the pacing error
  e_t = plan_t - spend_{<t} / B   (the spent fraction planned by the end of
  step t minus the fraction spent before it; e_0 = plan_0 > 0).
* The day has K decision segments; at each segment start the policy picks one
  of the nine (Kp, Ki) actions for every campaign at once.

Only the time steps of one day are a Python loop (the controller is
sequential in time); campaigns and opportunities are tensor axes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from litrepro.rlbp import pid
from litrepro.rlbp.reward import cpc_cost, smoothed_cpc

F64 = torch.float64
#: Names of the state features, in column order.
FEATURES = ("time_of_day", "pacing_error", "spent_fraction", "cpc_over_target", "phi", "error_integral",
            "budget_share", "target_margin")

#: policy(states (C, F), generator) -> (actions (C,) long, propensities (C,) float64)
Policy = Callable[[Tensor, torch.Generator], tuple[Tensor, Tensor]]


@dataclass(frozen=True)
class Campaigns:
    budget: Tensor        # (C,)
    target_cpc: Tensor    # (C,)
    base_bid: Tensor      # (C,)
    price_scale: Tensor   # (C,)
    ctr_logit: Tensor     # (C,)
    traffic: Tensor       # (T, C) chance an opportunity is live at step t
    plan: Tensor          # (T, C) planned cumulative spend fraction at the end of step t
    kind: Tensor          # (C,) long, index into KINDS
    budget_share: Tensor  # (C,) beta: budget / (expected live opportunities x price scale)
    target_margin: Tensor  # (C,) m: target CPC x CTR / price scale


@dataclass(frozen=True)
class DayDraws:
    price: Tensor         # (T, C, M) competing prices
    click_prob: Tensor    # (T, C, M)
    live: Tensor          # (T, C, M) bool


@dataclass(frozen=True)
class SimSettings:
    kp: Tensor            # (9,) gains of the nine actions
    ki: Tensor            # (9,)
    kd: float
    phi_max: float
    segments: int
    pacing_weight: float
    cpc_smoothing: float


@dataclass(frozen=True)
class DayLog:
    states: Tensor        # (K, C, F) state at each decision
    actions: Tensor       # (K, C)
    propensity: Tensor    # (K, C) behaviour probability of the taken action
    value_reward: Tensor  # (K, C) clicks / click_scale - w |pacing error|
    cpc: Tensor           # (K, C) smoothed CPC of the segment
    cpc_cost: Tensor      # (K, C) (CPC - tau) / tau, the CPC head's cost
    next_states: Tensor   # (K, C, F)
    done: Tensor          # (K, C) 1.0 at the last segment of the day
    errors: Tensor        # (T, C) pacing errors e_t seen by the controller
    d_term: Tensor        # (T, C) the controller's D term
    kp: Tensor            # (T, C) gains in force at each step
    ki: Tensor            # (T, C)
    phi: Tensor           # (T, C)
    spent_fraction: Tensor  # (T, C) after step t
    clicks: Tensor        # (T, C) cumulative clicks after step t


#: Campaign kinds: which constraint binds when the controller paces the budget.
KINDS = ("cpc_constrained", "budget_constrained", "unconstrained")
KIND_SHARES = torch.tensor([0.5, 0.25, 0.25], dtype=F64)
BETA = torch.tensor([[0.70, 1.00], [0.10, 0.25], [0.25, 0.45]], dtype=F64)  # (kind, lo/hi) budget share
MARGIN = torch.tensor([[0.55, 0.85], [1.30, 1.80], [1.30, 1.80]], dtype=F64)  # (kind, lo/hi) target CPC margin


def make_campaigns(n: int, steps: int, opportunities: int, generator: torch.Generator,
                   device: torch.device) -> Campaigns:
    """Draw ``n`` campaigns of three kinds (``KINDS``) with shares ``KIND_SHARES`` (1/2, 1/4, 1/4).

    With expected live opportunities L_c and price scale s_c, a campaign that
    won every live auction would spend about 1.13 L_c s_c; the budget is a share
    beta_c of L_c s_c.  Its target CPC is tau_c = m_c s_c / sigmoid(logit_c), so
    CPC / tau ~ E[p | p < bid] / (m_c s_c), which reaches 1 only when pacing
    pushes the bid well above the typical price and m_c is small:

        kind                beta_c          m_c             (``BETA``, ``MARGIN``)
        cpc_constrained     U(0.70, 1.00)   U(0.55, 0.85)   big budget, tight target
        budget_constrained  U(0.10, 0.25)   U(1.30, 1.80)   small budget, loose target
        unconstrained       U(0.25, 0.45)   U(1.30, 1.80)   moderate budget, loose target
    """
    def u(lo, hi):
        return lo + (hi - lo) * torch.rand(n, generator=generator, dtype=F64)

    kind = torch.multinomial(KIND_SHARES, n, replacement=True, generator=generator)  # (C,) index into KINDS
    price_scale = u(0.5, 2.0)
    ctr_logit = -3.0 + 0.3 * torch.randn(n, generator=generator, dtype=F64)
    phase = u(0.0, 1.0)
    t = torch.arange(steps, dtype=F64)[:, None] / steps                        # (T, 1)
    traffic = 0.2 + 0.8 * (0.5 + 0.5 * torch.sin(2 * math.pi * (t - phase)))  # (T, C)
    expected_live = traffic.sum(0) * opportunities                             # (C,)
    beta = BETA[kind, 0] + (BETA[kind, 1] - BETA[kind, 0]) * torch.rand(n, generator=generator, dtype=F64)  # (C,)
    m = MARGIN[kind, 0] + (MARGIN[kind, 1] - MARGIN[kind, 0]) * torch.rand(n, generator=generator, dtype=F64)  # (C,)
    budget = beta * expected_live * price_scale
    target_cpc = m * price_scale / torch.sigmoid(ctr_logit)
    base_bid = price_scale * torch.exp(u(-0.5, 0.3))
    plan = torch.cumsum(traffic, 0) / traffic.sum(0)                           # (T, C)
    to = dict(device=device)
    return Campaigns(budget.to(**to), target_cpc.to(**to), base_bid.to(**to), price_scale.to(**to),
                     ctr_logit.to(**to), traffic.to(**to), plan.to(**to), kind.to(**to), beta.to(**to), m.to(**to))


#: Campaigns per block in :func:`auction_step`: keeps its (block, M) temporaries in cache.
BLOCK = 8192


def auction_step(bid: Tensor, remaining: Tensor, price: Tensor, click_prob: Tensor, live: Tensor) -> tuple[Tensor, Tensor]:
    """One step's auctions for every campaign: (spend, clicks), each (C,).

    Auction m is won when it is live and price_m < bid; the wins are taken in order and
    the campaign stops at the first one it cannot afford:

        cost_m = sum_{j <= m, j biddable} price_j,   won_m = biddable_m and cost_m <= remaining

    ``bid``, ``remaining`` (C,); ``price``, ``click_prob``, ``live`` (C, M).  Campaigns are
    processed in blocks of ``BLOCK``, which changes no result (campaigns do not interact)
    but keeps the temporaries small at any number of campaigns (docs/speed.md's simulator block gives the
    measured cost per campaign-step).
    """
    spend, clicks = torch.empty_like(bid), torch.empty_like(bid)              # (C,)
    for lo in range(0, bid.shape[0], BLOCK):
        sl = slice(lo, lo + BLOCK)
        p = price[sl]                                                        # (B, M)
        biddable = live[sl] & (p < bid[sl, None])                            # (B, M) auctions the bid would win
        cost = torch.where(biddable, p, 0.0).cumsum(-1)                      # (B, M) spend if all were won, in order
        win = biddable & (cost <= remaining[sl, None])                       # stop at the first unaffordable win
        spend[sl] = torch.where(win, p, 0.0).sum(-1)
        clicks[sl] = torch.where(win, click_prob[sl], 0.0).sum(-1)
    return spend, clicks


def draw_day(c: Campaigns, opportunities: int, generator: torch.Generator) -> DayDraws:
    """Pre-draw one day's auctions, so policies can be compared on the same day."""
    steps, n = c.traffic.shape
    shape = (steps, n, opportunities)
    device = c.budget.device
    price = c.price_scale.cpu()[None, :, None] * torch.exp(0.5 * torch.randn(shape, generator=generator, dtype=F64))
    click = torch.sigmoid(c.ctr_logit.cpu()[None, :, None] + 0.5 * torch.randn(shape, generator=generator, dtype=F64))
    live = torch.rand(shape, generator=generator, dtype=F64) < c.traffic.cpu()[:, :, None]
    return DayDraws(price.to(device), click.to(device), live.to(device))


def _features(step: int, steps: int, error: Tensor, spent: Tensor, clicks: Tensor, c: Campaigns,
              phi: Tensor, integral: Tensor, smoothing: float) -> Tensor:
    """(C, F) state; see ``FEATURES``."""
    cpc_rel = cpc_cost(smoothed_cpc(spent, clicks, c.target_cpc, smoothing), c.target_cpc).clamp(-1.0, 3.0)
    time = torch.full_like(error, step / steps)
    return torch.stack([time, error, spent / c.budget, cpc_rel, phi, integral, c.budget_share, c.target_margin], dim=-1)


def simulate_day(c: Campaigns, draws: DayDraws, policy: Policy, s: SimSettings,
                 generator: torch.Generator) -> DayLog:
    """Run one day for all campaigns under ``policy``; returns the full log."""
    steps, n, _ = draws.price.shape
    seg_len = steps // s.segments
    dt = 1.0 / steps
    zeros = torch.zeros(n, dtype=F64, device=c.budget.device)
    spent, clicks, integral, phi, e_prev = zeros.clone(), zeros.clone(), zeros.clone(), zeros.clone(), None
    trace = {k: [] for k in ("errors", "d_term", "kp", "ki", "phi", "spent_fraction", "clicks")}
    seg = {k: [] for k in ("states", "actions", "propensity", "value_reward", "cpc", "cpc_cost")}

    def error_at(step):
        return c.plan[step] - spent / c.budget                                 # e_t = plan_t - spend_{<t} / B

    for k in range(s.segments):
        t0 = k * seg_len
        state = _features(t0, steps, error_at(t0), spent, clicks, c, phi, integral, s.cpc_smoothing)
        action, prop = policy(state, generator)                                # (C,), (C,)
        kp, ki = s.kp.to(spent.device)[action], s.ki.to(spent.device)[action]  # (C,)
        spent0, clicks0 = spent.clone(), clicks.clone()
        for t in range(t0, t0 + seg_len):
            e = error_at(t)
            integral = integral + e * dt                                       # sum_{j<=t} e_j dt
            d = pid.derivative(e, e_prev, s.kd, dt)                            # e_{-1} := e_0
            phi = (kp * e + ki * integral + d).clamp(-s.phi_max, s.phi_max)    # P + I + D, bounded
            e_prev = e
            bid = c.base_bid * torch.exp(phi)                                  # (C,) exponential actuator
            new_spend, new_clicks = auction_step(bid, c.budget - spent, draws.price[t], draws.click_prob[t],
                                                 draws.live[t])
            spent, clicks = spent + new_spend, clicks + new_clicks
            for name, value in (("errors", e), ("d_term", d), ("kp", kp), ("ki", ki), ("phi", phi),
                                ("spent_fraction", spent / c.budget), ("clicks", clicks)):
                trace[name].append(value)
        seg_spent, seg_clicks = spent - spent0, clicks - clicks0
        click_scale = c.budget / (c.target_cpc * s.segments)                   # clicks of a perfectly paced segment
        pacing = c.plan[t0 + seg_len - 1] - spent / c.budget                   # pacing error at segment end
        cpc = smoothed_cpc(seg_spent, seg_clicks, c.target_cpc, s.cpc_smoothing)
        for name, value in (("states", state), ("actions", action), ("propensity", prop),
                            ("value_reward", seg_clicks / click_scale - s.pacing_weight * pacing.abs()),
                            ("cpc", cpc), ("cpc_cost", cpc_cost(cpc, c.target_cpc))):
            seg[name].append(value)
    final = _features(steps, steps, c.plan[-1] - spent / c.budget, spent, clicks, c, phi, integral, s.cpc_smoothing)
    states = torch.stack(seg["states"])                                        # (K, C, F)
    next_states = torch.cat([states[1:], final[None]])                         # (K, C, F)
    done = torch.zeros(s.segments, n, dtype=F64, device=spent.device)
    done[-1] = 1.0
    return DayLog(states=states, next_states=next_states, done=done,
                  **{k: torch.stack(v) for k, v in seg.items() if k != "states"},
                  **{k: torch.stack(v) for k, v in trace.items()})
