"""Sending notebook jobs to Dask: a local cluster or an existing scheduler.

Dask is optional (``pip install 'litrepro[dask]'``); a local run never imports it.
A Dask task hands its job to a litrepro worker process that the Dask worker
keeps (one per Dask worker thread, with its warm kernel, exactly as in a local
run), executes into a scratch folder inside the Dask worker's own
``local_directory``, and returns the files' bytes; the client then publishes
them into ``--out`` exactly as a local run does (notebook first, JSON last,
each atomically).  So ``--out`` need not be shared with the workers.

Who can use the cluster (``docs/security.md``): anyone who can connect to a
Dask scheduler can run any code, as the user who runs it, on the scheduler and
on every worker, and a client unpickles what comes back, so a scheduler can
run code in the client too.  A local cluster (``--scheduler dask``) therefore
speaks TLS only, with certificates made for this run and held in memory
(``distributed.Security.temporary()``; both sides show one), on 127.0.0.1,
with no dashboard and no HTTP routes: another local user's client fails the
TLS handshake.  An external scheduler (``tls://HOST:PORT``) is reached with the
certificates given by ``--tls-ca-file``, ``--tls-cert`` and ``--tls-key`` (or
Dask's own ``distributed.comm.tls`` configuration); a plain ``tcp://`` address
is accepted with a warning, since its traffic is neither encrypted nor
authenticated.

Bounded output (issue 33): anyone on the machine can open connections to the local scheduler's
port, and each failed TLS handshake is a Dask warning on the run's stderr.  While a cluster is
connected, Dask's connection warnings (:data:`RATE_LIMITED_LOGGERS`) pass :data:`WARNING_BURST` times
per message template; the rest are counted and reported in one line per template when the run closes
the cluster.  The scheduler's HTTP server (which Dask starts even without a dashboard) listens on a
random port of 127.0.0.1 with no routes, and no dashboard is started on the scheduler or the workers.

Scratch space: Dask removes a dead worker's ``local_directory``; a
``LocalCluster`` is given one inside the run's own scratch folder
(``<out>/.litrepro/scratch/<run>/dask``), which the runner removes, so a killed
Dask worker leaves nothing in ``/tmp``.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from litrepro.outdir import OutDir
from litrepro.errors import UsageError
from litrepro.runner import Job, LocalWorkers
from litrepro.worker import maybe_die, output_paths

CONNECT_TIMEOUT_S = 5
#: A Dask worker's litrepro helper exits after this long without a job (a remote cluster outlives a run).
HELPER_IDLE_EXIT_S = 600

_helpers: dict[tuple[str, int], LocalWorkers] = {}
_helpers_lock = threading.Lock()


#: Dask configuration of every cluster this module starts: no HTTP server routes (no dashboard, no
#: /info pages with workers' logs and call stacks, no proxy) on the scheduler or the workers.
_NO_HTTP = {"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}


#: Loggers whose repeated warnings another local user can trigger (a bare connection to the scheduler).
RATE_LIMITED_LOGGERS = ("distributed.comm.tcp", "distributed.comm.core", "distributed.core", "distributed.scheduler")
#: Records of one message template shown before the rest are only counted.
WARNING_BURST = 5


class RateLimit(logging.Filter):
    """Pass the first :data:`WARNING_BURST` records of each message template, count the rest."""

    def __init__(self, burst: int = WARNING_BURST) -> None:
        super().__init__()
        self.burst = burst
        self.seen: dict[str, int] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        with self._lock:
            n = self.seen.get(str(record.msg), 0) + 1
            self.seen[str(record.msg)] = n
        return n <= self.burst

    def suppressed(self) -> list[str]:
        """One line per template whose records were held back."""
        return [f"litrepro: {n - self.burst} more Dask warning(s) like {' '.join(t.split())[:120]!r} were suppressed"
                for t, n in sorted(self.seen.items()) if n > self.burst]


_rate_limit: RateLimit | None = None


def limit_warnings() -> RateLimit:
    """Attach this process's :class:`RateLimit` to the loggers of :data:`RATE_LIMITED_LOGGERS` (once)."""
    global _rate_limit
    if _rate_limit is None:
        _rate_limit = RateLimit()
        for name in RATE_LIMITED_LOGGERS:
            logging.getLogger(name).addFilter(_rate_limit)
    return _rate_limit


def report_suppressed() -> None:
    """Print the count lines of :func:`limit_warnings` to stderr, detach it and start counting afresh."""
    global _rate_limit
    if _rate_limit is None:
        return
    for name in RATE_LIMITED_LOGGERS:
        logging.getLogger(name).removeFilter(_rate_limit)
    for line in _rate_limit.suppressed():
        print(line, file=sys.stderr)
    _rate_limit = None


def check_address(scheduler: str) -> None:
    """``local``, ``dask``, ``tls://HOST:PORT`` or ``tcp://HOST:PORT`` with a port in 1..65535; else a usage error."""
    if scheduler in ("local", "dask"):
        return
    shown = scheduler if len(scheduler) <= 80 else scheduler[:80] + "..."
    bad = UsageError(f"--scheduler {shown!r}: expected local, dask, tls://HOST:PORT or tcp://HOST:PORT")
    if not scheduler.startswith(("tcp://", "tls://")):
        raise bad
    try:
        parts = urlsplit(scheduler)
        port = parts.port
    except ValueError:
        raise bad from None
    if not parts.hostname or port is None or not 0 < port < 65536 or parts.path not in ("", "/") \
            or parts.query or parts.fragment or parts.username:
        raise bad


def _helper(kernel_reuse: int, timeout: float | None = None) -> LocalWorkers:
    """This Dask worker's pool of litrepro worker processes, scratch in the Dask worker's own folder."""
    from dask.distributed import get_worker

    root = Path(get_worker().local_directory) / "litrepro"
    key = (str(root), kernel_reuse, timeout)
    with _helpers_lock:
        if key not in _helpers:
            _helpers[key] = LocalWorkers(root, kernel_reuse=kernel_reuse, idle_exit_s=HELPER_IDLE_EXIT_S,
                                         timeout=timeout)
        return _helpers[key]


def close_helpers() -> int:
    """Run on every Dask worker at the end of a run: stop the litrepro workers and their kernels."""
    with _helpers_lock:
        helpers = list(_helpers.values())
        _helpers.clear()
    for helper in helpers:
        helper.close()
    return len(helpers)


def run_on_worker(job: Job, kernel_reuse: int) -> dict[str, Any]:
    """Executed on a Dask worker: run the job in scratch space, return outcome and file bytes."""
    maybe_die("dask", job.method, job.seed)
    helper = _helper(kernel_reuse, job.cell_timeout)
    helper.scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=helper.scratch, prefix="out-") as tmp:
        outcome = helper.submit(job, out_dir=Path(tmp))
        outcome["files"] = {p.name: p.read_bytes() for p in Path(tmp).glob("seed-*") if p.is_file()}
    return outcome


def publish(job: Job, outcome: dict[str, Any]) -> dict[str, Any]:
    """Write a Dask outcome's files into ``job.out_dir`` like a local worker would (through ``OutDir``)."""
    files = outcome.pop("files", {})
    folder = OutDir(job.out_root)
    paths = output_paths(job.out_dir, job.seed)
    for key in ("failed", "notebook", "json"):  # the JSON, the commit marker, last
        name = paths[key].name
        if name in files:
            folder.write(f"{job.rel_dir}/{name}", files[name])
    if outcome.get("status") == "ok":
        folder.remove(f"{job.rel_dir}/{paths['failed'].name}")
    return outcome


def external_security(ca_file: str | None = None, cert: str | None = None, key: str | None = None):
    """The ``distributed.Security`` for an external scheduler: the files given, or Dask's TLS configuration.

    Each file must be a readable regular file; the three go together.
    """
    try:
        from distributed import Security
    except ImportError:
        raise UsageError("--scheduler needs Dask: pip install 'litrepro[dask]'") from None

    given = {"--tls-ca-file": ca_file, "--tls-cert": cert, "--tls-key": key}
    if not any(given.values()):
        return Security()                      # distributed.comm.tls.* from Dask's configuration, if any
    missing = [name for name, value in given.items() if not value]
    if missing:
        raise UsageError(f"{', '.join(missing)}: needed with the other --tls-* options")
    for name, value in given.items():
        if not os.path.isfile(value) or not os.access(value, os.R_OK):
            raise UsageError(f"{name} {os.fsdecode(value)[:200]!r}: not a readable file")
    return Security(tls_ca_file=ca_file, tls_client_cert=cert, tls_client_key=key, require_encryption=True)


def local_security():
    """TLS certificates for this run only (``Security.temporary``: a fresh CA and key pair, in memory)."""
    try:
        from distributed import Security

        return Security.temporary()
    except ImportError:
        raise UsageError("--scheduler dask needs the cryptography package: pip install 'litrepro[dask]'") from None


def connect(scheduler: str, *, workers: int = 1, local_directory: Path | None = None, security=None):
    """A Dask ``(client, cluster)``: a private TLS LocalCluster of ``workers`` processes, or an external scheduler.

    ``security`` (a ``distributed.Security``) is for an external scheduler; a
    local cluster always makes its own (:func:`local_security`).
    """
    try:
        import dask
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise UsageError("--scheduler needs Dask: pip install 'litrepro[dask]'") from None
    cluster = None
    limit_warnings()
    try:
        if scheduler == "dask":
            own = local_security()
            with dask.config.set(_NO_HTTP):
                # no dashboard anywhere; the scheduler's route-less HTTP server on a random localhost port
                # (Dask's default 8787 collides, with a multi-line warning, when another process has it)
                cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       protocol="tls://", security=own, dashboard_address=None,
                                       worker_dashboard_address=None,
                                       scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"},
                                       local_directory=str(local_directory) if local_directory else None)
                client = Client(cluster, security=own, timeout=f"{CONNECT_TIMEOUT_S * 6}s")
        else:
            client = Client(scheduler, security=security, timeout=f"{CONNECT_TIMEOUT_S}s")
            if scheduler.startswith("tcp://"):
                print(f"litrepro: warning: {scheduler} is plain TCP: the jobs and their results travel unencrypted "
                      "and whoever can reach that scheduler can run code on it (use tls://; see docs/security.md)",
                      file=sys.stderr)
    except (OSError, TimeoutError, ValueError, TypeError) as err:
        if cluster is not None:
            cluster.close()
        report_suppressed()
        reason = " ".join(str(err).split())[:300]
        if isinstance(err, TypeError) and "ssl_context" in reason:
            reason = "tls:// needs --tls-ca-file, --tls-cert and --tls-key, or Dask's distributed.comm.tls settings"
        raise UsageError(f"--scheduler {scheduler}: cannot reach the Dask scheduler ({reason})") from None
    return client, cluster


def dask_submitter(client, cluster, kernel_reuse: int) -> tuple[Callable[[Job], dict], Callable[[], None]]:
    """``(submit, close)`` for a connected client."""

    def submit(job: Job) -> dict:
        key = f"litrepro-{job.method}-{job.seed}-{uuid.uuid4().hex[:8]}"
        return publish(job, client.submit(run_on_worker, job, kernel_reuse, pure=False, key=key).result())

    def close() -> None:
        try:
            client.run(close_helpers)
        except Exception:  # noqa: BLE001 - a worker already gone; its helpers died with it
            pass
        client.close()
        if cluster is not None:
            cluster.close()
        report_suppressed()

    return submit, close
