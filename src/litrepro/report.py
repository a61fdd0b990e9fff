"""What a notebook shows at its end and hands to the runner.

:func:`finish` is the last call of every method notebook.  It prints a short,
rounded digest (identical interactively and under papermill, so nbval can
compare it) and, when the runner set ``LITREPRO_RESULT_PATH``, writes the full
results there atomically.  Interactive runs and nbval write nothing.
"""

from __future__ import annotations

import math
import os
from typing import Any, Mapping

import pandas as pd

from litrepro import atomic, recorded

RESULT_ENV = "LITREPRO_RESULT_PATH"


#: Significant digits of a printed figure.  Stored outputs are compared as text by nbval on
#: machines other than the one that rendered them, where float results differ in the last
#: bits (other SIMD kernels, other reduction orders).  ``benchmarks/display_noise.py`` measures that noise
#: across ATEN_CPU_CAPABILITY default/avx2/avx512 (its output is not committed); both methods run in float64,
#: so at 5 significant digits a printed figure flips only when it lies, to within that noise, on a rounding
#: boundary.
DIGITS = 5
#: Figures that the contract says are zero "up to rounding" print as this bound unless exactly 0.
ZERO_BOUND = 1e-12


def fmt(value: Any, digits: int = DIGITS) -> str:
    """A number rounded to ``digits`` significant digits (never a tensor repr)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if value == 0 or not math.isfinite(value):
        return str(float(value))
    return f"{value:.{digits}g}"


def fmt_zero(value: float, bound: float = ZERO_BOUND) -> str:
    """A figure that should be zero: ``'< bound'`` for any float below the bound, else ``fmt``.

    Exact 0.0 prints as the bound too: whether a sum of float64 terms comes out as 0.0
    or as 2.2e-16 depends on the CPU's kernels (``benchmarks/display_noise.py`` measures it under
    each ``ATEN_CPU_CAPABILITY``; its output is not committed), so "0" versus a
    bound would itself differ between machines.  Integers (counts) print as they are.
    The JSON keeps the raw value.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if abs(value) < bound:
        return f"< {bound:.0e}"
    return fmt(value)


def display_full(table: pd.DataFrame) -> None:
    """Display ``table`` with every row and column: pandas would elide the middle of a long one, and hide
    the intervals the text cites.  The options hold only inside this call."""
    from IPython.display import display

    with pd.option_context("display.max_rows", None, "display.max_columns", None, "display.max_colwidth", None,
                           "display.width", 250):
        display(table)


def kv_table(mapping: Mapping[str, Any], digits: int = DIGITS, column: str = "value") -> pd.DataFrame:
    """A name -> value mapping as a one-column table (instead of a printed dict): floats through :func:`fmt` at
    ``digits``, everything else as its ``str``."""
    rows = {str(k): fmt(v, digits) if isinstance(v, float) else str(v) for k, v in mapping.items()}
    return pd.DataFrame({column: list(rows.values())}, index=pd.Index(list(rows), name="name"))


def show_source(fn: Any) -> None:
    """Print ``fn``'s source as it is in ``src/`` now (read with :func:`inspect.getsource`, never copied), under
    the file and line it starts at: the code of a mechanism beside its equation in a chapter."""
    import inspect
    from pathlib import Path

    from litrepro.paths import ROOT

    path = Path(inspect.getsourcefile(fn)).resolve()
    where = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    print(f"# {where}, line {inspect.getsourcelines(fn)[1]}\n{inspect.getsource(fn).rstrip()}")


def comparison_table(method: str, seed: int, metrics: Mapping[str, float]) -> pd.DataFrame:
    """This run's metrics beside the seed file's recorded ones (same seed, and mean ± std).

    A metric the seed file records as exactly 0 on every seed is a "zero up to rounding"
    contract, so this run's value prints through :func:`fmt_zero` (a bound, not noise).
    """
    rec_seed = recorded.per_seed_metrics(method).get(seed, {})
    rec_agg = recorded.aggregate_metrics(method)
    rows = []
    for name in sorted(set(metrics) | set(rec_agg)):
        agg = rec_agg.get(name)
        zero = bool(agg) and agg["mean"] == 0 and not agg.get("std")  # recorded as exactly 0
        rows.append({
            "metric": name,
            f"this run (seed {seed})": (fmt_zero if zero else fmt)(metrics[name]) if name in metrics else "absent",
            f"recorded (seed {seed})": fmt(rec_seed[name]) if name in rec_seed else "-",
            "recorded mean ± std": f"{fmt(agg['mean'], 4)} ± {fmt(agg['std'], 2)}" if agg else "-",
        })
    return pd.DataFrame(rows).set_index("metric")


def checks_table(method: str, seed: int, checks: Mapping[str, Any],
                 notes: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Each check's value in this run beside the recorded one, with our note if any."""
    rec = recorded.recorded_checks(method, seed)
    notes = notes or {}
    names = sorted(set(checks) | set(rec))
    return pd.DataFrame([{"check": n, "this run": str(checks.get(n, "absent")),
                          "recorded": str(rec.get(n, "-")), "note": notes.get(n, "")}
                         for n in names]).set_index("check")


def seed_file_status(method: str) -> str:
    data = recorded.load(method)
    if data is None:
        return "No recorded figures are shipped for this method."
    return f"Recorded figures from seed file {data['_file']} (sha256 {data['_sha256'][:12]}…), shipped in the package."


def finish(results: Mapping[str, Any]) -> None:
    """Print a digest of ``results``; write them for the runner when asked to."""
    text = atomic.dumps_json(results)  # validates: JSON-serialisable, no NaN
    checks = results["checks"]
    failed = sorted(k for k, v in checks.items() if v is False)
    print(f"{results['method']} seed {results['seed']}: {len(results['metrics'])} metrics, "
          f"{len(checks)} checks, failed checks: {failed or 'none'}")
    path = os.environ.get(RESULT_ENV)
    if path:
        atomic.write_text(path, text)
