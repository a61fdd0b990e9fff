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

from litrepro.rlbp import fixtures
from litrepro.rlbp.actor import (Actor, fused_scores, row_mass_error, support_is_exact_top_k, top_k_policy,
                                 train_actor)
from litrepro.rlbp.config import RLBPConfig
from litrepro.rlbp.critic import Transitions, TwoHeadCritic, td_loss_reference_error, train_critic
from litrepro.rlbp.ope import ips_reference, ips_standard_error, ordinary_ips
from litrepro.rlbp.pid import N_ACTIONS, action_grid, actions_are_bounded, pid_terms
from litrepro.rlbp.reward import total_reward
from litrepro.rlbp.simulator import (FEATURES, KINDS, Campaigns, DayLog, Policy, SimSettings, draw_day,
                                     make_campaigns, simulate_day)

F64 = torch.float64
FIXED_GAIN_ACTION = 4  # multipliers (1.0, 1.0) in the default grid
#: ``actual_reward_regression_update`` needs the held-out TD loss at most this share of the
#: permuted-reward control's.  Set from the measured spread of the clean ratio: over the 20 seeds of
#: ``make rlbp-study`` it is recorded per seed and backup in ``backup_study.json`` (``control_ratio``;
#: max_min: mean 0.21, sd 0.028, max 0.26), and ``tests/test_rlbp_study.py`` requires max + 4 sd of
#: those clean ratios to stay below the margin.  Faults that corrupt the regression targets (a stale
#: target network, per-batch standardised rewards) land at 0.75-0.80 in ``tests/test_rlbp_faults.py``.
#: Without bootstrapping (``none``, gamma = 0) the clean ratio sits higher (mean 0.46), so that backup
#: has its own margin.
CONTROL_MARGIN = {"max_min": 0.4, "fused_greedy": 0.4, "policy": 0.4, "none": 0.7}
#: ``fusion_changes_preference`` needs ``fused_score_gain`` above this many standard errors
#: (per-state spread over the held-out states) rather than merely above 0.
FUSION_GAIN_SE = 2.0
#: Exact-by-contract recomputations (replays, references) must agree within this (float64 rounding).
EXACT = 1e-9
#: ``opposite_backup_directions`` needs the pipeline's TD losses within this relative gap of the
#: plain-loop recomputation (float64 summation order gives about 1e-16).
TD_REFERENCE_RTOL = 1e-9
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
    """The configured grid: nine distinct (Kp, Ki) pairs inside the bounds."""
    c = world.cfg
    return actions_are_bounded(world.settings.kp, world.settings.ki, kp_bounds=(c.kp_min, c.kp_max),
                               ki_bounds=(c.ki_min, c.ki_max))


def controller_replay_error(world: World, logs: list[DayLog]) -> float:
    """max |logged - replayed| over the gains and the PID output the simulator applied.

    From each logged day: the gains in force at step t must be the grid's gains of the
    action taken in t's segment, and phi_t = clip(Kp e_t + Ki I_t + D_t, +-phi_max) with
    I and D recomputed by :func:`pid_terms` from the logged errors.  A simulator that
    ignores the action, reads Ki from the Kp grid, drops the D term or skips the clip
    replays with an error.
    """
    s, cfg = world.settings, world.cfg
    seg_len = cfg.steps_per_day // cfg.segments_per_day
    worst = 0.0
    for log in logs:
        action = log.actions.repeat_interleave(seg_len, dim=0)                          # (T, C)
        kp, ki = s.kp.to(action.device)[action], s.ki.to(action.device)[action]          # (T, C)
        p, i, d = pid_terms(log.errors.T, kp.T, ki.T, s.kd, 1.0 / cfg.steps_per_day)     # (C, T) each
        phi = (p + i + d).clamp(-s.phi_max, s.phi_max).T                                 # (T, C)
        for logged, replayed in ((log.kp, kp), (log.ki, ki), (log.phi, phi)):
            worst = max(worst, float((logged - replayed).abs().max()))
    return worst


def action_label_error(world: World) -> float:
    """max gap between each action's (Kp, Ki) and its label, recomputed by a plain loop over the grid.

    Action a = 3 i + j carries Kp = clip(kp_base m_i) and Ki = clip(ki_base m_j); a
    transposed or shuffled grid mislabels every off-diagonal action.
    """
    c, s = world.cfg, world.settings
    worst = 0.0
    for i, m_p in enumerate(c.gain_multipliers):
        for j, m_i in enumerate(c.gain_multipliers):
            kp = min(max(c.kp_base * m_p, c.kp_min), c.kp_max)
            ki = min(max(c.ki_base * m_i, c.ki_min), c.ki_max)
            worst = max(worst, abs(float(s.kp[3 * i + j]) - kp), abs(float(s.ki[3 * i + j]) - ki))
    return worst


def bounded_actions_applied(world: World, logs: list[DayLog]) -> bool:
    """``nine_bounded_PID_actions``: the grid is bounded, each action carries its labelled gains,
    and the simulator applied exactly those gains."""
    return (nine_bounded_actions(world) and action_label_error(world) < EXACT
            and controller_replay_error(world, logs) < EXACT)


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
    return {"campaign": campaign, "plan": world.campaigns.plan[:, campaign].tolist(), "traces": traces, "logs": logs,
            "draws": draws}


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


def collect_logged_data(world: World, generator: torch.Generator) -> dict:
    """``logged_days`` days under the behaviour policy, split by campaign into train / held-out.

    Also returns the market's shape under the behaviour policy: ``cpc_ratio`` (D, K, C) =
    CPC / tau per segment, ``spent_end`` (D, C) the end-of-day spent fraction, and
    ``segments_over_target_fraction``, the share of campaign-segments with CPC > tau.
    """
    cfg = world.cfg
    policy = behaviour_policy(cfg.behaviour_epsilon)
    draws = [draw_day(world.campaigns, cfg.opportunities_per_step, generator) for _ in range(cfg.logged_days)]
    logs = [simulate_day(world.campaigns, d, policy, world.settings, generator) for d in draws]
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


def state_replay(world: World, log: DayLog) -> tuple[Tensor, Tensor]:
    """The decision states of one logged day, recomputed from its per-step trace: (K + 1, C, F).

    Independently of the simulator's ``_features``: at segment start t0 (and at the day's
    end, t0 = T) the spent fraction and cumulative clicks are those after step t0 - 1 (0 at
    the start), the pacing error is plan_t0 - spent fraction, the error integral is
    sum_{j < t0} e_j dt with e_j = plan_j - spent fraction after j - 1, and phi is the
    controller's output at t0 - 1.  Row k < K is segment k's state; row K the end-of-day state.
    Also returns the errors e_t recomputed the same way, (T, C).
    """
    c, cfg = world.campaigns, world.cfg
    steps, seg_len = cfg.steps_per_day, cfg.steps_per_day // cfg.segments_per_day
    zero = torch.zeros_like(log.spent_fraction[:1])                                         # (1, C)
    spent_before = torch.cat([zero, log.spent_fraction])                                    # (T + 1, C): before step t
    clicks_before = torch.cat([zero, log.clicks])                                           # (T + 1, C)
    phi_before = torch.cat([zero, log.phi])                                                 # (T + 1, C)
    plan = torch.cat([c.plan, c.plan[-1:]])                                                 # (T + 1, C); end: plan_T-1
    errors = plan - spent_before                                                            # (T + 1, C)
    integral = torch.cat([zero, torch.cumsum(errors[:-1], 0) / steps])                      # (T + 1, C): sum_{j<t} e_j dt
    rows = []
    for t0 in list(range(0, steps, seg_len)) + [steps]:
        spent = spent_before[t0] * c.budget
        cpc = (spent + cfg.cpc_smoothing * c.target_cpc) / (clicks_before[t0] + cfg.cpc_smoothing)
        rows.append(torch.stack([torch.full_like(spent, t0 / steps), errors[t0], spent_before[t0],
                                 ((cpc - c.target_cpc) / c.target_cpc).clamp(-1.0, 3.0), phi_before[t0],
                                 integral[t0], c.budget_share, c.target_margin], dim=-1))   # (C, F)
    return torch.stack(rows), errors[:-1]


def transitions_report(world: World, data: dict) -> dict:
    """``transitions_consistent``: the transitions the critic and IPS read are the days the simulator ran.

    For the train and held-out parts, reshaped to (days, K, campaigns): ``done`` is 1
    exactly at each day's last segment; ``next_state`` of segment k is ``state`` of
    segment k + 1; and every state and next state equals :func:`state_replay` of the
    day's trace for the campaign the transition names.  Also the controller's logged
    errors equal the replayed e_t.  Returns the largest gap of each, and the check.
    """
    cfg = world.cfg
    days, k = len(data["logs"]), cfg.segments_per_day
    replayed = [state_replay(world, log) for log in data["logs"]]
    states = torch.stack([r[0] for r in replayed])                                          # (D, K + 1, C, F)
    out = {"done_error": 0.0, "next_state_error": 0.0, "state_replay_error": 0.0,
           "error_replay_error": max(float((log.errors - r[1]).abs().max()) for log, r in zip(data["logs"], replayed))}
    for part in (data["train"], data["heldout"]):
        n = len(part) // (days * k)
        ids = part.campaign.view(days, k, n)                                                # (D, K, n)
        st, nst = part.state.view(days, k, n, -1), part.next_state.view(days, k, n, -1)     # (D, K, n, F)
        done = part.done.view(days, k, n)
        want_done = (torch.arange(k, device=done.device) == k - 1).to(F64)[None, :, None]  # (1, K, 1)
        out["done_error"] = max(out["done_error"], float((done - want_done).abs().max()))
        out["next_state_error"] = max(out["next_state_error"], float((nst[:, :-1] - st[:, 1:]).abs().max()))
        day = torch.arange(days, device=ids.device)[:, None, None]
        seg = torch.arange(k, device=ids.device)[None, :, None]
        for got, offset in ((st, 0), (nst, 1)):
            ref = states[day, seg + offset, ids]                                            # (D, K, n, F)
            out["state_replay_error"] = max(out["state_replay_error"], float((got - ref).abs().max()))
    out["transitions_consistent"] = all(v < EXACT for v in out.values())
    return out


def auction_replay_error(world: World, data: dict, per_kind: int = 1) -> float:
    """max gap of a plain-loop replay of the auctions of ``per_kind`` campaign(s) of each kind, every logged day.

    Per step t: bid = b exp(phi_t) with the logged phi; auctions in order; a live one
    with price < bid is won and paid at its price (second price) unless the day's spend
    would pass the budget, where the campaign stops; won click probabilities add up.
    Per segment: CPC = (spend + eps tau) / (clicks + eps) and r^v = clicks / (B / (tau K))
    - w |plan_end - spent fraction|.  Compared with the logged spent fraction, cumulative
    clicks, CPC and r^v; the budget must never be passed.
    """
    c, cfg, s = world.campaigns, world.cfg, world.settings
    seg_len = cfg.steps_per_day // cfg.segments_per_day
    picks = [int(i) for kind in range(len(KINDS)) for i in torch.nonzero(c.kind == kind).flatten()[:per_kind]]
    worst = 0.0
    for log, draws in zip(data["logs"], data["draws"]):
        price, click, live = (x[:, picks].tolist() for x in (draws.price, draws.click_prob, draws.live))  # (T, picks, M)
        for col, i in enumerate(picks):
            budget, tau, base = float(c.budget[i]), float(c.target_cpc[i]), float(c.base_bid[i])
            spent = clicks = seg_spent = seg_clicks = 0.0
            for t in range(cfg.steps_per_day):
                bid = base * math.exp(float(log.phi[t, i]))
                for m in range(cfg.opportunities_per_step):
                    p = price[t][col][m]
                    if live[t][col][m] and p < bid:
                        if spent + p > budget:
                            break                                   # the first win it cannot afford stops the step
                        spent, seg_spent = spent + p, seg_spent + p
                        clicks, seg_clicks = clicks + click[t][col][m], seg_clicks + click[t][col][m]
                worst = max(worst, abs(spent / budget - float(log.spent_fraction[t, i])),
                            abs(clicks - float(log.clicks[t, i])), max(0.0, spent - budget))
                if (t + 1) % seg_len == 0:
                    k = t // seg_len
                    cpc = (seg_spent + s.cpc_smoothing * tau) / (seg_clicks + s.cpc_smoothing)
                    value = seg_clicks / (budget / (tau * s.segments)) - s.pacing_weight * abs(
                        float(c.plan[t, i]) - spent / budget)
                    worst = max(worst, abs(cpc - float(log.cpc[k, i])) / tau, abs(value - float(log.value_reward[k, i])))
                    seg_spent = seg_clicks = 0.0
    return worst


def market_by_kind(world: World, data: dict) -> list[dict]:
    """Per campaign kind: count, share of segments over target CPC, mean end-of-day spend."""
    kinds = world.campaigns.kind
    return [{"kind": name, "campaigns": int((kinds == k).sum()),
             "segments_over_target": float((data["cpc_ratio"][:, :, kinds == k] > 1).to(F64).mean()),
             "mean_spent_fraction": float(data["spent_end"][:, kinds == k].mean())}
            for k, name in enumerate(KINDS)]


def cpc_sign_retained(world: World, data: dict) -> bool:
    """``CPC_reduction_retains_negative_sign`` on the data the pipeline actually uses.

    Recomputes, independently of ``litrepro.rlbp.reward``, the CPC head's cost
    c = (CPC - tau) / tau and the fused reward r = r^v - lambda c of every logged
    transition, and requires: the stored c and r equal them; c takes both signs (the
    market has segments above and below target); and, for lambda > 0, every segment
    above target is penalised (r < r^v).  Together with the hand fixture (CPC 1.5 tau
    gives exactly -0.5), an ``abs()`` or a clip anywhere on that path turns this false.
    """
    lam = world.cfg.lambda_cpc
    ok = True
    for part in (data["train"], data["heldout"]):
        cost = (part.cpc - part.target_cpc) / part.target_cpc                                  # (N,)
        ok &= bool(torch.allclose(part.cpc_cost, cost, rtol=1e-12, atol=1e-12))
        ok &= bool(torch.allclose(part.reward, part.value_reward - lam * cost, rtol=1e-12, atol=1e-12))
        over = cost > 0
        ok &= bool(over.any()) and bool((cost < 0).any())
        ok &= lam == 0 or bool((part.reward[over] < part.value_reward[over]).all())
    return ok and fixtures.cpc_sign_fixture(lam)["CPC_reduction_retains_negative_sign"]


# --- Section 4-5: critic --------------------------------------------------------------------

def _backup(world: World, policy=None) -> dict:
    """The backup keywords of ``td_losses`` for this run: kind, lambda and (``policy``) the next-state policy."""
    return dict(kind=world.cfg.critic_backup, lam=world.cfg.lambda_cpc, policy=policy)


def fit_critic(world: World, data: dict, generator: torch.Generator, *, policy=None, critics=None,
               steps: int | None = None, first_step: int = 0) -> tuple[TwoHeadCritic, dict]:
    """TD regression on the logged rewards, and the same regression on permuted rewards (the control).

    Both critics start from the same weights and see the same minibatch indices' states
    and actions; only the control's (r^v, c) are shuffled across transitions.  The report
    gains ``control_heldout_after``: the control's held-out TD loss (value, CPC), and
    ``td_loss_reference_error``: the trained critic's TD losses on held-out transitions against
    a plain-loop recomputation (:func:`~litrepro.rlbp.critic.td_loss_reference_error`).
    The backup is ``critic_backup``; ``policy`` (states -> (B, 9) probabilities) is the
    next-state policy of the ``policy`` backup.  ``critics`` = (critic, control, permuted
    training data) continues an earlier fit for ``steps`` more steps from ``first_step``
    (:func:`fit_policy_iteration`).
    """
    cfg = world.cfg
    if critics is None:
        critic = TwoHeadCritic(len(FEATURES), cfg.hidden).to(world.device)
        control = copy.deepcopy(critic)
        control_train = data["train"].with_permuted_rewards(generator)
    else:
        critic, control, control_train = critics
    hyper = dict(steps=cfg.critic_steps if steps is None else steps, lr=cfg.critic_lr, batch_size=cfg.batch_size,
                 gamma=cfg.gamma, target_update_every=cfg.target_update_every, first_step=first_step,
                 **_backup(world, policy))
    control_state = generator.get_state()
    report = train_critic(critic, data["train"], data["heldout"], generator=generator, **hyper)
    after_main = generator.get_state()
    generator.set_state(control_state)                 # the control draws the same minibatch indices
    control_report = train_critic(control, control_train, data["heldout"], generator=generator, **hyper)
    generator.set_state(after_main)
    report["control_heldout_after"] = control_report["heldout_after"]
    report["control_heldout_before"] = control_report["heldout_before"]
    report["control_same_minibatches"] = control_report["drawn_sha256"] == report["drawn_sha256"]
    report["control_targets_jointly_permuted"] = joint_permutation(data["train"], control_train)
    report["td_loss_reference_error"] = td_loss_reference_error(critic, data["heldout"], cfg.gamma, target=control,
                                                                **_backup(world, policy))
    report["critics"] = (critic, control, control_train)
    return critic, report


def joint_permutation(train: Transitions, control: Transitions) -> bool:
    """The control's (r^v, c, r) rows are the training rows' triples, reordered together (not
    each column on its own, which would change the multiset of triples), and reordered at all."""
    def rows(t: Transitions) -> Tensor:
        return torch.stack([t.value_reward, t.cpc_cost, t.reward], 1)                     # (N, 3)

    def sort_rows(x: Tensor) -> Tensor:
        for col in (2, 1, 0):                                                              # lexicographic, stable
            x = x[x[:, col].argsort(stable=True)]
        return x
    a, b = rows(train), rows(control)
    return bool(torch.equal(sort_rows(a), sort_rows(b)) and not torch.equal(a, b)
                and torch.equal(train.state, control.state) and torch.equal(train.action, control.action))


def fit_policy_iteration(world: World, data: dict, generator: torch.Generator) -> tuple[TwoHeadCritic, dict, Actor, dict]:
    """``critic_backup = policy``: the critic evaluates the served policy, alternating with the actor.

    ``policy_rounds`` rounds; in round r the critic (main and control alike) takes
    critic_steps / rounds more TD steps with expected backups under pi_r, where pi_1 is
    the behaviour policy mu and pi_r (r > 1) is the top-k policy of the actor fitted at the
    end of round r - 1; then a fresh actor is fitted on the critic's fused scores.  So the
    critic gets the same number of steps as every other backup.  Our reconstruction.
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
            for key in ("td_loss_value", "td_loss_cpc"):
                critic_report[key] = critic_report[key] + report[key]
            for key in ("heldout_after", "control_heldout_after", "td_loss_reference_error", "critics",
                        "heldout_evaluated_campaigns", "head_changes", "drawn_rows", "draws"):
                critic_report[key] = report[key]
            for key in ("control_same_minibatches", "control_targets_jointly_permuted"):
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


def fit_critic_and_actor(world: World, data: dict, generator: torch.Generator):
    """The critic by ``critic_backup``, then the actor on its fused scores: (critic, report, actor, report)."""
    if world.cfg.critic_backup == "policy":
        return fit_policy_iteration(world, data, generator)
    critic, critic_report = fit_critic(world, data, generator)
    actor, actor_report = fit_actor(world, critic, data, generator)
    return critic, critic_report, actor, actor_report


def heldout_campaigns_untrained(world: World, data: dict, critic_report: dict, actor_report: dict) -> bool:
    """``heldout_campaigns_not_trained``: no held-out campaign reached the critic or the actor.

    The held-out set is exactly the last ceil(heldout_fraction x n_campaigns) campaigns
    (recomputed here, and equal to what :func:`heldout_campaigns` names and to the campaigns
    of the held-out log), it is not empty, and the campaigns that the critic's and the
    actor's minibatches drew (recorded by the training functions themselves) are disjoint from it.
    """
    cfg = world.cfg
    count = max(1, math.ceil(cfg.heldout_fraction * cfg.n_campaigns))
    held = set(range(cfg.n_campaigns - count, cfg.n_campaigns))
    named = set(torch.nonzero(heldout_campaigns(world)).flatten().tolist())
    trained = set(critic_report["trained_campaigns"]) | set(actor_report["trained_campaigns"])
    return (bool(held) and named == held and set(torch.unique(data["heldout"].campaign).tolist()) == held
            and not (trained & held))


def reward_regression_update(report: dict, train: Transitions, backup: str = "max_min") -> bool:
    """``actual_reward_regression_update``: the critic learned from the logged rewards themselves.

    The weights moved, the logged rewards and costs vary, the held-out TD loss fell, and,
    the part that needs the real targets, it ended at most ``CONTROL_MARGIN`` times the
    (both heads' output weights must have moved, so a head left out of the loss fails it; the
    control must have drawn the same minibatch rows and its targets be one joint permutation)
    held-out TD loss of the permuted-reward control.  A critic regressed onto zeros, onto
    random labels or onto shuffled rewards cannot beat the control by that margin.
    """
    after, control = sum(report["heldout_after"]), sum(report["control_heldout_after"])
    return (report["parameter_change"] > 0 and min(report["head_changes"]) > 0 and float(train.value_reward.std()) > 0
            and report["control_same_minibatches"] and report["control_targets_jointly_permuted"]
            and float(train.cpc_cost.std()) > 0 and after < sum(report["heldout_before"])
            and after <= CONTROL_MARGIN[backup] * control)


def coverage_ratio(report: dict, rows: int) -> float:
    """Distinct training rows the minibatches drew, over the number uniform draws are expected to reach:
    rows (1 - (1 - 1/rows)^draws).  About 1 for uniform sampling over the whole training set."""
    expected = rows * (1.0 - (1.0 - 1.0 / rows) ** report["draws"])
    return report["drawn_rows"] / expected


def minibatches_cover_training_set(critic_report: dict, actor_report: dict, train: Transitions) -> bool:
    """``minibatches_cover_training_set``: critic and actor minibatches sample the whole training set
    (coverage within 10% of uniform sampling's), not a slice of it."""
    return min(coverage_ratio(critic_report, len(train)), coverage_ratio(actor_report, len(train))) > 0.9


def actor_loss_reference_error(world: World, critic: TwoHeadCritic, data: dict, actor_report: dict) -> float:
    """|first recorded actor loss - a plain-loop recomputation| on the first minibatch.

    From the recorded rows and the logits the actor gave them: the critic's fused scores of
    those rows' *states* (read afresh), standardised row by row (sample std), the Boltzmann
    target softmax(Shat / T), and the cross-entropy mean_a q log pi, averaged over rows.
    """
    first, cfg, lam = actor_report["first_step"], world.cfg, actor_report["lam"]
    if int(first["rows"].max()) >= len(data["train"]):                                    # it drew rows beyond the train log
        return math.inf
    with torch.no_grad():
        qv, qc = critic(data["train"].state[first["rows"]])                              # (B, 9) each
    total = 0.0
    for qv_row, qc_row, z in zip(qv.tolist(), qc.tolist(), first["logits"].tolist()):
        score = [v - lam * c for v, c in zip(qv_row, qc_row)]
        mean = sum(score) / len(score)
        std = math.sqrt(sum((x - mean) ** 2 for x in score) / (len(score) - 1))
        q = [math.exp((x - mean) / (std + 1e-8) / cfg.actor_temperature) for x in score]
        q = [x / sum(q) for x in q]
        top = max(z)
        log_norm = top + math.log(sum(math.exp(x - top) for x in z))
        total -= sum(qa * (za - log_norm) for qa, za in zip(q, z)) / len(z)
    return abs(total / len(first["rows"]) - actor_report["loss"][0])


def market_reference_error(world: World, data: dict) -> float:
    """Largest gap between the campaigns' and market's derived figures and their definitions, recomputed:

        plan_t = sum_{j<=t} a_j / sum_j a_j,   tau = m s / sigmoid(logit),   B = beta (M sum_t a_t) s,
        segments_over_target_fraction = share of logged (day, segment, campaign) with CPC > tau (a plain loop).
    """
    c, cfg = world.campaigns, world.cfg
    traffic = c.traffic.tolist()                                                          # (T, C)
    worst = 0.0
    for i in range(c.budget.shape[0]):
        column = [row[i] for row in traffic]
        total, running = sum(column), 0.0
        for t, a in enumerate(column):
            running += a
            worst = max(worst, abs(running / total - float(c.plan[t, i])))
        s_i, logit = float(c.price_scale[i]), float(c.ctr_logit[i])
        tau = float(c.target_margin[i]) * s_i / (1.0 / (1.0 + math.exp(-logit)))
        budget = float(c.budget_share[i]) * cfg.opportunities_per_step * total * s_i
        worst = max(worst, abs(tau - float(c.target_cpc[i])) / tau, abs(budget - float(c.budget[i])) / budget)
    over = count = 0
    tau_all = c.target_cpc.tolist()
    for log in data["logs"]:
        for row in log.cpc.tolist():
            for i, cpc in enumerate(row):
                over += cpc > tau_all[i]
                count += 1
    return max(worst, abs(over / count - data["segments_over_target_fraction"]))


def logged_action_z(world: World, data: dict) -> float:
    """max_a |count_a - E count_a| / sd over the logged actions, E and sd from the behaviour policy's mu.

    A logger that never takes some action, or takes them with other frequencies than the
    propensities it logs, shows a large z (uniform mu over N = 6144 decisions: sd about 25).
    """
    actions = torch.cat([data["train"].action, data["heldout"].action])                  # (N,)
    states = torch.cat([data["train"].state, data["heldout"].state])
    mu = behaviour_probs(world.cfg)(states)                                               # (N, 9)
    counts = torch.bincount(actions, minlength=N_ACTIONS).to(F64)                        # (9,)
    expected, var = mu.sum(0), (mu * (1 - mu)).sum(0)
    z = (counts - expected) / var.clamp(min=1e-12).sqrt()
    return float(z.abs().max())


# --- Section 6: actor -----------------------------------------------------------------------

def fit_actor(world: World, critic: TwoHeadCritic, data: dict, generator: torch.Generator,
              lam: float | None = None) -> tuple[Actor, dict]:
    """Train the actor on S = Q^v - lam Q^c (``lam`` defaults to ``lambda_cpc``).

    Everything random (initial weights, minibatches) comes from ``generator``, so two
    calls from the same generator state differ only through ``lam``.
    """
    cfg = world.cfg
    lam = cfg.lambda_cpc if lam is None else lam
    start = generator.get_state()
    init_seed = int(torch.randint(2**62, (1,), generator=generator))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(init_seed)                     # initial weights from ``generator``, not the global stream
        actor = Actor(len(FEATURES), cfg.hidden).to(world.device)
    report = train_actor(actor, critic, data["train"], steps=cfg.actor_steps, lr=cfg.actor_lr,
                         lam=lam, batch_size=cfg.actor_batch_size, generator=generator,
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
                  generator_start=start, lam=lam)
    return actor, report


def fusion_diagnostics(world: World, critic: TwoHeadCritic, actor: Actor, actor_report: dict, data: dict,
                       generator: torch.Generator) -> dict:
    """How fusion acts on the held-out states, and whether the actor follows it.

    With S = Q^v - lambda Q^c on held-out states s:
      ``fusion_changes_argmax_fraction``  = mean_s [argmax S(s, .) != argmax Q^v(s, .)]
      ``actor_fused_argmax_agreement``    = mean_s [argmax z(s) == argmax S(s, .)]
      ``fused_score_gain``                = mean_s sum_a (pi_lambda - pi_0)(a|s) S(s, a)
    where pi_0 is a control actor trained on Q^v alone from the same initial generator
    state as the served actor pi_lambda (same weights, same minibatches).  Fusion changed
    what the actor prefers, in the right direction, when the gain is positive.
    """
    cfg = world.cfg
    resume = generator.get_state()
    generator.set_state(actor_report["generator_start"])
    control, _ = fit_actor(world, critic, data, generator, lam=0.0)
    generator.set_state(resume)
    states = data["heldout"].state                                                       # (N, F)
    with torch.no_grad():
        q_value, q_cpc = critic(states)                                                  # (N, 9) each
        fused = fused_scores(q_value, q_cpc, cfg.lambda_cpc)                             # (N, 9)
        logits = actor(states)                                                           # (N, 9)
        pi_lambda, pi_0 = top_k_policy(logits, cfg.top_k), top_k_policy(control(states), cfg.top_k)  # (N, 9)
    gain = ((pi_lambda - pi_0) * fused).sum(-1)                                          # (N,) per state
    return {"fusion_changes_argmax_fraction": float((fused.argmax(-1) != q_value.argmax(-1)).to(F64).mean()),
            "actor_fused_argmax_agreement": float((logits.argmax(-1) == fused.argmax(-1)).to(F64).mean()),
            "fused_score_gain": float(gain.mean()),
            "fused_score_gain_se": float(gain.std() / math.sqrt(gain.numel())) if gain.numel() > 1 else 0.0}


def fusion_changes_preference(world: World, diagnostics: dict) -> bool:
    """``fusion_changes_preference``: on the fixture, and in the data.

    The hand fixture's argmax moves (needs lambda > 0.25), fusion moves the critic's
    argmax on some held-out states, and the served actor scores higher on the fused
    objective than the value-only control actor by more than ``FUSION_GAIN_SE`` standard
    errors of ``fused_score_gain`` (its spread over held-out states), not merely above 0.
    An actor trained on Q^v + lambda Q^c, or on Q^v alone, fails the last part.
    """
    d = diagnostics
    return (fixtures.fusion_fixture(world.cfg.lambda_cpc)["fusion_changes_preference"]
            and d["fusion_changes_argmax_fraction"] > 0
            and d["fused_score_gain"] > FUSION_GAIN_SE * d["fused_score_gain_se"])


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


def draw_eval_days(world: World, generator: torch.Generator) -> list:
    """``eval_days`` fresh days of auctions; every evaluated policy meets the same ones."""
    return [draw_day(world.campaigns, world.cfg.opportunities_per_step, generator) for _ in range(world.cfg.eval_days)]


def simulate_truth(world: World, days: list, policy: Policy, generator: torch.Generator, lam: float) -> dict:
    """A policy run on ``days``: its value reward, CPC overshoot and fused reward, per decision.

        value          = mean_{d,k,c} r^v
        cpc_overshoot  = mean_{d,k,c} max(0, CPC / tau - 1)
        true_value     = mean_{d,k,c} (r^v + lambda (tau - CPC) / tau)

    ``true_value_heldout`` is ``true_value`` over the held-out campaigns only: the
    campaigns whose logged transitions the IPS estimate re-weights, so IPS - truth
    compares like with like.
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
            "true_se": float(per_day.std() / math.sqrt(len(days))) if len(days) > 1 else 0.0,
            "raw": {"value": value, "cpc": cpc, "total_per_campaign": total.mean((0, 1)),
                    "day_hashes": [day_hash(d) for d in days],
                    "states": torch.stack([log.states for log in logs]),                  # (days, K, C, F)
                    "actions": torch.stack([log.actions for log in logs]),                # (days, K, C)
                    "propensity": torch.stack([log.propensity for log in logs])}}         # (days, K, C)


def truth_reference_error(world: World, truth: dict, lam: float) -> float:
    """Largest relative gap between :func:`simulate_truth`'s figures and a recomputation from its raw
    per-(day, segment, campaign) value rewards and CPCs, written out without ``litrepro.rlbp.reward``:

        true_value = mean(r^v + lam (tau - CPC) / tau),   cpc_overshoot = mean(max(0, CPC / tau - 1)),
        value = mean(r^v),   true_value_heldout: the first over the held-out campaigns.
    """
    tau = world.campaigns.target_cpc
    v, cpc = truth["raw"]["value"], truth["raw"]["cpc"]                                  # (days, K, C) each
    fused = v + lam * (tau - cpc) / tau                                                  # (days, K, C)
    held = heldout_campaigns(world)
    ref = {"true_value": fused.mean(), "value": v.mean(), "cpc_overshoot": torch.relu(cpc / tau - 1).mean(),
           "true_value_heldout": fused[:, :, held].mean()}
    return max(abs(truth[k] - float(r)) / max(abs(float(r)), 1e-12) for k, r in ref.items())


def evaluate_policies(world: World, actor: Actor, data: dict, days: list, generator: torch.Generator) -> dict:
    """Ordinary IPS on the held-out log, and each policy's simulated truth on ``days``.

    Both estimate the mean reward per decision r = value + lambda * CPC reduction;
    the truth also reports the value reward alone and the CPC overshoot.
    """
    cfg, heldout = world.cfg, data["heldout"]
    runners = {"learned": learned_policy(actor, cfg.top_k), "behaviour": behaviour_policy(cfg.behaviour_epsilon),
               "fixed_gain": constant_policy(FIXED_GAIN_ACTION)}
    out = {"ips_campaigns": torch.unique(heldout.campaign).tolist(), "ips_rows": len(heldout), "raw": {},
           "truth_reference_error": 0.0}
    for name in POLICIES:
        pi = _target_probs(name, actor, heldout.state, cfg).gather(1, heldout.action[:, None]).squeeze(1)  # (N,)
        truth = simulate_truth(world, days, runners[name], generator, cfg.lambda_cpc)
        out["truth_reference_error"] = max(out["truth_reference_error"],
                                           truth_reference_error(world, truth, cfg.lambda_cpc))
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

def lambda_sweep(world: World, critic: TwoHeadCritic, data: dict, days: list, generator: torch.Generator,
                 lambdas: tuple[float, ...] = LAMBDAS) -> list[dict]:
    """Retrain the actor for each fusion weight and simulate it on ``days``.

    The critic's heads regress r^v and c separately, so they do not depend on lambda;
    only the actor, trained on Q^v - lambda Q^c, is refitted.  Each row holds lambda,
    the policy's value reward and CPC overshoot (lambda-free measures), and its fused
    reward at the run's own ``lambda_cpc``.  Every lambda starts from the same generator
    state, so two lambdas that yield the same actor yield the same row, and the rows
    differ only through lambda.
    """
    rows = []
    start = generator.get_state()
    for lam in lambdas:
        generator.set_state(start)  # common random numbers: each lambda sees the same minibatches and draws
        actor, _ = fit_actor(world, critic, data, generator, lam=lam)
        truth = simulate_truth(world, days, learned_policy(actor, world.cfg.top_k), generator, world.cfg.lambda_cpc)
        truth.pop("raw")
        rows.append({"lambda": lam, "value": truth["value"], "cpc_overshoot": truth["cpc_overshoot"]})
    return rows


# --- Section 9: how much any gain policy could win here --------------------------------------

def headroom(world: World, days: list, generator: torch.Generator) -> dict:
    """The fused truth of each constant action on the evaluation days, and three oracles.

    With T(a, c) the fused reward of campaign c under constant action a, averaged over the
    days' decisions (``simulate_truth``'s ``total_per_campaign``):
      ``constant``          = [mean_c T(a, c) for a in 0..8]
      ``best_constant``     = max_a mean_c T(a, c)                 (one action for all, in hindsight)
      ``best_per_kind``     = mean_c max_a mean_{c' of c's kind} T(a, c')   (knows each campaign's kind)
      ``best_per_campaign`` = mean_c max_a T(a, c)                 (one action per campaign, in hindsight)
    ``fixed_gain`` is T(4, .) averaged.  Constant policies draw nothing from ``generator``.
    ``table`` (9, C) and ``kinds`` (C,) are kept for :func:`headroom_reference_error`, not for the results.
    """
    per = torch.stack([simulate_truth(world, days, constant_policy(a), generator, world.cfg.lambda_cpc)
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
            "best_per_kind": float(by_kind.mean()), "best_per_campaign": float(per.max(0).values.mean())}


# --- Results in the seed file's vocabulary --------------------------------------------------

def ips_weights_error(world: World, actor: Actor, data: dict, evaluation: dict) -> float:
    """max |pi(a_i | s_i) IPS used - pi recomputed| for the learned policy on the held-out log.

    The recomputation reads the held-out *states* and actions afresh and renormalises the
    k largest logits of each row itself (a sort, not ``top_k_policy``).
    """
    held = data["heldout"]
    with torch.no_grad():
        logits = actor(held.state)                                                        # (N, 9)
    top = logits.sort(-1, descending=True).values[:, :world.cfg.top_k]                    # (N, k)
    chosen = logits.gather(1, held.action[:, None]).squeeze(1)                            # (N,)
    in_top = chosen >= top[:, -1]
    pi = torch.where(in_top, torch.exp(chosen - top.logsumexp(-1)), 0.0)                  # (N,)
    used = evaluation["ips_learned_weights_probs"]
    if used.shape != pi.shape:                                                            # IPS read another log
        return math.inf
    return float((used - pi).abs().max())


def served_policy_simulated(world: World, actor: Actor, evaluation: dict) -> dict:
    """Is the learned policy whose truth was simulated the one that is served (and that IPS weights)?

    From the truth logs' states, the served top-k probabilities are recomputed by sorting the
    logits; every logged propensity must equal the recomputed probability of its action
    (``served_propensity_error``), and the actions' counts must match the counts those
    probabilities predict (largest |z|, ``served_action_z``), so a policy that samples from the
    full softmax, or takes its argmax, shows.
    """
    raw = evaluation["raw"]["learned"]
    states = raw["states"].reshape(-1, raw["states"].shape[-1])                            # (D K C, F)
    actions, prop = raw["actions"].reshape(-1), raw["propensity"].reshape(-1)              # (D K C,)
    with torch.no_grad():
        logits = actor(states)                                                            # (n, 9)
    top = logits.sort(-1, descending=True).values[:, :world.cfg.top_k]                    # (n, k)
    probs = torch.where(logits >= top[:, -1:], torch.exp(logits - top.logsumexp(-1, keepdim=True)), 0.0)  # (n, 9)
    error = float((probs.gather(1, actions[:, None]).squeeze(1) - prop).abs().max())
    counts = torch.bincount(actions, minlength=N_ACTIONS).to(F64)
    var = (probs * (1 - probs)).sum(0)
    z = ((counts - probs.sum(0)) / var.clamp(min=1e-12).sqrt())[var > 1e-9]
    return {"served_propensity_error": error, "served_action_z": float(z.abs().max()) if z.numel() else 0.0}


def draws_report(world: World, data: dict) -> dict:
    """``auction_draws_match_their_distribution``: the logged days' auctions follow the simulator's model.

    log(p / s_c) and logit(q) - logit_c must have mean 0 and standard deviation 0.5, and the
    share of live opportunities must be the mean traffic (about 200,000 draws a day: a
    standard error near 0.001; the tolerance is 0.01).
    """
    c = world.campaigns
    worst = 0.0
    for d in data["draws"]:
        log_price = torch.log(d.price / c.price_scale[None, :, None])                     # (T, C, M)
        logit = torch.logit(d.click_prob) - c.ctr_logit[None, :, None]                      # (T, C, M)
        for x in (log_price, logit):
            worst = max(worst, abs(float(x.mean())), abs(float(x.std()) - 0.5))
        live = d.live.to(F64).mean(-1)                                                      # (T, C)
        worst = max(worst, abs(float(live.mean() - c.traffic.mean())))
    return {"draws_moment_error": worst}


def truth_days_match(evaluation: dict, days_report: dict) -> bool:
    """The days each policy's truth was simulated on (hashed where they were used) are the evaluation days."""
    return all(raw["day_hashes"] == days_report["eval_day_hashes"] for raw in evaluation["raw"].values())


def headroom_reference_error(room: dict, evaluation: dict) -> float:
    """The oracles recomputed with plain loops over the (9, C) table, and the table's fixed-gain row against
    the fixed-gain truth of the evaluation (same days, same lambda): the largest gap."""
    table = room["table"].tolist()                                                        # 9 rows of C
    kinds = room["kinds"]
    n = len(table[0])
    best_campaign = sum(max(table[a][c] for a in range(9)) for c in range(n)) / n
    means = [sum(row) / n for row in table]
    per_kind = 0.0
    for k in sorted(set(kinds)):
        members = [c for c in range(n) if kinds[c] == k]
        per_kind += len(members) * max(sum(table[a][c] for c in members) / len(members) for a in range(9))
    per_kind /= n
    gaps = [abs(max(means) - room["best_constant"]), abs(per_kind - room["best_per_kind"]),
            abs(best_campaign - room["best_per_campaign"]), abs(means[FIXED_GAIN_ACTION] - room["fixed_gain"]),
            abs(room["fixed_gain"] - evaluation["fixed_gain"]["true_value"])]
    return max(gaps)


def eval_days_report(data: dict, days: list, demo_days: list | None = None) -> dict:
    """``evaluation_days_fresh``: the evaluation days are none of the days seen before them.

    Each day is identified by :func:`day_hash` of its draws; the evaluation days must be
    distinct from each other, from the logged days and from the PID demo's day.  Their
    hashes go into the results, so a study can check that they change with the seed.
    """
    logged = {day_hash(d) for d in data["draws"]} | {day_hash(d) for d in (demo_days or [])}
    evaluation = [day_hash(d) for d in days]
    return {"eval_day_hashes": evaluation,
            "evaluation_days_fresh": len(set(evaluation)) == len(evaluation) and not (set(evaluation) & logged)}


def evaluation_on_heldout(world: World, data: dict, critic_report: dict, evaluation: dict) -> bool:
    """``evaluation_on_heldout_campaigns``: IPS and the held-out TD loss read exactly the held-out campaigns.

    The campaigns of the batch IPS re-weighted and of the batch the held-out TD losses were
    measured on (each recorded where it is used) equal :func:`heldout_campaigns`, and IPS
    read every held-out transition.
    """
    held = torch.nonzero(heldout_campaigns(world)).flatten().tolist()
    return (evaluation["ips_campaigns"] == held and evaluation["ips_rows"] == len(data["heldout"])
            and critic_report["heldout_evaluated_campaigns"] == held)


def stage_audit(world: World, critic: TwoHeadCritic, actor: Actor, data: dict, critic_report: dict,
                actor_report: dict, evaluation: dict, days_report: dict, room: dict | None) -> dict:
    """The recomputations that guard the stages between the logged data and the reported figures
    (each function's docstring says what it recomputes); gaps and ratios, named as in the results."""
    out = {"actor_loss_reference_error": actor_loss_reference_error(world, critic, data, actor_report),
           "market_reference_error": market_reference_error(world, data),
           "logged_action_z": logged_action_z(world, data),
           "ips_weights_error": ips_weights_error(world, actor, data, evaluation),
           "truth_days_are_evaluation_days": truth_days_match(evaluation, days_report),
           **served_policy_simulated(world, actor, evaluation), **draws_report(world, data),
           "critic_coverage": coverage_ratio(critic_report, len(data["train"])),
           "actor_coverage": coverage_ratio(actor_report, len(data["train"]))}
    if room is not None:
        out["headroom_reference_error"] = headroom_reference_error(room, evaluation)
    return out


def collect_results(world: World, *, critic_report: dict, actor_report: dict, data: dict, evaluation: dict,
                    fusion: dict, sweep: list[dict], derivative_error: float, guard, execution: tuple[str, str],
                    fingerprint: str, days_report: dict, transitions: dict, auction_error: float,
                    audit: dict, headroom_report: dict | None = None) -> dict:
    """Metrics and checks named as in the seed file, plus curves and beyond-seed figures.

    ``extra_checks`` are ours, one per pipeline stage the seed's checks do not reach
    (the notebook introduces each where its stage is).
    """
    cfg = world.cfg
    backup = fixtures.backup_fixture(cfg.gamma)
    row_mass = max(actor_report["policy_row_mass_error"], evaluation["served_row_mass_error"])
    metrics = {
        "td_loss_before": sum(critic_report["heldout_before"]),
        "td_loss_after": sum(critic_report["heldout_after"]),
        "actor_gradient_norm": actor_report["gradient_norms"][0],
        "max_min_backup_error": backup["max_min_backup_error"],
        "wrong_cpc_max_backup_gap": backup["wrong_cpc_max_backup_gap"],
        "policy_row_mass_error": row_mass,
        "derivative_gain_error": derivative_error,
        "ips_reference_error": evaluation["ips_reference_error"],
        "pretrained_model_calls": guard.pretrained_model_calls,
    }
    checks = {
        "actual_reward_regression_update": reward_regression_update(critic_report, data["train"], cfg.critic_backup),
        "CPC_reduction_retains_negative_sign": cpc_sign_retained(world, data),
        "opposite_backup_directions": backup["opposite_backup_directions"]
        and critic_report["td_loss_reference_error"] < TD_REFERENCE_RTOL,
        "fusion_changes_preference": fusion_changes_preference(world, fusion),
        "exact_top_k_support": actor_report["exact_top_k_support"] and evaluation["served_top_k_exact"]
        and row_mass < 1e-12,
        "nine_bounded_PID_actions": bounded_actions_applied(world, data["logs"]),
        "ordinary_IPS_not_self_normalized": fixtures.ips_fixture()["ordinary_IPS_not_self_normalized"]
        and evaluation["ips_reference_error"] < EXACT and evaluation["propensity_error"] < 1e-12,
        "no_live_bidder_or_model_calls": guard.clean,
    }
    beyond = {f"{name}_{key}": evaluation[name][key] for name in POLICIES
              for key in ("ips", "ips_se", "true_value", "true_value_heldout", "true_se", "value", "cpc_overshoot")}
    beyond.update(td_loss_value_before=critic_report["heldout_before"][0], td_loss_cpc_before=critic_report["heldout_before"][1],
                  td_loss_value_after=critic_report["heldout_after"][0], td_loss_cpc_after=critic_report["heldout_after"][1],
                  control_td_loss_after=sum(critic_report["control_heldout_after"]),
                  control_ratio=sum(critic_report["heldout_after"]) / sum(critic_report["control_heldout_after"]),
                  segments_over_target_fraction=data["segments_over_target_fraction"],
                  fusion_changes_argmax_fraction=fusion["fusion_changes_argmax_fraction"],
                  actor_fused_argmax_agreement=fusion["actor_fused_argmax_agreement"],
                  fused_score_gain=fusion["fused_score_gain"], fused_score_gain_se=fusion["fused_score_gain_se"],
                  negligible_last_action_fraction=actor_report["negligible_last_action_fraction"],
                  controller_replay_error=controller_replay_error(world, data["logs"]),
                  action_label_error=action_label_error(world),
                  propensity_error=evaluation["propensity_error"],
                  td_loss_reference_error=critic_report["td_loss_reference_error"],
                  target_lag_error=critic_report["target_lag_error"],
                  truth_reference_error=evaluation["truth_reference_error"],
                  auction_replay_error=auction_error,
                  **{k: v for k, v in audit.items() if not isinstance(v, bool)},
                  **{k: v for k, v in transitions.items() if k != "transitions_consistent"},
                  network_calls=guard.network_calls)
    extra_checks = {
        "heldout_campaigns_not_trained": heldout_campaigns_untrained(world, data, critic_report, actor_report),
        "transitions_consistent": transitions["transitions_consistent"],
        "auction_replay_matches": auction_error < EXACT,
        "target_network_synced_on_schedule": critic_report["target_lag_error"] == 0.0,
        "evaluation_on_heldout_campaigns": evaluation_on_heldout(world, data, critic_report, evaluation),
        "evaluation_days_fresh": days_report["evaluation_days_fresh"] and audit["truth_days_are_evaluation_days"],
        "truth_scored_with_run_lambda": evaluation["truth_reference_error"] < EXACT,
        "market_matches_its_definition": audit["market_reference_error"] < EXACT,
        "logged_actions_follow_mu": audit["logged_action_z"] < 5.0,
        "minibatches_cover_training_set": min(audit["critic_coverage"], audit["actor_coverage"]) > 0.9,
        "actor_trained_on_fused_scores": audit["actor_loss_reference_error"] < EXACT,
        "ips_weights_are_served_policy": audit["ips_weights_error"] < 1e-12,
        "truth_simulates_served_policy": audit["served_propensity_error"] < 1e-12 and audit["served_action_z"] < 5.0,
        "auction_draws_match_their_distribution": audit["draws_moment_error"] < 0.01,
    }
    if "headroom_reference_error" in audit:
        extra_checks["headroom_matches_reference"] = audit["headroom_reference_error"] < EXACT
    out = {"method": "pinterest_rlbp", "seed": cfg.seed, "metrics": metrics, "checks": checks,
           "extra_checks": extra_checks, "beyond_seed_metrics": beyond, "lambda_sweep": sweep,
           "eval_day_hashes": days_report["eval_day_hashes"],
           "curves": {"td_loss_value": critic_report["td_loss_value"], "td_loss_cpc": critic_report["td_loss_cpc"],
                      "actor_loss": actor_report["loss"], "mean_action_probs": actor_report["mean_action_probs"]},
           "execution_device": execution[0], "execution_accelerator": execution[1],
           "dataset_fingerprint": fingerprint}
    if headroom_report is not None:
        out["headroom"] = {k: v for k, v in headroom_report.items() if k not in ("table", "kinds")}
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
    actor and is evaluated from the same generator state, so the arms share seeds, data,
    evaluation days and random draws, and differ only through the backup.  Returns
    ``{backup: results}``; the results of ``cfg.critic_backup`` are exactly the notebook's.
    """
    from litrepro.guard import OfflineGuard
    from litrepro.seeding import describe_device, seed_everything

    backups = backups or (cfg.critic_backup,)
    generator = seed_everything(cfg.seed)
    device = torch.device(device)
    out = {}
    with OfflineGuard() as guard:
        world = build_world(cfg, generator, device)
        demo = pid_demo(world, generator, actions=(0, 8))
        derivative_error = derivative_gain_error(demo["logs"][8], cfg.kd, cfg.steps_per_day)
        data = collect_logged_data(world, generator)
        transitions = transitions_report(world, data)
        auction_error = auction_replay_error(world, data)
        days = draw_eval_days(world, generator)
        days_report = eval_days_report(data, days, [demo["draws"]])
        room = headroom(world, days, generator) if with_headroom else None
        start = generator.get_state()
        for kind in backups:
            generator.set_state(start)                 # common random numbers across the arms
            arm = dataclasses.replace(world, cfg=dataclasses.replace(cfg, critic_backup=kind))
            critic, critic_report, actor, actor_report = fit_critic_and_actor(arm, data, generator)
            fusion = fusion_diagnostics(arm, critic, actor, actor_report, data, generator)
            evaluation = evaluate_policies(arm, actor, data, days, generator)
            rows = lambda_sweep(arm, critic, data, days, generator) if sweep and kind == cfg.critic_backup else []
            audit = stage_audit(arm, critic, actor, data, critic_report, actor_report, evaluation, days_report, room)
            out[kind] = (arm, critic_report, actor_report, evaluation, fusion, rows, audit)
    return {kind: collect_results(arm, critic_report=cr, actor_report=ar, data=data, evaluation=ev, fusion=fu,
                                  sweep=rows, derivative_error=derivative_error, guard=guard,
                                  execution=describe_device(device),
                                  fingerprint=dataset_fingerprint(arm.cfg, data), days_report=days_report,
                                  transitions=transitions, auction_error=auction_error, audit=audit, headroom_report=room)
            for kind, (arm, cr, ar, ev, fu, rows, audit) in out.items()}


def run(cfg: RLBPConfig, device: torch.device | str = "cpu", *, sweep: bool = True) -> dict:
    """The seed's results, as the notebook computes them (:func:`run_arms` with the configured backup).

    For tests, the fault suite and scripts; the notebook calls the same functions cell by cell.
    """
    return run_arms(cfg, device, sweep=sweep)[cfg.critic_backup]
