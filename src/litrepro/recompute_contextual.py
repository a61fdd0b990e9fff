"""The contextual market's three study files, recomputed from their per-seed values (issue 34, item 1).

Part of :mod:`litrepro.recompute` and written in its spirit: it reads only the committed JSON files and
recomputes every summary figure by plain loops (:func:`litrepro.recompute.t_interval`), importing none of the
study, statistics or wording modules.  The definitions are restated here from the studies' docstrings:

* every ``comparisons`` row ``A_minus_B`` is the paired t interval of ``value[A] - value[B]`` per seed, and its
  ``arm`` and ``baseline`` fields name A and B;
* ``arms`` and ``heldout_td_loss`` rows are t intervals of the per-seed values;
* a ``state_gain`` row of an arm is ``value - mix_value`` (part ``state_gain``) or ``value - campaign_mix_value``
  (part ``within_campaign_gain``, the budget and diagnosis studies' only part) of its decomposition;
* the convergence rule picks, per seed and backup, the budget whose critic has the lowest held-out TD loss, the
  smaller budget on a tie; ``<backup>_rule`` is the backup's value at that budget;
* per seed (contextual study): the tuned action is the argmax of the fit days' constant values; the best
  constant and the fixed gain (action 4) are the evaluation days' values of those actions; the landscape's best
  point is the argmax of its values and is interior when neither grid index is on the grid's edge;
* the estimators' scores: bias = estimate - truth for the top-budget learned bidder, the tuned constant and
  the default (action 4); coverage counts the truth inside [low, high] over seeds x those three (two when the
  tuned constant is the default); the ranking of the three by estimate equals the truth's (ties kept in that
  order); the constant with the highest estimate is the truth's best (first on ties), and its regret is the
  truth's best minus the truth of the pick; the better learned budget by estimate is the truth's;
* the diagnosis pairs each arm with the budget study's ``max_min`` and placebo at the same budget and with the
  fixed gain, seed by seed, and its re-run ``max_min`` at the smallest budget equals the budget study's.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from litrepro.recompute import _Ledger, _run

CONTEXTUAL_STUDY = "rendered/pinterest_rlbp/contextual_study.json"
CONTEXTUAL_BUDGET = "rendered/pinterest_rlbp/contextual_budget.json"
CONTEXTUAL_DIAGNOSIS = "rendered/pinterest_rlbp/contextual_diagnosis.json"
FIXED_GAIN_ACTION, DEFAULT = 4, "constant_4"
PARTS = {"state_gain": "mix_value", "within_campaign_gain": "campaign_mix_value"}

__all__ = ["CONTEXTUAL_STUDY", "CONTEXTUAL_BUDGET", "CONTEXTUAL_DIAGNOSIS", "check_contextual_study",
           "check_contextual_budget", "check_contextual_diagnosis"]


def _by_seed(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(rows, key=lambda r: r["seed"])


def _argmax(xs: Sequence[float]) -> int:
    """The first index of the largest value (a plain loop)."""
    best = 0
    for i in range(1, len(xs)):
        if xs[i] > xs[best]:
            best = i
    return best


def _seeds(d: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], L: _Ledger) -> None:
    seeds = [r["seed"] for r in rows]
    L.same("summary.n_seeds", d["summary"].get("n_seeds"), len(rows))
    L.same("summary.seeds", d["summary"].get("seeds"), seeds)
    L.same("n_seeds", d.get("n_seeds"), len(rows))
    if len(set(seeds)) != len(seeds):
        L.note("per_seed", f"a seed appears twice: {seeds}")


def _interval_rows(L: _Ledger, path: str, table: Mapping[str, Any], values: Sequence[Mapping[str, float]]) -> None:
    """Each ``table[name]`` is the t interval of the per-seed ``values[i][name]``."""
    for name, row in table.items():
        with L.section(f"{path}.{name}"):
            L.interval(f"{path}.{name}", row, [v[name] for v in values])


def _key(arm: str, baseline: str) -> str:
    return f"{arm}_minus_{baseline}"


def _key_same_budget(arm: str, baseline: str) -> str:
    """The diagnosis' keys name a baseline at the arm's own budget without its budget: ``top_1_600_minus_max_min``."""
    budget = "_" + arm.rsplit("_", 1)[1]
    return f"{arm}_minus_{baseline[: -len(budget)] if baseline.endswith(budget) else baseline}"


def _comparisons(L: _Ledger, table: Mapping[str, Any], values: Sequence[Mapping[str, float]],
                 required: Sequence[tuple[str, str]], key_of=_key) -> None:
    """Every row ``A_minus_B`` recomputed from ``values``; each (A, B) of ``required`` present."""
    for key, row in table.items():
        path = f"summary.comparisons.{key}"
        with L.section(path):
            L.same(f"{path}.key", key, key_of(row["arm"], row["baseline"]))
            L.interval(path, row, [v[row["arm"]] - v[row["baseline"]] for v in values], verdict=True)
    have = {(row.get("arm"), row.get("baseline")) for row in table.values()}
    L.count += 1
    missing = [f"{a}_minus_{b}" for a, b in required if (a, b) not in have]
    if missing:
        L.note("summary.comparisons", f"missing {missing}")


def _state_gain(L: _Ledger, table: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], default_part: str) -> None:
    for key, row in table.items():
        path = f"summary.state_gain.{key}"
        with L.section(path):
            arm, part = row["arm"], row.get("part", default_part)
            L.same(f"{path}.key", key, arm if "/" not in key else f"{arm}/{part}")
            mix = PARTS[part]
            L.interval(path, row, [r["decomposition"][arm]["value"] - r["decomposition"][arm][mix] for r in rows],
                       verdict=True)
    L.count += 1
    arms = set(rows[0]["decomposition"]) if rows else set()
    if {row.get("arm") for row in table.values()} != arms:
        L.note("summary.state_gain", f"arms {sorted({row.get('arm') for row in table.values()})}, "
                                     f"decomposed arms {sorted(arms)}")


def _rule_budget(r: Mapping[str, Any], backup: str, budgets: Sequence[int]) -> int:
    """The budget with the lowest held-out TD loss; the smaller budget on a tie."""
    ranked = sorted(budgets, key=lambda b: (r["heldout_td_loss"][f"{backup}_{b}"], b))
    return ranked[0]


# --- contextual_study.json -------------------------------------------------------------------------

def _check_per_seed_oracles(r: Mapping[str, Any], L: _Ledger, grid_points: int) -> None:
    path = f"per_seed[{r['seed']}]"
    tuned = _argmax(r["constants_fit"])
    L.same(f"{path}.tuned_action", r["tuned_action"], tuned)
    L.num(f"{path}.arms.best_constant", r["arms"]["best_constant"], r["constants_eval"][tuned])
    L.num(f"{path}.arms.fixed_gain", r["arms"]["fixed_gain"], r["constants_eval"][FIXED_GAIN_ACTION])
    land = r["landscape"]
    best = _argmax(land["values"])
    L.same(f"{path}.landscape.best", land["best"], best)
    i, j = best // grid_points, best % grid_points
    L.same(f"{path}.landscape.best_constant_interior", land["best_constant_interior"],
           0 < i < grid_points - 1 and 0 < j < grid_points - 1)


def _ranks(values: Mapping[str, float], names: Sequence[str]) -> list[str]:
    order = list(range(len(names)))
    order.sort(key=lambda i: (-values[names[i]], i))
    return [names[i] for i in order]


def _check_estimators(d: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], L: _Ledger) -> None:
    budgets = d["settings"]["budgets"]
    top = f"learned_{budgets[-1]}"
    for est, got in d["summary"]["ope"].items():
        path = f"summary.ope.{est}"
        with L.section(path):
            bias: dict[str, list[float]] = {"learned": [], "tuned_constant": [], "default": []}
            covered = cells = ranked = picked = better = 0
            regret = []
            for r in rows:
                truth, e = r["ope"]["truth"], r["ope"]["estimates"]
                roles = {"learned": top, "tuned_constant": f"constant_{r['tuned_action']}", "default": DEFAULT}
                for role, name in roles.items():
                    bias[role].append(e[name][est]["estimate"] - truth[name])
                    cells += 1
                    if e[name][est]["low"] <= truth[name] <= e[name][est]["high"]:
                        covered += 1
                three = []
                for name in roles.values():
                    if name not in three:
                        three.append(name)
                if _ranks(truth, three) == _ranks({k: e[k][est]["estimate"] for k in three}, three):
                    ranked += 1
                constants = [k for k in truth if k.startswith("constant_")]
                pick = constants[_argmax([e[k][est]["estimate"] for k in constants])]
                best = constants[_argmax([truth[k] for k in constants])]
                picked += pick == best
                regret.append(truth[best] - truth[pick])
                learned = [f"learned_{b}" for b in budgets]
                if len(learned) > 1:
                    by_est = learned[_argmax([e[k][est]["estimate"] for k in learned])]
                    better += by_est == learned[_argmax([truth[k] for k in learned])]
            n = len(rows)
            for role, xs in bias.items():
                L.interval(f"{path}.bias.{role}", got["bias"][role], xs)
            L.same(f"{path}.coverage", got["coverage"], {"k": covered, "n": cells})
            L.same(f"{path}.ranks_three", got["ranks_three"], {"k": ranked, "n": n})
            L.same(f"{path}.picks_best_constant", got["picks_best_constant"], {"k": picked, "n": n})
            L.interval(f"{path}.pick_regret", got["pick_regret"], regret)
            if len(budgets) > 1:
                L.same(f"{path}.picks_better_budget", got["picks_better_budget"], {"k": better, "n": n})


def _check_contextual_study(d: Mapping[str, Any], L: _Ledger) -> None:
    rows, s = _by_seed(d["per_seed"]), d["summary"]
    _seeds(d, rows, L)
    for r in rows:
        with L.section(f"per_seed[{r.get('seed')}]"):
            _check_per_seed_oracles(r, L, d["settings"]["grid_points"])
    L.same("summary.interior", s["interior"],
           {"k": sum(1 for r in rows if r["landscape"]["best_constant_interior"]), "n": len(rows)})
    L.same("summary.tuned_actions", s["tuned_actions"], [r["tuned_action"] for r in rows])
    values = [r["arms"] for r in rows]
    L.same("summary.arms (names)", sorted(s["arms"]), sorted(rows[0]["arms"]))
    _interval_rows(L, "summary.arms", s["arms"], values)
    learned = [f"learned_{b}" for b in d["settings"]["budgets"]]
    required = [(a, "best_constant") for a in ("fixed_gain", "best_per_kind", "best_per_campaign", "kind_table",
                                               "campaign_table", *learned)]
    required += [(a, "fixed_gain") for a in ("best_constant", *learned)]
    _comparisons(L, s["comparisons"], values, required)
    _state_gain(L, s["state_gain"], rows, "state_gain")
    _check_estimators(d, rows, L)


# --- contextual_budget.json ------------------------------------------------------------------------

def _budget_values(rows: Sequence[Mapping[str, Any]], budgets: Sequence[int], backups: Sequence[str]) -> list[dict]:
    out = []
    for r in rows:
        v = dict(r["arms"])
        for b in backups:
            v[f"{b}_rule"] = r["arms"][f"{b}_{_rule_budget(r, b, budgets)}"]
        out.append(v)
    return out


def _check_contextual_budget(d: Mapping[str, Any], L: _Ledger, study: Mapping[str, Any] | None) -> None:
    rows, s = _by_seed(d["per_seed"]), d["summary"]
    budgets = list(d["settings"]["budgets"])
    _seeds(d, rows, L)
    backups = sorted(s["rule_budgets"])
    learned = sorted({k.rsplit("_", 1)[0] for k in rows[0]["heldout_td_loss"]})
    L.same("summary.rule_budgets (backups)", backups, sorted(b for b in learned if b != "placebo"))
    values = _budget_values(rows, budgets, backups)
    L.same("summary.arms (names)", sorted(s["arms"]), sorted(values[0]))
    _interval_rows(L, "summary.arms", s["arms"], values)
    _interval_rows(L, "summary.heldout_td_loss", s["heldout_td_loss"], [r["heldout_td_loss"] for r in rows])
    required = [("best_constant", "fixed_gain")]
    for arm in learned:
        for b in budgets:
            required += [(f"{arm}_{b}", "fixed_gain"), (f"{arm}_{b}", "best_constant")]
            if arm != "max_min":
                required.append((f"{arm}_{b}", f"max_min_{b}"))
    required += [(f"{b}_rule", base) for b in backups for base in ("fixed_gain", "best_constant")]
    _comparisons(L, s["comparisons"], values, required)
    _state_gain(L, s["state_gain"], rows, "within_campaign_gain")
    for backup in backups:
        picks = [_rule_budget(r, backup, budgets) for r in rows]
        L.same(f"summary.rule_budgets.{backup}", s["rule_budgets"][backup],
               {str(b): sum(1 for p in picks if p == b) for b in budgets})
    if study is not None:
        theirs = {r["seed"]: r["arms"] for r in study["per_seed"]}
        shared = {"fixed_gain": "fixed_gain", "best_constant": "best_constant",
                  "best_per_campaign": "best_per_campaign"}
        shared |= {f"max_min_{b}": f"learned_{b}" for b in study["settings"]["budgets"] if b in budgets}
        same = sum(1 for r in rows if r["seed"] in theirs
                   and all(r["arms"][ours] == theirs[r["seed"]][name] for ours, name in shared.items()))
        rep = s["replication"]
        L.same("summary.replication.k", rep.get("k"), same)
        L.same("summary.replication.n", rep.get("n"), len(rows))
        L.same("summary.replication.arms", sorted(rep.get("arms", [])), sorted(shared))


# --- contextual_diagnosis.json ---------------------------------------------------------------------

def _check_contextual_diagnosis(d: Mapping[str, Any], L: _Ledger, budget: Mapping[str, Any] | None) -> None:
    rows, s = _by_seed(d["per_seed"]), d["summary"]
    _seeds(d, rows, L)
    if budget is None:
        L.note("(pairing)", f"{CONTEXTUAL_BUDGET} is missing: the diagnosis pairs with it")
        return
    theirs = {r["seed"]: r for r in budget["per_seed"]}
    budgets = list(d["budgets"])
    first = f"max_min_{budgets[0]}"
    for r in rows:
        t = theirs.get(r["seed"])
        if t is None:
            L.note(f"per_seed[{r['seed']}]", "seed missing from the budget study")
            continue
        L.same(f"per_seed[{r['seed']}].arms.{first}", r["arms"][first], t["arms"][first])
        L.same(f"per_seed[{r['seed']}].day_hashes.eval", r["day_hashes"]["eval"], t["day_hashes"]["eval"])
    values = [{**theirs[r["seed"]]["arms"], **r["arms"]} for r in rows]
    rep = s["replicated"]
    L.same("summary.replicated", rep, {"arm": first, "k": sum(1 for r in rows if r["seed"] in theirs
                                                             and r["arms"][first] == theirs[r["seed"]]["arms"][first]),
                                      "n": len(rows)})
    required = [(f"{a}_{b}", base) for a in d["arms"] for b in budgets
                for base in (f"max_min_{b}", f"placebo_{b}", "fixed_gain")]
    _comparisons(L, s["comparisons"], values, required, _key_same_budget)
    _state_gain(L, s["state_gain"], rows, "within_campaign_gain")


# --- entry points ----------------------------------------------------------------------------------

def check_contextual_study(data: Mapping[str, Any]) -> list[str]:
    """Problems in ``contextual_study.json``'s summary and per-seed oracles (empty: all recomputed)."""
    return _run(CONTEXTUAL_STUDY, _check_contextual_study, data).problems


def check_contextual_budget(data: Mapping[str, Any], study: Mapping[str, Any] | None = None) -> list[str]:
    """Problems in ``contextual_budget.json``; ``study``: the contextual study it must replicate."""
    return _run(CONTEXTUAL_BUDGET, lambda d, L: _check_contextual_budget(d, L, study), data).problems


def check_contextual_diagnosis(data: Mapping[str, Any], budget: Mapping[str, Any] | None) -> list[str]:
    """Problems in ``contextual_diagnosis.json``; ``budget``: the budget study it pairs with."""
    return _run(CONTEXTUAL_DIAGNOSIS, lambda d, L: _check_contextual_diagnosis(d, L, budget), data).problems


# --- contextual_pairing.json -----------------------------------------------------------------------

CONTEXTUAL_PAIRING = "rendered/pinterest_rlbp/contextual_pairing.json"


def _check_contextual_pairing(d: Mapping[str, Any], L: _Ledger, budget: Mapping[str, Any] | None,
                              study: Mapping[str, Any] | None) -> None:
    """Every row is the t interval, over the seeds both studies hold, of the learned arm's figure in the budget
    study minus the table policy's in the contextual study, read from the two files by seed (not from the row's
    own per-seed list); every learned arm, table and part has its row."""
    if budget is None or study is None:
        L.note("(file)", "its input studies are missing, so it cannot be recomputed")
        return
    b = {r["seed"]: r["decomposition"] for r in budget["per_seed"]}
    s = {r["seed"]: r["decomposition"] for r in study["per_seed"]}
    seeds = sorted(b)
    L.same("seeds", d.get("seeds"), seeds)
    L.same("seeds of the contextual study", sorted(s), seeds)
    want = [(arm, table, part) for arm in sorted(b[seeds[0]]) for table in ("campaign_table", "kind_table")
            for part in ("value", "within_campaign_gain")]
    L.members("rows", [(r.get("arm"), r.get("against"), r.get("part")) for r in d.get("rows", [])], want)
    for r in d.get("rows", []):
        path = f"rows[{r.get('comparison')}|{r.get('part')}]"
        with L.section(path):
            diffs = [b[k][r["arm"]][r["part"]] - s[k][r["against"]][r["part"]] for k in seeds]
            L.interval(path, r, diffs, verdict=True)
            L.vector(f"{path}.per_seed_differences", r["per_seed_differences"], diffs)


def plan(load) -> list[tuple[str, Any]]:
    """``(file, fn(data, ledger))`` for :func:`litrepro.recompute.check`; ``load(file)`` reads a sibling or None."""
    return [(CONTEXTUAL_STUDY, _check_contextual_study),
            (CONTEXTUAL_BUDGET, lambda d, L: _check_contextual_budget(d, L, load(CONTEXTUAL_STUDY))),
            (CONTEXTUAL_DIAGNOSIS, lambda d, L: _check_contextual_diagnosis(d, L, load(CONTEXTUAL_BUDGET))),
            (CONTEXTUAL_PAIRING, lambda d, L: _check_contextual_pairing(d, L, load(CONTEXTUAL_BUDGET),
                                                                        load(CONTEXTUAL_STUDY)))]

