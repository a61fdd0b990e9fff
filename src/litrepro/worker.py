"""Execute (method, seed) notebooks with papermill and publish their outputs.

The runner starts ``python -m litrepro.worker --serve`` processes, one per
parallel slot, and sends them jobs as JSON lines on stdin; each outcome comes
back as one line on stdout.  A worker keeps one kernel (:mod:`litrepro.kernels`)
and reuses it for up to ``--kernel-reuse`` notebooks, so a dying kernel or
worker loses only its current job (reported ``lost``).  The worker dies with the
runner: it has a parent-death signal, and it exits, killing its kernel, when
its stdin closes (the runner's end of the pipe closes when the runner dies).

Publication order makes a killed run harmless:

1. execute into a private scratch folder that the runner owns
   (``<out>/.litrepro/scratch/<run>/``, see :mod:`litrepro.outdir`);
2. write ``seed-<N>.ipynb`` atomically, then ``seed-<N>.json`` atomically.

The JSON is the commit marker: a seed counts as done only when its JSON exists
and its recorded hashes match the notebook and sources.  A failed execution
never touches an earlier result; its notebook goes to ``seed-<N>.failed.ipynb``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import litrepro._imports  # noqa: F401  (before nbformat: skips a slow import)
import nbformat

from litrepro import atomic, methods
from litrepro.kernels import KernelError, KernelSlot
from litrepro.params import as_dict, load_file
from litrepro.paths import NOTEBOOKS, relative
from litrepro.provenance import package_versions, sha256_file, rendered_hashes

_VOLATILE = ("start_time", "end_time", "duration")
#: Fault injection for the fault tests: ``<where>:<method>:<seed>[:<once-file>]`` makes the process at
#: ``where`` (``worker``: the job's worker process, ``dask``: the Dask worker, ``kernel``: the job's
#: kernel, killed from outside once the notebook is running, as the OOM killer would) die by SIGKILL
#: when it starts that job; ``hang`` stops the job's kernel (SIGSTOP) instead, so the notebook hangs;
#: ``stopworker`` stops the worker process itself (SIGSTOP).
#: With a once-file, only the first time (the file records that it happened).
FAULT_ENV = "LITREPRO_TEST_FAULT"
#: Prefix of the one stdout line that carries a job's outcome (libraries may print other lines).
OUTCOME = "@litrepro-outcome "


def fault_armed(where: str, method: str, seed: int) -> bool:
    spec = os.environ.get(FAULT_ENV, "").split(":")
    if spec[:3] != [where, method, str(seed)]:
        return False
    if len(spec) > 3:
        once = Path(spec[3])
        if once.exists():
            return False
        once.touch()
    return True


def maybe_die(where: str, method: str, seed: int) -> None:
    if fault_armed(where, method, seed):
        os.kill(os.getpid(), signal.SIGKILL)


def maybe_stop(method: str, seed: int) -> None:
    """Fault ``stopworker``: the worker stops itself (SIGSTOP) on taking the job, as a wedged worker would."""
    if fault_armed("stopworker", method, seed):
        os.kill(os.getpid(), signal.SIGSTOP)


def _signal_kernel_when_running(slot, executed: Path, sig: int) -> threading.Thread:
    """Fault injection: send ``sig`` to the kernel once a cell has finished (papermill saved the notebook again).

    SIGKILL stands for the OOM killer; SIGSTOP for a kernel that hangs (it stops answering but stays alive).
    """
    def send() -> None:
        deadline = time.time() + 120
        while time.time() < deadline and not executed.exists():
            time.sleep(0.02)
        first = executed.stat().st_mtime_ns if executed.exists() else 0
        while time.time() < deadline and executed.stat().st_mtime_ns == first:
            time.sleep(0.02)
        pid = slot.pid
        if pid:
            os.kill(pid, sig)
    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def clean_notebook(nb: nbformat.NotebookNode, *, input_path: str, output_path: str) -> nbformat.NotebookNode:
    """Drop timestamps and durations, fix papermill's random cell id; keep paths repository-relative.

    Consecutive stream outputs of one cell with the same name (stdout, stderr)
    are merged: where the kernel's output buffer happens to flush splits one
    print into two messages, a matter of timing, so only the merged text is
    reproducible.  (nbval compares merged streams too.)
    """
    pm = nb.metadata.get("papermill", {})
    for key in _VOLATILE:
        pm.pop(key, None)
    pm.update(input_path=input_path, output_path=output_path)
    for cell in nb.cells:
        if "injected-parameters" in cell.metadata.get("tags", []):
            cell["id"] = "injected-parameters"
        cell.metadata.pop("execution", None)
        if cell.get("outputs"):
            merged: list = []
            for output in cell.outputs:
                if (output.get("output_type") == "stream" and merged and merged[-1].get("output_type") == "stream"
                        and merged[-1].get("name") == output.get("name")):
                    merged[-1]["text"] = "".join(merged[-1]["text"]) + "".join(output["text"])
                else:
                    merged.append(output)
            cell["outputs"] = merged
        for key in _VOLATILE:
            cell.metadata.get("papermill", {}).pop(key, None)
    return nb


def job_parameters(method: methods.Method, seed: int, device: str | None, overrides: dict[str, Any]) -> dict[str, Any]:
    """Validated parameters: the YAML file, then overrides, seed and device on top."""
    extra = dict(overrides)
    extra["seed"] = seed
    if device is not None:
        extra["device"] = device
    return as_dict(load_file(method.config_class(), method.parameters, extra))


def output_paths(out_dir: Path, seed: int) -> dict[str, Path]:
    return {"notebook": out_dir / f"seed-{seed}.ipynb", "json": out_dir / f"seed-{seed}.json",
            "failed": out_dir / f"seed-{seed}.failed.ipynb"}


class Publisher:
    """Writes and deletes a job's outputs: through :class:`litrepro.outdir.OutDir` when they go into ``--out``
    (``out_root``), else plainly (a Dask worker's own scratch folder, inside the runner's scratch)."""

    def __init__(self, out: Path, out_root: str | None) -> None:
        from litrepro.outdir import OutDir

        self.out = out
        self.folder = OutDir(out_root) if out_root else None
        self.rel = out.relative_to(self.folder.root).as_posix() if self.folder else None

    def write(self, path: Path, data: bytes) -> None:
        if self.folder is None:
            atomic.write_bytes(path, data)
        else:
            self.folder.write(f"{self.rel}/{path.name}", data)

    def remove(self, path: Path) -> None:
        if self.folder is None:
            path.unlink(missing_ok=True)
        else:
            self.folder.remove(f"{self.rel}/{path.name}")


def execute(method_name: str, seed: int, out_dir: str, device: str | None = None,
            overrides: dict[str, Any] | None = None, label_dir: str | None = None,
            cell_timeout: float | None = None, out_root: str | None = None, *, slot: KernelSlot,
            scratch: str | Path) -> dict[str, Any]:
    """Run one job in ``slot``'s kernel; returns ``{"status": "ok" | "failed" | "lost", ...}``, never raises.

    ``scratch`` is a folder the runner owns; the job executes in a private
    folder inside it.  ``label_dir`` is the folder the outputs will finally
    live in, when that is not ``out_dir`` (a Dask worker executes into a
    scratch folder); the notebook's recorded paths and the reported paths use it.
    A kernel that dies in the middle of the notebook makes the job ``lost``
    (``--retries`` re-runs it); its partial notebook is kept as ``seed-<N>.failed.ipynb``.
    A cell that runs longer than ``cell_timeout`` seconds (a hung notebook) makes it
    ``failed``, with its partial notebook kept the same way; the slot then replaces the kernel.
    With ``out_root`` (``--out``), files are published through :class:`litrepro.outdir.OutDir`:
    recorded in ``OWNER``, never through a link, never over a file that is not the runner's own.
    """
    import papermill as pm
    from nbclient.exceptions import CellTimeoutError

    maybe_die("worker", method_name, seed)
    started = time.perf_counter()
    method = methods.get(method_name)
    params = job_parameters(method, seed, device, overrides or {})
    defaults = methods.notebook_defaults(method.notebook)
    inject = {k: v for k, v in params.items() if k in ("seed", "device") or defaults.get(k) != v}
    out = Path(out_dir)
    publisher = Publisher(out, out_root)
    paths = output_paths(out, seed)
    shown = output_paths(Path(label_dir) if label_dir else out, seed)
    Path(scratch).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=scratch, prefix=f"seed-{seed}-"))
    executed = tmp / paths["notebook"].name
    base = {"method": method_name, "seed": seed}
    ok = False

    def keep_failed() -> str | None:
        if not executed.is_file():
            return None
        try:
            nb = clean_notebook(nbformat.read(executed, as_version=4), input_path=relative(method.notebook),
                                output_path=relative(shown["failed"]))
            publisher.write(paths["failed"], nbformat.writes(nb).encode())
        except Exception:  # noqa: BLE001 - a half-written notebook: nothing to keep
            return None
        return relative(shown["failed"])

    try:
        try:
            km = slot.acquire(tmp / "result.json")
        except KernelError as err:
            return {**base, "status": "lost", "notebook": None, "cell": None, "error": str(err)}
        if fault_armed("kernel", method_name, seed):
            _signal_kernel_when_running(slot, executed, signal.SIGKILL)
        if fault_armed("hang", method_name, seed):
            _signal_kernel_when_running(slot, executed, signal.SIGSTOP)
        kernel_at = time.perf_counter()
        try:
            pm.execute_notebook(str(method.notebook), str(executed), parameters=inject, kernel_name=slot.kernel_name,
                                km=km, progress_bar=False, log_output=False, cwd=str(NOTEBOOKS),
                                execution_timeout=cell_timeout or None)
        except CellTimeoutError:
            return {**base, "status": "failed", "notebook": keep_failed(), "cell": None,
                    "error": f"a cell ran longer than --cell-timeout {cell_timeout:g} s (notebook hung or too slow)"}
        except pm.PapermillExecutionError as err:
            return {**base, "status": "failed", "notebook": keep_failed(), "cell": err.exec_count,
                    "error": f"{err.ename}: {err.evalue}".strip()}
        except Exception as err:  # noqa: BLE001 - the kernel died (SIGKILL, OOM) or stopped answering
            status = "failed" if slot.alive() else "lost"
            reason = f"{type(err).__name__}: {err}".strip()
            if status == "lost":
                reason = f"kernel died mid-notebook ({reason})"
            return {**base, "status": status, "notebook": keep_failed(), "cell": None, "error": reason}
        executed_at = time.perf_counter()
        results = json.loads((tmp / "result.json").read_text())
        results["provenance"] = {
            "source_sha256": rendered_hashes(method_name),
            "notebook_sha256": sha256_file(method.notebook),
            "parameters": params,
            "packages": package_versions(),
        }
        nb = clean_notebook(nbformat.read(executed, as_version=4), input_path=relative(method.notebook),
                            output_path=relative(shown["notebook"]))
        publisher.write(paths["notebook"], nbformat.writes(nb).encode())
        publisher.write(paths["json"], atomic.dumps_json(results).encode())
        publisher.remove(paths["failed"])
        ok = True
        return {**base, "status": "ok", "json": relative(shown["json"]),
                "timings": {"kernel_s": kernel_at - started, "execute_s": executed_at - kernel_at,
                            "publish_s": time.perf_counter() - executed_at}}
    except Exception as err:  # noqa: BLE001 - e.g. the disk filled while publishing: one line, not a traceback
        return {**base, "status": "failed", "notebook": None, "cell": None, "error": f"{type(err).__name__}: {err}"}
    finally:
        slot.release(ok)
        shutil.rmtree(tmp, ignore_errors=True)


def _watch_stdin(lines: "queue.Queue[str | None]", slot: KernelSlot) -> None:
    """Feed job lines to the main thread; on EOF (the runner died or closed us) kill the kernel and exit."""
    for line in sys.stdin:
        lines.put(line)
    slot.kill()
    os._exit(0)


#: Seconds between a worker's heartbeat lines (the runner kills a worker silent for ``--cell-timeout``).
HEARTBEAT_S = 2.0
HEARTBEAT = "@litrepro-alive"
_stdout_lock = threading.Lock()


def _say(line: str) -> None:
    with _stdout_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _heartbeat() -> None:
    while True:
        time.sleep(HEARTBEAT_S)
        try:
            _say(HEARTBEAT)
        except (OSError, ValueError):
            return


def serve(scratch: str, kernel_reuse: int, idle_exit_s: float | None = None, timeout: float | None = None) -> int:
    """Run jobs from stdin (one JSON object a line) until stdin closes; one outcome line each.

    A heartbeat line every :data:`HEARTBEAT_S` seconds tells the runner this
    worker still lives; ``timeout`` (``--cell-timeout``) bounds the kernel's
    preparation.
    """
    import queue

    from litrepro.kernels import set_parent_death_signal

    set_parent_death_signal()  # no-op unless the runner set it already; harmless to repeat
    slot = KernelSlot(reuse=kernel_reuse, scratch=Path(scratch) / "k", cwd=NOTEBOOKS, timeout=timeout)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_watch_stdin, args=(lines, slot), daemon=True).start()
    threading.Thread(target=_heartbeat, daemon=True).start()
    while True:
        try:
            line = lines.get(timeout=idle_exit_s)
        except queue.Empty:  # idle too long (a Dask worker's helper after its run ended)
            slot.kill()
            return 0
        job = json.loads(line)
        maybe_stop(job["method_name"], job["seed"])
        outcome = execute(**job, slot=slot, scratch=scratch)
        outcome["kernels_started"] = slot.started
        _say(OUTCOME + json.dumps(outcome))


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m litrepro.worker")
    parser.add_argument("--scratch", required=True, help="a folder the runner owns, for this worker's scratch")
    parser.add_argument("--kernel-reuse", type=int, default=1, help="notebooks per kernel (1: a fresh kernel each)")
    parser.add_argument("--idle-exit", type=float, default=None, help="exit after this many seconds without a job")
    parser.add_argument("--timeout", type=float, default=None, help="bound on a kernel's preparation (seconds)")
    args = parser.parse_args(argv)
    return serve(args.scratch, args.kernel_reuse, args.idle_exit, args.timeout)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
