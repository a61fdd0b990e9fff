"""The whole reproduction (both methods x seeds 42-44) three ways, side by side.

(a) ``python -m litrepro run --force`` with its default parallelism;
(b) one ``papermill`` CLI call after another, as a user would by hand;
(c) the floor: each notebook's code exported as a plain script (parameters
    injected by papermill's own parameteriser) and run with ``python`` in as
    many parallel processes as (a) uses.

(a) skips the cross-seed summary notebook so the three do the same work.

    python benchmarks/reproduction.py [--repeats 3]
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
from nbconvert import ScriptExporter
from papermill.parameterize import parameterize_notebook

from litrepro import methods
from litrepro.paths import ROOT

SEEDS = (42, 43, 44)
BIN = Path(sys.executable).parent


def jobs() -> list[tuple[str, int]]:
    return [(m, s) for m in methods.METHODS for s in SEEDS]


def way_a(tmp: Path) -> None:
    subprocess.run([sys.executable, "-m", "litrepro", "run", "--force", "--no-progress", "--no-summary-notebook",
                    "--out", str(tmp / "a")], check=True, capture_output=True)


def way_b(tmp: Path) -> None:
    for m, s in jobs():
        subprocess.run([str(BIN / "papermill"), str(methods.get(m).notebook), str(tmp / f"b-{m}-{s}.ipynb"),
                        "-p", "seed", str(s), "--no-progress-bar", "-k", "python3"], check=True, capture_output=True)


def export_scripts(tmp: Path) -> list[Path]:
    scripts = []
    for m, s in jobs():
        nb = nbformat.read(methods.get(m).notebook, as_version=4)
        for cell in nb.cells:  # papermill's parameteriser expects every cell to carry a tags list
            cell.metadata.setdefault("tags", [])
        nb.metadata.setdefault("papermill", {})
        nb = parameterize_notebook(nb, {"seed": s})
        source, _ = ScriptExporter().from_notebook_node(nb)
        path = tmp / f"c-{m}-{s}.py"
        path.write_text(source)
        scripts.append(path)
    return scripts


def way_c(scripts: list[Path], workers: int) -> None:
    env = {**os.environ, "MPLBACKEND": "Agg"}
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda p: subprocess.run([sys.executable, str(p)], check=True, capture_output=True, env=env,
                                               cwd=ROOT / "notebooks"), scripts))


def main(repeats: int) -> dict:
    workers = os.cpu_count() or 1
    times = {"a_litrepro_run": [], "b_papermill_sequential": [], "c_plain_scripts_parallel": []}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        scripts = export_scripts(tmp)
        for _ in range(repeats):
            for key, fn in (("a_litrepro_run", lambda: way_a(tmp)), ("b_papermill_sequential", lambda: way_b(tmp)),
                            ("c_plain_scripts_parallel", lambda: way_c(scripts, workers))):
                start = time.perf_counter()
                fn()
                times[key].append(time.perf_counter() - start)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"workers": workers, "repeats": repeats, "notebooks": len(jobs()), "median_s": med, "all_s": times,
            "ratio_a_over_c": med["a_litrepro_run"] / med["c_plain_scripts_parallel"],
            "ratio_b_over_a": med["b_papermill_sequential"] / med["a_litrepro_run"]}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    print(json.dumps(main(parser.parse_args().repeats), indent=1))
