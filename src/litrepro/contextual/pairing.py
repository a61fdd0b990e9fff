"""The learned bidder against the per-campaign table policy, paired over the seeds both contextual studies share.

The contextual budget study (``contextual_budget.json``) runs the learned bidder at each critic budget; the
contextual study (``contextual_study.json``) runs the table policies, oracles tuned with the simulator. Both run
on the same seeds, evaluation days and draws, and the arms they share agree exactly on every seed (the budget
study checks it). Each study compares its arms with the best constant, never with the other study's arms. This
module pairs them per seed:

    d_s = v_s(arm) − v_s(table),    interval = paired 95% t interval of (d_s) over the shared seeds,

for the true value ``value`` and for ``within_campaign_gain`` (value minus each campaign's own mix of the actions
it took), for every learned arm and budget against ``campaign_table`` and ``kind_table``. It reads the two
committed files only (no simulation) and writes ``rendered/pinterest_rlbp/contextual_pairing.json``
with the per-seed differences, so that :mod:`litrepro.recompute_contextual`-style checks and the tests can
recompute every interval. ``python -m litrepro study rlbp-contextual-pairing`` (``make rlbp-contextual-pairing``) writes it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

from litrepro.paths import ROOT

BUDGET = "rendered/pinterest_rlbp/contextual_budget.json"
STUDY = "rendered/pinterest_rlbp/contextual_study.json"
PATH = "rendered/pinterest_rlbp/contextual_pairing.json"
TABLES = ("campaign_table", "kind_table")
PARTS = ("value", "within_campaign_gain")
#: Arms both studies hold, which must agree on every seed for the pairing to hold (the same days and draws).
SHARED = ("fixed_gain", "best_constant", "best_per_campaign")


class PairingRefused(ValueError):
    """The two studies do not pair: other seeds, or a shared arm that differs on some seed."""


def _sha(rel: str, root: Path) -> str:
    return hashlib.sha256((root / rel).read_bytes()).hexdigest()


MODULE = "src/litrepro/contextual/pairing.py"


def source_hashes(root: Path = ROOT) -> dict[str, str]:
    """The two input files and this module: the output is stale when any of them changes."""
    return {rel: _sha(rel, root) for rel in (BUDGET, STUDY, MODULE)}


def pair(budget: Mapping[str, Any], study: Mapping[str, Any]) -> dict[str, Any]:
    """Every learned arm (``budget``'s decomposition keys) minus each table policy, per part, paired by seed."""
    from litrepro import stats

    by_b = {r["seed"]: r for r in budget["per_seed"]}
    by_s = {r["seed"]: r for r in study["per_seed"]}
    if sorted(by_b) != sorted(by_s):
        raise PairingRefused(f"the studies ran other seeds: {sorted(by_b)} and {sorted(by_s)}")
    seeds = sorted(by_b)
    for seed in seeds:
        for arm in SHARED:
            if by_b[seed]["arms"][arm] != by_s[seed]["arms"][arm]:
                raise PairingRefused(f"seed {seed}: {arm} differs between the studies ({by_b[seed]['arms'][arm]!r} "
                                     f"and {by_s[seed]['arms'][arm]!r}): they do not share days and draws")
    learned = sorted(by_b[seeds[0]]["decomposition"])
    rows = []
    for arm in learned:
        for table in TABLES:
            for part in PARTS:
                a = [by_b[s]["decomposition"][arm][part] for s in seeds]   # (n,) per seed
                b = [by_s[s]["decomposition"][table][part] for s in seeds]  # (n,)
                ci = stats.paired_ci(a, b)
                rows.append({"arm": arm, "against": table, "part": part, "comparison": f"{arm} - {table}",
                             "critic_steps": int(arm.rsplit("_", 1)[1]),                  # "max_min_6000": 6000
                             **ci, "verdict": stats.verdict(ci),
                             "per_seed_differences": [x - y for x, y in zip(a, b)]})
    return {"seeds": seeds, "rows": rows}


def build(root: Path = ROOT) -> dict[str, Any]:
    return build_from(root / BUDGET, root / STUDY)


def build_from(budget_path: Path, study_path: Path) -> dict[str, Any]:
    """The pairing of the two studies at these paths, with their sha256 (under their repository names) and this
    module's: the committed file is stale when any of them changes."""
    budget_raw, study_raw = Path(budget_path).read_bytes(), Path(study_path).read_bytes()
    hashes = {BUDGET: hashlib.sha256(budget_raw).hexdigest(), STUDY: hashlib.sha256(study_raw).hexdigest(),
              MODULE: _sha(MODULE, ROOT)}
    return {**pair(json.loads(budget_raw), json.loads(study_raw)), "source_sha256": hashes,
            "about": "learned arm minus table policy, paired by seed over the two contextual studies "
                     "(litrepro.contextual.pairing); our reconstruction, like both studies"}


def row(data: Mapping[str, Any], arm: str, against: str, part: str) -> Mapping[str, Any]:
    return next(r for r in data["rows"] if (r["arm"], r["against"], r["part"]) == (arm, against, part))
