"""Reading one seed's result: ``seed-<N>.json`` parsed and shape-checked, nothing else.

Below both :mod:`litrepro.runner` (which writes results and checks their
freshness) and :mod:`litrepro.summary` (which aggregates them): it imports only
:mod:`litrepro.outdir` and :mod:`litrepro.errors`, so neither of those two
modules needs the other to read a result.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable

from litrepro import outdir
from litrepro.errors import UsageError

_SEED_JSON = re.compile(r"seed-([0-9]{1,10})\.json")


def seed_result_names(names: Iterable[str]) -> list[str]:
    """The ``seed-<N>.json`` names among ``names``, sorted by seed.

    The one definition of which seeds a folder holds: the runner's
    ``summary.json`` and the summary notebook
    (:func:`litrepro.summary.load_seed_results`) both use it, so they always
    cover the same seeds.
    """
    found = [(int(m.group(1)), n) for n in names if (m := _SEED_JSON.fullmatch(n))]
    return [n for _, n in sorted(found)]


def parse_result(data: bytes | None) -> dict[str, Any] | None:
    """A seed's JSON when it is an object with the keys a summary needs, else None."""
    if data is None:
        return None
    try:
        result = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not (isinstance(result, dict) and isinstance(result.get("provenance"), dict)
            and isinstance(result.get("metrics"), dict) and isinstance(result.get("checks"), dict)):
        return None
    return result


def read_result(path: Path) -> dict[str, Any] | None:
    """A seed's JSON at ``path`` (a regular file, opened without following a link or blocking), else None."""
    try:
        return parse_result(outdir.read_plain(Path(path)))
    except (OSError, UsageError):
        return None


def committed_blobs(folder: Path) -> dict[str, str]:
    """``{file name: git blob id}`` of the files git tracks directly in ``folder`` (empty outside a repository)."""
    import subprocess

    try:
        listing = subprocess.run(["git", "-C", str(folder), "ls-files", "-s", "-z", "--", "."], capture_output=True,
                                 timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    blobs = {}
    for item in listing.split(b"\0"):
        meta, _, path = item.partition(b"\t")
        if path and b"/" not in path and len(meta.split()) >= 2:
            blobs[path.decode("utf-8", "replace")] = meta.split()[1].decode()
    return blobs


def journalled_seed_results(out: "outdir.OutDir", rel: str, committed: dict[str, str] | None = None
                            ) -> tuple[list[tuple[str, bytes | None]], list[str], list[str]]:
    """The seed files of ``out/rel`` that a summary may read, and the names it must ignore.

    A summary reads only a seed JSON that the journal (``.litrepro/OWNER``) records with the sha256 it has
    now: a file another process dropped into the folder, or one edited since the runner wrote it, is
    ignored (issue 33).  ``committed`` (``{name: git blob id}``, :func:`committed_blobs`): a file whose bytes
    equal the blob git has committed for it is read too, as the runner adopts such files (a checkout of
    ``rendered/`` after the last run).  Returns ``([(name, bytes)], [ignored names], [one line per refused file])``; a folder without a journal (a
    committed ``rendered/`` in a fresh clone, before a run adopts it) has every seed file read.
    """
    names = seed_result_names(out.listdir(rel))
    journal = out.has_record()
    owned = out.record()[0] if journal else {}
    kept, ignored, refused = [], [], []
    for name in names:
        path = f"{rel}/{name}" if rel else name
        try:
            data = out.read(path)
        except UsageError as err:                # a link, FIFO or device: refused, never opened
            refused.append(f"{err}; left out of the summary")
            continue
        if not journal or (data is not None and owned.get(path) == outdir.sha256_bytes(data)) or (
                data is not None and committed and committed.get(name) == outdir._git_blob(data)):
            kept.append((name, data))
        else:
            ignored.append(name)
    return kept, ignored, refused


def ignored_line(folder: "Path | str", ignored: list[str]) -> str:
    """The one warning line naming the seed files a summary ignored."""
    shown = ", ".join(ignored[:10]) + (f" and {len(ignored) - 10} more" if len(ignored) > 10 else "")
    return (f"WARNING: {outdir.show(folder)}: {len(ignored)} seed file(s) not recorded by this folder's journal "
            f"with their current sha256, ignored by the summary: {shown}")

