"""The learned bidder against the critic's training budget, and against the baselines a practitioner uses.

``make rlbp-budget`` (``python -m litrepro study rlbp-budget``).  Our seed runs train the critic for 600
steps (our default: the seed file records no budget), and the verdict could turn with the budget.
This study shows the outcome against the budget before reading a
verdict off one budget.  Per seed, on the same world, logged data, evaluation days and
named random streams (:func:`litrepro.rlbp.diagnosis.run_seed`, every pipeline check on
every arm):

* **the grid**: every backup of :data:`BACKUPS` at every budget of :data:`BUDGETS`
  (``max_min`` is the seed's; ``fused_greedy``, ``none`` and ``expected_sarsa`` under the
  logging policy mu are ours).  A run at budget B is its own run of B steps;
* **a convergence rule from logged data only** (:func:`converged_budget`): per seed and
  backup, the budget of the grid with the lowest held-out TD loss (value + CPC heads, on
  the held-out campaigns' logged transitions, each critic bootstrapping from itself), the
  early-stopping choice a practitioner can make without the simulator;
* **data scaling with compute scaled** (:data:`SCALING`): 8 and 16 logged days with the
  steps in proportion to the data (1200, 2400), for ``max_min`` and ``expected_sarsa``;
* **baselines**: the untuned default (the fixed gain, action 4, the grid's centre), the
  offline-tuned constant (:func:`litrepro.rlbp.diagnosis.tuned_constant`: fitted-Q
  evaluation of each constant action on the logged data), and the best constant and best
  per-campaign action in hindsight (upper bounds among constant policies, from the simulator's truth).

Every difference is paired by seed with a 95% Student-t interval; every row is recomputed
by a plain loop over the per-seed values (:func:`check_rows`) and a mismatch writes
nothing.  An integrity check that fails refuses the study; an outcome check
(:data:`litrepro.rlbp.diagnosis.OUTCOME_CHECKS`) flags the seed, which stays in.  **The
budgets, the rule, the scaling, the tuned constant and every backup but max_min are our
reconstruction**; the seed file fixes none of them.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from litrepro.paths import RENDERED

PATH = RENDERED / "pinterest_rlbp" / "budget_study.json"
PLOT = PATH.with_suffix(".png")
#: backup -> config changes (``expected_sarsa``: the policy backup with one round, whose next policy is mu).
BACKUPS: dict[str, dict] = {"max_min": {}, "fused_greedy": {"critic_backup": "fused_greedy"},
                            "none": {"critic_backup": "none"},
                            "expected_sarsa": {"critic_backup": "policy", "policy_rounds": 1}}
BUDGETS = (600, 1500, 3000, 6000, 12000)
SEED_BUDGET = BUDGETS[0]           # our per-seed notebooks' critic_steps (the grid's smallest; the seed file records none)
#: (logged days, critic steps): steps in proportion to the data (600 steps per 4 days).
SCALING = ((8, 1200), (16, 2400))
SCALING_BACKUPS = ("max_min", "expected_sarsa")
#: The baselines every learned policy is compared with: key in the seed's baselines -> what it is.
BASELINES = {"fixed_gain": "the untuned default (action 4, the grid's centre)",
             "tuned_constant": "the offline-tuned constant (fitted-Q evaluation on the logged data)",
             "best_constant": "the best constant action in hindsight (simulator truth)",
             "best_per_campaign": "the best action per campaign in hindsight (simulator truth)",
             "behaviour": "the logging policy (uniform over the nine actions)"}
MAX_SEEDS = 200


def arm_name(backup: str, steps: int, days: int | None = None) -> str:
    return f"{backup}@{steps}" + (f"/{days}d" if days else "")


def grid_table(backups: Sequence[str] = tuple(BACKUPS), budgets: Sequence[int] = BUDGETS) -> dict:
    """The arms of the main grid in :func:`litrepro.rlbp.diagnosis.run_seed`'s table form."""
    return {arm_name(b, n): (f"{b}, {n} critic steps", {**BACKUPS[b], "critic_steps": n}, "td")
            for b in backups for n in budgets}


def run_seed(seed: int, *, overrides: Mapping[str, Any] | None = None, budgets: Sequence[int] = BUDGETS,
             scaling: Sequence[tuple[int, int]] = SCALING) -> dict:
    """One seed: the grid, the scaling arms and the seed's baselines (per-arm figures and checks)."""
    from litrepro.rlbp import diagnosis

    main = diagnosis.run_seed(seed, table=grid_table(budgets=budgets), replays=False, overrides=overrides)
    scaled = {}
    for days, steps in scaling:
        table = {arm_name(b, steps, days): (f"{b}, {steps} steps, {days} logged days",
                                            {**BACKUPS[b], "critic_steps": steps}, "td") for b in SCALING_BACKUPS}
        run = diagnosis.run_seed(seed, table=table, replays=False, tune=False,
                                 overrides={**(overrides or {}), "logged_days": days})
        if run["eval_day_hashes"] != main["eval_day_hashes"]:
            raise ValueError(f"seed {seed}: the {days}-day run met other evaluation days")
        scaled.update(run["arms"])
    room, tuned = main["headroom"], main["tuned_constant"]
    any_arm = next(iter(main["arms"].values()))
    baselines = {"fixed_gain": room["fixed_gain"], "tuned_constant": room["constant"][tuned["action"]],
                 "best_constant": room["best_constant"], "best_per_campaign": room["best_per_campaign"],
                 "behaviour": any_arm["behaviour_true_value"]}
    return {"seed": seed, "eval_day_hashes": main["eval_day_hashes"], "arms": {**main["arms"], **scaled},
            "headroom": room, "tuned_constant": tuned, "baselines": baselines}


# --- The convergence rule and the summary -----------------------------------------------------------

def converged_budget(row: Mapping[str, Any], backup: str, budgets: Sequence[int] = BUDGETS) -> int:
    """The budget of the grid whose critic has the lowest held-out TD loss (value + CPC), the smaller on a tie."""
    loss = {n: sum(row["arms"][arm_name(backup, n)]["heldout_td_loss"]) for n in budgets}
    return min(budgets, key=lambda n: (loss[n], n))


def integrity_failures(rows: Sequence[Mapping[str, Any]]) -> dict[int, list[str]]:
    from litrepro.rlbp.diagnosis import OUTCOME_CHECKS

    out = {}
    for r in rows:
        bad = [f"{a}.{k}" for a, x in r["arms"].items() for k, v in x["checks"].items()
               if v is not True and k not in OUTCOME_CHECKS]
        if bad:
            out[r["seed"]] = bad
    return out


def outcome_flags(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, list[str]]]:
    """``{arm: {seed: failed outcome checks}}`` (reported, not dropped)."""
    from litrepro.rlbp.diagnosis import OUTCOME_CHECKS

    out: dict[str, dict[str, list[str]]] = {}
    for r in rows:
        for a, x in r["arms"].items():
            bad = [k for k in OUTCOME_CHECKS if x["checks"].get(k, True) is not True]
            if bad:
                out.setdefault(a, {})[str(r["seed"])] = bad
    return out


class StudyRefused(ValueError):
    """An integrity check failed, seeds share evaluation days, or a row does not recompute: nothing is written."""


def _row(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    from litrepro.stats import paired_ci, verdict

    ci = paired_ci(a, b)
    return {**ci, "verdict": verdict(ci)}


def _values(rows, backup: str, pick) -> list[float]:
    return [r["arms"][arm_name(backup, pick(r))]["learned_true_value"] for r in rows]


def summarise(rows: Sequence[Mapping[str, Any]], budgets: Sequence[int] = BUDGETS,
              scaling: Sequence[tuple[int, int]] = SCALING) -> dict[str, Any]:
    """Per backup and budget, and per backup at the converged budget: learned - each baseline (paired 95% t),
    the held-out TD loss; the baselines against each other; the scaling rows; the rule's picks per seed."""
    import numpy as np

    bad = integrity_failures(rows)
    if bad:
        raise StudyRefused(f"rlbp budget study refused, integrity checks failed on seeds {bad}")
    seen: dict[str, int] = {}
    for r in rows:
        for h in r["eval_day_hashes"]:
            if seen.setdefault(h, r["seed"]) != r["seed"]:
                raise StudyRefused(f"rlbp budget study refused: seeds {seen[h]} and {r['seed']} share an evaluation day")
    rows = sorted(rows, key=lambda r: r["seed"])
    base = {k: [r["baselines"][k] for r in rows] for k in BASELINES}
    grid = []
    for b in BACKUPS:
        for n in budgets:
            learned = _values(rows, b, lambda r, n=n: n)
            loss = [sum(r["arms"][arm_name(b, n)]["heldout_td_loss"]) for r in rows]
            grid.append({"backup": b, "steps": n, "mean_value": float(np.mean(learned)),
                         "heldout_td_loss": {"mean": float(np.mean(loss)), "values": loss},
                         **{f"minus_{k}": _row(learned, base[k]) for k in BASELINES}})
    picks = {b: {str(r["seed"]): converged_budget(r, b, budgets) for r in rows} for b in BACKUPS}
    converged = []
    for b in BACKUPS:
        learned = _values(rows, b, lambda r, b=b: picks[b][str(r["seed"])])
        converged.append({"backup": b, "picks": picks[b], **{f"minus_{k}": _row(learned, base[k]) for k in BASELINES},
                          "converged_minus_seed_budget": _row(learned, _values(rows, b, lambda r: min(budgets)))})
    baselines = {f"{k} - fixed_gain": _row(base[k], base["fixed_gain"]) for k in BASELINES if k != "fixed_gain"}
    baselines["best_constant - tuned_constant"] = _row(base["best_constant"], base["tuned_constant"])
    tuned = [r["tuned_constant"]["action"] for r in rows]
    best = [r["headroom"]["best_constant_action"] for r in rows]
    scaled = []
    for days, steps in scaling:
        for b in SCALING_BACKUPS:
            learned = [r["arms"][arm_name(b, steps, days)]["learned_true_value"] for r in rows]
            scaled.append({"backup": b, "logged_days": days, "steps": steps,
                           "minus_fixed_gain": _row(learned, base["fixed_gain"]),
                           "minus_four_days_same_ratio": _row(learned, _values(rows, b, lambda r: min(budgets)))})
    out = {"grid": grid, "converged": converged, "baselines": baselines, "scaling": scaled,
           "tuned_constant": {"actions": tuned, "best_constant_actions": best,
                              "picks_best": sum(t == x for t, x in zip(tuned, best)),
                              "ips_actions": [r["tuned_constant"]["ips_action"] for r in rows]},
           "outcome_flags": outcome_flags(rows), "seeds": [r["seed"] for r in rows]}
    problems = check_rows(rows, out, budgets, scaling)
    if problems:
        raise StudyRefused("rows differ from their plain-loop recomputation: " + "; ".join(problems[:5]))
    return out


def check_rows(rows: Sequence[Mapping[str, Any]], out: Mapping[str, Any], budgets: Sequence[int] = BUDGETS,
               scaling: Sequence[tuple[int, int]] = SCALING) -> list[str]:
    """Every interval of :func:`summarise` and the rule's picks, recomputed by plain loops (labels parsed afresh)."""
    from litrepro.rlbp.study import _row_ok

    by = {r["seed"]: r for r in rows}
    bad = []

    def value(seed, arm):
        return by[seed]["arms"][arm]["learned_true_value"]

    def base(key):
        return {s: by[s]["baselines"][key] for s in by}

    for g in out["grid"]:
        learned = {s: value(s, f"{g['backup']}@{g['steps']}") for s in by}
        for k in BASELINES:
            if not _row_ok(g[f"minus_{k}"], learned, base(k)):
                bad.append(f"grid {g['backup']}@{g['steps']} - {k}")
    for c in out["converged"]:
        for s in by:                                      # the rule, by a plain loop over the grid
            best_n, best_loss = None, None
            for n in sorted(budgets):
                arm = by[s]["arms"][f"{c['backup']}@{n}"]
                loss = arm["heldout_td_loss"][0] + arm["heldout_td_loss"][1]
                if best_loss is None or loss < best_loss:
                    best_n, best_loss = n, loss
            if c["picks"][str(s)] != best_n:
                bad.append(f"converged {c['backup']} pick on seed {s}")
        learned = {s: value(s, f"{c['backup']}@{c['picks'][str(s)]}") for s in by}
        for k in BASELINES:
            if not _row_ok(c[f"minus_{k}"], learned, base(k)):
                bad.append(f"converged {c['backup']} - {k}")
        if not _row_ok(c["converged_minus_seed_budget"], learned, {s: value(s, f"{c['backup']}@{min(budgets)}") for s in by}):
            bad.append(f"converged {c['backup']} - seed budget")
    for label, row in out["baselines"].items():
        a, b = label.split(" - ")
        if not _row_ok(row, base(a), base(b)):
            bad.append(f"baselines {label}")
    for row in out["scaling"]:
        learned = {s: value(s, f"{row['backup']}@{row['steps']}/{row['logged_days']}d") for s in by}
        if not _row_ok(row["minus_fixed_gain"], learned, base("fixed_gain")) or not _row_ok(
                row["minus_four_days_same_ratio"], learned, {s: value(s, f"{row['backup']}@{min(budgets)}") for s in by}):
            bad.append(f"scaling {row['backup']} {row['logged_days']} days")
    for s in by:                                          # the tuned constant's truth is that action's constant value
        t = by[s]["tuned_constant"]
        fqe = t["fqe"]
        if t["action"] != max(range(len(fqe)), key=lambda a: (fqe[a], -a)) or \
                by[s]["baselines"]["tuned_constant"] != by[s]["headroom"]["constant"][t["action"]]:
            bad.append(f"tuned constant on seed {s}")
    return bad


# --- Words, table, figure ---------------------------------------------------------------------------

def _words(row: Mapping[str, Any], against: str) -> str:
    """``'below the untuned default (-0.023 [-0.031, -0.014])'``: the word from the interval, bounds rounded outward."""
    from litrepro import prose

    word = prose.direction(row, "above", "below")
    head = f"no detectable difference from {against}" if word == prose.NO_DIFFERENCE else f"{word} {against}"
    return f"{head} ({prose.estimate(row)})"


def _grid(data, backup, steps):
    return next(g for g in data["summary"]["grid"] if g["backup"] == backup and g["steps"] == steps)


def _converged(data, backup):
    return next(c for c in data["summary"]["converged"] if c["backup"] == backup)


def findings(data: Mapping[str, Any]) -> list[str]:
    """What the budget study shows, every word from an interval of the committed JSON."""
    s = data["summary"]
    n = data["n_seeds"]
    seed_row, conv = _grid(data, "max_min", SEED_BUDGET), _converged(data, "max_min")
    picks = sorted(conv["picks"].values())
    out = [f"Every arm is run on the same data, evaluation days and draws over {n} seeds; differences are paired 95% t "
           "intervals, each at 95% on its own; the budgets, the convergence rule, the tuned constant and every backup but "
           "max_min are our reconstruction."]
    out.append(f"At our default budget ({SEED_BUDGET} critic steps; the seed file records no budget) the learned max_min policy is "
               f"{_words(seed_row['minus_fixed_gain'], 'the untuned default')}, "
               f"{_words(seed_row['minus_tuned_constant'], 'the offline-tuned constant')} and "
               f"{_words(seed_row['minus_best_constant'], 'the best constant in hindsight')}.")
    out.append(f"At the budget the convergence rule picks from logged data (held-out TD loss; {picks[0]} to {picks[-1]} "
               f"steps over the seeds, {max(BUDGETS)}, the largest tried, on {sum(x == max(BUDGETS) for x in picks)} of {n}: "
               f"the best budget tried, not a shown convergence), it is {_words(conv['minus_fixed_gain'], 'the untuned default')}, "
               f"{_words(conv['minus_tuned_constant'], 'the offline-tuned constant')} and "
               f"{_words(conv['minus_best_constant'], 'the best constant in hindsight')}.")
    top = max(BUDGETS)
    for b in BACKUPS:
        row = _grid(data, b, top)
        out.append(f"{b} at {top} steps: {_words(row['minus_fixed_gain'], 'the untuned default')}; "
                   f"{_words(row['minus_best_constant'], 'the best constant in hindsight')}.")
    t = s["tuned_constant"]
    ips_best = sum(a == b for a, b in zip(t["ips_actions"], t["best_constant_actions"]))
    out.append(f"The offline-tuned constant (fitted-Q evaluation of each constant action on the logged data) picks "
               f"the best constant in hindsight on {t['picks_best']} of {n} seeds, and the untuned default on "
               f"{sum(a == 4 for a in t['actions'])}; it is "
               f"{_words(s['baselines']['tuned_constant - fixed_gain'], 'the untuned default')}. Ordinary IPS of the "
               f"one-segment reward, the other estimator tried, picks the best constant on {ips_best} of {n} seeds"
               + (": from these logs neither estimator finds the constant that the simulator ranks first on any seed."
                  if t["picks_best"] == 0 and ips_best == 0 else "."))
    for row in s["scaling"]:
        out.append(f"{row['backup']} with {row['logged_days']} logged days and {row['steps']} steps (compute in "
                   f"proportion to the data): {_words(row['minus_fixed_gain'], 'the untuned default')}.")
    flags = s["outcome_flags"]
    if flags:
        out.append("Outcome checks flagged (kept in every interval): " + "; ".join(
            f"{a} on seed(s) {', '.join(sorted(v))}" for a, v in sorted(flags.items())) + ".")
    return out


def table(data: Mapping[str, Any]):
    """Per backup and budget (and converged): learned - each of the three practitioner baselines."""
    import pandas as pd

    from litrepro import prose

    def cell(r):
        return prose.estimate(r)

    out = []
    for g in data["summary"]["grid"]:
        out.append({"backup": g["backup"], "critic steps": str(g["steps"]), "held-out TD loss": f"{g['heldout_td_loss']['mean']:.3f}",
                    **{f"− {k}": cell(g[f"minus_{k}"]) for k in ("fixed_gain", "tuned_constant", "best_constant")}})
    for c in data["summary"]["converged"]:
        out.append({"backup": c["backup"], "critic steps": "converged", "held-out TD loss": "",
                    **{f"− {k}": cell(c[f"minus_{k}"]) for k in ("fixed_gain", "tuned_constant", "best_constant")}})
    return pd.DataFrame(out)


def plot(data: Mapping[str, Any]):
    """Left: learned - untuned default against critic steps, one line per backup, 95% bands; the tuned constant,
    the best constant and the best per campaign as reference lines.  Right: held-out TD loss against steps."""
    import numpy as np
    from matplotlib.figure import Figure

    s = data["summary"]
    fig = Figure(figsize=(11.5, 4.6), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[1.5, 1])
    for i, b in enumerate(BACKUPS):
        rows = [g for g in s["grid"] if g["backup"] == b]
        x = np.array([g["steps"] for g in rows])
        m = np.array([g["minus_fixed_gain"]["mean_difference"] for g in rows])
        lo = np.array([g["minus_fixed_gain"]["ci95_low"] for g in rows])
        hi = np.array([g["minus_fixed_gain"]["ci95_high"] for g in rows])
        left.plot(x, m, "o-", color=f"C{i}", label=b)
        left.fill_between(x, lo, hi, color=f"C{i}", alpha=0.15)
        right.plot(x, [g["heldout_td_loss"]["mean"] for g in rows], "o-", color=f"C{i}", label=b)
    styles = {"tuned_constant": ("C5", ":"), "best_constant": ("C3", "--"), "best_per_campaign": ("C7", "-.")}
    for k, (color, ls) in styles.items():
        ref = s["baselines"][f"{k} - fixed_gain"]["mean_difference"]
        left.axhline(ref, color=color, ls=ls, lw=1.2, label=f"{k.replace('_', ' ')} (mean)")
    left.axhline(0.0, color="k", lw=1, label="untuned default (fixed gain)")
    left.axvline(SEED_BUDGET, color="0.5", lw=0.8, ls=":")
    left.set_xscale("log")
    left.set_xticks(list(BUDGETS), [str(n) for n in BUDGETS])
    left.set(xlabel="critic steps (log scale; dotted: our default, 600)",
             ylabel="learned − untuned default (true value)",
             title=f"learned policy against the critic's budget, 95% paired bands (n = {data['n_seeds']})")
    left.legend(fontsize=7, loc="lower right", ncol=2)
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xticks(list(BUDGETS), [str(n) for n in BUDGETS])
    right.set(xlabel="critic steps (log scale)", ylabel="held-out TD loss (value + CPC, mean over seeds)",
              title="held-out TD loss")
    right.legend(fontsize=7)
    return fig


# --- Provenance --------------------------------------------------------------------------------------

#: This module's functions and constants that compute the numbers (the words, the table and the figure do not).
COMPUTING = ("arm_name", "grid_table", "run_seed", "converged_budget", "integrity_failures", "outcome_flags",
             "_row", "_values", "summarise", "check_rows")


def source_hashes() -> dict[str, str]:
    """The diagnosis's sources (the rlbp package less its display code, ``stats.py``, the diagnosis's computing
    functions), this study's declaration, and this module's computing functions and constants."""
    from litrepro.rlbp.diagnosis import source_hashes as diagnosis_hashes

    out = diagnosis_hashes(study="rlbp-budget")            # with this study's declaration, not the diagnosis's
    this = globals()
    code = "".join(inspect.getsource(this[name]) for name in COMPUTING) + json.dumps(
        [BACKUPS, BUDGETS, SEED_BUDGET, SCALING, SCALING_BACKUPS, sorted(BASELINES)], sort_keys=True)
    out["budget computing functions and constants"] = hashlib.sha256(code.encode()).hexdigest()
    return out


def load(path: Path = PATH) -> dict[str, Any]:
    return json.loads(Path(path).read_text())
