"""The seed market's one-factor diagnosis arms re-run in the ``contextual`` market (issue 29, item 6).

``make rlbp-contextual-diagnosis`` (``python -m litrepro study rlbp-contextual-diagnosis``).  The seed market's diagnosis
(:mod:`litrepro.rlbp.diagnosis`) changes one part of the critic or the actor at a time.  Its arms that are TD
regressions on the logged data run here unchanged (:data:`ARMS`, the same config changes); the placebo, the
operator arm (expected SARSA under mu) and the budget arm are in :mod:`litrepro.contextual.budget`.  The
arms that regress onto simulator targets (``truth_target``, ``oracle_bootstrap``) need the seed market's
counterfactual day values, which the contextual market does not provide, so they are not run; ``monte_carlo``
needs only the logged returns, and is simply not run here.
``gamma_0`` is the ``none`` backup, which the budget study runs.  **Everything here is our reconstruction.**

Per seed (:func:`run_seed`), on the contextual study's world, days, logs and named streams: each arm at the
default 600 critic steps (ours; the seed file records none) and at the budget study's largest budget, scored in the simulator's truth with the
same top-k draws (``truth/learned_<B>``) as the budget study's arms, so each arm pairs with the budget study's
``max_min`` and ``placebo`` at equal budget.  ``max_min`` at 600 steps is re-run here and must equal the
budget study's value exactly (:func:`summarise` refuses otherwise).
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from litrepro.contextual import budget as cb
from litrepro.contextual import market, oracle
from litrepro.contextual.market import ContextualSettings
from litrepro.paths import RENDERED, ROOT

PATH = RENDERED / "pinterest_rlbp" / "contextual_diagnosis.json"
#: arm -> config changes, as in :data:`litrepro.rlbp.diagnosis.ARMS` (the TD-regression arms not run elsewhere).
ARMS: dict[str, dict] = {"sync_1": {"target_update_every": 1}, "sync_100": {"target_update_every": 100},
                         "gamma_0.5": {"gamma": 0.5}, "top_1": {"top_k": 1}, "temperature_1": {"actor_temperature": 1.0}}
BUDGETS = (600, 6000)
TOL = 1e-9


class StudyRefused(ValueError):
    """A seed's checks failed, its re-run max_min differs from the budget study's, or an interval does not recompute."""


def run_seed(seed: int, *, settings: cb.BudgetSettings = cb.BudgetSettings(), budgets: Sequence[int] = BUDGETS,
             ctx: ContextualSettings = ContextualSettings(), overrides: Mapping[str, Any] | None = None) -> dict:
    """One seed: every arm of :data:`ARMS` at every budget, and max_min at the first budget (the pairing check)."""
    from litrepro.contextual import study as cs
    from litrepro.rlbp import experiment as ex
    from litrepro.rlbp.config import RLBPConfig
    from litrepro.rlbp.streams import Streams

    ctx.check()
    cfg = RLBPConfig(seed=seed, **dict(overrides or {}))
    streams = Streams(seed)
    world = ex.build_world(cfg, streams, torch.device("cpu"))
    c, s, lam = world.campaigns, world.settings, cfg.lambda_cpc
    ev = cs._days(seed, "eval_days", settings.eval_days, world, ctx)
    const_eval = oracle.constant_values(c, ev, s, ctx, lam)                                 # (A, C)
    logged = cs._days(seed, "logged_days", settings.logged_days, world, ctx)
    behaviour = market.stream(seed, "behaviour")
    logs = [market.simulate_contextual_day(c, d, ex.behaviour_policy(cfg.behaviour_epsilon), s, ctx, behaviour)
            for d in logged]
    heldout = ex.heldout_campaigns(world).cpu()
    data = {"train": ex._flatten(logs, c, lam, ~heldout), "heldout": ex._flatten(logs, c, lam, heldout)}
    values, decomp, checks = {}, {}, {}
    runs = [("max_min", {}, budgets[0])] + [(a, ch, b) for a, ch in ARMS.items() for b in budgets]
    for arm, changes, steps in runs:
        name = f"{arm}_{steps}"
        arm_cfg = dataclasses.replace(cfg, **changes)
        arm_world = dataclasses.replace(world, cfg=arm_cfg)
        critic, report = ex.fit_critic(arm_world, data, streams, steps=steps, with_control=False)
        actor, _ = ex.fit_actor(arm_world, critic, data, streams)
        value, actions = oracle.policy_values(c, ev, ex.learned_policy(actor, arm_cfg.top_k), s, ctx, lam,
                                              market.stream(seed, f"truth/learned_{steps}"))
        values[name] = float(value.mean())
        decomp[name] = oracle.decomposition(value, actions, const_eval)
        checks[f"{name}_decomposition_recomputes"] = cs._same(
            decomp[name], oracle.decomposition_reference(value, actions, const_eval))
        settings_used = report["settings"][0]
        checks[f"{name}_settings_applied"] = (
            settings_used["gamma"] == arm_cfg.gamma and settings_used["steps"] == steps
            and settings_used["target_syncs"] == list(range(0, steps, arm_cfg.target_update_every))
            and report["target_lag_error"] == 0.0)
    return {"seed": seed, "checks": checks, "arms": values, "decomposition": decomp,
            "day_hashes": {"eval": [cs._hash(d) for d in ev], "logged": [cs._hash(d) for d in logged]}}


def comparisons(budgets: Sequence[int]) -> list[tuple[str, str, str]]:
    """(key, arm, baseline): each arm against max_min, the placebo and the fixed gain at equal budget."""
    return [(f"{a}_{b}_minus_{base}", f"{a}_{b}", base_name)
            for a in ARMS for b in budgets
            for base, base_name in (("max_min", f"max_min_{b}"), ("placebo", f"placebo_{b}"),
                                    ("fixed_gain", "fixed_gain"))]


def _joined(rows: Sequence[Mapping[str, Any]], reference: Mapping[str, Any]) -> list[dict[str, float]]:
    """Per seed: this study's arms with the budget study's (``reference``), which they pair with."""
    theirs = {r["seed"]: r for r in reference["per_seed"]}
    return [{**theirs[r["seed"]]["arms"], **r["arms"]} for r in sorted(rows, key=lambda r: r["seed"])]


def summarise(rows: Sequence[Mapping[str, Any]], reference: Mapping[str, Any],
              budgets: Sequence[int] = BUDGETS) -> dict[str, Any]:
    """Paired intervals against the budget study's arms; refuses failed checks, seeds the budget study lacks, and
    a re-run max_min or evaluation days that differ from the budget study's."""
    from litrepro import stats

    bad = {r["seed"]: cb.failed(r) for r in rows if cb.failed(r)}
    if bad:
        raise StudyRefused(f"contextual diagnosis refused, failed checks: {bad}")
    theirs = {r["seed"]: r for r in reference["per_seed"]}
    missing = [r["seed"] for r in rows if r["seed"] not in theirs]
    if missing:
        raise StudyRefused(f"contextual diagnosis refused: the budget study has no seed(s) {missing}")
    first = f"max_min_{budgets[0]}"
    differ = [r["seed"] for r in rows if r["arms"][first] != theirs[r["seed"]]["arms"][first]
              or r["day_hashes"]["eval"] != theirs[r["seed"]]["day_hashes"]["eval"]]
    if differ:
        raise StudyRefused(f"contextual diagnosis refused: seeds {differ} do not reproduce the budget study's "
                           f"{first} or evaluation days")
    values = _joined(rows, reference)
    out: dict[str, Any] = {"n_seeds": len(rows), "seeds": sorted(r["seed"] for r in rows),
                           "replicated": {"arm": first, "k": len(rows), "n": len(rows)}, "comparisons": {}}
    for key, arm, base in comparisons(budgets):
        row = stats.paired_ci([v[arm] for v in values], [v[base] for v in values])
        out["comparisons"][key] = {**row, "verdict": stats.verdict(row), "arm": arm, "baseline": base}
    out["state_gain"] = {}
    for name in rows[0]["decomposition"]:
        row = stats.paired_ci([r["decomposition"][name]["value"] for r in rows],
                              [r["decomposition"][name]["campaign_mix_value"] for r in rows])
        out["state_gain"][name] = {**row, "verdict": stats.verdict(row), "arm": name}
    return out


def check_intervals(rows: Sequence[Mapping[str, Any]], reference: Mapping[str, Any], summary: Mapping[str, Any],
                    budgets: Sequence[int] = BUDGETS) -> list[str]:
    """Every interval of :func:`summarise` recomputed by plain loops (:func:`litrepro.recompute.t_interval`)."""
    from litrepro.recompute import t_interval

    theirs = {r["seed"]: r["arms"] for r in reference["per_seed"]}
    ordered = sorted(rows, key=lambda r: r["seed"])
    bad = []

    def look(r, name):
        return r["arms"][name] if name in r["arms"] else theirs[r["seed"]][name]

    def compare(label, got, d):
        t = t_interval(d)
        scale = max(abs(t["mean"]), abs(t["low"]), abs(t["high"])) or 1.0
        if got["n"] != t["n"] or any(abs(g - e) > TOL * scale for g, e in (
                (got["mean_difference"], t["mean"]), (got["ci95_low"], t["low"]), (got["ci95_high"], t["high"]))):
            bad.append(label)
        if got["verdict"] != (">0" if t["low"] > 0 else "<0" if t["high"] < 0 else "no detectable difference"):
            bad.append(label + " verdict")

    if set(summary["comparisons"]) != {k for k, _, _ in comparisons(budgets)}:
        bad.append("comparison keys")
    for key, got in summary["comparisons"].items():
        compare(key, got, [look(r, got["arm"]) - look(r, got["baseline"]) for r in ordered])
    for name, got in summary["state_gain"].items():
        compare(name, got, [r["decomposition"][name]["value"] - r["decomposition"][name]["campaign_mix_value"]
                            for r in ordered])
    return bad


def refuse_or_summarise(rows, reference, budgets: Sequence[int] = BUDGETS) -> dict:
    summary = summarise(rows, reference, budgets)
    bad = check_intervals(rows, reference, summary, budgets)
    if bad:
        raise StudyRefused(f"contextual diagnosis refused, intervals differ from their plain-loop recomputation: "
                           f"{bad[:5]}")
    return summary


#: Functions and constants of this module that compute numbers (their source is hashed; wording is not).
COMPUTING = ("run_seed", "comparisons", "_joined", "summarise", "check_intervals", "refuse_or_summarise")


def source_hashes() -> dict[str, str]:
    """The budget study's sources (:func:`litrepro.contextual.budget.source_hashes`), this study's declaration, and this
    module's computing functions and constants."""
    out = dict(cb.source_hashes(study="rlbp-contextual-diagnosis"))   # with this study's declaration
    code = "".join(inspect.getsource(globals()[n]) for n in COMPUTING) + json.dumps([ARMS, BUDGETS, TOL], sort_keys=True)
    out["contextual diagnosis computing functions and constants"] = hashlib.sha256(code.encode()).hexdigest()
    return out


def load(path: Path = PATH) -> dict[str, Any]:
    from litrepro import jsonbounds

    return jsonbounds.read(path, str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path))


DESCRIPTIONS = {"sync_1": "the target network copied every step", "sync_100": "the target network copied every 100 steps",
                "gamma_0.5": "gamma 0.5 instead of 0.9", "top_1": "the actor's support k = 1 instead of 3",
                "temperature_1": "the actor's Boltzmann temperature 1.0 instead of 0.25"}


def findings(data: Mapping[str, Any]) -> list[str]:
    """The study in sentences; every number and word from ``data`` through :mod:`litrepro.prose`."""
    from litrepro import prose

    s, budgets = data["summary"], data["budgets"]
    c = s["comparisons"]
    rep = s["replicated"]
    out = [f"Market `contextual` (our reconstruction), {s['n_seeds']} seeds; each arm changes one part of our "
           f"pipeline and is paired with the budget study's max_min and placebo at equal budget ({rep['arm']} re-run "
           f"here equals the budget study's on {prose.count(rep['k'], rep['n'], 'seeds')}); 95% t intervals, not "
           "adjusted for the number shown."]
    for arm in ARMS:
        parts = []
        for b in budgets:
            placebo = c[f"{arm}_{b}_minus_placebo"]
            parts.append(f"at {b} steps " + prose.compare(c[f"{arm}_{b}_minus_max_min"], arm, "max_min",
                                                            measure="true value")
                         + f" (against the placebo: {prose.direction(placebo)}, {prose.estimate(placebo)})")
        out.append(f"{arm} ({DESCRIPTIONS[arm]}): " + "; ".join(parts) + ".")
    return out
