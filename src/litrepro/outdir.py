"""The output folder and the runner's own state inside it.

A run writes its results into ``--out`` and keeps everything else in one
folder it owns, ``<out>/.litrepro/``:

* ``OWNER``, a marker naming the folder as litrepro's;
* ``lock``, the run lock (``flock``, released when the process dies);
* ``scratch/<pid>-<12 hex>/``, one folder per run, registered by a ``RUN`` file
  holding that same name; every worker, kernel and Dask worker of the run keeps
  its temporary files there.

The runner deletes nothing else, ever.  A killed run's scratch is removed by
the next run on the same ``--out``, under the lock, and only entries of
``<out>/.litrepro/scratch/`` whose name has the registered form and whose
``RUN`` file names them; no pattern is ever matched over the user's tree, so a
run on a parent folder never touches a nested run's scratch.  Atomic-write
temporary files (:mod:`litrepro.atomic`) are removed by the writer itself.

``--out`` must be new, empty, or a litrepro output folder (it has
``.litrepro/OWNER``, holds only names litrepro writes, or is the project's
``rendered/``); anything else is
refused before anything is written, so ``--out .`` or ``--out ~`` cannot mix
results into a user's files.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from litrepro.errors import RunLocked, UsageError

STATE = ".litrepro"
MARKER = "OWNER"
MARKER_TEXT = ("This folder belongs to litrepro: the run lock and the per-run scratch of\n"
               "`python -m litrepro run --out <the folder above>`. Safe to delete when no run is active.\n")
RUN_FILE = "RUN"
_RUN_NAME = re.compile(r"[0-9]{1,10}-[0-9a-f]{12}")
#: Names litrepro itself writes at the top of an output folder (plus the method folders).
OWN_NAMES = frozenset({STATE, ".litrepro.lock", "summary.ipynb", "summary.html", "sweep_summary.ipynb",
                       "sweep_summary.html", "benchmarks.json"})


def _method_names() -> set[str]:
    from litrepro import methods

    return set(methods.METHODS)


def inspect(out: Path) -> None:
    """Refuse an ``out`` that is a file, or non-empty and not a litrepro output folder (reads only)."""
    if not out.exists():
        return
    if not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a folder")
    if (out / STATE / MARKER).is_file():
        return
    from litrepro.paths import RENDERED

    if out.resolve() == RENDERED.resolve():   # the project's own output folder, whatever else it holds
        return
    try:
        names = sorted(p.name for p in out.iterdir())
    except OSError as err:
        raise UsageError(f"--out {out}: cannot list the folder ({err.strerror})") from None
    foreign = [n for n in names if n not in OWN_NAMES and n not in _method_names()]
    if foreign:
        raise UsageError(f"--out {out}: not empty and not a litrepro output folder (it holds {foreign[0]!r}); "
                         "use a new or empty folder")


def claim(out: Path) -> Path:
    """Create ``out`` and ``out/.litrepro`` with its marker; returns the state folder."""
    state = out / STATE
    try:
        state.mkdir(parents=True, exist_ok=True)
        marker = state / MARKER
        if not marker.is_file():
            marker.write_text(MARKER_TEXT)
        (state / "scratch").mkdir(exist_ok=True)
    except OSError as err:
        raise UsageError(f"--out {out}: not a writable folder ({err.strerror})") from None
    return state


@contextmanager
def lock(out: Path) -> Iterator[None]:
    """An exclusive, non-blocking lock on ``out/.litrepro/lock`` (released when the process dies)."""
    state = claim(out)
    handle = open(state / "lock", "w")
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


def _is_registered(entry: Path) -> bool:
    if not (entry.is_dir() and not entry.is_symlink() and _RUN_NAME.fullmatch(entry.name)):
        return False
    try:
        return (entry / RUN_FILE).read_text().strip() == entry.name
    except OSError:
        return False


def _remove_run_folder(entry: Path) -> None:
    """Remove a registered run folder, and the short IPC socket folders its kernels listed in it."""
    import tempfile

    from litrepro.kernels import IPC_FALLBACK_LIST, IPC_FALLBACK_PREFIX

    temp = Path(tempfile.gettempdir())
    for listing in entry.rglob(IPC_FALLBACK_LIST):
        try:
            lines = listing.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            folder = Path(line.strip())
            if folder.parent == temp and folder.name.startswith(IPC_FALLBACK_PREFIX) and folder.is_dir():
                shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(entry, ignore_errors=True)


def remove_stale_scratch(out: Path) -> list[Path]:
    """Delete killed runs' scratch folders; call under :func:`lock`.  Touches nothing but registered entries."""
    state = out / STATE
    if not (state / MARKER).is_file():
        return []
    scratch = state / "scratch"
    removed = []
    for entry in sorted(scratch.iterdir()) if scratch.is_dir() else []:
        if _is_registered(entry):
            _remove_run_folder(entry)
            removed.append(entry)
    return removed


def new_run_scratch(out: Path) -> Path:
    """This run's scratch folder, ``out/.litrepro/scratch/<pid>-<hex>``, registered; call under :func:`lock`."""
    name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    folder = out / STATE / "scratch" / name
    folder.mkdir(parents=True)
    (folder / RUN_FILE).write_text(name + "\n")
    return folder


def remove_run_scratch(folder: Path) -> None:
    if _is_registered(folder):
        _remove_run_folder(folder)
