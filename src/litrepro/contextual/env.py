"""``BiddingEnv``: one campaign's auto-bidding day as a ``gymnasium.Env``, so any RL library can try the market.

An episode is one day of one campaign of the project's simulated market
(:mod:`litrepro.rlbp.simulator`).  The day has K = ``segments_per_day`` decision segments of
L = ``steps_per_day // segments_per_day`` control steps; at each segment start the agent picks one
of the nine bounded (Kp, Ki) gain pairs and the PID controller then paces the campaign's budget
with those gains for L steps, exactly as :func:`~litrepro.rlbp.simulator.simulate_day` does for
every campaign at once (the tests check equality to 1e-12).

Markets (``market=``, one of :data:`~litrepro.contextual.market.MARKETS`):

* ``seed_contract``: the market of our rendered seed runs; days from :func:`~litrepro.rlbp.simulator.draw_day`.
* ``contextual`` (the default): **our reconstruction**, not fixed by the seed file (we have no paper text)
  (:mod:`litrepro.contextual.market`): traffic shocks within the day
  (:func:`~litrepro.contextual.market.draw_shocked_day`) and a value reward with a bid-volatility
  cost and an over-target CPC penalty.

The campaigns are fixed by ``cfg.seed`` (stream ``world`` of
:func:`~litrepro.rlbp.experiment.build_world`, built once per config and cached); every
``reset`` draws a fresh day for all campaigns from a generator seeded from the env's
``np_random`` and picks one campaign (``options["campaign"]``, else drawn from ``np_random``).

Spaces:

* ``action_space``: ``Discrete(9)``; action a = 3 i + j uses Kp = clip(kp_base m_i),
  Ki = clip(ki_base m_j) (:func:`~litrepro.rlbp.pid.action_grid`; ``world.settings.kp/ki``).
* ``observation_space``: ``Box(-inf, inf, (8,), float64)``, the features of
  :data:`~litrepro.rlbp.simulator.FEATURES` at the segment start t0 = k L:

  0. ``time_of_day``      t0 / T (1 in the final observation)
  1. ``pacing_error``     e = plan_{t0} - spend_{<t0} / B (plan_{T-1} - spend / B at the end)
  2. ``spent_fraction``   spend_{<t0} / B
  3. ``cpc_over_target``  (CPC_day - tau) / tau clipped to [-1, 3], CPC_day = (spend + eps tau) / (clicks + eps)
  4. ``phi``              the last log bid multiplier (0 at the day's start)
  5. ``error_integral``   sum_{j<t0} e_j dt, dt = 1 / T
  6. ``budget_share``     beta_c (budget over expected live opportunities x price scale)
  7. ``target_margin``    m_c (target CPC x CTR / price scale)

Per control step t (the simulator's inner loop, C = 1):

    e_t = plan_t - spend_{<t} / B,   I_t = I_{t-1} + e_t dt,   D_t = Kd (e_t - e_{t-1}) / dt (e_{-1} := e_0)
    phi_t = clip(Kp e_t + Ki I_t + D_t, -phi_max, phi_max),   bid_t = b exp(phi_t)
    (spend, clicks) += auction_step(bid_t, B - spend, the campaign's step-t auctions)

Reward of segment k (what ``step`` returns), with S_k, N_k the segment's spend and clicks,
CPC_k = (S_k + eps tau) / (N_k + eps) and p_k = plan_{t0+L-1} - spend / B at the segment end:

    r^v_k = N_k / (B / (tau K)) - w |p_k|                                                   (seed_contract)
    r^v_k = N_k / (B / (tau K)) - w |p_k| - kappa_vol sum_{t in k} |phi_t - phi_{t-1}|
            - kappa_over max(0, CPC_k / tau - 1),   phi_{-1} = 0                              (contextual)
    r_k   = r^v_k + lambda (tau - CPC_k) / tau                     (:func:`litrepro.rlbp.reward.total_reward`)

with w = ``pacing_weight``, lambda = ``lambda_cpc``, eps = ``cpc_smoothing`` and kappa from
:class:`~litrepro.contextual.market.ContextualSettings`.  ``terminated`` is True after segment
K - 1, ``truncated`` is always False.  ``info`` of ``step`` holds the segment's ``value_reward``
(r^v_k), ``cpc``, ``spend`` and ``clicks`` (and ``segment``, ``spent_fraction``); ``info`` of
``reset`` holds ``campaign`` (index) and ``kind`` (name in :data:`~litrepro.rlbp.simulator.KINDS`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium import spaces
from torch import Tensor

from litrepro.contextual.market import MARKETS, ContextualSettings, draw_shocked_day
from litrepro.rlbp import pid
from litrepro.rlbp.config import RLBPConfig
from litrepro.rlbp.experiment import World, build_world
from litrepro.rlbp.reward import smoothed_cpc, total_reward
from litrepro.rlbp.simulator import FEATURES, KINDS, Campaigns, DayDraws, _features, auction_step, draw_day
from litrepro.rlbp.streams import Streams

F64 = torch.float64
CPU = torch.device("cpu")
#: Fields of :class:`Campaigns` with a time axis first: (T, C); the others are (C,).
TIME_FIELDS = ("traffic", "plan")

#: repr(cfg) -> the world built from it (campaigns are fixed by the config, so envs share it).
_WORLDS: dict[str, World] = {}


def world_for(cfg: RLBPConfig) -> World:
    """The market's campaigns and actions for ``cfg``: ``build_world(cfg, Streams(cfg.seed), cpu)``, cached."""
    key = repr(cfg)
    if key not in _WORLDS:
        _WORLDS[key] = build_world(cfg, Streams(cfg.seed), CPU)
    return _WORLDS[key]


def one_campaign(c: Campaigns, i: int) -> Campaigns:
    """Campaign ``i`` as a one-campaign :class:`Campaigns`: (C,) -> (1,), (T, C) -> (T, 1)."""
    return Campaigns(**{f.name: (getattr(c, f.name)[:, i:i + 1] if f.name in TIME_FIELDS
                                 else getattr(c, f.name)[i:i + 1]) for f in dataclasses.fields(c)})


def one_campaign_day(d: DayDraws, i: int) -> DayDraws:
    """Campaign ``i``'s auctions of a day: (T, C, M) -> (T, 1, M)."""
    return DayDraws(d.price[:, i:i + 1], d.click_prob[:, i:i + 1], d.live[:, i:i + 1])


def segment_volatility(phi: Tensor, phi_before: Tensor) -> Tensor:
    """(1,) sum_t |phi_t - phi_{t-1}| over a segment; ``phi`` (L, 1), ``phi_before`` (1,) = phi of the step before."""
    previous = torch.cat([phi_before[None], phi[:-1]])                         # (L, 1)
    return (phi - previous).abs().sum(0)                                       # (1,)


class BiddingEnv(gymnasium.Env):
    """One campaign, one day per episode; see the module docstring for spaces, dynamics and reward."""

    metadata = {"render_modes": []}

    def __init__(self, *, cfg: RLBPConfig | None = None, market: str = "contextual",
                 ctx: ContextualSettings | None = None):
        if market not in MARKETS:
            raise ValueError(f"unknown market {market!r} (known: {', '.join(MARKETS)})")
        self.cfg = RLBPConfig() if cfg is None else cfg
        self.cfg.check()
        self.ctx = ContextualSettings() if ctx is None else ctx
        self.ctx.check()
        self.market = market
        self.world: World = world_for(self.cfg)
        self.steps = self.cfg.steps_per_day                                    # T
        self.segments = self.cfg.segments_per_day                              # K
        self.seg_len = self.steps // self.segments                             # L
        self.observation_space = spaces.Box(-np.inf, np.inf, (len(FEATURES),), np.float64)
        self.action_space = spaces.Discrete(int(self.world.settings.kp.numel()))
        self.draws: DayDraws | None = None                                     # the day of every campaign
        self.campaign: int | None = None
        self.c: Campaigns | None = None                                        # the episode's campaign, (1,) / (T, 1)
        self.day: DayDraws | None = None                                       # its auctions, (T, 1, M)
        self._k = self.segments                                                # no episode yet

    # --- gymnasium API ---------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        day_generator = torch.Generator().manual_seed(int(self.np_random.integers(2**62)))
        self.draws = self._draw_day(day_generator)
        n = self.world.campaigns.budget.shape[0]
        campaign = (options or {}).get("campaign")
        campaign = int(self.np_random.integers(n)) if campaign is None else int(campaign)
        if not 0 <= campaign < n:
            raise ValueError(f"option 'campaign' = {campaign} must lie in [0, {n})")
        self.campaign = campaign
        self.c = one_campaign(self.world.campaigns, campaign)
        self.day = one_campaign_day(self.draws, campaign)
        zeros = torch.zeros(1, dtype=F64)
        self.spent, self.clicks, self.integral, self.phi = zeros.clone(), zeros.clone(), zeros.clone(), zeros.clone()
        self.e_prev: Tensor | None = None
        self._k = 0
        kind = int(self.c.kind[0])
        return self._observation(0), {"campaign": campaign, "kind": KINDS[kind], "kind_index": kind}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._k >= self.segments:
            raise RuntimeError("the day is over (or never started): call reset()")
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        s, c = self.world.settings, self.c
        kp, ki = s.kp[int(action)].reshape(1), s.ki[int(action)].reshape(1)  # (1,), (1,)
        t0 = self._k * self.seg_len
        spent0, clicks0, phi_before = self.spent.clone(), self.clicks.clone(), self.phi.clone()
        phis = torch.stack([self._control_step(t, kp, ki) for t in range(t0, t0 + self.seg_len)])  # (L, 1)
        seg_spent, seg_clicks = self.spent - spent0, self.clicks - clicks0     # (1,)
        cpc = smoothed_cpc(seg_spent, seg_clicks, c.target_cpc, s.cpc_smoothing)
        value = self._value_reward(t0, seg_clicks, cpc, phis, phi_before)     # (1,)
        reward = total_reward(value, cpc, c.target_cpc, self.cfg.lambda_cpc)  # (1,)
        self._k += 1
        terminated = self._k == self.segments
        info = {"segment": self._k - 1, "value_reward": float(value[0]), "cpc": float(cpc[0]),
                "spend": float(seg_spent[0]), "clicks": float(seg_clicks[0]),
                "spent_fraction": float((self.spent / c.budget)[0])}
        return self._observation(self._k * self.seg_len), float(reward[0]), terminated, False, info

    # --- the simulator's per-step update and reward, for one campaign -----------------------

    def _draw_day(self, generator: torch.Generator) -> DayDraws:
        """A day of auctions for every campaign (so campaign c's day is the world's day, sliced)."""
        c, m = self.world.campaigns, self.cfg.opportunities_per_step
        if self.market == "contextual":
            return draw_shocked_day(c, m, generator, self.ctx)
        return draw_day(c, m, generator)

    def _error(self, t: int) -> Tensor:
        """(1,) e_t = plan_t - spend_{<t} / B."""
        return self.c.plan[t] - self.spent / self.c.budget

    def _control_step(self, t: int, kp: Tensor, ki: Tensor) -> Tensor:
        """One control step t of simulate_day's inner loop; updates the state, returns phi_t (1,)."""
        s, c, dt = self.world.settings, self.c, 1.0 / self.steps
        e = self._error(t)
        self.integral = self.integral + e * dt                                 # sum_{j<=t} e_j dt
        d = pid.derivative(e, self.e_prev, s.kd, dt)                           # e_{-1} := e_0
        self.phi = (kp * e + ki * self.integral + d).clamp(-s.phi_max, s.phi_max)
        self.e_prev = e
        bid = c.base_bid * torch.exp(self.phi)                                 # (1,) exponential actuator
        new_spend, new_clicks = auction_step(bid, c.budget - self.spent, self.day.price[t], self.day.click_prob[t],
                                             self.day.live[t])                 # (1, M) auctions -> (1,)
        self.spent, self.clicks = self.spent + new_spend, self.clicks + new_clicks
        return self.phi

    def _value_reward(self, t0: int, seg_clicks: Tensor, cpc: Tensor, phis: Tensor, phi_before: Tensor) -> Tensor:
        """(1,) r^v of the segment starting at t0 (r'^v in the contextual market); ``phis`` (L, 1)."""
        s, c = self.world.settings, self.c
        click_scale = c.budget / (c.target_cpc * s.segments)                   # clicks of a perfectly paced segment
        pacing = c.plan[t0 + self.seg_len - 1] - self.spent / c.budget         # pacing error at segment end
        value = seg_clicks / click_scale - s.pacing_weight * pacing.abs()
        if self.market != "contextual":
            return value
        over = (cpc / c.target_cpc - 1.0).clamp(min=0.0)
        return value - self.ctx.vol_cost * segment_volatility(phis, phi_before) - self.ctx.over_cost * over

    def _observation(self, t: int) -> np.ndarray:
        """(8,) float64 features at step t (t = T: the end-of-day state, as simulate_day's final one)."""
        s, c = self.world.settings, self.c
        error = c.plan[min(t, self.steps - 1)] - self.spent / c.budget
        state = _features(t, self.steps, error, self.spent, self.clicks, c, self.phi, self.integral, s.cpc_smoothing)
        return state[0].numpy()                                                # (1, F) -> (F,)
