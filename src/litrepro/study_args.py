"""The study scripts' command lines, validated with the runner's bounds: one line and exit status 2.

A study script (``studies/*.py``) builds its parser here instead of with a bare ``argparse``::

    from litrepro import study_args

    parser = study_args.parser(__doc__.splitlines()[0], seeds="42-61", jobs=2,
                               steps=("critic_steps", 3000))      # steps: optional
    parser.add_argument(...)                                      # the script's own options, if any
    args = parser.parse_args(argv)    # args.seeds: list[int]; args.jobs: int; args.steps: int

- ``--seeds A-B`` or ``--seeds N``: at most :data:`MAX_SEEDS` seeds (the runner's default ``--max-jobs``),
  each in 0..2**32-1 (:data:`litrepro.cli.MAX_SEED`); parsed without listing them first, so
  ``0-4294967295`` is refused at once;
- ``--jobs``: 1..:data:`MAX_JOBS`;
- ``--steps`` (when the script takes one): 1..the runner's bound of the parameter it sets
  (:data:`litrepro.params.UPPER_BOUNDS`), so a study cannot run longer than ``python -m litrepro run``;

and any other bad argument (an unknown option, a missing value) is also one line, exit 2.  The
validators (:func:`seeds`, :func:`jobs`, :func:`bounded_int`) raise :class:`StudyArgError` and can be
used alone; :class:`OneLineParser` is the parser for a script with other options only.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Callable, NoReturn

from litrepro.errors import UsageError

#: Highest seed (seeds are 32-bit, as in ``python -m litrepro run``).
MAX_SEED = 2**32 - 1
#: Most seeds one study accepts (the runner's default ``--max-jobs``).
MAX_SEEDS = 10_000
#: Most worker processes one study starts.
MAX_JOBS = 64
_SEEDS = re.compile(r"([0-9]{1,20})(?:-([0-9]{1,20}))?")


class StudyArgError(UsageError):
    """A study argument outside its bounds (one line)."""


def _short(text: str, limit: int = 40) -> str:
    shown = ascii(text)
    return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(text)} characters)"


def seeds(text: str, *, max_count: int = MAX_SEEDS) -> list[int]:
    """``"A-B"`` (inclusive) or ``"N"`` as a list of seeds; refused beyond ``max_count`` seeds or 2**32-1."""
    m = _SEEDS.fullmatch(text.strip())
    if not m:
        raise StudyArgError(f"--seeds {_short(text)}: expected a seed or a range like 42-61 (a seed or a range "
                            "of non-negative integers)")
    first = int(m.group(1))
    last = int(m.group(2)) if m.group(2) is not None else first
    if max(first, last) > MAX_SEED:
        raise StudyArgError(f"--seeds {_short(text)}: seeds must be at most 2**32-1 = {MAX_SEED}")
    if last < first:
        raise StudyArgError(f"--seeds {_short(text)}: the range is empty (end before start)")
    if last - first + 1 > max_count:
        raise StudyArgError(f"--seeds {_short(text)}: {last - first + 1} seeds; a study takes at most {max_count}")
    return list(range(first, last + 1))


def bounded_int(text: str, name: str, lo: int, hi: int) -> int:
    """``text`` as an integer in ``lo..hi``, else one line naming ``name`` and the bounds."""
    if not re.fullmatch(r"[+-]?[0-9]{1,20}", text.strip()):
        raise StudyArgError(f"{name} {_short(text)}: expected an integer from {lo} to {hi:,}")
    value = int(text)
    if not lo <= value <= hi:
        raise StudyArgError(f"{name} {_short(text)}: must be from {lo} to {hi:,} (the runner's bound)")
    return value


def jobs(text: str) -> int:
    """``--jobs``: 1..:data:`MAX_JOBS` worker processes."""
    return bounded_int(text, "--jobs", 1, MAX_JOBS)


def steps_bound(parameter: str) -> int:
    """The runner's upper bound of ``parameter`` (:data:`litrepro.params.UPPER_BOUNDS`)."""
    from litrepro.params import UPPER_BOUNDS

    return UPPER_BOUNDS[parameter]


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose every error is one line on stderr and exit status 2 (no usage block)."""

    def error(self, message: str) -> NoReturn:
        line = " ".join(f"{self.prog}: error: {message}".split())
        print(line[:300], file=sys.stderr)
        sys.exit(2)


def _typed(fn: Callable[[str], object], name: str) -> Callable[[str], object]:
    def convert(text: str) -> object:
        try:
            return fn(text)
        except StudyArgError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    convert.__name__ = name
    return convert


def parser(description: str, *, seeds: str = "42-61", jobs: int = 2,
           steps: tuple[str, int] | None = None, prog: str | None = None) -> argparse.ArgumentParser:
    """A parser with ``--seeds`` (default ``seeds``), ``--jobs`` (default ``jobs``) and, when ``steps`` is
    ``(parameter, default)``, ``--steps`` bounded by the runner's bound of that parameter.

    ``parse_args`` returns ``seeds`` as a list of ints, ``jobs`` and ``steps`` as ints; a bad value,
    an unknown option or a missing value prints one line and exits with status 2.
    """
    p = OneLineParser(prog=prog, description=description)
    p.add_argument("--seeds", type=_typed(globals()["seeds"], "seeds"), default=globals()["seeds"](seeds),
                   help=f"first-last inclusive, or one seed (default {seeds}; at most {MAX_SEEDS} seeds)")
    p.add_argument("--jobs", type=_typed(globals()["jobs"], "jobs"), default=jobs,
                   help=f"worker processes, 1 to {MAX_JOBS} (default {jobs})")
    if steps is not None:
        parameter, default = steps
        hi = steps_bound(parameter)
        p.add_argument("--steps", type=_typed(lambda t: bounded_int(t, "--steps", 1, hi), "steps"), default=default,
                       help=f"{parameter}, 1 to {hi:,} (default {default})")
    return p
