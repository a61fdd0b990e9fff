"""``make rlbp-budget``: the learned bidder against the critic's budget and a practitioner's baselines.

    python studies/rlbp_budget.py [--seeds 42-61] [--jobs 2] [--dry-run]

Per seed, ``litrepro.studies.rlbp_budget.run_seed`` (4 backups x 5 budgets, the scaling
arms and the baselines).  Each seed's result is written atomically, as it finishes, into
``build/rlbp_budget/<source hash>/seed-<N>.json``; a rerun with the same sources computes
only the missing seeds, and results of other sources are never mixed in.  The study JSON
and PNG (``rendered/pinterest_rlbp/budget_study.*``) are written only when every seed is
present and the summary does not refuse.  Before it starts it prints what it will cost,
from the per-seed time the committed JSON records.  ``make test`` checks that the files are
current with the sources; it never re-runs them.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from litrepro import atomic, plotting
from litrepro.paths import ROOT
from litrepro.rlbp.config import RLBPConfig
from litrepro.studies import rlbp_budget as study

STATE = ROOT / "build" / "rlbp_budget"


def _seed_job(seed: int) -> tuple[dict, float]:
    start = time.perf_counter()
    return study.run_seed(seed), time.perf_counter() - start


def parse_seeds(text: str) -> list[int]:
    """``A-B`` (inclusive) or one seed; bounded like ``litrepro run``'s seeds."""
    try:
        first, _, last = text.partition("-")
        a, b = int(first), int(last or first)
    except ValueError:
        raise SystemExit(f"litrepro: error: --seeds {text!r} is not A-B or N") from None
    if not (0 <= a <= b < 2**32) or b - a + 1 > study.MAX_SEEDS:
        raise SystemExit(f"litrepro: error: --seeds {text!r}: need 0 <= A <= B < 2^32 and at most "
                         f"{study.MAX_SEEDS} seeds")
    return list(range(a, b + 1))


def recorded_seconds_per_seed() -> float | None:
    try:
        data = json.loads(study.PATH.read_text())
        return data["cpu_seconds_per_seed"]
    except (OSError, ValueError, KeyError):
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="42-61", help="A-B inclusive (the backup study's 20 seeds)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--dry-run", action="store_true", help="print the plan and its cost, run nothing")
    try:
        args = parser.parse_args(argv)
    except SystemExit as err:
        return 2 if err.code else 0
    try:
        seeds = parse_seeds(args.seeds)
    except SystemExit as err:
        print(err, file=sys.stderr)
        return 2
    if not 1 <= args.jobs <= 64:
        print(f"litrepro: error: --jobs {args.jobs}: need 1 to 64", file=sys.stderr)
        return 2
    hashes = study.source_hashes()
    key = hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()[:16]
    state = STATE / key
    done = {int(p.stem.split("-")[1]) for p in state.glob("seed-*.json")} if state.exists() else set()
    todo = [s for s in seeds if s not in done]
    per_seed = recorded_seconds_per_seed()
    arms = len(study.BACKUPS) * len(study.BUDGETS) + len(study.SCALING) * len(study.SCALING_BACKUPS)
    cost = (f"about {per_seed * len(todo) / 60:.0f} CPU-minutes, {per_seed * len(todo) / 60 / min(args.jobs, max(len(todo), 1)):.0f} "
            f"minutes on {args.jobs} processes ({per_seed:.0f} s per seed recorded)") if per_seed else \
        "unknown (no recorded per-seed time yet; about 4 CPU-minutes a seed on a 2-core laptop-class CPU)"
    print(f"rlbp budget study: {len(seeds)} seeds x {arms} arms; {len(done & set(seeds))} seeds already in "
          f"{state.relative_to(ROOT)}, {len(todo)} to run; cost {cost}", file=sys.stderr)
    if args.dry_run:
        return 0
    from tqdm import tqdm

    start = time.perf_counter()
    seconds = []
    with tqdm(total=len(todo), desc="seeds", file=sys.stderr, disable=not todo) as bar:
        if args.jobs <= 1:
            results = (_seed_job(s) for s in todo)
            for s, (row, sec) in zip(todo, results):
                atomic.write_json(state / f"seed-{s}.json", {**row, "seconds": sec})
                seconds.append(sec)
                bar.update(1)
        else:
            with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
                futures = {pool.submit(_seed_job, s): s for s in todo}
                for fut in as_completed(futures):
                    row, sec = fut.result()
                    atomic.write_json(state / f"seed-{futures[fut]}.json", {**row, "seconds": sec})
                    seconds.append(sec)
                    bar.update(1)
    rows = [json.loads((state / f"seed-{s}.json").read_text()) for s in seeds]
    try:
        summary = study.summarise(rows)
    except study.StudyRefused as err:
        print(f"litrepro: error: {err}; nothing written", file=sys.stderr)
        return 1
    params = {k: v for k, v in dataclasses.asdict(RLBPConfig()).items() if k != "seed"}
    cpu = [r.pop("seconds") for r in rows]
    data = {"n_seeds": len(seeds), "seeds": seeds, "cpu_seconds_per_seed": round(sum(cpu) / len(cpu), 1),
            "arms": {"backups": study.BACKUPS, "budgets": list(study.BUDGETS), "scaling": [list(x) for x in study.SCALING],
                     "scaling_backups": list(study.SCALING_BACKUPS), "baselines": study.BASELINES},
            "per_seed": rows, "summary": summary,
            "provenance": {"source_sha256": hashes, "parameters": params}}
    atomic.write_json(study.PATH, data)
    plotting.save_png(study.plot(data), study.PLOT)
    print(study.table(data).to_string(), file=sys.stderr)
    for line in study.findings(data):
        print(line, file=sys.stderr)
    print(f"wrote {study.PATH.name} and {study.PLOT.name} ({time.perf_counter() - start:.0f} s this run)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
