"""``make rlbp-contextual``: the ``contextual`` market study of ``pinterest_rlbp`` (``litrepro.contextual.study``).

    python studies/rlbp_contextual.py [--seeds 42-61] [--jobs 2]

Per seed: the constant-gain landscape, the ladder of oracles (best constant, per kind, per campaign, and
table policies that react to the state), the learned bidder at each critic budget, and six off-policy
estimators against the simulator's truth, all in the ``contextual`` market (our reconstruction).  Writes
``rendered/pinterest_rlbp/contextual_study.json`` and ``contextual_study.png``; writes nothing (exit 1)
when a seed's checks failed or an interval does not recompute.  ``make test`` checks that the files are
current with their sources; it does not re-run them.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from litrepro import atomic, plotting, study_args
from litrepro.contextual import study
from litrepro.contextual.market import ContextualSettings

SETTINGS = study.StudySettings()


def _one_thread() -> None:
    """One torch thread per worker: two workers with two threads each on two cores spin against each other."""
    import torch

    torch.set_num_threads(1)


def main(argv: list[str] | None = None) -> int:
    args = study_args.parser(__doc__.splitlines()[0], seeds="42-61", jobs=2).parse_args(argv)
    start = time.perf_counter()
    if args.jobs <= 1:
        cpu0 = time.process_time()
        rows = [study.run_seed(s, settings=SETTINGS) for s in args.seeds]
        cpu = time.process_time() - cpu0
    else:
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn"),
                                 initializer=_one_thread) as pool:
            rows = list(pool.map(study.run_seed, args.seeds))
        cpu = sum(os.times()[2:4])                         # the workers' user + system time
    wall = time.perf_counter() - start
    try:
        summary = study.refuse_or_summarise(rows, SETTINGS)
    except study.StudyRefused as err:
        print(f"litrepro: error: {err}; nothing written", file=sys.stderr)
        return 1
    data = {"n_seeds": len(rows), "seeds": args.seeds, "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
            "jobs": args.jobs, "market": "contextual",
            "reconstruction": "ours: the seed file fixes no market beyond its own, no oracle and no estimator but IPS",
            "settings": dataclasses.asdict(SETTINGS), "market_settings": dataclasses.asdict(ContextualSettings()),
            "per_seed": sorted(rows, key=lambda r: r["seed"]), "summary": summary,
            "provenance": {"source_sha256": study.source_hashes()}}
    atomic.write_json(study.PATH, data)
    plotting.save_png(study.plot(data), study.PLOT)
    for line in study.findings(data):
        print("-", line, file=sys.stderr)
    print(f"wrote {study.PATH.name} and {study.PLOT.name}; cost {wall:.0f} s wall, {cpu:.0f} CPU-s on {args.jobs} "
          f"job(s), {len(rows)} seeds", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
