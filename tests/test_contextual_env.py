"""``litrepro.contextual.env.BiddingEnv``: the gymnasium checker, equality with the simulator, faults, seeding."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from torch import Tensor

from litrepro.contextual import env as env_mod
from litrepro.contextual.env import BiddingEnv
from litrepro.contextual.market import MARKETS, fused, simulate_contextual_day
from litrepro.rlbp.config import RLBPConfig
from litrepro.rlbp.experiment import constant_policy
from litrepro.rlbp.simulator import FEATURES, Policy, simulate_day

F64 = torch.float64
SMALL = RLBPConfig(n_campaigns=8, opportunities_per_step=8)
#: phi_max = 2 is rarely reached on these days (|phi| < 1.6 under action 8), so the clamp is tested at 0.5.
TIGHT = dataclasses.replace(SMALL, phi_max=0.5)
TOL = 1e-12


def make(market: str, cfg: RLBPConfig = SMALL) -> BiddingEnv:
    return BiddingEnv(cfg=cfg, market=market)


def sequence_policy(actions: list[int]) -> Policy:
    """Every campaign takes ``actions[k]`` at decision k (probability 1)."""
    calls = iter(actions)

    def policy(state: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        n = state.shape[0]                                                     # state (C, F)
        return torch.full((n,), next(calls), dtype=torch.long), torch.ones(n, dtype=F64)
    return policy


def run_env(env: BiddingEnv, actions: list[int], seed: int, campaign: int) -> dict:
    """One episode under a fixed action sequence: observations (K+1, F), rewards (K,), infos."""
    obs, info = env.reset(seed=seed, options={"campaign": campaign})
    observations, rewards, infos = [obs], [], [info]
    for k, a in enumerate(actions):
        obs, reward, terminated, truncated, info = env.step(a)
        assert terminated == (k == len(actions) - 1) and not truncated
        observations.append(obs)
        rewards.append(reward)
        infos.append(info)
    return {"obs": np.stack(observations), "rewards": np.array(rewards), "infos": infos}


def reference(env: BiddingEnv, actions: list[int]) -> tuple:
    """The simulator's own day on the env's campaigns and draws, every campaign taking ``actions``."""
    w = env.world
    policy = sequence_policy(actions)
    if env.market == "contextual":
        return simulate_contextual_day(w.campaigns, env.draws, policy, w.settings, env.ctx, torch.Generator())
    return simulate_day(w.campaigns, env.draws, policy, w.settings, torch.Generator())


def max_gap(env: BiddingEnv, actions: list[int], seed: int, campaign: int) -> float:
    """Largest |env - simulator| over campaign's fused rewards, states (with the final one) and spent fraction."""
    ep = run_env(env, actions, seed, campaign)
    log = reference(env, actions)
    rewards = fused(log, env.world.campaigns, env.cfg.lambda_cpc)[:, campaign].numpy()          # (K,)
    states = torch.cat([log.states[:, campaign], log.next_states[-1:, campaign]]).numpy()       # (K+1, F)
    spent = float(log.spent_fraction[-1, campaign])
    value = log.value_reward[:, campaign].numpy()                                              # (K,)
    gaps = [np.abs(ep["rewards"] - rewards).max(), np.abs(ep["obs"] - states).max(),
            abs(ep["infos"][-1]["spent_fraction"] - spent), abs(ep["obs"][-1, 2] - spent),
            np.abs(np.array([i["value_reward"] for i in ep["infos"][1:]]) - value).max()]
    return float(max(gaps))


def random_actions(seed: int, k: int) -> list[int]:
    return torch.randint(9, (k,), generator=torch.Generator().manual_seed(seed)).tolist()


# --- gymnasium's checker and the spaces -----------------------------------------------------

@pytest.mark.parametrize("market", MARKETS)
def test_check_env_passes(market):
    env = make(market)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                         # a checker warning fails the test ...
        warnings.filterwarnings("ignore", message=".*infinity")                # ... but the unbounded Box's (by design)
        check_env(env, skip_render_check=True)                                 # no render modes: nothing to render
    assert env.observation_space.shape == (len(FEATURES),) and env.observation_space.dtype == np.float64
    assert env.action_space.n == 9


def test_bad_market_names_it():
    with pytest.raises(ValueError, match="'no_such_market'"):
        BiddingEnv(cfg=SMALL, market="no_such_market")


def test_bad_campaign_and_step_before_reset():
    env = make("contextual")
    with pytest.raises(RuntimeError):
        env.step(0)
    with pytest.raises(ValueError, match="campaign"):
        env.reset(seed=0, options={"campaign": SMALL.n_campaigns})
    env.reset(seed=0)
    with pytest.raises(ValueError):
        env.step(9)


def test_reset_info_and_episode_length():
    env = make("contextual")
    obs, info = env.reset(seed=3, options={"campaign": 5})
    assert info["campaign"] == 5 and info["kind"] in ("cpc_constrained", "budget_constrained", "unconstrained")
    assert obs[0] == 0.0 and obs[2] == 0.0 and obs[4] == 0.0                   # time, spent fraction, phi at the start
    ep = run_env(env, [4] * SMALL.segments_per_day, seed=3, campaign=5)
    assert len(ep["rewards"]) == SMALL.segments_per_day and ep["obs"][-1, 0] == 1.0


# --- equality with the simulator -----------------------------------------------------------

@pytest.mark.parametrize("cfg", [SMALL, TIGHT], ids=["small", "tight_phi_max"])
@pytest.mark.parametrize("market", MARKETS)
@pytest.mark.parametrize("action", [0, 4, 8])
def test_constant_policy_matches_simulator(market, action, cfg):
    env = make(market, cfg)
    assert cfg is SMALL or (env.world.settings.phi_max == 0.5)
    k = SMALL.segments_per_day
    for campaign in range(SMALL.n_campaigns):
        assert max_gap(env, [action] * k, seed=11 + campaign, campaign=campaign) < TOL


@pytest.mark.parametrize("market", MARKETS)
def test_random_policy_matches_simulator(market):
    env = make(market)
    k = SMALL.segments_per_day
    for campaign in range(SMALL.n_campaigns):
        assert max_gap(env, random_actions(campaign, k), seed=100 + campaign, campaign=campaign) < TOL


def test_sequence_policy_is_the_constant_policy():
    """The reference's own policy helper agrees with the experiment's constant policy."""
    env = make("seed_contract")
    env.reset(seed=0)
    w, k = env.world, SMALL.segments_per_day
    a = simulate_day(w.campaigns, env.draws, sequence_policy([3] * k), w.settings, torch.Generator())
    b = simulate_day(w.campaigns, env.draws, constant_policy(3), w.settings, torch.Generator())
    assert torch.equal(a.states, b.states) and torch.equal(a.value_reward, b.value_reward)


def test_market_changes_the_numbers():
    """The contextual market's day and reward differ from the seed contract's (the envs are not one env)."""
    actions = random_actions(0, SMALL.segments_per_day)
    a = run_env(make("seed_contract"), actions, seed=1, campaign=0)
    b = run_env(make("contextual"), actions, seed=1, campaign=0)
    assert np.abs(a["rewards"] - b["rewards"]).max() > 1e-6


# --- faults: the equality comparison must catch them ---------------------------------------

def _no_volatility(phi: Tensor, phi_before: Tensor) -> Tensor:
    return torch.zeros(1, dtype=F64)


def _error_previous_plan(self: BiddingEnv, t: int) -> Tensor:
    """Fault: e_t against the plan at the start of step t (plan_{t-1}), not at its end."""
    return self.c.plan[max(t - 1, 0)] - self.spent / self.c.budget


def _unclamped_step(self: BiddingEnv, t: int, kp: Tensor, ki: Tensor) -> Tensor:
    """Fault: phi_max is ignored."""
    world = self.world
    self.world = dataclasses.replace(world, settings=dataclasses.replace(world.settings, phi_max=1e9))
    try:
        return FAULT_FREE_STEP(self, t, kp, ki)
    finally:
        self.world = world


def _derivative_restarted(self: BiddingEnv, action) -> tuple:
    """Fault: e_{t-1} forgotten at each segment start (a per-segment controller), so D = 0 there."""
    self.e_prev = None
    return FAULT_FREE_SEGMENT(self, action)


FAULT_FREE_STEP = BiddingEnv._control_step
FAULT_FREE_SEGMENT = BiddingEnv.step
#: fault -> (owner, attribute, replacement, markets, config)
FAULTS = {
    "volatility_left_out": (env_mod, "segment_volatility", _no_volatility, ("contextual",), SMALL),
    "error_previous_plan": (BiddingEnv, "_error", _error_previous_plan, MARKETS, SMALL),
    "phi_unclamped": (BiddingEnv, "_control_step", _unclamped_step, MARKETS, TIGHT),
    "derivative_restarted": (BiddingEnv, "step", _derivative_restarted, MARKETS, SMALL),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_fault_is_caught(fault, monkeypatch):
    owner, name, replacement, markets, cfg = FAULTS[fault]
    k = cfg.segments_per_day
    for market in markets:
        env = make(market, cfg)
        clean = max(max_gap(env, [8] * k, seed=5, campaign=c) for c in range(cfg.n_campaigns))
        with monkeypatch.context() as m:
            m.setattr(owner, name, replacement)
            faulty = max(max_gap(env, [8] * k, seed=5, campaign=c) for c in range(cfg.n_campaigns))
        assert clean < TOL and faulty > 1e-6, (market, clean, faulty)


# --- seeding ---------------------------------------------------------------------------------

@pytest.mark.parametrize("market", MARKETS)
def test_same_seed_same_episode(market):
    actions = random_actions(7, SMALL.segments_per_day)
    a, b = make(market), make(market)
    ea, eb = run_env(a, actions, seed=21, campaign=2), run_env(b, actions, seed=21, campaign=2)
    assert np.array_equal(ea["obs"], eb["obs"]) and np.array_equal(ea["rewards"], eb["rewards"])
    assert ea["infos"] == eb["infos"]
    assert all(torch.equal(getattr(a.draws, f), getattr(b.draws, f)) for f in ("price", "click_prob", "live"))
    oa, ia = a.reset(seed=4)                                                   # the drawn campaign is seeded too
    ob, ib = b.reset(seed=4)
    assert ia == ib and np.array_equal(oa, ob)


@pytest.mark.parametrize("market", MARKETS)
def test_different_seeds_different_days(market):
    actions = [4] * SMALL.segments_per_day
    env = make(market)
    ea = run_env(env, actions, seed=1, campaign=3)
    price_a, budget_a = env.draws.price.clone(), env.world.campaigns.budget.clone()
    eb = run_env(env, actions, seed=2, campaign=3)
    assert not torch.equal(price_a, env.draws.price)                           # a fresh day ...
    assert torch.equal(budget_a, env.world.campaigns.budget)                  # ... of the same campaigns (cfg.seed)
    assert np.abs(ea["rewards"] - eb["rewards"]).max() > 1e-6
    env.reset()                                                                # unseeded resets continue the stream
    price_c = env.draws.price.clone()
    env.reset()
    assert not torch.equal(price_c, env.draws.price)


def test_campaigns_fixed_by_cfg_seed():
    a = make("contextual").world.campaigns
    b = make("contextual", dataclasses.replace(SMALL, seed=SMALL.seed + 1)).world.campaigns
    assert torch.equal(a.budget, make("contextual").world.campaigns.budget)
    assert not torch.equal(a.budget, b.budget)
