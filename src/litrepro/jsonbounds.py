"""Reading a JSON file the tools did not write themselves: bounded in size and nesting, never a traceback.

``json.loads`` recurses once per nesting level, so a 200 KB file nested 100,000 deep ends in a
``RecursionError``; a huge file fills memory.  :func:`read` and :func:`loads` refuse both before
parsing, with one line naming the file (:class:`JSONBoundsError`, a :class:`~litrepro.errors.UsageError`:
exit status 2).  The committed JSON nests at most 6 deep and is at most a few hundred KB, far
below :data:`MAX_DEPTH` and :data:`MAX_BYTES`.

Files are opened without following a link and without blocking (a FIFO is refused, never read),
and must be regular files.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from litrepro.errors import UsageError

#: Deepest nesting of arrays and objects accepted (the committed JSON nests 6 deep).
MAX_DEPTH = 64
#: Largest JSON file accepted, in bytes (the committed JSON is under 1 MB).
MAX_BYTES = 64 * 1024 * 1024

_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)


class JSONBoundsError(UsageError):
    """A JSON file that is missing, not a regular file, too large, too deep or malformed: one line."""


def depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` in ``text``, outside strings, in one linear pass."""
    level = deepest = 0
    for m in _TOKENS.finditer(text):
        ch = m.group(0)
        if ch in "[{":
            level += 1
            deepest = max(deepest, level)
        elif ch in "]}":
            level -= 1
    return deepest


def loads(text: str | bytes, where: str, *, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_BYTES) -> Any:
    """``json.loads(text)``, refused in one line naming ``where`` when too large, too deep or malformed."""
    if len(text) > max_bytes:
        raise JSONBoundsError(f"{where}: larger than {max_bytes} bytes; refused")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as err:
            raise JSONBoundsError(f"{where}: not UTF-8 ({err.reason} at byte {err.start})") from None
    found = depth(text)
    if found > max_depth:
        raise JSONBoundsError(f"{where}: nested {found} deep, more than the {max_depth} allowed; refused")
    try:
        return json.loads(text)
    except RecursionError:                                  # unreachable below MAX_DEPTH; kept as a net
        raise JSONBoundsError(f"{where}: nested too deep; refused") from None
    except ValueError as err:
        raise JSONBoundsError(f"{where}: not valid JSON ({' '.join(str(err).split())[:200]})") from None


def read_bytes(path: Path | str, where: str | None = None, *, max_bytes: int = MAX_BYTES) -> bytes:
    """A regular file's bytes, opened with ``O_NOFOLLOW|O_NONBLOCK``: a link, FIFO, device or folder is refused."""
    where = where or str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise JSONBoundsError(f"{where}: missing") from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise JSONBoundsError(f"{where}: is a symlink, not a regular file; refused") from None
        raise JSONBoundsError(f"{where}: cannot be read ({err.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise JSONBoundsError(f"{where}: not a regular file; refused")
        if info.st_size > max_bytes:
            raise JSONBoundsError(f"{where}: larger than {max_bytes} bytes; refused")
        chunks, total = [], 0
        while chunk := os.read(fd, 1 << 20):
            total += len(chunk)
            if total > max_bytes:
                raise JSONBoundsError(f"{where}: larger than {max_bytes} bytes; refused")
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as err:
        raise JSONBoundsError(f"{where}: cannot be read ({err.strerror})") from None
    finally:
        os.close(fd)


def read(path: Path | str, where: str | None = None, *, max_depth: int = MAX_DEPTH, max_bytes: int = MAX_BYTES) -> Any:
    """The JSON in the regular file ``path``, bounded (see :func:`loads`); errors name ``where`` (default the path)."""
    where = where or str(path)
    return loads(read_bytes(path, where, max_bytes=max_bytes), where, max_depth=max_depth, max_bytes=max_bytes)
