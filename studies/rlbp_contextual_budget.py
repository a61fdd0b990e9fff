"""``make rlbp-contextual-budget``: ``pinterest_rlbp``'s backups, critic budgets and placebo re-run in the
``contextual`` market (``litrepro.contextual.budget``).

    python studies/rlbp_contextual_budget.py [--seeds 42-61] [--jobs 2]

Per seed: four backups and a placebo, each at every critic budget, scored in the simulator's truth on the
contextual study's evaluation days, against the fixed gain, the logging policy and the best constants, and a
convergence rule from logged data.  Writes ``rendered/pinterest_rlbp/contextual_budget.json`` and
``contextual_budget.png``; writes nothing (exit 1) when a seed's checks failed, a seed's shared arms differ
from the committed contextual study's, or an interval does not recompute.  Prints its expected cost first.
``make test`` checks that the files are current with their sources; it does not re-run them.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from litrepro import atomic, plotting, study_args
from litrepro.contextual import budget
from litrepro.contextual import study as contextual_study
from litrepro.contextual.market import ContextualSettings

SETTINGS = budget.BudgetSettings()
#: CPU-seconds per seed before any run is committed (one seed, one torch thread, measured on 2 cores).
FIRST_GUESS_CPU_S_PER_SEED = 75.0


def cpu_per_seed() -> float:
    """The committed run's recorded CPU-seconds per seed, or the first guess when there is none."""
    try:
        old = json.loads(budget.PATH.read_text(encoding="utf-8"))
        return float(old["cpu_seconds"]) / int(old["n_seeds"])
    except (OSError, ValueError, KeyError, ZeroDivisionError):
        return FIRST_GUESS_CPU_S_PER_SEED


def _one_thread() -> None:
    """One torch thread per worker: two workers with two threads each on two cores spin against each other."""
    import torch

    torch.set_num_threads(1)


def main(argv: list[str] | None = None) -> int:
    args = study_args.parser(__doc__.splitlines()[0], seeds="42-61", jobs=2).parse_args(argv)
    n, jobs = len(args.seeds), max(1, args.jobs)
    per_seed = cpu_per_seed()
    print(f"expected cost: about {per_seed * n:.0f} CPU-s, {per_seed * n / min(jobs, n):.0f} s wall on "
          f"{jobs} job(s) ({n} seeds x {len(budget.ARMS)} arms x {len(SETTINGS.budgets)} budgets)", file=sys.stderr)
    reference = (json.loads(contextual_study.PATH.read_text(encoding="utf-8"))
                 if contextual_study.PATH.is_file() else None)
    start = time.perf_counter()
    if jobs <= 1:
        cpu0 = time.process_time()
        rows = [budget.run_seed(s, settings=SETTINGS) for s in args.seeds]
        cpu = time.process_time() - cpu0
    else:
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_one_thread) as pool:
            rows = list(pool.map(budget.run_seed, args.seeds))
        cpu = sum(os.times()[2:4])                         # the workers' user + system time
    wall = time.perf_counter() - start
    try:
        summary = budget.refuse_or_summarise(rows, SETTINGS, reference)
    except budget.StudyRefused as err:
        print(f"litrepro: error: {err}; nothing written", file=sys.stderr)
        return 1
    data = {"n_seeds": n, "seeds": args.seeds, "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
            "jobs": jobs, "market": "contextual",
            "reconstruction": "ours: the seed file fixes no market beyond its own, no budget but 600 steps, "
                              "no backup but max_min, no placebo and no convergence rule",
            "settings": dataclasses.asdict(SETTINGS), "market_settings": dataclasses.asdict(ContextualSettings()),
            "per_seed": sorted(rows, key=lambda r: r["seed"]), "summary": summary,
            "provenance": {"source_sha256": budget.source_hashes()}}
    atomic.write_json(budget.PATH, data)
    plotting.save_png(budget.plot(data), budget.PLOT)
    for line in budget.findings(data):
        print("-", line, file=sys.stderr)
    print(f"wrote {budget.PATH.name} and {budget.PLOT.name}; cost {wall:.0f} s wall, {cpu:.0f} CPU-s on {jobs} "
          f"job(s), {n} seeds", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
