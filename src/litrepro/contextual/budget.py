"""The backup, budget and diagnosis studies of ``pinterest_rlbp`` re-run in the ``contextual`` market (issue 29, item 6).

``make rlbp-contextual-budget`` (``python -m litrepro study rlbp-contextual-budget``).  The seed-market studies
(``rlbp-budget``, ``rlbp-diagnosis``) asked whether the learned bidder beats the fixed gain at the best critic
budget tried (the convergence rule there picks the largest budget tried on most seeds for every backup but ``none``:
not a shown convergence),
which backup it needs, and whether a no-change arm moves as much as the arms do.  There the best constant
is the grid's largest gains and no baseline reacts to the state.  Here the same questions are asked where the best gain
depends on the state (:mod:`litrepro.contextual.market`).  **Everything in it is our reconstruction**: the
market, the budgets, the backups other than ``max_min``, the placebo and the convergence rule.

Per seed (:func:`run_seed`), on the contextual study's own world, fit, evaluation and logged days (the same
named streams, so :mod:`litrepro.contextual.study`'s arms pair with these seed by seed):

* **arms**: each backup of :data:`BACKUPS` (``max_min`` is the seed's; ``fused_greedy``, ``none`` and
  ``expected_sarsa``, the ``policy`` backup under the logging policy mu, are ours) and the **placebo**
  (``max_min`` with the critic's initial weights and minibatch order drawn from other streams:
  :class:`litrepro.rlbp.diagnosis.ReseededStreams`), each trained for every budget of ``budgets``
  (a run at budget B is its own run of B steps), then the actor on its fused scores;
* **truth**: each arm's mean fused reward per decision on the evaluation days, with the top-k draws of
  one named stream per budget (``truth/learned_<B>``: common random numbers across arms, and the
  contextual study's own draws, so ``max_min`` at 600 and 3000 steps reproduces its ``learned_*`` arms);
  and its decomposition V = M + G (:func:`litrepro.contextual.oracle.decomposition`);
* **baselines**: the fixed gain (action 4), the logging policy, the best constant and the best constant
  per campaign (both chosen on the fit days with the simulator, scored on the evaluation days);
* **a convergence rule from logged data only**: per backup, the budget whose critic has the lowest
  held-out TD loss (value + CPC heads, on the held-out campaigns' logged transitions, each critic
  bootstrapping from itself), the early stop a practitioner can make without the simulator.

:func:`summarise` pairs every arm with every baseline, each backup with ``max_min`` at equal budget, each
budget with our default 600 steps, and the rule's pick with the baselines (95% t intervals over seeds,
:func:`litrepro.stats.paired_ci`); :func:`check_intervals` recomputes each by a plain loop
(:func:`litrepro.recompute.t_interval`), and a failed check or a mismatch refuses the study.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from litrepro.contextual import market, oracle
from litrepro.contextual.market import ContextualSettings
from litrepro.paths import RENDERED, ROOT

F64 = torch.float64
PATH = RENDERED / "pinterest_rlbp" / "contextual_budget.json"
PLOT = PATH.with_suffix(".png")
#: backup -> config changes (``expected_sarsa``: the ``policy`` backup whose next-state policy is mu).
BACKUPS: dict[str, dict] = {"max_min": {}, "fused_greedy": {"critic_backup": "fused_greedy"},
                            "none": {"critic_backup": "none"}, "expected_sarsa": {"critic_backup": "policy"}}
#: Every learned arm: the backups and the placebo (max_min reseeded).
ARMS = (*BACKUPS, "placebo")
BASELINES = ("fixed_gain", "behaviour", "best_constant", "best_per_campaign")
#: The baselines each learned arm is compared with.
VERSUS = ("fixed_gain", "behaviour", "best_constant")
#: Tolerance of the plain-loop recomputations (float64 sums in another order).
TOL = 1e-9
MAX_SEEDS = 200


@dataclass(frozen=True)
class BudgetSettings:
    """The study's sizes (our choices); the days are the contextual study's."""
    fit_days: int = 8
    eval_days: int = 8
    logged_days: int = 4
    budgets: tuple[int, ...] = (600, 1500, 3000, 6000)   # critic steps (600: our parameter file's)


class StudyRefused(ValueError):
    """A seed's checks failed or an interval does not recompute: nothing is written."""


def arm_name(arm: str, steps: int) -> str:
    return f"{arm}_{steps}"


def _fit(world, data, streams, arm: str, steps: int):
    """(critic, report, actor) of one learned arm at ``steps`` critic steps."""
    from litrepro.rlbp import experiment as ex
    from litrepro.rlbp.diagnosis import ReseededStreams

    cfg = dataclasses.replace(world.cfg, **BACKUPS.get(arm, {}))
    arm_world = dataclasses.replace(world, cfg=cfg)
    policy = ex.behaviour_probs(cfg) if arm == "expected_sarsa" else None
    critic_streams = ReseededStreams(streams) if arm == "placebo" else streams
    critic, report = ex.fit_critic(arm_world, data, critic_streams, policy=policy, steps=steps, with_control=False)
    actor, _ = ex.fit_actor(arm_world, critic, data, streams)
    return critic, report, actor, arm_world, policy


def run_seed(seed: int, *, settings: BudgetSettings = BudgetSettings(), ctx: ContextualSettings = ContextualSettings(),
             overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One seed of the study (module docstring); ``overrides`` change :class:`RLBPConfig` fields (tests' tiny runs)."""
    from litrepro.contextual import study as cs
    from litrepro.rlbp import critic as rc
    from litrepro.rlbp import experiment as ex
    from litrepro.rlbp.config import RLBPConfig
    from litrepro.rlbp.streams import Streams

    ctx.check()
    cfg = RLBPConfig(seed=seed, **dict(overrides or {}))
    streams = Streams(seed)
    world = ex.build_world(cfg, streams, torch.device("cpu"))
    c, s, lam = world.campaigns, world.settings, cfg.lambda_cpc
    rows = torch.arange(c.budget.shape[0])
    fit = cs._days(seed, "fit_days", settings.fit_days, world, ctx)
    ev = cs._days(seed, "eval_days", settings.eval_days, world, ctx)
    checks: dict[str, bool] = {}

    const_fit = oracle.constant_values(c, fit, s, ctx, lam)                                 # (A, C)
    const_eval = oracle.constant_values(c, ev, s, ctx, lam)                                 # (A, C)
    tuned = int(const_fit.mean(1).argmax())
    per_campaign = const_fit.argmax(0)                                                      # (C,)
    values = {"fixed_gain": const_eval[ex.FIXED_GAIN_ACTION], "best_constant": const_eval[tuned],
              "best_per_campaign": const_eval[per_campaign, rows]}
    values["behaviour"], _ = oracle.policy_values(c, ev, ex.behaviour_policy(cfg.behaviour_epsilon), s, ctx, lam,
                                                  market.stream(seed, "truth/behaviour"))

    policy = ex.behaviour_policy(cfg.behaviour_epsilon)
    logged = cs._days(seed, "logged_days", settings.logged_days, world, ctx)
    behaviour = market.stream(seed, "behaviour")
    logs = [market.simulate_contextual_day(c, d, policy, s, ctx, behaviour) for d in logged]
    heldout = ex.heldout_campaigns(world).cpu()
    data = {"train": ex._flatten(logs, c, lam, ~heldout), "heldout": ex._flatten(logs, c, lam, heldout)}

    decomp, td, rows_drawn, init = {}, {}, {}, {}
    for arm in ARMS:
        for steps in settings.budgets:
            name = arm_name(arm, steps)
            critic, report, actor, arm_world, next_policy = _fit(world, data, streams, arm, steps)
            values[name], actions = oracle.policy_values(c, ev, ex.learned_policy(actor, cfg.top_k), s, ctx, lam,
                                                         market.stream(seed, f"truth/learned_{steps}"))
            decomp[name] = oracle.decomposition(values[name], actions, const_eval)
            checks[f"{name}_decomposition_recomputes"] = cs._same(
                decomp[name], oracle.decomposition_reference(values[name], actions, const_eval))
            td[name] = float(sum(report["heldout_after"]))
            # the trained critic's held-out TD losses against a plain-loop recomputation, bootstrapping from a
            # network other than itself (its initial weights), so losses that ignore their target disagree
            target = rc.TwoHeadCritic(len(ex.FEATURES), cfg.hidden)
            target.load_state_dict(report["init_state"])
            backup = ex._backup(arm_world, next_policy)                                 # kind, lam, policy
            checks[f"{name}_td_loss_recomputes"] = rc.td_loss_reference_error(
                critic, data["heldout"], cfg.gamma, rows=128, target=target, **backup) < 1e-9
            checks[f"{name}_target_synced_on_schedule"] = report["target_lag_error"] == 0.0
            rows_drawn[name] = report["rows"]
            init[name] = torch.cat([v.flatten() for v in report["init_state"].values()])
    # the placebo draws another initialisation and minibatch order; every backup shares max_min's
    for steps in settings.budgets:
        mm = arm_name("max_min", steps)
        checks[f"placebo_{steps}_reseeded"] = bool(not torch.equal(rows_drawn[arm_name("placebo", steps)],
                                                                   rows_drawn[mm])
                                                   and not torch.equal(init[arm_name("placebo", steps)], init[mm]))
        checks[f"backups_{steps}_share_draws"] = all(torch.equal(rows_drawn[arm_name(b, steps)], rows_drawn[mm])
                                                     and torch.equal(init[arm_name(b, steps)], init[mm])
                                                     for b in BACKUPS)
    return {"seed": seed, "checks": checks, "tuned_action": tuned, "campaign_actions": per_campaign.tolist(),
            "arms": {name: float(v.mean()) for name, v in values.items()},
            "decomposition": decomp, "heldout_td_loss": td,
            "day_hashes": {"fit": [cs._hash(d) for d in fit], "eval": [cs._hash(d) for d in ev],
                           "logged": [cs._hash(d) for d in logged]}}


# --- the summary over seeds --------------------------------------------------------------------------

def rule_budget(row: Mapping[str, Any], arm: str, budgets: Sequence[int]) -> int:
    """The convergence rule: the budget of ``arm`` whose critic has the lowest held-out TD loss (first on ties)."""
    best = budgets[0]
    for b in budgets[1:]:
        if row["heldout_td_loss"][arm_name(arm, b)] < row["heldout_td_loss"][arm_name(arm, best)]:
            best = b
    return best


def with_rule(row: Mapping[str, Any], budgets: Sequence[int]) -> dict[str, float]:
    """The row's arm values plus ``<backup>_rule``: each backup's value at the rule's budget."""
    values = dict(row["arms"])
    for arm in BACKUPS:
        values[f"{arm}_rule"] = row["arms"][arm_name(arm, rule_budget(row, arm, budgets))]
    return values


def comparisons(budgets: Sequence[int]) -> list[tuple[str, str, str]]:
    """(key, arm, baseline) of every paired comparison, arm - baseline per seed."""
    out = [("best_constant_minus_fixed_gain", "best_constant", "fixed_gain"),
           ("behaviour_minus_fixed_gain", "behaviour", "fixed_gain"),
           ("best_per_campaign_minus_best_constant", "best_per_campaign", "best_constant")]
    for arm in ARMS:
        for b in budgets:
            name = arm_name(arm, b)
            out += [(f"{name}_minus_{base}", name, base) for base in VERSUS]
            if arm != "max_min":
                out.append((f"{name}_minus_max_min_{b}", name, arm_name("max_min", b)))
            if b != budgets[0]:
                out.append((f"{name}_minus_{arm}_{budgets[0]}", name, arm_name(arm, budgets[0])))
    for arm in BACKUPS:
        out += [(f"{arm}_rule_minus_{base}", f"{arm}_rule", base) for base in ("fixed_gain", "best_constant")]
    return out


def failed(row: Mapping[str, Any]) -> list[str]:
    return sorted(k for k, v in row["checks"].items() if v is not True)


#: The contextual study's arms that this study's arms reproduce, seed by seed: ours -> theirs (and
#: ``max_min_<B>`` -> ``learned_<B>`` for every budget both ran).
SHARED_ARMS = {"fixed_gain": "fixed_gain", "best_constant": "best_constant", "best_per_campaign": "best_per_campaign"}


def shared_arms(ours: Mapping[str, float], theirs: Mapping[str, float]) -> dict[str, str]:
    """Our arm -> the contextual study's arm that must equal it, for the arms both rows hold."""
    out = {a: b for a, b in SHARED_ARMS.items() if a in ours and b in theirs}
    for name in ours:
        if name.startswith("max_min_") and f"learned_{name[len('max_min_'):]}" in theirs:
            out[name] = f"learned_{name[len('max_min_'):]}"
    return out


def replication(rows: Sequence[Mapping[str, Any]], reference: Mapping[str, Any] | None) -> dict[str, Any]:
    """Seeds on which the shared arms (:func:`shared_arms`) and the evaluation days equal the contextual
    study's (``reference``: its JSON), exactly; ``arms``: the arms compared on every such seed."""
    if reference is None:
        return {"k": 0, "n": 0, "differs": [], "arms": []}
    theirs = {r["seed"]: r for r in reference["per_seed"]}
    k, differs, compared = 0, [], None
    for r in rows:
        t = theirs.get(r["seed"])
        if t is None:
            continue
        pairs = shared_arms(r["arms"], t["arms"])
        compared = sorted(pairs) if compared is None else sorted(set(compared) & set(pairs))
        same = r["day_hashes"]["eval"] == t["day_hashes"]["eval"] and all(
            r["arms"][a] == t["arms"][b] for a, b in pairs.items())
        k += same
        if not same:
            differs.append(r["seed"])
    return {"k": k, "n": k + len(differs), "differs": differs, "arms": compared or []}


def summarise(rows: Sequence[Mapping[str, Any]], settings: BudgetSettings = BudgetSettings(),
              reference: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Paired intervals over seeds (module docstring); refuses failed checks, seeds sharing evaluation days,
    and seeds whose shared arms differ from the contextual study's (``reference``)."""
    from litrepro import stats

    bad = {r["seed"]: failed(r) for r in rows if failed(r)}
    if bad:
        raise StudyRefused(f"contextual budget study refused, failed checks: {bad}")
    days = [h for r in rows for h in r["day_hashes"]["eval"]]
    if len(set(days)) != len(days):
        raise StudyRefused("contextual budget study refused: two seeds share an evaluation day")
    rep = replication(rows, reference)
    if rep["differs"]:
        raise StudyRefused(f"contextual budget study refused: seeds {rep['differs']} differ from the contextual "
                           "study's shared arms or evaluation days")
    rows = sorted(rows, key=lambda r: r["seed"])
    budgets = list(settings.budgets)
    values = [with_rule(r, budgets) for r in rows]
    out: dict[str, Any] = {"n_seeds": len(rows), "seeds": [r["seed"] for r in rows], "replication": rep}
    out["arms"] = {arm: stats.mean_interval([v[arm] for v in values]) for arm in values[0]}
    out["comparisons"] = {}
    for key, arm, base in comparisons(budgets):
        row = stats.paired_ci([v[arm] for v in values], [v[base] for v in values])
        out["comparisons"][key] = {**row, "verdict": stats.verdict(row), "arm": arm, "baseline": base}
    out["state_gain"] = {}
    for name in rows[0]["decomposition"]:
        row = stats.paired_ci([r["decomposition"][name]["value"] for r in rows],
                              [r["decomposition"][name]["campaign_mix_value"] for r in rows])
        out["state_gain"][name] = {**row, "verdict": stats.verdict(row), "arm": name, "part": "within_campaign_gain"}
    out["heldout_td_loss"] = {name: stats.mean_interval([r["heldout_td_loss"][name] for r in rows])
                              for name in rows[0]["heldout_td_loss"]}
    out["rule_budgets"] = {arm: {str(b): sum(rule_budget(r, arm, budgets) == b for r in rows) for b in budgets}
                           for arm in BACKUPS}
    return out


def check_intervals(rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any],
                    settings: BudgetSettings = BudgetSettings()) -> list[str]:
    """Every paired interval and tally of :func:`summarise`, recomputed by plain loops; the labels that differ."""
    from litrepro.recompute import t_interval

    rows = sorted(rows, key=lambda r: r["seed"])
    budgets = list(settings.budgets)
    bad = []

    def compare(label, got, d):
        t = t_interval(d)
        scale = max(abs(t["mean"]), abs(t["low"]), abs(t["high"])) or 1.0
        if got["n"] != t["n"] or any(abs(g - e) > 1e-9 * scale for g, e in (
                (got["mean_difference"], t["mean"]), (got["ci95_low"], t["low"]), (got["ci95_high"], t["high"]))):
            bad.append(label)
        if got["verdict"] != (">0" if t["low"] > 0 else "<0" if t["high"] < 0 else "no detectable difference"):
            bad.append(label + " verdict")

    def pick(r, arm):                                  # the rule, written again: lowest held-out TD loss, first on ties
        losses = [(r["heldout_td_loss"][f"{arm}_{b}"], i) for i, b in enumerate(budgets)]
        return budgets[min(losses)[1]]

    def value(r, name):
        if name.endswith("_rule"):
            arm = name[: -len("_rule")]
            return r["arms"][f"{arm}_{pick(r, arm)}"]
        return r["arms"][name]

    for key, got in summary["comparisons"].items():
        compare(key, got, [value(r, got["arm"]) - value(r, got["baseline"]) for r in rows])
    expected = {k for k, _, _ in comparisons(budgets)}
    if set(summary["comparisons"]) != expected:
        bad.append("comparison keys")
    for name, got in summary["state_gain"].items():
        compare(name, got, [r["decomposition"][name]["value"] - r["decomposition"][name]["campaign_mix_value"]
                            for r in rows])
    for arm, counts in summary["rule_budgets"].items():
        for b in budgets:
            k = 0
            for r in rows:
                if pick(r, arm) == b:
                    k += 1
            if counts[str(b)] != k:
                bad.append(f"rule count {arm} {b}")
    return bad


def refuse_or_summarise(rows: Sequence[Mapping[str, Any]], settings: BudgetSettings = BudgetSettings(),
                        reference: Mapping[str, Any] | None = None) -> dict:
    summary = summarise(rows, settings, reference)
    bad = check_intervals(rows, summary, settings)
    if bad:
        raise StudyRefused(f"contextual budget study refused, intervals differ from their plain-loop "
                           f"recomputation: {bad[:5]}")
    return summary


# --- provenance ------------------------------------------------------------------------------------

#: Functions and constants of this module that compute numbers (their source is hashed; wording is not).
COMPUTING = ("BudgetSettings", "arm_name", "_fit", "run_seed", "rule_budget", "with_rule", "comparisons", "failed",
             "shared_arms", "replication", "summarise", "check_intervals", "refuse_or_summarise")


def source_hashes(study: str = "rlbp-contextual-budget") -> dict[str, str]:
    """The rlbp pipeline's sources, the contextual market's, study ``study``'s declaration, the contextual study's
    functions this study calls (``_days``, ``_same``, ``_hash``), and this module's computing functions and constants."""
    from litrepro.contextual import study as cs
    from litrepro.rlbp.study import source_hashes as rlbp_hashes

    out = dict(rlbp_hashes())
    for rel in ("src/litrepro/contextual/market.py", "src/litrepro/contextual/oracle.py"):
        out[rel] = hashlib.sha256((ROOT / rel).read_bytes()).hexdigest()
    from litrepro.studies import declaration_hashes

    out.update(declaration_hashes(study))                # study ``study``'s declaration (jobs and summary)
    this = globals()
    code = "".join(inspect.getsource(this[name]) for name in COMPUTING) + "".join(
        inspect.getsource(getattr(cs, name)) for name in ("_days", "_same", "_hash")) + json.dumps(
        [BACKUPS, ARMS, BASELINES, VERSUS, SHARED_ARMS, TOL, dataclasses.asdict(ContextualSettings())], sort_keys=True)
    out["contextual budget study computing functions and constants"] = hashlib.sha256(code.encode()).hexdigest()
    return out


def load(path: Path = PATH) -> dict[str, Any]:
    from litrepro import jsonbounds

    return jsonbounds.read(path, str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path))


# --- what the intervals say ------------------------------------------------------------------------

LABELS = {"max_min": "max_min (the seed's backup)", "fused_greedy": "fused_greedy", "none": "none (no bootstrap)",
          "expected_sarsa": "expected SARSA under mu", "placebo": "the placebo (max_min reseeded)"}
BASE_LABELS = {"fixed_gain": "the fixed gain", "behaviour": "the logging policy", "best_constant": "the best constant",
               "best_per_campaign": "the best constant per campaign"}


def _verdict_tally(rows: Sequence[Mapping[str, float]]) -> str:
    """``'higher at 1, lower at 0, no detectable difference at 3'`` of the rows' intervals (only the words that occur)."""
    from litrepro import prose

    words = [prose.direction(r) for r in rows]
    order = ("higher", "lower", prose.NO_DIFFERENCE)
    return ", ".join(f"{w} at {words.count(w)}" for w in order if words.count(w))


def findings(data: Mapping[str, Any], contextual: Mapping[str, Any] | None = None,
             pairing: Mapping[str, Any] | None = None) -> list[str]:
    """The study in sentences; every number and word comes from ``data`` (and, for the state-dependent
    oracle, from the contextual study's JSON ``contextual``, and the learned bidder's paired difference from the
    table policy from ``contextual_pairing.json``, ``pairing``) through :mod:`litrepro.prose`, which says
    "higher"/"lower" only when the interval excludes 0."""
    from litrepro import prose, stats

    s, budgets = data["summary"], data["settings"]["budgets"]
    c, n = s["comparisons"], s["n_seeds"]
    first, top = budgets[0], budgets[-1]
    out = [f"Market `contextual` (our reconstruction), {n} seeds, critic budgets "
           f"{', '.join(str(b) for b in budgets)} steps; every interval is a paired 95% t interval over seeds, not "
           "adjusted for the number shown."]
    rep = s["replication"]
    if rep["n"]:
        out.append(f"{', '.join(rep['arms'])} equal the contextual study's arms exactly on "
                   f"{prose.count(rep['k'], rep['n'], 'seeds')} (same days, same draws), so the two studies pair.")
    for arm in ARMS:
        name = LABELS[arm]
        out.append(f"At {first} steps, " + prose.compare(c[f"{arm}_{first}_minus_fixed_gain"], name, "the fixed gain",
                                                          measure="true value")
                   + f"; at {top} steps, " + prose.compare(c[f"{arm}_{top}_minus_fixed_gain"], arm, "the fixed gain",
                                                            measure="true value")
                   + ", and " + prose.compare(c[f"{arm}_{top}_minus_best_constant"], arm, "the best constant",
                                              measure="true value") + ".")
    for arm in ARMS:
        if arm == "max_min":
            continue
        rows = [c[f"{arm}_{b}_minus_max_min_{b}"] for b in budgets]
        out.append(f"{LABELS[arm][0].upper()}{LABELS[arm][1:]} against max_min at equal budget: "
                   f"{_verdict_tally(rows)} of the {len(budgets)} budgets (rows in the table).")
    for arm in BACKUPS:
        counts = s["rule_budgets"][arm]
        picks = ", ".join(f"{b} steps on {counts[str(b)]}" for b in budgets if counts[str(b)])
        line = (f"The held-out-TD-loss rule picks, for {LABELS[arm]}, {picks} of {n} seeds; at its pick "
                + prose.compare(c[f"{arm}_rule_minus_fixed_gain"], arm, "the fixed gain", measure="true value")
                + ", and " + prose.compare(c[f"{arm}_rule_minus_best_constant"], arm, "the best constant",
                                           measure="true value") + ".")
        if 2 * counts[str(top)] > n:
            line += (f" The rule picks the largest budget tried on most seeds, so it marks the best budget tried, "
                     "not a shown convergence.")
        out.append(line)
    g = s["state_gain"][f"max_min_{top}"]
    out.append(f"State-dependence gain of max_min at {top} steps (its value minus each campaign's own mix of "
               f"constant actions): {prose.estimate(g)}, {prose.direction(g, 'above 0', 'below 0')}.")
    if contextual is not None:
        table = contextual["summary"]["comparisons"]["campaign_table_minus_best_constant"]
        top_best = c[f"max_min_{top}_minus_best_constant"]
        out.append("For scale, the contextual study's per-campaign table policy, which reacts to the pacing error and "
                   "the time of day: " + prose.compare(table, "it", "the best constant", measure="true value") + ".")
        within = contextual["summary"].get("state_gain", {}).get("campaign_table/within_campaign_gain")
        if pairing is not None:
            from litrepro.contextual.pairing import row as paired
            d = paired(pairing, f"max_min_{top}", "campaign_table", "value")
            out.append(f"In this market the learned bidder with the seed's max/min backup, given {top} critic steps, "
                       f"paired with the per-campaign table policy (an oracle tuned with the simulator) over the "
                       f"{d['n']} seeds both studies share (`rendered/pinterest_rlbp/contextual_pairing.json`): "
                       + prose.compare(d, "it", "the table policy", measure="true value")
                       + ". The table's gain mixes choosing a constant per campaign with reacting to the state inside "
                       "a campaign.")
        elif top_best["ci95_high"] < table["ci95_low"]:
            hi = stats.round_outward(top_best["ci95_high"], 2, up=True)
            lo = stats.round_outward(table["ci95_low"], 2, up=False)
            out.append(f"In this market the learned bidder with the seed's max/min backup, given {top} critic steps, "
                       f"gains over the best constant at most {prose.value(hi, 2)} (its interval's upper bound), and "
                       f"the per-campaign table policy (an oracle tuned with the simulator) at least {prose.value(lo, 2)}: "
                       "two comparisons with the best constant on the same seeds, days and draws whose intervals do "
                       "not overlap; the paired difference between the two policies is not computed, so this is no "
                       "interval for it. The table's gain mixes choosing a constant per campaign with reacting to the "
                       "state inside a campaign.")
        if within is not None:
            line = ("The part that reacting inside a campaign is worth (value minus each campaign's own mix of the "
                    f"actions it took) is {prose.estimate(within)} for the table policy and {prose.estimate(g)} for "
                    f"max_min at {top} steps")
            if pairing is not None:
                from litrepro.contextual.pairing import row as paired
                w = paired(pairing, f"max_min_{top}", "campaign_table", "within_campaign_gain")
                line += "; paired over the seeds both studies share, " + prose.compare(
                    w, "max_min", "the table policy", measure="within-campaign gain")
            elif g["ci95_high"] < within["ci95_low"]:
                line += (": the two intervals do not overlap (they come from the two studies, which share seeds, days "
                         "and draws; the paired difference itself is not computed)")
            out.append(line + ". Where the learned bidder loses the rest is what the contextual diagnosis's one-factor "
                       "arms probe (`make rlbp-contextual-diagnosis`); this study's arms vary only the backup and the budget.")
    return out


def plot(data: Mapping[str, Any]):
    """Left: each arm minus the fixed gain against the critic's budget (paired 95% CI), with the best constant's
    level.  Right: the held-out TD loss against the budget (mean over seeds, 95% CI)."""
    from matplotlib.figure import Figure

    s, budgets = data["summary"], data["settings"]["budgets"]
    fig = Figure(figsize=(11, 4.4), layout="constrained")
    left, right = fig.subplots(1, 2)
    for j, arm in enumerate(ARMS):
        rows = [s["comparisons"][f"{arm}_{b}_minus_fixed_gain"] for b in budgets]
        x = [b * (1 + 0.03 * (j - 2)) for b in budgets]
        m = [r["mean_difference"] for r in rows]
        left.errorbar(x, m, yerr=[[a - r["ci95_low"] for a, r in zip(m, rows)],
                                  [r["ci95_high"] - a for a, r in zip(m, rows)]],
                      fmt="o-" if arm != "placebo" else "s--", capsize=2, ms=4, label=arm.replace("_", " "))
        tds = [s["heldout_td_loss"][f"{arm}_{b}"] for b in budgets]
        right.errorbar(x, [t["mean"] for t in tds], yerr=[[t["mean"] - t["ci95_low"] for t in tds],
                                                          [t["ci95_high"] - t["mean"] for t in tds]],
                       fmt="o-" if arm != "placebo" else "s--", capsize=2, ms=4, label=arm.replace("_", " "))
    best = s["comparisons"]["best_constant_minus_fixed_gain"]
    left.axhspan(best["ci95_low"], best["ci95_high"], color="0.8", alpha=0.6, label="best constant (95% CI)")
    left.axhline(0, color="k", lw=0.8)
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.minorticks_off()
        ax.set_xlabel("critic steps", fontsize=9)
        ax.grid(lw=0.4, alpha=0.5)
    left.set_ylabel("true value − fixed gain (paired, 95% CI)", fontsize=9)
    left.set_title("learned bidder against the critic's budget", fontsize=10)
    left.legend(fontsize=7, loc="lower right")
    right.set_ylabel("held-out TD loss (value + CPC)", fontsize=9)
    right.set_yscale("log")
    right.set_title("held-out TD loss (each critic bootstraps from itself)", fontsize=10)
    fig.suptitle(f"pinterest_rlbp's backups, budgets and placebo in the contextual market (our reconstruction), "
                 f"{s['n_seeds']} seeds", fontsize=11)
    return fig
