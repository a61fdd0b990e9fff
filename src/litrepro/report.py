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


def fmt(value: Any, digits: int = 6) -> str:
    """A number rounded to ``digits`` significant digits (never a tensor repr)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if value == 0 or not math.isfinite(value):
        return str(float(value))
    return f"{value:.{digits}g}"


def comparison_table(method: str, seed: int, metrics: Mapping[str, float]) -> pd.DataFrame:
    """This run's metrics beside the seed file's recorded ones (same seed, and mean ± std)."""
    rec_seed = recorded.per_seed_metrics(method).get(seed, {})
    rec_agg = recorded.aggregate_metrics(method)
    rows = []
    for name in sorted(set(metrics) | set(rec_agg)):
        agg = rec_agg.get(name)
        rows.append({
            "metric": name,
            f"this run (seed {seed})": fmt(metrics[name]) if name in metrics else "absent",
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
        return "Seed file not found: set LITREPRO_SEEDS_DIR to compare with the recorded figures."
    return f"Recorded figures from seed file {data['_file']}."


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
