"""Sending notebook jobs to Dask: a local cluster or an existing scheduler.

Dask is optional (``pip install 'litrepro[dask]'``); a local run never imports it.
A Dask task runs the same worker process as a local run, into a scratch folder
on the Dask worker, and returns the files' bytes; the client then publishes
them into ``--out`` exactly as a local run does (notebook first, JSON last,
each atomically).  So ``--out`` need not be shared with the workers.
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Any, Callable

from litrepro import atomic
from litrepro.errors import UsageError
from litrepro.runner import Job, run_local
from litrepro.worker import maybe_die, output_paths

CONNECT_TIMEOUT_S = 5


def run_on_worker(job: Job) -> dict[str, Any]:
    """Executed on a Dask worker: run the job in scratch space, return outcome and file bytes."""
    maybe_die("dask", job.method, job.seed)
    with tempfile.TemporaryDirectory(prefix="litrepro-dask-") as tmp:
        outcome = run_local(job, out_dir=Path(tmp))
        outcome["files"] = {p.name: p.read_bytes() for p in Path(tmp).glob("seed-*") if p.is_file()}
    return outcome


def publish(job: Job, outcome: dict[str, Any]) -> dict[str, Any]:
    """Write a Dask outcome's files into ``job.out_dir`` like a local worker would."""
    files = outcome.pop("files", {})
    paths = output_paths(job.out_dir, job.seed)
    for key in ("failed", "notebook", "json"):  # the JSON, the commit marker, last
        name = paths[key].name
        if name in files:
            atomic.write_bytes(paths[key], files[name])
    if outcome.get("status") == "ok":
        paths["failed"].unlink(missing_ok=True)
    return outcome


def dask_submitter(scheduler: str, workers: int) -> tuple[Callable[[Job], dict], Callable[[], None]]:
    """``(submit, close)`` for ``--scheduler dask`` (a LocalCluster) or ``--scheduler tcp://HOST:PORT``."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise UsageError("--scheduler needs Dask: pip install 'litrepro[dask]'") from None
    cluster = None
    try:
        if scheduler == "dask":
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
            client = Client(cluster, timeout=f"{CONNECT_TIMEOUT_S * 6}s")
        else:
            client = Client(scheduler, timeout=f"{CONNECT_TIMEOUT_S}s")
    except (OSError, TimeoutError) as err:
        raise UsageError(f"--scheduler {scheduler}: cannot reach the Dask scheduler ({err})") from None

    def submit(job: Job) -> dict:
        key = f"litrepro-{job.method}-{job.seed}-{uuid.uuid4().hex[:8]}"
        return publish(job, client.submit(run_on_worker, job, pure=False, key=key).result())

    def close() -> None:
        client.close()
        if cluster is not None:
            cluster.close()

    return submit, close
