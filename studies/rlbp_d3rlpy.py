"""``make rlbp-d3rlpy``: d3rlpy's discrete learners on the exported logged transitions (``litrepro.studies.rlbp_d3rlpy``).

    python studies/rlbp_d3rlpy.py [--seeds 42-61] [--jobs 2] [--export-dir DIR]

For each seed, the logged transitions are exported in the documented format and checked against the
pipeline.  d3rlpy's DoubleDQN, DiscreteCQL and DiscreteBCQ are trained on the training rows, and their
greedy policies are simulated at each checkpoint on the evaluation days of the committed studies.
Writes ``rendered/pinterest_rlbp/d3rlpy_crosscheck.json`` and ``d3rlpy_crosscheck.png``.  It refuses to
write anything (exit 1) when a seed's checks failed or an interval does not recompute.  ``--export-dir``
also writes each seed's export as ``seed-<N>.npz`` (not committed: about 1 MB a seed).  It needs the
``d3rlpy`` extra.  ``make test`` checks that the files are current with their sources; it does not re-run them.
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from litrepro import atomic, plotting
from litrepro.rlbp.config import RLBPConfig
from litrepro.studies import rlbp_d3rlpy as d3

SETTINGS = d3.D3Settings()


def _seed_job(seed: int, export_dir: str | None) -> dict:
    return d3.run_seed(seed, settings=SETTINGS, export_dir=export_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="42-61", help="first-last, inclusive (the studies' 20 seeds)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--export-dir", default=None, help="also write each seed's export here as seed-<N>.npz")
    args = parser.parse_args(argv)
    first, last = (int(x) for x in args.seeds.split("-"))
    seeds = list(range(first, last + 1))
    if args.export_dir:
        os.makedirs(args.export_dir, exist_ok=True)
    start, cpu_start = time.perf_counter(), time.process_time()
    if args.jobs <= 1:
        rows = [_seed_job(s, args.export_dir) for s in seeds]
        cpu = time.process_time() - cpu_start
    else:
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            rows = list(pool.map(_seed_job, seeds, [args.export_dir] * len(seeds)))
        cpu = sum(os.times()[2:4])                         # the workers' user + system time (children)
    wall = time.perf_counter() - start
    try:
        summary = d3.summarise(rows, SETTINGS)             # refuses failed checks and unrecomputable intervals
    except d3.StudyRefused as err:
        print(f"litrepro: error: {err}; nothing written", file=sys.stderr)
        return 1
    d3rlpy = d3.import_d3rlpy()
    cfg = RLBPConfig()
    params = {k: v for k, v in dataclasses.asdict(cfg).items() if k != "seed"}
    data = {"n_seeds": len(seeds), "seeds": seeds, "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
            "jobs": args.jobs, "d3rlpy_version": d3rlpy.__version__, "gamma": cfg.gamma,
            "reconstruction": "ours: the seed file says nothing about d3rlpy or an export format",
            "settings": dataclasses.asdict(SETTINGS), "format_version": d3.FORMAT_VERSION,
            "per_seed": sorted(rows, key=lambda r: r["seed"]), "summary": summary,
            "provenance": {"source_sha256": d3.source_hashes(), "parameters": params}}
    atomic.write_json(d3.PATH, data)
    plotting.save_png(d3.plot(data), d3.PLOT)
    print(d3.table(data).to_string(), file=sys.stderr)
    for line in d3.findings(data):
        print(line, file=sys.stderr)
    print(f"wrote {d3.PATH.name} and {d3.PLOT.name}; cost {wall:.0f} s wall, {cpu:.0f} CPU-s on {args.jobs} "
          f"job(s), {len(seeds)} seeds", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
