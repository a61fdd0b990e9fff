"""``make waypoint-transfer``: the transfer study (``litrepro.waypoint.transfer_study``).

    python studies/waypoint_transfer.py [--seeds 42-57] [--jobs 2] [--updates 240] [--batch 64] [--lr 0.5]
    python studies/waypoint_transfer.py --resummarise    # summary code changed only: re-derive it from per_seed

Prints the expected cost first (from the per-seed time of the last committed run, else an
estimate), then writes ``rendered/waypoint_opd/transfer_study.json`` and ``transfer_study.png``.
Every seed records its checks; when one failed, or a number does not recompute by a plain
loop, the study writes nothing and exits 1.  CPU, one thread per process, deterministic
algorithms; seeds are spread over ``--jobs`` processes (the numbers do not depend on it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from litrepro import atomic, plotting
from litrepro.paths import ROOT
from litrepro.waypoint import transfer, transfer_study
from litrepro.waypoint.config import WaypointConfig

#: CPU-seconds per seed measured before the first committed run (one core, 17 arms x 240 updates x 64 rollouts).
ESTIMATED_SECONDS_PER_SEED = 75.0


def _seed_job(args: tuple[int, dict]) -> dict:
    """One seed, every arm, in one process."""
    import torch

    from litrepro.seeding import seed_everything
    from litrepro.waypoint import experiment as wp

    seed, cfg_fields = args
    seed_everything(seed)                                      # deterministic algorithms, one thread
    corpus = wp.load_corpus(WaypointConfig())
    start = time.perf_counter()
    row = transfer_study.run_seed(seed, corpus=corpus, device=torch.device("cpu"),
                                  cfg=transfer.TransferConfig(**cfg_fields))
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row


def expected_cost(n_seeds: int, jobs: int) -> str:
    per_seed, source = ESTIMATED_SECONDS_PER_SEED, "estimate"
    if transfer_study.PATH.exists():
        old = json.loads(transfer_study.PATH.read_text())
        per_seed, source = old["cpu_seconds"] / old["n_seeds"], "last committed run"
    return (f"transfer study: {n_seeds} seeds x {len(transfer.ARMS)} arms; about {per_seed:.0f} CPU-s a seed "
            f"({source}), so about {per_seed * n_seeds / max(jobs, 1) / 60:.0f} min on {jobs} process(es)")


def _resummarise() -> int:
    """``--resummarise``: the committed JSON's summary re-derived from its own rows (seconds, no simulation)."""
    try:
        data = transfer_study.resummarise(transfer_study.load())
    except transfer_study.StudyRefused as err:
        print(f"{err}; nothing written", file=sys.stderr)
        return 1
    atomic.write_text(transfer_study.PATH, atomic.dumps_json(data))
    plotting.save_png(transfer_study.plot(data), transfer_study.PLOT)
    print(f"re-summarised {transfer_study.PATH} and {transfer_study.PLOT.name} from its per-seed rows", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    defaults = transfer.TransferConfig()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="42-57", help="first-last, inclusive (16 for the study)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--updates", type=int, default=defaults.updates)
    parser.add_argument("--eval-every", type=int, default=defaults.eval_every)
    parser.add_argument("--batch", type=int, default=defaults.batch)
    parser.add_argument("--lr", type=float, default=defaults.lr)
    parser.add_argument("--dry-run", action="store_true", help="print the expected cost and stop")
    parser.add_argument("--resummarise", action="store_true",
                        help="re-derive the summary from the committed per-seed rows (refused when the per-seed code changed)")
    args = parser.parse_args(argv)
    if args.resummarise:
        return _resummarise()
    first, last = (int(x) for x in args.seeds.split("-"))
    seeds = list(range(first, last + 1))
    cfg = dataclasses.replace(defaults, updates=args.updates, eval_every=args.eval_every, batch=args.batch, lr=args.lr)
    print(expected_cost(len(seeds), args.jobs), file=sys.stderr)
    if args.dry_run:
        return 0
    jobs = [(s, dataclasses.asdict(cfg)) for s in seeds]
    start = time.perf_counter()
    if args.jobs <= 1:
        rows = [_seed_job(j) for j in jobs]
    else:
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            rows = list(pool.map(_seed_job, jobs))
    wall = time.perf_counter() - start
    raw = ROOT / "build" / "waypoint_transfer" / "rows.json"  # kept (not committed) so a refusal can be read
    atomic.write_text(raw, atomic.dumps_json(rows))
    try:
        summary = transfer_study.summarise(rows)               # refuses on a failed check or a mismatch
    except transfer_study.StudyRefused as err:
        print(f"{err}; nothing written", file=sys.stderr)
        return 1
    data = {"n_seeds": len(seeds), "seeds": seeds, "config": dataclasses.asdict(cfg),
            "arms": {name: dataclasses.asdict(arm) for name, arm in transfer.ARMS.items()},
            "lr_multipliers": list(transfer.LR_MULTIPLIERS), "streams": transfer.STREAMS,
            "wall_seconds": round(wall, 1), "cpu_seconds": round(sum(r["seconds"] for r in rows), 1), "jobs": args.jobs,
            "source_sha256": transfer_study.source_hashes(), "per_seed": rows, **summary}
    atomic.write_text(transfer_study.PATH, atomic.dumps_json(data))
    plotting.save_png(transfer_study.plot(data), transfer_study.PLOT)
    for line in transfer_study.findings(data):
        print(line, file=sys.stderr)
    print(f"wrote {transfer_study.PATH} and {transfer_study.PLOT.name} ({wall:.0f} s wall)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
