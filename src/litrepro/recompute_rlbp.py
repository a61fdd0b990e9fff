"""The pinterest_rlbp policy comparison, lambda frontier and budget study, recomputed from their per-seed values.

Part of :mod:`litrepro.recompute` (issue 34, item 1): it reads only the committed JSON files and imports
none of the study, statistics or wording modules.  Definitions, restated from the studies' docstrings:

``policy_comparison.json`` (``make rlbp-study``, the seed's ``max_min`` backup at our default budget):
  * one paired 95% t interval per (comparison, metric): ``learned - fixed_gain`` and
    ``learned - behaviour`` on ``true_value``, ``value`` and ``cpc_overshoot``, and
    ``IPS - truth (<policy>)`` (``<policy>_ips - <policy>_true_value_heldout``) for the three policies;
  * the reference points: each baseline's mean ``(cpc_overshoot, value)`` over seeds;
  * the check pass rates: the study writes only when every seed passes, so every rate is 1, and they
    equal the backup study's rates for ``max_min`` (the same runs).

``lambda_frontier.json``: per lambda the mean over seeds of ``value`` and ``cpc_overshoot`` with the
standard error (sample SD / sqrt(n)); paired intervals between neighbouring lambdas.  The row at the
run's lambda is the served policy, so it equals the policy comparison's ``learned_value`` and
``learned_cpc_overshoot`` seed by seed.

``budget_study.json`` (``make rlbp-budget``):
  * per seed: the best constant is the largest of the nine constant actions' true values (the first
    on a tie), the fixed gain action 4's, the tuned constant the action with the largest fitted-Q
    value (the first on a tie) and its truth that action's constant value; the IPS pick likewise;
    every arm carries the seed's baselines;
  * per (backup, budget): the mean learned truth, the held-out TD loss (value + CPC heads) per seed
    and its mean, and learned - each baseline (paired 95% t);
  * the convergence rule: per seed and backup the budget with the lowest held-out TD loss (the
    smaller on a tie); the rows at those budgets and against the smallest budget;
  * the scaling rows (learned at more logged days against the fixed gain and the smallest budget);
  * the outcome flags: per arm and seed, the failed outcome checks
    (:data:`OUTCOME_CHECKS`); every other check must hold (the study refuses otherwise);
  * no two seeds share an evaluation day.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from litrepro.recompute import _Ledger, _mean, _run, _sample_sd

POLICY_COMPARISON = "rendered/pinterest_rlbp/policy_comparison.json"
LAMBDA_FRONTIER = "rendered/pinterest_rlbp/lambda_frontier.json"
BUDGET_STUDY = "rendered/pinterest_rlbp/budget_study.json"
BACKUP_STUDY = "rendered/pinterest_rlbp/backup_study.json"
SEED_RUN = "rendered/pinterest_rlbp/seed-{seed}.json"
FIXED_GAIN_ACTION = 4
#: The outcome checks a seed is flagged on, not refused on (restated from the diagnosis' docstring).
OUTCOME_CHECKS = ("fusion_changes_preference", "actual_reward_regression_update")
POLICY_METRICS = ("true_value", "value", "cpc_overshoot")
BASELINE_POLICIES = ("fixed_gain", "behaviour")

__all__ = ["POLICY_COMPARISON", "LAMBDA_FRONTIER", "BUDGET_STUDY", "check_policy_comparison",
           "check_lambda_frontier", "check_budget_study", "plan"]


def _argmax(xs) -> int:
    best = 0
    for i, x in enumerate(xs):
        if x > xs[best]:
            best = i
    return best


def _by_label(rows, *keys) -> dict:
    return {tuple(r[k] for k in keys): r for r in rows}


# --- policy comparison ---------------------------------------------------------------------------

def _check_policy_comparison(d: Mapping[str, Any], L: _Ledger, load=None) -> None:
    seeds = sorted(int(s) for s in d["per_seed"])
    L.same("seeds", sorted(d["seeds"]), seeds)
    L.same("n_seeds", d["n_seeds"], len(seeds))
    per = [d["per_seed"][str(s)] for s in seeds]
    want = {}
    for policy in BASELINE_POLICIES:
        for metric in POLICY_METRICS:
            want[(f"learned - {policy}", metric)] = [x[f"learned_{metric}"] - x[f"{policy}_{metric}"] for x in per]
    for policy in ("learned", *BASELINE_POLICIES):
        want[(f"IPS - truth ({policy})", "true_value_heldout")] = [x[f"{policy}_ips"] - x[f"{policy}_true_value_heldout"]
                                                                   for x in per]
    got = _by_label(d["comparisons"], "comparison", "metric")
    L.members("comparisons (comparison, metric)", [(r["comparison"], r["metric"]) for r in d["comparisons"]], list(want))
    for key, values in want.items():
        if key in got:
            L.interval(f"comparisons[{key[0]} on {key[1]}]", got[key], values, verdict=True)
    for policy in BASELINE_POLICIES:
        point = d["reference_points"][policy]
        L.num(f"reference_points.{policy}[0] (cpc_overshoot)", point[0], _mean([x[f"{policy}_cpc_overshoot"] for x in per]))
        L.num(f"reference_points.{policy}[1] (value)", point[1], _mean([x[f"{policy}_value"] for x in per]))
    for name, rate in d["check_pass_rates"].items():
        L.num(f"check_pass_rates.{name} (the study writes only when every seed passes)", rate, 1.0)
    backup = load(BACKUP_STUDY) if load else None
    if backup:
        L.same("check_pass_rates (= backup_study's max_min, the same runs)", d["check_pass_rates"],
               backup["check_pass_rates"]["max_min"])
        for s, x in zip(seeds, per):
            theirs = backup["per_seed"]["max_min"].get(str(s), {})
            for key in ("learned_true_value", "control_ratio"):
                L.num(f"per_seed.{s}.{key} (= backup_study's max_min)", x[key], theirs.get(key))
    budget = load(BUDGET_STUDY) if load else None
    if budget:
        smallest = min(budget["arms"]["budgets"])
        rows = {r["seed"]: r for r in budget["per_seed"]}
        for s, x in zip(seeds, per):
            if s in rows:
                arm = rows[s]["arms"][f"max_min@{smallest}"]
                L.num(f"per_seed.{s}.learned_true_value (= budget_study's max_min@{smallest})",
                      x["learned_true_value"], arm["learned_true_value"])
    for s, x in zip(seeds, per):
        run = load(SEED_RUN.format(seed=s)) if load else None
        if run:
            for key, value in x.items():
                L.num(f"per_seed.{s}.{key} (= the rendered seed run's beyond_seed_metrics)", value,
                      run["beyond_seed_metrics"][key])


# --- lambda frontier -----------------------------------------------------------------------------

def _check_lambda_frontier(d: Mapping[str, Any], L: _Ledger, load=None) -> None:
    seeds = sorted(int(s) for s in d["per_seed"])
    lambdas = [x["lambda"] for x in d["per_seed"][str(seeds[0])]]
    table = {}
    for s in seeds:
        rows = d["per_seed"][str(s)]
        L.same(f"per_seed.{s} lambdas", [x["lambda"] for x in rows], lambdas)
        for x in rows:
            table[(s, x["lambda"])] = x
    L.same("points (lambdas)", [p["lambda"] for p in d["points"]], lambdas)
    for p in d["points"]:
        lam = p["lambda"]
        L.same(f"points[lambda {lam:g}].seeds", p["seeds"], seeds)
        for metric in ("value", "cpc_overshoot"):
            xs = [table[(s, lam)][metric] for s in seeds]
            L.num(f"points[lambda {lam:g}].{metric}", p[metric], _mean(xs))
            L.num(f"points[lambda {lam:g}].{metric}_err", p[f"{metric}_err"], _sample_sd(xs) / math.sqrt(len(xs)))
    want = {}
    for lo, hi in zip(lambdas, lambdas[1:]):
        for metric in ("cpc_overshoot", "value"):
            want[(f"lambda {hi:g} - lambda {lo:g}", metric)] = [table[(s, hi)][metric] - table[(s, lo)][metric]
                                                                for s in seeds]
    got = _by_label(d["neighbour_differences"], "comparison", "metric")
    L.members("neighbour_differences (comparison, metric)",
              [(r["comparison"], r["metric"]) for r in d["neighbour_differences"]], list(want))
    for key, values in want.items():
        if key in got:
            L.interval(f"neighbour_differences[{key[0]} on {key[1]}]", got[key], values, verdict=True)
    comparison = load(POLICY_COMPARISON) if load else None
    if comparison:
        lam = comparison["provenance"]["parameters"]["lambda_cpc"]
        for s in seeds:
            served = comparison["per_seed"].get(str(s), {})
            for metric in ("value", "cpc_overshoot"):
                L.num(f"per_seed.{s}[lambda {lam:g}].{metric} (= the served policy's learned_{metric})",
                      table[(s, lam)][metric], served.get(f"learned_{metric}"))


# --- budget study --------------------------------------------------------------------------------

def _check_budget_seed(r: Mapping[str, Any], L: _Ledger) -> None:
    s, room, tuned, base = r["seed"], r["headroom"], r["tuned_constant"], r["baselines"]
    path = f"per_seed[{s}]"
    best = _argmax(room["constant"])
    L.same(f"{path}.headroom.best_constant_action", room["best_constant_action"], best)
    L.num(f"{path}.headroom.best_constant", room["best_constant"], room["constant"][best])
    L.num(f"{path}.headroom.fixed_gain", room["fixed_gain"], room["constant"][FIXED_GAIN_ACTION])
    L.same(f"{path}.tuned_constant.action (argmax of fitted-Q)", tuned["action"], _argmax(tuned["fqe"]))
    L.same(f"{path}.tuned_constant.ips_action (argmax of IPS)", tuned["ips_action"], _argmax(tuned["ips"]))
    behaviour = {a["behaviour_true_value"] for a in r["arms"].values()}
    L.same(f"{path}: one behaviour truth over the arms", len(behaviour), 1)
    want = {"fixed_gain": room["constant"][FIXED_GAIN_ACTION], "tuned_constant": room["constant"][tuned["action"]],
            "best_constant": room["constant"][best], "best_per_campaign": room["best_per_campaign"],
            "behaviour": min(behaviour)}
    L.members(f"{path}.baselines (names)", list(base), list(want))
    for key, value in want.items():
        L.num(f"{path}.baselines.{key}", base.get(key), value)
    for name, arm in sorted(r["arms"].items()):
        steps = int(name.split("@")[1].split("/")[0])
        L.same(f"{path}.arms.{name}.critic_steps", arm["critic_steps"], steps)
        for key in ("fixed_gain", "best_constant"):
            L.num(f"{path}.arms.{name}.{key}", arm[key], want[key])
        L.same(f"{path}.arms.{name}.best_constant_action", arm["best_constant_action"], best)
        broken = sorted(k for k, v in arm["checks"].items() if v is not True and k not in OUTCOME_CHECKS)
        L.same(f"{path}.arms.{name}: failed integrity checks (the study refuses on any)", broken, [])


def _check_budget_study(d: Mapping[str, Any], L: _Ledger, load=None) -> None:
    rows = sorted(d["per_seed"], key=lambda r: r["seed"])
    seeds = [r["seed"] for r in rows]
    s = d["summary"]
    L.same("seeds", d["seeds"], seeds)
    L.same("summary.seeds", s["seeds"], seeds)
    L.same("n_seeds", d["n_seeds"], len(rows))
    owner: dict[str, int] = {}
    for r in rows:
        for h in r["eval_day_hashes"]:
            owner.setdefault(h, r["seed"])
    L.same("evaluation days shared between seeds", sorted({h for r in rows for h in r["eval_day_hashes"]
                                                           if owner[h] != r["seed"]}), [])
    for r in rows:
        with L.section(f"per_seed[{r['seed']}]"):
            _check_budget_seed(r, L)
    backups, budgets = list(d["arms"]["backups"]), list(d["arms"]["budgets"])
    names = list(d["arms"]["baselines"])
    smallest = min(budgets)
    base = {k: [r["baselines"][k] for r in rows] for k in names}

    def learned(backup, steps, days=None):
        arm = f"{backup}@{steps}" + (f"/{days}d" if days else "")
        return [r["arms"][arm]["learned_true_value"] for r in rows]

    def loss(r, backup, steps):
        pair = r["arms"][f"{backup}@{steps}"]["heldout_td_loss"]
        return pair[0] + pair[1]

    def against(path, row, values):
        for k in names:
            L.interval(f"{path}.minus_{k}", row[f"minus_{k}"], [v - b for v, b in zip(values, base[k])], verdict=True)

    grid = _by_label(s["grid"], "backup", "steps")
    L.members("summary.grid (backup, steps)", [(g["backup"], g["steps"]) for g in s["grid"]],
              [(b, n) for b in backups for n in budgets])
    for (b, n), g in grid.items():
        path = f"summary.grid[{b}@{n}]"
        with L.section(path):
            values = learned(b, n)
            L.num(f"{path}.mean_value", g["mean_value"], _mean(values))
            losses = [loss(r, b, n) for r in rows]
            L.vector(f"{path}.heldout_td_loss.values", g["heldout_td_loss"]["values"], losses)
            L.num(f"{path}.heldout_td_loss.mean", g["heldout_td_loss"]["mean"], _mean(losses))
            against(path, g, values)
    L.members("summary.converged (backups)", [c["backup"] for c in s["converged"]], backups)
    for c in s["converged"]:
        b, path = c["backup"], f"summary.converged[{c['backup']}]"
        with L.section(path):
            picks = {}
            for r in rows:
                best = None
                for n in sorted(budgets):
                    if best is None or loss(r, b, n) < loss(r, b, best):
                        best = n
                picks[str(r["seed"])] = best
            L.same(f"{path}.picks", c["picks"], picks)
            values = [r["arms"][f"{b}@{picks[str(r['seed'])]}"]["learned_true_value"] for r in rows]
            against(path, c, values)
            L.interval(f"{path}.converged_minus_seed_budget", c["converged_minus_seed_budget"],
                       [v - w for v, w in zip(values, learned(b, smallest))], verdict=True)
    want_base = {f"{k} - fixed_gain": (k, "fixed_gain") for k in names if k != "fixed_gain"}
    want_base["best_constant - tuned_constant"] = ("best_constant", "tuned_constant")
    L.members("summary.baselines (labels)", list(s["baselines"]), list(want_base))
    for label, (a, b) in want_base.items():
        if label in s["baselines"]:
            L.interval(f"summary.baselines[{label}]", s["baselines"][label],
                       [x - y for x, y in zip(base[a], base[b])], verdict=True)
    scaling = _by_label(s["scaling"], "backup", "logged_days", "steps")
    L.members("summary.scaling (backup, logged days, steps)", list(scaling),
              [(b, days, steps) for days, steps in d["arms"]["scaling"] for b in d["arms"]["scaling_backups"]])
    for (b, days, steps), row in scaling.items():
        path = f"summary.scaling[{b}, {days} days, {steps} steps]"
        with L.section(path):
            values = learned(b, steps, days)
            L.interval(f"{path}.minus_fixed_gain", row["minus_fixed_gain"],
                       [v - f for v, f in zip(values, base["fixed_gain"])], verdict=True)
            L.interval(f"{path}.minus_four_days_same_ratio", row["minus_four_days_same_ratio"],
                       [v - w for v, w in zip(values, learned(b, smallest))], verdict=True)
    t = s["tuned_constant"]
    actions = [r["tuned_constant"]["action"] for r in rows]
    best = [r["headroom"]["best_constant_action"] for r in rows]
    L.same("summary.tuned_constant.actions", t["actions"], actions)
    L.same("summary.tuned_constant.best_constant_actions", t["best_constant_actions"], best)
    L.same("summary.tuned_constant.ips_actions", t["ips_actions"], [r["tuned_constant"]["ips_action"] for r in rows])
    L.same("summary.tuned_constant.picks_best", t["picks_best"], sum(1 for a, b in zip(actions, best) if a == b))
    flags: dict[str, dict[str, list[str]]] = {}
    for r in rows:
        for name, arm in r["arms"].items():
            failed = [k for k in OUTCOME_CHECKS if arm["checks"].get(k, True) is not True]
            if failed:
                flags.setdefault(name, {})[str(r["seed"])] = failed
    L.same("summary.outcome_flags", s["outcome_flags"], flags)


def check_policy_comparison(data: Mapping[str, Any], load=None) -> list[str]:
    """Problems in ``policy_comparison.json`` (``load(file)``: sibling files for the cross-file checks)."""
    return _run(POLICY_COMPARISON, lambda d, L: _check_policy_comparison(d, L, load), data).problems


def check_lambda_frontier(data: Mapping[str, Any], load=None) -> list[str]:
    """Problems in ``lambda_frontier.json``."""
    return _run(LAMBDA_FRONTIER, lambda d, L: _check_lambda_frontier(d, L, load), data).problems


def check_budget_study(data: Mapping[str, Any], load=None) -> list[str]:
    """Problems in ``budget_study.json``."""
    return _run(BUDGET_STUDY, lambda d, L: _check_budget_study(d, L, load), data).problems


def plan(load) -> list[tuple[str, Any]]:
    """``(file, fn(data, ledger))`` for :func:`litrepro.recompute.check`."""
    return [(POLICY_COMPARISON, lambda d, L: _check_policy_comparison(d, L, load)),
            (LAMBDA_FRONTIER, lambda d, L: _check_lambda_frontier(d, L, load)),
            (BUDGET_STUDY, lambda d, L: _check_budget_study(d, L, load))]
