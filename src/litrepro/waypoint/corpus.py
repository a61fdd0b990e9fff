"""The Hamlet corpus: locate, guard, verify, split, and log every access.

Guards, in the order they run:

1. locate: the ``corpus_path`` parameter, else ``$LITREPRO_CORPUS``, else the
   user cache (``python -m litrepro fetch-corpus`` fills it); missing -> error
   saying how to get it;
2. size: ``os.stat`` before any byte is read; over ``max_corpus_bytes`` -> refused
   (``oversized_corpus_rejected_before_read``);
3. hash: sha256 of the file against the expected one; mismatch -> error with both.

Splits are byte ranges.  Train and validation bytes are kept in memory; test
bytes are read from the file only when :meth:`Corpus.test_tokens` is called,
which the notebook does once, for the final evaluation.  Every read of a split
is logged with its stage and byte range, and :func:`heldout_untouched` checks
that log (``heldout_bytes_not_used_for_training``).
"""

from __future__ import annotations

import hashlib
import os
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from torch import Tensor

from litrepro import atomic
from litrepro.errors import CorpusError
from litrepro.paths import cache_dir

SOURCE_URL = "https://www.gutenberg.org/cache/epub/1524/pg1524.txt"
#: ``fetch_corpus`` reads at most this much of a download (the corpus is 206,895 bytes).
MAX_DOWNLOAD_BYTES = 4_000_000
FILE_NAME = "gutenberg-1524-hamlet.txt"
ENV = "LITREPRO_CORPUS"
TRAINING_STAGES = ("teacher_pretrain", "student_pretrain", "teacher_rl", "opd", "comparison")


class CorpusMissing(CorpusError):
    pass


class CorpusTooLarge(CorpusError):
    pass


class CorpusHashMismatch(CorpusError):
    pass


def resolve_path(parameter: str = "") -> Path:
    """The corpus file: parameter, then ``$LITREPRO_CORPUS``, then the user cache."""
    candidates = [("parameter 'corpus_path'", parameter), (f"${ENV}", os.environ.get(ENV, "")),
                  ("user cache", str(cache_dir() / FILE_NAME))]
    for origin, value in candidates:
        if value:
            path = Path(value).expanduser()
            if path.is_file():
                return path
            if origin != "user cache":
                raise CorpusMissing(f"corpus not found at {path} (from {origin})")
    raise CorpusMissing(f"Hamlet corpus not found. Run `python -m litrepro fetch-corpus` to download and verify it "
                        f"into {cache_dir()}, or set {ENV} (or the 'corpus_path' parameter) to a verified copy.")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Corpus:
    path: Path
    size: int
    sha256: str
    train_end: int
    validation_end: int
    train: Tensor           # (train_end,) long, bytes [0, train_end)
    validation: Tensor      # (validation_end - train_end,) long
    accesses: list[tuple[str, str, int, int]] = field(default_factory=list)  # (split, stage, lo, hi)

    def train_windows(self, n: int, length: int, generator: torch.Generator, stage: str) -> Tensor:
        """(n, length) random windows of the train split; logs the byte range used."""
        if length > self.train.numel():
            raise ValueError(f"window length {length} exceeds the train split ({self.train.numel()} bytes)")
        starts = torch.randint(self.train.numel() - length + 1, (n,), generator=generator)   # (n,)
        idx = starts[:, None] + torch.arange(length)                                           # (n, length)
        self.accesses.append(("train", stage, int(idx.min()), int(idx.max()) + 1))
        return self.train[idx]

    def validation_windows(self, n: int, length: int, generator: torch.Generator, stage: str) -> Tensor:
        """(n, length) random windows of the validation split (evaluation only)."""
        starts = torch.randint(self.validation.numel() - length + 1, (n,), generator=generator)
        idx = starts[:, None] + torch.arange(length)
        self.accesses.append(("validation", stage, self.train_end + int(idx.min()), self.train_end + int(idx.max()) + 1))
        return self.validation[idx]

    def validation_tokens(self, stage: str) -> Tensor:
        self.accesses.append(("validation", stage, self.train_end, self.validation_end))
        return self.validation

    def test_tokens(self, stage: str) -> Tensor:
        """Read the test bytes from the file now (they are not held in memory before)."""
        with open(self.path, "rb") as handle:
            handle.seek(self.validation_end)
            data = handle.read(self.size - self.validation_end)
        self.accesses.append(("test", stage, self.validation_end, self.size))
        return torch.frombuffer(bytearray(data), dtype=torch.uint8).long()


def load(path: Path, *, expected_sha256: str, max_bytes: int, train_end: int, validation_end: int,
         opener: Callable = open) -> Corpus:
    """Guard, verify and split the corpus (see the module docstring for the order)."""
    size = os.stat(path).st_size
    if size > max_bytes:
        raise CorpusTooLarge(f"corpus {path} is {size} bytes, over max_corpus_bytes = {max_bytes}; refused before reading")
    with opener(path, "rb") as handle:
        data = handle.read()
    actual = sha256_bytes(data)
    if actual != expected_sha256:
        raise CorpusHashMismatch(f"corpus {path} has sha256 {actual}, expected {expected_sha256}")
    if not train_end < validation_end < size:
        raise CorpusError(f"splits train_end = {train_end}, validation_end = {validation_end} do not fit {size} bytes")
    tokens = torch.frombuffer(bytearray(data[:validation_end]), dtype=torch.uint8).long()
    return Corpus(Path(path), size, actual, train_end, validation_end, tokens[:train_end], tokens[train_end:])


def oversize_refused_before_read(path: Path, size_limit: int) -> bool:
    """``oversized_corpus_rejected_before_read``: a limit below the file size raises without opening it."""
    opened = []

    def counting_open(*args, **kwargs):
        opened.append(args)
        return open(*args, **kwargs)

    try:
        load(path, expected_sha256="", max_bytes=size_limit, train_end=1, validation_end=2, opener=counting_open)
    except CorpusTooLarge:
        return not opened
    except CorpusError:  # read, then failed later: the size guard did not act
        return False
    return False


def heldout_untouched(corpus: Corpus) -> bool:
    """Training stages read only train bytes inside [0, train_end); test read only by ``final_evaluation``."""
    for split, stage, lo, hi in corpus.accesses:
        if stage in TRAINING_STAGES and not (split == "train" and 0 <= lo and hi <= corpus.train_end):
            return False
        if split == "test" and stage != "final_evaluation":
            return False
    return any(stage in TRAINING_STAGES for _, stage, _, _ in corpus.accesses)


def fetch_corpus(dest: Path | None = None, *, expected_sha256: str | None = None, url: str = SOURCE_URL,
                 max_bytes: int = MAX_DOWNLOAD_BYTES) -> Path:
    """Download the corpus from Project Gutenberg, verify its sha256, store it atomically.

    At most ``max_bytes`` are read: a larger download is refused, whatever its headers say.
    """
    from litrepro.waypoint.config import HAMLET_SHA256

    expected = expected_sha256 or HAMLET_SHA256
    dest = Path(dest) if dest else cache_dir() / FILE_NAME
    if dest.is_file() and sha256_bytes(dest.read_bytes()) == expected:
        return dest
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            chunks, size = [], 0
            while size <= max_bytes:
                chunk = response.read(min(1 << 16, max_bytes + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            data = b"".join(chunks)
    except OSError as err:
        raise CorpusMissing(f"could not download {url}: {err}") from None
    if len(data) > max_bytes:
        raise CorpusError(f"download from {url} is larger than {max_bytes} bytes; refused, nothing written")
    actual = sha256_bytes(data)
    if actual != expected:
        raise CorpusHashMismatch(f"downloaded {url} has sha256 {actual}, expected {expected}; nothing written")
    atomic.write_bytes(dest, data)
    return dest
