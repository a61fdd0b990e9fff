"""The d3rlpy cross-check's summary, recomputed from its per-seed values (issue 34, item 1).

Part of :mod:`litrepro.recompute`: it reads only ``rendered/pinterest_rlbp/d3rlpy_crosscheck.json`` and imports
none of the study, statistics or wording modules.  Definitions, restated from the study's docstring:

* per seed: the best constant is the largest of the nine constant actions' true values (the first on a tie),
  its action that index, and the fixed gain the value of action 4;
* per (learner, checkpoint): the paired t intervals of ``true_value - fixed_gain`` and
  ``true_value - best_constant`` over seeds, and the mean over seeds of each action's share;
* the headroom: the paired t interval of ``best_constant - fixed_gain``;
* every learner appears at every checkpoint of the settings.
"""

from __future__ import annotations

from typing import Any, Mapping

from litrepro.recompute import _Ledger, _mean, _run

D3RLPY = "rendered/pinterest_rlbp/d3rlpy_crosscheck.json"
FIXED_GAIN_ACTION = 4
BASELINES = {"minus_fixed_gain": "fixed_gain", "minus_best_constant": "best_constant"}

__all__ = ["D3RLPY", "check_d3rlpy", "plan"]


def _check_d3rlpy(d: Mapping[str, Any], L: _Ledger) -> None:
    rows = sorted(d["per_seed"], key=lambda r: r["seed"])
    L.same("n_seeds", d.get("n_seeds"), len(rows))
    L.same("seeds", sorted(d.get("seeds", [])), [r["seed"] for r in rows])
    for r in rows:
        path = f"per_seed[{r['seed']}]"
        best = 0
        for i, v in enumerate(r["constant"]):
            if v > r["constant"][best]:
                best = i
        L.same(f"{path}.best_constant_action", r["best_constant_action"], best)
        L.num(f"{path}.best_constant", r["best_constant"], r["constant"][best])
        L.num(f"{path}.fixed_gain", r["fixed_gain"], r["constant"][FIXED_GAIN_ACTION])
    summary = d["summary"]
    for i, row in enumerate(summary["rows"]):
        path = f"summary.rows[{i}] ({row.get('algo')} at {row.get('steps')})"
        with L.section(path):
            cells = [r["algos"][row["algo"]]["checkpoints"][str(row["steps"])] for r in rows]
            for key, base in BASELINES.items():
                L.interval(f"{path}.{key}", row[key], [c["true_value"] - r[base] for c, r in zip(cells, rows)],
                           verdict=True)
            shares = [_mean([c["action_shares"][a] for c in cells]) for a in range(len(cells[0]["action_shares"]))]
            L.vector(f"{path}.mean_action_shares", row["mean_action_shares"], shares)
            L.same(f"{path}.n", row["n"], len(rows))
    L.members("summary.rows (learner x checkpoint)", [(r["algo"], r["steps"]) for r in summary["rows"]],
              [(a, s) for a in d["settings"]["algos"] for s in d["settings"]["checkpoints"]])
    L.interval("summary.headroom", summary["headroom"], [r["best_constant"] - r["fixed_gain"] for r in rows],
               verdict=True)


def check_d3rlpy(data: Mapping[str, Any]) -> list[str]:
    """Problems in ``d3rlpy_crosscheck.json``'s summary against its per-seed values (empty: all recomputed)."""
    return _run(D3RLPY, _check_d3rlpy, data).problems


def plan(load) -> list[tuple[str, Any]]:
    """``(file, fn(data, ledger))`` for :func:`litrepro.recompute.check`."""
    return [(D3RLPY, _check_d3rlpy)]
