"""Command line: ``python -m litrepro run`` and ``python -m litrepro fetch-corpus``.

Bad input (an unknown method, a malformed seed range, a bad ``--set``, an
unwritable ``--out``) is refused with one line on stderr and exit status 2
before anything is written.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import litrepro._imports  # noqa: F401  (before nbformat: skips a 3 s import)
from litrepro import methods
from litrepro.errors import LitreproError, UsageError
from litrepro.params import ParameterError, load_file, parse_override
from litrepro.provenance import source_hashes
from litrepro.paths import RENDERED


def parse_seeds(tokens: list[str]) -> list[int]:
    """``42 43``, ``42,43`` and ``0-99`` (inclusive) forms; duplicates dropped, order kept."""
    seeds: list[int] = []
    for token in tokens:
        for part in token.split(","):
            part = part.strip()
            lo, dash, hi = part.partition("-")
            try:
                values = range(int(lo), int(hi) + 1) if dash else [int(part)]
            except ValueError:
                raise UsageError(f"--seeds: {part!r} is not a seed or a range like 0-99") from None
            if dash and int(hi) < int(lo):
                raise UsageError(f"--seeds: range {part!r} is empty (end before start)")
            if any(v < 0 for v in values):
                raise UsageError(f"--seeds: {part!r}: seeds must be non-negative")
            seeds.extend(v for v in values if v not in seeds)
    if not seeds:
        raise UsageError("--seeds: no seeds given")
    return seeds


def sweep_points(settings: list[str], method_names: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Per method, the product of every ``--set key=v1,v2`` that method declares.

    A key applies to the selected methods that have it; a key no selected method
    has is refused.  Every point is validated like the parameter file.
    """
    parsed = [parse_override(text) for text in settings]
    keys = [k for k, _ in parsed]
    if len(set(keys)) != len(keys):
        raise ParameterError(f"--set: parameter given twice: {sorted(k for k in keys if keys.count(k) > 1)[0]!r}")
    known = {name: {f.name for f in dataclasses.fields(methods.get(name).config_class())} for name in method_names}
    for key in keys:
        if not any(key in names for names in known.values()):
            raise ParameterError(f"--set: unknown parameter '{key}' (not a parameter of {', '.join(method_names)})")
    points = {}
    for name in method_names:
        method = methods.get(name)
        mine = [(k, v) for k, v in parsed if k in known[name]]
        points[name] = [dict(zip([k for k, _ in mine], combo)) for combo in itertools.product(*(v for _, v in mine))]
        for point in points[name]:
            load_file(method.config_class(), method.parameters, point)
    return points


def _check_writable(out: Path) -> None:
    """Create ``out`` and a probe file in it; any failure is a one-line usage error."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".litrepro-probe-"):
            pass
    except OSError as err:
        raise UsageError(f"--out {out}: not a writable folder ({err.strerror})") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="litrepro", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute method notebooks per seed with papermill")
    run.add_argument("--methods", nargs="+", default=list(methods.METHODS), help="default: all methods")
    run.add_argument("--seeds", nargs="+", default=["42", "43", "44"], help="seeds, lists or ranges (0-99)")
    run.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel notebooks (default: cores)")
    run.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None, help="override the parameter file")
    run.add_argument("--out", type=Path, default=RENDERED, help="output folder (default: rendered/)")
    run.add_argument("--force", action="store_true", help="rerun seeds whose outputs are current")
    run.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=V[,V...]",
                     help="parameter override; several values sweep their product")
    run.add_argument("--scheduler", default="local",
                     help="local (worker processes, default), dask (a local Dask cluster) or tcp://HOST:PORT")
    run.add_argument("--retries", type=int, default=0, help="re-run lost jobs up to this many times")
    run.add_argument("--retry-failed", action="store_true", help="with --retries, also re-run failed notebooks")
    run.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    run.add_argument("--no-summary-notebook", action="store_true", help="skip executing notebooks/summary.ipynb")
    fetch = sub.add_parser("fetch-corpus", help="download and verify the Hamlet corpus into the user cache")
    fetch.add_argument("--dest", type=Path, default=None, help="target file (default: the user cache)")
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    from litrepro import runner

    for name in args.methods:
        methods.get(name)
    if args.jobs < 1:
        raise UsageError(f"--jobs must be >= 1, got {args.jobs}")
    seeds = parse_seeds(args.seeds)
    points = sweep_points(args.settings, args.methods)
    if not (args.scheduler in ("local", "dask") or args.scheduler.startswith("tcp://")):
        raise UsageError(f"--scheduler {args.scheduler!r}: expected local, dask or tcp://HOST:PORT")
    _check_writable(args.out)
    jobs = [runner.Job(m, s, runner.variant_dir(args.out, m, p), args.device, p)
            for m in args.methods for p in points[m] for s in seeds]
    with runner.output_lock(args.out):
        runner.remove_stale_scratch(args.out)
        hashes = {m: source_hashes(m) for m in args.methods}  # hashed once, not once per job
        todo = [j for j in jobs if args.force or not runner.is_fresh(j, hashes[j.method])]
        skipped = len(jobs) - len(todo)
        if skipped:
            print(f"skipping {skipped} job(s) whose outputs are current (use --force to rerun)", file=sys.stderr)
        submit, close = runner.run_local, None
        if args.scheduler != "local" and todo:
            from litrepro.scheduler import dask_submitter

            submit, close = dask_submitter(args.scheduler, args.jobs)
        try:
            outcomes = runner.execute_jobs(todo, workers=args.jobs, retries=args.retries, submit=submit,
                                           retry_failed=args.retry_failed, progress=not args.no_progress)
        finally:
            if close:
                close()
        runner.write_summaries(jobs)
        if not args.no_summary_notebook:
            runner.render_summary_notebook(args.out)
    bad = [o for o in outcomes if o["status"] != "ok"]
    for o in bad:
        where = f" (notebook {o['notebook']}, cell {o['cell']})" if o.get("notebook") else ""
        print(f"{o['status'].upper()}: {o['label']}{where}: {o['error']}", file=sys.stderr)
    print(f"{len(outcomes) - len(bad)} ran, {skipped} current, {len(bad)} failed", file=sys.stderr)
    return 1 if bad else 0


def cmd_fetch(args: argparse.Namespace) -> int:
    from litrepro.waypoint.corpus import fetch_corpus

    path = fetch_corpus(args.dest)
    print(f"corpus verified at {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return cmd_run(args) if args.command == "run" else cmd_fetch(args)
    except LitreproError as err:
        print(f"litrepro: error: {err}", file=sys.stderr)
        return 2
