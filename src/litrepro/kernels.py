"""Jupyter kernels for the batch pipeline: started safely, reused warm, reset between notebooks.

Two halves live here:

* **Worker side** (:class:`KernelSlot`): starts a kernel with
  ``jupyter_client`` on IPC transport where the platform has Unix sockets, with
  a parent-death signal (Linux ``prctl(PR_SET_PDEATHSIG)``) so the kernel dies
  with its worker, and runs one notebook at a time in it through papermill
  (``km=``, so papermill does not own or shut down the kernel).  A warm slot
  keeps its kernel for up to ``reuse`` notebooks; a fresh slot (``reuse=1``)
  starts a new kernel for every notebook, which is the old behaviour.  After
  each notebook the slot stops the client papermill made for it, which
  papermill itself never does when it is given ``km`` (issue 18).
* **Kernel side** (:func:`bootstrap`, :func:`prepare`): run inside the kernel.
  ``bootstrap`` imports the libraries the notebooks use and pays the one-off
  cost of ``torch.use_deterministic_algorithms`` (its first call imports
  ``torch._inductor``), then snapshots every piece of process state a notebook
  can change.  ``prepare`` runs before each notebook: ``%reset -f``, then that
  state restored, the execution counter set back to 1 (a new history session) and the
  result path set.

What is restored, and why it suffices: the notebooks' seeding block reseeds
Python's and torch's generators, and every draw takes an explicit generator;
what remains is state a notebook could leave behind and the next one would
read: user globals (``%reset -f``), torch's global flags (deterministic
algorithms, thread count, default dtype, grad mode, TF32 and cuDNN flags,
float32 matmul precision), the global RNG states (Python, numpy, torch),
matplotlib's rcParams and open figures, ``os.environ``, the working folder,
``sys.path``, ``sys.argv``, warning filters, ``sys.modules`` entries replaced by
another object, and every attribute of every ``litrepro`` module and class (and
of ``socket.socket`` and ``torch.hub``, which :class:`litrepro.guard.OfflineGuard`
patches).  ``litrepro`` modules first imported by a notebook are dropped so the
next notebook imports them afresh.  ``tests/test_kernels.py`` proves the
outputs equal to fresh kernels', byte for byte.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

#: Environment variable naming the notebook's result file (see :mod:`litrepro.report`).
_RESULT_ENV = "LITREPRO_RESULT_PATH"
_PR_SET_PDEATHSIG = 1
#: Unix socket paths are limited to 107 bytes on Linux (counted in bytes); the longest name we bind is
#: ``<folder>/k-<port>`` or ``<folder>/k-pipe``, so the folder's path must leave room for it.
_MAX_IPC_PATH = 100
_IPC_SUFFIX = "/k-pipe-00000"
IPC_FALLBACK_PREFIX = "litrepro-ipc-"
IPC_FALLBACK_LIST = "ipc-fallback"
#: Environment variable naming the IPC address of ipykernel's subprocess-output pipe (see :func:`launch`).
PIPE_ENV = "LITREPRO_IOPUB_PIPE"
#: Seconds a warm kernel's preparation may take when no ``--cell-timeout`` bounds it.
DEFAULT_PREPARE_TIMEOUT = 600.0


def _fits(folder: str | Path) -> bool:
    return len(os.fsencode(str(folder) + _IPC_SUFFIX)) <= _MAX_IPC_PATH


def _fallback_bases() -> list[Path]:
    """Short folders for private socket folders when the scratch path is too long (never $TMPDIR: it is scratch)."""
    bases = [os.environ.get("XDG_RUNTIME_DIR", ""), "/tmp", "/dev/shm"]
    return [Path(b) for b in bases if b and os.path.isabs(b) and _fits(Path(b) / (IPC_FALLBACK_PREFIX + "x" * 8))]


def is_fallback_ipc_dir(folder: Path) -> bool:
    """Whether ``folder`` is one of our short private socket folders (a listed one, checked before removal)."""
    try:
        info = os.lstat(folder)
    except OSError:
        return False
    import stat

    return (folder.parent in _fallback_bases() and folder.name.startswith(IPC_FALLBACK_PREFIX)
            and stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid())


def private_ipc_dir(scratch: Path) -> tuple[Path, bool]:
    """A new private (0700) folder for a kernel's sockets whose socket paths fit in 107 bytes.

    Inside ``scratch`` when that is short enough, else in a short base folder
    (``$XDG_RUNTIME_DIR``, ``/tmp``, ``/dev/shm``), listed in
    ``<scratch>/ipc-fallback`` so that :mod:`litrepro.outdir` removes it with a
    killed run's scratch.  Never an abstract socket: those have no permissions.
    Returns ``(folder, is_fallback)``.
    """
    scratch.mkdir(parents=True, exist_ok=True)
    if _fits(scratch / "s12345678"):
        return Path(tempfile.mkdtemp(dir=scratch, prefix="s")), False
    for base in _fallback_bases():
        try:
            folder = Path(tempfile.mkdtemp(dir=base, prefix=IPC_FALLBACK_PREFIX))
        except OSError:
            continue
        with open(scratch / IPC_FALLBACK_LIST, "a") as listing:
            listing.write(f"{folder}\n")
        return folder, True
    raise KernelError("no folder short enough for the kernel's IPC sockets (107-byte limit)")


def kernel_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """The kernel's environment: ``env`` (default ``os.environ``) with the backend pinned to Agg."""
    launch_env = dict(env if env is not None else os.environ)
    launch_env.setdefault("MPLBACKEND", "Agg")
    return launch_env


def launch() -> None:
    """The kernel's entry point: ipykernel with its subprocess-output pipe on IPC instead of a TCP port.

    ipykernel 7.4 binds that pipe (a PULL socket that forked children push their
    output to) to ``tcp://127.0.0.1:<random>``, hard-coded, readable by every
    local user.  Here it binds ``$LITREPRO_IOPUB_PIPE`` (``ipc://`` inside the
    kernel's private socket folder; ``auto:FOLDER``: ``FOLDER/pipe-<pid>``, for a
    server that starts many kernels) instead; without that variable the pipe is
    turned off, as ipykernel itself does when it cannot bind.
    """
    if sys.path and sys.path[0] == "":
        del sys.path[0]                        # as ipykernel_launcher: not the notebook folder
    import zmq
    from ipykernel import iostream

    address = os.environ.pop(PIPE_ENV, "")
    if address.startswith("auto:"):            # a server's kernels (litrepro.explore.serve): one pipe each
        folder = address.removeprefix("auto:")
        address = f"ipc://{folder}/pipe-{os.getpid()}" if os.path.isdir(folder) else ""

    def setup_pipe_in(self) -> None:
        if not address.startswith("ipc://"):
            self._pipe_flag = False
            return
        self._pipe_uuid = os.urandom(16)
        pipe_in = self.socket.context.socket(zmq.PULL)
        pipe_in.linger = 0
        pipe_in.bind(address)
        self._pipe_in = iostream.ZMQStream(pipe_in, self.io_loop)
        self._pipe_in.on_recv(self._handle_pipe_msg)

    def setup_pipe_out(self):
        ctx = zmq.Context()
        pipe_out = ctx.socket(zmq.PUSH)
        pipe_out.linger = 3000
        pipe_out.connect(address)
        return ctx, pipe_out

    iostream.IOPubThread._setup_pipe_in = setup_pipe_in
    iostream.IOPubThread._setup_pipe_out = setup_pipe_out
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()


# --------------------------------------------------------------------------------------------- worker side

def set_parent_death_signal(sig: int = signal.SIGKILL) -> None:
    """Ask Linux to send ``sig`` to this process when its parent thread dies (no-op elsewhere).

    Used as a ``preexec_fn``: it runs in the child between fork and exec.  If
    the parent is already gone by then (re-parented to init or a subreaper),
    the child kills itself at once.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - no prctl: the watchdog pipe still applies
        return


def preexec_for_parent(parent_pid: int):
    """A ``preexec_fn`` that sets the parent-death signal and checks the parent still lives."""
    def preexec() -> None:
        set_parent_death_signal()
        if os.getppid() != parent_pid:
            os.kill(os.getpid(), signal.SIGKILL)
    return preexec


def ipc_supported() -> bool:
    return os.name == "posix"


class KernelError(RuntimeError):
    """The kernel could not be started or prepared: the job is lost, not failed."""


class KernelSlot:
    """One kernel at a time, reused for up to ``reuse`` notebooks (``reuse=1``: a fresh kernel each)."""

    def __init__(self, *, reuse: int, scratch: Path, kernel_name: str = "python3",
                 cwd: Path | None = None, preload: bool = True, timeout: float | None = None) -> None:
        self.reuse = max(1, int(reuse))
        self.warm = self.reuse > 1
        self.scratch = Path(scratch)
        self.kernel_name = kernel_name
        self.cwd = cwd
        self.preload = preload
        #: Bound on a kernel's start-up and on each warm preparation (``--cell-timeout``; None: the default).
        self.timeout = float(timeout) if timeout else DEFAULT_PREPARE_TIMEOUT
        self.km = None
        self._kc = None
        self.used = 0
        self.started = 0           # kernels started, for tests and benchmarks
        self._lock = threading.Lock()
        self._notebook_clients: list = []   # clients papermill made from our km; stopped after each notebook

    # -- lifecycle
    def start(self, env: dict[str, str] | None = None) -> None:
        from jupyter_client import KernelManager

        # nbclient talks to the kernel through ``km.client()``: an asynchronous client, so that its
        # dead-kernel poll runs while it waits for output (a blocking client stalls its event loop,
        # and a kernel killed mid-cell would hang the job instead of failing it).
        # The connection file (it holds the key) lives in the run's private scratch folder, the
        # sockets in a private 0700 folder (:func:`private_ipc_dir`), removed with the kernel and,
        # after a SIGKILL, with the run's scratch; never in /tmp's open space or Jupyter's runtime folder.
        self.scratch.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(dir=self.scratch, prefix="k"))
        self._ipc_dirs = [str(folder)]
        kwargs: dict[str, Any] = {"kernel_name": self.kernel_name, "connection_file": str(folder / "c.json"),
                                  "client_class": "jupyter_client.asynchronous.AsyncKernelClient"}
        launch_env = kernel_environment(env)
        if ipc_supported():
            sockets, fallback = private_ipc_dir(self.scratch)
            self._ipc_dirs.append(str(sockets))
            kwargs.update(transport="ipc", ip=str(sockets / "k"))
            launch_env[PIPE_ENV] = f"ipc://{sockets / 'k-pipe'}"
        km = KernelManager(**kwargs)
        # Our launcher (:func:`launch`): ipykernel with its subprocess pipe on IPC, and an in-memory
        # IPython history (nothing appended to ~/.ipython/profile_default/history.sqlite).
        km.kernel_spec.argv = [sys.executable, "-c", "from litrepro.kernels import launch; launch()",
                               "-f", "{connection_file}", "--HistoryManager.hist_file=:memory:"]
        try:
            km.start_kernel(env=launch_env, cwd=str(self.cwd) if self.cwd else None,
                            preexec_fn=preexec_for_parent(os.getpid()))
        except Exception as err:
            self._remove_ipc_dir()
            raise KernelError(f"kernel did not start: {type(err).__name__}: {err}") from None
        self.km, self.used = km, 0
        self.started += 1
        if self.warm:
            # The kernel's start-up and its one-off imports (torch: seconds on a loaded machine) get at
            # least DEFAULT_PREPARE_TIMEOUT; each later preparation only ``timeout`` (--cell-timeout).
            self._run(f"import litrepro.kernels as _lk; _lk.bootstrap(preload={self.preload!r}); del _lk",
                      timeout=max(self.timeout, DEFAULT_PREPARE_TIMEOUT))

    def _remove_ipc_dir(self) -> None:
        import shutil

        for folder in getattr(self, "_ipc_dirs", []):
            shutil.rmtree(folder, ignore_errors=True)
        self._ipc_dirs = []

    def kill(self) -> None:
        """Stop the kernel now (SIGKILL to its process group); safe to call twice or from another thread."""
        self._stop_notebook_clients()
        km, self.km = self.km, None
        kc, self._kc = self._kc, None
        if kc is not None:
            try:
                kc.stop_channels()
            except Exception:  # noqa: BLE001
                pass
        if km is not None:
            try:
                km.shutdown_kernel(now=True)
            except Exception:  # noqa: BLE001 - already dead, or half-started
                pid = self.pid_of(km)
                if pid:
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except OSError:
                        pass
            try:
                km.cleanup_resources()
            except Exception:  # noqa: BLE001
                pass
        self._remove_ipc_dir()

    close = kill

    # -- the notebook's own client
    def _track_clients(self, km) -> None:
        """Record every client made from ``km``, so that :meth:`release` can stop it.

        papermill hands ``km`` to nbclient, which makes a new client for each
        notebook (``km.client()``: its own ZeroMQ context, five sockets and a
        heartbeat thread) and, since it does not own ``km``, never stops it
        (``cleanup_kc`` defaults to ``owns_km``).  Left running, each notebook's
        client stays subscribed to the kernel's IOPub and keeps its heartbeat
        thread: a kernel's n-th notebook publishes every message to n
        subscribers, and the worker gains a thread and file descriptors
        per notebook, for good (``benchmarks/kernel_position.py --keep-clients`` measures it; not committed).
        """
        if getattr(km, "_litrepro_tracked", False):
            return
        make = km.client

        def client(**kwargs):
            kc = make(**kwargs)
            self._notebook_clients.append(kc)
            return kc

        km.client = client
        km._litrepro_tracked = True

    def _stop_notebook_clients(self) -> None:
        """Stop the channels of the clients made for notebooks (their sockets, context and heartbeat thread)."""
        clients, self._notebook_clients = self._notebook_clients, []
        for kc in clients:
            try:
                kc.stop_channels()
            except Exception:  # noqa: BLE001 - its kernel is already gone
                pass

    @staticmethod
    def pid_of(km) -> int | None:
        provisioner = getattr(km, "provisioner", None)
        return getattr(provisioner, "pid", None)

    @property
    def pid(self) -> int | None:
        return self.pid_of(self.km) if self.km is not None else None

    def alive(self) -> bool:
        try:
            return self.km is not None and bool(self.km.is_alive())
        except Exception:  # noqa: BLE001
            return False

    # -- running code
    def _client(self):
        """This kernel's own client, on the shell channel only: requests queue until the kernel listens,
        and replies come back to this client alone, so no wait for IOPub is needed."""
        from jupyter_client.blocking import BlockingKernelClient

        if self._kc is None:
            kc = BlockingKernelClient()
            kc.load_connection_info(self.km.get_connection_info())
            kc.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
            self._kc = kc
        return self._kc

    def _run(self, code: str, timeout: float | None = None) -> None:
        """Execute ``code`` silently in the kernel; an error, a dead kernel or a timeout is a :class:`KernelError`."""
        import queue
        import time

        timeout = self.timeout if timeout is None else timeout
        kc = self._client()
        msg_id = kc.execute(code, silent=True, store_history=False)
        deadline = time.monotonic() + timeout
        while True:
            try:
                reply = kc.get_shell_msg(timeout=1)
            except queue.Empty:
                if not self.alive():
                    raise KernelError("kernel preparation failed: the kernel died") from None
                if time.monotonic() > deadline:
                    raise KernelError(f"kernel preparation failed: no reply in {timeout:g} s") from None
                continue
            if reply.get("parent_header", {}).get("msg_id") == msg_id:
                break
        content = reply.get("content", {})
        if content.get("status") != "ok":
            raise KernelError(f"kernel preparation failed: {content.get('ename')}: {content.get('evalue')}")

    def acquire(self, result_path: Path, env: dict[str, str] | None = None):
        """A kernel manager ready for the next notebook, whose results go to ``result_path``."""
        if self.km is not None and (self.used >= self.reuse or not self.alive()):
            self.kill()
        if self.km is None:
            start_env = dict(env if env is not None else os.environ)
            if not self.warm:
                start_env[_RESULT_ENV] = str(result_path)
            self.start(start_env)
        if self.warm:
            self._run(f"__import__('litrepro.kernels').kernels.prepare({str(result_path)!r})")
        self._track_clients(self.km)
        self.used += 1
        return self.km

    def release(self, ok: bool) -> None:
        """After a notebook: its client is stopped; a failed or lost job, or a spent fresh kernel, ends the kernel."""
        self._stop_notebook_clients()
        if not ok or self.used >= self.reuse:
            self.kill()


# --------------------------------------------------------------------------------------------- kernel side

_SNAPSHOT: dict[str, Any] | None = None
#: litrepro modules the method notebooks import that :func:`bootstrap` leaves out: ``litrepro.stats``
#: imports scipy, which adds two warning filters at import, so preloading it would give a
#: ``pinterest_rlbp`` notebook (which never imports scipy) filters that a fresh kernel does not have.
#: ``litrepro.prose`` and ``litrepro.findings`` (the finding sentences) import ``litrepro.stats``.
NOT_PRELOADED = ("litrepro.stats", "litrepro.prose", "litrepro.findings")


def _watched_objects() -> list[Any]:
    """Modules and classes whose attributes are restored: litrepro's own, plus what OfflineGuard patches."""
    import socket

    objects: list[Any] = [socket.socket]
    hub = sys.modules.get("torch.hub")
    if hub is not None:
        objects.append(hub)
    for name, module in list(sys.modules.items()):
        if module is None or name == __name__ or not (name == "litrepro" or name.startswith("litrepro.")):
            continue
        objects.append(module)
        for value in list(vars(module).values()):
            if isinstance(value, type) and getattr(value, "__module__", None) == name:
                objects.append(value)
    return objects


def _torch_state() -> dict[str, Any]:
    import torch

    return {
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "threads": torch.get_num_threads(),
        "dtype": torch.get_default_dtype(),
        "grad": torch.is_grad_enabled(),
        "matmul_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_tf32": torch.backends.cudnn.allow_tf32,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "matmul_precision": torch.get_float32_matmul_precision(),
        "rng": torch.random.get_rng_state(),
    }


def _restore_torch(state: dict[str, Any]) -> None:
    import torch

    torch.use_deterministic_algorithms(state["deterministic"], warn_only=state["warn_only"])
    if torch.get_num_threads() != state["threads"]:
        torch.set_num_threads(state["threads"])
    torch.set_default_dtype(state["dtype"])
    torch.set_grad_enabled(state["grad"])
    torch.backends.cuda.matmul.allow_tf32 = state["matmul_tf32"]
    torch.backends.cudnn.allow_tf32 = state["cudnn_tf32"]
    torch.backends.cudnn.deterministic = state["cudnn_deterministic"]
    torch.backends.cudnn.benchmark = state["cudnn_benchmark"]
    torch.set_float32_matmul_precision(state["matmul_precision"])
    torch.random.set_rng_state(state["rng"])


def snapshot() -> dict[str, Any]:
    import random
    import warnings

    from litrepro.guard import patched_functions

    import matplotlib
    import numpy as np

    return {
        "torch": _torch_state(),
        "numpy_rng": np.random.get_state(),
        "python_rng": random.getstate(),
        "rc": dict(matplotlib.rcParams),
        "environ": dict(os.environ),
        "cwd": os.getcwd(),
        "path": list(sys.path),
        "argv": list(sys.argv),
        "warnings": list(warnings.filters),
        "modules": dict(sys.modules),
        "attrs": [(obj, dict(vars(obj))) for obj in _watched_objects()],
        # What OfflineGuard patches outside the watched objects (socket.getaddrinfo, torch.load, ...).
        "guarded": [(owner, name, getattr(owner, name)) for owner, name in patched_functions()],
    }


def _restore_attrs(obj: Any, saved: dict[str, Any]) -> None:
    current = vars(obj)
    if isinstance(obj, type):  # a class: its __dict__ is read-only, use setattr/delattr
        for key in [k for k in current if k not in saved]:
            delattr(obj, key)
        for key, value in saved.items():
            if current.get(key, _MISSING) is not value and key not in ("__dict__", "__weakref__"):
                setattr(obj, key, value)
        return
    for key in [k for k in current if k not in saved]:
        del current[key]
    for key, value in saved.items():
        if current.get(key, _MISSING) is not value:
            current[key] = value


_MISSING = object()


def restore(state: dict[str, Any]) -> None:
    """Put the process back into ``state`` (see the module docstring for the list)."""
    import random
    import warnings

    import matplotlib
    import numpy as np

    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
    for name in [n for n in sys.modules if (n == "litrepro" or n.startswith("litrepro.")) and n not in state["modules"]]:
        del sys.modules[name]
    for name, module in state["modules"].items():
        if sys.modules.get(name, _MISSING) is not module:
            sys.modules[name] = module
    for obj, saved in state["attrs"]:
        _restore_attrs(obj, saved)
    for owner, name, value in state["guarded"]:
        if getattr(owner, name) is not value:
            setattr(owner, name, value)
    _restore_torch(state["torch"])
    np.random.set_state(state["numpy_rng"])
    random.setstate(state["python_rng"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dict(matplotlib.rcParams) != state["rc"]:
            matplotlib.rcParams.clear()
            matplotlib.rcParams.update(state["rc"])
    os.environ.clear()
    os.environ.update(state["environ"])
    os.chdir(state["cwd"])
    sys.path[:] = state["path"]
    sys.argv[:] = state["argv"]
    warnings.filters[:] = state["warnings"]
    if hasattr(warnings, "_filters_mutated"):
        warnings._filters_mutated()


def bootstrap(preload: bool = True) -> None:
    """Once per kernel: import what the notebooks use, pay torch's one-off set-up, snapshot the state."""
    global _SNAPSHOT
    if preload:
        import matplotlib  # noqa: F401
        import pandas  # noqa: F401
        import torch

        # Every litrepro module the method notebooks import but those in NOT_PRELOADED
        # (tests/test_kernels.py checks the list is complete): one a notebook imports first is dropped
        # and re-imported by every notebook.
        import litrepro.guard  # noqa: F401
        import litrepro.params  # noqa: F401
        import litrepro.plotting  # noqa: F401
        import litrepro.recorded  # noqa: F401
        import litrepro.report  # noqa: F401
        import litrepro.seeding  # noqa: F401
        import litrepro.rlbp.experiment  # noqa: F401
        import litrepro.rlbp.fixtures  # noqa: F401
        import litrepro.rlbp.plots  # noqa: F401
        import litrepro.waypoint.calibration  # noqa: F401
        import litrepro.waypoint.effect_study  # noqa: F401
        import litrepro.waypoint.experiment  # noqa: F401
        import litrepro.waypoint.model  # noqa: F401
        import litrepro.waypoint.plots  # noqa: F401
        import litrepro.waypoint.views  # noqa: F401

        # The first call imports torch._inductor (slow); pay it now, then put the flag back.
        was = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True)
        torch.use_deterministic_algorithms(was)
    _SNAPSHOT = snapshot()
    # Move everything imported so far out of the collector's view: ``%reset -f`` runs a full
    # ``gc.collect()``, which would otherwise walk torch's and pandas' objects before every notebook.
    gc.collect()
    gc.freeze()


def prepare(result_path: str) -> None:
    """Before each notebook in a reused kernel: empty namespace, restored state, counter at 1."""
    from IPython import get_ipython

    shell = get_ipython()
    # What ``%reset -f`` does, but in a new history session with the execution counter at 1, as in a
    # fresh kernel (the same session with the counter rewound makes IPython print a history error).
    shell.reset(new_session=True)
    if _SNAPSHOT is None:
        bootstrap(preload=False)
    restore(_SNAPSHOT)
    os.environ[_RESULT_ENV] = result_path
