"""Holm's step-down adjustment for a family of paired intervals (the ablation tables).

For m paired differences with two-sided t-test p-values p_1 .. p_m, sorted ascending as
p_(1) <= .. <= p_(m), Holm's adjusted p-values are

    p~_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))

and a difference is called detectable at family-wise level alpha when p~ < alpha.  Beside
each raw 95% interval we show the interval at the level Holm's procedure tests that row at,
1 - alpha / (m - i + 1) for the row of rank i; its bounds are wider than the raw ones.  The
words come from p~ (a row after the first non-rejection is not rejected even if its own
interval excludes 0).  ``scipy.stats`` gives the t quantiles and p-values.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from scipy import stats


def t_test(d: Sequence[float]) -> tuple[float, float, float]:
    """(mean, standard error, two-sided p) of the per-seed differences ``d`` (p = 1 when they are identical)."""
    n = len(d)
    mean = sum(d) / n
    var = sum((x - mean) ** 2 for x in d) / (n - 1) if n > 1 else 0.0
    se = math.sqrt(var / n)
    if se == 0.0:
        return mean, 0.0, 1.0
    return mean, se, float(2 * stats.t.sf(abs(mean) / se, n - 1))


def holm(differences: dict[str, Sequence[float]], alpha: float = 0.05) -> dict[str, dict[str, Any]]:
    """Per label: ``p_raw``, ``p_holm``, the rank, the Holm level and the interval at that level, and the words.

    ``differences``: label -> per-seed paired differences (one family).
    """
    tested = {k: t_test(list(v)) for k, v in differences.items()}
    order = sorted(tested, key=lambda k: (tested[k][2], k))
    m = len(order)
    out, running = {}, 0.0
    for i, label in enumerate(order):
        mean, se, p = tested[label]
        n = len(differences[label])
        running = max(running, min(1.0, (m - i) * p))
        level = 1 - alpha / (m - i)
        half = float(stats.t.ppf(1 - (1 - level) / 2, n - 1)) * se if se > 0 else 0.0
        word = ("higher" if mean > 0 else "lower") if running < alpha else "no detectable difference"
        out[label] = {"n": n, "mean_difference": mean, "p_raw": p, "p_holm": running, "rank": i + 1,
                      "level": level, "low": mean - half, "high": mean + half, "reads": word}
    return out
