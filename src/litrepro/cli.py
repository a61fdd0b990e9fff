"""Command line: ``python -m litrepro run`` and ``python -m litrepro fetch-corpus``.

Bad input (an unknown method, a malformed seed range, a bad ``--set``, an
unwritable ``--out``) is refused with one line on stderr and exit status 2
before anything is written.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import itertools
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import litrepro._imports  # noqa: F401  (before nbformat: skips a slow import)
from litrepro import methods
from litrepro.errors import LitreproError, UsageError
from litrepro.params import ParameterError, load_file, parse_override
from litrepro.provenance import rendered_hashes
from litrepro.paths import RENDERED


#: Seeds are 32-bit: what every generator the notebooks seed accepts.
MAX_SEED = 2**32 - 1
#: Runs of more jobs than this are refused unless ``--max-jobs`` allows them.
DEFAULT_MAX_JOBS = 10_000
#: Seconds one notebook cell may run before the job fails as hung (our cells take seconds).
DEFAULT_CELL_TIMEOUT = 1800.0
#: ``--cell-timeout`` above this (7 days), like 0, means no limit: larger numbers overflow the clocks
#: of the libraries that wait on a kernel (``OverflowError: timestamp out of range`` at 1e10).
MAX_CELL_TIMEOUT = 7 * 24 * 3600.0
#: Upper bounds of the command line's counts (the parameters' bounds are in litrepro.params.UPPER_BOUNDS).
RUN_BOUNDS = {"--max-jobs": 1_000_000, "--jobs": 1_024, "--retries": 100, "--kernel-reuse": 100_000}
#: Longest error line printed (a backstop: every message already cuts the values it quotes).
MAX_MESSAGE = 2_000


def _short(text: str, limit: int = 60) -> str:
    """A user's value quoted for a one-line message, cut at ``limit`` characters."""
    shown = ascii(text)
    return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(text)} characters)"


def _number(kind: type):
    """An argparse type: ``kind(text)``, refused with a short message (a 5000-digit value is not echoed)."""
    def convert(text: str):
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{_short(text)} is not {'an integer' if kind is int else 'a number'}") from None
    convert.__name__ = kind.__name__
    return convert


def seed_intervals(tokens: list[str]) -> list[tuple[int, int]]:
    """``42 43``, ``42,43`` and ``0-99`` (inclusive) forms as inclusive intervals, in the order given."""
    intervals = []
    for token in tokens:
        for part in token.split(","):
            part = part.strip()
            lo, dash, hi = part.partition("-")
            try:
                start, end = (int(lo), int(hi)) if dash else (int(part), int(part))
            except ValueError:
                raise UsageError(f"--seeds: {_short(part)} is not a seed or a range like 0-99") from None
            if start < 0 or end < 0:
                raise UsageError(f"--seeds: {_short(part)}: seeds must be non-negative")
            if end < start:
                raise UsageError(f"--seeds: range {_short(part)} is empty (end before start)")
            if end > MAX_SEED:
                raise UsageError(f"--seeds: {_short(part)}: seeds must be at most 2**32-1 = {MAX_SEED}")
            intervals.append((start, end))
    if not intervals:
        raise UsageError("--seeds: no seeds given")
    return intervals


def count_seeds(intervals: list[tuple[int, int]]) -> int:
    """Distinct seeds in ``intervals``, without listing them (a sort and a merge)."""
    total, reach = 0, -1
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach + 1) + 1
            reach = end
    return total


def parse_seeds(tokens: list[str], max_count: int | None = None) -> list[int]:
    """The distinct seeds of ``tokens`` in the order given, in linear time.

    ``max_count`` is checked before any seed is listed, so ``0-100000000``
    is refused at once.
    """
    intervals = seed_intervals(tokens)
    if max_count is not None and count_seeds(intervals) > max_count:
        raise UsageError(f"--seeds: {count_seeds(intervals)} seeds is more than the {max_count} allowed "
                         "(raise --max-jobs to run more)")
    seen: set[int] = set()
    seeds = []
    for start, end in intervals:
        for seed in range(start, end + 1):
            if seed not in seen:
                seen.add(seed)
                seeds.append(seed)
    return seeds


#: Longest ``--set KEY=VALUE`` accepted, in characters (a list of 64 numbers needs about 1,300).
MAX_SET_CHARS = 4_096
#: Deepest nesting of lists and mappings in a ``--set`` value (a list-valued parameter nests 1 deep);
#: PyYAML builds nested values recursively, so 1,000 levels ended in a RecursionError.
MAX_SET_DEPTH = 4


def yaml_depth(text: str, limit: int) -> int:
    """The nesting depth of ``text``'s YAML collections, from its tokens (no value is built; stops past ``limit``)."""
    import yaml

    depth = deepest = 0
    opening = (yaml.FlowSequenceStartToken, yaml.FlowMappingStartToken, yaml.BlockSequenceStartToken,
               yaml.BlockMappingStartToken)
    closing = (yaml.FlowSequenceEndToken, yaml.FlowMappingEndToken, yaml.BlockEndToken)
    try:
        for token in yaml.scan(text, Loader=yaml.SafeLoader):
            if isinstance(token, opening):
                depth += 1
                deepest = max(deepest, depth)
                if deepest > limit:
                    break
            elif isinstance(token, closing):
                depth -= 1
    except yaml.YAMLError:
        pass                             # not valid YAML: the parser that follows says where
    return deepest


def check_set(text: str) -> str:
    """Refuse a ``--set`` before YAML builds anything: longer than :data:`MAX_SET_CHARS`, nested deeper than
    :data:`MAX_SET_DEPTH`, or setting ``seed`` (a run's seeds come from ``--seeds`` and name its output
    folders, so a ``seed`` setting would mislabel every result).  Returns ``text``."""
    if len(text) > MAX_SET_CHARS:
        raise ParameterError(f"--set {_short(text)}: longer than {MAX_SET_CHARS} characters ({len(text)})")
    key, _, raw = text.partition("=")
    if key.strip() == "seed":
        raise ParameterError("--set seed: the seeds of a run come from --seeds (--seeds 7), not from --set")
    if yaml_depth(raw, MAX_SET_DEPTH) > MAX_SET_DEPTH:
        raise ParameterError(f"--set {_short(key.strip())}: value nested more than {MAX_SET_DEPTH} deep; refused")
    return text


def sweep_points(settings: list[str], method_names: list[str],
                 max_points: int = DEFAULT_MAX_JOBS) -> dict[str, list[dict[str, Any]]]:
    """Per method, the product of every ``--set key=v1,v2`` that method declares.

    A key applies to the selected methods that have it; a key no selected method
    has is refused.  Every point is validated like the parameter file.  More
    than ``max_points`` points (``--max-jobs``) is refused before any is listed.
    """
    parsed = [parse_override(check_set(text)) for text in settings]
    count = 1
    for _, values in parsed:
        count *= len(values)
    if count > max_points:
        raise ParameterError(f"--set: {count} sweep points is more than the {max_points} allowed "
                             "(raise --max-jobs to run more)")
    keys = [k for k, _ in parsed]
    if len(set(keys)) != len(keys):
        raise ParameterError(f"--set: parameter given twice: {_short(sorted(k for k in keys if keys.count(k) > 1)[0])}")
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="litrepro", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute method notebooks per seed with papermill")
    run.add_argument("--methods", nargs="+", default=list(methods.METHODS), help="default: all methods")
    run.add_argument("--seeds", nargs="+", default=["42", "43", "44"], help="seeds, lists or ranges (0-99)")
    run.add_argument("--jobs", type=_number(int), default=os.cpu_count() or 1, help="parallel notebooks (default: cores)")
    run.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None, help="override the parameter file")
    run.add_argument("--out", type=Path, default=RENDERED, help="output folder (default: rendered/)")
    run.add_argument("--force", action="store_true", help="rerun seeds whose outputs are current")
    run.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=V[,V...]",
                     help="parameter override; several values sweep their product")
    run.add_argument("--scheduler", default="local",
                     help="local (worker processes, default), dask (a private local Dask cluster, TLS) or "
                          "tls://HOST:PORT (tcp:// works, unencrypted); see docs/security.md")
    run.add_argument("--tls-ca-file", default=None, metavar="FILE", help="with tls://: the CA that signed the scheduler's certificate")
    run.add_argument("--tls-cert", default=None, metavar="FILE", help="with tls://: this client's certificate")
    run.add_argument("--tls-key", default=None, metavar="FILE", help="with tls://: this client's private key")
    run.add_argument("--max-jobs", type=_number(int), default=DEFAULT_MAX_JOBS,
                     help=f"refuse a run of more jobs than this (default {DEFAULT_MAX_JOBS})")
    run.add_argument("--kernel-reuse", type=_number(int), default=None, metavar="N",
                     help="notebooks per warm kernel before it is replaced (default 20)")
    run.add_argument("--fresh-kernels", action="store_true", help="a fresh kernel for every notebook")
    run.add_argument("--cell-timeout", type=_number(float), default=DEFAULT_CELL_TIMEOUT, metavar="SECONDS",
                     help=f"fail a notebook whose cell runs longer than this (0 or more than {MAX_CELL_TIMEOUT:g}: "
                          f"no limit; default {DEFAULT_CELL_TIMEOUT:g})")
    run.add_argument("--retries", type=_number(int), default=0, help="re-run lost jobs up to this many times")
    run.add_argument("--retry-failed", action="store_true", help="with --retries, also re-run failed notebooks")
    run.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    run.add_argument("--no-summary-notebook", action="store_true", help="skip executing notebooks/summary.ipynb")
    fetch = sub.add_parser("fetch-corpus", help="download and verify the Hamlet corpus into the user cache")
    fetch.add_argument("--dest", type=Path, default=None, help="target file (default: the user cache)")
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    from litrepro import outdir, runner
    from litrepro.scheduler import check_address

    for name in args.methods:
        methods.get(name)
    if args.jobs < 1:
        raise UsageError(f"--jobs must be >= 1, got {args.jobs}")
    if args.retries < 0:
        raise UsageError(f"--retries must be >= 0, got {args.retries}")
    if not math.isfinite(args.cell_timeout) or args.cell_timeout < 0:
        raise UsageError(f"--cell-timeout must be a number of seconds >= 0 (0: no limit), got {args.cell_timeout}")
    if args.max_jobs < 1:
        raise UsageError(f"--max-jobs must be >= 1, got {args.max_jobs}")
    if args.kernel_reuse is not None and args.kernel_reuse < 1:
        raise UsageError(f"--kernel-reuse must be >= 1, got {args.kernel_reuse}")
    for option, bound in RUN_BOUNDS.items():
        value = getattr(args, option[2:].replace("-", "_"))
        if value is not None and value > bound:
            raise UsageError(f"{option} {value} is more than its upper bound {bound:_} (litrepro.cli.RUN_BOUNDS)")
    if args.fresh_kernels and args.kernel_reuse not in (None, 1):
        raise UsageError("--fresh-kernels and --kernel-reuse N > 1 contradict each other")
    reuse = 1 if args.fresh_kernels else (args.kernel_reuse or runner.DEFAULT_KERNEL_REUSE)
    check_address(args.scheduler)
    out = outdir.absolute(args.out)            # before anything else: kernels run in notebooks/, not here
    outdir.check_path(out)                     # reads only: a folder another user controls is refused here
    outdir.inspect(out)                        # reads only: a foreign, non-empty folder is refused here
    parse_seeds(args.seeds, max_count=args.max_jobs)   # cheap checks first: a sweep point costs milliseconds
    points = sweep_points(args.settings, args.methods, max_points=args.max_jobs)
    per_seed = sum(len(points[m]) for m in args.methods)
    seeds = parse_seeds(args.seeds, max_count=max(0, args.max_jobs // per_seed))
    if len(seeds) * per_seed > args.max_jobs:  # pragma: no cover - parse_seeds already refused it
        raise UsageError(f"{len(seeds) * per_seed} jobs is more than --max-jobs {args.max_jobs}")
    client = cluster = None
    if args.scheduler.startswith(("tcp://", "tls://")):   # an unreachable scheduler fails before --out is touched
        from litrepro.scheduler import connect, external_security

        security = external_security(args.tls_ca_file, args.tls_cert, args.tls_key)
        client, cluster = connect(args.scheduler, security=security)
    elif args.tls_ca_file or args.tls_cert or args.tls_key:
        raise UsageError("--tls-ca-file, --tls-cert and --tls-key are for an external tls:// scheduler")
    timeout = cell_timeout(args.cell_timeout)
    jobs = [runner.Job(m, s, runner.variant_dir(out, m, p), args.device, p, timeout, root=out)
            for m in args.methods for p in points[m] for s in seeds]
    problems: list[str] = []
    try:
        with outdir.lock(out):
            folder = outdir.OutDir(out)
            if out.resolve() == RENDERED.resolve():
                folder.adopt_git_tracked(RENDERED.parent)   # a fresh clone: the committed outputs, unmodified
            # Before anything is written: every file this run may replace or delete must be its own (seed
            # files, summaries, figures, summary notebooks and their HTML).
            try:
                folder.check_replaceable([t for j in jobs for t in runner.job_targets(j)]
                                         + runner.summary_targets(jobs)
                                         + list(runner.SUMMARY_FILES))
            except outdir.Refused as err:
                raise outdir.Refused(f"{err}; refused before the run: nothing in --out was written, replaced or "
                                     f"deleted (litrepro's own {outdir.STATE}/ record aside)") from None
            outdir.remove_stale_scratch(out)          # killed runs' scratch and partial files, as OWNER lists
            scratch = outdir.new_run_scratch(out)
            saved_env = dict(os.environ)
            try:
                outdir.pin(out)                            # a swap of --out from here on is refused
                _private_environment(folder, scratch)
                outcomes, skipped = _run_jobs(args, jobs, scratch, reuse, client, cluster)
                client = cluster = None                      # closed by _run_jobs
                _, summary_problems = runner.write_summaries(jobs)
                problems += summary_problems
                if not args.no_summary_notebook:
                    swept = any(len(points[m]) > 1 for m in args.methods)
                    for name in ("summary.ipynb", "sweep_summary.ipynb") if swept else ("summary.ipynb",):
                        try:
                            runner.render_summary_notebook(out, scratch, source_name=name, cell_timeout=timeout)
                        except Exception as err:  # noqa: BLE001 - disk full, a broken kernel: one line
                            what = "summary" if name == "summary.ipynb" else "sweep summary"
                            problems.append(f"{what} notebook not written: {type(err).__name__}: {err}".strip())
            finally:
                outdir.unpin(out)
                os.environ.clear()
                os.environ.update(saved_env)
                tempfile.tempdir = None
                outdir.remove_run_scratch(scratch)
                folder.compact()
    finally:
        if client is not None:
            client.close()
        if "litrepro.scheduler" in sys.modules:   # Dask warnings held back: one count line each
            sys.modules["litrepro.scheduler"].report_suppressed()
    bad = [o for o in outcomes if o["status"] != "ok"]
    for o in bad:
        where = f" (notebook {o['notebook']}, cell {o['cell']})" if o.get("notebook") else ""
        print(one_line(f"{o['status'].upper()}: {o['label']}{where}: {o['error']}"), file=sys.stderr)
    print(f"{len(outcomes) - len(bad)} ran, {skipped} current, {len(bad)} failed", file=sys.stderr)
    for line in problems:
        print(one_line(f"ERROR: {line}"), file=sys.stderr)
    return 1 if bad or problems else 0


def _private_environment(folder, scratch: Path) -> None:
    """Point every temporary and configuration folder of this run's processes into ``--out``'s own state.

    ``TMPDIR`` (torch's inductor cache, matplotlib's fallback, Dask's spill) in
    the run's scratch, removed after the run or, after a SIGKILL, by the next;
    matplotlib's and IPython's folders in ``.litrepro/cache`` (kept: the font
    cache is built once).  Workers, kernels and Dask workers inherit it.
    """
    tmp = scratch / "tmp"
    tmp.mkdir(mode=0o700)
    from litrepro.outdir import CACHE

    cache = folder.state_path(CACHE)
    for name in ("matplotlib", "ipython"):
        (cache / name).mkdir(mode=0o700, exist_ok=True)
    os.environ.update(TMPDIR=str(tmp), MPLCONFIGDIR=str(cache / "matplotlib"), IPYTHONDIR=str(cache / "ipython"),
                      DASK_TEMPORARY_DIRECTORY=str(tmp))
    tempfile.tempdir = None


def _run_jobs(args, jobs, scratch, reuse, client, cluster) -> tuple[list[dict], int]:
    """Skip current jobs, run the rest locally or on Dask; closes the Dask client."""
    from litrepro import runner

    hashes = {m: rendered_hashes(m) for m in args.methods}  # hashed once, not once per job
    todo = [j for j in jobs if args.force or not runner.is_fresh(j, hashes[j.method])]
    skipped = len(jobs) - len(todo)
    if skipped:
        print(f"skipping {skipped} job(s) whose outputs are current (use --force to rerun)", file=sys.stderr)
    workers = min(args.jobs, len(todo)) or 1
    finish = close = None
    try:
        if args.scheduler == "local":
            pool = runner.LocalWorkers(scratch, kernel_reuse=reuse, timeout=cell_timeout(args.cell_timeout))
            submit, finish = pool.submit, pool.close
        elif todo or client is not None:
            from litrepro.scheduler import connect, dask_submitter

            if client is None:
                client, cluster = connect("dask", workers=workers, local_directory=scratch / "dask")
            submit, close = dask_submitter(client, cluster, reuse)
            client = None
        outcomes = runner.execute_jobs(todo, workers=workers, retries=args.retries, submit=submit,
                                       retry_failed=args.retry_failed, progress=not args.no_progress,
                                       finish=finish) if todo else []
    finally:
        if close:
            close()
        elif client is not None:
            client.close()
    return outcomes, skipped


def cell_timeout(seconds: float) -> float | None:
    """``--cell-timeout`` as the runner uses it: None (no limit) for 0 and above :data:`MAX_CELL_TIMEOUT`."""
    return None if seconds == 0 or seconds > MAX_CELL_TIMEOUT else float(seconds)


def cmd_fetch(args: argparse.Namespace) -> int:
    from litrepro.waypoint.corpus import fetch_corpus

    path = fetch_corpus(args.dest)
    print(f"corpus verified at {path}")
    return 0


def one_line(text: str) -> str:
    """``text`` on one line: newlines and other control characters escaped (no forged report lines)."""
    line = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in str(text)[:MAX_MESSAGE * 2])
    return line if len(line) <= MAX_MESSAGE else f"{line[:MAX_MESSAGE]}... (cut)"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["claims"]:  # generated result blocks and the rule for numbers: litrepro.claims
        from litrepro.claims import main as claims_main
        try:
            return claims_main(argv[1:])
        except (LitreproError, OSError) as err:      # OSError: a page that cannot be written
            print(one_line(f"litrepro: error: {err}"), file=sys.stderr)
            return 2
    if argv[:1] == ["study"]:   # a many-seed study as jobs of the runner: litrepro.studyrunner
        from litrepro.studyrunner import main as study_main
        try:
            return study_main(argv[1:])
        except LitreproError as err:
            print(one_line(f"litrepro: error: {err}"), file=sys.stderr)
            return 2
        except OSError as err:
            print(one_line(f"litrepro: error: {err}"), file=sys.stderr)
            return 2 if err.errno == errno.ENAMETOOLONG else 1
        except KeyboardInterrupt:
            print("litrepro: interrupted", file=sys.stderr)
            return 130
    args = build_parser().parse_args(argv)
    try:
        return cmd_run(args) if args.command == "run" else cmd_fetch(args)
    except LitreproError as err:
        print(one_line(f"litrepro: error: {err}"), file=sys.stderr)
        return 2
    except OSError as err:  # the disk filled, a folder vanished: one line, not a traceback
        print(one_line(f"litrepro: error: {err}"), file=sys.stderr)
        return 2 if err.errno == errno.ENAMETOOLONG else 1
    except KeyboardInterrupt:
        print("litrepro: interrupted", file=sys.stderr)
        return 130
