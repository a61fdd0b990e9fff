"""Hypotheses for why our held-out TD losses sit far from the seed's: units, and the update protocol.

The seed file records ``td_loss_before`` 0.0231 +- 0.0136 and ``td_loss_after``
0.0208 +- 0.0123 (n = 3), and on every seed after / before = 0.9025 = 0.95^2 to
machine precision.  Our pipeline's figures are on another scale (the notebook's Section 10 prints them
beside the record, with z-scores).  This module runs
two experiments on the pipeline's own data, critic and training (``make
rlbp-td-calibration``; ``python -m litrepro study rlbp-td-calibration`` writes
``rendered/pinterest_rlbp/td_calibration.json``).  Both are our reconstruction: the
seed file says nothing about its units or its update, so the hypotheses are ours.

What the figures are (``litrepro.rlbp.critic``): on the held-out transitions, for each
head h (value: reward r^v, max backup; CPC: cost c, min backup), with the critic
bootstrapping from itself,

    y_h  = r_h + gamma (1 - d) B_h Q_h(s', .)          B_v = max, B_c = min
    L_h  = mean_i (Q_h(s_i, a_i) - y_h,i)^2,            td_loss = L_v + L_c

``td_loss_before`` is L of the freshly initialised critic Q0, ``td_loss_after`` of the
critic after ``critic_steps`` Adam steps on TD minibatches (target network synced
every ``target_update_every`` steps).

(a) Units.  Write q = Q0(s, a), b = gamma (1 - d) B Q0(s', .) and delta = q - b.  If the
rewards are multiplied by c and the critic's outputs by s (the output layer is linear,
so scaling its weights and bias by s scales Q0 exactly),

    L(c, s) = A c^2 - 2 B c s + C s^2,      A = mean r^2,  B = mean r delta,  C = mean delta^2

summed over the two heads.  L is a homogeneous quadratic: a change of units, which
rescales rewards and values together (c = s = k), gives L(k, k) = k^2 L(1, 1) exactly,
an exponent of 2 on any data.  Rescaling the rewards alone (s = 1) leaves the floor C,
the initial critic's own TD error, so its exponent d ln L / d ln c = 2c (Ac - B) / L(c, 1)
falls below 2 as c shrinks, and no reward scale brings L below min_c L(c, 1).  The unit
that puts our ``td_loss_before`` at the record's mean is fitted on the record's seeds
(42-44) and tested on the others.  Retraining in that unit tests whether the learned
decisions depend on it (Adam's step is fixed in parameter units, so they can).

(b) The ratio.  A relaxation step of size alpha toward fixed targets y0 (computed once
from Q0),

    Q1 = Q0 + alpha (y0 - Q0)   =>   Q1 - y0 = (1 - alpha)(Q0 - y0)   =>   L1 / L0 = (1 - alpha)^2,

gives 0.9025 for alpha = 0.05 on any data and any critic.  Beside it: our trained ratio
(the pipeline's Adam) at every step of training, from 1 step to ``critic_steps``, and
the step at which it first falls to 0.9025.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from scipy import stats as sps
from torch import Tensor

from litrepro.paths import RENDERED
from litrepro.rlbp.actor import fused_scores, top_k_policy
from litrepro.rlbp.critic import (Transitions, TwoHeadCritic, backup_targets, heldout_td_loss, sync_target,
                                  td_losses, train_critic)
from litrepro.rlbp.pid import N_ACTIONS
from litrepro.stats import fmt_ci, mean_interval, paired_ci, verdict

F64 = torch.float64
OUT = RENDERED / "pinterest_rlbp" / "td_calibration.json"
#: The relaxation step of hypothesis (b) (ours): (1 - 0.05)^2 = 0.9025, the recorded ratio.
ALPHA = 0.05
RECORDED_RATIO = (1.0 - ALPHA) ** 2
#: Scales at which L is computed directly (rewards alone, and rewards with the critic's outputs).
SCALES = (0.03, 0.1, 0.3, 1.0, 3.0)
#: Training budgets (Adam steps) reported in the ratio table (every step is recorded).
BUDGETS = (1, 2, 5, 10, 20, 50, 100, 200, 400, 600)
#: The record's seeds: the unit is fitted on them and tested on the others.
FIT_SEEDS = (42, 43, 44)
#: Relative tolerance of the checks that recompute a figure two ways in float64.
RTOL = 1e-9


#: The study's own checks: {check: (stage, what it recomputes)}, shown in the trust report beside
#: :data:`litrepro.rlbp.audit.GUARDS` (``litrepro.trust``); each has a fault test in
#: ``tests/test_rlbp_td_calibration.py``.
STUDY_GUARDS: dict[str, tuple[str, str]] = {
    "quadratic_matches_direct": ("td_calibration.seed_figures (a)", "L(c, s) from the fitted (A, B, C) against the "
                                 "held-out TD loss recomputed directly at every scale, rewards alone and jointly"),
    "decomposition_sums": ("td_calibration.head_terms", "per head, mean q^2 - 2 mean qy + mean y^2 against the "
                           "loss mean (q - y)^2 computed directly"),
    "loop_matches_pipeline": ("td_calibration.heldout_curve", "the per-step curve's two ends against train_critic's "
                              "heldout_before / heldout_after on the same data, weights and minibatch rows"),
    "relaxation_identity": ("td_calibration.relaxation_ratio", "one relaxation step's loss ratio against "
                            "(1 - alpha)^2 = 0.9025"),
    "unit_law_exact": ("td_calibration.seed_figures (a, retraining)", "the critic's TD loss in unit k against "
                       "k^2 times its loss in unit 1"),
}


# --- the experiment's pieces (pure functions, tested on tiny cases) ---------------------------

def rescaled(batch: Transitions, c: float) -> Transitions:
    """The same transitions with every reward in units 1/c: r^v, the CPC cost and the fused reward times c."""
    return dataclasses.replace(batch, value_reward=c * batch.value_reward, cpc_cost=c * batch.cpc_cost,
                               reward=c * batch.reward)


def scaled_critic(critic: TwoHeadCritic, s: float) -> TwoHeadCritic:
    """A copy whose outputs are exactly s times ``critic``'s: the linear heads' weight and bias times s."""
    out = copy.deepcopy(critic)
    with torch.no_grad():
        out.heads.weight.mul_(s)
        out.heads.bias.mul_(s)
    return out


def head_terms(critic: TwoHeadCritic, batch: Transitions, gamma: float) -> dict[str, dict[str, float]]:
    """Per head, the pieces of its held-out TD loss (max_min backup, the critic bootstrapping from itself).

    With q = Q(s, a) (N,), y the target (N,), r the head's reward (N,) and delta = q - (y - r):
      ``loss`` = mean (q - y)^2 = ``q_second_moment`` - 2 ``cross`` + ``target_second_moment``,
      ``target_second_moment`` = mean y^2 = ``target_variance`` + ``target_mean``^2 (population variance),
      ``A`` = mean r^2, ``B`` = mean r delta, ``C`` = mean delta^2 (module docstring, (a)).
    """
    with torch.no_grad():
        qv_now, qc_now = critic(batch.state)                                   # (N, 9) each
        qv_next, qc_next = critic(batch.next_state)                            # (N, 9) each
        yv, yc = backup_targets(batch.value_reward, batch.cpc_cost, qv_next, qc_next, batch.done, gamma)  # (N,) each
    taken = batch.action[:, None]                                              # (N, 1)
    out = {}
    for name, q_now, y, r in (("value", qv_now, yv, batch.value_reward), ("cpc", qc_now, yc, batch.cpc_cost)):
        q = q_now.gather(1, taken).squeeze(1)                                  # (N,) Q(s, a) of the logged action
        delta = q - (y - r)                                                    # (N,) q - bootstrap
        out[name] = {"loss": float((q - y).pow(2).mean()), "target_second_moment": float(y.pow(2).mean()),
                     "target_mean": float(y.mean()), "target_variance": float(y.var(unbiased=False)),
                     "q_second_moment": float(q.pow(2).mean()), "cross": float((q * y).mean()),
                     "A": float(r.pow(2).mean()), "B": float((r * delta).mean()), "C": float(delta.pow(2).mean())}
    return out


def quadratic(terms: Mapping[str, Mapping[str, float]]) -> tuple[float, float, float]:
    """(A, B, C) of L(c, s) = A c^2 - 2 B c s + C s^2, summed over the heads."""
    return tuple(sum(terms[h][k] for h in ("value", "cpc")) for k in ("A", "B", "C"))


def loss_at(abc: Sequence[float], c: float, s: float = 1.0) -> float:
    """L(c, s) = A c^2 - 2 B c s + C s^2."""
    a, b, cc = abc
    return a * c * c - 2.0 * b * c * s + cc * s * s


def reward_only_exponent(abc: Sequence[float], c: float) -> float:
    """d ln L(c, 1) / d ln c = 2 c (A c - B) / L(c, 1): the exponent when only the rewards are rescaled."""
    a, b, _ = abc
    return 2.0 * c * (a * c - b) / loss_at(abc, c)


def reward_only_floor(abc: Sequence[float]) -> float:
    """min over c > 0 of L(c, 1): C - B^2 / A when B > 0 (the minimum at c = B / A), else C (as c -> 0)."""
    a, b, cc = abc
    return cc - b * b / a if b > 0 else cc


def slope(x0: float, y0: float, x1: float, y1: float) -> float:
    """ln(y1 / y0) / ln(x1 / x0): the log-log slope between two points."""
    return math.log(y1 / y0) / math.log(x1 / x0)


def relaxation_step(q0: Tensor, y0: Tensor, alpha: float = ALPHA) -> Tensor:
    """Q1 = Q0 + alpha (y0 - Q0) at the logged (s, a); targets y0 fixed.  (N,) -> (N,)."""
    return q0 + alpha * (y0 - q0)


def relaxation_ratio(critic: TwoHeadCritic, batch: Transitions, gamma: float, alpha: float = ALPHA) -> dict[str, float]:
    """Held-out TD loss before and after one relaxation step toward the fixed targets of ``critic``.

    Both heads relax; the targets y0 are the critic's own (max/min backups), computed once.
    Returns ``before`` = sum_h mean (Q0 - y0)^2, ``after`` = sum_h mean (Q1 - y0)^2, ``ratio``.
    """
    with torch.no_grad():
        qv_now, qc_now = critic(batch.state)                                   # (N, 9)
        qv_next, qc_next = critic(batch.next_state)                            # (N, 9)
        yv, yc = backup_targets(batch.value_reward, batch.cpc_cost, qv_next, qc_next, batch.done, gamma)
    taken = batch.action[:, None]
    before = after = 0.0
    for q_now, y in ((qv_now, yv), (qc_now, yc)):
        q0 = q_now.gather(1, taken).squeeze(1)                                 # (N,)
        q1 = relaxation_step(q0, y, alpha)                                     # (N,)
        before += float((q0 - y).pow(2).mean())
        after += float((q1 - y).pow(2).mean())
    return {"before": before, "after": after, "ratio": after / before}


def heldout_curve(critic: TwoHeadCritic, train: Transitions, heldout: Transitions, *, steps: int, lr: float,
                  batch_size: int, gamma: float, target_update_every: int, generator: torch.Generator) -> list[float]:
    """The held-out TD loss (L^v + L^c) before training and after each of ``steps`` Adam steps: (steps + 1,).

    The same loop as :func:`litrepro.rlbp.critic.train_critic` (target synced when step %
    target_update_every == 0, minibatch rows from ``generator``, Adam on L^v + L^c), with
    the held-out loss measured after every step; ``loop_matches_pipeline`` checks its two
    ends against ``train_critic``'s ``heldout_before``/``heldout_after``.  Trains ``critic`` in place.
    """
    target = copy.deepcopy(critic).requires_grad_(False)
    opt = torch.optim.Adam(critic.parameters(), lr=lr)
    curve = [sum(heldout_td_loss(critic, heldout, gamma))]
    for step in range(steps):
        if step % target_update_every == 0:
            sync_target(target, critic)
        idx = torch.randint(len(train), (batch_size,), generator=generator)
        loss_v, loss_c = td_losses(critic, target, train.index(idx), gamma)
        opt.zero_grad(set_to_none=True)
        (loss_v + loss_c).backward()
        opt.step()
        curve.append(sum(heldout_td_loss(critic, heldout, gamma)))
    return curve


def first_step_at_or_below(ratios: Sequence[float], level: float) -> int | None:
    """The first training step t >= 1 with ratios[t] <= level (``ratios[0]`` is 1, before training); None if never."""
    for t in range(1, len(ratios)):
        if ratios[t] <= level:
            return t
    return None


def served_decisions(actor, states: Tensor, k: int) -> Tensor:
    """(N,) the served top-k policy's most probable action per state."""
    with torch.no_grad():
        return top_k_policy(actor(states), k).argmax(-1)


def greedy_decisions(critic: TwoHeadCritic, states: Tensor, lam: float) -> Tensor:
    """(N,) argmax_a Q^v - lambda Q^c: the critic's greedy fused decision per state."""
    with torch.no_grad():
        return fused_scores(*critic(states), lam).argmax(-1)


# --- one seed --------------------------------------------------------------------------------

def seed_figures(cfg, *, unit: float | None = None) -> dict[str, Any]:
    """Every per-seed figure of both experiments, on the pipeline's data, critic and training.

    ``unit`` is the reward-and-value unit k of the retraining arm (None: skip it; the study
    fits k on the record's seeds first).  Streams as in the pipeline (``litrepro.rlbp.streams``):
    the data, the critic's initial weights and its minibatch rows are the notebook's.
    """
    from litrepro.rlbp import experiment as ex
    from litrepro.rlbp.streams import Streams, stream_seed
    from litrepro.seeding import seed_everything

    seed_everything(cfg.seed)
    streams = Streams(cfg.seed)
    device = torch.device("cpu")
    world = ex.build_world(cfg, streams, device)
    data = ex.collect_logged_data(world, streams)
    train, heldout = data["train"], data["heldout"]
    critic, report = ex.fit_critic(world, data, streams, with_control=False)      # the pipeline's critic
    init = TwoHeadCritic(train.state.shape[1], cfg.hidden)
    init.load_state_dict(report["init_state"])
    before, after = sum(report["heldout_before"]), sum(report["heldout_after"])
    hyper = dict(lr=cfg.critic_lr, batch_size=cfg.batch_size, gamma=cfg.gamma,
                 target_update_every=cfg.target_update_every)

    # (a) units: decomposition and the quadratic law, checked against direct recomputation
    terms = head_terms(init, heldout, cfg.gamma)
    abc = quadratic(terms)
    direct_reward_only = [sum(heldout_td_loss(init, rescaled(heldout, c), cfg.gamma)) for c in SCALES]
    direct_joint = [sum(heldout_td_loss(scaled_critic(init, c), rescaled(heldout, c), cfg.gamma)) for c in SCALES]
    predicted = [loss_at(abc, c) for c in SCALES] + [loss_at(abc, c, c) for c in SCALES]
    quad_gap = max(abs(p - d) / abs(d) for p, d in zip(predicted, direct_reward_only + direct_joint))
    terms_gap = max(abs(t["q_second_moment"] - 2 * t["cross"] + t["target_second_moment"] - t["loss"]) / t["loss"]
                    for t in terms.values())

    # (b) the ratio: relaxation on our held-out data, and our Adam ratio after every step
    relax = relaxation_ratio(init, heldout, cfg.gamma)
    curve_critic = copy.deepcopy(init)
    curve = heldout_curve(curve_critic, train, heldout, steps=cfg.critic_steps,
                          generator=streams.generator("critic_minibatches"), **hyper)
    ratios = [x / curve[0] for x in curve]
    loop_gap = max(abs(curve[0] - before) / before, abs(curve[-1] - after) / after)

    out = {"seed": cfg.seed, "td_loss_before": before, "td_loss_after": after, "ratio": after / before,
           "td_loss_value_before": report["heldout_before"][0], "td_loss_cpc_before": report["heldout_before"][1],
           "heads": terms, "A": abc[0], "B": abc[1], "C": abc[2],
           "reward_only_floor": reward_only_floor(abc),
           "reward_only_exponent_at_1": reward_only_exponent(abc, 1.0),
           "direct_reward_only": direct_reward_only, "direct_joint": direct_joint,
           "relaxation": relax, "ratio_curve": ratios,
           "crossing_step": first_step_at_or_below(ratios, RECORDED_RATIO),
           "checks": {"quadratic_matches_direct": quad_gap <= RTOL, "decomposition_sums": terms_gap <= RTOL,
                      "loop_matches_pipeline": loop_gap <= RTOL,
                      "relaxation_identity": abs(relax["ratio"] - RECORDED_RATIO) <= 1e-12},
           "gaps": {"quadratic_matches_direct": quad_gap, "decomposition_sums": terms_gap,
                    "loop_matches_pipeline": loop_gap, "relaxation_identity": abs(relax["ratio"] - RECORDED_RATIO)}}
    if unit is None:
        return out

    # (a, continued) retrain in unit k: rewards and the initial critic's outputs times k, same minibatch rows
    k = unit
    critic_k = scaled_critic(init, k)
    rep_k = train_critic(critic_k, rescaled(train, k), rescaled(heldout, k), steps=cfg.critic_steps,
                         generator=streams.generator("critic_minibatches"), **hyper)
    # a control for the decisions: the same critic in unit 1 on another minibatch order (our reconstruction)
    other = torch.Generator().manual_seed((stream_seed(cfg.seed, "critic_minibatches") + 1) % 2**63)
    critic_r = copy.deepcopy(init)
    train_critic(critic_r, train, heldout, steps=cfg.critic_steps, generator=other, **hyper)
    actors = {name: ex.fit_actor(world, c, data, streams)[0] for name, c in
              (("pipeline", critic), ("unit", critic_k), ("reorder", critic_r))}
    states = heldout.state
    served = {n: served_decisions(a, states, cfg.top_k) for n, a in actors.items()}
    greedy = {n: greedy_decisions(c, states, cfg.lambda_cpc) for n, c in
              (("pipeline", critic), ("unit", critic_k), ("reorder", critic_r))}
    before_k = sum(rep_k["heldout_before"])
    out["unit"] = {"k": k, "td_loss_before": before_k, "td_loss_after_trained": sum(rep_k["heldout_after"]),
                   "td_loss_after_expressed": k * k * after,
                   "ratio_trained": sum(rep_k["heldout_after"]) / before_k,
                   "served_agreement_unit": float((served["unit"] == served["pipeline"]).to(F64).mean()),
                   "served_agreement_reorder": float((served["reorder"] == served["pipeline"]).to(F64).mean()),
                   "greedy_agreement_unit": float((greedy["unit"] == greedy["pipeline"]).to(F64).mean()),
                   "greedy_agreement_reorder": float((greedy["reorder"] == greedy["pipeline"]).to(F64).mean())}
    unit_gap = abs(before_k - k * k * before) / (k * k * before)
    out["checks"]["unit_law_exact"] = unit_gap <= RTOL
    out["gaps"]["unit_law_exact"] = unit_gap
    return out


def spread_ratio(cv_a: float, n_a: int, cv_b: float, n_b: int) -> dict[str, float]:
    """cv_a / cv_b with a 95% interval from the F distribution (our approximation: each mean held fixed,
    so a CV's sampling spread is its SD's, (n - 1) s^2 / sigma^2 ~ chi^2_{n-1} under normality):

        [r / sqrt(F_{0.975}(n_a - 1, n_b - 1)),  r / sqrt(F_{0.025}(n_a - 1, n_b - 1))],   r = cv_a / cv_b.
    """
    r = cv_a / cv_b
    df = (n_a - 1, n_b - 1)
    return {"estimate": r, "ci95_low": r / math.sqrt(sps.f.ppf(0.975, *df)),
            "ci95_high": r / math.sqrt(sps.f.ppf(0.025, *df)), "df": list(df)}


def initial_td_loss(cfg) -> float:
    """The pipeline's ``td_loss_before`` without training: the data and the initial critic of seed ``cfg.seed``
    (the critic's weights from stream ``critic_init``, as ``fit_critic`` makes them).  Used to fit the unit."""
    from litrepro.rlbp import experiment as ex
    from litrepro.rlbp.simulator import FEATURES
    from litrepro.rlbp.streams import Streams
    from litrepro.seeding import seed_everything

    seed_everything(cfg.seed)
    streams = Streams(cfg.seed)
    world = ex.build_world(cfg, streams, torch.device("cpu"))
    data = ex.collect_logged_data(world, streams)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(streams.generator("critic_init").initial_seed())
        critic = TwoHeadCritic(len(FEATURES), cfg.hidden)
    return sum(heldout_td_loss(critic, data["heldout"], cfg.gamma))


# --- over seeds ------------------------------------------------------------------------------

def fit_unit(rows: Sequence[Mapping[str, Any]], recorded_mean: float, seeds: Sequence[int] = FIT_SEEDS) -> float:
    """k with k^2 mean_{seeds} td_loss_before = the recorded mean (the joint law L(k, k) = k^2 L(1, 1))."""
    picked = [r["td_loss_before"] for r in rows if r["seed"] in seeds]
    if len(picked) != len(seeds):
        raise ValueError(f"fit_unit needs seeds {list(seeds)}, got {sorted(r['seed'] for r in rows)}")
    return math.sqrt(recorded_mean / (sum(picked) / len(picked)))


def z(run_mean: float, rec: Mapping[str, float]) -> float:
    """(run mean - recorded mean) / recorded SD (the project's z; ``litrepro.calibration``)."""
    return (run_mean - rec["mean"]) / rec["std"]


def _interval(values: Sequence[float]) -> dict[str, Any]:
    return mean_interval(list(values))


def _against(values: Sequence[float], level: float) -> dict[str, Any]:
    """Paired-form interval of values - level (a constant), with its verdict."""
    ci = paired_ci(list(values), [level] * len(values))
    return {**ci, "verdict": verdict(ci)}


def summarise(rows: Sequence[Mapping[str, Any]], recorded: Mapping[str, Mapping[str, float]], unit: float) -> dict:
    """The study's JSON body from the per-seed rows (sorted by seed) and the recorded aggregates."""
    rows = sorted(rows, key=lambda r: r["seed"])
    rec_b, rec_a = recorded["td_loss_before"], recorded["td_loss_after"]
    test = [r for r in rows if r["seed"] not in FIT_SEEDS]
    col = {key: [r[key] for r in rows] for key in ("td_loss_before", "td_loss_after", "ratio", "A", "B", "C",
                                                    "reward_only_floor", "reward_only_exponent_at_1")}
    share = [(r["heads"]["value"]["target_second_moment"] + r["heads"]["cpc"]["target_second_moment"])
             / r["td_loss_before"] for r in rows]
    slopes_r = {f"{a}-{b}": [slope(a, r["direct_reward_only"][i], b, r["direct_reward_only"][i + 1]) for r in rows]
                for i, (a, b) in enumerate(zip(SCALES, SCALES[1:]))}
    slopes_j = [slope(a, r["direct_joint"][i], b, r["direct_joint"][i + 1]) for r in rows
                for i, (a, b) in enumerate(zip(SCALES, SCALES[1:]))]
    u = [r["unit"] for r in rows]
    ratio_by_budget = {str(t): [r["ratio_curve"][t] for r in rows] for t in BUDGETS if t < len(rows[0]["ratio_curve"])}
    crossing = [r["crossing_step"] for r in rows]
    scale = {
        "decomposition": {
            "td_loss_before": _interval(col["td_loss_before"]),
            "value_head_share": _interval([r["heads"]["value"]["loss"] / r["td_loss_before"] for r in rows]),
            "target_second_moment_share": _interval(share),
            "target_mean_squared_share": _interval([sum(r["heads"][h]["target_mean"] ** 2 for h in ("value", "cpc"))
                                                    / r["td_loss_before"] for r in rows]),
            "initial_critic_floor_C": _interval(col["C"]),
        },
        "reward_only": {
            "exponent_at_1": _interval(col["reward_only_exponent_at_1"]),
            "measured_slopes": {k: _interval(v) for k, v in slopes_r.items()},
            "floor_minus_recorded_mean": _against(col["reward_only_floor"], rec_b["mean"]),
            "floor_z": _interval([z(x, rec_b) for x in col["reward_only_floor"]]),
        },
        "joint_unit": {
            "measured_slope_min": min(slopes_j), "measured_slope_max": max(slopes_j),
            "k": unit, "fit_seeds": list(FIT_SEEDS), "test_seeds": [r["seed"] for r in test],
            "test_td_loss_before": _interval([unit * unit * r["td_loss_before"] for r in test]),
            "test_td_loss_after_expressed": _interval([unit * unit * r["td_loss_after"] for r in test]),
            "td_loss_after_trained": _interval([x["td_loss_after_trained"] for x in u]),
            "ratio_trained_minus_ratio": paired_ci([x["ratio_trained"] for x in u], col["ratio"]),
            "served_agreement_unit": _interval([x["served_agreement_unit"] for x in u]),
            "served_agreement_reorder": _interval([x["served_agreement_reorder"] for x in u]),
            "served_agreement_unit_minus_reorder": {
                **paired_ci([x["served_agreement_unit"] for x in u], [x["served_agreement_reorder"] for x in u])},
            "greedy_agreement_unit": _interval([x["greedy_agreement_unit"] for x in u]),
            "greedy_agreement_reorder": _interval([x["greedy_agreement_reorder"] for x in u]),
        },
    }
    scale["joint_unit"]["served_agreement_unit_minus_reorder"]["verdict"] = verdict(
        scale["joint_unit"]["served_agreement_unit_minus_reorder"])
    relax = [r["relaxation"]["ratio"] for r in rows]
    ratio = {
        "recorded_ratio": RECORDED_RATIO, "alpha": ALPHA,
        "relaxation_max_abs_error": max(abs(x - RECORDED_RATIO) for x in relax),
        "relaxation_ratio_sd": float(np.std(relax, ddof=1)),
        "trained": _interval(col["ratio"]), "trained_minus_recorded": _against(col["ratio"], RECORDED_RATIO),
        "by_budget": {t: {**_interval(v), "sd": float(np.std(v, ddof=1)), "minus_recorded": _against(v, RECORDED_RATIO)}
                      for t, v in ratio_by_budget.items()},
        "crossing_step": {"never": sum(c is None for c in crossing), "min": min(c for c in crossing if c is not None),
                          "max": max(c for c in crossing if c is not None),
                          **_interval([c for c in crossing if c is not None])},
    }
    closest = min(ratio["by_budget"], key=lambda t: abs(ratio["by_budget"][t]["mean"] - RECORDED_RATIO))
    ratio["closest_budget"] = int(closest)
    table = [
        {"figure": "td_loss_before", "recorded_mean": rec_b["mean"], "recorded_std": rec_b["std"],
         "ours": float(np.mean(col["td_loss_before"])), "z_as_is": z(float(np.mean(col["td_loss_before"])), rec_b),
         "explaining_arm": "unit k (fitted on seeds 42-44), seeds 45-61",
         "ours_explained": scale["joint_unit"]["test_td_loss_before"]["mean"],
         "z_explained": z(scale["joint_unit"]["test_td_loss_before"]["mean"], rec_b)},
        {"figure": "td_loss_after", "recorded_mean": rec_a["mean"], "recorded_std": rec_a["std"],
         "ours": float(np.mean(col["td_loss_after"])), "z_as_is": z(float(np.mean(col["td_loss_after"])), rec_a),
         "explaining_arm": "unit k, one relaxation step (alpha 0.05), seeds 45-61",
         "ours_explained": RECORDED_RATIO * scale["joint_unit"]["test_td_loss_before"]["mean"],
         "z_explained": z(RECORDED_RATIO * scale["joint_unit"]["test_td_loss_before"]["mean"], rec_a)},
        {"figure": "td_loss_after (our Adam training, expressed in unit k)", "recorded_mean": rec_a["mean"],
         "recorded_std": rec_a["std"], "ours": float(np.mean(col["td_loss_after"])),
         "z_as_is": z(float(np.mean(col["td_loss_after"])), rec_a),
         "explaining_arm": "unit k (units only, our training), seeds 45-61",
         "ours_explained": scale["joint_unit"]["test_td_loss_after_expressed"]["mean"],
         "z_explained": z(scale["joint_unit"]["test_td_loss_after_expressed"]["mean"], rec_a)},
        {"figure": "td_loss_after / td_loss_before", "recorded_mean": RECORDED_RATIO, "recorded_std": None,
         "ours": ratio["trained"]["mean"], "z_as_is": None,
         "explaining_arm": "one relaxation step (alpha 0.05)", "ours_explained": float(np.mean(relax)),
         "z_explained": None},
    ]
    ours_b = col["td_loss_before"]
    spread = {"recorded_cv": rec_b["std"] / rec_b["mean"], "ours_cv": float(np.std(ours_b, ddof=1) / np.mean(ours_b))}
    spread["cv_ratio"] = spread_ratio(spread["recorded_cv"], int(rec_b["n"]), spread["ours_cv"], len(ours_b))
    return {"scale": scale, "ratio": ratio, "calibration_table": table, "spread": spread, "n_seeds": len(rows),
            "seeds": [r["seed"] for r in rows],
            "recorded": {"td_loss_before": dict(rec_b), "td_loss_after": dict(rec_a)}}


def recompute_rows(rows: Sequence[Mapping[str, Any]], body: Mapping[str, Any]) -> list[str]:
    """Recompute the headline intervals by a plain loop over the per-seed values; names of rows that differ."""
    def loop_ci(xs):
        n = len(xs)
        m = 0.0
        for x in xs:
            m += x
        m /= n
        ss = 0.0
        for x in xs:
            ss += (x - m) ** 2
        half = float(sps.t.ppf(0.975, n - 1)) * math.sqrt(ss / (n - 1)) / math.sqrt(n)
        return m, m - half, m + half

    rows = sorted(rows, key=lambda r: r["seed"])
    want = {
        "trained_minus_recorded": ([r["ratio"] - RECORDED_RATIO for r in rows], body["ratio"]["trained_minus_recorded"]),
        "floor_minus_recorded_mean": ([r["reward_only_floor"] - body["recorded"]["td_loss_before"]["mean"] for r in rows],
                                      body["scale"]["reward_only"]["floor_minus_recorded_mean"]),
        "served_agreement_unit_minus_reorder": ([r["unit"]["served_agreement_unit"] - r["unit"]["served_agreement_reorder"]
                                                 for r in rows],
                                                body["scale"]["joint_unit"]["served_agreement_unit_minus_reorder"]),
        "exponent_at_1": ([r["reward_only_exponent_at_1"] for r in rows], body["scale"]["reward_only"]["exponent_at_1"]),
    }
    bad = []
    for name, (xs, row) in want.items():
        m, lo, hi = loop_ci(xs)
        mean = row.get("mean_difference", row.get("mean"))
        if not all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) for a, b in
                   ((m, mean), (lo, row["ci95_low"]), (hi, row["ci95_high"]))):
            bad.append(name)
    return bad


# --- words from the JSON ---------------------------------------------------------------------

def _ci(row: Mapping[str, Any], sig: int = 2) -> str:
    return fmt_ci(row["ci95_low"], row["ci95_high"], sig)


def _num(x: float, sig: int = 2) -> str:
    return f"{x:.{sig}g}"


def _bound(x: float) -> str:
    """A rounding-level gap as a bound ("below 1e-12"), so the sentence prints the same on every CPU."""
    return "within 1e-12" if abs(x) < 1e-12 else f"within {x:.1e}"


def findings(data: Mapping[str, Any]) -> list[str]:
    """Sentences about the two TD gaps, every number read from ``td_calibration.json``'s contents."""
    s, r = data["scale"], data["ratio"]
    dec, ro, ju = s["decomposition"], s["reward_only"], s["joint_unit"]
    n = data["n_seeds"]
    rec_b = data["recorded"]["td_loss_before"]
    out = [f"These are our reconstructions, tested on our own data over {n} seeds: the seed file states neither its "
           "reward units nor how its critic was updated, so both hypotheses below are ours, not the seed's protocol."]
    out.append(f"Our held-out td_loss_before is {_ci(dec['td_loss_before'])} (95% interval of the mean); the targets' "
               f"second moment alone is {_ci(dec['target_second_moment_share'])} of it and the squared mean target "
               f"{_ci(dec['target_mean_squared_share'])}"
               + (", so the targets' size sets the level." if dec["target_second_moment_share"]["ci95_low"] >= 0.9 else "."))
    exp_ci = ro["exponent_at_1"]
    out.append(f"Rescaling the rewards by c changes td_loss_before with exponent {_ci(exp_ci, 3)} at c = 1; "
               f"rescaling the rewards and the critic's outputs together (a change of units) gives an exponent of 2 "
               f"(to {_bound(max(abs(ju['measured_slope_min'] - 2), abs(ju['measured_slope_max'] - 2)))} on every seed "
               "and scale), as the quadratic law requires: a change of units can put the level anywhere.")
    floor = ro["floor_minus_recorded_mean"]
    words = {">0": "above", "<0": "below", "no detectable difference": "not distinguishable from"}[floor["verdict"]]
    lead = "Rescaling the rewards alone cannot reach the record: " if floor["verdict"] == ">0" else ""
    out.append(lead + f"the initial critic's own TD error, the floor no "
               f"reward scale removes, is {words} the recorded mean {_num(rec_b['mean'], 3)} (floor minus recorded "
               f"mean {_ci(floor)}).")
    out.append(f"In the unit k = {_num(ju['k'], 3)} (fitted on seeds 42-44, where the seed recorded), our "
               f"td_loss_before on the other {len(ju['test_seeds'])} seeds is {_ci(ju['test_td_loss_before'])}, "
               f"z = {data['calibration_table'][0]['z_explained']:+.1f} against the recorded SD, "
               f"against z = {data['calibration_table'][0]['z_as_is']:+.0f} as is (k is fitted to the record's mean, so "
               "this shows only that one unit serves every seed; it does not show that the seed used other units).")
    agree = ju["served_agreement_unit_minus_reorder"]
    agree_words = {">0": "more often than", "<0": "less often than",
                   "no detectable difference": "about as often as"}[agree["verdict"]]
    out.append(f"Retrained in that unit, the served policy's most probable action matches the pipeline's on "
               f"{_ci(ju['served_agreement_unit'])} of held-out states, {agree_words} a retraining on another "
               f"minibatch order does (difference {_ci(agree)})"
               + (": the learned decisions depend on the units (our reading, untested: Adam's step is fixed in "
                  "parameter units)."
                  if agree["verdict"] == "<0" else "."))
    tr = r["trained_minus_recorded"]
    tr_words = {">0": "above", "<0": "below", "no detectable difference": "not distinguishable from"}[tr["verdict"]]
    out.append(f"One relaxation step of size {r['alpha']} toward fixed targets gives after/before = 0.9025 on every "
               f"seed of ours (error {_bound(r['relaxation_max_abs_error'])}), as the record does, by construction (the step size is chosen so that (1 - {r['alpha']})^2 is the recorded ratio); our Adam "
               f"training ({data['critic_steps']} steps) gives {_ci(r['trained'])}, {tr_words} 0.9025.")
    cs = r["crossing_step"]
    one = r["by_budget"]["1"]
    out.append(f"After 1 Adam step our ratio is {_ci(one, 4)}; it first falls to 0.9025 between step {cs['min']} and "
               f"step {cs['max']} across seeds (mean {_ci(cs, 3)}), and at the closest budget "
               f"({r['closest_budget']} steps) it varies across seeds with SD {_num(r['by_budget'][str(r['closest_budget'])]['sd'], 2)}, "
               f"where the record's ratio is the same on all three seeds to rounding: none of the {len(r['by_budget'])} budgets tried "
               f"({min(map(int, r['by_budget']))} to {max(map(int, r['by_budget']))} Adam steps) gives a ratio that is the same on "
               f"every seed (the smallest SD across seeds is {_num(min(b['sd'] for b in r['by_budget'].values()), 2)}), the relaxation does.")
    t1 = data["calibration_table"][1]
    sp = data["spread"]
    ratio_row = sp["cv_ratio"]
    size = ("larger than" if ratio_row["ci95_low"] > 1 else "smaller than" if ratio_row["ci95_high"] < 1
            else "not shown different from")
    out.append(f"Together (unit k and one relaxation step) our td_loss_after is z = {t1['z_explained']:+.1f} against "
               f"the record, against z = {t1['z_as_is']:+.0f} as is. What stays open: the record's seed-to-seed "
               f"spread (SD/mean {sp['recorded_cv']:.2f}, n = {ratio_row['df'][0] + 1}) is {size} ours "
               f"({sp['ours_cv']:.2f}, n = {ratio_row['df'][1] + 1}; ratio {fmt_ci(ratio_row['ci95_low'], ratio_row['ci95_high'])}, "
               "a 95% F interval with each mean held fixed, our approximation), which no change of units alters, and "
               "which of the protocols that give a seed-independent 0.95^2 the seed used.")
    return out
