"""How long ``make book`` takes: the whole build (fault-test collection, page generation, Sphinx).

    python benchmarks/book_build.py [--repeats 3] [--out rendered/book_build.json]

Each repeat builds the book from scratch into a fresh temporary folder in a new process,
exactly as ``python -m litrepro.book`` does, and times it by the wall clock.  Writes the
median, every repeat, each step's time and the machine (CPU model, cores, load average
before and after) to ``rendered/book_build.json``.  The goal (issue 23) is at most 120 s on
2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernel_position import machine_info  # noqa: E402

from litrepro import atomic  # noqa: E402
from litrepro.paths import RENDERED, ROOT  # noqa: E402

GOAL_S = 120.0


def one_build() -> tuple[float, dict]:
    with tempfile.TemporaryDirectory(prefix="litrepro-book-bench-") as tmp:
        code = ("import json, pathlib, sys; from litrepro import book; "
                "print(json.dumps(book.build(pathlib.Path(sys.argv[1]) / 'site')))")
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", code, tmp], cwd=ROOT, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - start
    return wall, json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RENDERED / "book_build.json")
    args = parser.parse_args(argv)
    load_at_start = list(os.getloadavg())
    runs = [one_build() for _ in range(args.repeats)]
    walls = [w for w, _ in runs]
    result = {"what": "python -m litrepro.book, from scratch, wall-clock seconds (new process each repeat)",
              "command": f"python benchmarks/book_build.py --repeats {args.repeats}",
              "median_s": statistics.median(walls), "repeats_s": walls,
              "steps_s": [steps for _, steps in runs], "goal_s": GOAL_S,
              "machine": {**machine_info(), "load_average_at_start": load_at_start}}
    atomic.write_json(args.out, result)
    print(f"book build: median {result['median_s']:.1f} s over {args.repeats} "
          f"(goal <= {GOAL_S:.0f} s) on {result['machine']['cpu_model']}, {result['machine']['cores']} cores, "
          f"load average {load_at_start[0]:.1f} at the start")
    return 0 if result["median_s"] <= GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
