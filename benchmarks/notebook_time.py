"""Median wall time of one seed's notebook under papermill, and where it goes.

    python benchmarks/notebook_time.py [--repeats 3] [--methods ...] [--device cpu]

Reports per method the median over repeats of: the whole papermill call,
the sum of the notebook's cell times, the first (import) cell, the seeding
cell, and the rest (the method itself).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import nbformat
import papermill as pm

from litrepro import methods


def one_run(method: str, device: str, out: Path) -> dict[str, float]:
    start = time.perf_counter()
    pm.execute_notebook(str(methods.get(method).notebook), str(out), parameters={"device": device},
                        progress_bar=False, kernel_name="python3")
    total = time.perf_counter() - start
    cells = [c.metadata.papermill.get("duration") or 0.0 for c in nbformat.read(out, as_version=4).cells
             if c.cell_type == "code"]
    # cells: [imports, parameters, (injected), validation+seeding, ...]
    imports, seeding = cells[0], cells[3] if len(cells) > 3 else 0.0
    return {"total_s": total, "cells_s": sum(cells), "kernel_and_papermill_s": total - sum(cells),
            "imports_s": imports, "seeding_and_validation_s": seeding, "method_s": sum(cells) - imports - seeding}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--methods", nargs="+", default=list(methods.METHODS))
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    report = {}
    with tempfile.TemporaryDirectory() as tmp:
        for method in args.methods:
            runs = [one_run(method, args.device, Path(tmp) / f"{method}-{i}.ipynb") for i in range(args.repeats)]
            report[method] = {k: round(statistics.median(r[k] for r in runs), 2) for k in runs[0]}
    print(f"{'method':16} " + " ".join(f"{k:>26}" for k in next(iter(report.values()))))
    for method, row in report.items():
        print(f"{method:16} " + " ".join(f"{v:>26}" for v in row.values()))
    print(json.dumps({"repeats": args.repeats, "device": args.device, "medians": report}, sort_keys=True))


if __name__ == "__main__":
    main()
