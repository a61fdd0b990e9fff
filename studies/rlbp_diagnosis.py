"""``make rlbp-diagnosis``: arms that isolate why the learned bidder trails the fixed gain (``litrepro.rlbp.diagnosis``).

    python studies/rlbp_diagnosis.py [--seeds 42-61] [--jobs 2]

Per seed, every arm of ``litrepro.rlbp.diagnosis.ARMS`` on the data, evaluation days and
random draws of ``max_min``, and the counterfactual replays of every logged state.  Writes
``rendered/pinterest_rlbp/diagnosis.json`` and ``diagnosis.png``; refuses to write anything
(exit 1) when a seed's checks failed or an interval does not recompute.  ``make test``
checks that the files are current with the sources; it does not re-run them.
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from litrepro import atomic, plotting
from litrepro.rlbp import diagnosis
from litrepro.rlbp.config import RLBPConfig


def _seed_job(seed: int) -> dict:
    return diagnosis.run_seed(seed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="42-61", help="first-last, inclusive (the backup study's 20 seeds)")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    try:
        first, _, last = args.seeds.partition("-")
        seeds = list(range(int(first), int(last or first) + 1))
    except ValueError:
        print(f"litrepro: error: --seeds {args.seeds!r} is not A-B or N", file=sys.stderr)
        return 2
    if not seeds or seeds[0] < 0 or seeds[-1] >= 2**32 or len(seeds) > 200 or not 1 <= args.jobs <= 64:
        print(f"litrepro: error: --seeds {args.seeds!r} / --jobs {args.jobs}: need 0 <= A <= B < 2^32, at most 200 "
              "seeds and 1 to 64 jobs", file=sys.stderr)
        return 2
    print(f"rlbp diagnosis: {len(seeds)} seeds x {len(diagnosis.ARMS)} arms; about 45 CPU-seconds a seed "
          f"({45 * len(seeds) / 60 / args.jobs:.0f} minutes on {args.jobs} processes)", file=sys.stderr)
    start = time.perf_counter()
    if args.jobs <= 1:
        rows = [_seed_job(s) for s in seeds]
    else:
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            rows = list(pool.map(_seed_job, seeds))
    wall = time.perf_counter() - start
    try:
        summary = diagnosis.summarise(rows)                    # refuses failed checks and unrecomputable intervals
    except diagnosis.StudyRefused as err:
        print(f"litrepro: error: {err}; nothing written", file=sys.stderr)
        return 1
    params = {k: v for k, v in dataclasses.asdict(RLBPConfig()).items() if k != "seed"}
    data = {"n_seeds": len(seeds), "seeds": seeds, "wall_seconds": round(wall, 1), "jobs": args.jobs,
            "arms": {a: {"changes": c, "config": ch, "target": t} for a, (c, ch, t) in diagnosis.ARMS.items()},
            "per_seed": rows, "summary": summary,
            "provenance": {"source_sha256": diagnosis.source_hashes(), "parameters": params}}
    atomic.write_json(diagnosis.PATH, data)
    plotting.save_png(diagnosis.plot(data), diagnosis.PLOT)
    print(diagnosis.table(data).to_string(), file=sys.stderr)
    for line in diagnosis.findings(data) + diagnosis.ablation_findings(data):
        print(line, file=sys.stderr)
    print(f"wrote {diagnosis.PATH.name} and {diagnosis.PLOT.name} ({wall:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
