"""``make effect-study``: the waypoint_opd effect study (``litrepro.waypoint.effect_study``).

    python studies/waypoint_effect_study.py [--seeds 42-53] [--steps 40]

Writes ``rendered/waypoint_opd/effect_study.json`` and ``effect_study.png``; every row
records its seed's checks, and when one failed the study writes nothing and exits 1.
CPU, one thread, deterministic algorithms: a few minutes on one core.
"""

from __future__ import annotations

import argparse
import sys
import time

from litrepro import atomic, plotting
from litrepro.seeding import seed_everything
from litrepro.waypoint import effect_study
from litrepro.waypoint import experiment as wp
from litrepro.waypoint.config import WaypointConfig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="42-53", help="first-last, inclusive (at least 12 seeds)")
    parser.add_argument("--steps", type=int, default=WaypointConfig().comparison_steps, help="updates per arm")
    parser.add_argument("--eval-prompts", type=int, default=WaypointConfig().comparison_eval_prompts)
    args = parser.parse_args(argv)
    first, last = (int(x) for x in args.seeds.split("-"))
    seeds = list(range(first, last + 1))
    import torch

    seed_everything(first)                                     # deterministic algorithms, one thread
    corpus = wp.load_corpus(WaypointConfig())
    device = torch.device("cpu")
    start = time.perf_counter()
    rows = []
    for seed in seeds:
        rows += effect_study.run_seed(seed, steps=args.steps, eval_prompts=args.eval_prompts, corpus=corpus,
                                      device=device)
        print(f"seed {seed} done ({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    try:
        differences = effect_study.summarise(rows)             # refuses when a check failed on any seed
    except effect_study.StudyRefused as err:
        print(f"{err}; nothing written", file=sys.stderr)
        return 1
    data = {"n_seeds": len(seeds), "seeds": seeds, "comparison_steps": args.steps,
            "comparison_eval_prompts": args.eval_prompts, "student_starts": list(effect_study.STARTS),
            "teacher_rl_rollouts": list(effect_study.RL_ROLLOUTS), "teachers_pretrain_lr": effect_study.TEACHERS,
            "source_sha256": effect_study.source_hashes(), "per_seed": rows,
            "condition_means": effect_study.condition_means(rows), "differences": differences}
    atomic.write_text(effect_study.PATH, atomic.dumps_json(data))
    plotting.save_png(effect_study.plot(data), effect_study.PLOT)
    print(f"wrote {effect_study.PATH} and {effect_study.PLOT.name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
