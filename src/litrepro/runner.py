"""The batch runner behind ``python -m litrepro run``.

Jobs are (method, seed, overrides) triples.  Each runs in its own worker
process (:mod:`litrepro.worker`) so a dying kernel or worker loses only its
job; up to ``jobs`` run at once.  A job whose outputs exist and whose recorded
source hashes and parameters match the current ones is skipped unless
``force``.  After the jobs, each method's ``summary.json`` and PNG plots are
rewritten from the seeds' JSON files.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from litrepro import atomic, methods
from litrepro.errors import RunLocked
from litrepro.summary import summarise
from litrepro.worker import job_parameters, output_paths


@dataclass(frozen=True)
class Job:
    method: str
    seed: int
    out_dir: Path
    device: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        tag = ",".join(f"{k}={v}" for k, v in sorted(self.overrides.items()))
        return f"{self.method}[{tag}] seed {self.seed}" if tag else f"{self.method} seed {self.seed}"

    def payload(self, out_dir: Path | None = None) -> dict[str, Any]:
        """Arguments of :func:`litrepro.worker.execute`; ``out_dir`` redirects the files (Dask scratch)."""
        return {"method_name": self.method, "seed": self.seed, "out_dir": str(out_dir or self.out_dir),
                "label_dir": str(self.out_dir), "device": self.device, "overrides": self.overrides}


def variant_dir(out: Path, method: str, overrides: dict[str, Any]) -> Path:
    """``out/<method>`` or, for a sweep point, ``out/<method>/<k>=<v>,...``."""
    base = out / method
    if not overrides:
        return base
    return base / ",".join(f"{k}={v}" for k, v in sorted(overrides.items()))


def is_fresh(job: Job, current_hashes: dict[str, str]) -> bool:
    """Outputs exist and were made by ``current_hashes`` (the method's sources) with the same parameters."""
    paths = output_paths(job.out_dir, job.seed)
    if not (paths["json"].is_file() and paths["notebook"].is_file()):
        return False
    try:
        recorded = json.loads(paths["json"].read_text())["provenance"]
    except (OSError, ValueError, KeyError):
        return False
    wanted = job_parameters(methods.get(job.method), job.seed, job.device, job.overrides)
    return recorded.get("source_sha256") == current_hashes and recorded.get("parameters") == wanted


@contextmanager
def output_lock(out: Path) -> Iterator[None]:
    """An exclusive, non-blocking lock on ``out/.litrepro.lock`` (released when the process dies)."""
    out.mkdir(parents=True, exist_ok=True)
    handle = open(out / ".litrepro.lock", "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise RunLocked(f"another 'litrepro run' is writing to {out}; wait for it to finish or use another --out") from None
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def remove_stale_scratch(out: Path) -> int:
    """Delete scratch left by a killed run (``.tmp-*`` folders, ``.*.tmp`` files); call under the lock."""
    stale = [p for p in out.rglob(".tmp-*") if p.is_dir()] + list(out.rglob(".*.tmp"))
    for path in stale:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return len(stale)


def run_local(job: Job, out_dir: Path | None = None) -> dict[str, Any]:
    """Run ``job`` in a fresh worker process; a killed worker is reported as ``lost``."""
    proc = subprocess.run([sys.executable, "-m", "litrepro.worker", json.dumps(job.payload(out_dir))],
                          capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if lines:
        return json.loads(lines[-1])
    reason = f"worker exited with status {proc.returncode}"
    if proc.returncode < 0:
        reason = f"worker killed by signal {-proc.returncode}"
    tail = proc.stderr.strip().splitlines()[-1:] if proc.stderr.strip() else []
    return {"status": "lost", "method": job.method, "seed": job.seed, "error": "; ".join([reason, *tail])}


def execute_jobs(jobs: list[Job], *, workers: int, retries: int = 0, retry_failed: bool = False,
                 submit=run_local, progress: bool = True) -> list[dict[str, Any]]:
    """Run ``jobs`` ``workers`` at a time; re-run lost (and, if asked, failed) ones up to ``retries`` times."""
    from tqdm import tqdm

    outcomes: dict[int, dict] = {}
    pending = list(range(len(jobs)))
    bar = tqdm(total=len(jobs), desc="notebooks", unit="nb", disable=not progress, file=sys.stderr)
    retry = {"lost"} | ({"failed"} if retry_failed else set())
    for attempt in range(retries + 1):
        if not pending:
            break
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            futures = {pool.submit(submit, jobs[i]): i for i in pending}
            for future in as_completed(futures):
                i = futures[future]
                try:
                    outcome = future.result()
                except Exception as err:  # a scheduler-side loss (e.g. a Dask worker died)
                    outcome = {"status": "lost", "method": jobs[i].method, "seed": jobs[i].seed,
                               "error": f"{type(err).__name__}: {err}"}
                outcome.update(label=jobs[i].label, attempts=attempt + 1)
                outcomes[i] = outcome
                if outcome["status"] not in retry or attempt == retries:  # final: count it
                    bar.update(1)
        pending = [i for i in pending if outcomes[i]["status"] in retry]
    bar.close()
    return [outcomes[i] for i in range(len(jobs))]


def write_summaries(jobs: list[Job]) -> list[Path]:
    """Rebuild ``summary.json`` and the PNGs of every (method, variant) folder touched by ``jobs``."""
    from litrepro.plotting import save_png  # matplotlib: imported only when there is something to plot

    groups: dict[tuple[str, Path], list[int]] = {}
    for job in jobs:
        groups.setdefault((job.method, job.out_dir), []).append(job.seed)
    written = []
    for (method, folder), seeds in sorted(groups.items()):
        results = []
        for seed in sorted(set(seeds)):
            path = output_paths(folder, seed)["json"]
            if path.is_file():
                results.append(json.loads(path.read_text()))
        if not results:
            continue
        atomic.write_json(folder / "summary.json", summarise(method, results))
        written.append(folder / "summary.json")
        for name, fig in methods.get(method).plot_function()(results).items():
            save_png(fig, folder / name)
    return written


def render_summary_notebook(out: Path) -> Path | None:
    """Execute ``notebooks/summary.ipynb`` over ``out`` into ``out/summary.ipynb`` and ``out/summary.html``."""
    import nbformat
    import papermill as pm
    from nbconvert import HTMLExporter

    from litrepro.paths import NOTEBOOKS, ROOT, relative
    from litrepro.worker import clean_notebook

    if not any(next((out / name).glob("seed-*.json"), None) for name in methods.METHODS):
        return None
    source = NOTEBOOKS / "summary.ipynb"
    results_dir = relative(out) if out.resolve().is_relative_to(ROOT) else str(out.resolve())
    with tempfile.TemporaryDirectory(dir=out, prefix=".tmp-summary-") as tmp:
        executed = Path(tmp) / "summary.ipynb"
        pm.execute_notebook(str(source), str(executed), parameters={"results_dir": results_dir},
                            kernel_name="python3", progress_bar=False, cwd=str(NOTEBOOKS))
        nb = clean_notebook(nbformat.read(executed, as_version=4), input_path=relative(source),
                            output_path=relative(out / "summary.ipynb"))
    text = nbformat.writes(nb)
    html, _ = HTMLExporter().from_notebook_node(nb)
    atomic.write_text(out / "summary.ipynb", text)
    atomic.write_text(out / "summary.html", html)
    return out / "summary.ipynb"
