"""Execute one (method, seed) notebook with papermill and publish its outputs.

Run as ``python -m litrepro.worker '<job json>'`` by the runner, one process
per job, so a crashing kernel or worker loses only its own job.  Publication
order makes a killed run harmless:

1. execute into a private temporary folder under the output folder;
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
import time
from pathlib import Path
from typing import Any

import litrepro._imports  # noqa: F401  (before nbformat: skips a 3 s import)
import nbformat

from litrepro import atomic, methods
from litrepro.params import as_dict, load_file
from litrepro.paths import NOTEBOOKS, relative
from litrepro.provenance import package_versions, sha256_file, source_hashes
from litrepro.report import RESULT_ENV

_VOLATILE = ("start_time", "end_time", "duration")
#: Fault injection for the fault tests: ``<where>:<method>:<seed>[:<once-file>]`` makes the process at
#: ``where`` (``worker``: the job's worker process, ``dask``: the Dask worker) die by SIGKILL when it
#: starts that job; with a once-file, only the first time (the file records that it happened).
FAULT_ENV = "LITREPRO_TEST_FAULT"


def maybe_die(where: str, method: str, seed: int) -> None:
    spec = os.environ.get(FAULT_ENV, "").split(":")
    if spec[:3] != [where, method, str(seed)]:
        return
    if len(spec) > 3:
        once = Path(spec[3])
        if once.exists():
            return
        once.touch()
    os.kill(os.getpid(), signal.SIGKILL)


def clean_notebook(nb: nbformat.NotebookNode, *, input_path: str, output_path: str) -> nbformat.NotebookNode:
    """Drop timestamps and durations, fix papermill's random cell id; keep paths repository-relative."""
    pm = nb.metadata.get("papermill", {})
    for key in _VOLATILE:
        pm.pop(key, None)
    pm.update(input_path=input_path, output_path=output_path)
    for cell in nb.cells:
        if "injected-parameters" in cell.metadata.get("tags", []):
            cell["id"] = "injected-parameters"
        cell.metadata.pop("execution", None)
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


def execute(method_name: str, seed: int, out_dir: str, device: str | None = None,
            overrides: dict[str, Any] | None = None, kernel_name: str = "python3",
            label_dir: str | None = None) -> dict[str, Any]:
    """Run one job; returns ``{"status": "ok" | "failed", ...}`` (never raises for a notebook error).

    ``label_dir`` is the folder the outputs will finally live in, when that is not
    ``out_dir`` (a Dask worker executes into a scratch folder); the notebook's
    recorded paths and the reported paths use it.
    """
    import papermill as pm

    maybe_die("worker", method_name, seed)
    started = time.perf_counter()
    method = methods.get(method_name)
    params = job_parameters(method, seed, device, overrides or {})
    defaults = methods.notebook_defaults(method.notebook)
    inject = {k: v for k, v in params.items() if k in ("seed", "device") or defaults.get(k) != v}
    out = Path(out_dir)
    paths = output_paths(out, seed)
    shown = output_paths(Path(label_dir) if label_dir else out, seed)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out, prefix=f".tmp-seed-{seed}-"))
    executed = tmp / paths["notebook"].name
    os.environ[RESULT_ENV] = str(tmp / "result.json")
    try:
        try:
            pm.execute_notebook(str(method.notebook), str(executed), parameters=inject, kernel_name=kernel_name,
                                progress_bar=False, log_output=False, cwd=str(NOTEBOOKS))
        except pm.PapermillExecutionError as err:
            nb = clean_notebook(nbformat.read(executed, as_version=4), input_path=relative(method.notebook),
                                output_path=relative(shown["failed"]))
            atomic.write_text(paths["failed"], nbformat.writes(nb))
            return {"status": "failed", "method": method_name, "seed": seed, "notebook": relative(shown["failed"]),
                    "cell": err.exec_count, "error": f"{err.ename}: {err.evalue}".strip()}
        except Exception as err:  # the kernel died or could not start: no notebook to keep
            return {"status": "failed", "method": method_name, "seed": seed, "notebook": None,
                    "cell": None, "error": f"{type(err).__name__}: {err}".strip()}
        executed_at = time.perf_counter()
        results = json.loads((tmp / "result.json").read_text())
        results["provenance"] = {
            "source_sha256": source_hashes(method_name),
            "notebook_sha256": sha256_file(method.notebook),
            "parameters": params,
            "packages": package_versions(),
        }
        nb = clean_notebook(nbformat.read(executed, as_version=4), input_path=relative(method.notebook),
                            output_path=relative(shown["notebook"]))
        atomic.write_text(paths["notebook"], nbformat.writes(nb))
        atomic.write_json(paths["json"], results)
        paths["failed"].unlink(missing_ok=True)
        return {"status": "ok", "method": method_name, "seed": seed, "json": relative(shown["json"]),
                "timings": {"execute_s": executed_at - started, "publish_s": time.perf_counter() - executed_at}}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str]) -> int:
    job = json.loads(argv[0])
    outcome = execute(**job)
    print(json.dumps(outcome), flush=True)
    return 0 if outcome["status"] == "ok" else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
