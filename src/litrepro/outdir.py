"""The output folder, the runner's own record of it, and every file operation inside it.

A run writes its results into ``--out`` and keeps everything else in one
private folder it owns, ``<out>/.litrepro/`` (mode 0700, owned by the user
running litrepro):

* ``OWNER``, the runner's record: a journal, one JSON object a line, of every
  file the runner wrote into ``--out`` with its sha256 (``{"file", "sha256"}``),
  of every temporary file as soon as it is created, with its identity
  (``{"partial", "dev", "ino", "size"}``), and of every file it removed or no
  longer tracks (``{"gone"}``).  Lines are appended with ``O_APPEND``, one
  ``write`` each, so parallel workers can record their own files; each run
  compacts the journal under the lock.
* ``lock``, the run lock (``flock``, released when the process dies);
* ``scratch/<pid>-<12 hex>/``, one folder per run, registered by a ``RUN`` file
  holding that same name; every worker, kernel and Dask worker of the run keeps
  its temporary files there (``TMPDIR`` points into it);
* ``cache/``, matplotlib's and IPython's configuration folders for the kernels.

Rules, all enforced here (:class:`OutDir`):

* Every file and folder inside ``--out`` is reached with ``openat`` from a
  checked folder descriptor with ``O_NOFOLLOW``: a symlink (or a file that is
  not a regular file, e.g. a FIFO or a device, where a file is expected; a file
  where a folder is expected) is refused with one line, never followed.  New
  files are created with ``O_CREAT|O_EXCL`` under a fresh name and renamed into
  place; the lock is opened without truncation.
* A file is overwritten or deleted only if ``OWNER`` lists it with the sha256 it
  has now.  Anything else is refused with one line naming the file.
* After a SIGKILL, the next run (under the lock) removes the temporary files
  that ``OWNER`` lists as ``partial`` and that never became ``file`` entries,
  but only a name of the runner's own pattern (``.<name>.<12 hex>.tmp``) that
  is still the very file it created: a regular file of this user, one link,
  with the device and inode recorded at creation and at most the recorded
  size.  A journal line cannot name anything else into deletion.  (A SIGKILL in
  the microseconds between creating a temporary file and recording it leaves
  that hidden ``.tmp`` file in place: it is never deleted without that proof.)
  The registered scratch folders of killed runs go too; nothing else.
* ``OWNER`` and ``lock`` must be regular files of this user with one link: a
  hard link (``cp -al`` of an output folder) would let a run write into
  another folder's record, so it is refused with one line.

No other user controls ``--out`` (issue 33):

* ``--out``, every folder above it and every folder inside it must belong to this user (folders
  above it may also belong to root) and must not be writable by group or others unless sticky
  (``/tmp``); a symlink in the path must be this user's or root's (:func:`check_path`).  So no other
  user can create, rename or swap any folder on the way to a file the run writes.
* A process opens ``--out`` once and pins its identity (device and inode; passed to the run's
  workers in ``$LITREPRO_OUT_IDENTITY``; :func:`pin`): every later open of the same path that finds
  another folder is refused, and an :class:`OutDir` keeps working on the folder it opened, so a swap of
  the path mid-run cannot redirect its writes.

``--out`` must be new, empty, or a litrepro output folder: one with a
``.litrepro/OWNER`` record, or the project's own ``rendered/``.  A fresh clone
has no record for ``rendered/`` (``.litrepro/`` is git-ignored), so there the
runner adopts exactly the files git tracks whose bytes equal the committed
blob (``git ls-files -s``): git holds a copy of each, so replacing them loses
nothing.  Anything else is refused before anything is written.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

from litrepro.errors import RunLocked, UsageError

STATE = ".litrepro"
MARKER = "OWNER"
LOCK = "lock"
RUN_FILE = "RUN"
SCRATCH = "scratch"
CACHE = "cache"
_RUN_NAME = re.compile(r"[0-9]{1,10}-[0-9a-f]{12}")
#: The runner's temporary files: ``.<target name, at most 200 characters>.<12 hex>.tmp``.
_TMP_NAME = re.compile(r"\.[^/]{1,200}\.[0-9a-f]{12}\.tmp")
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: Linux limits: a path of at most 4095 bytes, a name of at most 255.
MAX_PATH_BYTES = 4095
MAX_NAME_BYTES = 255
#: Reading an existing output is bounded: a seed JSON or notebook larger than this is not ours.
MAX_READ_BYTES = 512 * 1024 * 1024


class Refused(UsageError):
    """A file or folder inside ``--out`` that the runner will not follow, overwrite or delete."""


def show(path: Path | str) -> str:
    """A path for a one-line message: control characters (a newline) escaped."""
    text = str(path)
    return text if text.isprintable() else ascii(text)[1:-1]


def absolute(out: Path | str) -> Path:
    """``--out`` as an absolute path (symlinks above it kept), checked for what Linux and one-line messages allow."""
    text = os.fsdecode(out)
    if not text:
        raise UsageError("--out: empty path")
    if any(not ch.isprintable() for ch in text):
        raise UsageError(f"--out {show(text)}: control characters (a newline, a tab) are not allowed in the path")
    path = Path(os.path.abspath(text))
    raw = os.fsencode(str(path))
    if len(raw) > MAX_PATH_BYTES or any(len(os.fsencode(p)) > MAX_NAME_BYTES for p in path.parts):
        raise UsageError(f"--out: the path is too long ({len(raw)} bytes; Linux allows {MAX_PATH_BYTES}, "
                         f"{MAX_NAME_BYTES} per name)")
    return path


def is_temporary_name(name: str) -> bool:
    """Whether ``name`` has the pattern of the runner's own temporary files (``.<name>.<12 hex>.tmp``)."""
    return _TMP_NAME.fullmatch(name) is not None


def _check_private(info: os.stat_result, shown: Path) -> None:
    """Refuse a journal or lock that is not a regular file of this user with exactly one link."""
    if not stat.S_ISREG(info.st_mode):
        raise Refused(f"{show(shown)}: is {_kind(info.st_mode)}, not a regular file; refused")
    if info.st_uid != os.geteuid():
        raise Refused(f"{show(shown)}: belongs to another user (uid {info.st_uid}); refused")
    if info.st_nlink != 1:
        raise Refused(f"{show(shown)}: has {info.st_nlink} hard links (a copy made with cp -al?); litrepro does not "
                      f"write through a shared file: give this folder its own copy (cp {shown.name} {shown.name}.own "
                      f"&& mv {shown.name}.own {shown.name}) or use another --out")


def _kind(mode: int) -> str:
    return ("a symlink" if stat.S_ISLNK(mode) else "a folder" if stat.S_ISDIR(mode)
            else "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a regular file" if stat.S_ISREG(mode) else "special")


def dumps_json(obj) -> str:
    """Canonical JSON (see :func:`litrepro.atomic.dumps_json`)."""
    from litrepro.atomic import dumps_json as dumps

    return dumps(obj)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


IDENTITY_ENV = "LITREPRO_OUT_IDENTITY"
_PINNED: dict[str, tuple[int, int]] = {}


def _check_folder(info: os.stat_result, shown: Path | str, what: str, root_ok: bool = False) -> None:
    """Refuse a folder another user owns, or one writable by group or others that is not sticky."""
    owners = (os.geteuid(), 0) if root_ok else (os.geteuid(),)
    if info.st_uid not in owners:
        raise Refused(f"{show(shown)}: {what} belongs to another user (uid {info.st_uid}), who could replace what "
                      "litrepro writes there; refused (use a folder of your own)")
    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        raise Refused(f"{show(shown)}: {what} is writable by group or others (mode "
                      f"{stat.S_IMODE(info.st_mode):04o}), who could replace what litrepro writes there; refused "
                      f"(chmod go-w {show(shown)})")


def check_path(out: Path | str) -> None:
    """Refuse an ``--out`` that another user controls: see the module docstring (reads only)."""
    path = absolute(out)
    me = os.geteuid()
    current = Path(path.anchor)
    for part in path.parts[1:]:                      # the path as given: its links and the folders holding them
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            break
        except OSError as err:
            raise UsageError(f"--out {show(path)}: cannot check {show(current)} ({err.strerror})") from None
        if stat.S_ISLNK(info.st_mode) and info.st_uid not in (me, 0):
            raise Refused(f"--out {show(path)}: {show(current)} is a symlink of another user (uid {info.st_uid}); "
                          "refused")
        if stat.S_ISDIR(info.st_mode) and current != path:
            _check_folder(info, current, f"a folder above --out {show(path)}", root_ok=True)
    real = Path(os.path.realpath(path))
    chain = [*reversed(real.parents), real]
    for folder in chain:
        try:
            info = os.stat(folder)
        except FileNotFoundError:
            break                                        # created by the run, as this user
        except OSError as err:
            raise UsageError(f"--out {show(path)}: cannot check {show(folder)} ({err.strerror})") from None
        if folder == real:
            if stat.S_ISDIR(info.st_mode):
                _check_folder(info, path, "--out")
        else:
            _check_folder(info, folder, f"a folder above --out {show(path)}", root_ok=True)


def _expected(key: str) -> tuple[int, int] | None:
    if key in _PINNED:
        return _PINNED[key]
    dev, _, rest = os.environ.get(IDENTITY_ENV, "").partition(":")
    ino, _, where = rest.partition(":")
    if where == key and dev.isdigit() and ino.isdigit():
        return int(dev), int(ino)
    return None


def _pin(root: Path, info: os.stat_result) -> None:
    """Refuse ``root`` when the run pinned another folder at that path (see :func:`pin`)."""
    expected = _expected(str(root))
    if expected is not None and expected != (info.st_dev, info.st_ino):
        raise Refused(f"--out {show(root)}: was replaced by another folder or a link after this run opened it; "
                      "refused (nothing more is written through that path)")


def pin(out: Path | str) -> None:
    """Pin the folder now at ``out`` for the rest of the run: in this process and, through
    ``$LITREPRO_OUT_IDENTITY``, in its workers and kernels; any later open that finds another folder there
    is refused.  :func:`unpin` ends it (the run's end)."""
    root = absolute(out)
    folder = OutDir(root)
    fd = folder._root_fd()
    try:
        info = os.fstat(fd)
    finally:
        os.close(fd)
    _PINNED[str(root)] = (info.st_dev, info.st_ino)
    os.environ[IDENTITY_ENV] = f"{info.st_dev}:{info.st_ino}:{root}"


def unpin(out: Path | str) -> None:
    root = str(absolute(out))
    _PINNED.pop(root, None)
    if os.environ.get(IDENTITY_ENV, "").endswith(f":{root}"):
        del os.environ[IDENTITY_ENV]


class OutDir:
    """One ``--out`` folder; every operation walks from its descriptor without following links.

    The folder is opened once, checked (:func:`check_path`) and compared with the run's pin; later operations of this object
    use that descriptor, so a rename or a symlink put in place of the path cannot redirect them.
    """

    def __init__(self, root: Path | str) -> None:
        self.root = absolute(root)
        self._fd: int | None = None

    def __del__(self) -> None:
        if getattr(self, "_fd", None) is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass

    # ------------------------------------------------------------------ folders
    def _root_fd(self) -> int:
        if self._fd is None:
            check_path(self.root)
            try:
                fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError as err:
                raise UsageError(f"--out {show(self.root)}: not a usable folder ({err.strerror})") from None
            try:
                info = os.fstat(fd)
                _check_folder(info, self.root, "--out")
                _pin(self.root, info)
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
        return os.dup(self._fd)

    def _open_dir(self, parts: Iterable[str], create: bool, mode: int = 0o755) -> int | None:
        """A descriptor of ``root/parts`` reached without following links; None when missing and not ``create``."""
        fd = self._root_fd()
        where = self.root
        try:
            for part in parts:
                if part in ("", ".", "..") or "/" in part:
                    raise Refused(f"{show(where / part)}: not a plain name")
                where = where / part
                try:
                    nxt = os.open(part, _DIR, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        os.close(fd)
                        return None
                    try:
                        os.mkdir(part, mode, dir_fd=fd)
                    except FileExistsError:
                        pass
                    nxt = os.open(part, _DIR, dir_fd=fd)
                except OSError as err:
                    if err.errno in (errno.ELOOP, errno.ENOTDIR):
                        kind = _kind(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode)
                        raise Refused(f"{show(where)}: is {kind}, not a folder; litrepro does not follow or "
                                      "replace it (move it away or use another --out)") from None
                    raise
                os.close(fd)
                fd = nxt
                _check_folder(os.fstat(fd), where, "a folder inside --out")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def state_fd(self, create: bool = True) -> int | None:
        """``.litrepro``: a folder (not a link) owned by this user, made private (0700)."""
        fd = self._open_dir([STATE], create, 0o700)
        if fd is None:
            return None
        info = os.fstat(fd)
        if info.st_uid != os.geteuid():
            os.close(fd)
            raise Refused(f"{show(self.root / STATE)}: belongs to another user; refused")
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.fchmod(fd, 0o700)
        return fd

    def state_path(self, *parts: str) -> Path:
        """A path inside the (checked, private) state folder, creating the folders."""
        fd = self.state_fd()
        os.close(fd)
        if parts:
            inner = self._open_dir([STATE, *parts], True, 0o700)
            os.close(inner)
        return self.root.joinpath(STATE, *parts)

    # ------------------------------------------------------------------ the record
    def _journal(self, entry: dict) -> None:
        fd = self.state_fd()
        try:
            handle = os.open(MARKER, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
                             | os.O_NONBLOCK, 0o600, dir_fd=fd)
        except OSError as err:
            raise Refused(f"{show(self.root / STATE / MARKER)}: cannot record ({err.strerror})") from None
        finally:
            os.close(fd)
        try:
            _check_private(os.fstat(handle), self.root / STATE / MARKER)
            os.write(handle, (json.dumps(entry, sort_keys=True) + "\n").encode())
        finally:
            os.close(handle)

    def _read_record_text(self) -> str | None:
        fd = self.state_fd(create=False)
        if fd is None:
            return None
        try:
            data = self._read_at(fd, MARKER, self.root / STATE / MARKER, private=True)
        finally:
            os.close(fd)
        return None if data is None else data.decode("utf-8", errors="replace")

    def has_record(self) -> bool:
        return self._read_record_text() is not None

    def record(self) -> tuple[dict[str, str], set[str]]:
        """``({path: sha256} of the files the runner wrote, {temporary files not known to be gone})``."""
        files, partial = self._entries()
        return files, set(partial)

    def _entries(self) -> tuple[dict[str, str], dict[str, dict[str, int] | None]]:
        """``({path: sha256}, {temporary path: its identity {dev, ino, size}, or None when not recorded}})``."""
        files: dict[str, str] = {}
        partial: dict[str, dict[str, int] | None] = {}
        for line in (self._read_record_text() or "").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue                       # the old one-paragraph marker text, or a torn line
            if not isinstance(entry, dict):
                continue
            if isinstance(entry.get("file"), str) and isinstance(entry.get("sha256"), str):
                files[entry["file"]] = entry["sha256"]
                partial.pop(entry["file"], None)
            elif isinstance(entry.get("partial"), str):
                ident = {k: entry.get(k) for k in ("dev", "ino", "size")}
                ok = all(isinstance(v, int) and not isinstance(v, bool) for v in ident.values())
                partial[entry["partial"]] = ident if ok else partial.get(entry["partial"])
            elif isinstance(entry.get("gone"), str):
                files.pop(entry["gone"], None)
                partial.pop(entry["gone"], None)
        return files, partial

    def claim(self) -> None:
        """Create ``out``, its private state folder and the record (a file, possibly empty)."""
        check_path(self.root)
        try:
            missing = [p for p in (self.root, *self.root.parents) if not os.path.lexists(p)]
            for folder in reversed(missing):        # never writable by group or others, whatever the umask
                try:
                    os.mkdir(folder, 0o755)
                except FileExistsError:
                    pass
            if not self.root.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, "not a folder")
        except OSError as err:
            raise UsageError(f"--out {show(self.root)}: not a writable folder ({err.strerror})") from None
        fd = self.state_fd()
        try:
            handle = os.open(MARKER, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
                             | os.O_NONBLOCK, 0o600, dir_fd=fd)
            info = os.fstat(handle)
            os.close(handle)
        except OSError as err:
            raise Refused(f"{show(self.root / STATE / MARKER)}: not a regular file or not writable "
                          f"({err.strerror}); refused") from None
        finally:
            os.close(fd)
        _check_private(info, self.root / STATE / MARKER)
        for name in (SCRATCH, CACHE):
            os.close(self._open_dir([STATE, name], True, 0o700))

    # ------------------------------------------------------------------ files
    @staticmethod
    def _split(rel: str) -> tuple[list[str], str]:
        parts = rel.split("/")
        return parts[:-1], parts[-1]

    @staticmethod
    def _read_at(dir_fd: int, name: str, shown: Path, private: bool = False) -> bytes | None:
        """A regular file's bytes (None when missing); a link, FIFO or device is refused, never opened blocking.

        ``private`` (the journal): also refused unless this user's, with one link.
        """
        try:
            handle = os.open(name, _READ, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError as err:
            if err.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
                kind = _kind(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
                raise Refused(f"{show(shown)}: is {kind}, not a regular file; refused") from None
            raise
        try:
            info = os.fstat(handle)
            if not stat.S_ISREG(info.st_mode):
                raise Refused(f"{show(shown)}: is {_kind(info.st_mode)}, not a regular file; refused")
            if private:
                _check_private(info, shown)
            if info.st_size > MAX_READ_BYTES:
                raise Refused(f"{show(shown)}: larger than {MAX_READ_BYTES} bytes; not a litrepro output")
            chunks, total = [], 0
            while True:
                chunk = os.read(handle, 1 << 20)
                if not chunk:
                    break
                total += len(chunk)
                if total > MAX_READ_BYTES:
                    raise Refused(f"{show(shown)}: larger than {MAX_READ_BYTES} bytes; not a litrepro output")
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(handle)

    def read(self, rel: str) -> bytes | None:
        """The bytes of ``out/rel`` (None when it or a folder above it is missing); see :meth:`_read_at`."""
        folders, name = self._split(rel)
        fd = self._open_dir(folders, create=False)
        if fd is None:
            return None
        try:
            return self._read_at(fd, name, self.root / rel)
        finally:
            os.close(fd)

    def is_file(self, rel: str) -> bool:
        """Whether ``out/rel`` exists; a link, FIFO, device or folder there is refused."""
        folders, name = self._split(rel)
        fd = self._open_dir(folders, create=False)
        if fd is None:
            return False
        try:
            mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return False
        finally:
            os.close(fd)
        if not stat.S_ISREG(mode):
            raise Refused(f"{show(self.root / rel)}: is {_kind(mode)}, not a regular file; refused")
        return True

    def listdir(self, rel: str) -> list[str]:
        """The names in the folder ``out/rel`` (empty when missing), reached without following links."""
        fd = self._open_dir(rel.split("/") if rel else [], create=False)
        if fd is None:
            return []
        try:
            return sorted(os.listdir(fd))
        finally:
            os.close(fd)

    def _check_ours(self, dir_fd: int, rel: str, name: str, owned: dict[str, str] | None = None) -> bool:
        """Whether ``rel`` exists; refuse it unless it is a regular file recorded with its current sha256.

        The record is read only when the file exists (``owned``: already read).
        """
        try:
            mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return False
        if not stat.S_ISREG(mode):
            raise Refused(f"{show(self.root / rel)}: is {_kind(mode)}, not a file litrepro wrote; refused "
                          "(move it away or use another --out)")
        data = self._read_at(dir_fd, name, self.root / rel)
        if owned is None:
            owned, _ = self.record()
        if data is not None and owned.get(rel) != sha256_bytes(data):
            raise Refused(f"{show(self.root / rel)}: not written by litrepro (no entry with its sha256 in "
                          f"{STATE}/{MARKER}); litrepro does not replace or delete it (move it away or use "
                          "another --out)")
        return data is not None

    def check_replaceable(self, rels: Iterable[str]) -> None:
        """Refuse, before anything is written, a target that exists and is not the runner's own."""
        owned, _ = self.record()
        for rel in rels:
            folders, name = self._split(rel)
            fd = self._open_dir(folders, create=False)
            if fd is None:
                continue
            try:
                self._check_ours(fd, rel, name, owned)
            finally:
                os.close(fd)

    def write(self, rel: str, data: bytes) -> None:
        """Publish ``data`` as ``out/rel`` atomically: a fresh ``O_EXCL`` file, fsync, rename over the old one.

        The old file must be the runner's own (see :meth:`_check_ours`).  The
        temporary file is recorded as ``partial``, with its device, inode and
        final size, as soon as it exists and before a byte is written, so the
        next run removes what a SIGKILL leaves, and nothing else (see
        :meth:`remove_partials`).
        """
        folders, name = self._split(rel)
        fd = self._open_dir(folders, create=True)
        try:
            self._check_ours(fd, rel, name)
            tmp = f".{name[:200]}.{uuid.uuid4().hex[:12]}.tmp"
            tmp_rel = "/".join([*folders, tmp])
            handle = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                             dir_fd=fd)
            try:
                try:
                    info = os.fstat(handle)
                    # Its identity, before a byte is written: the only proof a later clean-up accepts.
                    self._journal({"partial": tmp_rel, "dev": info.st_dev, "ino": info.st_ino, "size": len(data)})
                    view = memoryview(data)
                    while view:
                        view = view[os.write(handle, view):]
                    os.fsync(handle)
                finally:
                    os.close(handle)
                os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
            except BaseException:
                try:
                    os.unlink(tmp, dir_fd=fd)
                except OSError:
                    pass
                self._journal({"gone": tmp_rel})
                raise
            self._journal({"file": rel, "sha256": sha256_bytes(data)})
            self._journal({"gone": tmp_rel})
        finally:
            os.close(fd)

    def remove(self, rel: str) -> bool:
        """Delete ``out/rel`` if it is the runner's own (else refused); False when it does not exist."""
        folders, name = self._split(rel)
        fd = self._open_dir(folders, create=False)
        if fd is None:
            return False
        try:
            if not self._check_ours(fd, rel, name):
                return False
            os.unlink(name, dir_fd=fd)
            self._journal({"gone": rel})
            return True
        finally:
            os.close(fd)

    def remove_partials(self) -> list[str]:
        """Delete the temporary files of killed runs that ``OWNER`` lists; call under :func:`lock`.

        Only a name of the runner's temporary pattern whose file is still the one
        it created (regular, this user's, one link, the recorded device and
        inode, at most the recorded size) is deleted.  An entry that proves
        nothing (another name, no identity, another file there now) deletes
        nothing and is dropped from the record.
        """
        _, partial = self._entries()
        removed = []
        for rel, ident in sorted(partial.items()):
            folders, name = self._split(rel)
            if ident is None or not is_temporary_name(name):
                self._journal({"gone": rel})    # proves nothing: never a reason to delete
                continue
            try:
                fd = self._open_dir(folders, create=False)
            except UsageError:
                continue                        # a folder replaced by a link since: leave it alone
            if fd is not None:
                try:
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    if (stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and info.st_nlink == 1
                            and (info.st_dev, info.st_ino) == (ident["dev"], ident["ino"])
                            and info.st_size <= ident["size"]):
                        os.unlink(name, dir_fd=fd)
                        removed.append(rel)
                except FileNotFoundError:
                    pass
                finally:
                    os.close(fd)
            self._journal({"gone": rel})
        return removed

    def compact(self) -> None:
        """Rewrite ``OWNER`` as one line per recorded file that still exists (its latest hash), and the partials.

        Hashes are checked when a file is replaced or deleted, not here (a
        run's end would otherwise read every output it ever wrote).
        """
        owned, partial = self._entries()
        keep = {}
        for rel, digest in owned.items():
            try:
                if self.is_file(rel):
                    keep[rel] = digest
            except UsageError:
                continue
        lines = [json.dumps({"file": rel, "sha256": keep[rel]}, sort_keys=True) for rel in sorted(keep)]
        lines += [json.dumps({"partial": rel, **ident}, sort_keys=True) for rel, ident in sorted(partial.items())
                  if ident is not None]
        fd = self.state_fd()
        try:
            tmp = f".{MARKER}.{uuid.uuid4().hex[:12]}.tmp"
            handle = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                             dir_fd=fd)
            try:
                os.write(handle, "".join(line + "\n" for line in lines).encode())
                os.fsync(handle)
            finally:
                os.close(handle)
            os.rename(tmp, MARKER, src_dir_fd=fd, dst_dir_fd=fd)
        finally:
            os.close(fd)

    def adopt_git_tracked(self, repo: Path) -> int:
        """Record the files under ``out`` that git tracks and whose bytes equal the committed blob.

        For the project's ``rendered/`` on a fresh clone (its ``.litrepro/`` is
        git-ignored): git keeps a copy of each adopted file.  Returns how many.
        """
        try:
            rel_out = self.root.resolve().relative_to(Path(repo).resolve())
            listing = subprocess.run(["git", "-C", str(repo), "ls-files", "-s", "-z", "--", str(rel_out)],
                                     capture_output=True, timeout=60, check=True).stdout
        except (ValueError, OSError, subprocess.SubprocessError):
            return 0
        owned, _ = self.record()
        adopted = 0
        for item in listing.split(b"\0"):
            if not item:
                continue
            meta, _, path = item.partition(b"\t")
            blob = meta.split()[1].decode()
            rel = str(Path(os.fsdecode(path)).relative_to(rel_out))
            try:
                data = self.read(rel)
            except UsageError:
                continue
            if data is None or _git_blob(data) != blob or owned.get(rel) == sha256_bytes(data):
                continue
            self._journal({"file": rel, "sha256": sha256_bytes(data)})
            adopted += 1
        return adopted


def read_plain(path: Path) -> bytes | None:
    """A regular file's bytes by plain path (a link, FIFO or device is refused; None when missing)."""
    path = Path(os.path.abspath(path))
    try:
        fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        return OutDir._read_at(fd, path.name, path)
    finally:
        os.close(fd)


def inspect(out: Path) -> None:
    """Refuse an ``out`` that is a file, or non-empty and not a litrepro output folder (reads only)."""
    folder = OutDir(out)
    out = folder.root
    try:
        info = os.stat(out)
    except FileNotFoundError:
        return
    except OSError as err:
        raise UsageError(f"--out {show(out)}: cannot use it ({err.strerror})") from None
    if not stat.S_ISDIR(info.st_mode):
        raise UsageError(f"--out {show(out)}: exists and is not a folder")
    if folder.has_record():                                  # checks .litrepro and OWNER without following links
        return
    from litrepro.paths import RENDERED

    if out.resolve() == RENDERED.resolve():   # the project's own output folder: git-tracked files are adopted
        return
    try:
        names = sorted(os.listdir(out))
    except OSError as err:
        raise UsageError(f"--out {show(out)}: cannot list the folder ({err.strerror})") from None
    if names:
        raise UsageError(f"--out {show(out)}: not empty and not a litrepro output folder (it holds "
                         f"{show(names[0])!r} and no {STATE}/{MARKER}); use a new or empty folder")


def claim(out: Path) -> Path:
    """Create ``out`` and ``out/.litrepro`` with its record; returns the state folder."""
    folder = OutDir(out)
    folder.claim()
    return folder.root / STATE


@contextmanager
def lock(out: Path) -> Iterator[None]:
    """An exclusive, non-blocking lock on ``out/.litrepro/lock`` (opened without following links or truncating)."""
    folder = OutDir(out)
    folder.claim()
    fd = folder.state_fd()
    try:
        handle = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600,
                         dir_fd=fd)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
            raise Refused(f"{show(folder.root / STATE / LOCK)}: is a symlink or not a regular file; refused") from None
        raise
    finally:
        os.close(fd)
    try:
        _check_private(os.fstat(handle), folder.root / STATE / LOCK)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunLocked(f"another 'litrepro run' is writing to {show(folder.root)}; wait for it to finish "
                            "or use another --out") from None
        yield
    finally:
        os.close(handle)


def _is_registered(entry: Path) -> bool:
    if not (entry.is_dir() and not entry.is_symlink() and _RUN_NAME.fullmatch(entry.name)):
        return False
    try:
        return (entry / RUN_FILE).read_text().strip() == entry.name
    except OSError:
        return False


def _remove_run_folder(entry: Path) -> None:
    """Remove a registered run folder, and the short private IPC socket folders its kernels listed in it."""
    from litrepro.kernels import IPC_FALLBACK_LIST, is_fallback_ipc_dir

    for listing in entry.rglob(IPC_FALLBACK_LIST):
        try:
            lines = listing.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            folder = Path(line.strip())
            if is_fallback_ipc_dir(folder):
                shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(entry, ignore_errors=True)


def remove_stale_scratch(out: Path) -> list[Path]:
    """Delete killed runs' scratch folders and partial files; call under :func:`lock`.

    Touches nothing but registered scratch entries inside the private state
    folder and temporary files ``OWNER`` lists as partial.
    """
    folder = OutDir(out)
    if not folder.has_record():
        return []
    folder.remove_partials()
    scratch = folder.state_path(SCRATCH)
    removed = []
    for entry in sorted(scratch.iterdir()):
        if _is_registered(entry):
            _remove_run_folder(entry)
            removed.append(entry)
    return removed


def new_run_scratch(out: Path) -> Path:
    """This run's scratch folder, ``out/.litrepro/scratch/<pid>-<hex>``, registered; call under :func:`lock`."""
    name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    folder = OutDir(out).state_path(SCRATCH) / name
    folder.mkdir(mode=0o700)
    (folder / RUN_FILE).write_text(name + "\n")
    return folder


def remove_run_scratch(folder: Path) -> None:
    if _is_registered(folder):
        _remove_run_folder(folder)
