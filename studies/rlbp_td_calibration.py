"""``make rlbp-td-calibration``: why our held-out TD losses differ from the seed's (units, and the update protocol).

    python studies/rlbp_td_calibration.py [--seeds 42-61] [--jobs 2]

Per seed, :func:`litrepro.rlbp.td_calibration.seed_figures` on the pipeline's data, critic and
training; the unit k is fitted first on the record's seeds (42-44).  Writes
``rendered/pinterest_rlbp/td_calibration.json``; writes nothing if a seed's check failed or a
headline interval differs from its plain-loop recomputation.  ``make test`` checks that the
file is current with the sources; it does not re-run it.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from litrepro import atomic, recorded
from litrepro.paths import ROOT
from litrepro.rlbp import study
from litrepro.rlbp import td_calibration as tc
from litrepro.rlbp.config import RLBPConfig


def source_hashes() -> dict[str, str]:
    """The rlbp study's sources (``rlbp/`` less plots, ``stats.py``, ...) and this script."""
    out = study.source_hashes()
    out["src/litrepro/rlbp/td_calibration.py"] = hashlib.sha256((ROOT / "src/litrepro/rlbp/td_calibration.py").read_bytes()).hexdigest()
    out["studies/rlbp_td_calibration.py"] = hashlib.sha256((ROOT / "studies/rlbp_td_calibration.py").read_bytes()).hexdigest()
    return out


def _before(seed: int) -> float:
    return tc.initial_td_loss(RLBPConfig(seed=seed))


def _seed(args: tuple[int, float]) -> dict:
    seed, unit = args
    row = tc.seed_figures(RLBPConfig(seed=seed), unit=unit)
    curve = row.pop("ratio_curve")
    row["ratio_curve"] = curve                       # kept whole for the summary, trimmed before writing
    return row


def _map(fn, items, workers):
    if workers <= 1:
        return [fn(x) for x in items]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(fn, items))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="42-61", help="first-last, inclusive; must include 42-44")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    try:
        first, last = (int(x) for x in args.seeds.split("-"))
    except ValueError:
        print(f"litrepro: error: --seeds {args.seeds!r} is not first-last", file=sys.stderr)
        return 2
    seeds = list(range(first, last + 1))
    if not set(tc.FIT_SEEDS) <= set(seeds):
        print(f"litrepro: error: --seeds {args.seeds!r} must include {list(tc.FIT_SEEDS)}", file=sys.stderr)
        return 2
    rec = recorded.aggregate_metrics("pinterest_rlbp")
    start = time.perf_counter()
    fit_before = _map(_before, list(tc.FIT_SEEDS), args.jobs)
    unit = tc.fit_unit([{"seed": s, "td_loss_before": b} for s, b in zip(tc.FIT_SEEDS, fit_before)],
                       rec["td_loss_before"]["mean"])
    rows = _map(_seed, [(s, unit) for s in seeds], args.jobs)
    bad = {r["seed"]: sorted(k for k, v in r["checks"].items() if not v) for r in rows}
    bad = {s: v for s, v in bad.items() if v}
    by_seed = {r["seed"]: r for r in rows}
    drift = [s for s, b in zip(tc.FIT_SEEDS, fit_before) if b != by_seed[s]["td_loss_before"]]
    if bad or drift:
        print(f"litrepro: error: checks failed {bad}, or the fit pass differs from the pipeline on seeds {drift}; "
              "nothing written", file=sys.stderr)
        return 1
    body = tc.summarise(rows, rec, unit)
    mismatch = tc.recompute_rows(rows, body)
    if mismatch:
        print(f"litrepro: error: rows {mismatch} differ from their plain-loop recomputation; nothing written",
              file=sys.stderr)
        return 1
    for r in rows:
        r["ratio_at_budget"] = {str(t): r["ratio_curve"][t] for t in tc.BUDGETS if t < len(r["ratio_curve"])}
        del r["ratio_curve"]
    params = {k: v for k, v in dataclasses.asdict(RLBPConfig()).items() if k != "seed"}
    out = {**body, "critic_steps": RLBPConfig().critic_steps, "per_seed": {str(r["seed"]): r for r in rows},
           "check_pass_rates": {k: sum(r["checks"][k] for r in rows) / len(rows) for k in rows[0]["checks"]},
           "provenance": {"source_sha256": source_hashes(), "parameters": params,
                          "recorded_file": recorded.load("pinterest_rlbp")["_file"]}}
    atomic.write_json(tc.OUT, out)
    for line in tc.findings(out):
        print("-", line)
    print(f"wrote {tc.OUT.relative_to(ROOT)} ({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
