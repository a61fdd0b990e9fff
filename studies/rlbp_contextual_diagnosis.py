"""``make rlbp-contextual-diagnosis``: the seed market's one-factor diagnosis arms in the ``contextual`` market
(``litrepro.contextual.diagnosis``).

    python studies/rlbp_contextual_diagnosis.py [--seeds 42-61] [--jobs 2]

Needs the committed ``rendered/pinterest_rlbp/contextual_budget.json`` (its arms are the pairs).  Writes
``rendered/pinterest_rlbp/contextual_diagnosis.json``; writes nothing (exit 1) when a check fails, the re-run
max_min differs from the budget study's, or an interval does not recompute.  Prints its expected cost first.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from litrepro import atomic, study_args
from litrepro.contextual import budget, diagnosis

#: CPU-seconds per seed before any run is committed (a guess from the budget study's per-step cost).
FIRST_GUESS_CPU_S_PER_SEED = 60.0


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def main(argv: list[str] | None = None) -> int:
    args = study_args.parser(__doc__.splitlines()[0], seeds="42-61", jobs=2).parse_args(argv)
    n, jobs = len(args.seeds), max(1, args.jobs)
    if not budget.PATH.is_file():
        print(f"litrepro: error: {budget.PATH.name} is missing: run `make rlbp-contextual-budget` first", file=sys.stderr)
        return 2
    reference = json.loads(budget.PATH.read_text(encoding="utf-8"))
    try:
        old = json.loads(diagnosis.PATH.read_text(encoding="utf-8"))
        per_seed = float(old["cpu_seconds"]) / int(old["n_seeds"])
    except (OSError, ValueError, KeyError, ZeroDivisionError):
        per_seed = FIRST_GUESS_CPU_S_PER_SEED
    print(f"expected cost: about {per_seed * n:.0f} CPU-s, {per_seed * n / min(jobs, n):.0f} s wall on {jobs} job(s)",
          file=sys.stderr)
    start = time.perf_counter()
    if jobs <= 1:
        cpu0 = time.process_time()
        rows = [diagnosis.run_seed(s) for s in args.seeds]
        cpu = time.process_time() - cpu0
    else:
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_one_thread) as pool:
            rows = list(pool.map(diagnosis.run_seed, args.seeds))
        cpu = sum(os.times()[2:4])
    wall = time.perf_counter() - start
    try:
        summary = diagnosis.refuse_or_summarise(rows, reference)
    except diagnosis.StudyRefused as err:
        print(f"litrepro: error: {err}; nothing written", file=sys.stderr)
        return 1
    data = {"n_seeds": n, "seeds": args.seeds, "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
            "jobs": jobs, "market": "contextual", "budgets": list(diagnosis.BUDGETS), "arms": diagnosis.ARMS,
            "reconstruction": "ours: the market, the arms' pairing with the budget study and the budgets",
            "per_seed": sorted(rows, key=lambda r: r["seed"]), "summary": summary,
            "provenance": {"source_sha256": diagnosis.source_hashes()}}
    atomic.write_json(diagnosis.PATH, data)
    for line in diagnosis.findings(data):
        print("-", line, file=sys.stderr)
    print(f"wrote {diagnosis.PATH.name}; cost {wall:.0f} s wall, {cpu:.0f} CPU-s on {jobs} job(s), {n} seeds",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
