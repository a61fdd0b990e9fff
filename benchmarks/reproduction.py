"""The reproduction (both methods x ``--seeds`` seeds, default 10) four ways, side by side.

(a) ``python -m litrepro run --force --jobs W``: warm kernels (the default);
(b) one ``papermill`` CLI call after another, as a user would by hand;
(c) ``python -m litrepro run --force --jobs W --fresh-kernels``: a fresh kernel per notebook;
(d) the floor: every notebook executed in one warm kernel, its cells' own run
    times (papermill's per-cell durations, so kernel start, imports and
    papermill's bookkeeping are excluded) summed, divided by W.

W is 2 by default.  Each repeat runs (a), (b), (c) and (d) in turn, so a change in
the machine's load reaches all four; the figures are medians over ``--repeats``
(default 3), and the result names the machine (CPU model, cores, load average).
(a) and (c) skip the cross-seed summary notebook so all
four do the same work.  Goals (issue 10): (b)/(a) >= 4, (a)/(d) <= 1.5, (c)/(a) >= 2.

    python benchmarks/reproduction.py [--repeats 3] [--seeds 10] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from litrepro import methods

BIN = Path(sys.executable).parent
SEEDS: tuple[int, ...] = tuple(range(42, 52))


def jobs() -> list[tuple[str, int]]:
    return [(m, s) for m in methods.METHODS for s in SEEDS]


def _litrepro_run(out: Path, workers: int, *extra: str) -> None:
    seeds = ",".join(map(str, SEEDS))
    subprocess.run([sys.executable, "-m", "litrepro", "run", "--force", "--no-progress", "--no-summary-notebook",
                    "--seeds", seeds, "--jobs", str(workers), "--out", str(out), *extra], check=True, capture_output=True)


def way_a(tmp: Path, workers: int) -> None:
    _litrepro_run(tmp / "a", workers)


def way_c(tmp: Path, workers: int) -> None:
    _litrepro_run(tmp / "c", workers, "--fresh-kernels")


def way_d(tmp: Path, workers: int) -> float:
    """Sum of every cell's run time, all notebooks in one warm kernel, over ``workers``."""
    import papermill as pm

    from litrepro.kernels import KernelSlot
    from litrepro.paths import NOTEBOOKS

    slot = KernelSlot(reuse=len(jobs()) + 1, scratch=tmp / "d-scratch", cwd=NOTEBOOKS)
    total = 0.0
    try:
        for m, s in jobs():
            target = tmp / f"d-{m}-{s}.ipynb"
            km = slot.acquire(tmp / "d-result.json")
            pm.execute_notebook(str(methods.get(m).notebook), str(target), parameters={"seed": s}, km=km,
                                kernel_name="python3", progress_bar=False, cwd=str(NOTEBOOKS))
            slot.release(True)
            nb = nbformat.read(target, as_version=4)
            total += sum(c.metadata.get("papermill", {}).get("duration") or 0.0 for c in nb.cells)
    finally:
        slot.kill()
    return total / workers


def way_b(tmp: Path) -> None:
    for m, s in jobs():
        subprocess.run([str(BIN / "papermill"), str(methods.get(m).notebook), str(tmp / f"b-{m}-{s}.ipynb"),
                        "-p", "seed", str(s), "--no-progress-bar", "-k", "python3"], check=True, capture_output=True)


def main(repeats: int, seeds: int = 10, workers: int = 2) -> dict:
    global SEEDS
    SEEDS = tuple(range(42, 42 + seeds))
    times: dict[str, list[float]] = {"a_warm_run": [], "b_papermill_sequential": [], "c_fresh_kernel_run": [],
                                     "d_floor_cells_in_warm_kernel": []}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        for _ in range(repeats):
            for key, fn in (("a_warm_run", lambda: way_a(tmp, workers)), ("b_papermill_sequential", lambda: way_b(tmp)),
                            ("c_fresh_kernel_run", lambda: way_c(tmp, workers))):
                start = time.perf_counter()
                fn()
                times[key].append(time.perf_counter() - start)
            times["d_floor_cells_in_warm_kernel"].append(way_d(tmp, workers))
    from kernel_position import machine_info

    med = {k: statistics.median(v) for k, v in times.items()}
    a, b, c, d = (med[k] for k in times)
    return {"machine": machine_info(), "workers": workers, "repeats": repeats, "seeds": list(SEEDS), "notebooks": len(jobs()),
            "median_s": med, "all_s": times,
            "ratio_b_over_a": b / a, "ratio_a_over_d": a / d, "ratio_c_over_a": c / a,
            "goals": {"ratio_b_over_a": ">= 4", "ratio_a_over_d": "<= 1.5", "ratio_c_over_a": ">= 2"}}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    print(json.dumps(main(args.repeats, args.seeds, args.workers), indent=1))
