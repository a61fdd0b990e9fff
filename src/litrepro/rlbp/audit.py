"""How we know each ``pinterest_rlbp`` stage did what it says: every check, apart from the stages.

``experiment.py`` says what the method does; this module recomputes it.  Each check
re-derives one stage from what the run recorded (its named random streams, the logged
days, the rows its minibatches drew, the initial weights, the settings each optimiser
read back, the truth logs) with code of its own: plain loops over campaigns, rows and
actions, reference formulas written out again, replays of every random stream from its
derivation, and control arms that must share draws.  Each returns its measured gap
beside the boolean; the gaps go to ``beyond_seed_metrics``.  :data:`GUARDS` names every
check, the stage it guards and what it recomputes.

Families of checks (the new ones of issue 21 first):

- random streams (``random_streams_rederived``, ``stage_draws_replayed``,
  ``paired_arms_share_draws``, and ``backups_share_draws`` in multi-backup runs): each
  stream's seed is derived again by the rule of :mod:`litrepro.rlbp.streams` written out
  here; every stage's draws (logged and evaluation auctions, behaviour actions, the
  control's permutation, initial weights, critic and actor minibatch rows, the sampled
  actions of the truth simulations) are replayed from their stream; the value-only control
  actor, every lambda of the sweep and every backup must have taken the same draws;
- effective settings (``effective_settings_match_config``): every optimiser's parameter
  group (lr, betas, weight decay, eps, amsgrad), Adam's own step counters, the step counts,
  batch sizes, gamma, backup kind, lambda, temperature, target-sync steps, the served
  support size k, the behaviour epsilon seen in the logged propensities and the numbers of
  logged and evaluation days, as the stages used them, against the configuration;
- standard errors (``standard_errors_match_reference``): each reported standard error
  recomputed with a plain loop, s^2 = sum (x - mean)^2 / (n - 1), se = s / sqrt(n);
- reported figures (``reported_figures_match_audit``): each figure of ``metrics``,
  ``beyond_seed_metrics`` and ``curves`` that the audit can rebuild from the records,
  recomputed by code of its own (the largest relative gap is ``reported_figures_max_gap``);
- the stage checks of earlier issues, moved here unchanged.

Not recomputed (known gaps): ``fused_score_gain`` and its standard error (the value-only
control actor is not kept; ``fusion_changes_preference`` still fails on a wrong sign), the
TD figures of the ``policy`` backup (its next-state policies are not kept), the fixture
metrics and ``derivative_gain_error`` (the demo day's own check), and curve points other
than the first (the curves' lengths are checked).
"""

from __future__ import annotations

import hashlib
import math
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from litrepro.rlbp import experiment as ex
from litrepro.rlbp import fixtures
from litrepro.rlbp.critic import Transitions, TwoHeadCritic
from litrepro.rlbp.pid import N_ACTIONS, actions_are_bounded, pid_terms
from litrepro.rlbp.simulator import KINDS

if TYPE_CHECKING:
    from litrepro.rlbp.actor import Actor
    from litrepro.rlbp.experiment import World
    from litrepro.rlbp.simulator import DayLog

F64 = torch.float64
#: The fixed-gain action, written out again (multipliers (1.0, 1.0) of the 3x3 grid).
FIXED_GAIN_ACTION = 4
#: Relative gap at which a recomputed figure counts as equal (float64 summation order gives ~1e-15).
REL_TOL = 1e-8


#: ``actual_reward_regression_update`` needs the held-out TD loss at most this share of the
#: permuted-reward control's.  Set from the measured spread of the clean ratio: over the 20 seeds of
#: ``make rlbp-study`` it is recorded per seed and backup in ``backup_study.json``
#: (``per_seed.<backup>.<seed>.control_ratio``), and ``tests/test_rlbp_study.py`` requires max + 4 sd
#: of those clean ratios to stay below the margin.  Faults that corrupt the regression targets (a stale
#: target network, per-batch standardised rewards) end above the margin in ``tests/test_rlbp_faults.py``.
#: Without bootstrapping (``none``, gamma = 0) the clean ratio sits higher (the same key, backup
#: ``none``), so that backup has its own margin.
CONTROL_MARGIN = {"max_min": 0.4, "fused_greedy": 0.4, "policy": 0.4, "none": 0.7}


#: ``fusion_changes_preference`` needs ``fused_score_gain`` above this many standard errors
#: (per-state spread over the held-out states) rather than merely above 0.
FUSION_GAIN_SE = 2.0


#: Exact-by-contract recomputations (replays, references) must agree within this (float64 rounding).
EXACT = 1e-9


#: ``opposite_backup_directions`` needs the pipeline's TD losses within this relative gap of the
#: plain-loop recomputation (float64 summation order gives about 1e-16).
TD_REFERENCE_RTOL = 1e-9


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


def derivative_gain_error(log: DayLog, kd: float, steps_per_day: int) -> float:
    """max |D_controller - D_recomputed|, the recomputation by :func:`pid_terms` on the logged errors."""
    _, _, d = pid_terms(log.errors.T, log.kp.T, log.ki.T, kd, 1.0 / steps_per_day)   # (C, T)
    return float((log.d_term.T - d).abs().max())


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
    named = set(torch.nonzero(ex.heldout_campaigns(world)).flatten().tolist())
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
            and report["control_same_minibatches"] and joint_permutation(train, report["critics"][2])
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
    mu = ex.behaviour_probs(world.cfg)(states)                                               # (N, 9)
    counts = torch.bincount(actions, minlength=N_ACTIONS).to(F64)                        # (9,)
    expected, var = mu.sum(0), (mu * (1 - mu)).sum(0)
    z = (counts - expected) / var.clamp(min=1e-12).sqrt()
    return float(z.abs().max())


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


def truth_reference_error(world: World, truth: dict, lam: float) -> float:
    """Largest relative gap between :func:`simulate_truth`'s figures and a recomputation from its raw
    per-(day, segment, campaign) value rewards and CPCs, written out without ``litrepro.rlbp.reward``:

        true_value = mean(r^v + lam (tau - CPC) / tau),   cpc_overshoot = mean(max(0, CPC / tau - 1)),
        value = mean(r^v),   true_value_heldout: the first over the held-out campaigns.
    """
    tau = world.campaigns.target_cpc
    v, cpc = truth["raw"]["value"], truth["raw"]["cpc"]                                  # (days, K, C) each
    fused = v + lam * (tau - cpc) / tau                                                  # (days, K, C)
    held = ex.heldout_campaigns(world)
    ref = {"true_value": fused.mean(), "value": v.mean(), "cpc_overshoot": torch.relu(cpc / tau - 1).mean(),
           "true_value_heldout": fused[:, :, held].mean()}
    return max(abs(truth[k] - float(r)) / max(abs(float(r)), 1e-12) for k, r in ref.items())


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
    probabilities predict, so a policy that samples from the full softmax, or takes its argmax, shows.

    Per action a, with n_a its count, m_a = sum_i p_i(a) its expected count and v_a = sum_i p_i(a)(1 - p_i(a)):
    ``served_action_z`` = max_a |n_a - m_a| / sqrt(v_a) (display), and ``served_action_p`` = min_a of the
    two-sided tail probability of n_a: from the normal approximation where v_a >= 9, and from the Poisson
    law with mean m_a where v_a < 9 (a rare action: a top-k action with probability 0.0003 sampled twice in
    1000 decisions is z = 6 under the normal law, but a 1-in-250 event under the count's own law; the
    normal law raised that false alarm on one seed of the budget study).
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
    expected = probs.sum(0)                                                                # (9,)
    live = var > 1e-9
    z = ((counts - expected) / var.clamp(min=1e-12).sqrt())[live]
    return {"served_propensity_error": error, "served_action_z": float(z.abs().max()) if z.numel() else 0.0,
            "served_action_p": min([count_tail_p(float(n), float(m), float(v))
                                    for n, m, v, ok in zip(counts, expected, var, live) if ok], default=1.0)}


#: ``truth_simulates_served_policy`` fails below this tail probability: the two-sided normal tail at |z| = 5.
SERVED_COUNT_P = 5.733e-7


def count_tail_p(n: float, m: float, v: float) -> float:
    """Two-sided tail probability of a count n with mean m and variance v (:func:`served_policy_simulated`)."""
    from scipy import stats

    if v >= 9.0:
        return float(2 * stats.norm.sf(abs(n - m) / math.sqrt(v)))
    return float(min(1.0, 2 * min(stats.poisson.cdf(n, m), stats.poisson.sf(n - 1, m))))


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
    logged = {ex.day_hash(d) for d in data["draws"]} | {ex.day_hash(d) for d in (demo_days or [])}
    evaluation = [ex.day_hash(d) for d in days]
    return {"eval_day_hashes": evaluation, "days": days,
            "evaluation_days_fresh": len(set(evaluation)) == len(evaluation) and not (set(evaluation) & logged)}


def evaluation_on_heldout(world: World, data: dict, critic_report: dict, evaluation: dict) -> bool:
    """``evaluation_on_heldout_campaigns``: IPS and the held-out TD loss read exactly the held-out campaigns.

    The campaigns of the batch IPS re-weighted and of the batch the held-out TD losses were
    measured on (each recorded where it is used) equal :func:`heldout_campaigns`, and IPS
    read every held-out transition.
    """
    held = torch.nonzero(ex.heldout_campaigns(world)).flatten().tolist()
    return (evaluation["ips_campaigns"] == held and evaluation["ips_rows"] == len(data["heldout"])
            and critic_report["heldout_evaluated_campaigns"] == held)


def stage_audit(world: World, critic: TwoHeadCritic, actor: Actor, data: dict, critic_report: dict,
                actor_report: dict, evaluation: dict, days_report: dict, room: dict | None) -> dict:
    """The recomputations that guard the stages between the logged data and the reported figures
    (each function's docstring says what it recomputes); gaps and ratios, named as in the results.

    ``streams``, ``settings`` and ``references`` (dicts) are read by :func:`seed_checks`; every
    other entry is a gap or flag that the results report."""
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
    replay = stage_draws_replay(world, data, days_report["days"], critic_report, actor_report, evaluation, actor, room)
    out["streams"] = {**replay, "derivation_errors": stream_derivation_error(world, room is not None)}
    out["references"] = figure_references(world, critic, actor, data, critic_report, actor_report, evaluation)
    return out


def seed_checks(world: World, results: dict, *, audit: dict, data: dict, critic_report: dict, actor_report: dict,
                evaluation: dict, fusion: dict, sweep: list[dict], days_report: dict) -> tuple[dict, dict, dict]:
    """The issue-21 checks of one seed's results: (checks, gaps, records) to add to ``extra_checks``,
    ``beyond_seed_metrics`` and the results."""
    streams = audit["streams"]
    paired = paired_arms_share_draws(world, streams, actor_report, fusion, sweep, evaluation)
    settings = effective_settings(world, data, days_report, critic_report, actor_report, sweep)
    refs = audit["references"]
    replay_gap = max(streams["gaps"].values())
    gaps = {"stream_derivation_errors": streams["derivation_errors"], "stage_draws_replay_gap": float(replay_gap),
            **paired, "effective_settings_mismatches": len(settings["mismatches"]),
            "standard_error_gap": figure_gap(results, refs, [n for n in STANDARD_ERRORS if n in refs]),
            "reported_figures_max_gap": figure_gap(results, refs)}
    checks = {"random_streams_rederived": streams["derivation_errors"] == 0,
              "stage_draws_replayed": replay_gap < EXACT,
              "paired_arms_share_draws": paired["shared_draw_mismatches"] == 0
              and paired["sweep_row_at_run_lambda_gap"] == 0.0 and bool(critic_report["control_same_minibatches"]),
              "effective_settings_match_config": not settings["mismatches"],
              "standard_errors_match_reference": gaps["standard_error_gap"] <= REL_TOL,
              "reported_figures_match_audit": gaps["reported_figures_max_gap"] <= REL_TOL
              and curve_lengths_match(results, world.cfg)}
    records = {"effective_settings": settings["record"], "effective_settings_mismatches": settings["mismatches"],
               "stream_replay_gaps": streams["gaps"]}
    return checks, gaps, records


# --- Random streams (issue 21) ----------------------------------------------------------------

#: Every stream a full run takes (``headroom`` only with the headroom), written out again here.
EXPECTED_STREAMS = ("world", "pid_demo", "logged_days", "behaviour", "eval_days", "control_permutation",
                    "critic_init", "critic_minibatches", "actor_init", "actor_minibatches", "truth/learned",
                    "truth/behaviour", "truth/fixed_gain", "headroom")


def derived_seed(seed: int, name: str) -> int:
    """The streams' rule, written out again: the first 8 bytes of sha256("pinterest_rlbp/<seed>/<name>"),
    big-endian, top bit cleared."""
    digest = hashlib.sha256(("pinterest_rlbp/" + str(int(seed)) + "/" + name).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)


def _fresh(seed: int, name: str) -> torch.Generator:
    return torch.Generator().manual_seed(derived_seed(seed, name))


def stream_derivation_error(world: World, with_headroom: bool) -> int:
    """How many recorded streams are wrong: a seed that is not :func:`derived_seed`, first draws that a
    fresh generator from it does not yield, and every expected stream missing or unexpected one taken."""
    seed = world.cfg.seed
    recorded = world.streams.derivations if world.streams is not None else {}
    expected = {n for n in EXPECTED_STREAMS if with_headroom or n != "headroom"}
    bad = len(set(recorded) ^ expected) + int(world.streams is None or world.streams.seed != seed)
    for name, rec in recorded.items():
        g = _fresh(seed, name)
        bad += rec["seed"] != derived_seed(seed, name)
        bad += rec["first_draws"] != torch.randint(2**31, (len(rec["first_draws"]),), generator=g).tolist()
    return int(bad)


def _replay_day(world: World, g: torch.Generator):
    """One day's auctions from stream ``g``: log(p / s) ~ N(0, 0.5^2), logit(q) ~ N(logit_c, 0.5^2), live ~ U < a_t."""
    c = world.campaigns
    steps, n = c.traffic.shape
    shape = (steps, n, world.cfg.opportunities_per_step)                                     # (T, C, M)
    z_price = torch.randn(shape, generator=g, dtype=F64)
    z_click = torch.randn(shape, generator=g, dtype=F64)
    u = torch.rand(shape, generator=g, dtype=F64)
    price = c.price_scale.cpu()[None, :, None] * torch.exp(0.5 * z_price)
    click = torch.sigmoid(c.ctr_logit.cpu()[None, :, None] + 0.5 * z_click)
    return price, click, u < c.traffic.cpu()[:, :, None]


def _days_gap(world: World, days: list, g: torch.Generator) -> float:
    worst = 0.0
    for d in days:
        price, click, live = _replay_day(world, g)
        worst = max(worst, float((price - d.price.cpu()).abs().max() / price.abs().max()),
                    float((click - d.click_prob.cpu()).abs().max()), float((live != d.live.cpu()).any()))
    return worst


def _behaviour_mismatches(actions: Tensor, epsilon: float, g: torch.Generator) -> int:
    """Replay epsilon-greedy draws per (day, segment) of ``actions`` (D, K, C): u < eps, then a uniform action."""
    bad = 0
    for day in actions.cpu():
        for logged in day:                                                                   # (C,)
            explore = torch.rand(logged.shape[0], generator=g, dtype=F64) < epsilon
            uniform = torch.randint(N_ACTIONS, (logged.shape[0],), generator=g)
            bad += int((torch.where(explore, uniform, FIXED_GAIN_ACTION) != logged).sum())
    return bad


def _served_probs(actor, states: Tensor, k: int) -> Tensor:
    """(n, 9) served top-k probabilities, by sorting the logits (not ``top_k_policy``)."""
    with torch.no_grad():
        logits = actor(states)                                                               # (n, 9)
    top = logits.sort(-1, descending=True).values[:, :k]                                     # (n, k)
    return torch.where(logits >= top[:, -1:], torch.exp(logits - top.logsumexp(-1, keepdim=True)), 0.0)


def _init_replay(seed: int, shapes: list[tuple[int, int]]) -> list[Tensor]:
    """nn.Linear's default initialisation replayed: W, b ~ U(-1/sqrt(fan_in), +1/sqrt(fan_in)), layer by layer."""
    out = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for fan_out, fan_in in shapes:
            bound = 1.0 / math.sqrt(fan_in)
            out.append(torch.empty(fan_out, fan_in, dtype=F64).uniform_(-bound, bound))
            out.append(torch.empty(fan_out, dtype=F64).uniform_(-bound, bound))
    return out


def _state_gap(recorded: dict, replayed: list[Tensor]) -> float:
    values = list(recorded.values())
    if len(values) != len(replayed) or any(a.shape != b.shape for a, b in zip(values, replayed)):
        return 1.0                                                  # other shapes: not the replayed weights
    return max(float((a.cpu() - b).abs().max()) for a, b in zip(values, replayed))


def _rows_replay(g: torch.Generator, n: int, batch: int, steps: int) -> Tensor:
    return torch.cat([torch.randint(n, (batch,), generator=g) for _ in range(steps)]) if steps else torch.zeros(0, dtype=torch.long)


def actor_fingerprint(seed: int, rows: Tensor) -> str:
    """:func:`experiment.actor_draws` written out again: sha256 of the init seed and the rows, 16 hex digits."""
    digest = hashlib.sha256(str(seed).encode())
    digest.update(rows.to(torch.int64).contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def stage_draws_replay(world: World, data: dict, days: list, critic_report: dict, actor_report: dict,
                       evaluation: dict, actor, room: dict | None) -> dict:
    """Each stage's draws replayed from its stream's derivation; gaps (0 when every draw is the stream's).

    Auctions of the logged and evaluation days; the behaviour policy's logged actions; the
    control's permutation; the critic's and the actor's initial weights and minibatch rows
    (``batch_size`` rows per step for ``critic_steps``/``actor_steps`` steps: a wrong count
    or batch size shows too); the sampled actions of the behaviour and learned policies'
    truth; and the headroom stream left untouched (constant actions draw nothing).
    """
    cfg, seed = world.cfg, world.cfg.seed
    n_train, hidden, n_feat = len(data["train"]), cfg.hidden, data["train"].state.shape[1]
    gaps = {"logged_days": _days_gap(world, data["draws"], _fresh(seed, "logged_days")),
            "eval_days": _days_gap(world, days, _fresh(seed, "eval_days"))}
    logged = torch.stack([log.actions for log in data["logs"]])                             # (D, K, C)
    gaps["behaviour"] = _behaviour_mismatches(logged, cfg.behaviour_epsilon, _fresh(seed, "behaviour"))
    gaps["truth/behaviour"] = _behaviour_mismatches(evaluation["raw"]["behaviour"]["actions"], cfg.behaviour_epsilon,
                                                    _fresh(seed, "truth/behaviour"))
    raw, g, bad = evaluation["raw"]["learned"], _fresh(seed, "truth/learned"), 0
    for day_states, day_actions in zip(raw["states"], raw["actions"]):                      # (K, C, F), (K, C)
        for states, actions in zip(day_states, day_actions):
            probs = _served_probs(actor, states, cfg.top_k)                                  # (C, 9)
            bad += int((torch.multinomial(probs.cpu(), 1, generator=g).squeeze(1) != actions.cpu()).sum())
    gaps["truth/learned"] = bad
    perm = torch.randperm(n_train, generator=_fresh(seed, "control_permutation"))
    control = critic_report["critics"][2]
    train = data["train"]
    gaps["control_permutation"] = 0.0 if all(
        torch.equal(getattr(control, f).cpu(), getattr(train, f).cpu()[perm]) for f in ("value_reward", "cpc_cost", "reward")) else 1.0
    gaps["critic_init"] = _state_gap(critic_report["init_state"], _init_replay(
        derived_seed(seed, "critic_init"), [(hidden, n_feat), (hidden, hidden), (2 * N_ACTIONS, hidden)]))
    gaps["actor_init"] = _state_gap(actor_report["init_state"], _init_replay(
        derived_seed(seed, "actor_init"), [(hidden, n_feat), (N_ACTIONS, hidden)]))
    critic_rows = _rows_replay(_fresh(seed, "critic_minibatches"), n_train, cfg.batch_size, cfg.critic_steps)
    gaps["critic_minibatches"] = 0.0 if torch.equal(critic_rows, critic_report["rows"].cpu()) else 1.0
    actor_rows = _rows_replay(_fresh(seed, "actor_minibatches"), n_train, cfg.actor_batch_size, cfg.actor_steps)
    gaps["actor_minibatches"] = 0.0 if torch.equal(actor_rows, actor_report["rows"].cpu()) else 1.0
    if room is not None:
        fresh = hashlib.sha256(_fresh(seed, "headroom").get_state().numpy().tobytes()).hexdigest()[:16]
        gaps["headroom"] = 0.0 if room.get("stream_state_sha256") == fresh else 1.0
    return {"gaps": gaps, "actor_fingerprint": actor_fingerprint(derived_seed(seed, "actor_init"), actor_rows)}


def paired_arms_share_draws(world: World, replay: dict, actor_report: dict, fusion: dict, sweep: list[dict],
                            evaluation: dict) -> dict:
    """``paired_arms_share_draws``: arms that must share draws took the same ones.

    The served actor, the value-only control actor and every lambda of the sweep carry the
    fingerprint the audit computes from the replayed ``actor_init`` seed and
    ``actor_minibatches`` rows; the control critic drew the critic's rows
    (``control_same_minibatches``); and the sweep's row at the run's lambda, simulated on the
    served policy's truth stream, reproduces the served policy's truth exactly.
    """
    want = replay["actor_fingerprint"]
    prints = [actor_report.get("actor_draws"), fusion.get("value_only_control_draws")] + [r.get("actor_draws") for r in sweep]
    mismatches = sum(p != want for p in prints)
    at_run = [r for r in sweep if r["lambda"] == world.cfg.lambda_cpc]
    row_gap = max([abs(r[k] - evaluation["learned"][k]) for r in at_run for k in ("value", "cpc_overshoot")], default=0.0)
    return {"shared_draw_mismatches": int(mismatches), "sweep_row_at_run_lambda_gap": float(row_gap)}


def backups_share_draws(arms: dict[str, dict]) -> bool:
    """``backups_share_draws``: every backup of one run drew the same critic rows, permutation, initial
    weights and actor draws, and met the same evaluation days (the records of each arm's results)."""
    keys = ("critic_draws", "actor_draws", "eval_day_hashes")
    first = next(iter(arms.values()))["random_draws"]
    return all(r["random_draws"][k] == first[k] for r in arms.values() for k in keys)


# --- Effective settings (issue 21) ----------------------------------------------------------

#: torch.optim.Adam's defaults, which the configuration leaves alone (written out here).
ADAM = {"optimiser": "Adam", "param_groups": 1, "betas": [0.9, 0.999], "weight_decay": 0, "eps": 1e-08,
        "amsgrad": False, "holds_all_parameters": True}
SWEEP_LAMBDAS = [0.0, 0.5, 1.0, 2.0, 4.0]


def effective_settings(world: World, data: dict, days_report: dict, critic_report: dict, actor_report: dict,
                       sweep: list[dict]) -> dict:
    """Every setting as the stages used it (read back from the optimisers, the drawn batches, the
    target syncs, the logs) beside what the configuration asks; ``mismatches`` names each difference."""
    cfg = world.cfg
    bad = []

    def expect(name, got, want):
        if got != want:
            bad.append(f"{name}: used {got!r}, config {want!r}")

    calls, total = critic_report["settings"], 0
    for who, records in (("critic", calls), ("control critic", critic_report.get("control_settings", []))):
        total = 0
        for i, s in enumerate(records):
            tag = f"{who} call {i}"
            for k, v in ADAM.items():
                expect(f"{tag} {k}", s[k], v)
            expect(f"{tag} lr", s["lr"], cfg.critic_lr)
            expect(f"{tag} adam steps", (s["adam_steps_min"], s["adam_steps_max"]), (float(s["steps"]),) * 2)
            expect(f"{tag} batch sizes", s["batch_sizes"], [cfg.batch_size])
            expect(f"{tag} gamma", s["gamma"], cfg.gamma)
            expect(f"{tag} backup", s["kind"], cfg.critic_backup)
            expect(f"{tag} lambda", s["lam"], cfg.lambda_cpc)
            expect(f"{tag} first step", s["first_step"], total)
            expect(f"{tag} target syncs", s["target_syncs"],
                   [t for t in range(total, total + s["steps"]) if t % cfg.target_update_every == 0])
            total += s["steps"]
        expect(f"{who} steps", total, cfg.critic_steps)
    expect("critic rounds", len(calls), cfg.policy_rounds if cfg.critic_backup == "policy" else 1)
    a = actor_report["settings"]
    for k, v in ADAM.items():
        expect(f"actor {k}", a[k], v)
    expect("actor lr", a["lr"], cfg.actor_lr)
    expect("actor steps", a["steps"], cfg.actor_steps)
    expect("actor adam steps", (a["adam_steps_min"], a["adam_steps_max"]), (float(cfg.actor_steps),) * 2)
    expect("actor batch sizes", a["batch_sizes"], [cfg.actor_batch_size])
    expect("actor temperature", a["temperature"], cfg.actor_temperature)
    expect("actor lambda", a["lam"], cfg.lambda_cpc)
    expect("served support size k", actor_report["support_sizes"], [cfg.top_k])
    action = torch.cat([data["train"].action, data["heldout"].action]).cpu()
    prop = torch.cat([data["train"].propensity, data["heldout"].propensity]).cpu()
    off = prop[action != FIXED_GAIN_ACTION]
    eps_used = float(N_ACTIONS * off.max()) if off.numel() else float("nan")
    if off.numel() and float(off.max() - off.min()) > 1e-12:
        bad.append("behaviour epsilon: logged propensities of non-fixed actions differ")
    if abs(eps_used - cfg.behaviour_epsilon) > 1e-12:
        bad.append(f"behaviour epsilon: used {eps_used!r}, config {cfg.behaviour_epsilon!r}")
    expect("logged days", len(data["logs"]), cfg.logged_days)
    expect("evaluation days", len(days_report["eval_day_hashes"]), cfg.eval_days)
    logs = data["logs"][0]
    expect("segments per day", int(logs.actions.shape[0]), cfg.segments_per_day)
    expect("steps per day", int(logs.phi.shape[0]), cfg.steps_per_day)
    expect("campaigns", int(logs.actions.shape[1]), cfg.n_campaigns)
    expect("opportunities per step", int(data["draws"][0].price.shape[-1]), cfg.opportunities_per_step)
    expect("held-out campaigns", len(torch.unique(data["heldout"].campaign)),
           max(1, math.ceil(cfg.heldout_fraction * cfg.n_campaigns)))
    if sweep:
        expect("lambda sweep", [r["lambda"] for r in sweep], SWEEP_LAMBDAS)
        for r in sweep:                                  # each row's actor trained at that row's lambda
            expect(f"lambda sweep row {r['lambda']} actor lambda", r.get("actor_lambda"), r["lambda"])
    record = {"critic": calls, "actor": {k: v for k, v in a.items()}, "behaviour_epsilon": eps_used,
              "top_k": actor_report["support_sizes"], "logged_days": len(data["logs"]),
              "eval_days": len(days_report["eval_day_hashes"]), "lambda_sweep": [r["lambda"] for r in sweep]}
    return {"record": record, "mismatches": bad}


# --- Standard errors and reported figures (issue 21) ------------------------------------------

def plain_se(values) -> float:
    """s / sqrt(n), s^2 = sum (x - mean)^2 / (n - 1), as a plain loop; 0 for n < 2."""
    xs = [float(x) for x in values]
    n = len(xs)
    if n < 2:
        return 0.0
    mean = sum(xs) / n
    return math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) / math.sqrt(n)


def _ips_terms(world: World, actor, heldout: Transitions) -> dict[str, list[float]]:
    """Per policy, the IPS terms pi(a|s) / mu_logged * r of every held-out transition (plain loops)."""
    eps = world.cfg.behaviour_epsilon
    learned = _served_probs(actor, heldout.state, world.cfg.top_k).tolist()                  # N rows of 9
    out = {"learned": [], "behaviour": [], "fixed_gain": []}
    for row, a, mu, r in zip(learned, heldout.action.tolist(), heldout.propensity.tolist(), heldout.reward.tolist()):
        pis = {"learned": row[a], "behaviour": eps / N_ACTIONS + (1 - eps) * (a == FIXED_GAIN_ACTION),
               "fixed_gain": float(a == FIXED_GAIN_ACTION)}
        for name, pi in pis.items():
            out[name].append(pi / mu * r)
    return out


def _truth_figures(world: World, raw: dict) -> dict[str, float]:
    """true_value, value, cpc_overshoot, true_value_heldout and true_se from a truth log's raw rewards."""
    lam, tau = world.cfg.lambda_cpc, world.campaigns.target_cpc
    v, cpc = raw["value"], raw["cpc"]                                                        # (D, K, C)
    fused = v + lam * (tau - cpc) / tau
    count = max(1, math.ceil(world.cfg.heldout_fraction * world.cfg.n_campaigns))
    return {"true_value": float(fused.mean()), "value": float(v.mean()),
            "cpc_overshoot": float(torch.clamp(cpc / tau - 1, min=0).mean()),
            "true_value_heldout": float(fused[:, :, -count:].mean()),
            "true_se": plain_se([float(day.mean()) for day in fused])}


def _mlp(p: list[Tensor], x: Tensor) -> Tensor:
    """tanh layers, then a linear output: p = [W0, b0, W1, b1, ...] (the networks' forward, written out)."""
    h = x
    for i in range(0, len(p) - 2, 2):
        h = torch.tanh(h @ p[i].T + p[i + 1])
    return h @ p[-2].T + p[-1]


def _td(p_online: list[Tensor], p_target: list[Tensor], batch: Transitions, gamma: float, kind: str, lam: float):
    """(L^v, L^c) with the backup ``kind`` written out (max/min, fused greedy or none); None for ``policy``."""
    if kind == "policy":
        return None
    q = _mlp(p_online, batch.state)                                                          # (N, 18)
    nxt = _mlp(p_target, batch.next_state)                                                   # (N, 18)
    qv_next, qc_next = nxt[:, :N_ACTIONS], nxt[:, N_ACTIONS:]
    keep = gamma * (1 - batch.done)
    if kind == "max_min":
        bv, bc = qv_next.max(1).values, qc_next.min(1).values
    elif kind == "fused_greedy":
        best = (qv_next - lam * qc_next).argmax(1, keepdim=True)
        bv, bc = qv_next.gather(1, best)[:, 0], qc_next.gather(1, best)[:, 0]
    else:
        keep, bv, bc = torch.zeros_like(keep), torch.zeros_like(keep), torch.zeros_like(keep)
    a = batch.action[:, None]
    lv = ((q[:, :N_ACTIONS].gather(1, a)[:, 0] - (batch.value_reward + keep * bv)) ** 2).mean()
    lc = ((q[:, N_ACTIONS:].gather(1, a)[:, 0] - (batch.cpc_cost + keep * bc)) ** 2).mean()
    return float(lv), float(lc)


def figure_references(world: World, critic, actor, data: dict, critic_report: dict, actor_report: dict,
                      evaluation: dict) -> dict[str, float]:
    """Reference values, by code of this module, for the figures the results report.

    Keys are ``metrics``/``beyond_seed_metrics`` names, or ``curves.<name>[i]`` for a curve
    point.  TD losses are rebuilt from the recorded initial weights, the final critic and the
    control (not for the ``policy`` backup, whose next-state policies are not kept); the
    actor's first gradient norm and loss from its recorded initial weights and first rows;
    IPS, truth and their standard errors from the held-out log and the truth logs.
    """
    cfg = world.cfg
    with torch.no_grad():
        init = [t.to(world.device) for t in critic_report["init_state"].values()]
        final = [t.detach() for t in critic.state_dict().values()]
        control = [t.detach() for t in critic_report["critics"][1].state_dict().values()]
        held, train = data["heldout"], data["train"]
        ref = {}
        losses = {"before": _td(init, init, held, cfg.gamma, cfg.critic_backup, cfg.lambda_cpc),
                  "after": _td(final, final, held, cfg.gamma, cfg.critic_backup, cfg.lambda_cpc),
                  "control": _td(control, control, held, cfg.gamma, cfg.critic_backup, cfg.lambda_cpc)}
        if losses["after"] is not None:
            b, a, c = losses["before"], losses["after"], losses["control"]
            ref.update(td_loss_before=b[0] + b[1], td_loss_after=a[0] + a[1], td_loss_value_before=b[0],
                       td_loss_cpc_before=b[1], td_loss_value_after=a[0], td_loss_cpc_after=a[1],
                       control_td_loss_after=c[0] + c[1], control_ratio=(a[0] + a[1]) / (c[0] + c[1]))
            first = train.index(critic_report["rows"][:cfg.batch_size].to(train.action.device))
            v0, c0 = _td(init, init, first, cfg.gamma, cfg.critic_backup, cfg.lambda_cpc)
            ref["curves.td_loss_value[0]"], ref["curves.td_loss_cpc[0]"] = v0, c0
        q = _mlp(final, held.state)
        fused = q[:, :N_ACTIONS] - cfg.lambda_cpc * q[:, N_ACTIONS:]
        logits = actor(held.state)
        ref["fusion_changes_argmax_fraction"] = float((fused.argmax(1) != q[:, :N_ACTIONS].argmax(1)).double().mean())
        ref["actor_fused_argmax_agreement"] = float((logits.argmax(1) == fused.argmax(1)).double().mean())
        probs = _served_probs(actor, held.state, cfg.top_k)
        ranked = probs.sort(-1, descending=True).values[:, :cfg.top_k]
        ref["negligible_last_action_fraction"] = float((ranked[:, -1] < 1e-3).double().mean())
        for i, m in enumerate(probs.mean(0).tolist()):
            ref[f"curves.mean_action_probs[{i}]"] = m
        over = count = 0
        tau = world.campaigns.target_cpc
        for log in data["logs"]:
            over += int((log.cpc > tau).sum())
            count += log.cpc.numel()
        ref["segments_over_target_fraction"] = over / count
    # the actor's first update, by autograd of the written-out loss at the recorded initial weights
    rows = actor_report["rows"][:cfg.actor_batch_size].to(data["train"].action.device)
    if rows.numel() == 0 or int(rows.max()) >= len(data["train"]):
        rows = rows[:0]                                    # it drew rows outside the training log: no reference;
        ref["actor_gradient_norm"] = ref["curves.actor_loss[0]"] = -1.0   # a value no norm or loss takes shows it
    if rows.numel() == 0:
        return _with_ips_and_truth(ref, world, actor, data, evaluation)
    leaves = [t.to(world.device).clone().requires_grad_(True) for t in actor_report["init_state"].values()]
    with torch.no_grad():
        qs = _mlp(final, data["train"].state[rows])
        s = qs[:, :N_ACTIONS] - actor_report["lam"] * qs[:, N_ACTIONS:]
        target = torch.softmax((s - s.mean(1, keepdim=True)) / (s.std(1, keepdim=True) + 1e-8) / cfg.actor_temperature, 1)
    loss = -(target * torch.log_softmax(_mlp(leaves, data["train"].state[rows]), 1)).mean(1).mean()
    grads = torch.autograd.grad(loss, leaves)
    ref["actor_gradient_norm"] = math.sqrt(sum(float((g ** 2).sum()) for g in grads))
    ref["curves.actor_loss[0]"] = float(loss.detach())
    return _with_ips_and_truth(ref, world, actor, data, evaluation)


def _with_ips_and_truth(ref: dict, world: World, actor, data: dict, evaluation: dict) -> dict:
    """``ref`` plus each policy's IPS, truth and standard errors (plain loops over the logs)."""
    terms = _ips_terms(world, actor, data["heldout"])
    for name, xs in terms.items():
        ref[f"{name}_ips"] = sum(xs) / len(xs)
        ref[f"{name}_ips_se"] = plain_se(xs)
        for k, v in _truth_figures(world, evaluation["raw"][name]).items():
            ref[f"{name}_{k}"] = v
    return ref


STANDARD_ERRORS = tuple(f"{p}_{k}" for p in ("learned", "behaviour", "fixed_gain") for k in ("ips_se", "true_se"))


def _reported(results: dict, name: str):
    if name.startswith("curves."):
        curve, index = name[len("curves."):].rstrip("]").split("[")
        values = results["curves"].get(curve, [])
        return values[int(index)] if int(index) < len(values) else None
    return results["metrics"].get(name, results["beyond_seed_metrics"].get(name))


def figure_gap(results: dict, references: dict, names=None) -> float:
    """Largest gap |reported - reference| / max(|reference|, 1) over ``names`` (default: every reference);
    a figure the results do not report counts as a gap of 1."""
    gap = 0.0
    for name in references if names is None else names:
        value = _reported(results, name)
        ref = references[name]
        gap = max(gap, 1.0 if value is None else abs(value - ref) / max(abs(ref), 1.0))
    return gap


def curve_lengths_match(results: dict, cfg) -> bool:
    c = results["curves"]
    return (len(c["td_loss_value"]) == len(c["td_loss_cpc"]) == cfg.critic_steps
            and len(c["actor_loss"]) == cfg.actor_steps and len(c["mean_action_probs"]) == N_ACTIONS)


# --- The checks, assembled (moved from ``experiment.collect_results``) -------------------------

def seed_contract_checks(world: World, *, critic_report: dict, actor_report: dict, data: dict, evaluation: dict,
                         fusion: dict, guard, backup: dict, row_mass: float) -> dict:
    """The eight checks the seed file records, each on the pipeline's own data and its fixture."""
    cfg = world.cfg
    return {
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


def stage_checks(world: World, *, critic_report: dict, actor_report: dict, data: dict, evaluation: dict,
                 days_report: dict, transitions: dict, auction_error: float, audit: dict) -> dict:
    """Our checks of the stages the seed's checks do not reach (from issues before 21)."""
    out = {
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
        "truth_simulates_served_policy": audit["served_propensity_error"] < 1e-12 and audit["served_action_p"] > SERVED_COUNT_P,
        "auction_draws_match_their_distribution": audit["draws_moment_error"] < 0.01,
    }
    if "headroom_reference_error" in audit:
        out["headroom_matches_reference"] = audit["headroom_reference_error"] < EXACT
    return out


#: Every check of ``pinterest_rlbp``: name (its key in the results) -> (the stage it guards, what it recomputes).
GUARDS: dict[str, tuple[str, str]] = {
    # the seed contract's eight
    "actual_reward_regression_update": ("fit_critic", "held-out TD loss against a permuted-reward control critic with "
                                        "the same rows and a joint permutation of (r^v, c, r); both heads moved"),
    "CPC_reduction_retains_negative_sign": ("collect_logged_data", "CPC cost (CPC - tau) / tau and fused reward of every "
                                            "logged transition, written out again; both signs present; the fixture"),
    "opposite_backup_directions": ("fit_critic", "TD losses of the trained critic against plain loops over rows and "
                                   "actions with max for value and min for cost; the backup fixture"),
    "fusion_changes_preference": ("fit_actor", "fused-score gain of the served actor over a value-only control actor "
                                  "that shares its draws, beyond 2 standard errors; the fusion fixture"),
    "exact_top_k_support": ("fit_actor, evaluate_policies", "support of the served policy against the k largest logits; "
                            "row mass of every served row"),
    "nine_bounded_PID_actions": ("build_world, collect_logged_data", "the 3x3 grid by a plain loop, its bounds, and the "
                                 "gains and PID output the simulator applied, replayed from the logged errors"),
    "ordinary_IPS_not_self_normalized": ("evaluate_policies", "ordinary IPS as a plain loop; logged propensities "
                                         "against mu's formula; the IPS/SNIPS fixture"),
    "no_live_bidder_or_model_calls": ("run", "the offline guard's count of network and model-loading calls"),
    # stage checks of earlier issues
    "heldout_campaigns_not_trained": ("collect_logged_data, fit_critic, fit_actor", "the held-out set recomputed; the "
                                      "campaigns the critic's and actor's minibatches drew are disjoint from it"),
    "transitions_consistent": ("collect_logged_data", "states, next states and done flags replayed from each day's "
                               "per-step trace"),
    "auction_replay_matches": ("simulator", "second-price auctions, budget stop, CPC and value reward of one campaign "
                               "per kind, replayed auction by auction"),
    "target_network_synced_on_schedule": ("fit_critic", "the target network against the audit's own copy of the critic "
                                          "at each scheduled sync"),
    "evaluation_on_heldout_campaigns": ("evaluate_policies, fit_critic", "the campaigns IPS and the held-out TD loss read"),
    "evaluation_days_fresh": ("draw_eval_days, simulate_truth", "hashes of the evaluation days against the logged and "
                              "demo days, and against the days each truth ran on"),
    "truth_scored_with_run_lambda": ("simulate_truth", "true value, value, CPC overshoot from the raw truth logs"),
    "market_matches_its_definition": ("build_world, collect_logged_data", "spend plan, target CPC, budget and the "
                                      "over-target share by plain loops"),
    "logged_actions_follow_mu": ("collect_logged_data", "logged action counts against mu's expected counts (z-score)"),
    "minibatches_cover_training_set": ("fit_critic, fit_actor", "distinct rows drawn against uniform sampling's"),
    "actor_trained_on_fused_scores": ("fit_actor", "the first actor loss by a plain loop over the recorded rows"),
    "ips_weights_are_served_policy": ("evaluate_policies", "pi(a|s) IPS used against the served top-k recomputed by a sort"),
    "truth_simulates_served_policy": ("evaluate_policies", "truth propensities and action counts against the served "
                                      "top-k policy recomputed from the truth states (each count's tail "
                                      "probability under its normal or, for a rare action, Poisson law)"),
    "auction_draws_match_their_distribution": ("collect_logged_data", "moments of the logged auction draws"),
    "headroom_matches_reference": ("headroom", "the oracles by plain loops over the (9, C) table; its fixed-gain row "
                                   "against the fixed-gain truth"),
    # issue 21: streams, settings, standard errors, reported figures
    "random_streams_rederived": ("every stage (streams)", "each stream's seed by the rule written out again, its first "
                                 "draws, and the set of streams taken"),
    "stage_draws_replayed": ("collect_logged_data, draw_eval_days, fit_critic, fit_actor, evaluate_policies, headroom",
                             "every draw replayed from its stream: auctions, behaviour actions, control permutation, "
                             "initial weights, minibatch rows, the truth's sampled actions; headroom draws nothing"),
    "paired_arms_share_draws": ("fit_actor, fusion_diagnostics, lambda_sweep, fit_critic", "the served actor, the "
                                "value-only control and every lambda share the replayed actor draws; the control "
                                "critic's rows; the sweep's row at the run's lambda equals the served truth"),
    "backups_share_draws": ("run_arms", "every backup's critic rows, actor draws and evaluation days are the same "
                            "(multi-backup runs only)"),
    "effective_settings_match_config": ("fit_critic, fit_actor, collect_logged_data, draw_eval_days, lambda_sweep",
                                        "optimiser param groups read back (lr, betas, weight decay, eps), Adam step "
                                        "counts, steps, batch sizes, gamma, backup, lambda, temperature, target syncs, "
                                        "k, epsilon, day counts, against the configuration"),
    "standard_errors_match_reference": ("evaluate_policies", "each IPS and truth standard error by a plain loop "
                                        "(n - 1 divisor, / sqrt n)"),
    "reported_figures_match_audit": ("collect_results", "every figure of metrics, beyond_seed_metrics and curves the "
                                     "audit can rebuild (TD losses, control ratio, gradient norm, IPS, truth, fusion "
                                     "fractions, curve points), by code of its own"),
}
