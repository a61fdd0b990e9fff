"""A sweep's results side by side: every metric against the swept value.

``python -m litrepro run --set key=v1,v2,...`` writes each sweep point's seeds
into ``<out>/<method>/<point>/``.  :func:`load_sweep` reads them back, finds the
parameters that differ between points (the swept ones, read from each seed's
recorded parameters, not from folder names), and :func:`metric_vs_value`
plots one metric against one swept parameter: each seed as a dot, the mean
with a ±1 sample std bar.  ``notebooks/sweep_summary.ipynb`` shows them all.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from litrepro.paths import ROOT


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(data, dict) and isinstance(data.get("metrics"), dict) \
        and isinstance(data.get("provenance"), dict) and isinstance(data["provenance"].get("parameters"), dict)
    return data if ok else None


def _cell(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value


def load_sweep(results_dir: str | Path, method: str) -> tuple[pd.DataFrame, list[str]]:
    """One row per (sweep point, seed): the swept parameters, ``seed`` and every scalar metric.

    Returns the table and the names of the swept parameters (those whose
    recorded value differs between the points); both are empty without a sweep.
    A list-valued parameter appears as its JSON text (``"[0.5, 1.0, 2.0]"``).
    """
    base = Path(results_dir)
    base = base if base.is_absolute() else ROOT / base
    rows = []
    for folder in sorted(p for p in (base / method).iterdir() if p.is_dir()) if (base / method).is_dir() else []:
        for path in sorted(folder.glob("seed-*.json")):
            result = _read(path)
            if result is None:
                continue
            params = {k: v for k, v in result["provenance"]["parameters"].items() if k != "seed"}
            metrics = {k: v for k, v in result["metrics"].items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            rows.append({"point": folder.name, "seed": result.get("seed"), "params": params, "metrics": metrics})
    if not rows:
        return pd.DataFrame(), []
    keys = sorted({k for r in rows for k in r["params"]})
    swept = [k for k in keys if len({json.dumps(r["params"].get(k), sort_keys=True) for r in rows}) > 1]
    # A list (or mapping) value is shown as its JSON text: one hashable, sortable category per point.
    table = pd.DataFrame([{**{k: _cell(r["params"].get(k)) for k in swept}, "seed": r["seed"], **r["metrics"]}
                          for r in rows])
    return table.sort_values([*swept, "seed"], kind="stable").reset_index(drop=True), swept


def metric_vs_value(table: pd.DataFrame, metric: str, param: str, *, method: str = "") -> Figure:
    """``metric`` against ``param``: each seed as a dot, mean ± 1 sample std as a line with bars.

    A numeric parameter is placed on its own axis; any other (a string, a
    list) is placed by category, in sorted order.
    """
    fig = Figure(figsize=(5.5, 3.6))
    ax = fig.subplots()
    values = table[param].map(lambda v: json.dumps(v) if isinstance(v, (list, dict)) else v)
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    levels = sorted(set(values), key=lambda v: (str(type(v)), v))
    where = {v: (float(v) if numeric else i) for i, v in enumerate(levels)}
    x = values.map(where).to_numpy(dtype=float)
    y = table[metric].to_numpy(dtype=float)
    ax.plot(x, y, "o", color="0.6", markersize=4, label="seeds")
    means, stds = [], []
    for level in levels:
        sel = y[(values == level).to_numpy()]
        sel = sel[np.isfinite(sel)]
        means.append(float(sel.mean()) if len(sel) else math.nan)
        stds.append(float(sel.std(ddof=1)) if len(sel) > 1 else 0.0)
    ax.errorbar([where[v] for v in levels], means, yerr=stds, color="C0", marker="s", capsize=3, label="mean ± std")
    if not numeric:
        ax.set_xticks(range(len(levels)), [str(v) for v in levels], rotation=20)
    ax.set_xlabel(param)
    ax.set_ylabel(metric)
    ax.set_title(f"{method}: {metric} vs {param}" if method else f"{metric} vs {param}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def has_sweep(results_dir: str | Path, method_names) -> bool:
    """Whether any method folder under ``results_dir`` holds sweep-point folders with seed results."""
    base = Path(results_dir)
    return any(next(base.glob(f"{m}/*/seed-*.json"), None) for m in method_names)
