"""The ``pinterest_rlbp`` run, one function per notebook section.

The notebook calls these in order; each returns plain tensors or dicts so the
cells stay short.  Section numbers match the notebook's headings.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass

import torch
from torch import Tensor

from litrepro.rlbp import audit as rlbp_audit
from litrepro.rlbp import fixtures
from litrepro.rlbp.actor import (Actor, fused_scores, row_mass_error, support_is_exact_top_k, top_k_policy,
                                 train_actor)
from litrepro.rlbp.config import RLBPConfig
from litrepro.rlbp.critic import Transitions, TwoHeadCritic, td_loss_reference_error, train_critic
from litrepro.rlbp.ope import ips_reference, ips_standard_error, ordinary_ips
from litrepro.rlbp.pid import N_ACTIONS, action_grid
from litrepro.rlbp.reward import total_reward
from litrepro.rlbp.simulator import (FEATURES, KINDS, Campaigns, DayLog, Policy, SimSettings, draw_day,
                                     make_campaigns, simulate_day)
from litrepro.rlbp.streams import Streams, as_streams
from litrepro.stats import standard_error

F64 = torch.float64
FIXED_GAIN_ACTION = 4  # multipliers (1.0, 1.0) in the default grid
#: A served top-k probability below this is "negligible" in the policy display.
NEGLIGIBLE = 1e-3
#: Fusion weights of the lambda trade-off (Section 8).
LAMBDAS = (0.0, 0.5, 1.0, 2.0, 4.0)


@dataclass(frozen=True)
class World:
    cfg: RLBPConfig
    campaigns: Campaigns
    settings: SimSettings
    device: torch.device
    #: the run's named random streams (their derivations are reported as ``random_streams``)
    streams: Streams | None = None


# --- Section 1-2: simulator, PID and the nine actions -------------------------------------

def build_world(cfg: RLBPConfig, generator: Streams, device: torch.device) -> World:
    """Campaigns (stream ``world``) and the bounded action grid.

    ``generator``: the run's :class:`~litrepro.rlbp.streams.Streams` (a ``torch.Generator``
    stands for the streams of its initial seed); every stage takes its own named stream(s).
    """
    streams = as_streams(generator)
    generator = streams.generator("world")
    kp, ki = action_grid(cfg.kp_base, cfg.ki_base, cfg.gain_multipliers,
                         kp_bounds=(cfg.kp_min, cfg.kp_max), ki_bounds=(cfg.ki_min, cfg.ki_max))
    settings = SimSettings(kp=kp, ki=ki, kd=cfg.kd, phi_max=cfg.phi_max, segments=cfg.segments_per_day,
                           pacing_weight=cfg.pacing_weight, cpc_smoothing=cfg.cpc_smoothing)
    campaigns = make_campaigns(cfg.n_campaigns, cfg.steps_per_day, cfg.opportunities_per_step, generator, device)
    return World(cfg, campaigns, settings, device, streams)


def actions_table(world: World) -> list[dict]:
    """The nine actions as rows (for display)."""
    s = world.settings
    return [{"action": a, "Kp": round(float(s.kp[a]), 4), "Ki": round(float(s.ki[a]), 4), "Kd": s.kd}
            for a in range(N_ACTIONS)]


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


def pid_demo(world: World, generator: Streams, actions: tuple[int, int] = (0, 8),
             campaign: int = 0) -> dict:
    """One day (stream ``pid_demo``) under each constant action; traces of one campaign, plus the full logs."""
    generator = as_streams(generator).generator("pid_demo")
    draws = draw_day(world.campaigns, world.cfg.opportunities_per_step, generator)
    logs = {a: simulate_day(world.campaigns, draws, constant_policy(a), world.settings, generator) for a in actions}
    traces = {a: {"phi": log.phi[:, campaign].tolist(), "spent_fraction": log.spent_fraction[:, campaign].tolist(),
                  "errors": log.errors[:, campaign].tolist()} for a, log in logs.items()}
    return {"campaign": campaign, "plan": world.campaigns.plan[:, campaign].tolist(), "traces": traces, "logs": logs,
            "draws": draws}


# --- Section 3: logged data ---------------------------------------------------------------

def _flatten(logs: list[DayLog], campaigns: Campaigns, lam: float, keep: Tensor) -> Transitions:
    """Stack days (D, K, C, ...) and keep campaigns ``keep`` -> flat (N, ...)."""
    def cat(name):
        return torch.stack([getattr(log, name)[:, keep] for log in logs]).flatten(0, 2)

    tau = campaigns.target_cpc[keep].expand(len(logs), logs[0].actions.shape[0], -1).flatten()
    ids = torch.arange(keep.shape[0], device=keep.device)[keep]                               # (C_kept,)
    cpc = cat("cpc")
    return Transitions(state=cat("states"), action=cat("actions"), propensity=cat("propensity"),
                       value_reward=cat("value_reward"), cpc_cost=cat("cpc_cost"),
                       reward=total_reward(cat("value_reward"), cpc, tau, lam), cpc=cpc, target_cpc=tau,
                       next_state=cat("next_states"), done=cat("done"),
                       campaign=ids.expand(len(logs), logs[0].actions.shape[0], -1).flatten())


def heldout_campaigns(world: World) -> Tensor:
    """(C,) bool: the last ``heldout_fraction`` of campaigns (at least one), held out of training."""
    cfg = world.cfg
    n_heldout = max(1, math.ceil(cfg.heldout_fraction * cfg.n_campaigns))
    return torch.arange(cfg.n_campaigns, device=world.device) >= cfg.n_campaigns - n_heldout


def collect_logged_data(world: World, generator: Streams) -> dict:
    """``logged_days`` days under the behaviour policy, split by campaign into train / held-out.

    Also returns the market's shape under the behaviour policy: ``cpc_ratio`` (D, K, C) =
    CPC / tau per segment, ``spent_end`` (D, C) the end-of-day spent fraction, and
    ``segments_over_target_fraction``, the share of campaign-segments with CPC > tau.
    The days' auctions come from stream ``logged_days``, the behaviour policy's actions from ``behaviour``.
    """
    cfg = world.cfg
    streams = as_streams(generator)
    policy = behaviour_policy(cfg.behaviour_epsilon)
    days_g, actions_g = streams.generator("logged_days"), streams.generator("behaviour")
    draws = [draw_day(world.campaigns, cfg.opportunities_per_step, days_g) for _ in range(cfg.logged_days)]
    logs = [simulate_day(world.campaigns, d, policy, world.settings, actions_g) for d in draws]
    mask = heldout_campaigns(world)
    train = _flatten(logs, world.campaigns, cfg.lambda_cpc, ~mask)
    heldout = _flatten(logs, world.campaigns, cfg.lambda_cpc, mask)
    cpc_ratio = torch.stack([log.cpc for log in logs]) / world.campaigns.target_cpc        # (D, K, C)
    spent_end = torch.stack([log.spent_fraction[-1] for log in logs])                     # (D, C)
    return {"train": train, "heldout": heldout, "logs": logs, "draws": draws, "cpc_ratio": cpc_ratio,
            "spent_end": spent_end, "segments_over_target_fraction": float((cpc_ratio > 1).to(F64).mean())}


def day_hash(draws) -> str:
    """sha256 of one day's auction draws (prices, click probabilities, liveness); identifies the day in a run."""
    digest = hashlib.sha256()
    for t in (draws.price, draws.click_prob, draws.live):
        digest.update(t.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def market_by_kind(world: World, data: dict) -> list[dict]:
    """Per campaign kind: count, share of segments over target CPC, mean end-of-day spend."""
    kinds = world.campaigns.kind
    return [{"kind": name, "campaigns": int((kinds == k).sum()),
             "segments_over_target": float((data["cpc_ratio"][:, :, kinds == k] > 1).to(F64).mean()),
             "mean_spent_fraction": float(data["spent_end"][:, kinds == k].mean())}
            for k, name in enumerate(KINDS)]


# --- Section 4-5: critic --------------------------------------------------------------------

def _backup(world: World, policy=None) -> dict:
    """The backup keywords of ``td_losses`` for this run: kind, lambda and (``policy``) the next-state policy."""
    return dict(kind=world.cfg.critic_backup, lam=world.cfg.lambda_cpc, policy=policy)


def fit_critic(world: World, data: dict, generator: Streams, *, policy=None, critics=None,
               steps: int | None = None, first_step: int = 0, with_control: bool = True) -> tuple[TwoHeadCritic, dict]:
    """TD regression on the logged rewards, and the same regression on permuted rewards (the control).

    Both critics start from the same weights and see the same minibatch indices' states
    and actions; only the control's (r^v, c) are shuffled across transitions.  The report
    gains ``control_heldout_after``: the control's held-out TD loss (value, CPC), and
    ``td_loss_reference_error``: the trained critic's TD losses on held-out transitions against
    a plain-loop recomputation (:func:`~litrepro.rlbp.critic.td_loss_reference_error`).
    The backup is ``critic_backup``; ``policy`` (states -> (B, 9) probabilities) is the
    next-state policy of the ``policy`` backup.  ``critics`` = (critic, control, permuted
    training data, minibatch stream, initial weights) continues an earlier fit for ``steps``
    more steps from ``first_step`` (:func:`fit_policy_iteration`).  ``with_control=False``
    (the explorer) trains the critic alone: the same critic, without the control's figures.

    Streams: ``critic_init`` (initial weights; the control starts from a copy),
    ``control_permutation`` (the control's shuffle) and ``critic_minibatches`` (the rows of
    both).  The report records the initial weights (``init_state``), the rows drawn
    (``rows``, in draw order) and the settings each training read back (``settings``,
    ``control_settings``), for the audit's replay.
    """
    cfg = world.cfg
    if critics is None:
        streams = as_streams(generator)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(streams.generator("critic_init").initial_seed())   # weights from the named stream
            critic = TwoHeadCritic(len(FEATURES), cfg.hidden).to(world.device)
        init_state = {k: v.detach().cpu().clone() for k, v in critic.state_dict().items()}
        control = copy.deepcopy(critic)
        control_train = data["train"].with_permuted_rewards(streams.generator("control_permutation"))
        minibatches = streams.generator("critic_minibatches")
    else:
        critic, control, control_train, minibatches, init_state = critics
    hyper = dict(steps=cfg.critic_steps if steps is None else steps, lr=cfg.critic_lr, batch_size=cfg.batch_size,
                 gamma=cfg.gamma, target_update_every=cfg.target_update_every, first_step=first_step,
                 **_backup(world, policy))
    control_state = minibatches.get_state()
    report = train_critic(critic, data["train"], data["heldout"], generator=minibatches, **hyper)
    if not with_control:
        return critic, {**report, "init_state": init_state, "settings": [report["settings"]]}
    after_main = minibatches.get_state()
    minibatches.set_state(control_state)               # the control draws the same minibatch indices
    control_report = train_critic(control, control_train, data["heldout"], generator=minibatches, **hyper)
    minibatches.set_state(after_main)
    report["init_state"] = init_state
    report["settings"] = [report["settings"]]
    report["control_settings"] = [control_report["settings"]]
    report["control_heldout_after"] = control_report["heldout_after"]
    report["control_heldout_before"] = control_report["heldout_before"]
    report["control_same_minibatches"] = control_report["drawn_sha256"] == report["drawn_sha256"]
    report["drawn_sha256_all"] = report["drawn_sha256"]
    report["td_loss_reference_error"] = td_loss_reference_error(critic, data["heldout"], cfg.gamma, target=control,
                                                                **_backup(world, policy))
    report["critics"] = (critic, control, control_train, minibatches, init_state)
    return critic, report


def fit_policy_iteration(world: World, data: dict, generator: Streams) -> tuple[TwoHeadCritic, dict, Actor, dict]:
    """``critic_backup = policy``: the critic evaluates the served policy, alternating with the actor.

    ``policy_rounds`` rounds; in round r the critic (main and control alike) takes
    critic_steps / rounds more TD steps with expected backups under pi_r, where pi_1 is
    the behaviour policy mu and pi_r (r > 1) is the top-k policy of the actor fitted at the
    end of round r - 1; then a fresh actor is fitted on the critic's fused scores.  So the
    critic gets the same number of steps as every other backup.  Our reconstruction.
    The critic's minibatch stream runs on across the rounds (its rows are those of every
    other backup); each round's actor takes the actor streams afresh.
    """
    cfg = world.cfg
    per_round = cfg.critic_steps // cfg.policy_rounds
    mu = behaviour_probs(cfg)
    policy, critics, critic_report, merged = mu, None, None, {}
    for r in range(cfg.policy_rounds):
        critic, report = fit_critic(world, data, generator, policy=policy, critics=critics, steps=per_round,
                                    first_step=r * per_round)
        critics = report["critics"]
        if critic_report is None:
            critic_report = report
        else:                                           # one report for the whole fit
            for key in ("td_loss_value", "td_loss_cpc", "settings", "control_settings"):
                critic_report[key] = critic_report[key] + report[key]
            critic_report["rows"] = torch.cat([critic_report["rows"], report["rows"]])
            critic_report["drawn_sha256_all"] = hashlib.sha256(critic_report["rows"].numpy().tobytes()).hexdigest()
            for key in ("heldout_after", "control_heldout_after", "td_loss_reference_error", "critics",
                        "heldout_evaluated_campaigns", "head_changes", "drawn_rows", "draws"):
                critic_report[key] = report[key]
            for key in ("control_same_minibatches",):
                critic_report[key] = critic_report[key] and report[key]
            critic_report["parameter_change"] += report["parameter_change"]
            critic_report["target_lag_error"] = max(critic_report["target_lag_error"], report["target_lag_error"])
            critic_report["trained_campaigns"] = sorted(set(critic_report["trained_campaigns"])
                                                        | set(report["trained_campaigns"]))
        actor, actor_report = fit_actor(world, critic, data, generator)
        for key in ("trained_campaigns",):
            merged[key] = sorted(set(merged.get(key, [])) | set(actor_report[key]))
        policy = served_probs(actor, cfg.top_k)
    actor_report["trained_campaigns"] = merged["trained_campaigns"]
    critic_report["policy_rounds"] = cfg.policy_rounds
    return critic, critic_report, actor, actor_report


def fit_critic_and_actor(world: World, data: dict, generator: Streams):
    """The critic by ``critic_backup``, then the actor on its fused scores: (critic, report, actor, report)."""
    if world.cfg.critic_backup == "policy":
        return fit_policy_iteration(world, data, generator)
    critic, critic_report = fit_critic(world, data, generator)
    actor, actor_report = fit_actor(world, critic, data, generator)
    return critic, critic_report, actor, actor_report


# --- Section 6: actor -----------------------------------------------------------------------

def fit_actor(world: World, critic: TwoHeadCritic, data: dict, generator: Streams,
              lam: float | None = None) -> tuple[Actor, dict]:
    """Train the actor on S = Q^v - lam Q^c (``lam`` defaults to ``lambda_cpc``).

    The initial weights come from stream ``actor_init`` and the minibatches from
    ``actor_minibatches``, both taken afresh, so two calls differ only through ``lam``
    (the value-only control and every lambda of the sweep share the served actor's draws).
    ``actor_draws`` fingerprints them (:func:`actor_draws`); ``init_state`` and ``rows``
    are kept for the audit's replay.
    """
    cfg = world.cfg
    lam = cfg.lambda_cpc if lam is None else lam
    streams = as_streams(generator)
    init_seed = streams.generator("actor_init").initial_seed()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(init_seed)                     # initial weights from the named stream, not the global one
        actor = Actor(len(FEATURES), cfg.hidden).to(world.device)
    init_state = {k: v.detach().cpu().clone() for k, v in actor.state_dict().items()}
    report = train_actor(actor, critic, data["train"], steps=cfg.actor_steps, lr=cfg.actor_lr,
                         lam=lam, batch_size=cfg.actor_batch_size, generator=streams.generator("actor_minibatches"),
                         temperature=cfg.actor_temperature)
    with torch.no_grad():
        logits = actor(data["heldout"].state)                                            # (N, 9)
        probs = top_k_policy(logits, cfg.top_k)                                          # (N, 9)
    ranked = probs.sort(-1, descending=True).values[:, :cfg.top_k]                       # (N, k)
    report.update(policy_row_mass_error=row_mass_error(probs),
                  exact_top_k_support=support_is_exact_top_k(probs, logits, cfg.top_k),
                  mean_action_probs=probs.mean(0).tolist(),
                  mean_ranked_probs=ranked.mean(0).tolist(),
                  negligible_last_action_fraction=float((ranked[:, -1] < NEGLIGIBLE).to(F64).mean()),
                  lam=lam, init_seed=init_seed, init_state=init_state,
                  support_sizes=sorted({int(x) for x in (probs > 0).sum(-1).tolist()}))
    report["actor_draws"] = actor_draws(report)
    return actor, report


def actor_draws(report: dict) -> str:
    """Fingerprint of an actor fit's random draws: sha256 (16 hex digits) of its initial-weight seed and
    its minibatch rows in draw order.  Integers only, so it prints the same on every machine."""
    digest = hashlib.sha256(str(report["init_seed"]).encode())
    digest.update(report["rows"].to(torch.int64).contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def fusion_diagnostics(world: World, critic: TwoHeadCritic, actor: Actor, actor_report: dict, data: dict,
                       generator: torch.Generator) -> dict:
    """How fusion acts on the held-out states, and whether the actor follows it.

    With S = Q^v - lambda Q^c on held-out states s:
      ``fusion_changes_argmax_fraction``  = mean_s [argmax S(s, .) != argmax Q^v(s, .)]
      ``actor_fused_argmax_agreement``    = mean_s [argmax z(s) == argmax S(s, .)]
      ``fused_score_gain``                = mean_s sum_a (pi_lambda - pi_0)(a|s) S(s, a)
    where pi_0 is a control actor trained on Q^v alone from the same streams as the
    served actor pi_lambda (same initial weights, same minibatches; ``value_only_control_draws``
    is its :func:`actor_draws`, which must equal the served actor's).  Fusion changed
    what the actor prefers, in the right direction, when the gain is positive.
    ``fused_score_gain_se`` = sd(gain, n - 1) / sqrt(n) (:func:`litrepro.stats.standard_error`).
    """
    cfg = world.cfg
    control, control_report = fit_actor(world, critic, data, generator, lam=0.0)
    states = data["heldout"].state                                                       # (N, F)
    with torch.no_grad():
        q_value, q_cpc = critic(states)                                                  # (N, 9) each
        fused = fused_scores(q_value, q_cpc, cfg.lambda_cpc)                             # (N, 9)
        logits = actor(states)                                                           # (N, 9)
        pi_lambda, pi_0 = top_k_policy(logits, cfg.top_k), top_k_policy(control(states), cfg.top_k)  # (N, 9)
    gain = ((pi_lambda - pi_0) * fused).sum(-1)                                          # (N,) per state
    return {"fusion_changes_argmax_fraction": float((fused.argmax(-1) != q_value.argmax(-1)).to(F64).mean()),
            "actor_fused_argmax_agreement": float((logits.argmax(-1) == fused.argmax(-1)).to(F64).mean()),
            "fused_score_gain": float(gain.mean()), "fused_score_gain_se": standard_error(gain.tolist()),
            "value_only_control_draws": control_report["actor_draws"]}


def served_probs(actor: Actor, k: int):
    """states (B, F) -> the served top-k probabilities (B, 9)."""
    def probs(state: Tensor) -> Tensor:
        with torch.no_grad():
            return top_k_policy(actor(state), k)
    return probs


def behaviour_probs(cfg: RLBPConfig):
    """states (B, F) -> mu(. | s) (B, 9): epsilon / 9 everywhere plus 1 - epsilon on the fixed gain."""
    def probs(state: Tensor) -> Tensor:
        out = torch.full((state.shape[0], N_ACTIONS), cfg.behaviour_epsilon / N_ACTIONS, dtype=F64, device=state.device)
        out[:, FIXED_GAIN_ACTION] += 1 - cfg.behaviour_epsilon
        return out
    return probs


def learned_policy(actor: Actor, k: int) -> Policy:
    return policy_from_probs(served_probs(actor, k))


# --- Section 7-8: off-policy evaluation against the simulator's truth -----------------------

def _target_probs(name: str, actor: Actor, state: Tensor, cfg: RLBPConfig) -> Tensor:
    """(N, 9) action probabilities of each evaluated policy."""
    n = state.shape[0]
    if name == "learned":
        with torch.no_grad():
            return top_k_policy(actor(state), cfg.top_k)
    if name == "behaviour":
        return behaviour_probs(cfg)(state)
    probs = torch.zeros(n, N_ACTIONS, dtype=F64, device=state.device)
    probs[:, FIXED_GAIN_ACTION] = 1.0
    return probs


POLICIES = ("learned", "behaviour", "fixed_gain")


def draw_eval_days(world: World, generator: Streams) -> list:
    """``eval_days`` fresh days of auctions (stream ``eval_days``); every evaluated policy meets the same ones."""
    generator = as_streams(generator).generator("eval_days")
    return [draw_day(world.campaigns, world.cfg.opportunities_per_step, generator) for _ in range(world.cfg.eval_days)]


def simulate_truth(world: World, days: list, policy: Policy, generator: torch.Generator, lam: float) -> dict:
    """A policy run on ``days``: its value reward, CPC overshoot and fused reward, per decision.

        value          = mean_{d,k,c} r^v
        cpc_overshoot  = mean_{d,k,c} max(0, CPC / tau - 1)
        true_value     = mean_{d,k,c} (r^v + lambda (tau - CPC) / tau)

    ``true_value_heldout`` is ``true_value`` over the held-out campaigns only: the
    campaigns whose logged transitions the IPS estimate re-weights, so IPS - truth
    compares like with like.  ``true_se`` is the standard error of the per-day fused
    reward over the days (:func:`litrepro.stats.standard_error`).  ``generator`` is the
    caller's stream (a ``torch.Generator``) for the policy's own draws.
    """
    tau = world.campaigns.target_cpc
    logs = [simulate_day(world.campaigns, d, policy, world.settings, generator) for d in days]
    value = torch.stack([log.value_reward for log in logs])                             # (days, K, C)
    cpc = torch.stack([log.cpc for log in logs])                                         # (days, K, C)
    total = total_reward(value, cpc, tau, lam)                                           # (days, K, C)
    per_day = total.mean((1, 2))                                                         # (days,)
    heldout = heldout_campaigns(world)                                                   # (C,) bool
    return {"value": float(value.mean()), "cpc_overshoot": float((cpc / tau - 1).clamp(min=0).mean()),
            "true_value": float(total.mean()), "true_value_heldout": float(total[:, :, heldout].mean()),
            "true_se": standard_error(per_day.tolist()),
            "raw": {"value": value, "cpc": cpc, "total_per_campaign": total.mean((0, 1)),
                    "day_hashes": [day_hash(d) for d in days],
                    "states": torch.stack([log.states for log in logs]),                  # (days, K, C, F)
                    "actions": torch.stack([log.actions for log in logs]),                # (days, K, C)
                    "propensity": torch.stack([log.propensity for log in logs])}}         # (days, K, C)


def evaluate_policies(world: World, actor: Actor, data: dict, days: list, generator: Streams) -> dict:
    """Ordinary IPS on the held-out log, and each policy's simulated truth on ``days``.

    Both estimate the mean reward per decision r = value + lambda * CPC reduction;
    the truth also reports the value reward alone and the CPC overshoot.  Policy p's
    draws on the days come from stream ``truth/<p>``.
    """
    cfg, heldout = world.cfg, data["heldout"]
    streams = as_streams(generator)
    runners = {"learned": learned_policy(actor, cfg.top_k), "behaviour": behaviour_policy(cfg.behaviour_epsilon),
               "fixed_gain": constant_policy(FIXED_GAIN_ACTION)}
    out = {"ips_campaigns": torch.unique(heldout.campaign).tolist(), "ips_rows": len(heldout), "raw": {},
           "truth_reference_error": 0.0}
    for name in POLICIES:
        pi = _target_probs(name, actor, heldout.state, cfg).gather(1, heldout.action[:, None]).squeeze(1)  # (N,)
        truth = simulate_truth(world, days, runners[name], streams.generator(f"truth/{name}"), cfg.lambda_cpc)
        out["truth_reference_error"] = max(out["truth_reference_error"],      # the audit's recomputation, kept
                                           rlbp_audit.truth_reference_error(world, truth, cfg.lambda_cpc))  # for display
        out["raw"][name] = truth.pop("raw")
        out[name] = {"ips": float(ordinary_ips(heldout.reward, pi, heldout.propensity)),
                     "ips_se": ips_standard_error(heldout.reward, pi, heldout.propensity), **truth}
        if name == "learned":
            out["ips_learned_weights_probs"] = pi
            reference = ips_reference(heldout.reward.tolist(), pi.tolist(), heldout.propensity.tolist())
            out["ips_reference_error"] = abs(out[name]["ips"] - reference)
            with torch.no_grad():                      # the policy IPS actually re-weights with, checked as served
                logits = actor(heldout.state)
            served = _target_probs(name, actor, heldout.state, cfg)                            # (N, 9)
            out["served_top_k_exact"] = support_is_exact_top_k(served, logits, cfg.top_k)
            out["served_row_mass_error"] = row_mass_error(served)
    # Logged propensities must be the behaviour policy's mu(a|s), recomputed from its formula.
    mu = _target_probs("behaviour", actor, heldout.state, cfg).gather(1, heldout.action[:, None]).squeeze(1)
    out["propensity_error"] = float((heldout.propensity - mu).abs().max())
    return out


# --- Section 8: the lambda trade-off ---------------------------------------------------------

def lambda_sweep(world: World, critic: TwoHeadCritic, data: dict, days: list, generator: Streams,
                 lambdas: tuple[float, ...] = LAMBDAS) -> list[dict]:
    """Retrain the actor for each fusion weight and simulate it on ``days``.

    The critic's heads regress r^v and c separately, so they do not depend on lambda;
    only the actor, trained on Q^v - lambda Q^c, is refitted.  Each row holds lambda,
    the policy's value reward and CPC overshoot (lambda-free measures), and its fused
    reward at the run's own ``lambda_cpc``.  Every lambda takes the served actor's streams
    (``actor_init``, ``actor_minibatches``) and its truth stream (``truth/learned``), so two
    lambdas that yield the same actor yield the same row, the rows differ only through
    lambda, and the row at the run's ``lambda_cpc`` is the served policy's truth.
    ``actor_draws`` (:func:`actor_draws`) lets the audit check that they shared the draws, and
    ``actor_lambda`` (the lambda the actor's training loop used, read back from its report) that
    each row's actor was trained at the row's lambda.
    """
    rows = []
    streams = as_streams(generator)
    for lam in lambdas:
        actor, report = fit_actor(world, critic, data, streams, lam=lam)
        truth = simulate_truth(world, days, learned_policy(actor, world.cfg.top_k), streams.generator("truth/learned"),
                               world.cfg.lambda_cpc)
        truth.pop("raw")
        rows.append({"lambda": lam, "value": truth["value"], "cpc_overshoot": truth["cpc_overshoot"],
                     "actor_draws": report["actor_draws"], "actor_lambda": report["settings"]["lam"]})
    return rows


# --- Section 9: how much any gain policy could win here --------------------------------------

def headroom(world: World, days: list, generator: Streams) -> dict:
    """The fused truth of each constant action on the evaluation days, and three oracles.

    With T(a, c) the fused reward of campaign c under constant action a, averaged over the
    days' decisions (``simulate_truth``'s ``total_per_campaign``):
      ``constant``          = [mean_c T(a, c) for a in 0..8]
      ``best_constant``     = max_a mean_c T(a, c)                 (one action for all, in hindsight)
      ``best_per_kind``     = mean_c max_a mean_{c' of c's kind} T(a, c')   (knows each campaign's kind)
      ``best_per_campaign`` = mean_c max_a T(a, c)                 (one action per campaign, in hindsight)
    ``fixed_gain`` is T(4, .) averaged.  Constant policies draw nothing from their stream
    (``headroom``); ``stream_state_sha256`` is the stream's state afterwards, for the audit.
    ``table`` (9, C) and ``kinds`` (C,) are kept for :func:`headroom_reference_error`, not for the results.
    """
    stream = as_streams(generator).generator("headroom")
    per = torch.stack([simulate_truth(world, days, constant_policy(a), stream, world.cfg.lambda_cpc)
                       ["raw"]["total_per_campaign"] for a in range(N_ACTIONS)])          # (9, C)
    kind = world.campaigns.kind
    by_kind = torch.zeros_like(per[0])                                                   # (C,)
    for k in range(len(KINDS)):
        members = kind == k
        if bool(members.any()):
            by_kind[members] = per[:, members].mean(1).max()
    constant = per.mean(1)                                                               # (9,)
    return {"table": per, "kinds": kind.tolist(), "constant": constant.tolist(), "fixed_gain": float(constant[FIXED_GAIN_ACTION]),
            "best_constant": float(constant.max()), "best_constant_action": int(constant.argmax()),
            "best_per_kind": float(by_kind.mean()), "best_per_campaign": float(per.max(0).values.mean()),
            "stream_state_sha256": hashlib.sha256(stream.get_state().numpy().tobytes()).hexdigest()[:16]}


# --- Results in the seed file's vocabulary --------------------------------------------------


def td_figures(critic_report: dict) -> dict[str, float]:
    """The held-out TD figures the results report, from the critic's report (value, CPC heads):

        td_loss_before/after = L^v + L^c before/after training,   control_td_loss_after = the control's,
        control_ratio = td_loss_after / control_td_loss_after
    """
    before, after, control = (critic_report[k] for k in ("heldout_before", "heldout_after", "control_heldout_after"))
    return {"td_loss_before": before[0] + before[1], "td_loss_after": after[0] + after[1],
            "td_loss_value_before": before[0], "td_loss_cpc_before": before[1],
            "td_loss_value_after": after[0], "td_loss_cpc_after": after[1],
            "control_td_loss_after": control[0] + control[1],
            "control_ratio": (after[0] + after[1]) / (control[0] + control[1])}


def collect_results(world: World, *, critic_report: dict, actor_report: dict, data: dict, evaluation: dict,
                    fusion: dict, sweep: list[dict], derivative_error: float, guard, execution: tuple[str, str],
                    fingerprint: str, days_report: dict, transitions: dict, auction_error: float,
                    audit: dict, headroom_report: dict | None = None) -> dict:
    """Metrics and checks named as in the seed file, plus curves and beyond-seed figures.

    The checks are :mod:`litrepro.rlbp.audit`'s (``seed_contract_checks``, ``stage_checks``,
    ``seed_checks``); ``extra_checks`` are ours, one per pipeline stage the seed's checks do
    not reach (the notebook introduces each where its stage is).  ``random_streams`` records
    each stream's derivation and first draws, ``random_draws`` fingerprints of the draws the
    arms share, ``effective_settings`` the settings as the stages used them.
    """
    cfg = world.cfg
    backup = fixtures.backup_fixture(cfg.gamma)
    row_mass = max(actor_report["policy_row_mass_error"], evaluation["served_row_mass_error"])
    metrics = {
        "td_loss_before": td_figures(critic_report)["td_loss_before"],
        "td_loss_after": td_figures(critic_report)["td_loss_after"],
        "actor_gradient_norm": actor_report["gradient_norms"][0],
        "max_min_backup_error": backup["max_min_backup_error"],
        "wrong_cpc_max_backup_gap": backup["wrong_cpc_max_backup_gap"],
        "policy_row_mass_error": row_mass,
        "derivative_gain_error": derivative_error,
        "ips_reference_error": evaluation["ips_reference_error"],
        "pretrained_model_calls": guard.pretrained_model_calls,
    }
    checks = rlbp_audit.seed_contract_checks(world, critic_report=critic_report, actor_report=actor_report, data=data,
                                             evaluation=evaluation, fusion=fusion, guard=guard, backup=backup,
                                             row_mass=row_mass)
    beyond = {f"{name}_{key}": evaluation[name][key] for name in POLICIES
              for key in ("ips", "ips_se", "true_value", "true_value_heldout", "true_se", "value", "cpc_overshoot")}
    beyond.update(**{k: v for k, v in td_figures(critic_report).items() if k not in metrics},
                  segments_over_target_fraction=data["segments_over_target_fraction"],
                  fusion_changes_argmax_fraction=fusion["fusion_changes_argmax_fraction"],
                  actor_fused_argmax_agreement=fusion["actor_fused_argmax_agreement"],
                  fused_score_gain=fusion["fused_score_gain"], fused_score_gain_se=fusion["fused_score_gain_se"],
                  negligible_last_action_fraction=actor_report["negligible_last_action_fraction"],
                  controller_replay_error=rlbp_audit.controller_replay_error(world, data["logs"]),
                  action_label_error=rlbp_audit.action_label_error(world),
                  propensity_error=evaluation["propensity_error"],
                  td_loss_reference_error=critic_report["td_loss_reference_error"],
                  target_lag_error=critic_report["target_lag_error"],
                  truth_reference_error=evaluation["truth_reference_error"],
                  auction_replay_error=auction_error,
                  **{k: v for k, v in audit.items() if not isinstance(v, (bool, dict))},
                  **{k: v for k, v in transitions.items() if k != "transitions_consistent"},
                  network_calls=guard.network_calls)
    extra_checks = rlbp_audit.stage_checks(world, critic_report=critic_report, actor_report=actor_report, data=data,
                                           evaluation=evaluation, days_report=days_report, transitions=transitions,
                                           auction_error=auction_error, audit=audit)
    out = {"method": "pinterest_rlbp", "seed": cfg.seed, "metrics": metrics, "checks": checks,
           "extra_checks": extra_checks, "beyond_seed_metrics": beyond, "lambda_sweep": sweep,
           "eval_day_hashes": days_report["eval_day_hashes"],
           "curves": {"td_loss_value": critic_report["td_loss_value"], "td_loss_cpc": critic_report["td_loss_cpc"],
                      "actor_loss": actor_report["loss"], "mean_action_probs": actor_report["mean_action_probs"]},
           "execution_device": execution[0], "execution_accelerator": execution[1],
           "dataset_fingerprint": fingerprint,
           "random_streams": dict(sorted(world.streams.derivations.items())) if world.streams is not None else {},
           "random_draws": {"critic_draws": critic_report["drawn_sha256_all"], "actor_draws": actor_report["actor_draws"],
                            "eval_day_hashes": days_report["eval_day_hashes"]}}
    if headroom_report is not None:
        out["headroom"] = {k: v for k, v in headroom_report.items() if k not in ("table", "kinds")}
    more_checks, gaps, records = rlbp_audit.seed_checks(world, out, audit=audit, data=data, critic_report=critic_report,
                                                         actor_report=actor_report, evaluation=evaluation, fusion=fusion,
                                                         sweep=sweep, days_report=days_report)
    out["extra_checks"].update(more_checks)
    out["beyond_seed_metrics"].update(gaps)
    out.update(records)
    return out


def dataset_fingerprint(cfg: RLBPConfig, data: dict) -> str:
    """sha256 of what identifies the synthetic data set and is the same on every machine.

    Hashing the logged floats would not be: other CPUs round exp/log/sigmoid differently
    in the last bit.  So the hash covers the parameters that generate the data and the
    logged actions and done flags, which are integers drawn from the seeded generator.
    """
    digest = hashlib.sha256(json.dumps(dataclasses.asdict(cfg), sort_keys=True).encode())
    for part in (data["train"], data["heldout"]):
        for name in ("action", "done"):
            digest.update(getattr(part, name).detach().cpu().to(torch.int64).contiguous().numpy().tobytes())
    return "sha256:" + digest.hexdigest()


def run_arms(cfg: RLBPConfig, device: torch.device | str = "cpu", *, backups: tuple[str, ...] | None = None,
             sweep: bool = True, with_headroom: bool = True) -> dict[str, dict]:
    """Every section in the notebook's order, without the displays, once per critic backup.

    The world, the logged data, the evaluation days and the headroom are made once; each
    backup in ``backups`` (default: ``cfg.critic_backup`` alone) then fits its critic and
    actor and is evaluated on the same named streams (:mod:`litrepro.rlbp.streams`), so the
    arms share seeds, data, evaluation days and random draws, and differ only through the
    backup (with several backups, ``backups_share_draws`` checks it).  Returns
    ``{backup: results}``; the results of ``cfg.critic_backup`` are exactly the notebook's.
    """
    from litrepro.guard import OfflineGuard
    from litrepro.seeding import describe_device, seed_everything

    backups = backups or (cfg.critic_backup,)
    seed_everything(cfg.seed)
    generator = Streams(cfg.seed)                      # every stage takes its own named stream from here
    device = torch.device(device)
    out = {}
    with OfflineGuard() as guard:
        world = build_world(cfg, generator, device)
        demo = pid_demo(world, generator, actions=(0, 8))
        derivative_error = rlbp_audit.derivative_gain_error(demo["logs"][8], cfg.kd, cfg.steps_per_day)
        data = collect_logged_data(world, generator)
        transitions = rlbp_audit.transitions_report(world, data)
        auction_error = rlbp_audit.auction_replay_error(world, data)
        days = draw_eval_days(world, generator)
        days_report = rlbp_audit.eval_days_report(data, days, [demo["draws"]])
        room = headroom(world, days, generator) if with_headroom else None
        for kind in backups:                           # common random numbers: each arm takes the same streams
            arm = dataclasses.replace(world, cfg=dataclasses.replace(cfg, critic_backup=kind))
            critic, critic_report, actor, actor_report = fit_critic_and_actor(arm, data, generator)
            fusion = fusion_diagnostics(arm, critic, actor, actor_report, data, generator)
            evaluation = evaluate_policies(arm, actor, data, days, generator)
            rows = lambda_sweep(arm, critic, data, days, generator) if sweep and kind == cfg.critic_backup else []
            audit = rlbp_audit.stage_audit(arm, critic, actor, data, critic_report, actor_report, evaluation, days_report, room)
            out[kind] = (arm, critic_report, actor_report, evaluation, fusion, rows, audit)
    results = {kind: collect_results(arm, critic_report=cr, actor_report=ar, data=data, evaluation=ev, fusion=fu,
                                  sweep=rows, derivative_error=derivative_error, guard=guard,
                                  execution=describe_device(device),
                                  fingerprint=dataset_fingerprint(arm.cfg, data), days_report=days_report,
                                  transitions=transitions, auction_error=auction_error, audit=audit, headroom_report=room)
            for kind, (arm, cr, ar, ev, fu, rows, audit) in out.items()}
    if len(results) > 1:
        shared = rlbp_audit.backups_share_draws(results)
        for r in results.values():
            r["extra_checks"]["backups_share_draws"] = shared
    return results


def run(cfg: RLBPConfig, device: torch.device | str = "cpu", *, sweep: bool = True) -> dict:
    """The seed's results, as the notebook computes them (:func:`run_arms` with the configured backup).

    For tests, the fault suite and scripts; the notebook calls the same functions cell by cell.
    """
    return run_arms(cfg, device, sweep=sweep)[cfg.critic_backup]


def __getattr__(name: str):
    """The checks moved to :mod:`litrepro.rlbp.audit`; ``experiment.<check>`` still finds them (the notebook's cells)."""
    if not name.startswith("__") and hasattr(rlbp_audit, name):
        return getattr(rlbp_audit, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
