"""Why the learned bidder trails the fixed gain at our default budget (600 critic steps; the seed file records none): arms that change the critic's training.

On 20 seeds the learned ``max_min`` policy at 600 critic steps trails the fixed gain
(action 4) while the constant action 8 (both gains doubled) beats it (``backup_study.json``).
Each arm here changes how the critic or the actor is trained and keeps everything else:
the same world, logged data, evaluation days and random draws as ``max_min`` (every arm
takes the same named random streams, :mod:`litrepro.rlbp.streams`, as the backups of
:func:`litrepro.rlbp.experiment.run_arms` do), the same evaluation and the same checks.
Some arms change one thing; ``truth_target``, ``monte_carlo``, ``oracle_bootstrap`` and
``gamma_0`` change several at once, and the findings say so (:data:`CAUSES`,
:data:`ABLATIONS`).  **Every arm is our reconstruction**; none is in the seed file.

* ``placebo``: max_min with the critic's initial weights and minibatch order drawn from
  other streams (``critic_init/placebo``, ``critic_minibatches/placebo``); nothing else
  changes.  It measures how far a retraining moves the policy with no change at all, the
  yardstick for every other arm.
* ``expected_sarsa``: y = r + gamma (1 - d) sum_a' mu(a'|s') Qbar(s', a') on both heads (the
  ``policy`` backup with one round, whose next-state policy is the logging policy mu):
  bootstrapping and the target network as max_min, without the max/min operator.
* *The per-segment reward against the day.*  For every logged state
  s_k = (day d, segment k, campaign c) and every action a, the simulator replays the
  logged day on its own auction draws with the logged actions before k and action a
  from segment k to the end of the day (:func:`counterfactuals`):

      r_k(s, a)  = fused reward of segment k                         (the one-segment reward)
      T(s, a)    = sum_{j = k}^{K-1} fused reward of segment j        (the day-level truth)

  ``reward_alignment`` reports how often argmax_a r_k = argmax_a T.  Arm
  ``truth_target`` regresses the critic (both heads, on the logged (s, a) only, as TD
  does) onto T's value and CPC parts, with no bootstrapping.
* *Bootstrapping.*  ``monte_carlo``: the logged discounted return
  G_k = sum_{j >= k} gamma^{j-k} r_j (gamma = 0.9, no bootstrap).  ``oracle_bootstrap``:
  y = r_k + gamma (1 - d) max_a' G*(s_{k+1}, a') for the value head (min for the CPC head),
  where G*(s', a') is the simulator's discounted return of taking a' from s' to the end of
  the day (the best *constant* continuation, our choice).  ``sync_1`` and ``sync_100``: the
  target network copied every step or every 100 steps instead of 50.
* *The discount.*  ``gamma_0`` and ``gamma_0.5`` under the seed's max/min backup
  (``max_min`` itself is gamma = 0.9).  With gamma = 0 the max/min targets are the
  rewards exactly (y = r + 0 max Q = r), which is the ``none`` backup; the arm runs as
  ``none`` so that its regression check uses that backup's margin.
* *The budget and the actor.*  ``steps_3000`` (5x the critic's steps; the budget study,
  :mod:`litrepro.studies.rlbp_budget`, varies it fully), ``top_1`` and ``temperature_1``.

Per arm the critic is also compared directly with the counterfactual replays
(:func:`critic_diagnostics`): the rank correlation, per held-out logged state, between its
fused scores and the simulator's discounted value of holding each action to the end of the
day, and its per-action bias against that value.

No arm is dropped by an outcome check (:data:`OUTCOME_CHECKS`): a seed on which one fails
is flagged, and the arm gets its interval with and without the flagged seeds.  A failed
integrity check (a replay, a setting, a stream) refuses the study (:class:`StudyRefused`).

The study (``python -m litrepro study rlbp-diagnosis``, ``make rlbp-diagnosis``) pairs every arm by seed
with the fixed gain and with ``max_min`` (paired 95% t intervals), gives the one-factor
ablation table (:data:`ABLATIONS`) with Holm-adjusted intervals beside the raw ones
(:mod:`litrepro.holm`), reports each arm's action distribution on the evaluation days and
its share of the best constant action's headroom, and recomputes every interval by a plain
loop (:func:`check_intervals`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from torch import Tensor

from litrepro.paths import RENDERED, ROOT
from litrepro.rlbp.streams import Streams

F64 = torch.float64
PATH = RENDERED / "pinterest_rlbp" / "diagnosis.json"
PLOT = PATH.with_suffix(".png")
BEST_CONSTANT = 8
#: arm -> (what it changes, config changes, target kind).  Target kinds: ``td`` (the pipeline's own
#: TD regression), ``truth`` / ``monte_carlo`` / ``oracle`` (regression onto the targets of
#: :func:`regression_targets`, run as the ``none`` backup: y = the stored target, no bootstrap).
ARMS: dict[str, tuple[str, dict, str]] = {
    "max_min": ("the seed's TD backup, gamma 0.9, target synced every 50 steps", {}, "td"),
    "placebo": ("max_min with the critic reseeded: another initialisation and minibatch order, nothing else",
                {}, "placebo"),
    "expected_sarsa": ("expected-SARSA under mu: max_min's bootstrapping and target network, the mean under the "
                       "logging policy instead of max/min", {"critic_backup": "policy", "policy_rounds": 1}, "td"),
    "truth_target": ("critic regressed onto the day-level truth of the logged action", {}, "truth"),
    "monte_carlo": ("Monte-Carlo return at gamma 0.9, no bootstrap", {}, "monte_carlo"),
    "oracle_bootstrap": ("one-step reward plus gamma times the simulator's best constant continuation", {}, "oracle"),
    "sync_1": ("target network copied every step", {"target_update_every": 1}, "td"),
    "sync_100": ("target network copied every 100 steps", {"target_update_every": 100}, "td"),
    "gamma_0": ("gamma 0 (max/min targets are the rewards: the none backup)", {"gamma": 0.0, "critic_backup": "none"}, "td"),
    "gamma_0.5": ("gamma 0.5 under the max/min backup", {"gamma": 0.5}, "td"),
    "steps_3000": ("max_min with 3000 critic steps instead of 600", {"critic_steps": 3000}, "td"),
    "top_1": ("the actor's support k = 1 instead of 3", {"top_k": 1}, "td"),
    "temperature_1": ("the actor's Boltzmann temperature 1.0 instead of 0.25", {"actor_temperature": 1.0}, "td"),
}
#: The arms that change several things at once (the findings and the README say so).
SEVERAL = ("truth_target", "monte_carlo", "oracle_bootstrap", "gamma_0")
#: Checks that judge how well a stage did (an outcome), not whether it computed what it claims (integrity).
#: A seed on which one fails is flagged and reported, with the arm's interval with and without it; an
#: integrity check that fails refuses the study (issue 28: an outcome check must not remove an arm).
OUTCOME_CHECKS = ("fusion_changes_preference", "actual_reward_regression_update")
#: The critic streams the placebo arm takes afresh (under ``<name>/placebo``); every other stream is max_min's.
RESEEDED = ("critic_init", "critic_minibatches")
#: The ablation table: one factor per row, (factor, arm a, arm b, what else differs between a and b).
ABLATIONS = (
    ("placebo: reseeded critic (no change)", "placebo", "max_min", ""),
    ("operator: expectation under mu instead of max/min", "expected_sarsa", "max_min", ""),
    ("bootstrap: Monte-Carlo return instead of a bootstrapped target", "monte_carlo", "expected_sarsa",
     "monte_carlo has no target network (nothing to bootstrap from)"),
    ("continuation: best constant (oracle) instead of mu (Monte-Carlo)", "oracle_bootstrap", "monte_carlo",
     "oracle_bootstrap takes the simulator's returns, which the logged data do not contain"),
    ("budget: 3000 critic steps instead of 600", "steps_3000", "max_min", ""),
    ("sync: target copied every step instead of every 50", "sync_1", "max_min", ""),
    ("sync: target copied every 100 steps instead of every 50", "sync_100", "max_min", ""),
    ("discount: gamma 0.5 instead of 0.9", "gamma_0.5", "max_min", ""),
    ("actor: top-1 support instead of top-3", "top_1", "max_min", ""),
    ("actor: temperature 1.0 instead of 0.25", "temperature_1", "max_min", ""),
)
#: ``actual_reward_regression_update`` compares the held-out TD loss with a permuted-reward control's, within a
#: margin per backup (``audit.CONTROL_MARGIN``: 0.4 for max_min at gamma 0.9, 0.7 without bootstrapping,
#: both set from the clean ratios' spread).  The clean ratio rises as gamma falls (``control_ratio`` in ``backup_study.json``, max_min against none),
#: so an arm at gamma 0.5 is judged with the no-bootstrap margin; ``tests/test_rlbp_diagnosis.py`` keeps that
#: margin above its measured clean spread (max + 4 sd), as the backup study's test does for the others.
MARGIN_OF = {"gamma_0.5": "none"}
#: Arms whose clean control ratios, over seeds 42-61, come closer to their (the pipeline's max_min) margin than
#: the backup study asks of a backup (max + 4 sd below it): the placebo, sync_1 and sync_100 against 0.4 (their
#: ratios are per seed and arm in ``diagnosis.json``).  Every seed passed; a margin this thin could refuse
#: another seed set.  Named here so that ``tests/test_rlbp_diagnosis.py`` notices when the set changes.
THIN_MARGIN_ARMS = ("placebo", "sync_1", "sync_100")
#: The candidate causes, each with the arms that remove it (:func:`findings` reads them from here).
CAUSES = {
    # key: (what the arms change, the arms, what else those arms change: a confounded arm supports only the combination)
    "bootstrap": ("bootstrapping from the learned critic's next-state values", ("monte_carlo",),
                  "monte_carlo also drops the max/min operator and the target network, and regresses on the behaviour "
                  "policy's logged return"),
    "target_network": ("the target network's sync period", ("sync_1", "sync_100"), ""),
    "discount": ("the discount gamma = 0.9", ("gamma_0", "gamma_0.5"),
                 "gamma_0 also removes bootstrapping (its targets are the rewards)"),
    "operator": ("the max/min operator (expected-SARSA under mu keeps bootstrapping and the target network)",
                 ("expected_sarsa",), ""),
    "budget": ("the critic's budget (600 to 3000 steps)", ("steps_3000",), ""),
    "actor": ("the actor's support or temperature", ("top_1", "temperature_1"), ""),
}
#: Explanations no arm here tests (named so that no sentence claims them).
UNTESTED = ("other critic architectures or state features than the pipeline's",
            "other behaviour policies, or more logged days for the arms other than max_min, none (the gamma_0 arm) and "
            "expected_sarsa (the backup study varies the days for max_min and none; the budget study's data-scaling "
            "rows run max_min and expected_sarsa at more days)")


class StudyRefused(ValueError):
    """A seed's checks failed, the arms are not paired, or an interval does not recompute: nothing is written."""


# --- Counterfactual replays of the logged days ------------------------------------------------------

def _tile_campaigns(c, reps: int):
    """The campaigns repeated ``reps`` times along the campaign axis (copy r holds campaigns r*C .. r*C + C - 1)."""
    out = {}
    for f in dataclasses.fields(c):
        x = getattr(c, f.name)
        out[f.name] = x.repeat(reps) if x.dim() == 1 else x.repeat(1, reps)       # (R C,) or (T, R C)
    return type(c)(**out)


def _tile_draws(d, reps: int):
    return type(d)(*(x.repeat(1, reps, 1) for x in (d.price, d.click_prob, d.live)))  # (T, R C, M)


def switch_policy(logged: Tensor, switch: Tensor, action: Tensor):
    """A replay policy: tiled campaign i takes its logged action before segment ``switch[i]`` and ``action[i]`` from it.

    ``logged`` (K, R C) the logged actions of each copy's campaign; ``switch``, ``action`` (R C,).
    Draws nothing from the generator.
    """
    calls = {"k": 0}

    def policy(state: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        k = calls["k"]
        calls["k"] += 1
        chosen = torch.where(switch <= k, action, logged[k])                          # (R C,)
        return chosen.to(state.device), torch.ones(state.shape[0], dtype=F64, device=state.device)
    return policy


def counterfactuals(world, data: Mapping[str, Any], lam: float) -> dict[str, Tensor]:
    """Replay every logged day with every (switch segment k, action a) on the day's own auction draws.

    Returns, each (D, K, 9, K, C) indexed [day, switch k, action a, segment j, campaign]:
    ``value`` r^v_j and ``cost`` c_j, and ``fused`` r^v_j - lam c_j, the segment rewards of the
    day in which the campaign followed its logged actions before k and took a from k on; and
    ``states`` (D, K, 9, C, F), the decision state at segment k of each replay (which must be
    the logged state: segments before k replay the log); and ``action_error`` (D,), the largest
    gap between the gains (Kp, Ki) each replay applied at every step and the grid's gains of the
    action it should take there (logged before k, a from k on).  All campaigns and all (k, a) of
    a day go through the simulator at once (9 K copies of the campaigns).
    """
    from litrepro.rlbp.pid import N_ACTIONS
    from litrepro.rlbp.reward import cpc_cost
    from litrepro.rlbp.simulator import simulate_day

    c, s = world.campaigns, world.settings
    k_seg, n = s.segments, c.budget.shape[0]
    reps = k_seg * N_ACTIONS
    tiled = _tile_campaigns(c, reps)
    switch = torch.arange(k_seg).repeat_interleave(N_ACTIONS * n).to(c.budget.device)            # (R C,)
    action = torch.arange(N_ACTIONS).repeat_interleave(n).repeat(k_seg).to(c.budget.device)      # (R C,)
    out = {"value": [], "cost": [], "fused": [], "states": [], "action_error": []}
    seg_len = c.traffic.shape[0] // k_seg
    for log, draws in zip(data["logs"], data["draws"]):
        logged = log.actions.repeat(1, reps)                                                      # (K, R C)
        replay = simulate_day(tiled, _tile_draws(draws, reps), switch_policy(logged, switch, action), s,
                              torch.Generator())
        shape = (k_seg, k_seg, N_ACTIONS, n)                                                      # (j, k, a, C)
        value = replay.value_reward.reshape(shape).permute(1, 2, 0, 3)                           # (k, a, j, C)
        cost = cpc_cost(replay.cpc, tiled.target_cpc).reshape(shape).permute(1, 2, 0, 3)
        states = replay.states.reshape(k_seg, k_seg, N_ACTIONS, n, -1)                           # (j, k, a, C, F)
        diag = torch.arange(k_seg)
        out["value"].append(value)
        out["cost"].append(cost)
        out["fused"].append(value - lam * cost)
        out["states"].append(states[diag, diag])                                                 # (k, a, C, F) at j = k
        seg_of_step = torch.arange(c.traffic.shape[0]) // seg_len                                # (T,)
        wanted = torch.where(seg_of_step[:, None] >= switch[None, :], action[None, :],
                             logged[seg_of_step])                                                 # (T, R C)
        out["action_error"].append(torch.stack([(replay.kp - s.kp[wanted]).abs().max(),
                                                (replay.ki - s.ki[wanted]).abs().max()]).max())
    return {k: torch.stack(v) for k, v in out.items()}


def discounted_from(x: Tensor, gamma: float) -> Tensor:
    """sum_{j >= k} gamma^{j - k} x[..., k, j, :] for each switch k: x (D, K, 9, K, C) -> (D, K, 9, C).

    Segments before k contribute nothing (they are the log's, not the action's).
    """
    k_seg = x.shape[1]
    j = torch.arange(k_seg, dtype=F64)
    k = torch.arange(k_seg, dtype=F64)
    weight = torch.where(j[None] >= k[:, None], gamma ** (j[None] - k[:, None]).clamp(min=0), 0.0)   # (k, j)
    return (x * weight[None, :, None, :, None]).sum(3)


def alignment(cf: Mapping[str, Tensor], logged_actions: Tensor) -> dict[str, float]:
    """How the one-segment reward r_k(s, .) ranks the nine actions against the day-level truth T(s, .).

    Over every logged state (D, K, C): ``agreement`` = share with argmax_a r_k = argmax_a T;
    ``segment_best_is_8`` and ``day_best_is_8`` = share whose best action is 8 under each;
    ``segment_regret_of_day_best`` = mean of max_a r_k - r_k(argmax T), what a one-segment
    learner gives up by choosing the day's best.  ``logged_actions`` (D, K, C).
    """
    d, k_seg = cf["fused"].shape[:2]
    idx = torch.arange(k_seg)
    segment = cf["fused"][:, idx, :, idx].permute(1, 0, 2, 3)                  # (D, K, 9, C): r_k(a) at j = k
    day = discounted_from(cf["fused"], 1.0)                                     # (D, K, 9, C)
    seg_best, day_best = segment.argmax(2), day.argmax(2)                       # (D, K, C)
    regret = segment.max(2).values - segment.gather(2, day_best[:, :, None]).squeeze(2)
    return {"agreement": float((seg_best == day_best).to(F64).mean()),
            "segment_best_is_8": float((seg_best == BEST_CONSTANT).to(F64).mean()),
            "day_best_is_8": float((day_best == BEST_CONSTANT).to(F64).mean()),
            "segment_regret_of_day_best": float(regret.mean())}


def alignment_reference(cf: Mapping[str, Tensor], d: int, k: int, c: int) -> tuple[int, int]:
    """(argmax_a r_k, argmax_a T) for one logged state, written out with plain loops (for :func:`replay_checks`)."""
    fused = cf["fused"]
    seg = [float(fused[d, k, a, k, c]) for a in range(fused.shape[2])]
    day = [sum(float(fused[d, k, a, j, c]) for j in range(k, fused.shape[3])) for a in range(fused.shape[2])]
    return max(range(len(seg)), key=lambda a: (seg[a], -a)), max(range(len(day)), key=lambda a: (day[a], -a))


def replay_checks(cf: Mapping[str, Tensor], data: Mapping[str, Any], lam: float) -> dict[str, Any]:
    """The counterfactual replays are the logged days where they must be.

    ``counterfactual_state_error``: max |state at segment k of every (k, a) replay - logged state k|
    (segments before k replay the logged actions on the same draws, so they are equal).
    ``counterfactual_reward_error``: max |r_k(logged a_k) - logged fused reward of segment k| (the replay
    that switches to the logged action at k is the log up to the end of segment k).
    ``counterfactual_action_error``: max gap between the gains each replay applied and its actions'
    (:func:`counterfactuals`), so a replay that switches a segment late or to another action shows.
    ``alignment_reference_agrees``: the vectorised argmaxes equal :func:`alignment_reference`'s on a
    few states.
    """
    from litrepro.rlbp.reward import total_reward

    state_err, reward_err = 0.0, 0.0
    for day, log in enumerate(data["logs"]):
        states = cf["states"][day]                                                  # (K, 9, C, F)
        state_err = max(state_err, float((states - log.states[:, None]).abs().max()))
        k_seg = log.actions.shape[0]
        logged_fused = total_reward(log.value_reward, log.cpc, data["target_cpc"], lam)   # (K, C)
        idx = torch.arange(k_seg)
        own = cf["fused"][day, idx, :, idx]                                         # (K, 9, C) at j = k
        got = own.gather(1, log.actions[:, None, :]).squeeze(1)                     # (K, C)
        reward_err = max(reward_err, float((got - logged_fused).abs().max()))
    d, k_seg, _, _, n = cf["fused"].shape
    segment = cf["fused"][:, torch.arange(k_seg), :, torch.arange(k_seg)].permute(1, 0, 2, 3)
    day = discounted_from(cf["fused"], 1.0)
    agrees = True
    for dd, kk, cc in ((0, 0, 0), (d - 1, k_seg - 1, n - 1), (d // 2, k_seg // 2, n // 2)):
        ref = alignment_reference(cf, dd, kk, cc)
        agrees &= ref == (int(segment[dd, kk, :, cc].argmax()), int(day[dd, kk, :, cc].argmax()))
    return {"counterfactual_state_error": state_err, "counterfactual_reward_error": reward_err,
            "counterfactual_action_error": float(cf["action_error"].max()),
            "alignment_reference_agrees": bool(agrees)}


# --- Regression targets of the arms that replace the TD target ---------------------------------------

def regression_targets(kind: str, cf: Mapping[str, Tensor], data: Mapping[str, Any], gamma: float) -> tuple[Tensor, Tensor]:
    """(value target, CPC target) for every logged (day, segment, campaign), each (D, K, C).

    ``truth``:        sum_{j >= k} r^v_j and sum_{j >= k} c_j of the replay that takes the logged a_k from k on.
    ``monte_carlo``:  sum_{j >= k} gamma^{j-k} r^v_j and c_j along the logged day (the logged actions).
    ``oracle``:       r^v_k + gamma (1 - d_k) max_a' G^v(s_{k+1}, a'),  c_k + gamma (1 - d_k) min_a' G^c(s_{k+1}, a'),
                      G(s_{k+1}, a') the replay's gamma-discounted sums from k + 1 with a' from k + 1 on.
    """
    logs = data["logs"]
    actions = torch.stack([log.actions for log in logs])                          # (D, K, C)
    if kind == "truth":
        v, c = discounted_from(cf["value"], 1.0), discounted_from(cf["cost"], 1.0)  # (D, K, 9, C)
        return v.gather(2, actions[:, :, None]).squeeze(2), c.gather(2, actions[:, :, None]).squeeze(2)
    value = torch.stack([log.value_reward for log in logs])                       # (D, K, C)
    cost = torch.stack([log.cpc_cost for log in logs])
    if kind == "monte_carlo":
        gv, gc = torch.zeros_like(value[:, 0]), torch.zeros_like(cost[:, 0])
        out_v, out_c = [], []
        for k in reversed(range(value.shape[1])):                                # G_k = r_k + gamma G_{k+1}
            gv, gc = value[:, k] + gamma * gv, cost[:, k] + gamma * gc
            out_v.append(gv)
            out_c.append(gc)
        return torch.stack(out_v[::-1], 1), torch.stack(out_c[::-1], 1)
    if kind == "oracle":
        gv, gc = discounted_from(cf["value"], gamma), discounted_from(cf["cost"], gamma)   # (D, K, 9, C)
        next_v = torch.cat([gv[:, 1:].max(2).values, torch.zeros_like(value[:, :1])], 1)    # (D, K, C); 0 after the day
        next_c = torch.cat([gc[:, 1:].min(2).values, torch.zeros_like(cost[:, :1])], 1)
        return value + gamma * next_v, cost + gamma * next_c
    raise ValueError(f"unknown regression target {kind!r} (known: truth, monte_carlo, oracle)")


def with_targets(world, data: Mapping[str, Any], value: Tensor, cost: Tensor) -> dict[str, Any]:
    """``data`` whose train and held-out transitions carry (value, cost) as r^v and c (their states, actions,
    campaigns and order unchanged; ``reward`` = value - lambda cost).  Only the critic reads it."""
    from litrepro.rlbp.experiment import heldout_campaigns

    mask = heldout_campaigns(world)
    lam = world.cfg.lambda_cpc
    out = dict(data)
    for name, keep in (("train", ~mask), ("heldout", mask)):
        v, c = value[:, :, keep].flatten(), cost[:, :, keep].flatten()            # (D K C_kept,), the _flatten order
        out[name] = dataclasses.replace(data[name], value_reward=v, cpc_cost=c, reward=v - lam * c)
    return out


# --- Checks of the arms that replace the critic's targets --------------------------------------------

#: Figures the audit rebuilds from the critic's training and held-out *targets* (the rest, IPS, truth,
#: fusion and the actor, it rebuilds from the logged data and the evaluation).
CRITIC_FIGURES = ("td_loss_before", "td_loss_after", "td_loss_value_before", "td_loss_cpc_before",
                  "td_loss_value_after", "td_loss_cpc_after", "control_td_loss_after", "control_ratio",
                  "curves.td_loss_value[0]", "curves.td_loss_cpc[0]")


def critic_data_checks(result: Mapping[str, Any], logged_audit: Mapping[str, Any], own_audit: Mapping[str, Any],
                       critic_report: Mapping[str, Any], critic_data: Mapping[str, Any], cfg) -> dict[str, bool]:
    """For an arm whose critic regresses other targets than the logged rewards (``truth``, ``monte_carlo``,
    ``oracle``): the three pipeline checks that rebuild the critic's training from its data, judged against
    the data the critic was trained on instead of the logged rewards; every other check stays as the
    pipeline computed it on the logged data.

    ``actual_reward_regression_update``: the critic beat its permuted-*target* control by the ``none``
    margin, its control being one joint permutation of those targets.  ``stage_draws_replayed``: every
    stream replayed (the control's permutation applied to the critic's targets).
    ``reported_figures_match_audit``: the TD-loss figures (:data:`CRITIC_FIGURES`) against the audit on the
    critic's data, every other figure against the audit on the logged data.
    """
    from litrepro.rlbp import audit as rlbp_audit

    refs_logged, refs_own = logged_audit["references"], own_audit["references"]
    critic_names = [n for n in refs_own if n in CRITIC_FIGURES]
    other_names = [n for n in refs_logged if n not in CRITIC_FIGURES]
    figures_ok = (rlbp_audit.figure_gap(result, refs_own, critic_names) <= rlbp_audit.REL_TOL
                  and rlbp_audit.figure_gap(result, refs_logged, other_names) <= rlbp_audit.REL_TOL
                  and len(critic_names) == len(CRITIC_FIGURES) and rlbp_audit.curve_lengths_match(result, cfg))
    return {"actual_reward_regression_update": rlbp_audit.reward_regression_update(
                critic_report, critic_data["train"], "none"),
            "stage_draws_replayed": max(own_audit["streams"]["gaps"].values()) < rlbp_audit.EXACT,
            "reported_figures_match_audit": figures_ok}


# --- One seed -------------------------------------------------------------------------------------

def action_shares(evaluation: Mapping[str, Any]) -> list[float]:
    """Share of the learned policy's decisions on the evaluation days that took each of the nine actions."""
    actions = evaluation["raw"]["learned"]["actions"].reshape(-1)
    return (torch.bincount(actions, minlength=9).to(F64) / actions.numel()).tolist()


class ReseededStreams(Streams):
    """The run's streams, except :data:`RESEEDED`, which come from ``<name>/placebo`` by the streams' rule.

    Handed to the placebo arm's critic only: its initial weights and minibatch order change, its control's
    permutation, its actor and its evaluation take max_min's streams.
    """

    def __init__(self, base: Streams, tag: str = "placebo"):
        super().__init__(base.seed)
        self.base, self.tag = base, tag

    def generator(self, name: str) -> torch.Generator:
        from litrepro.rlbp.streams import stream_seed

        if name in RESEEDED:
            return torch.Generator().manual_seed(stream_seed(self.seed, f"{name}/{self.tag}"))
        return self.base.generator(name)


def placebo_draws_replayed(result: Mapping[str, Any], critic_report: Mapping[str, Any], cfg, n_train: int,
                           n_features: int) -> bool:
    """``stage_draws_replayed`` for the placebo arm: every stream but :data:`RESEEDED` replays exactly (the
    audit's gaps), and the critic's initial weights and minibatch rows replay from ``<name>/placebo``."""
    from litrepro.rlbp import audit as rlbp_audit

    others = all(v < rlbp_audit.EXACT for k, v in result["stream_replay_gaps"].items() if k not in RESEEDED)
    seed = cfg.seed
    init = rlbp_audit._state_gap(critic_report["init_state"], rlbp_audit._init_replay(
        rlbp_audit.derived_seed(seed, "critic_init/placebo"),
        [(cfg.hidden, n_features), (cfg.hidden, cfg.hidden), (18, cfg.hidden)]))
    rows = rlbp_audit._rows_replay(rlbp_audit._fresh(seed, "critic_minibatches/placebo"), n_train, cfg.batch_size,
                                   cfg.critic_steps)
    return others and init < rlbp_audit.EXACT and torch.equal(rows, critic_report["rows"].cpu())


def average_ranks(x: Tensor) -> Tensor:
    """Ranks along the last axis, ties given their average rank (0-based), as Spearman's rho needs: (N, A) -> (N, A).

    rank_j = #{k : x_k < x_j} + (#{k : x_k = x_j} - 1) / 2
    """
    less = (x[..., None, :] < x[..., :, None]).sum(-1).to(F64)                        # (N, A): how many below x_j
    equal = (x[..., None, :] == x[..., :, None]).sum(-1).to(F64)                      # (N, A): ties, x_j itself included
    return less + (equal - 1) / 2


def critic_diagnostics(critic, cf: Mapping[str, Tensor], data: Mapping[str, Any], heldout: Tensor, lam: float,
                       gamma: float) -> dict[str, Any]:
    """The critic against the counterfactual replays, on the held-out campaigns' logged states.

    With S(s, a) = Q^v(s, a) - lam Q^c(s, a) the critic's fused score and
    V_gamma(s, a) = sum_{j >= k} gamma^{j-k} fused_j the simulator's discounted fused return of holding a
    from segment k to the end of the logged day (:func:`counterfactuals`, :func:`discounted_from`):

      ``rank_correlation`` = mean over states of Spearman's rho between S(s, .) and V_gamma(s, .) (9 actions,
                             ties at their average rank); a state where either is constant has no rho and is left
                             out (``constant_states``: their share)
      ``action_bias``      = [mean over states of S(s, a) - V_gamma(s, a) for a in 0..8]
      ``greedy_agreement`` = share of the states with a rho where argmax S(s, .) = argmax V_gamma(s, .)

    V_gamma holds one action to the end of the day: it is neither Q under mu nor the optimal Q, so the
    bias says how the critic's level differs from that reference, and the rank correlation whether it
    orders the actions as that reference does.  ``heldout`` (C,) bool marks the held-out campaigns.
    """
    states = torch.stack([log.states for log in data["logs"]])[:, :, heldout]          # (D, K, H, F)
    truth = discounted_from(cf["fused"], gamma)[..., heldout]                         # (D, K, 9, H)
    truth = truth.permute(0, 1, 3, 2).reshape(-1, truth.shape[2])                      # (N, 9)
    with torch.no_grad():
        qv, qc = critic(states.reshape(-1, states.shape[-1]))                          # (N, 9) each
    score = qv - lam * qc                                                              # (N, 9)
    rs, rt = average_ranks(score), average_ranks(truth)                                # (N, 9) each
    rs, rt = rs - rs.mean(-1, keepdim=True), rt - rt.mean(-1, keepdim=True)
    norm = torch.sqrt((rs ** 2).sum(-1) * (rt ** 2).sum(-1))                           # (N,); 0 for a constant row
    defined = norm > 0                                                                 # (N,)
    rho = (rs * rt).sum(-1)[defined] / norm[defined]                                   # (N_defined,)
    agree = (score.argmax(-1) == truth.argmax(-1))[defined]
    return {"rank_correlation": float(rho.mean()), "action_bias": (score - truth).mean(0).tolist(),
            "greedy_agreement": float(agree.to(F64).mean()), "states": truth.shape[0],
            "constant_states": float((~defined).to(F64).mean())}


#: Fitted-Q evaluation of each constant action (:func:`tuned_constant`): steps, learning rate, target sync, gamma.
FQE = {"steps": 1500, "lr": 0.001, "batch_size": 256, "target_update_every": 50, "gamma": 1.0}


def tuned_constant(data: Mapping[str, Any], cfg) -> dict[str, Any]:
    """The constant action a practitioner would pick from the logged data alone (our reconstruction of an
    offline-tuned PID gain), by two estimators on the training campaigns' logged decisions:

    ``ips``: ordinary IPS of the one-segment fused reward, V^(a) = (1/N) sum_i 1[a_i = a] / mu(a_i|s_i) r_i.
    ``fqe``: fitted-Q evaluation of "always a" over the day: a fresh two-head critic regressed on
        y = r + gamma (1 - d) Qbar(s', a) (the ``policy`` backup with the one-hot next policy, gamma 1, the
        critic's network and Adam), scored as the mean over the logged segment-0 states of
        Q^v(s, a) - lambda Q^c(s, a).  Its streams are ``fqe/<a>`` by the streams' rule, outside the pipeline's.

    ``action`` is the FQE pick (the estimator that sees the whole day); ``ips_action`` the IPS pick.
    """
    from litrepro.rlbp.critic import TwoHeadCritic, train_critic
    from litrepro.rlbp.streams import stream_seed

    train, heldout = data["train"], data["heldout"]
    ips = [float(((train.action == a).to(F64) / train.propensity * train.reward).mean()) for a in range(9)]
    first = torch.stack([log.states[0] for log in data["logs"]]).reshape(-1, train.state.shape[1])   # (D C, F)
    fqe = []
    for a in range(9):
        def one_hot(state: Tensor, a=a) -> Tensor:
            out = torch.zeros(state.shape[0], 9, dtype=F64)
            out[:, a] = 1.0
            return out
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(stream_seed(cfg.seed, f"fqe/{a}/init"))
            critic = TwoHeadCritic(train.state.shape[1], cfg.hidden)
        train_critic(critic, train, heldout, steps=FQE["steps"], lr=FQE["lr"], batch_size=FQE["batch_size"],
                     gamma=FQE["gamma"], target_update_every=FQE["target_update_every"],
                     generator=torch.Generator().manual_seed(stream_seed(cfg.seed, f"fqe/{a}/minibatches")),
                     kind="policy", policy=one_hot)
        with torch.no_grad():
            qv, qc = critic(first)                                                                    # (D C, 9)
        fqe.append(float((qv[:, a] - cfg.lambda_cpc * qc[:, a]).mean()))
    return {"action": max(range(9), key=lambda a: (fqe[a], -a)), "fqe": fqe,
            "ips_action": max(range(9), key=lambda a: (ips[a], -a)), "ips": ips}


def run_seed(seed: int, *, arms: Sequence[str] | None = None, overrides: Mapping[str, Any] | None = None,
             table: Mapping[str, tuple[str, dict, str]] | None = None, replays: bool = True,
             tune: bool = True) -> dict:
    """Every arm on one seed: ``{"seed", "alignment", "replay", "headroom", "tuned_constant", "arms": {arm: {...}}}``.

    Mirrors the preamble of :func:`litrepro.rlbp.experiment.run_arms` call for call (world, PID demo,
    logged data, the data checks, evaluation days, headroom); every arm then takes the same named
    random streams (:mod:`litrepro.rlbp.streams`), as run_arms's backups do, and the pipeline's
    ``backups_share_draws`` checks it over the arms (the placebo arm, whose critic streams differ by design,
    is checked by :func:`placebo_draws_replayed` instead).  ``overrides`` changes the config (tests use tiny
    ones); ``table`` replaces :data:`ARMS` (the budget study's grid); ``replays=False`` skips the
    counterfactual replays (then no arm may need them, and ``alignment``, ``replay`` and the critic
    diagnostics are absent); ``tune=False`` skips :func:`tuned_constant` (``tuned_constant`` is None).
    """
    from litrepro.guard import OfflineGuard
    from litrepro.rlbp import audit as rlbp_audit
    from litrepro.rlbp import experiment as ex
    from litrepro.rlbp.config import RLBPConfig
    from litrepro.rlbp.streams import Streams
    from litrepro.seeding import describe_device, seed_everything

    cfg = RLBPConfig(seed=seed, **(overrides or {}))
    table = dict(ARMS if table is None else table)
    arms = list(arms or table)
    if not replays and any(table[a][2] not in ("td", "placebo") for a in arms):
        raise ValueError("arms that regress onto replayed targets need replays=True")
    seed_everything(cfg.seed)
    generator = Streams(cfg.seed)                      # every stage takes its own named stream, as in run_arms
    device = torch.device("cpu")
    results, full = {}, {}
    with OfflineGuard() as guard:
        world = ex.build_world(cfg, generator, device)
        demo = ex.pid_demo(world, generator, actions=(0, 8))
        derivative_error = rlbp_audit.derivative_gain_error(demo["logs"][8], cfg.kd, cfg.steps_per_day)
        data = ex.collect_logged_data(world, generator)
        transitions = rlbp_audit.transitions_report(world, data)
        auction_error = rlbp_audit.auction_replay_error(world, data)
        days = ex.draw_eval_days(world, generator)
        days_report = rlbp_audit.eval_days_report(data, days, [demo["draws"]])
        room = ex.headroom(world, days, generator)
        heldout = ex.heldout_campaigns(world)
        cf = replay = aligned = None
        if replays:
            cf = counterfactuals(world, data, cfg.lambda_cpc)                  # draws from no stream
            replay = replay_checks(cf, {**data, "target_cpc": world.campaigns.target_cpc}, cfg.lambda_cpc)
            aligned = alignment(cf, torch.stack([log.actions for log in data["logs"]]))
        for name in arms:                              # common random numbers: each arm takes the same streams
            _, changes, target = table[name]
            arm_cfg = dataclasses.replace(cfg, **changes) if target in ("td", "placebo") else \
                dataclasses.replace(cfg, critic_backup="none")
            arm = dataclasses.replace(world, cfg=arm_cfg)
            critic_data = data if target in ("td", "placebo") else with_targets(
                world, data, *regression_targets(target, cf, data, cfg.gamma))
            if target == "placebo":                    # another critic init and minibatch order, nothing else
                critic, critic_report = ex.fit_critic(arm, critic_data, ReseededStreams(generator))
                actor, actor_report = ex.fit_actor(arm, critic, critic_data, generator)
            else:
                critic, critic_report, actor, actor_report = ex.fit_critic_and_actor(arm, critic_data, generator)
            fusion = ex.fusion_diagnostics(arm, critic, actor, actor_report, data, generator)
            evaluation = ex.evaluate_policies(arm, actor, data, days, generator)
            audit = rlbp_audit.stage_audit(arm, critic, actor, data, critic_report, actor_report, evaluation,
                                           days_report, room)
            result = ex.collect_results(arm, critic_report=critic_report, actor_report=actor_report, data=data,
                                        evaluation=evaluation, fusion=fusion, sweep=[],
                                        derivative_error=derivative_error, guard=guard,
                                        execution=describe_device(device),
                                        fingerprint=ex.dataset_fingerprint(cfg, data), days_report=days_report,
                                        transitions=transitions, auction_error=auction_error, audit=audit,
                                        headroom_report=room)
            checks = {**result["checks"], **result["extra_checks"]}
            if target not in ("td", "placebo"):        # the critic-side checks, against the critic's own data
                own = rlbp_audit.stage_audit(arm, critic, actor, critic_data, critic_report, actor_report, evaluation,
                                             days_report, room)
                checks.update(critic_data_checks(result, audit, own, critic_report, critic_data, arm_cfg))
            if target == "placebo":
                checks["stage_draws_replayed"] = placebo_draws_replayed(
                    result, critic_report, arm_cfg, len(data["train"]), data["train"].state.shape[1])
            if name in MARGIN_OF:
                checks["actual_reward_regression_update"] = rlbp_audit.reward_regression_update(
                    critic_report, data["train"], MARGIN_OF[name])
            full[name] = result
            beyond = result["beyond_seed_metrics"]
            results[name] = {"learned_true_value": beyond["learned_true_value"],
                             "behaviour_true_value": beyond["behaviour_true_value"],
                             "learned_ips": beyond["learned_ips"],
                             "fixed_gain": room["fixed_gain"], "best_constant": room["best_constant"],
                             "best_constant_action": room["best_constant_action"],
                             "action_shares": action_shares(evaluation),
                             "control_ratio": beyond["control_ratio"],
                             "heldout_td_loss": [float(x) for x in critic_report["heldout_after"]],
                             "critic_steps": arm_cfg.critic_steps,
                             "draws_sha256": critic_report["drawn_sha256"], "checks": checks}
            if cf is not None:
                results[name]["critic"] = critic_diagnostics(critic, cf, data, heldout, cfg.lambda_cpc, arm_cfg.gamma)
    by_steps: dict[int, dict] = {}                     # arms of one budget share every draw (the placebo's critic
    for k, v in full.items():                          # excepted); a shorter budget's rows are a prefix of a longer
        if table[k][2] != "placebo":                   # one's, which each arm's stream replay checks
            by_steps.setdefault(results[k]["critic_steps"], {})[k] = v
    for paired in by_steps.values():
        if len(paired) > 1:                            # the pipeline's own pairing check, over these arms
            shared = rlbp_audit.backups_share_draws(paired)
            for name in paired:
                results[name]["checks"]["backups_share_draws"] = shared
    for name in full:
        if table[name][2] == "placebo":                # the placebo really drew other critic rows than max_min's
            others = {r["draws_sha256"] for k, r in results.items() if table[k][2] != "placebo"}
            results[name]["checks"]["placebo_changes_critic_draws"] = results[name]["draws_sha256"] not in others
    return {"seed": seed, "eval_day_hashes": days_report["eval_day_hashes"], "alignment": aligned,
            "replay": replay, "arms": results, "tuned_constant": tuned_constant(data, cfg) if tune else None,
            "headroom": {k: room[k] for k in ("constant", "fixed_gain", "best_constant", "best_constant_action",
                                               "best_per_kind", "best_per_campaign")}}


# --- Across seeds ---------------------------------------------------------------------------------

REPLAY_TOLERANCE = 1e-9


def failed(row: Mapping[str, Any]) -> list[str]:
    """What failed an integrity check on one seed: an arm's check other than :data:`OUTCOME_CHECKS`
    (``arm.check``), the counterfactual replay, or the pairing."""
    bad = [f"{arm}.{k}" for arm, r in row["arms"].items() for k, v in r["checks"].items()
           if v is not True and k not in OUTCOME_CHECKS]
    rp = row.get("replay")
    if rp is not None:
        if not rp["counterfactual_state_error"] < REPLAY_TOLERANCE:
            bad.append("counterfactual_state_replays_log")
        if not rp["counterfactual_reward_error"] < REPLAY_TOLERANCE:
            bad.append("counterfactual_reward_replays_log")
        if not rp["counterfactual_action_error"] < REPLAY_TOLERANCE:
            bad.append("counterfactual_takes_its_action")
        if rp["alignment_reference_agrees"] is not True:
            bad.append("alignment_reference_agrees")
    shared: dict[int, set] = {}                        # every arm but the placebo took the same critic stream
    for r in row["arms"].values():                     # (per budget: a longer one draws more rows)
        if "placebo_changes_critic_draws" not in r["checks"]:
            shared.setdefault(r.get("critic_steps"), set()).add(r["draws_sha256"])
    if any(len(v) > 1 for v in shared.values()):
        bad.append("arms_share_minibatches")
    return bad


def flagged(rows: Sequence[Mapping[str, Any]], arm: str) -> dict[str, list[str]]:
    """``{seed: outcome checks that failed}`` for one arm (:data:`OUTCOME_CHECKS`): reported, never dropped."""
    out = {}
    for r in rows:
        bad = [k for k in OUTCOME_CHECKS if r["arms"][arm]["checks"].get(k, True) is not True]
        if bad:
            out[str(r["seed"])] = bad
    return out


def refuse_failed(rows: Sequence[Mapping[str, Any]]) -> None:
    bad = {r["seed"]: failed(r) for r in rows if failed(r)}
    if bad:
        raise StudyRefused(f"rlbp diagnosis refused, integrity checks failed on seeds {bad}; no interval is written")
    seen: dict[str, int] = {}
    for r in rows:
        for h in r["eval_day_hashes"]:
            if h in seen and seen[h] != r["seed"]:
                raise StudyRefused(f"rlbp diagnosis refused: seeds {seen[h]} and {r['seed']} share an evaluation day")
            seen[h] = r["seed"]


def _with_verdict(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    from litrepro.stats import paired_ci, verdict

    ci = paired_ci(a, b)
    return {**ci, "verdict": verdict(ci)}


def summarise(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per arm: arm - fixed gain and arm - max_min (paired 95% t intervals, over every seed and, where an outcome
    check flagged a seed, without the flagged seeds too), the share of the best constant action's headroom
    (paired bootstrap), the mean action shares and the critic diagnostics; the ablation table (raw and
    Holm-adjusted); and the reward alignment across seeds."""
    import numpy as np

    from litrepro.holm import holm
    from litrepro.rlbp.study import headroom_share
    from litrepro.stats import paired_ci, verdict

    refuse_failed(rows)
    rows = sorted(rows, key=lambda r: r["seed"])
    arms = [a for a in ARMS if all(a in r["arms"] for r in rows)]
    if "max_min" not in arms:
        raise StudyRefused("rlbp diagnosis refused: the max_min arm is missing on some seed")
    fixed = [r["arms"]["max_min"]["fixed_gain"] for r in rows]
    best = [r["arms"]["max_min"]["best_constant"] for r in rows]
    base = [r["arms"]["max_min"]["learned_true_value"] for r in rows]
    out_arms = []
    for a in arms:
        learned = [r["arms"][a]["learned_true_value"] for r in rows]
        entry = {"arm": a, "changes": ARMS[a][0], "n": len(rows),
                 "minus_fixed_gain": _with_verdict(learned, fixed), "minus_max_min": _with_verdict(learned, base),
                 "share_of_headroom": headroom_share(np.subtract(learned, fixed), np.subtract(best, fixed)),
                 "mean_action_shares": np.mean([r["arms"][a]["action_shares"] for r in rows], 0).tolist(),
                 "flagged_seeds": flagged(rows, a)}
        if entry["flagged_seeds"]:
            keep = [i for i, r in enumerate(rows) if str(r["seed"]) not in entry["flagged_seeds"]]
            entry["without_flagged"] = {"n": len(keep)} if not keep else {
                "n": len(keep),
                "minus_fixed_gain": _with_verdict([learned[i] for i in keep], [fixed[i] for i in keep]),
                "minus_max_min": _with_verdict([learned[i] for i in keep], [base[i] for i in keep])}
        if all(r["arms"][a].get("critic") for r in rows):
            entry["critic"] = {
                "rank_correlation": paired_ci([r["arms"][a]["critic"]["rank_correlation"] for r in rows], [0.0] * len(rows)),
                "greedy_agreement": paired_ci([r["arms"][a]["critic"]["greedy_agreement"] for r in rows], [0.0] * len(rows)),
                "action_bias": np.mean([r["arms"][a]["critic"]["action_bias"] for r in rows], 0).tolist()}
        out_arms.append(entry)
    diffs = {label: [r["arms"][x]["learned_true_value"] - r["arms"][y]["learned_true_value"] for r in rows]
             for label, x, y, _ in ABLATIONS if x in arms and y in arms}
    adjusted = holm(diffs)
    ablation = []
    for label, x, y, confound in ABLATIONS:
        if label in diffs:
            raw = _with_verdict([r["arms"][x]["learned_true_value"] for r in rows],
                                [r["arms"][y]["learned_true_value"] for r in rows])
            ablation.append({"factor": label, "arm": x, "against": y, "also_differs": confound, "raw": raw,
                             "holm": adjusted[label]})
    align = {}
    if all(r.get("alignment") for r in rows):
        for key in ("agreement", "segment_best_is_8", "day_best_is_8", "segment_regret_of_day_best"):
            values = [r["alignment"][key] for r in rows]
            align[key] = {**paired_ci(values, [0.0] * len(values)), "values": values}
    head = paired_ci(best, fixed)
    out = {"arms": out_arms, "ablation": ablation, "alignment": align, "headroom": {**head, "verdict": verdict(head)}}
    check_intervals(rows, out)
    return out


def _plain_ci(d: list[float]) -> tuple[int, float, float, float]:
    from scipy import stats

    n = len(d)
    mean = sum(d) / n
    var = sum((x - mean) ** 2 for x in d) / (n - 1) if n > 1 else 0.0
    half = stats.t.ppf(0.975, n - 1) * math.sqrt(var / n) if var > 0 else 0.0
    return n, mean, mean - half, mean + half


def check_intervals(rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any], *, rel_tol: float = 1e-9) -> None:
    """Recompute every interval of :func:`summarise` with a plain loop over seeds; refuse (:class:`StudyRefused`) a mismatch.

    d_s = A_s - B_s on the same seed (each seed once), mean = sum d / n, s^2 = sum (d - mean)^2 / (n - 1),
    mean -+ t_{0.975, n-1} s / sqrt(n) (collapsed when s = 0).
    """
    seeds = [r["seed"] for r in rows]
    bad = [] if len(set(seeds)) == len(seeds) else ["a seed appears twice"]
    by_seed = {r["seed"]: r for r in rows}

    def compare(label, got, d):
        n, *expected = _plain_ci(d)
        values = (got["mean_difference"], got["ci95_low"], got["ci95_high"])
        scale = max(abs(x) for x in expected) or 1.0
        if got["n"] != n or any(not abs(g - e) <= rel_tol * scale for g, e in zip(values, expected)):
            bad.append(label)

    for arm in summary["arms"]:
        a = arm["arm"]
        d_fixed, d_base = [], []
        for s in sorted(by_seed):
            r = by_seed[s]["arms"]
            d_fixed.append(r[a]["learned_true_value"] - r["max_min"]["fixed_gain"])
            d_base.append(r[a]["learned_true_value"] - r["max_min"]["learned_true_value"])
        compare(f"{a} - fixed_gain", arm["minus_fixed_gain"], d_fixed)
        compare(f"{a} - max_min", arm["minus_max_min"], d_base)
        if arm.get("without_flagged", {}).get("n"):
            keep = [s for s in sorted(by_seed) if str(s) not in arm["flagged_seeds"]]
            compare(f"{a} - fixed_gain without flagged", arm["without_flagged"]["minus_fixed_gain"],
                    [by_seed[s]["arms"][a]["learned_true_value"] - by_seed[s]["arms"]["max_min"]["fixed_gain"] for s in keep])
            compare(f"{a} - max_min without flagged", arm["without_flagged"]["minus_max_min"],
                    [by_seed[s]["arms"][a]["learned_true_value"] - by_seed[s]["arms"]["max_min"]["learned_true_value"]
                     for s in keep])
        flags = {str(s): [k for k in OUTCOME_CHECKS if by_seed[s]["arms"][a]["checks"].get(k, True) is not True]
                 for s in sorted(by_seed)}
        if arm["flagged_seeds"] != {s: v for s, v in flags.items() if v}:
            bad.append(f"{a} flagged seeds")
        if "critic" in arm:
            for key in ("rank_correlation", "greedy_agreement"):
                compare(f"{a} critic {key}", arm["critic"][key], [by_seed[s]["arms"][a]["critic"][key] for s in sorted(by_seed)])
    for row in summary["ablation"]:
        d = [by_seed[s]["arms"][row["arm"]]["learned_true_value"] - by_seed[s]["arms"][row["against"]]["learned_true_value"]
             for s in sorted(by_seed)]
        compare(f"ablation {row['factor']}", row["raw"], d)
        if not abs(row["holm"]["mean_difference"] - sum(d) / len(d)) <= rel_tol * max(abs(sum(d) / len(d)), 1e-12):
            bad.append(f"ablation {row['factor']} holm mean")
    for key, got in summary["alignment"].items():
        compare(f"alignment {key}", got, [by_seed[s]["alignment"][key] for s in sorted(by_seed)])
    compare("headroom", summary["headroom"], [by_seed[s]["arms"]["max_min"]["best_constant"]
                                              - by_seed[s]["arms"]["max_min"]["fixed_gain"] for s in sorted(by_seed)])
    if bad:
        raise StudyRefused(f"rlbp diagnosis refused, intervals differ from their plain-loop recomputation: "
                           f"{'; '.join(bad[:5])}{' ...' if len(bad) > 5 else ''}")


# --- What the intervals say ---------------------------------------------------------------------

def _arm(data: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    return next((a for a in data["summary"]["arms"] if a["arm"] == name), None)


def _words(row: Mapping[str, float], against: str) -> str:
    from litrepro.stats import fmt_ci

    if row["ci95_low"] > 0:
        word = f"above {against}"
    elif row["ci95_high"] < 0:
        word = f"below {against}"
    else:
        word = f"no detectable difference from {against}"
    return f"{word} ({fmt_ci(row['ci95_low'], row['ci95_high'])})"


def cause_verdict(fixes: Sequence[Mapping[str, Any]]) -> str:
    """From the intervals of the arms that change one cause:

    - ``finds_headroom``: some arm is above max_min and above the fixed gain;
    - ``lifts_to_fixed``: every arm is above max_min and none is detectably below the fixed gain
      (not shown equal to it: "no detectable difference" is not equality);
    - ``lifts``: some arm is above max_min, but not every arm reaches the fixed gain;
    - ``not_sufficient``: every arm stays below the fixed gain and none is above max_min;
    - ``open``: anything else.
    """
    above_base = [f for f in fixes if f["minus_max_min"]["ci95_low"] > 0]
    below_fixed = [f for f in fixes if f["minus_fixed_gain"]["ci95_high"] < 0]
    if any(f["minus_fixed_gain"]["ci95_low"] > 0 for f in above_base):
        return "finds_headroom"
    if len(above_base) == len(fixes) and not below_fixed:
        return "lifts_to_fixed"
    if above_base:
        return "lifts"
    if len(below_fixed) == len(fixes):
        return "not_sufficient"
    return "open"


def finds_headroom(arm: Mapping[str, Any]) -> bool:
    """The arm's policy beats the fixed gain (its paired interval lies above 0)."""
    return arm["minus_fixed_gain"]["ci95_low"] > 0


def _share(row: Mapping[str, float]) -> str:
    """A share's interval without signs, bounds rounded outward (a level, not a difference)."""
    from litrepro.stats import round_outward

    return f"[{round_outward(row['ci95_low'], 2, up=False):#.2g}, {round_outward(row['ci95_high'], 2, up=True):#.2g}]"


def truth_finding(data: Mapping[str, Any]) -> str | None:
    """The ``truth_target`` arm in one sentence: can the rest of the pipeline find the headroom given oracle targets?"""
    from litrepro.stats import fmt_ci

    truth = _arm(data, "truth_target")
    if truth is None:
        return None
    what = ("With an oracle target (the simulator's day-level value of the logged action, which the logged data "
            "do not contain), the same critic and actor are ")
    if finds_headroom(truth):
        share = truth["share_of_headroom"]
        return (what + f"{_words(truth['minus_fixed_gain'], 'the fixed gain')}, a share "
                f"{fmt_ci(share['ci95_low'], share['ci95_high'])} of the best constant action's headroom: given such "
                "targets, the actor, the network and the logged states recover most of it. The arm changes the horizon, the "
                "discount, bootstrapping and the continuation at once, so it does not say which part of the targets "
                "is at fault.")
    return (what + f"{_words(truth['minus_fixed_gain'], 'the fixed gain')}: this arm does not tell whether the "
            "targets are the cause.")


def findings(data: Mapping[str, Any]) -> list[str]:
    """What the arms show, from the intervals only (see :func:`cause_verdict` for the words per cause).

    An arm that changes several things at once supports only their combination, and says so. The reward is
    judged by two arms: ``truth_target`` (oracle day-level targets: can the rest of the pipeline find the
    headroom at all?) and ``monte_carlo`` (the same per-segment rewards, summed along the day without
    bootstrapping).
    """
    s = data["summary"]
    n = data["n_seeds"]
    out = [f"Every arm is our reconstruction, run on the same data, evaluation days and random draws as max_min over "
           f"{n} seeds; intervals are paired 95% t intervals (headroom shares: paired bootstrap), each at 95% on "
           "its own, not adjusted for the number of intervals shown."]
    base = _arm(data, "max_min")
    out.append(f"The seed's max_min policy is {_words(base['minus_fixed_gain'], 'the fixed gain')}; the best constant "
               f"action is {_words(s['headroom'], 'the fixed gain')}.")
    placebo = _arm(data, "placebo")
    if placebo is not None:
        out.append(f"The placebo, max_min retrained with another initialisation and minibatch order and nothing else, is "
                   f"{_words(placebo['minus_max_min'], 'max_min')}: that is how far a retraining alone moves the policy, "
                   "the yardstick for every arm below.")
    al = s["alignment"]
    out.append(f"Reward alignment: over every logged state, the one-segment reward's best action is the day-level "
               f"truth's best action in a share {_share(al['agreement'])} of states (mean over seeds); action "
               f"{BEST_CONSTANT} is the day's best in a share {_share(al['day_best_is_8'])} of states and the "
               f"segment's best in {_share(al['segment_best_is_8'])}.")
    truth, mc = _arm(data, "truth_target"), _arm(data, "monte_carlo")
    if truth is not None:
        out.append(truth_finding(data))
    if truth is not None and mc is not None:
        if mc["minus_fixed_gain"]["ci95_low"] > 0 and mc["minus_max_min"]["ci95_low"] > 0:
            out.append(f"The per-segment reward does not by itself explain the deficit: Monte-Carlo returns of the same "
                       f"per-segment rewards (no bootstrapping) are {_words(mc['minus_fixed_gain'], 'the fixed gain')} "
                       f"and {_words(mc['minus_max_min'], 'max_min')}.")
        elif finds_headroom(truth) and mc["minus_fixed_gain"]["ci95_high"] < 0:
            out.append("Not isolated by these arms: the per-segment reward. truth_target and monte_carlo sum the same "
                       "per-segment rewards but differ in the continuation policy and the discount (truth_target "
                       f"{_words(truth['minus_fixed_gain'], 'the fixed gain')}; monte_carlo "
                       f"{_words(mc['minus_fixed_gain'], 'the fixed gain')}).")
        else:
            out.append("Not settled by these arms: the per-segment reward (truth_target "
                       f"{_words(truth['minus_fixed_gain'], 'the fixed gain')}; monte_carlo "
                       f"{_words(mc['minus_fixed_gain'], 'the fixed gain')}).")
    effect = {"finds_headroom": "lifts the policy above max_min and above the fixed gain",
              "lifts_to_fixed": "lifts the policy above max_min, to no detectable difference from the fixed gain "
                                "(not shown equal to it)",
              "lifts": "lifts the policy above max_min; against the fixed gain these arms read differently, but no "
                       "interval here compares them with each other, so that difference between them is not a "
                       "finding",
              "not_sufficient": "leaves the policy below the fixed gain and not detectably above max_min: not "
                                "sufficient on its own",
              "open": "does not settle it",
              "within_placebo": "moves the policy above max_min, but each such interval's lower end lies within the "
                                "placebo's (a reseeded max_min), so no lift beyond what retraining alone moves is shown"}
    tried = []
    for key, (label, names, confound) in CAUSES.items():
        fixes = [_arm(data, a) for a in names if _arm(data, a) is not None]
        if not fixes:
            out.append(f"Untested: {label} (no arm of this run changes it).")
            continue
        tried += fixes
        detail = "; ".join(f"{f['arm']} is {_words(f['minus_fixed_gain'], 'the fixed gain')} and "
                           f"{_words(f['minus_max_min'], 'max_min')}" for f in fixes)
        caveat = f" Caveat: {confound}, so it supports only their combination." if confound else ""
        within = [f["arm"] for f in fixes if placebo is not None and f["arm"] != "placebo"
                  and 0 < f["minus_max_min"]["ci95_low"] <= placebo["minus_max_min"]["ci95_high"]]
        verdict = cause_verdict(fixes)
        above = [f["arm"] for f in fixes if f["minus_max_min"]["ci95_low"] > 0]
        if verdict in ("lifts", "lifts_to_fixed") and above and set(above) <= set(within):
            verdict = "within_placebo"                        # every lift above max_min is within the placebo's reach
        elif within:
            caveat += (f" {', '.join(within)} above max_min by an interval whose lower end lies within the placebo's "
                       "(a reseeded max_min), so that gain is not shown to exceed what retraining alone moves.")
        together = ((", together with what else its arm changes (see the caveat)," if len(names) == 1 else
                     ", together with what else one of its arms changes (see the caveat),") if confound else "")
        out.append(f"Changing {label}{together} {effect[verdict]}: {detail}.{caveat}")
    if len(tried) > 1 and all(f["minus_max_min"]["ci95_low"] > 0 for f in tried):
        out.append("Every arm tried improves on max_min, so these arms do not single out one cause"
                   + (f"; the placebo (a reseeded max_min critic) is {_words(placebo['minus_max_min'], 'max_min')}."
                      if placebo is not None else "; no placebo arm was run."))
    for arm in data["summary"]["arms"]:
        if arm.get("flagged_seeds"):
            w = arm["without_flagged"]
            rest = (f"without the flagged seeds ({w['n']}) {_words(w['minus_fixed_gain'], 'the fixed gain')}"
                    if w["n"] else "no seed is left without a flag")
            out.append(f"{arm['arm']}: an outcome check failed on seed(s) "
                       + ", ".join(f"{s} ({', '.join(v)})" for s, v in arm["flagged_seeds"].items())
                       + f"; the arm is kept: over all {arm['n']} seeds it is {_words(arm['minus_fixed_gain'], 'the fixed gain')}, "
                       f"{rest}.")
    out.append("Untested by any arm here: " + "; ".join(UNTESTED) + ".")
    return out


def ablation_findings(data: Mapping[str, Any]) -> list[str]:
    """One sentence per ablation row: the raw 95% interval and the Holm-adjusted one, words from each."""
    from litrepro.stats import fmt_ci

    rows = data["summary"].get("ablation", [])
    out = []
    if rows:
        out.append(f"One factor per row (where a row's arms differ in more, the row says what else differs), "
                   f"arm a - arm b on the same seeds; raw 95% t intervals and, beside them, "
                   f"Holm-adjusted ones over the {len(rows)} rows (the interval at the level Holm's step-down "
                   "procedure tests the row at; its words from the adjusted p-value).")
    for r in rows:
        raw, h = r["raw"], r["holm"]
        words = {">0": "higher", "<0": "lower"}.get(raw["verdict"], "no detectable difference")
        also = f" ({r['also_differs']})" if r["also_differs"] else ""
        out.append(f"{r['factor']}: {r['arm']} - {r['against']} reads {words} {fmt_ci(raw['ci95_low'], raw['ci95_high'])}; "
                   f"Holm-adjusted {h['reads']} {fmt_ci(h['low'], h['high'])}{also}.")
    return out


# --- Display ------------------------------------------------------------------------------------

#: What the recorded arm descriptions (``ARMS``, hashed into the study, so not edited) leave unsaid about which
#: parts are ours: shown after an arm's description wherever it is displayed.
OURS_NOTE = {"max_min": "the seed records the max/min backup; gamma 0.9 and the sync period of 50 are ours"}


def changes_text(arm: Mapping[str, Any]) -> str:
    """An arm's description as the JSON records it, with :data:`OURS_NOTE` where the description needs it."""
    note = OURS_NOTE.get(arm["arm"])
    return f"{arm['changes']} ({note})" if note else arm["changes"]


def table(data: Mapping[str, Any]):
    """Per arm: what it changes, arm - fixed gain and arm - max_min (bounds rounded outward), headroom share,
    and its share of decisions on action 8."""
    import pandas as pd

    from litrepro.stats import fmt_ci

    rows = []
    for a in data["summary"]["arms"]:
        h = a["share_of_headroom"]
        rows.append({"arm": a["arm"], "changes": changes_text(a),
                     "arm − fixed gain": f"{a['minus_fixed_gain']['mean_difference']:+.4f} "
                                         f"{fmt_ci(a['minus_fixed_gain']['ci95_low'], a['minus_fixed_gain']['ci95_high'])}",
                     "arm − max_min": f"{a['minus_max_min']['mean_difference']:+.4f} "
                                      f"{fmt_ci(a['minus_max_min']['ci95_low'], a['minus_max_min']['ci95_high'])}",
                     "share of headroom": f"{h['share']:+.2f} {fmt_ci(h['ci95_low'], h['ci95_high'])}",
                     "share on action 8": f"{a['mean_action_shares'][BEST_CONSTANT]:.2f}"})
    return pd.DataFrame(rows).set_index("arm")


def plot(data: Mapping[str, Any]):
    """Left: each arm's action distribution on the evaluation days, action 8 marked.  Right: each arm's share of
    the best constant action's headroom (0: the fixed gain, 1: always action 8), 95% bootstrap interval."""
    import numpy as np
    from matplotlib.figure import Figure

    arms = data["summary"]["arms"]
    fig = Figure(figsize=(11, 0.45 * len(arms) + 2.2), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[1.4, 1])
    shares = np.array([a["mean_action_shares"] for a in arms])                     # (arms, 9)
    im = left.imshow(shares, aspect="auto", cmap="Blues", vmin=0, vmax=max(float(shares.max()), 1e-9))
    left.set_xticks(range(9), [str(i) for i in range(9)], fontsize=8)
    left.set_yticks(range(len(arms)), [a["arm"] for a in arms], fontsize=8)
    left.axvline(BEST_CONSTANT - 0.5, color="C3", lw=1.2)
    left.axvline(BEST_CONSTANT + 0.5, color="C3", lw=1.2)
    for i in range(shares.shape[0]):
        for j in range(9):
            left.text(j, i, f"{shares[i, j]:.2f}", ha="center", va="center", fontsize=6,
                      color="white" if shares[i, j] > 0.6 * shares.max() else "black")
    left.set_xlabel("action (4: fixed gain; 8, outlined: the best constant action)", fontsize=9)
    left.set_title("share of decisions on the evaluation days", fontsize=10)
    fig.colorbar(im, ax=left, shrink=0.8)
    y = np.arange(len(arms))
    for yi, a in zip(y, arms):
        h = a["share_of_headroom"]
        right.errorbar([h["share"]], [yi], xerr=[[h["share"] - h["ci95_low"]], [h["ci95_high"] - h["share"]]],
                       fmt="o", color="C0", capsize=3)
    right.axvline(0, color="k", lw=0.8, ls="--")
    right.axvline(1, color="C3", lw=0.8, ls="--")
    right.set_yticks(y, [a["arm"] for a in arms], fontsize=8)
    right.invert_yaxis()
    right.set_xlabel("share of headroom (0: fixed gain, 1: action 8)", fontsize=9)
    right.set_title("share of the headroom, 95% bootstrap CI", fontsize=10)
    right.grid(axis="x", lw=0.4, alpha=0.5)
    fig.suptitle(f"pinterest_rlbp diagnosis: {data['n_seeds']} seeds, every arm paired with max_min", fontsize=11)
    return fig


# --- Provenance ------------------------------------------------------------------------------------

#: This module's functions that compute the numbers (the findings' wording, the table and the figure are not).
COMPUTING = ("_tile_campaigns", "_tile_draws", "switch_policy", "counterfactuals", "discounted_from", "alignment",
             "alignment_reference", "replay_checks", "regression_targets", "with_targets", "action_shares", "run_seed",
             "failed", "refuse_failed", "summarise", "_plain_ci", "check_intervals", "critic_data_checks",
             "ReseededStreams", "placebo_draws_replayed", "average_ranks", "critic_diagnostics", "tuned_constant", "flagged",
             "_with_verdict")


def source_hashes(study: str = "rlbp-diagnosis") -> dict[str, str]:
    """The backup study's sources (:func:`litrepro.rlbp.study.source_hashes`, the rlbp package less its display
    code), ``stats.py``, study ``study``'s declaration (:func:`litrepro.studies.declaration_hashes`), and this
    module represented by its computing functions and constants (:data:`COMPUTING`), so that editing the
    findings' wording or the figure does not mark it stale.  The budget study builds on these with its own
    declaration."""
    import inspect
    import json

    from litrepro.rlbp.study import source_hashes as study_hashes
    from litrepro.studies import declaration_hashes

    out = {k: v for k, v in study_hashes().items() if not k.endswith("rlbp/diagnosis.py")}
    for name in ("src/litrepro/stats.py", "src/litrepro/rlbp/study.py", "src/litrepro/holm.py"):
        out[name] = hashlib.sha256((ROOT / name).read_bytes()).hexdigest()
    out.update(declaration_hashes(study))
    this = globals()
    code = "".join(inspect.getsource(this[name]) for name in COMPUTING) + json.dumps(
        [ARMS, MARGIN_OF, BEST_CONSTANT, REPLAY_TOLERANCE, CRITIC_FIGURES, OUTCOME_CHECKS, RESEEDED, ABLATIONS, FQE],
        sort_keys=True)
    out["diagnosis computing functions and constants"] = hashlib.sha256(code.encode()).hexdigest()
    return out


def load(path: Path = PATH) -> dict[str, Any]:
    import json

    return json.loads(Path(path).read_text())

