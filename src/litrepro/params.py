"""Parameter files and notebook parameters, validated into frozen configs.

Every method declares its knobs as a frozen dataclass whose fields are built
with :func:`knob`, which records a one-line help text and the allowed range or
choices.  :func:`validate` is the single gate every parameter passes through,
whether it comes from ``parameters/<method>.yaml``, a ``--set`` override or
papermill's injected cell: an unknown key, a wrong type or an out-of-range
value raises :class:`ParameterError` naming the key and where it came from.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from pathlib import Path
from typing import Any, Mapping, TypeVar

import yaml

from litrepro.errors import LitreproError

C = TypeVar("C")

# ------------------------------------------------------------------------------------------ bounds
#: Upper bound of every size, count and step number a run's parameters set, whatever the method:
#: :func:`validate` applies the bound of each field a config has (on top of the config's own range),
#: so a value from the parameter file, ``--set`` or a notebook's parameters cell is refused up front,
#: with one line naming the parameter and its bound, before any work.  Each bound is at least 10x the
#: largest value the parameter files, notebooks and the studies use (``tests/test_params.py`` checks it).
UPPER_BOUNDS: dict[str, int] = {
    # pinterest_rlbp (defaults: 256, 24, 6, 32, 4, 4, 64, 600, 256, 50, 3, 400, 256; the study uses 16 logged days)
    "n_campaigns": 65_536,
    "steps_per_day": 1_440,
    "segments_per_day": 1_440,
    "opportunities_per_step": 4_096,
    "logged_days": 366,
    "eval_days": 366,
    "hidden": 4_096,
    "critic_steps": 100_000,
    "batch_size": 65_536,
    "target_update_every": 100_000,
    "policy_rounds": 100,
    "actor_steps": 100_000,
    "actor_batch_size": 65_536,
    # waypoint_opd (defaults: 24, 64, 32, 8, 4, 1, 8, 64, 2, 4, 16, 32, 256, 40, 256)
    "train_end": 100_000_000,
    "validation_end": 100_000_000,
    "width": 4_096,
    "window": 65_536,
    "pretrain_batch": 65_536,
    "teacher_steps": 100_000,
    "specialist_steps": 100_000,
    "prompt_len": 65_536,
    "teacher_rl_updates": 100_000,
    "teacher_rl_rollouts": 65_536,
    "student_steps": 100_000,
    "opd_batch": 65_536,
    "max_new_tokens": 65_536,
    "deflate_min_bytes": 100_000_000,
    "eval_window": 65_536,
    "comparison_steps": 100_000,
    "comparison_eval_prompts": 65_536,
}
#: Bounds on products of fields (a cost estimate in elements or rollout tokens): several fields each
#: within :data:`UPPER_BOUNDS` can still multiply into hours.  ``name: (fields multiplied, limit)``;
#: the defaults' costs are 1000x or more below every limit.
WORK_BOUNDS: dict[str, tuple[tuple[str, ...], int]] = {
    "simulated auctions per day": (("n_campaigns", "steps_per_day", "opportunities_per_step"), 2_000_000_000),
    "logged auctions": (("n_campaigns", "steps_per_day", "opportunities_per_step", "logged_days"), 20_000_000_000),
    "evaluation auctions": (("n_campaigns", "steps_per_day", "opportunities_per_step", "eval_days"), 20_000_000_000),
    "auctions in one step's tensors": (("n_campaigns", "opportunities_per_step"), 2**26),
    "pretraining batch bytes": (("pretrain_batch", "window"), 2**24),
    "critic samples": (("critic_steps", "batch_size", "policy_rounds"), 2_000_000_000),
    "actor samples": (("actor_steps", "actor_batch_size", "policy_rounds"), 2_000_000_000),
    "pretraining bytes": (("teacher_steps", "pretrain_batch", "window"), 2_000_000_000),
    "teacher RL rollouts": (("teacher_rl_updates", "teacher_rl_rollouts"), 100_000_000),
    "student rollout tokens": (("student_steps", "opd_batch", "max_new_tokens"), 1_000_000_000),
    "comparison rollout tokens": (("comparison_steps", "opd_batch", "max_new_tokens"), 1_000_000_000),
}
#: Most items in a list-valued parameter (the longest any method uses has 3).
MAX_LIST = 64
#: Longest text of a user's value quoted in an error message (a 15 MB list is cut here).
MAX_QUOTED = 60


class ParameterError(LitreproError, ValueError):
    """A parameter is unknown, of the wrong type or out of range."""


def knob(default: Any, help: str, *, lo: float | None = None, hi: float | None = None,
         lo_open: bool = False, choices: tuple | None = None) -> Any:
    """A config field with its help text and bounds (``lo``/``hi`` inclusive unless ``lo_open``)."""
    meta = {"help": help, "lo": lo, "hi": hi, "lo_open": lo_open, "choices": choices}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _quote(value: Any, limit: int = MAX_QUOTED) -> str:
    """``repr(value)`` for a one-line message, cut at ``limit`` characters (an expanded YAML bomb is megabytes)."""
    try:
        shown = ascii(value) if isinstance(value, str) else repr(value)
    except (ValueError, RecursionError):          # an int too long to print, a list nested too deep
        return f"<{type(value).__name__}>"
    return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(shown)} characters)"


def _check_type(key: str, value: Any, tp: Any, source: str) -> Any:
    """Return ``value`` converted to ``tp`` (int -> float only) or raise."""
    origin = typing.get_origin(tp)
    if origin is list:
        (item_tp,) = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise ParameterError(f"{source}: parameter '{key}' = {_quote(value)}: expected a list of {_type_name(item_tp)}")
        if len(value) > MAX_LIST:
            raise ParameterError(f"{source}: parameter '{key}' has {len(value)} items; at most {MAX_LIST} are allowed")
        return [_check_type(f"{key}[{i}]", v, item_tp, source) for i, v in enumerate(value)]
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
        if ok and not math.isfinite(value):
            raise ParameterError(f"{source}: parameter '{key}' = {_quote(value)} is not a finite number")
    elif tp is str:
        ok = isinstance(value, str)
    else:  # pragma: no cover - a config declared a type we do not support
        raise TypeError(f"unsupported parameter type {tp!r} for '{key}'")
    if not ok:
        raise ParameterError(
            f"{source}: parameter '{key}' = {_quote(value)} has type {type(value).__name__}, expected {_type_name(tp)}")
    return value


def _check_range(key: str, value: Any, meta: Mapping[str, Any], source: str) -> None:
    values = value if isinstance(value, list) else [value]
    for v in values:
        if meta["choices"] is not None and v not in meta["choices"]:
            raise ParameterError(f"{source}: parameter '{key}' = {_quote(v)} is not one of {list(meta['choices'])}")
        lo, hi = meta["lo"], meta["hi"]
        if lo is not None and (v <= lo if meta["lo_open"] else v < lo):
            bound = f"> {lo}" if meta["lo_open"] else f">= {lo}"
            raise ParameterError(f"{source}: parameter '{key}' = {_quote(v)} is out of range: must be {bound}")
        if hi is not None and v > hi:
            raise ParameterError(f"{source}: parameter '{key}' = {_quote(v)} is out of range: must be <= {hi}")
        limit = UPPER_BOUNDS.get(key)
        if limit is not None and not isinstance(v, str) and v > limit:
            raise ParameterError(f"{source}: parameter '{key}' = {_quote(v)} is more than its upper bound {limit:_} "
                                 "(litrepro.params.UPPER_BOUNDS)")


def _check_work(values: Mapping[str, Any], source: str) -> None:
    """Refuse a configuration whose cost (a product in :data:`WORK_BOUNDS`) is over its limit."""
    for name, (fields, limit) in WORK_BOUNDS.items():
        if all(isinstance(values.get(f), int) for f in fields):
            cost = math.prod(values[f] for f in fields)
            if cost > limit:
                shown = " x ".join(f"{f}={values[f]}" for f in fields)
                raise ParameterError(f"{source}: {name} {shown} = {cost:_} is more than the limit {limit:_} "
                                     "(litrepro.params.WORK_BOUNDS)")


def validate(cls: type[C], values: Mapping[str, Any], source: str) -> C:
    """Build a frozen ``cls`` from ``values``; missing keys take their defaults.

    ``source`` names where the values came from (a file path, ``--set``,
    ``notebook parameters``) and appears in every error message.
    """
    if not isinstance(values, Mapping):
        raise ParameterError(f"{source}: expected a mapping of parameter names to values, got {type(values).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields), key=str)
    if unknown:
        raise ParameterError(f"{source}: unknown parameter {_quote(str(unknown[0]))} (known: {', '.join(sorted(fields))})")
    hints = typing.get_type_hints(cls)
    clean = {}
    for key, value in values.items():
        value = _check_type(key, value, hints[key], source)
        _check_range(key, value, fields[key].metadata, source)
        clean[key] = value
    config = cls(**clean)
    _check_work(dataclasses.asdict(config), source)
    check = getattr(config, "check", None)
    if check is not None:  # cross-field constraints
        try:
            check()
        except ValueError as err:
            raise ParameterError(f"{source}: {err}") from None
    return config


def refuse_aliases(text: str, where: str) -> None:
    """Refuse YAML anchors and aliases (``&a``, ``*a``): 300 bytes of nested aliases expand to gigabytes.

    Scans tokens only, so nothing is expanded; no parameter needs an alias.
    """
    try:
        for token in yaml.scan(text, Loader=yaml.SafeLoader):
            if isinstance(token, (yaml.AliasToken, yaml.AnchorToken)):
                raise ParameterError(f"{where}: YAML anchors and aliases (&name, *name) are not allowed")
    except yaml.YAMLError:
        return                           # not valid YAML: the parser that follows says where


def load_yaml(path: Path | str) -> dict[str, Any]:
    """Read a parameter file with ``yaml.safe_load``; errors name the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ParameterError(f"{path}: cannot read parameter file ({err.strerror})") from None
    refuse_aliases(text, str(path))
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ParameterError(f"{path}: not valid YAML: {yaml_problem(err)}") from None
    except ValueError as err:           # e.g. an integer of more than 4300 digits
        raise ParameterError(f"{path}: a value is not usable ({err})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ParameterError(f"{path}: expected a mapping of parameter names to values, got {type(data).__name__}")
    return data


def load_file(cls: type[C], path: Path | str, overrides: Mapping[str, Any] | None = None) -> C:
    """Validate a parameter file, then ``overrides`` on top of it."""
    values = load_yaml(path)
    validate(cls, values, str(path))
    if overrides:
        validate(cls, dict(overrides), "override")
        values = {**values, **overrides}
    return validate(cls, values, str(path))


_LITERALS = (bool, int, float, str, list, type(None))
_IPYTHON_NAMES = {"In", "Out", "exit", "quit", "get_ipython", "open"}


def from_namespace(cls: type[C], namespace: Mapping[str, Any], source: str = "notebook parameters") -> C:
    """Validate the literal-valued globals of a notebook as ``cls``.

    Papermill injects parameters as plain assignments and only *warns* about a
    name the notebook does not declare, so this collects every public global
    holding a literal (the parameters cell and papermill's injected cell are
    the only cells before it that assign literals) and refuses unknown names.
    """
    values = {k: v for k, v in namespace.items()
              if not k.startswith("_") and k not in _IPYTHON_NAMES
              and isinstance(v, _LITERALS) and not isinstance(v, types.ModuleType)}
    return validate(cls, values, source)


def as_dict(config: Any) -> dict[str, Any]:
    """A config as a plain dict (for JSON provenance)."""
    return dataclasses.asdict(config)


def yaml_problem(err: Exception) -> str:
    """A YAML error on one line: what went wrong and where (line, column)."""
    problem = getattr(err, "problem", None) or getattr(err, "context", None) or str(err)
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return " ".join(f"{problem}{where}".split())


def _short(text: str, limit: int = MAX_QUOTED) -> str:
    """A user value for a one-line message: escaped, and cut when long (a 5000-digit number)."""
    shown = ascii(text)
    return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(text)} characters)"


def parse_override(text: str) -> tuple[str, list[Any]]:
    """Parse ``key=value`` or ``key=v1,v2`` from ``--set``; values are YAML scalars."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or not raw.strip():
        raise ParameterError(f"--set {_short(text)}: expected key=value")
    refuse_aliases(raw, f"--set {_short(key)}")
    try:
        whole = yaml.safe_load(raw)
    except (yaml.YAMLError, ValueError):
        whole = None
    if isinstance(whole, list):  # key=[1, 2] is one list-valued setting
        return key, [whole]
    try:
        values = [yaml.safe_load(part) for part in raw.split(",")]
    except yaml.YAMLError as err:
        raise ParameterError(f"--set {_short(text)}: value is not a YAML scalar ({yaml_problem(err)})") from None
    except ValueError as err:           # an integer of more than 4300 digits
        raise ParameterError(f"--set {_short(key)}: value {_short(raw)} is not usable ({str(err).split(';')[0]})") from None
    if any(v is None for v in values):
        raise ParameterError(f"--set {_short(text)}: empty value")
    return key, values


def bounds_markdown() -> str:
    """The bounds of :data:`UPPER_BOUNDS` and :data:`WORK_BOUNDS` as a markdown table (docs/security.md)."""
    rows = ["| parameter or product | upper bound |", "|---|---:|"]
    rows += [f"| `{name}` | {bound:,} |" for name, bound in UPPER_BOUNDS.items()]
    rows += [f"| {name}: {' × '.join(f'`{f}`' for f in fields)} | {limit:,} |"
             for name, (fields, limit) in WORK_BOUNDS.items()]
    rows.append(f"| items in a list-valued parameter | {MAX_LIST} |")
    return "\n".join(rows)
