"""The ``contextual`` market study (issue 29): can a state-dependent gain win here, does the learned bidder
find it, and which off-policy estimator can rank the policies?  **Everything in it is our reconstruction**:
the market (:mod:`litrepro.contextual.market`), the oracles, the estimators beside ordinary IPS, the
budgets and the day counts are ours; the seed file fixes none of them.

Per seed (:func:`run_seed`), on the campaigns and action grid of our rendered seed runs (``build_world``):

1. **Landscape.**  A geometric P x P grid of constant gains spanning ``widen`` times beyond the action
   grid's range in each direction, scored on the fit days.  ``best_constant_interior`` says whether its
   best point lies off the grid's edge (so the optimum is bounded, not beyond the box).
2. **Ladder of oracles** (chosen on the fit days, scored on the evaluation days; :mod:`~litrepro.contextual.oracle`):
   fixed gain (action 4), the best constant, best per kind, best per campaign, and the two table policies
   (per kind, per campaign) that may react to the pacing error and the time of day.
3. **The learned bidder**: the pipeline's critic (``max_min`` backup) and actor, trained on ``logged_days``
   contextual days logged by the uniform policy, at each critic budget of ``budgets``; its true value on the
   evaluation days and its decomposition V = M + G (:func:`~litrepro.contextual.oracle.decomposition`).
4. **Off-policy evaluation** on the held-out campaigns' logged days (N = days x held-out campaigns
   trajectories of K decisions): ordinary one-step IPS (the seed's), SNIPS, PDIS, WPDIS, DR (FQE's model)
   and FQE (:mod:`~litrepro.contextual.ope`), for the learned bidder at each budget and each constant action.
   The truth is the policy's mean fused reward per decision on the held-out campaigns on the evaluation days.

:func:`summarise` pairs the arms by seed (95% t intervals, :func:`litrepro.stats.paired_ci`), scores the
estimators (bias, coverage, ranking, picks), recomputes every interval by a plain loop
(:func:`check_intervals`) and refuses (:class:`StudyRefused`) failed checks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from litrepro.contextual import market, ope, oracle
from litrepro.contextual.market import ContextualSettings
from litrepro.paths import RENDERED, ROOT

F64 = torch.float64
PATH = RENDERED / "pinterest_rlbp" / "contextual_study.json"
PLOT = PATH.with_suffix(".png")
#: The estimators of the off-policy table, in display order (``ips`` is the seed contract's).
ESTIMATORS = ("ips", "snips", "pdis", "wpdis", "dr", "fqe")
#: The oracle arms and the learned bidder's arms are named in :func:`run_seed`'s ``arms``.
ORACLES = ("fixed_gain", "best_constant", "best_per_kind", "best_per_campaign", "kind_table", "campaign_table")
#: Tolerance of the plain-loop recomputations (float64 sums in another order).
TOL = 1e-9


@dataclass(frozen=True)
class StudySettings:
    """The study's sizes (our choices)."""
    fit_days: int = 8          # days the oracles are chosen on
    eval_days: int = 8         # days every arm is scored on
    logged_days: int = 4       # days the uniform logging policy records (our parameter file's)
    budgets: tuple[int, ...] = (600, 3000)   # critic steps of the learned bidder (600: our parameter file's)
    table_sweeps: int = oracle.SWEEPS   # coordinate-ascent sweeps of the table policies
    grid_points: int = 7       # P of the P x P landscape grid
    widen: float = 2.0         # the landscape spans [min / widen, max * widen] of each gain
    wpdis_reps: int = 200      # bootstrap resamples of WPDIS
    fqe_reps: int = 100        # bootstrap resamples of FQE


class StudyRefused(ValueError):
    """A seed's checks failed or an interval does not recompute: nothing is written."""


def _days(seed: int, name: str, n: int, world, ctx: ContextualSettings) -> list:
    g = market.stream(seed, name)
    return [market.draw_shocked_day(world.campaigns, world.cfg.opportunities_per_step, g, ctx) for _ in range(n)]


def _trajectories(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """(D, K, C, ...) -> (D * C_kept, K, ...): one row per campaign-day of the kept campaigns."""
    x = x[:, :, keep]                                                                       # (D, K, Ch, ...)
    return x.transpose(1, 2).flatten(0, 1)                                                  # (D * Ch, K, ...)


def logged_trajectories(world, logs: list, lam: float, keep: torch.Tensor) -> dict[str, torch.Tensor]:
    """The held-out log as trajectories: states (N, K, F), actions (N, K), reward (N, K) fused,
    logging_prob (N, K)."""
    c = world.campaigns
    stack = {name: torch.stack([getattr(log, name) for log in logs]) for name in ("states", "actions", "propensity")}
    reward = torch.stack([market.fused(log, c, lam) for log in logs])                      # (D, K, C)
    return {"states": _trajectories(stack["states"], keep), "actions": _trajectories(stack["actions"], keep),
            "reward": _trajectories(reward, keep), "logging_prob": _trajectories(stack["propensity"], keep)}


def estimate_all(traj: Mapping[str, torch.Tensor], probs: torch.Tensor, seed: int, name: str,
                 settings: StudySettings) -> tuple[dict[str, dict], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Every estimator of :data:`ESTIMATORS` for the target policy with probabilities ``probs`` (N, K, A), as
    ``{name: {estimate, low, high, interval}}``, and (pi (N, K), q_logged (N, K), v_state (N, K)) for the checks."""
    r, a, mu = traj["reward"], traj["actions"], traj["logging_prob"]
    pi = probs.gather(2, a[:, :, None]).squeeze(2)                                          # (N, K)
    fqe, q_all = ope.fitted_q_evaluation(traj["states"], a, r, probs, generator=market.stream(seed, f"fqe/{name}"),
                                         reps=settings.fqe_reps)
    q_logged = q_all.gather(2, a[:, :, None]).squeeze(2)                                    # (N, K)
    v_state = (probs * q_all).sum(2)                                                        # (N, K)
    out = {"ips": ope.one_step_ips(r, pi, mu), "snips": ope.one_step_snips(r, pi, mu), "pdis": ope.pdis(r, pi, mu),
           "wpdis": ope.wpdis(r, pi, mu, generator=market.stream(seed, f"wpdis/{name}"), reps=settings.wpdis_reps),
           "dr": ope.doubly_robust(r, pi, mu, q_logged, v_state), "fqe": fqe}
    return {k: out[k].to_dict() for k in ESTIMATORS}, (pi, q_logged, v_state)


def run_seed(seed: int, *, settings: StudySettings = StudySettings(), ctx: ContextualSettings = ContextualSettings(),
             overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One seed of the study (module docstring); ``overrides`` change :class:`RLBPConfig` fields (the tests' tiny runs)."""
    from litrepro.rlbp import experiment as ex
    from litrepro.rlbp.config import RLBPConfig
    from litrepro.rlbp.streams import Streams

    ctx.check()
    cfg = RLBPConfig(seed=seed, **dict(overrides or {}))
    streams = Streams(seed)
    world = ex.build_world(cfg, streams, torch.device("cpu"))
    c, s, lam = world.campaigns, world.settings, cfg.lambda_cpc
    n = c.budget.shape[0]
    fit = _days(seed, "fit_days", settings.fit_days, world, ctx)
    ev = _days(seed, "eval_days", settings.eval_days, world, ctx)
    checks: dict[str, bool] = {}

    # 1. landscape
    span = lambda x: torch.tensor([float(x.min()) / settings.widen, float(x.max()) * settings.widen], dtype=F64)
    kp, ki = oracle.fine_grid(span(s.kp), span(s.ki), settings.grid_points)
    landscape = oracle.constant_values(c, fit, dataclasses.replace(s, kp=kp, ki=ki), ctx, lam).mean(1)   # (P^2,)
    inside, best = oracle.interior(landscape, settings.grid_points)

    # 2. oracles
    const_fit = oracle.constant_values(c, fit, s, ctx, lam)                                 # (A, C)
    const_eval = oracle.constant_values(c, ev, s, ctx, lam)                                 # (A, C)
    kind = c.kind.cpu()
    checks["kinds_read_off_budget_share"] = bool((oracle.kind_of_share(c.budget_share.cpu()) == kind).all())
    rows = torch.arange(n)
    tuned = int(const_fit.mean(1).argmax())
    per_kind = oracle.group_mean(const_fit, kind).argmax(0)                                 # (C,)
    per_campaign = const_fit.argmax(0)                                                      # (C,)
    values = {"fixed_gain": const_eval[ex.FIXED_GAIN_ACTION], "best_constant": const_eval[tuned],
              "best_per_kind": const_eval[per_kind, rows], "best_per_campaign": const_eval[per_campaign, rows]}
    decomp, traces = {}, {}
    g = torch.Generator().manual_seed(0)                       # table policies are deterministic: nothing is drawn
    for name, start, group in (("kind_table", per_kind, kind), ("campaign_table", per_campaign, rows)):
        table, trace = oracle.search_table(c, fit, s, ctx, lam, start, group, settings.table_sweeps)
        traces[name] = trace
        values[name], actions = oracle.policy_values(c, ev, oracle.table_policy(table), s, ctx, lam, g)
        decomp[name] = oracle.decomposition(values[name], actions, const_eval)
        checks[f"{name}_decomposition_recomputes"] = _same(decomp[name],
                                                           oracle.decomposition_reference(values[name], actions, const_eval))
        # the searched table re-simulated on the fit days: its grouped value is the search's last, and no worse
        # than the constant it started from
        refit = oracle.group_mean(oracle.policy_values(c, fit, oracle.table_policy(table), s, ctx, lam, g)[0][None],
                                  group)[0]                                                # (C,)
        begin = oracle.group_mean(const_fit[start, rows][None], group)[0]                  # (C,)
        checks[f"{name}_search_never_worse"] = (all(b >= a - TOL for a, b in zip(trace, trace[1:]))
                                                and abs(float(refit.mean()) - trace[-1]) <= TOL
                                                and float(refit.mean()) >= float(begin.mean()) - TOL)

    # 3. the learned bidder on contextual logs
    policy = ex.behaviour_policy(cfg.behaviour_epsilon)
    logged = _days(seed, "logged_days", settings.logged_days, world, ctx)
    behaviour = market.stream(seed, "behaviour")
    logs = [market.simulate_contextual_day(c, d, policy, s, ctx, behaviour) for d in logged]
    heldout = ex.heldout_campaigns(world).cpu()
    data = {"train": ex._flatten(logs, c, lam, ~heldout), "heldout": ex._flatten(logs, c, lam, heldout)}
    traj = logged_trajectories(world, logs, lam, heldout)
    n_traj, k_dec = traj["reward"].shape
    policies: dict[str, torch.Tensor] = {}                     # name -> (N, K, A) probabilities on the log's states
    learned: dict[str, dict] = {}
    for steps in settings.budgets:
        critic, report = ex.fit_critic(world, data, streams, steps=steps, with_control=False)
        actor, _ = ex.fit_actor(world, critic, data, streams)
        name = f"learned_{steps}"
        values[name], actions = oracle.policy_values(c, ev, ex.learned_policy(actor, cfg.top_k), s, ctx, lam,
                                                     market.stream(seed, f"truth/{name}"))
        decomp[name] = oracle.decomposition(values[name], actions, const_eval)
        checks[f"{name}_decomposition_recomputes"] = _same(decomp[name],
                                                           oracle.decomposition_reference(values[name], actions, const_eval))
        learned[name] = {"heldout_td_loss": float(sum(report["heldout_after"])), "steps": steps}
        probs = ex.served_probs(actor, cfg.top_k)(traj["states"].flatten(0, 1))            # (N K, A)
        policies[name] = probs.reshape(n_traj, k_dec, -1)
    eye = torch.eye(const_eval.shape[0], dtype=F64)
    for a in range(const_eval.shape[0]):
        policies[f"constant_{a}"] = eye[a].expand(n_traj, k_dec, -1)

    # 4. off-policy evaluation on the held-out campaigns
    truth = {name: float(values[name][heldout].mean()) for name in learned}
    truth.update({f"constant_{a}": float(const_eval[a, heldout].mean()) for a in range(const_eval.shape[0])})
    estimates = {}
    for name, probs in policies.items():
        estimates[name], (pi, q_logged, v_state) = estimate_all(traj, probs, seed, name, settings)
        if name == f"learned_{settings.budgets[-1]}" or name == f"constant_{tuned}":
            r, mu = traj["reward"], traj["logging_prob"]
            checks[f"{name}_estimators_recompute"] = (
                abs(estimates[name]["ips"]["estimate"] - ope.one_step_ips_reference(r, pi, mu)) < TOL
                and abs(estimates[name]["pdis"]["estimate"] - ope.pdis_reference(r, pi, mu)) < TOL
                and abs(estimates[name]["wpdis"]["estimate"] - ope.wpdis_reference(r, pi, mu)) < TOL
                and abs(estimates[name]["dr"]["estimate"]
                        - ope.doubly_robust_reference(r, pi, mu, q_logged, v_state)) < TOL)
    checks["logged_propensities_are_uniform"] = bool(
        ((traj["logging_prob"] - (cfg.behaviour_epsilon / 9
                                  + (1 - cfg.behaviour_epsilon) * (traj["actions"] == 4).to(F64))).abs() < 1e-12).all())
    return {"seed": seed, "checks": checks,
            "landscape": {"values": landscape.tolist(), "kp": kp.tolist(), "ki": ki.tolist(), "best": best,
                          "best_constant_interior": inside},
            "tuned_action": tuned, "kind_actions": per_kind.tolist(), "campaign_actions": per_campaign.tolist(),
            "constants_eval": const_eval.mean(1).tolist(), "constants_fit": const_fit.mean(1).tolist(),
            "arms": {name: float(v.mean()) for name, v in values.items()},
            "decomposition": decomp, "search_traces": traces, "learned": learned,
            "ope": {"truth": truth, "estimates": estimates, "trajectories": n_traj, "decisions": k_dec},
            "day_hashes": {"fit": [_hash(d) for d in fit], "eval": [_hash(d) for d in ev],
                           "logged": [_hash(d) for d in logged]}}


def _same(a: Mapping[str, float], b: Mapping[str, float]) -> bool:
    return a.keys() == b.keys() and all(abs(a[k] - b[k]) <= TOL for k in a)


def _hash(draws) -> str:
    digest = hashlib.sha256()
    for t in (draws.price, draws.click_prob, draws.live):
        digest.update(t.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


# --- the summary over seeds --------------------------------------------------------------------------

#: (key, arm, baseline) of the paired comparisons, arm - baseline per seed.
def comparisons(budgets: Sequence[int]) -> list[tuple[str, str, str]]:
    top = f"learned_{budgets[-1]}"
    out = [(f"{arm}_minus_best_constant", arm, "best_constant") for arm in ORACLES if arm != "best_constant"]
    out += [("best_constant_minus_fixed_gain", "best_constant", "fixed_gain"),
            ("campaign_table_minus_best_per_campaign", "campaign_table", "best_per_campaign"),
            ("kind_table_minus_best_per_kind", "kind_table", "best_per_kind")]
    for b in budgets:
        out += [(f"learned_{b}_minus_fixed_gain", f"learned_{b}", "fixed_gain"),
                (f"learned_{b}_minus_best_constant", f"learned_{b}", "best_constant")]
    if len(budgets) > 1:
        out.append((f"{top}_minus_learned_{budgets[0]}", top, f"learned_{budgets[0]}"))
    return out


def failed(row: Mapping[str, Any]) -> list[str]:
    return sorted(k for k, v in row["checks"].items() if v is not True)


def _ranking(values: Mapping[str, float], names: Sequence[str]) -> list[str]:
    return sorted(names, key=lambda k: -values[k])


def summarise(rows: Sequence[Mapping[str, Any]], settings: StudySettings = StudySettings()) -> dict[str, Any]:
    """Paired intervals over seeds, the decomposition's intervals and the estimators' scores; refuses
    failed checks and seeds that share evaluation days."""
    from litrepro import stats

    bad = {r["seed"]: failed(r) for r in rows if failed(r)}
    if bad:
        raise StudyRefused(f"contextual study refused, failed checks: {bad}")
    days = [h for r in rows for h in r["day_hashes"]["eval"]]
    if len(set(days)) != len(days):
        raise StudyRefused("contextual study refused: two seeds share an evaluation day")
    rows = sorted(rows, key=lambda r: r["seed"])
    out: dict[str, Any] = {"n_seeds": len(rows), "seeds": [r["seed"] for r in rows]}
    out["interior"] = {"k": sum(r["landscape"]["best_constant_interior"] for r in rows), "n": len(rows)}
    out["tuned_actions"] = [r["tuned_action"] for r in rows]
    out["arms"] = {arm: stats.mean_interval([r["arms"][arm] for r in rows]) for arm in rows[0]["arms"]}
    out["comparisons"] = {}
    for key, arm, base in comparisons(settings.budgets):
        row = stats.paired_ci([r["arms"][arm] for r in rows], [r["arms"][base] for r in rows])
        out["comparisons"][key] = {**row, "verdict": stats.verdict(row), "arm": arm, "baseline": base}
    out["state_gain"] = {}
    for arm in rows[0]["decomposition"]:
        for part in ("state_gain", "within_campaign_gain"):
            row = stats.paired_ci([r["decomposition"][arm]["value"] for r in rows],
                                  [r["decomposition"][arm][part.replace("state_gain", "mix_value")
                                                           .replace("within_campaign_gain", "campaign_mix_value")]
                                   for r in rows])
            out["state_gain"][f"{arm}/{part}"] = {**row, "verdict": stats.verdict(row), "arm": arm, "part": part}
    out["ope"] = score_estimators(rows, settings)
    return out


def score_estimators(rows: Sequence[Mapping[str, Any]], settings: StudySettings) -> dict[str, Any]:
    """Per estimator: bias (estimate - truth) with its t interval over seeds for the learned bidder, the tuned
    constant and the default; coverage of the truth by the 95% interval (over seeds x those three policies);
    whether it ranks the three as the truth does; whether its best constant is the truth's best and the
    truth's regret of its pick; whether it picks the truth's better critic budget."""
    from litrepro import stats

    top = f"learned_{settings.budgets[-1]}"
    out = {}
    for est in ESTIMATORS:
        per = {"learned": [], "tuned_constant": [], "default": []}
        covered, ranked, picked, regret, budget_right = 0, 0, 0, [], 0
        for r in rows:
            truth, e = r["ope"]["truth"], r["ope"]["estimates"]
            names = {"learned": top, "tuned_constant": f"constant_{r['tuned_action']}", "default": "constant_4"}
            for role, name in names.items():
                per[role].append(e[name][est]["estimate"] - truth[name])
                covered += e[name][est]["low"] <= truth[name] <= e[name][est]["high"]
            three = list(dict.fromkeys(names.values()))
            ranked += _ranking({k: truth[k] for k in three}, three) == _ranking({k: e[k][est]["estimate"] for k in three}, three)
            constants = [k for k in truth if k.startswith("constant_")]
            pick = max(constants, key=lambda k: e[k][est]["estimate"])
            best = max(constants, key=lambda k: truth[k])
            picked += pick == best
            regret.append(truth[best] - truth[pick])
            if len(settings.budgets) > 1:
                arms = [f"learned_{b}" for b in settings.budgets]
                budget_right += max(arms, key=lambda k: e[k][est]["estimate"]) == max(arms, key=lambda k: truth[k])
        n = len(rows)
        out[est] = {"bias": {role: stats.mean_interval(v) for role, v in per.items()},
                    "coverage": {"k": covered, "n": 3 * n}, "ranks_three": {"k": ranked, "n": n},
                    "picks_best_constant": {"k": picked, "n": n}, "pick_regret": stats.mean_interval(regret),
                    "picks_better_budget": {"k": budget_right, "n": n}}
    return out


def _plain_ci(d: list[float]) -> tuple[int, float, float, float]:
    """(n, mean, low, high) of the 95% t interval by :func:`litrepro.recompute.t_interval` (plain loops,
    written apart from :mod:`litrepro.stats`)."""
    from litrepro.recompute import t_interval

    t = t_interval(d)
    return t["n"], t["mean"], t["low"], t["high"]


def check_intervals(rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any],
                    settings: StudySettings = StudySettings()) -> list[str]:
    """Every paired interval of :func:`summarise`, and the estimators' counts, recomputed by plain loops.
    Returns the labels that differ (empty when all recompute)."""
    rows = sorted(rows, key=lambda r: r["seed"])
    bad = []

    def compare(label, got, d, mean_key="mean_difference"):
        n, mean, low, high = _plain_ci(d)
        scale = max(abs(mean), abs(low), abs(high)) or 1.0
        if got["n"] != n or any(abs(g - e) > 1e-9 * scale for g, e in
                                ((got[mean_key], mean), (got["ci95_low"], low), (got["ci95_high"], high))):
            bad.append(label)
        if "verdict" in got and got["verdict"] != (">0" if low > 0 else "<0" if high < 0 else "no detectable difference"):
            bad.append(label + " verdict")

    for key, arm, base in comparisons(settings.budgets):
        compare(key, summary["comparisons"][key], [r["arms"][arm] - r["arms"][base] for r in rows])
    for key, got in summary["state_gain"].items():
        arm, part = key.split("/")
        mix = "mix_value" if part == "state_gain" else "campaign_mix_value"
        compare(key, got, [r["decomposition"][arm]["value"] - r["decomposition"][arm][mix] for r in rows])
    k = 0
    for r in rows:
        if r["landscape"]["best_constant_interior"]:
            k += 1
    if summary["interior"]["k"] != k:
        bad.append("interior")
    top = f"learned_{settings.budgets[-1]}"
    for est in ESTIMATORS:
        covered = 0
        for r in rows:
            for name in (top, f"constant_{r['tuned_action']}", "constant_4"):
                e = r["ope"]["estimates"][name][est]
                if e["low"] <= r["ope"]["truth"][name] and r["ope"]["truth"][name] <= e["high"]:
                    covered += 1
        if summary["ope"][est]["coverage"]["k"] != covered:
            bad.append(f"{est} coverage")
        d = [r["ope"]["estimates"][top][est]["estimate"] - r["ope"]["truth"][top] for r in rows]
        compare(f"{est} bias", summary["ope"][est]["bias"]["learned"], d, mean_key="mean")
    return bad


def refuse_or_summarise(rows: Sequence[Mapping[str, Any]], settings: StudySettings = StudySettings()) -> dict:
    summary = summarise(rows, settings)
    bad = check_intervals(rows, summary, settings)
    if bad:
        raise StudyRefused(f"contextual study refused, intervals differ from their plain-loop recomputation: {bad[:5]}")
    return summary


# --- provenance ------------------------------------------------------------------------------------

#: Functions and constants of this module that compute numbers (their source is hashed; wording is not).
COMPUTING = ("StudySettings", "_days", "_trajectories", "logged_trajectories", "estimate_all", "run_seed", "_same",
             "comparisons", "failed", "_ranking", "summarise", "score_estimators", "_plain_ci", "check_intervals",
             "refuse_or_summarise")


def source_hashes() -> dict[str, str]:
    """The study's sources: the rlbp pipeline's (:func:`litrepro.rlbp.study.source_hashes`), the contextual
    package's computing modules, the study's declaration, and this module's computing functions and constants."""
    from litrepro.rlbp.study import source_hashes as rlbp_hashes

    out = dict(rlbp_hashes())
    for rel in ("src/litrepro/contextual/market.py", "src/litrepro/contextual/oracle.py",
                "src/litrepro/contextual/ope.py"):
        out[rel] = hashlib.sha256((ROOT / rel).read_bytes()).hexdigest()
    from litrepro.studies import declaration_hashes

    out.update(declaration_hashes("rlbp-contextual"))
    this = globals()
    code = "".join(inspect.getsource(this[name]) for name in COMPUTING) + json.dumps(
        [ESTIMATORS, ORACLES, TOL, dataclasses.asdict(ContextualSettings())], sort_keys=True)
    out["contextual study computing functions and constants"] = hashlib.sha256(code.encode()).hexdigest()
    return out


def load(path: Path = PATH) -> dict[str, Any]:
    from litrepro import jsonbounds

    return jsonbounds.read(path, str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path))


# --- what the intervals say ------------------------------------------------------------------------

LABELS = {"fixed_gain": "the fixed gain (action 4)", "best_constant": "the best constant (tuned on fit days)",
          "best_per_kind": "the best constant per campaign kind", "best_per_campaign": "the best constant per campaign",
          "kind_table": "the per-kind table policy", "campaign_table": "the per-campaign table policy"}
ESTIMATOR_LABELS = {"ips": "ordinary IPS (the seed's)", "snips": "self-normalised IPS", "pdis": "per-decision IS",
                    "wpdis": "weighted per-decision IS", "dr": "doubly robust (FQE model)", "fqe": "fitted-Q evaluation"}


def _label(arm: str) -> str:
    if arm.startswith("learned_"):
        return f"the learned bidder ({arm.split('_')[1]} critic steps)"
    return LABELS[arm]


def findings(data: Mapping[str, Any]) -> list[str]:
    """The study in sentences; every number and word comes from ``data`` through :mod:`litrepro.prose`,
    which says "higher"/"lower" only when the interval excludes 0."""
    from litrepro import prose, stats

    s, budgets = data["summary"], data["settings"]["budgets"]
    top, low = f"learned_{budgets[-1]}", f"learned_{budgets[0]}"
    c, g = s["comparisons"], s["state_gain"]
    n = s["n_seeds"]
    out = [f"Market `contextual` (our reconstruction), {n} seeds; every interval is a paired 95% t interval over "
           "seeds, not adjusted for the number shown; the oracles are chosen on fit days and scored on separate "
           "evaluation days."]
    out.append(f"The best constant gain is interior (off the edge of a {data['settings']['grid_points']} x "
               f"{data['settings']['grid_points']} grid that spans {prose.value(data['settings']['widen'], 2, sign=False)}"
               f" times beyond the action grid in each gain) on {prose.count(s['interior']['k'], s['interior']['n'], 'seeds')}.")
    out.append(prose.compare(c["best_constant_minus_fixed_gain"], "The best constant", "the fixed gain",
                             measure="true value") + ".")
    for arm in ("best_per_kind", "best_per_campaign", "kind_table", "campaign_table"):
        out.append(prose.compare(c[f"{arm}_minus_best_constant"], _label(arm).capitalize(), "the best constant",
                                 measure="true value") + ".")
    out.append("Reacting to the state, with the campaign held: "
               + prose.compare(c["campaign_table_minus_best_per_campaign"], "the per-campaign table",
                               "the best constant per campaign", measure="true value") + "; "
               + prose.compare(c["kind_table_minus_best_per_kind"], "the per-kind table", "the best constant per kind",
                               measure="true value") + ".")
    for b in budgets:
        arm = f"learned_{b}"
        out.append(prose.compare(c[f"{arm}_minus_fixed_gain"], _label(arm).capitalize(), "the fixed gain",
                                 measure="true value") + "; "
                   + prose.compare(c[f"{arm}_minus_best_constant"], "it", "the best constant", measure="true value")
                   + ".")
    if len(budgets) > 1:
        out.append(prose.compare(c[f"{top}_minus_{low}"], _label(top).capitalize(), f"{budgets[0]} steps",
                                 measure="true value") + ".")
    for arm in (top, "campaign_table"):
        row = g[f"{arm}/within_campaign_gain"]
        out.append(f"State-dependence gain of {_label(arm)} (its value minus the value of each campaign's own mix of "
                   f"constant actions): {prose.estimate(row)}, {prose.direction(row, 'above 0', 'below 0')}.")
    o = s["ope"]
    for est in ESTIMATORS:
        e = o[est]
        bias = e["bias"]["learned"]
        label = ESTIMATOR_LABELS[est]
        out.append(f"{label[0].upper()}{label[1:]}: bias on the learned bidder "
                   f"{prose.value(bias['mean'])} {stats.fmt_ci(bias['ci95_low'], bias['ci95_high'])}; its 95% "
                   f"interval covers the truth in {prose.count(e['coverage']['k'], e['coverage']['n'], 'cases')}; it "
                   f"ranks the learned bidder, the tuned constant and the default in the truth's order on "
                   f"{prose.count(e['ranks_three']['k'], e['ranks_three']['n'], 'seeds')}, picks the truth's best "
                   f"constant on {prose.count(e['picks_best_constant']['k'], e['picks_best_constant']['n'], 'seeds')}"
                   + (f" and the better critic budget on "
                      f"{prose.count(e['picks_better_budget']['k'], e['picks_better_budget']['n'], 'seeds')}"
                      if len(budgets) > 1 else "") + ".")
    out.append("For scale, an estimator that guessed would rank the three in the truth's order on 1 seed in 6, and "
               "pick the best of the nine constants on 1 seed in 9.  Per-decision importance sampling multiplies "
               "six ratios of up to 9 each, so with uniform logging almost no logged day follows a deterministic "
               "policy all day, and its estimates collapse.")
    return out


def plot(data: Mapping[str, Any]):
    """Left: each arm minus the best constant (paired 95% CI).  Right: each estimator's bias on the learned bidder,
    the tuned constant and the default (95% CI over seeds)."""
    from matplotlib.figure import Figure

    s, budgets = data["summary"], data["settings"]["budgets"]
    fig = Figure(figsize=(11, 4.4), layout="constrained")
    left, right = fig.subplots(1, 2)
    arms = [a for a in ORACLES if a != "best_constant"] + [f"learned_{b}" for b in budgets]
    for i, arm in enumerate(arms):
        row = s["comparisons"][f"{arm}_minus_best_constant"]
        m = row["mean_difference"]
        left.errorbar(m, i, xerr=[[m - row["ci95_low"]], [row["ci95_high"] - m]], fmt="o", capsize=3,
                      color="C1" if arm.startswith("learned") else "C0")
    left.axvline(0, color="k", lw=0.8)
    left.set_yticks(range(len(arms)), [a.replace("_", " ") for a in arms], fontsize=8)
    left.set_xlabel("true value − best constant (paired, 95% CI)", fontsize=9)
    left.set_title("what a gain policy wins in `contextual`", fontsize=10)
    left.grid(lw=0.4, alpha=0.5)
    roles = ("learned", "tuned_constant", "default")
    for j, role in enumerate(roles):
        for i, est in enumerate(ESTIMATORS):
            b = s["ope"][est]["bias"][role]
            y = i + 0.25 * (j - 1)
            right.errorbar(b["mean"], y, xerr=[[b["mean"] - b["ci95_low"]], [b["ci95_high"] - b["mean"]]], fmt="o",
                           capsize=2, color=f"C{j + 2}", label=role.replace("_", " ") if i == 0 else None)
    right.axvline(0, color="k", lw=0.8)
    right.set_yticks(range(len(ESTIMATORS)), list(ESTIMATORS), fontsize=8)
    right.set_xlabel("estimate − truth (95% CI over seeds)", fontsize=9)
    right.set_title("off-policy estimators on the held-out campaigns", fontsize=10)
    right.legend(fontsize=8)
    right.grid(lw=0.4, alpha=0.5)
    fig.suptitle(f"pinterest_rlbp in the contextual market (our reconstruction), {s['n_seeds']} seeds", fontsize=11)
    return fig
