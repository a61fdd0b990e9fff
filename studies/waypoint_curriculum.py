"""``make waypoint-curriculum``: the transfer regime's arms from a teacher that forgets (``litrepro.waypoint.curriculum_study``).

    python studies/waypoint_curriculum.py [--seeds 42-57] [--jobs 2]

Writes ``rendered/waypoint_opd/curriculum_study.json`` and ``curriculum_study.png``; when a check failed
on any seed, or a number does not recompute by a plain loop, it writes nothing and exits 1.  About
20 CPU-seconds a seed (5 arms x 240 updates x 64 rollouts).
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from litrepro import atomic, plotting
from litrepro.waypoint import curriculum, curriculum_study, transfer
from litrepro.waypoint.config import WaypointConfig


def _seed_job(seed: int) -> dict:
    import torch

    from litrepro.seeding import seed_everything
    from litrepro.waypoint import experiment as wp

    seed_everything(seed)                                      # deterministic algorithms, one thread
    corpus = wp.load_corpus(WaypointConfig())
    return curriculum_study.run_seed(seed, corpus=corpus, device=torch.device("cpu"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="42-57")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    first, last = (int(x) for x in args.seeds.split("-"))
    seeds = list(range(first, last + 1))
    print(f"curriculum study: {len(seeds)} seeds x {len(curriculum_study.ARMS)} arms; about 20 CPU-s a seed, so about "
          f"{20 * len(seeds) / max(args.jobs, 1) / 60:.0f} min on {args.jobs} process(es)", file=sys.stderr)
    start = time.perf_counter()
    if args.jobs <= 1:
        rows = [_seed_job(s) for s in seeds]
    else:
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            rows = list(pool.map(_seed_job, seeds))
    wall = time.perf_counter() - start
    try:
        summary = curriculum_study.summarise(rows)
    except curriculum_study.StudyRefused as err:
        print(f"{err}; nothing written", file=sys.stderr)
        return 1
    data = {"n_seeds": len(seeds), "seeds": seeds, "rl_lr": curriculum_study.RL_LR,
            "schedule": list(curriculum.SCHEDULE), "config": dataclasses.asdict(transfer.TransferConfig()),
            "wall_seconds": round(wall, 1), "jobs": args.jobs, "source_sha256": curriculum_study.source_hashes(),
            "per_seed": rows, **summary}
    atomic.write_text(curriculum_study.PATH, atomic.dumps_json(data))
    plotting.save_png(curriculum_study.plot(data), curriculum_study.PLOT)
    for line in curriculum_study.findings(data):
        print(line, file=sys.stderr)
    print(f"wrote {curriculum_study.PATH} ({wall:.0f} s wall)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
