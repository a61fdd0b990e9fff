"""The ``pinterest_rlbp`` run, one function per notebook section.

The notebook calls these in order; each returns plain tensors or dicts so the
cells stay short.  Section numbers match the notebook's headings.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from litrepro.rlbp import fixtures
from litrepro.rlbp.actor import Actor, row_mass_error, support_is_exact_top_k, top_k_policy, train_actor
from litrepro.rlbp.config import RLBPConfig
from litrepro.rlbp.critic import Transitions, TwoHeadCritic, train_critic
from litrepro.rlbp.ope import ips_reference, ips_standard_error, ordinary_ips
from litrepro.rlbp.pid import N_ACTIONS, action_grid, actions_are_bounded, pid_terms
from litrepro.rlbp.reward import cpc_reduction, total_reward
from litrepro.rlbp.simulator import (FEATURES, Campaigns, DayLog, Policy, SimSettings, draw_day,
                                     make_campaigns, simulate_day)

F64 = torch.float64
FIXED_GAIN_ACTION = 4  # multipliers (1.0, 1.0) in the default grid


@dataclass(frozen=True)
class World:
    cfg: RLBPConfig
    campaigns: Campaigns
    settings: SimSettings
    device: torch.device


# --- Section 1-2: simulator, PID and the nine actions -------------------------------------

def build_world(cfg: RLBPConfig, generator: torch.Generator, device: torch.device) -> World:
    """Campaigns and the bounded action grid."""
    kp, ki = action_grid(cfg.kp_base, cfg.ki_base, cfg.gain_multipliers,
                         kp_bounds=(cfg.kp_min, cfg.kp_max), ki_bounds=(cfg.ki_min, cfg.ki_max))
    settings = SimSettings(kp=kp, ki=ki, kd=cfg.kd, phi_max=cfg.phi_max, segments=cfg.segments_per_day,
                           pacing_weight=cfg.pacing_weight, cpc_smoothing=cfg.cpc_smoothing)
    campaigns = make_campaigns(cfg.n_campaigns, cfg.steps_per_day, cfg.opportunities_per_step, generator, device)
    return World(cfg, campaigns, settings, device)


def actions_table(world: World) -> list[dict]:
    """The nine actions as rows (for display)."""
    s = world.settings
    return [{"action": a, "Kp": round(float(s.kp[a]), 4), "Ki": round(float(s.ki[a]), 4), "Kd": s.kd}
            for a in range(N_ACTIONS)]


def nine_bounded_actions(world: World) -> bool:
    c = world.cfg
    return actions_are_bounded(world.settings.kp, world.settings.ki, kp_bounds=(c.kp_min, c.kp_max),
                               ki_bounds=(c.ki_min, c.ki_max))


def constant_policy(action: int) -> Policy:
    """Every campaign takes ``action`` with probability 1."""
    def policy(state: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        n = state.shape[0]
        return (torch.full((n,), action, dtype=torch.long, device=state.device),
                torch.ones(n, dtype=F64, device=state.device))
    return policy


def behaviour_policy(epsilon: float) -> Policy:
    """Epsilon-greedy around the fixed-gain action; ``epsilon = 1`` is uniform.

    mu(a|s) = epsilon / 9 + (1 - epsilon) [a = 4]
    """
    def policy(state: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        n = state.shape[0]
        explore = torch.rand(n, generator=generator, dtype=F64) < epsilon
        random_action = torch.randint(N_ACTIONS, (n,), generator=generator)
        action = torch.where(explore, random_action, FIXED_GAIN_ACTION)
        prob = epsilon / N_ACTIONS + (1 - epsilon) * (action == FIXED_GAIN_ACTION).to(F64)
        return action.to(state.device), prob.to(state.device)
    return policy


def policy_from_probs(probs_fn) -> Policy:
    """Sample from ``probs_fn(state) -> (C, 9)``; the propensity is the sampled action's probability."""
    def policy(state: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        probs = probs_fn(state)
        action = torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(1).to(state.device)
        return action, probs.gather(1, action[:, None]).squeeze(1)
    return policy


def pid_demo(world: World, generator: torch.Generator, actions: tuple[int, int] = (0, 8),
             campaign: int = 0) -> dict:
    """One day under each constant action; traces of one campaign, plus the full logs."""
    draws = draw_day(world.campaigns, world.cfg.opportunities_per_step, generator)
    logs = {a: simulate_day(world.campaigns, draws, constant_policy(a), world.settings, generator) for a in actions}
    traces = {a: {"phi": log.phi[:, campaign].tolist(), "spent_fraction": log.spent_fraction[:, campaign].tolist(),
                  "errors": log.errors[:, campaign].tolist()} for a, log in logs.items()}
    return {"campaign": campaign, "plan": world.campaigns.plan[:, campaign].tolist(), "traces": traces, "logs": logs}


def derivative_gain_error(log: DayLog, kd: float, steps_per_day: int) -> float:
    """max |D_controller - D_recomputed|, the recomputation by :func:`pid_terms` on the logged errors."""
    _, _, d = pid_terms(log.errors.T, log.kp.T, log.ki.T, kd, 1.0 / steps_per_day)   # (C, T)
    return float((log.d_term.T - d).abs().max())


# --- Section 3: logged data ---------------------------------------------------------------

def _flatten(logs: list[DayLog], campaigns: Campaigns, lam: float, keep: Tensor) -> Transitions:
    """Stack days (D, K, C, ...) and keep campaigns ``keep`` -> flat (N, ...)."""
    def cat(name):
        return torch.stack([getattr(log, name)[:, keep] for log in logs]).flatten(0, 2)

    tau = campaigns.target_cpc[keep].expand(len(logs), logs[0].actions.shape[0], -1).flatten()
    cpc = cat("cpc")
    return Transitions(state=cat("states"), action=cat("actions"), propensity=cat("propensity"),
                       value_reward=cat("value_reward"), cpc_cost=cat("cpc_cost"),
                       reward=total_reward(cat("value_reward"), cpc, tau, lam),
                       next_state=cat("next_states"), done=cat("done"))


def collect_logged_data(world: World, generator: torch.Generator) -> dict:
    """``logged_days`` days under the behaviour policy, split by campaign into train / held-out."""
    cfg = world.cfg
    policy = behaviour_policy(cfg.behaviour_epsilon)
    logs = [simulate_day(world.campaigns, draw_day(world.campaigns, cfg.opportunities_per_step, generator),
                         policy, world.settings, generator) for _ in range(cfg.logged_days)]
    n_heldout = max(1, math.ceil(cfg.heldout_fraction * cfg.n_campaigns))
    idx = torch.arange(cfg.n_campaigns, device=world.device)
    train = _flatten(logs, world.campaigns, cfg.lambda_cpc, idx[:-n_heldout])
    heldout = _flatten(logs, world.campaigns, cfg.lambda_cpc, idx[-n_heldout:])
    tau = world.campaigns.target_cpc.expand(cfg.segments_per_day, -1)                 # (K, C)
    over = [log.cpc > tau for log in logs]
    negative_when_over = all(bool((cpc_reduction(log.cpc, tau)[m] < 0).all()) for log, m in zip(logs, over))
    return {"train": train, "heldout": heldout, "logs": logs,
            "segments_over_target": int(sum(int(m.sum()) for m in over)), "logged_reductions_negative": negative_when_over}


# --- Section 4-5: critic --------------------------------------------------------------------

def fit_critic(world: World, data: dict, generator: torch.Generator) -> tuple[TwoHeadCritic, dict]:
    cfg = world.cfg
    critic = TwoHeadCritic(len(FEATURES), cfg.hidden).to(world.device)
    report = train_critic(critic, data["train"], data["heldout"], steps=cfg.critic_steps, lr=cfg.critic_lr,
                          batch_size=cfg.batch_size, gamma=cfg.gamma,
                          target_update_every=cfg.target_update_every, generator=generator)
    return critic, report


def reward_regression_update(report: dict, train: Transitions) -> bool:
    """``actual_reward_regression_update``: weights moved, on non-constant logged rewards, and held-out TD loss fell."""
    return (report["parameter_change"] > 0 and float(train.value_reward.std()) > 0
            and float(train.cpc_cost.std()) > 0 and sum(report["heldout_after"]) < sum(report["heldout_before"]))


# --- Section 6: actor -----------------------------------------------------------------------

def fit_actor(world: World, critic: TwoHeadCritic, data: dict, generator: torch.Generator) -> tuple[Actor, dict]:
    cfg = world.cfg
    actor = Actor(len(FEATURES), cfg.hidden).to(world.device)
    report = train_actor(actor, critic, data["train"].state, steps=cfg.actor_steps, lr=cfg.actor_lr,
                         lam=cfg.lambda_cpc, batch_size=cfg.actor_batch_size, generator=generator)
    with torch.no_grad():
        logits = actor(data["heldout"].state)                                            # (N, 9)
        probs = top_k_policy(logits, cfg.top_k)                                          # (N, 9)
    report.update(policy_row_mass_error=row_mass_error(probs),
                  exact_top_k_support=support_is_exact_top_k(probs, logits, cfg.top_k),
                  mean_action_probs=probs.mean(0).tolist())
    return actor, report


def learned_policy(actor: Actor, k: int) -> Policy:
    def probs(state: Tensor) -> Tensor:
        with torch.no_grad():
            return top_k_policy(actor(state), k)
    return policy_from_probs(probs)


# --- Section 7-8: off-policy evaluation against the simulator's truth -----------------------

def _target_probs(name: str, actor: Actor, state: Tensor, cfg: RLBPConfig) -> Tensor:
    """(N, 9) action probabilities of each evaluated policy."""
    n = state.shape[0]
    if name == "learned":
        with torch.no_grad():
            return top_k_policy(actor(state), cfg.top_k)
    if name == "behaviour":
        eps = cfg.behaviour_epsilon
        probs = torch.full((n, N_ACTIONS), eps / N_ACTIONS, dtype=F64, device=state.device)
        probs[:, FIXED_GAIN_ACTION] += 1 - eps
        return probs
    probs = torch.zeros(n, N_ACTIONS, dtype=F64, device=state.device)
    probs[:, FIXED_GAIN_ACTION] = 1.0
    return probs


POLICIES = ("learned", "behaviour", "fixed_gain")


def evaluate_policies(world: World, actor: Actor, data: dict, generator: torch.Generator) -> dict:
    """Ordinary IPS on the held-out log, and each policy's value simulated on fresh days.

    Both estimate the mean reward per decision r = value + lambda * CPC reduction.
    """
    cfg, heldout = world.cfg, data["heldout"]
    days = [draw_day(world.campaigns, cfg.opportunities_per_step, generator) for _ in range(cfg.eval_days)]
    runners = {"learned": learned_policy(actor, cfg.top_k), "behaviour": behaviour_policy(cfg.behaviour_epsilon),
               "fixed_gain": constant_policy(FIXED_GAIN_ACTION)}
    tau = world.campaigns.target_cpc
    out = {}
    for name in POLICIES:
        pi = _target_probs(name, actor, heldout.state, cfg).gather(1, heldout.action[:, None]).squeeze(1)  # (N,)
        rewards = [total_reward(log.value_reward, log.cpc, tau, cfg.lambda_cpc)
                   for log in (simulate_day(world.campaigns, d, runners[name], world.settings, generator) for d in days)]
        truth = torch.stack(rewards)                                                      # (days, K, C)
        out[name] = {"ips": float(ordinary_ips(heldout.reward, pi, heldout.propensity)),
                     "ips_se": ips_standard_error(heldout.reward, pi, heldout.propensity),
                     "true_value": float(truth.mean()),
                     "true_se": float(truth.mean((1, 2)).std() / math.sqrt(len(days))) if len(days) > 1 else 0.0}
        if name == "learned":
            reference = ips_reference(heldout.reward.tolist(), pi.tolist(), heldout.propensity.tolist())
            out["ips_reference_error"] = abs(out[name]["ips"] - reference)
    return out


# --- Results in the seed file's vocabulary --------------------------------------------------

def collect_results(world: World, *, critic_report: dict, actor_report: dict, data: dict, evaluation: dict,
                    derivative_error: float, guard, execution: tuple[str, str], fingerprint: str) -> dict:
    """Metrics and checks named as in the seed file, plus curves and beyond-seed figures."""
    cfg = world.cfg
    backup = fixtures.backup_fixture()
    cpc = fixtures.cpc_sign_fixture(cfg.lambda_cpc)
    metrics = {
        "td_loss_before": sum(critic_report["heldout_before"]),
        "td_loss_after": sum(critic_report["heldout_after"]),
        "actor_gradient_norm": actor_report["gradient_norms"][0],
        "max_min_backup_error": backup["max_min_backup_error"],
        "wrong_cpc_max_backup_gap": backup["wrong_cpc_max_backup_gap"],
        "policy_row_mass_error": actor_report["policy_row_mass_error"],
        "derivative_gain_error": derivative_error,
        "ips_reference_error": evaluation["ips_reference_error"],
        "pretrained_model_calls": guard.pretrained_model_calls,
    }
    checks = {
        "actual_reward_regression_update": reward_regression_update(critic_report, data["train"]),
        "CPC_reduction_retains_negative_sign": cpc["CPC_reduction_retains_negative_sign"]
        and data["logged_reductions_negative"],
        "opposite_backup_directions": backup["opposite_backup_directions"],
        "fusion_changes_preference": fixtures.fusion_fixture(cfg.lambda_cpc)["fusion_changes_preference"],
        "exact_top_k_support": actor_report["exact_top_k_support"],
        "nine_bounded_PID_actions": nine_bounded_actions(world),
        "ordinary_IPS_not_self_normalized": fixtures.ips_fixture()["ordinary_IPS_not_self_normalized"],
        "no_live_bidder_or_model_calls": guard.clean,
    }
    beyond = {f"{name}_{key}": evaluation[name][key] for name in POLICIES for key in ("ips", "ips_se", "true_value", "true_se")}
    beyond.update(td_loss_value_before=critic_report["heldout_before"][0], td_loss_cpc_before=critic_report["heldout_before"][1],
                  td_loss_value_after=critic_report["heldout_after"][0], td_loss_cpc_after=critic_report["heldout_after"][1],
                  network_calls=guard.network_calls)
    return {"method": "pinterest_rlbp", "seed": cfg.seed, "metrics": metrics, "checks": checks,
            "beyond_seed_metrics": beyond,
            "curves": {"td_loss_value": critic_report["td_loss_value"], "td_loss_cpc": critic_report["td_loss_cpc"],
                       "actor_loss": actor_report["loss"], "mean_action_probs": actor_report["mean_action_probs"]},
            "execution_device": execution[0], "execution_accelerator": execution[1],
            "dataset_fingerprint": fingerprint}


def dataset_fingerprint(data: dict) -> str:
    """sha256 over the logged transitions' bytes: identifies the synthetic data set."""
    digest = hashlib.sha256()
    for part in (data["train"], data["heldout"]):
        for name in part.__dataclass_fields__:
            digest.update(getattr(part, name).detach().cpu().contiguous().numpy().tobytes())
    return "sha256:" + digest.hexdigest()
