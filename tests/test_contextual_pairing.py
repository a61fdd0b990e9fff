"""litrepro.contextual.pairing: the learned bidder minus the table policies, paired by seed across two studies.

The committed ``contextual_pairing.json`` is checked against its inputs (fresh, and rebuilt exactly), every
interval is recomputed by a plain loop with scipy's t quantile, and a pairing that misaligns the seeds or two
studies that do not share days are refused or named.
"""

import copy
import json
import math

import pytest
from scipy import stats as sps

from litrepro.contextual import pairing
from litrepro.paths import ROOT


def _load(rel):
    return json.loads((ROOT / rel).read_text(encoding="utf-8"))


def reference(budget, study):
    """Each row's (n, mean, low, high) by a plain loop over the seeds both files hold, keyed like the module's rows."""
    seeds = sorted(r["seed"] for r in budget["per_seed"])
    b = {r["seed"]: r["decomposition"] for r in budget["per_seed"]}
    s = {r["seed"]: r["decomposition"] for r in study["per_seed"]}
    out = {}
    for arm in b[seeds[0]]:
        for table in ("campaign_table", "kind_table"):
            for part in ("value", "within_campaign_gain"):
                d = [b[k][arm][part] - s[k][table][part] for k in seeds]
                n = len(d)
                mean = sum(d) / n
                sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
                half = sps.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
                out[(arm, table, part)] = (n, mean, mean - half, mean + half)
    return out


def mismatches(data, budget, study):
    ref = reference(budget, study)
    got = {(r["arm"], r["against"], r["part"]): (r["n"], r["mean_difference"], r["ci95_low"], r["ci95_high"])
           for r in data["rows"]}
    if set(got) != set(ref):
        return [f"rows {sorted(set(got) ^ set(ref))}"]
    return [f"{k}: {got[k]} != {ref[k]}" for k in ref
            if got[k][0] != ref[k][0] or not all(math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
                                                 for x, y in zip(got[k][1:], ref[k][1:]))]


def test_the_committed_pairing_rebuilds_exactly():
    data = _load(pairing.PATH)
    assert json.loads(json.dumps(pairing.build())) == data


def test_every_paired_interval_recomputes_by_a_plain_loop():
    data = _load(pairing.PATH)
    assert mismatches(data, _load(pairing.BUDGET), _load(pairing.STUDY)) == []
    row = pairing.row(data, "max_min_6000", "campaign_table", "value")
    assert row["n"] == 20 and row["critic_steps"] == 6000


def test_a_pairing_that_misaligns_the_seeds_is_named(monkeypatch):
    """The table policy's seeds rotated by one (an unpaired difference): the plain loop names every row."""
    budget, study = _load(pairing.BUDGET), _load(pairing.STUDY)
    shifted = copy.deepcopy(study)
    decomps = [r["decomposition"] for r in shifted["per_seed"]]
    for r, d in zip(shifted["per_seed"], decomps[1:] + decomps[:1]):
        r["decomposition"] = d
    bad = pairing.pair(budget, shifted)
    assert len(mismatches(bad, budget, study)) >= 40


@pytest.mark.parametrize("change, words", [
    (lambda s: s["per_seed"].pop(), "other seeds"),
    (lambda s: s["per_seed"][3]["arms"].update(fixed_gain=s["per_seed"][3]["arms"]["fixed_gain"] + 1e-9), "do not share days"),
])
def test_studies_that_do_not_pair_are_refused(change, words):
    study = _load(pairing.STUDY)
    change(study)
    with pytest.raises(pairing.PairingRefused, match=words):
        pairing.pair(_load(pairing.BUDGET), study)


def test_recompute_names_a_negated_pairing_row():
    """The fourth claims review's attack: one row negated with its verdict flipped reads "higher" in the README after
    claims --write; litrepro.recompute (run by claims --check) recomputes it from the two studies and names it."""
    from litrepro import recompute
    from litrepro import recompute_contextual as rc

    data = _load(pairing.PATH)
    r = pairing.row(data, "max_min_6000", "campaign_table", "value")
    r["mean_difference"], r["ci95_low"], r["ci95_high"], r["verdict"] = (-r["mean_difference"], -r["ci95_high"],
                                                                         -r["ci95_low"], ">0")
    ledger = recompute._Ledger(pairing.PATH)
    rc._check_contextual_pairing(data, ledger, _load(pairing.BUDGET), _load(pairing.STUDY))
    assert any("max_min_6000 - campaign_table|value].mean_difference" in p for p in ledger.problems), ledger.problems
    clean = recompute._Ledger(pairing.PATH)
    rc._check_contextual_pairing(_load(pairing.PATH), clean, _load(pairing.BUDGET), _load(pairing.STUDY))
    assert clean.problems == [] and clean.count > 1000
