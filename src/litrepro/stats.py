"""Paired comparisons across seeds, with confidence intervals from scipy.stats.

Two arms run on the same seed share its data, prompts and random streams, so
they are compared per seed: d_s = a_s - b_s, and the 95% interval is the
Student-t interval of the mean of d over the n seeds,

    mean(d) ± t_{0.975, n-1} * std(d, ddof=1) / sqrt(n).

A difference whose interval excludes 0 is what the text may call an effect.

Every standard error and interval of the project goes through :func:`standard_error`
and :func:`mean_interval` (``paired_ci`` is ``mean_interval`` of the differences):

    se = s / sqrt(n),   s^2 = sum (x - mean)^2 / (n - 1)        (scipy.stats.sem)
    interval = mean -+ t_{(1 + confidence) / 2, n - 1} se     (scipy.stats.t.ppf)

``tests/test_stats.py`` checks both against scipy.stats.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import stats


def standard_error(values: Sequence[float]) -> float:
    """Standard error of the mean, s / sqrt(n) with the n - 1 divisor (``scipy.stats.sem``); 0.0 for n < 2."""
    x = np.asarray(values, dtype=float)                   # (n,)
    if x.ndim != 1:
        raise ValueError(f"standard_error needs a 1-D sequence, got shape {x.shape}")
    if x.size < 2:
        return 0.0
    return float(stats.sem(x))


def mean_interval(values: Sequence[float], *, confidence: float = 0.95) -> dict[str, Any]:
    """``{n, mean, se, ci95_low, ci95_high}``: the Student-t interval of the mean, t with n - 1 df.

    With n < 2 or no spread the interval collapses to the mean (scipy returns NaN for a
    zero standard error; a NaN never reaches JSON).
    """
    x = np.asarray(values, dtype=float)                   # (n,)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"mean_interval needs a non-empty 1-D sequence, got shape {x.shape}")
    mean, n, se = float(x.mean()), int(x.size), standard_error(x)
    if n < 2 or float(x.std(ddof=1)) == 0.0:
        low = high = mean
    else:
        half = float(stats.t.ppf((1.0 + confidence) / 2.0, n - 1)) * se
        low, high = mean - half, mean + half
    return {"n": n, "mean": mean, "se": se, "ci95_low": float(low), "ci95_high": float(high)}


def paired_ci(a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95) -> dict[str, Any]:
    """``{n, mean_difference, ci95_low, ci95_high}`` of ``a - b`` paired by position (seed).

    With n < 2 or identical differences the interval collapses to the mean
    (scipy returns NaN for a zero standard error; a NaN never reaches JSON).
    """
    a_arr, b_arr = np.asarray(a, dtype=float), np.asarray(b, dtype=float)  # (n,), (n,)
    if a_arr.shape != b_arr.shape or a_arr.ndim != 1:
        raise ValueError(f"paired_ci needs two equal-length 1-D sequences, got {a_arr.shape} and {b_arr.shape}")
    if a_arr.size == 0:
        raise ValueError("paired_ci of no pairs")
    d = mean_interval(a_arr - b_arr, confidence=confidence)   # per-seed differences
    return {"n": d["n"], "mean_difference": d["mean"], "ci95_low": d["ci95_low"], "ci95_high": d["ci95_high"]}


def verdict(row: Mapping[str, float]) -> str:
    """``'>0'``, ``'<0'`` or ``'no detectable difference'`` from a row of :func:`paired_ci`."""
    if row["ci95_low"] > 0:
        return ">0"
    if row["ci95_high"] < 0:
        return "<0"
    return "no detectable difference"


def round_outward(x: float, sig: int, up: bool) -> float:
    """``x`` rounded to ``sig`` significant digits of its own magnitude, up (towards +inf) or down.

    Rounding at the bound's own magnitude never moves it across zero: a bound of -0.0015
    rounded up at 2 digits stays -0.0015, and 0.0105 rounded up becomes 0.011.
    """
    if x == 0 or not math.isfinite(x):
        return x
    step = 10.0 ** (math.floor(math.log10(abs(x))) - sig + 1)
    q = x / step
    r = round(q)
    if abs(q - r) > 1e-9 * max(1.0, abs(q)):      # not already on the grid: round outward
        r = math.ceil(q) if up else math.floor(q)
    return r * step


def fmt_ci(low: float, high: float, sig: int = 2) -> str:
    """``[low, high]`` with the low bound rounded down and the high bound rounded up (outward), ``sig`` digits."""
    def show(x: float) -> str:          # '#' keeps trailing zeros (+0.50); a bare trailing point (+37.) goes
        return f"{x:+#.{sig}g}".rstrip(".") if x != 0 else "0"
    return f"[{show(round_outward(low, sig, up=False))}, {show(round_outward(high, sig, up=True))}]"
