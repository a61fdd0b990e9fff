"""The batch runner behind ``python -m litrepro run``.

Jobs are (method, seed, overrides) triples.  Up to ``jobs`` long-lived worker
processes (:mod:`litrepro.worker`) run them, each keeping one kernel that it
reuses for up to ``kernel_reuse`` notebooks (1: a fresh kernel per notebook);
a dying kernel or worker loses only its job, which is reported ``lost``.
Workers die with the runner (a parent-death signal, and their stdin pipe
closing).  A job whose outputs exist and whose recorded source hashes and
parameters match the current ones is skipped unless ``force``.  After the
jobs, each method's ``summary.json`` and PNG plots are rewritten from the
seeds' JSON files.  The runner's own files live in ``<out>/.litrepro/``
(:mod:`litrepro.outdir`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from litrepro import methods, outdir
from litrepro.errors import UsageError
from litrepro.kernels import preexec_for_parent
from litrepro.results import (ignored_line, journalled_seed_results, parse_result, read_result,  # noqa: F401
                              seed_result_names)  # read_result: re-exported
from litrepro.summary import summarise
from litrepro.worker import OUTCOME, job_parameters, output_paths

#: Default notebooks per kernel before it is replaced (``--kernel-reuse``).
DEFAULT_KERNEL_REUSE = 20


@dataclass(frozen=True)
class Job:
    method: str
    seed: int
    out_dir: Path
    device: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    cell_timeout: float | None = None      # seconds one notebook cell may run (None: no limit)
    root: Path | None = None               # --out (default: the method folder's parent)

    @property
    def out_root(self) -> Path:
        if self.root is not None:
            return Path(self.root)
        return self.out_dir.parent if self.out_dir.parent.name != self.method else self.out_dir.parent.parent

    @property
    def rel_dir(self) -> str:
        """``out_dir`` relative to ``--out``, with ``/`` separators."""
        return self.out_dir.relative_to(self.out_root).as_posix()

    @property
    def label(self) -> str:
        tag = ",".join(f"{k}={v}" for k, v in sorted(self.overrides.items()))
        return f"{self.method}[{tag}] seed {self.seed}" if tag else f"{self.method} seed {self.seed}"

    def payload(self, out_dir: Path | None = None) -> dict[str, Any]:
        """Arguments of :func:`litrepro.worker.execute`; ``out_dir`` redirects the files (Dask scratch)."""
        return {"method_name": self.method, "seed": self.seed, "out_dir": str(out_dir or self.out_dir),
                "label_dir": str(self.out_dir), "device": self.device, "overrides": self.overrides,
                "cell_timeout": self.cell_timeout, "out_root": None if out_dir else str(self.out_root)}


#: A value that may appear as-is in a folder name: short, no separators, not starting with a dot.
_SAFE_VALUE = re.compile(r"[A-Za-z0-9_+\-][A-Za-z0-9_.+\-]{0,31}")
_MAX_VARIANT_NAME = 120
#: Prefix of a hashed value or point: ``@`` is outside ``_SAFE_VALUE``, so no plain value can imitate it.
_HASHED = "@h"


def _value_tag(value: Any) -> str:
    """A folder-name-safe form of a validated parameter value (a short hash when not safe as text)."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    if _SAFE_VALUE.fullmatch(text) and ".." not in text:
        return text
    return _HASHED + hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def variant_dir(out: Path, method: str, overrides: dict[str, Any]) -> Path:
    """``out/<method>`` or, for a sweep point, ``out/<method>/<k>=<v>,...``.

    Keys are validated parameter names; a value that is not short, plain text
    (no separators, no ``..``, no leading dot) is replaced by ``@h`` and a hash
    of it, and an over-long name by ``@h`` and a hash of the whole point, so the
    folder is always one level inside ``out/<method>``, and no plain value (which
    cannot contain ``@``) names the folder of another point.  The full values
    are in each seed's JSON.
    """
    base = out / method
    if not overrides:
        return base
    name = ",".join(f"{k}={_value_tag(v)}" for k, v in sorted(overrides.items()))
    if len(name) > _MAX_VARIANT_NAME:
        name = _HASHED + hashlib.sha256(json.dumps(overrides, sort_keys=True).encode()).hexdigest()[:16]
    assert "/" not in name and os.sep not in name and name not in (".", ".."), name
    return base / name


def is_fresh(job: Job, current_hashes: dict[str, str]) -> bool:
    """Outputs exist and were made by ``current_hashes`` (the method's sources) with the same parameters.

    Reads through :class:`litrepro.outdir.OutDir`: a link, FIFO or device where
    an output is expected is refused (a :class:`~litrepro.outdir.Refused` error), never opened.
    """
    folder = outdir.OutDir(job.out_root)
    names = {k: f"{job.rel_dir}/{p.name}" for k, p in output_paths(job.out_dir, job.seed).items()}
    if not folder.is_file(names["notebook"]):
        return False
    result = parse_result(folder.read(names["json"]))
    if result is None:
        return False
    recorded = result["provenance"]
    wanted = job_parameters(methods.get(job.method), job.seed, job.device, job.overrides)
    return recorded.get("source_sha256") == current_hashes and recorded.get("parameters") == wanted


def job_targets(job: Job) -> list[str]:
    """The files a job may write or delete, relative to ``--out``."""
    return [f"{job.rel_dir}/{p.name}" for p in output_paths(job.out_dir, job.seed).values()]


class LocalWorkers:
    """Long-lived ``python -m litrepro.worker --serve`` processes, one per runner thread.

    Each thread that submits gets its own worker (spawned by that thread, whose
    death is the worker's parent-death signal) and reuses it; a worker that dies
    is reported ``lost`` for its job and replaced for the next one.  A worker
    prints a heartbeat line every :data:`litrepro.worker.HEARTBEAT_S` seconds; one
    silent for ``timeout`` seconds (``--cell-timeout``: stopped, or wedged) is
    killed and its job reported ``lost``, so no wait on a worker is unbounded.
    """

    def __init__(self, scratch: Path, kernel_reuse: int = DEFAULT_KERNEL_REUSE,
                 idle_exit_s: float | None = None, timeout: float | None = None) -> None:
        self.scratch = Path(scratch)
        self.kernel_reuse = kernel_reuse
        self.idle_exit_s = idle_exit_s
        self.timeout = timeout
        self._local = threading.local()
        self._procs: list[subprocess.Popen] = []
        self._lock = threading.Lock()

    def _spawn(self) -> subprocess.Popen:
        with self._lock:
            index = len(self._procs)
        folder = self.scratch / f"w{index}"
        folder.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "litrepro.worker", "--scratch", str(folder),
               "--kernel-reuse", str(self.kernel_reuse)]
        if self.idle_exit_s:
            cmd += ["--idle-exit", str(self.idle_exit_s)]
        if self.timeout:
            cmd += ["--timeout", str(self.timeout)]
        stderr = open(folder / "stderr.log", "ab")
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                preexec_fn=preexec_for_parent(os.getpid()))
        stderr.close()
        proc.log = folder / "stderr.log"  # type: ignore[attr-defined]
        proc.buffer = b""  # type: ignore[attr-defined]
        with self._lock:
            self._procs.append(proc)
        return proc

    def _line(self, proc: subprocess.Popen) -> bytes:
        """The worker's next stdout line; EOFError when it closes, TimeoutError when silent too long."""
        while b"\n" not in proc.buffer:  # type: ignore[attr-defined]
            ready, _, _ = select.select([proc.stdout], [], [], self.timeout)
            if not ready:
                raise TimeoutError
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            if not chunk:
                raise EOFError
            proc.buffer += chunk  # type: ignore[attr-defined]
        line, _, proc.buffer = proc.buffer.partition(b"\n")  # type: ignore[attr-defined]
        return line

    def submit(self, job: Job, out_dir: Path | None = None) -> dict[str, Any]:
        proc = getattr(self._local, "proc", None)
        if proc is None or proc.poll() is not None:
            proc = self._local.proc = self._spawn()
        silent = False
        try:
            proc.stdin.write((json.dumps(job.payload(out_dir)) + "\n").encode())
            proc.stdin.flush()
            while True:
                line = self._line(proc).decode("utf-8", errors="replace")
                if line.startswith(OUTCOME):
                    return json.loads(line[len(OUTCOME):])
        except TimeoutError:
            silent = True
            proc.kill()                     # stopped or wedged: its kernel dies with it (parent-death signal)
        except (EOFError, BrokenPipeError, OSError, ValueError):
            proc.kill()                     # a garbled reply: this worker is not trusted with another job
        code = proc.wait()
        self._local.proc = None
        if silent:
            reason = f"worker gave no sign of life for {self.timeout:g} s (--cell-timeout); killed"
        else:
            reason = f"worker killed by signal {-code}" if code < 0 else f"worker exited with status {code}"
        try:
            tail = [] if silent else proc.log.read_text(errors="replace").strip().splitlines()[-1:]  # type: ignore[attr-defined]
        except OSError:
            tail = []
        return {"status": "lost", "method": job.method, "seed": job.seed, "notebook": None, "cell": None,
                "error": "; ".join([reason, *tail])}

    def close(self, timeout: float = 30) -> None:
        """Close every worker's stdin (it then stops its kernel and exits); kill any that lingers."""
        with self._lock:
            procs, self._procs = self._procs, []
        for proc in procs:
            try:
                proc.stdin.close()
            except OSError:
                pass
        for proc in procs:
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout:
                proc.stdout.close()


def execute_jobs(jobs: list[Job], *, workers: int, retries: int = 0, retry_failed: bool = False,
                 submit: Callable[[Job], dict[str, Any]], progress: bool = True,
                 finish: Callable[[], None] | None = None) -> list[dict[str, Any]]:
    """Run ``jobs`` ``workers`` at a time; re-run lost (and, if asked, failed) ones up to ``retries`` times.

    One thread pool serves every attempt, so a thread's worker process lives
    across retries; ``finish`` runs on the way out, while the threads still live.
    """
    from tqdm import tqdm

    outcomes: dict[int, dict] = {}
    pending = list(range(len(jobs)))
    bar = tqdm(total=len(jobs), desc="notebooks", unit="nb", disable=not progress, file=sys.stderr)
    retry = {"lost"} | ({"failed"} if retry_failed else set())
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        try:
            for attempt in range(retries + 1):
                if not pending:
                    break
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
        finally:
            if finish is not None:
                finish()
    bar.close()
    return [outcomes[i] for i in range(len(jobs))]


def write_summaries(jobs: list[Job]) -> tuple[list[Path], list[str]]:
    """Rebuild ``summary.json`` and the PNGs of every (method, variant) folder touched by ``jobs``.

    A summary covers every ``seed-<N>.json`` in its folder, the same seeds the
    summary notebook shows (not only this run's).  Returns the summaries
    written and one line per problem (an unreadable seed JSON, which is left
    out, or a summary that could not be written); a problem never stops the
    other folders.  Reads and writes go through :class:`litrepro.outdir.OutDir`.
    """
    from litrepro.plotting import png_bytes  # matplotlib: imported only when there is something to plot

    groups: dict[tuple[str, Path, Path], str] = {}
    for job in jobs:
        groups[(job.method, job.out_dir, job.out_root)] = job.rel_dir
    written, problems = [], []
    for (method, folder, root), rel in sorted(groups.items()):
        out = outdir.OutDir(root)
        results = []
        try:
            found, ignored, refused = journalled_seed_results(out, rel)
        except UsageError as err:
            problems.append(str(err))
            continue
        problems += refused
        if ignored:                            # dropped in by another process, or edited: named, never read
            print(ignored_line(folder, ignored), file=sys.stderr)
        for name, data in found:
            result = parse_result(data)
            if result is None:
                problems.append(f"{outdir.show(folder / name)}: not a readable seed result; left out of the summary")
                continue
            results.append(result)
        if not results:
            continue
        try:                                   # everything in memory first: a bad result writes nothing
            files = {"summary.json": outdir.dumps_json(summarise(method, results)).encode()}
            files.update((name, png_bytes(fig)) for name, fig in methods.get(method).plot_function()(results).items())
        except Exception as err:  # noqa: BLE001 - a result missing a field: one line
            problems.append(f"{outdir.show(folder)}: summary and figures not written ({type(err).__name__}: {err})")
            continue
        done: list[str] = []
        try:
            out.check_replaceable(f"{rel}/{name}" for name in files)   # every file of the folder, before the first
            for name, data in files.items():
                out.write(f"{rel}/{name}", data)
                done.append(name)
                if name == "summary.json":
                    written.append(folder / "summary.json")
        except Exception as err:  # noqa: BLE001 - disk full, a refused file: one line saying what was written
            rest = [n for n in files if n not in done]
            problems.append(f"{outdir.show(folder)}: {', '.join(rest)} not written"
                            + (f" ({', '.join(done)} written)" if done else " (nothing written)")
                            + f": {type(err).__name__}: {err}")
    return written, problems


#: Every figure a method's summary may write (``tests/test_security.py`` checks the plot functions' names
#: against it on the rendered seeds), so that a run refuses a user's file of that name before it starts.
SUMMARY_FIGURES = {
    "pinterest_rlbp": ("td_loss_value.png", "td_loss_cpc.png", "ips_vs_truth.png"),
    "waypoint_opd": ("teacher_rl_reward.png", "opd_comparison_expected_parity_rate.png",
                     "opd_comparison_validation_nll.png"),
}


def summary_targets(jobs: list[Job]) -> list[str]:
    """The files the summaries of ``jobs``' folders may replace, relative to ``--out``: ``summary.json`` and the
    method's figures (:data:`SUMMARY_FIGURES`)."""
    names = [f"{j.rel_dir}/{n}" for j in jobs for n in ("summary.json", *SUMMARY_FIGURES.get(j.method, ()))]
    return list(dict.fromkeys(names))


def _execute_summary(source: Path, executed: Path, parameters: dict[str, Any], scratch: Path,
                     cell_timeout: float | None = None) -> None:
    """Execute a summary notebook in a fresh kernel of our own (IPC transport, dies with us, bounded by ``cell_timeout``)."""
    import papermill as pm

    from litrepro.kernels import KernelSlot
    from litrepro.paths import NOTEBOOKS

    slot = KernelSlot(reuse=1, scratch=scratch / "kernels", cwd=NOTEBOOKS, timeout=cell_timeout)
    km = slot.acquire(scratch / "unused-result.json")
    try:
        pm.execute_notebook(str(source), str(executed), parameters=parameters, kernel_name=slot.kernel_name,
                            km=km, progress_bar=False, cwd=str(NOTEBOOKS), execution_timeout=cell_timeout or None,
                            start_timeout=max(60, int(cell_timeout or 0)))
    finally:
        slot.kill()


#: Names of the summary notebooks and their HTML, at the top of ``--out``.
SUMMARY_FILES = ("summary.ipynb", "summary.html", "sweep_summary.ipynb", "sweep_summary.html")


def render_summary_notebook(out: Path, scratch: Path | None = None, *, source_name: str = "summary.ipynb",
                            parameters: dict[str, Any] | None = None, cell_timeout: float | None = None) -> Path | None:
    """Execute ``notebooks/<source_name>`` over ``out`` into ``out/<source_name>`` and its ``.html``.

    ``summary.ipynb`` needs seed results in ``out/<method>/``; ``sweep_summary.ipynb``
    needs sweep-point folders ``out/<method>/<point>/``; without them nothing is written.
    A cell running longer than ``cell_timeout`` seconds fails it (a CellTimeoutError).
    """
    import tempfile

    import nbformat
    from nbconvert import HTMLExporter

    from litrepro.paths import NOTEBOOKS, ROOT, relative
    from litrepro.worker import clean_notebook

    folder = outdir.OutDir(out)
    out = folder.root
    if parameters is None:
        if source_name == "sweep_summary.ipynb":
            from litrepro.sweep import has_sweep

            if not has_sweep(out, methods.METHODS):
                return None
        elif not any(seed_result_names(folder.listdir(name)) for name in methods.METHODS):
            return None
        results_dir = relative(out) if out.resolve().is_relative_to(ROOT) else str(out.resolve())
        parameters = {"results_dir": results_dir}
    source = NOTEBOOKS / source_name
    target = out / source_name
    scratch_root = scratch or Path(tempfile.mkdtemp(prefix="litrepro-summary-"))
    tmp = Path(tempfile.mkdtemp(dir=scratch_root, prefix="summary-"))
    try:
        executed = tmp / source_name
        _execute_summary(source, executed, parameters, tmp, cell_timeout)
        nb = clean_notebook(nbformat.read(executed, as_version=4), input_path=relative(source),
                            output_path=relative(target))
    finally:
        import shutil

        shutil.rmtree(tmp if scratch else scratch_root, ignore_errors=True)
    text = nbformat.writes(nb)
    html, _ = HTMLExporter().from_notebook_node(nb)
    folder.write(source_name, text.encode())
    folder.write(Path(source_name).with_suffix(".html").name, html.encode())
    return target
