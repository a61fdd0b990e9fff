"""``make dose-response``: the waypoint gate's effect against the teacher RL's movement (``litrepro.waypoint.dose_response``).

    python studies/waypoint_dose_response.py [--seeds 42-57] [--steps 40] [--jobs 2]

Writes ``rendered/waypoint_opd/dose_response.json`` and ``dose_response.png``; every row
records its seed's checks, and when one failed (or an interval does not recompute) the
study writes nothing and exits 1.  CPU, one thread per process, deterministic algorithms;
seeds are spread over ``--jobs`` processes (the numbers do not depend on it).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from litrepro import atomic, plotting
from litrepro.waypoint import dose_response
from litrepro.waypoint.config import WaypointConfig


def _seed_job(args: tuple[int, int, int]) -> list[dict]:
    """One seed, every level, in one process."""
    import torch

    from litrepro.seeding import seed_everything
    from litrepro.waypoint import experiment as wp

    seed, steps, eval_prompts = args
    seed_everything(seed)                                      # deterministic algorithms, one thread
    corpus = wp.load_corpus(WaypointConfig())
    return dose_response.run_seed(seed, steps=steps, eval_prompts=eval_prompts, corpus=corpus,
                                  device=torch.device("cpu"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="42-57", help="first-last, inclusive (16 for the study)")
    parser.add_argument("--steps", type=int, default=WaypointConfig().comparison_steps, help="updates per arm")
    parser.add_argument("--eval-prompts", type=int, default=WaypointConfig().comparison_eval_prompts)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    first, last = (int(x) for x in args.seeds.split("-"))
    seeds = list(range(first, last + 1))
    jobs = [(s, args.steps, args.eval_prompts) for s in seeds]
    start = time.perf_counter()
    if args.jobs <= 1:
        per_seed = [_seed_job(j) for j in jobs]
    else:
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            per_seed = list(pool.map(_seed_job, jobs))
    rows = [r for part in per_seed for r in part]
    wall = time.perf_counter() - start
    try:
        differences = dose_response.summarise(rows)            # refuses when a check failed on any seed
    except dose_response.StudyRefused as err:
        print(f"{err}; nothing written", file=sys.stderr)
        return 1
    data = {"n_seeds": len(seeds), "seeds": seeds, "comparison_steps": args.steps,
            "comparison_eval_prompts": args.eval_prompts, "student_start": dose_response.START,
            "teacher_pretrain_lr": dose_response.PRETRAIN_LR, "levels_teacher_rl_lr": dose_response.LEVELS,
            "teacher_rl_updates": WaypointConfig().teacher_rl_updates,
            "teacher_rl_rollouts": WaypointConfig().teacher_rl_rollouts,
            "wall_seconds": round(wall, 1), "jobs": args.jobs,
            "source_sha256": dose_response.source_hashes(), "per_seed": rows,
            "level_means": dose_response.level_means(rows), "differences": differences}
    atomic.write_text(dose_response.PATH, atomic.dumps_json(data))
    plotting.save_png(dose_response.plot(data), dose_response.PLOT)
    for line in dose_response.findings(data):
        print(line, file=sys.stderr)
    print(f"wrote {dose_response.PATH} and {dose_response.PLOT.name} ({wall:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
