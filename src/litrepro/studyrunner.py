"""Studies as jobs of the runner: one declaration per study (:class:`Study`), run by :func:`run`.

    python -m litrepro study NAME [--seeds A-B] [--jobs N] [--scheduler local|dask|tls://HOST:PORT]
                                  [--dry-run] [--out DIR] [--state DIR] [--no-progress] [the study's options]
    python -m litrepro study --list

A declaration (:class:`Study`, in :mod:`litrepro.studies.rlbp` or :mod:`litrepro.studies.waypoint`) says
what a study is, like a d3rlpy config or a pytest parametrisation:

- its per-seed job, in one or more :class:`Stage` s (a stage may take a context computed from the rows
  of the stages before it, such as the backup study's best other backup);
- its summary, which refuses (raises ``ValueError``, the studies' ``StudyRefused``) on a failed integrity
  check or an interval that does not recompute by a plain loop, and otherwise returns the output JSON;
- its figures, findings and claims blocks, read from that JSON;
- its outputs (paths under ``rendered/``), its source hashes and its bounded options.

The runner owns everything else:

- **seeds and bounds**: ``--seeds`` (at most :attr:`Study.max_seeds`), ``--jobs`` and every study option
  are bounded, and so is the grid (seeds x arms, :data:`MAX_ARM_RUNS`); a value beyond its bound is one
  line and exit status 2, before anything runs;
- **schedulers**: local worker processes (``spawn``, one torch thread each; ``--jobs 1`` runs in this
  process), the private TLS Dask cluster (``--scheduler dask``) or an external scheduler
  (``tls://HOST:PORT`` with ``--tls-*``), through :mod:`litrepro.scheduler`, exactly as ``litrepro run``.
  A job is a pure function of (seed, options, context): its row does not depend on where it ran;
- **resuming**: each (stage, seed) row is written atomically, as it finishes, into
  ``build/studies/<name>/<key>/`` where ``key`` hashes the study's source hashes and options (and a
  stage's context).  A rerun computes only what is missing; rows of other sources are never read.  The
  summary is computed from the rows read back from that folder, so a resumed run and an uninterrupted
  one summarise the same bytes;
- **cost**: before it starts, the study prints an estimate from recorded per-seed CPU-seconds (this
  study's earlier rows in the state folder, else the committed JSON's record); with no record, the first
  seed runs alone as a pilot and the estimate follows it.  ``--dry-run`` prints the plan and stops;
- **progress**: a ``tqdm`` bar that counts arms (a seed's arms are counted when the seed finishes) and
  seeds;
- **writing**: the outputs are written only when every seed is present and the summary does not refuse,
  figures first and JSON last, each atomically, through :class:`litrepro.outdir.OutDir` (a file the
  runner did not write and cannot prove is its own, or git's committed copy in ``rendered/``, is never
  replaced).  Nothing is written on a refusal: exit status 1.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import multiprocessing
import os
import shutil
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from litrepro.errors import LitreproError, UsageError
from litrepro.paths import RENDERED, ROOT

#: Where the per-seed rows live (one folder per study and key); never committed.
STATE_ROOT = ROOT / "build" / "studies"
#: The most (seed, arm) runs one study invocation may plan.
MAX_ARM_RUNS = 100_000
#: Worker processes or Dask workers a study may start.
MAX_JOBS = 64


class StateLost(LitreproError):
    """A row the runner had just saved could not be read back from the state folder."""


# --- The declaration -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Option:
    """A study option on the command line (``--steps`` -> ``options["steps"]``), bounded to ``lo..hi``."""

    name: str
    default: int | float | Callable[[], int | float]   # a callable reads a config's default when asked
    lo: int | float
    hi: int | float
    help: str
    kind: type = int

    @property
    def key(self) -> str:
        return self.name.lstrip("-").replace("-", "_")

    def default_value(self) -> int | float:
        return self.default() if callable(self.default) else self.default


@dataclass(frozen=True)
class Stage:
    """One per-seed job of a study.

    ``job(seed, options, context) -> row`` must be a module-level function (it is sent to worker processes
    and Dask workers by reference) whose row is JSON.  ``seeds`` picks the stage's seeds from the study's
    (default: all of them); ``context(rows, options)``, given ``{stage: [rows]}`` of the stages before it,
    returns the JSON value every job of this stage receives (it may refuse with ``ValueError``).
    ``arms`` counts the arms one job runs (the progress bar and the grid bound).
    """

    name: str
    job: Callable[[int, dict, Any], Any]
    arms: int | Callable[[], int] = 1                  # a callable counts them from the study's module when asked
    seeds: Callable[[list[int]], list[int]] | None = None
    context: Callable[[dict[str, list[Any]], dict], Any] | None = None

    def seeds_of(self, seeds: list[int]) -> list[int]:
        return list(self.seeds(seeds)) if self.seeds else list(seeds)

    def n_arms(self) -> int:
        return int(self.arms() if callable(self.arms) else self.arms)


@dataclass(frozen=True)
class Block:
    """A generated result block: ``render(root)`` gives the Markdown between the markers named ``name`` in ``page``."""

    name: str
    page: str
    render: Callable[[Path], str]


@dataclass
class StudyRun:
    """What a summary is computed from."""

    seeds: list[int]
    options: dict[str, Any]
    out: Path                              # the output folder (inputs are read from it)
    rows: dict[str, list[Any]]             # stage -> rows, in the order of the stage's seeds
    contexts: dict[str, Any]               # stage -> the context its jobs received
    inputs: dict[str, Any]                 # input path under the output folder -> its JSON (None: absent)
    jobs: int
    wall_seconds: float                    # this invocation's wall time (how it ran)
    cpu_seconds: float                     # the sum of every job's CPU-seconds (how it ran)
    job_seconds: dict[str, list[float]]    # stage -> each job's wall seconds, in seed order (how it ran)


def no_figures(outputs: Mapping[str, Any]) -> dict[str, Any]:
    return {}


def no_report(outputs: Mapping[str, Any]) -> list[str]:
    return []


@dataclass(frozen=True)
class Study:
    """One study: what it runs per seed, how it summarises and refuses, what it writes and shows.

    ``summarise(run) -> {output path: JSON}`` raises ``ValueError`` to refuse.  ``figures(outputs)`` gives
    ``{png path: Figure}`` and ``report(outputs)`` the lines printed after writing (a table, the findings),
    both from the written JSON.  ``source_hashes()`` are the hashes of the code whose change can change a
    number; ``recorded_hashes(data)`` reads them back from the main output (:func:`stale`).  ``settings``
    maps a path of keys in the main output to a function giving the value it must hold now (the
    freshness test compares them too).  ``inputs`` are committed outputs of other studies that the summary
    reads (``{path: required}``), from the same output folder.
    """

    name: str
    title: str
    module: str                                        # the study's code (docs, book)
    summary: str                                       # one paragraph: what it runs and why
    stages: tuple[Stage, ...]
    summarise: Callable[[StudyRun], dict[str, Any]]
    source_hashes: Callable[[], dict[str, str]]
    outputs: tuple[str, ...]                           # JSON paths under rendered/; the first is the main one
    figures: Callable[[Mapping[str, Any]], dict[str, Any]] = no_figures
    report: Callable[[Mapping[str, Any]], list[str]] = no_report
    blocks: tuple[Block, ...] = ()
    options: tuple[Option, ...] = ()
    inputs: Mapping[str, bool] = field(default_factory=dict)
    default_seeds: str = "42-61"
    min_seeds: int = 2
    max_seeds: int = 200
    validate: Callable[[list[int], dict], None] | None = None
    hash_path: tuple[str, ...] = ("provenance", "source_sha256")
    settings: Mapping[tuple[str, ...], Callable[[], Any]] = field(default_factory=dict)
    #: Fields of the main output that record how the study ran (wall time, CPU time, processes, hashes):
    #: the only ones a rerun on the same machine may change.
    run_fields: tuple[str, ...] = ("wall_seconds", "cpu_seconds", "cpu_seconds_per_seed", "jobs", "provenance",
                                   "source_sha256")
    #: Fields inside each ``per_seed`` row that record how it ran (a row's own wall seconds).
    row_run_fields: tuple[str, ...] = ()
    #: The figures :attr:`figures` draws (checked against it, and for ownership before any work).
    pngs: tuple[str, ...] = ()
    #: ``(rows by stage, options)`` recovered from the main output's committed JSON, so that today's summary can
    #: rebuild it (:func:`recompute`, ``--resummarise``); ``None``: the JSON does not keep every row it summarises.
    from_committed: Callable[[Mapping[str, Any]], tuple[dict[str, list[Any]], dict[str, Any]]] | None = None
    #: Hash keys that only the summary depends on: ``--resummarise`` may proceed when only these are stale.
    summary_hash_keys: tuple[str, ...] = ()
    #: Functions the jobs or the summary call that live beside them in the declaration module (hashed with them).
    hashed_helpers: tuple[Callable, ...] = ()
    make_target: str | None = None
    committed: bool = True                             # its outputs are in the repository

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(f"study {self.name!r} has no stage {name!r}")

    def option_defaults(self) -> dict[str, Any]:
        return {o.key: o.default_value() for o in self.options}

    @property
    def main_output(self) -> str:
        return self.outputs[0]

    def arms(self) -> int:
        return sum(s.n_arms() for s in self.stages)

    def has_figures(self) -> bool:
        return self.figures is not no_figures


def claims_block(name: str) -> Callable[[Path], str]:
    """A block's ``render``: ``litrepro.claims.<name>(root)``, imported when the block is rendered (the table
    builders of a study's block live beside the README's in :mod:`litrepro.claims`)."""
    def render(root: Path) -> str:
        from litrepro import claims

        return getattr(claims, name)(root)
    render.__name__ = name
    return render


def count_of(module: str, name: str, factor: int = 1) -> Callable[[], int]:
    """An arms count, ``factor * len(module.name)`` (``name()`` when it is a function), read only when it is
    needed: the registry imports no study module (and no torch) until a study runs."""
    def count() -> int:
        import importlib

        value = getattr(importlib.import_module(module), name)
        return factor * len(value() if callable(value) else value)
    return count


def code_hash(*objects: Any, constants: Any = None) -> str:
    """sha256 of the source of ``objects`` (functions, classes) and of ``constants`` as canonical JSON."""
    text = "".join(inspect.getsource(o) for o in objects)
    if constants is not None:
        text += json.dumps(constants, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _dig(data: Any, path: Sequence[str]) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def rebuild(study: Study, out: Path = RENDERED) -> dict[str, Any]:
    """A derived study's outputs (one with no per-seed job), built afresh from the inputs in ``out``."""
    run = StudyRun(seeds=[], options=study.option_defaults(), out=Path(out), rows={}, contexts={},
                   inputs=read_inputs(study, out), jobs=1, wall_seconds=0.0, cpu_seconds=0.0, job_seconds={})
    return study.summarise(run)


def stale(study: Study, data: Mapping[str, Any]) -> list[str]:
    """What differs between the main output ``data`` and the code and settings now (empty: current).

    A derived study is current when a fresh build from its committed inputs equals it."""
    if not study.stages:
        fresh = _canonical(rebuild(study)[study.main_output])
        return [] if fresh == data else [f"{study.main_output} differs from a fresh build from its inputs"]
    then = _dig(data, study.hash_path) or {}
    now = study.source_hashes()
    out = sorted(f"source {k}" for k in set(now) | set(then) if now.get(k) != then.get(k))
    for path, current in study.settings.items():
        if _dig(data, path) != json.loads(json.dumps(current())):
            out.append("setting " + ".".join(path))
    return out


def without_run_fields(study: Study, data: Mapping[str, Any]) -> dict[str, Any]:
    """The main output less the fields that record how it ran (what must not depend on scheduler or resuming)."""
    out = {k: v for k, v in data.items() if k not in study.run_fields}
    if study.row_run_fields and isinstance(out.get("per_seed"), list):
        out["per_seed"] = [{k: v for k, v in r.items() if k not in study.row_run_fields} for r in out["per_seed"]]
    return out


# --- The registry ---------------------------------------------------------------------------------------

def registry() -> dict[str, Study]:
    """``{name: Study}`` of every declared study (:mod:`litrepro.studies`)."""
    from litrepro.studies import registry as reg

    return reg()


def get(name: str) -> Study:
    studies = registry()
    if name not in studies:
        shown = name if len(name) <= 60 else name[:60] + "..."
        raise UsageError(f"study {shown!r}: not a study (known: {', '.join(sorted(studies))})")
    return studies[name]


# --- Jobs -----------------------------------------------------------------------------------------------

def _canonical(obj: Any) -> Any:
    """``obj`` as it reads back from JSON (tuples become lists, keys strings): what every summary sees."""
    return json.loads(json.dumps(obj, allow_nan=False))


def execute(name: str, stage: str, seed: int, options: dict, context: Any) -> dict[str, Any]:
    """Run one job of study ``name`` (in this process, a worker process or a Dask worker).

    Returns ``{"row", "cpu_seconds", "wall_seconds"}``.  One torch thread, as every study job sets itself.
    """
    import torch

    torch.set_num_threads(1)
    job = get(name).stage(stage).job
    cpu, wall = time.process_time(), time.perf_counter()
    row = job(seed, dict(options), context)
    return {"row": _canonical(row), "cpu_seconds": time.process_time() - cpu, "wall_seconds": time.perf_counter() - wall}


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


# --- State ----------------------------------------------------------------------------------------------

def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, allow_nan=False).encode()).hexdigest()


def library_versions() -> dict[str, str]:
    """The versions of the libraries a row's numbers depend on (the key changes when one is upgraded)."""
    from importlib import metadata

    from litrepro.provenance import package_versions

    out = dict(package_versions())
    for name in ("scipy", "d3rlpy", "gymnasium"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def state_key(study: Study, options: dict, sources: dict[str, str] | None = None) -> str:
    """The state folder's name: the study's source hashes, its options and the library versions (rows made by
    other sources, settings or libraries are never read)."""
    sources = study.source_hashes() if sources is None else sources
    return _sha({"study": study.name, "sources": sources, "options": options, "libraries": library_versions()})[:16]


class State:
    """``<root>/<study>/<key>/<stage>[-<context hash>]/seed-<N>.json``: one row per file, written atomically."""

    def __init__(self, root: Path, study: Study, options: dict) -> None:
        self.study, self.options = study, options
        self.sources = study.source_hashes()           # what the rows are made by (checked again at the end)
        self.key = state_key(study, options, self.sources)
        self.root = Path(root)
        self.folder = self.root / study.name / self.key

    def _stage_folder(self, stage: Stage, context: Any) -> Path:
        suffix = "" if context is None else "-" + _sha(context)[:12]
        return self.folder / f"{stage.name}{suffix}"

    def path(self, stage: Stage, context: Any, seed: int) -> Path:
        return self._stage_folder(stage, context) / f"seed-{seed}.json"

    def read(self, stage: Stage, context: Any, seed: int) -> dict | None:
        """The saved job, or None when it is missing or not this study's, key's, stage's and seed's."""
        try:
            saved = json.loads(self.path(stage, context, seed).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        want = {"study": self.study.name, "key": self.key, "stage": stage.name, "seed": seed,
                "context": None if context is None else _sha(context)}
        if not isinstance(saved, dict) or any(saved.get(k) != v for k, v in want.items()) or "row" not in saved:
            return None
        return saved

    def write(self, stage: Stage, context: Any, seed: int, result: dict) -> None:
        from litrepro import atomic

        record = {"study": self.study.name, "key": self.key, "stage": stage.name, "seed": seed,
                  "context": None if context is None else _sha(context), **result}
        atomic.write_json(self.path(stage, context, seed), record)

    def recorded_cpu(self, stage: Stage) -> float | None:
        """Mean CPU-seconds of one job of ``stage``, over every row of it saved under this key, or None."""
        seconds = []
        if not self.folder.is_dir():
            return None
        for path in [*self.folder.glob(f"{stage.name}/seed-*.json"), *self.folder.glob(f"{stage.name}-*/seed-*.json")]:
            try:
                saved = json.loads(path.read_text(encoding="utf-8"))
                seconds.append(float(saved["cpu_seconds"]))
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return sum(seconds) / len(seconds) if seconds else None


def committed_cpu_per_seed(data: Any) -> float | None:
    """CPU-seconds per seed that a study's JSON records (``cpu_seconds`` / ``n_seeds``, ``cpu_seconds_per_seed``,
    or ``wall_seconds`` x ``jobs`` / seeds as an upper bound), or None."""
    if not isinstance(data, dict):
        return None
    n = data.get("n_seeds") or len(data.get("seeds") or []) or None
    try:
        if data.get("cpu_seconds_per_seed") is not None:
            return float(data["cpu_seconds_per_seed"])
        if data.get("cpu_seconds") is not None and n:
            return float(data["cpu_seconds"]) / n
        if data.get("wall_seconds") is not None and n:
            return float(data["wall_seconds"]) * int(data.get("jobs") or 1) / n
    except (TypeError, ValueError):
        return None
    return None


# --- Planning -------------------------------------------------------------------------------------------

@dataclass
class Plan:
    study: Study
    seeds: list[int]
    options: dict[str, Any]
    jobs: int
    out: Path
    state: State

    def arm_runs(self) -> int:
        return sum(len(s.seeds_of(self.seeds)) * s.n_arms() for s in self.study.stages)


def read_inputs(study: Study, out: Path) -> dict[str, Any]:
    """The committed outputs of other studies that ``study`` reads, from the output folder ``out``."""
    from litrepro import jsonbounds

    inputs = {}
    for rel, required in study.inputs.items():
        path = Path(out) / rel
        if not path.is_file():
            if required:
                raise UsageError(f"{path}: needed by study {study.name} and missing (run its study first)")
            inputs[rel] = None
            continue
        inputs[rel] = jsonbounds.read(path)
    return inputs


def missing_jobs(plan: Plan) -> dict[str, int]:
    """Per stage, how many of its jobs have no saved row.  A stage whose context needs rows that are not all
    saved yet counts every job (its rows are keyed by a context not known yet)."""
    out: dict[str, int] = {}
    rows: dict[str, list[Any]] = {}
    known = True
    for stage in plan.study.stages:
        seeds = stage.seeds_of(plan.seeds)
        if not known:
            out[stage.name] = len(seeds)
            continue
        try:
            context = stage.context(rows, plan.options) if stage.context else None
        except (ValueError, KeyError, TypeError):
            known, out[stage.name] = False, len(seeds)
            continue
        saved = [plan.state.read(stage, context, s) for s in seeds]
        out[stage.name] = sum(x is None for x in saved)
        if out[stage.name]:
            known = False
        else:
            rows[stage.name] = [x["row"] for x in saved]
    return out


def cost_line(plan: Plan, missing: dict[str, int]) -> tuple[str, bool]:
    """The estimate printed before a run, and whether there was one (False: each stage's first job is a pilot).

    From this study's rows already saved under the same key (each stage's mean CPU-seconds per job), else from
    the committed JSON's record of CPU-seconds per seed, shared out over the stages in proportion to their arm
    runs (a record of wall seconds x processes is an upper bound for an uninterrupted run)."""
    study = plan.study
    if not study.stages:
        return "seconds (derived from committed JSON: no per-seed job)", True
    cpu = 0.0
    for stage in study.stages:
        if missing[stage.name]:
            per_job = plan.state.recorded_cpu(stage)
            if per_job is None:
                break
            cpu += per_job * missing[stage.name]
    else:
        return _cost_words(cpu, plan, missing, "this study's earlier rows in the state folder"), True
    from litrepro import jsonbounds

    main = Path(plan.out) / study.main_output
    try:
        per_seed = committed_cpu_per_seed(jsonbounds.read(main)) if main.is_file() else None
    except (LitreproError, OSError, ValueError):
        per_seed = None
    if per_seed is None:
        return ("unknown: nothing records this study's per-seed time yet, so each stage's first job runs alone as a "
                "pilot and that stage's estimate follows it"), False
    total = plan.arm_runs()
    runs = sum(missing[s.name] * s.n_arms() for s in study.stages)
    cpu = per_seed * len(plan.seeds) * runs / total if total else 0.0
    return _cost_words(cpu, plan, missing, f"recorded in {study.main_output}, per seed, shared over the arm runs"), True


def _cost_words(cpu: float, plan: Plan, missing: dict[str, int], source: str) -> str:
    workers = max(1, min(plan.jobs, max(missing.values(), default=1)))
    return f"about {cpu:.0f} CPU-s ({source}), about {cpu / workers / 60:.1f} min wall on {workers} process(es)"


# --- Executors ------------------------------------------------------------------------------------------

def _error(err: BaseException) -> str:
    return f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"


class _Local:
    """``--jobs 1``: in this process; more: a pool of ``spawn`` processes with one torch thread each (started as
    jobs arrive, so a stage with fewer jobs starts fewer)."""

    def __init__(self, jobs: int) -> None:
        self.pool = None
        if jobs > 1:
            from concurrent.futures import ProcessPoolExecutor

            self.pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                                            initializer=_one_thread)

    def map(self, name: str, tasks: list[tuple[str, int, dict, Any]]) -> Iterator[tuple[tuple, dict | None, str | None]]:
        """``(task, result, None)`` per finished job, or ``(task, None, error)`` when it raised."""
        if self.pool is None:
            for task in tasks:
                try:
                    result = execute(name, *task)
                except Exception as err:  # noqa: BLE001 - one failed seed is reported; the others go on
                    yield task, None, _error(err)
                else:
                    yield task, result, None
            return
        from concurrent.futures import as_completed

        futures = {self.pool.submit(execute, name, *task): task for task in tasks}
        for fut in as_completed(futures):
            try:
                result = fut.result()
            except Exception as err:  # noqa: BLE001
                yield futures[fut], None, _error(err)
            else:
                yield futures[fut], result, None

    def close(self, cancel: bool = False) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=not cancel, cancel_futures=cancel)


class _Dask:
    """Jobs on a Dask cluster: the private TLS LocalCluster (``dask``) or an external scheduler."""

    def __init__(self, scheduler: str, jobs: int, scratch: Path, security=None) -> None:
        from litrepro.scheduler import connect

        self.scratch = scratch
        self.client, self.cluster = connect(scheduler, workers=jobs, local_directory=scratch, security=security)

    def map(self, name: str, tasks: list[tuple[str, int, dict, Any]]) -> Iterator[tuple[tuple, dict | None, str | None]]:
        from distributed import as_completed

        futures = {}
        for task in tasks:
            key = f"litrepro-study-{name}-{task[0]}-{task[1]}-{uuid.uuid4().hex[:8]}"
            futures[self.client.submit(execute, name, *task, pure=False, key=key)] = task
        for fut in as_completed(list(futures)):
            try:
                result = fut.result()
            except Exception as err:  # noqa: BLE001 - one failed seed is reported; the others go on
                yield futures[fut], None, _error(err)
            else:
                yield futures[fut], result, None

    def close(self, cancel: bool = False) -> None:
        from litrepro.scheduler import report_suppressed

        try:
            self.client.close()
        finally:
            if self.cluster is not None:
                self.cluster.close()
            report_suppressed()


# --- Running --------------------------------------------------------------------------------------------

def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _where(plan: Plan) -> Path:
    folder = plan.state.folder
    return folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder


def announce(plan: Plan) -> bool:
    """Print the plan and its cost; returns whether there was an estimate (False: each stage pilots its first job)."""
    from litrepro.outdir import show

    study, seeds = plan.study, plan.seeds
    if not study.stages:
        _say(f"study {study.name}: derived from {', '.join(study.inputs)} under {show(plan.out)} (no per-seed job)")
        return True
    missing = missing_jobs(plan)
    line, known = cost_line(plan, missing)
    jobs = sum(len(st.seeds_of(seeds)) for st in study.stages)
    todo = sum(missing.values())
    _say(f"study {study.name}: {len(seeds)} seed(s) x {study.arms()} arm(s) in {len(study.stages)} stage(s) "
         f"({plan.arm_runs()} arm runs, {jobs} jobs); {jobs - todo} job(s) already in {show(_where(plan))}, "
         f"{todo} to run; cost {line}")
    return known


class _Stages:
    """Runs a plan's stages in order: each stage's missing jobs, its rows read back from the state folder."""

    def __init__(self, plan: Plan, known: bool, executor, progress: bool) -> None:
        self.plan, self.known, self.executor = plan, known, executor
        self.rows: dict[str, list[Any]] = {}
        self.contexts: dict[str, Any] = {}
        self.job_seconds: dict[str, list[float]] = {}
        self.cpu = 0.0
        self.failed: list[str] = []
        from tqdm import tqdm

        self.bar = tqdm(total=plan.arm_runs(), unit="arm", desc=plan.study.name, file=sys.stderr,
                        disable=not progress, dynamic_ncols=True)

    def run_stage(self, stage: Stage) -> bool:
        """Run ``stage``'s missing jobs; False when one failed (the others are saved)."""
        plan, name = self.plan, self.plan.study.name
        context = stage.context(self.rows, plan.options) if stage.context else None
        self.contexts[stage.name] = context
        seeds = stage.seeds_of(plan.seeds)
        saved = {s: plan.state.read(stage, context, s) for s in seeds}
        missing = [s for s in seeds if saved[s] is None]
        self.bar.update(stage.n_arms() * (len(seeds) - len(missing)))
        tasks = [(stage.name, s, plan.options, context) for s in missing]
        # With no estimate, a stage's first job runs alone as a pilot and the estimate for its rest follows it.
        pilot = not self.known and plan.state.recorded_cpu(stage) is None and len(tasks) > 1
        for n, batch in enumerate([tasks[:1], tasks[1:]] if pilot else [tasks]):
            for task, result, error in self.executor.map(name, batch) if batch else ():
                if error is not None:
                    self.failed.append(f"{stage.name} seed {task[1]}: {error}")
                    continue
                plan.state.write(stage, context, task[1], result)
                saved[task[1]] = plan.state.read(stage, context, task[1])
                self.bar.update(stage.n_arms())
                self.bar.set_postfix_str(f"{stage.name}: {sum(v is not None for v in saved.values())}/{len(seeds)} seeds")
            if pilot and n == 0 and saved[batch[0][1]] is not None:
                rest = saved[batch[0][1]]["cpu_seconds"] * (len(tasks) - 1)
                _say(f"study {name}: the pilot job of stage {stage.name} took {saved[batch[0][1]]['cpu_seconds']:.0f} "
                     f"CPU-s; its other {len(tasks) - 1} job(s) are about {rest:.0f} CPU-s, "
                     f"{rest / max(1, min(plan.jobs, len(tasks) - 1)) / 60:.1f} min wall on "
                     f"{min(plan.jobs, len(tasks) - 1)} process(es)")
        if self.failed:
            return False
        if any(saved[s] is None for s in seeds):                   # a row vanished or was replaced meanwhile
            raise StateLost(f"stage {stage.name}: rows of seeds {[s for s in seeds if saved[s] is None]} could not "
                            "be read back")
        self.rows[stage.name] = [saved[s]["row"] for s in seeds]
        self.job_seconds[stage.name] = [float(saved[s]["wall_seconds"]) for s in seeds]
        self.cpu += sum(float(saved[s]["cpu_seconds"]) for s in seeds)
        return True


def _executor(plan: Plan, scheduler: str, security):
    """The jobs' executor: local processes, or a Dask client (connected now, so a bad scheduler fails first)."""
    if scheduler == "local":
        return _Local(plan.jobs), None
    scratch = plan.state.root / f".dask-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    scratch.mkdir(parents=True, exist_ok=False)               # this run's own: removed when it ends
    try:
        return _Dask(scheduler, plan.jobs, scratch, security), scratch
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


def _prepare_state(plan: Plan) -> None:
    """Create the state folder before any job runs: an unusable ``--state`` is one line, exit 2."""
    from litrepro.outdir import show

    try:
        plan.state.folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"--state {show(plan.state.root)}: cannot create its folder ({err.strerror})") from None


def _check_owned(study: Study, out: Path) -> None:
    """Refuse, before any work, an output (JSON or figure) in ``out`` that the runner does not own."""
    from litrepro import outdir

    if out.is_dir():
        folder = outdir.OutDir(out)
        if out.resolve() == RENDERED.resolve():
            folder.adopt_git_tracked(ROOT)
        folder.check_replaceable([*study.outputs, *study.pngs])


def run(study: Study, *, seeds: list[int], options: dict[str, Any] | None = None, jobs: int = 1,
        scheduler: str = "local", security=None, out: Path = RENDERED, state_root: Path = STATE_ROOT,
        dry_run: bool = False, progress: bool = True) -> int:
    """Plan, estimate, run the missing jobs, summarise and write.  Returns the exit status: 0 written (or a dry
    run), 1 refused or a job failed (nothing written; finished seeds kept), 130 interrupted."""
    from litrepro import outdir

    options = {**study.option_defaults(), **(options or {})}
    out = outdir.absolute(out)
    outdir.check_path(out)
    outdir.inspect(out)
    plan = Plan(study, seeds, options, jobs, out, State(state_root, study, options))
    inputs = read_inputs(study, out)
    if not dry_run:
        _check_owned(study, out)
        _prepare_state(plan)
    known = announce(plan)
    if dry_run:
        return 0
    start = time.perf_counter()
    kept = f"the finished seeds are kept in {outdir.show(_where(plan))} and a rerun computes only the missing ones"
    executor, scratch = _executor(plan, scheduler, security) if study.stages else (None, None)
    stages = _Stages(plan, known, executor, progress)
    try:
        for stage in study.stages:
            if not stages.run_stage(stage):
                _say(f"litrepro: error: study {study.name}: {len(stages.failed)} job(s) failed "
                     f"({'; '.join(stages.failed)[:1500]}); {kept}; nothing written")
                return 1
    except KeyboardInterrupt:
        if executor is not None:
            executor.close(cancel=True)
            executor = None
        _say(f"study {study.name}: interrupted; {kept}")
        return 130
    except UsageError:
        raise
    except ValueError as err:                            # a stage's context refused (a failed check upstream)
        _say(f"litrepro: error: study {study.name}: {' '.join(str(err).split())[:1500]}; nothing written")
        return 1
    finally:
        stages.bar.close()
        if executor is not None:
            executor.close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)         # the Dask workers' folder this run made (never another)
    if study.stages and study.source_hashes() != plan.state.sources:
        _say(f"litrepro: error: study {study.name}: its sources changed while it ran, so its rows are not all made by "
             "the code its JSON would record; nothing written (rerun it)")
        return 1
    run_info = StudyRun(seeds=list(seeds), options=dict(options), out=out, rows=stages.rows, contexts=stages.contexts,
                        inputs=inputs, jobs=jobs, wall_seconds=round(time.perf_counter() - start, 1),
                        cpu_seconds=round(stages.cpu, 1), job_seconds=stages.job_seconds)
    try:
        outputs = study.summarise(run_info)
    except ValueError as err:
        _say(f"litrepro: error: study {study.name}: {' '.join(str(err).split())[:1500]}; nothing written")
        return 1
    if sorted(outputs) != sorted(study.outputs):
        raise LitreproError(f"study {study.name}: its summary gave {sorted(outputs)}, its declaration says "
                            f"{sorted(study.outputs)}")
    write_outputs(study, outputs, out)
    for text in study.report(outputs):
        _say(text)
    _say(f"study {study.name}: wrote {', '.join(study.outputs)} under {outdir.show(out)} "
         f"({time.perf_counter() - start:.0f} s this run, {stages.cpu:.0f} CPU-s in all its jobs)")
    return 0


def recompute(study: Study, data: Mapping[str, Any], out: Path = RENDERED) -> dict[str, Any]:
    """The main output rebuilt by today's declaration summary from the rows ``data`` keeps
    (:attr:`Study.from_committed`), with the inputs in ``out``; the fields that record how it ran are kept from
    ``data``.  Raises ``ValueError`` when the summary refuses."""
    if study.from_committed is None:
        raise UsageError(f"study {study.name} cannot be re-summarised from its committed JSON (it does not keep every "
                         "row it summarises); re-run it")
    rows, options = study.from_committed(data)
    run_info = StudyRun(seeds=list(data["seeds"]), options={**study.option_defaults(), **options}, out=Path(out),
                        rows=rows, contexts={}, inputs=read_inputs(study, out), jobs=int(data.get("jobs") or 1),
                        wall_seconds=float(data.get("wall_seconds") or 0.0),
                        cpu_seconds=float(data.get("cpu_seconds") or 0.0),
                        job_seconds={name: [0.0] * len(r) for name, r in rows.items()})
    fresh = _canonical(study.summarise(run_info)[study.main_output])
    for key in study.run_fields:                       # how it ran: the committed run's, except today's hashes
        if key in data and tuple([key]) != study.hash_path[:1]:
            fresh[key] = data[key]
    return fresh


def resummarise(study: Study, out: Path = RENDERED, *, dry_run: bool = False) -> int:
    """``--resummarise``: the main output re-derived from its own committed rows by today's summary code.

    Allowed only when nothing its rows depend on has changed: every stale item must be a summary-only hash (the
    declaration's summary, or one of :attr:`Study.summary_hash_keys`); otherwise it refuses (exit 1), and the
    study must be re-run.  The fields that record how it ran are kept, the hashes are today's."""
    from litrepro import jsonbounds, outdir

    if study.from_committed is None or len(study.outputs) != 1:
        raise UsageError(f"study {study.name} cannot be re-summarised from its committed JSON (it does not keep "
                         "every row it summarises); re-run it")
    out = outdir.absolute(out)
    path = out / study.main_output
    if not path.is_file():
        raise UsageError(f"{outdir.show(path)}: missing; run the study first")
    data = jsonbounds.read(path)
    summary_keys = {f"source study {study.name} declaration: summary", *(f"source {k}" for k in study.summary_hash_keys)}
    moved = [x for x in stale(study, data) if x not in summary_keys]
    if moved:
        _say(f"litrepro: error: study {study.name} not re-summarised: what its rows depend on changed "
             f"({', '.join(moved)[:800]}); re-run it (make {study.make_target})")
        return 1
    if dry_run:
        _say(f"study {study.name}: would re-summarise {study.main_output} from its committed per-seed rows")
        return 0
    _check_owned(study, out)
    try:
        fresh = recompute(study, data, out)
    except UsageError:
        raise
    except ValueError as err:
        _say(f"litrepro: error: study {study.name}: {' '.join(str(err).split())[:1500]}; nothing written")
        return 1
    write_outputs(study, {study.main_output: fresh}, out)
    _say(f"study {study.name}: re-summarised {study.main_output} from its committed per-seed rows")
    return 0


def write_outputs(study: Study, outputs: Mapping[str, Any], out: Path) -> None:
    """The figures, then the JSON (the commit marker), each atomically; every figure is drawn and every JSON
    encoded before anything is written."""
    from litrepro import atomic, outdir, plotting

    figures = study.figures(outputs)
    if study.has_figures() and sorted(figures) != sorted(study.pngs):
        raise LitreproError(f"study {study.name}: its figures are {sorted(figures)}, its declaration says "
                            f"{sorted(study.pngs)}")
    pngs = {rel: plotting.png_bytes(fig) for rel, fig in figures.items()}
    texts = {rel: atomic.dumps_json(data).encode("utf-8") for rel, data in outputs.items()}
    with outdir.lock(out):
        folder = outdir.OutDir(out)
        folder.remove_partials()                       # what a killed write left, proven the runner's own
        if Path(out).resolve() == RENDERED.resolve():
            folder.adopt_git_tracked(ROOT)
        folder.check_replaceable([*pngs, *texts])
        for rel, data in [*pngs.items(), *texts.items()]:
            folder.write(rel, data)
        folder.compact()


# --- The command line -----------------------------------------------------------------------------------

def _parser(study: Study | None):
    from litrepro import study_args

    p = study_args.OneLineParser(prog="litrepro study", description=__doc__.splitlines()[0], add_help=study is not None)
    p.add_argument("name", nargs="?", help="the study (see --list)")
    p.add_argument("--list", action="store_true", help="list the studies and their make targets")
    if study is None:
        return p
    if study.stages:
        p.add_argument("--seeds", default=study.default_seeds,
                       help=f"A-B inclusive, or one seed (default {study.default_seeds}; {study.min_seeds} to "
                            f"{study.max_seeds} seeds)")
        p.add_argument("--jobs", default="2", help=f"worker processes or Dask workers, 1 to {MAX_JOBS} (default 2)")
        p.add_argument("--scheduler", default="local",
                       help="local (worker processes), dask (a private local Dask cluster, TLS) or tls://HOST:PORT")
        p.add_argument("--tls-ca-file", default=None, metavar="FILE")
        p.add_argument("--tls-cert", default=None, metavar="FILE")
        p.add_argument("--tls-key", default=None, metavar="FILE")
        p.add_argument("--state", type=Path, default=STATE_ROOT, help="the per-seed rows' folder (default build/studies)")
        p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
        p.add_argument("--dry-run", action="store_true", help="print the plan and its cost, run nothing")
        if study.from_committed is not None:
            p.add_argument("--resummarise", action="store_true",
                           help="re-derive the summary from the committed per-seed rows (refused when they are stale)")
    p.add_argument("--out", type=Path, default=RENDERED, help="output folder (default rendered/)")
    for o in study.options:
        p.add_argument(o.name, default=None, help=f"{o.help} ({o.lo} to {o.hi}; default: the config's)")
    return p


def _option_value(o: Option, text: str) -> int | float:
    import math

    from litrepro import study_args

    if o.kind is int:
        return study_args.bounded_int(text, o.name, int(o.lo), int(o.hi))
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{o.name} {text[:40]!r}: expected a number from {o.lo} to {o.hi}") from None
    if not math.isfinite(value) or not o.lo <= value <= o.hi:
        raise UsageError(f"{o.name} {text[:40]!r}: must be from {o.lo} to {o.hi}")
    return value


def listing() -> list[str]:
    lines = []
    for name, s in sorted(registry().items()):
        target = f"make {s.make_target}" if s.make_target else "no make target"
        lines.append(f"{name:28s} {target:32s} {s.title}")
    return lines


def main(argv: list[str]) -> int:
    """``python -m litrepro study ...``: 0 written (or a dry run), 1 refused, 2 bad input, 130 interrupted."""
    from litrepro import study_args

    first, _ = _parser(None).parse_known_args(argv)
    if first.list:
        print("\n".join(listing()))
        return 0
    if not first.name:
        if {"-h", "--help"} & set(argv):
            _parser(None).print_help()
            return 0
        raise UsageError("litrepro study: name a study (python -m litrepro study --list shows them)")
    study = get(first.name)
    args = _parser(study).parse_args(argv)
    options = {o.key: o.default_value() if getattr(args, o.key) is None else _option_value(o, getattr(args, o.key))
               for o in study.options}
    if not study.stages:
        return run(study, seeds=[], options=options, out=args.out)
    if getattr(args, "resummarise", False):
        return resummarise(study, args.out, dry_run=args.dry_run)
    seeds = study_args.seeds(args.seeds, max_count=study.max_seeds)
    if len(seeds) < study.min_seeds:
        raise UsageError(f"--seeds {args.seeds}: study {study.name} needs at least {study.min_seeds} seeds")
    jobs = study_args.bounded_int(args.jobs, "--jobs", 1, MAX_JOBS)
    if study.validate:
        study.validate(seeds, options)
    runs = sum(len(s.seeds_of(seeds)) * s.n_arms() for s in study.stages)
    if runs > MAX_ARM_RUNS:
        raise UsageError(f"--seeds {args.seeds}: {runs} arm runs for study {study.name}; at most {MAX_ARM_RUNS}")
    from litrepro.scheduler import check_address

    check_address(args.scheduler)
    security = None
    if args.scheduler.startswith(("tcp://", "tls://")):
        from litrepro.scheduler import external_security

        security = external_security(args.tls_ca_file, args.tls_cert, args.tls_key)
    elif args.tls_ca_file or args.tls_cert or args.tls_key:
        raise UsageError("--tls-ca-file, --tls-cert and --tls-key are for an external tls:// scheduler")
    return run(study, seeds=seeds, options=options, jobs=jobs, scheduler=args.scheduler, security=security,
               out=args.out, state_root=args.state, dry_run=args.dry_run, progress=not args.no_progress)
