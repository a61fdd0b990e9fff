"""Words from data: the one layer that turns a figure in a result JSON into the text that reports it.

Every result number a reader sees (in a notebook's printed finding, in a generated block of
README.md or ``docs/*.md``) goes through these functions, so it cannot drift from the data:

- a value is printed at its stated precision, rounded once from the raw float
  (``value(0.04747, 2) == '+0.047'``; ``value(5.849986e-4, 2) == '+0.00058'``, never a
  rounding of an already rounded ``5.85e-4``);
- interval bounds are rounded outward (``stats.fmt_ci``: the low bound down, the high bound up),
  so the printed interval always contains the computed one;
- the word is chosen by the interval (``stats.verdict``): "higher"/"lower" only when it excludes 0,
  "no detectable difference" when it spans 0;
- counts read "k of n conditions".

A row is what :func:`litrepro.stats.paired_ci` returns: ``{n, mean_difference, ci95_low, ci95_high}``
(the study JSON adds ``comparison``, ``metric`` and ``verdict``).
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping

from litrepro import stats

#: Significant digits of a difference and of its interval bounds, unless a caller says otherwise.
SIG = 2
#: What a reader sees when the interval spans 0.
NO_DIFFERENCE = "no detectable difference"


def value(x: float, sig: int = SIG, *, sign: bool = True) -> str:
    """``x`` at ``sig`` significant digits, rounded once from the raw float (half to even).

    ``sign`` prefixes ``+`` to a positive value (a difference); 0 prints as ``0``.
    The format is ``stats.fmt_ci``'s, so a value and its interval read alike.
    """
    if sig < 1:
        raise ValueError(f"sig must be >= 1, got {sig}")
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    return f"{x:{'+' if sign else ''}#.{sig}g}".rstrip(".")


def fixed(x: float, decimals: int) -> str:
    """``x`` with ``decimals`` decimals (a level, not a difference: no sign), rounded once."""
    return f"{x:.{decimals}f}"


def interval(row: Mapping[str, float], sig: int = SIG) -> str:
    """``'[low, high]'``: the row's 95% bounds rounded outward at ``sig`` significant digits."""
    return stats.fmt_ci(row["ci95_low"], row["ci95_high"], sig)


def estimate(row: Mapping[str, float], sig: int = SIG) -> str:
    """``'+0.047 [+0.046, +0.049]'``: the mean difference and its outward-rounded interval."""
    return f"{value(row['mean_difference'], sig)} {interval(row, sig)}"


def word_verdict(row: Mapping[str, float]) -> str:
    """:func:`stats.verdict`, except that an interval of zero width (one seed, or the same difference on every
    seed: :func:`stats.paired_ci` collapses it to the mean) earns no direction: it is ``no detectable difference``."""
    if row["ci95_low"] == row["ci95_high"]:
        return NO_DIFFERENCE
    return stats.verdict(row)


def direction(row: Mapping[str, float], higher: str = "higher", lower: str = "lower") -> str:
    """The word the interval allows: ``higher`` when it lies above 0, ``lower`` below, else no detectable
    difference (also for an interval of zero width, :func:`word_verdict`)."""
    v = word_verdict(row)
    return higher if v == ">0" else lower if v == "<0" else NO_DIFFERENCE


def compare(row: Mapping[str, float], a: str, b: str, *, measure: str, sig: int = SIG,
            higher: str = "higher", lower: str = "lower") -> str:
    """One finding: ``'<a> has lower <measure> than <b>: -0.013 [-0.023, -0.0044]'``.

    When the interval spans 0: ``'<a> against <b>, <measure>: no detectable difference (+0.0028 [-0.0031, +0.0089])'``.
    """
    word = direction(row, higher, lower)
    if word == NO_DIFFERENCE:
        return f"{a} against {b}, {measure}: {NO_DIFFERENCE} ({estimate(row, sig)})"
    return f"{a} has {word} {measure} than {b}: {estimate(row, sig)}"


def percent(share: float, sig: int = SIG, *, sign: bool = True) -> str:
    """A share as a percentage at ``sig`` significant digits: ``-0.2789 -> '-28 %'``."""
    return f"{value(100.0 * share, sig, sign=sign)} %"


def percent_interval(low: float, high: float, sig: int = SIG) -> str:
    """``'[-44 %, -9.4 %]'``: a share's bounds as percentages, rounded outward."""
    lo = stats.round_outward(100.0 * low, sig, up=False)
    hi = stats.round_outward(100.0 * high, sig, up=True)
    return f"[{value(lo, sig)} %, {value(hi, sig)} %]"


def count(k: int, n: int, noun: str = "conditions") -> str:
    """``'4 of 4 conditions'``."""
    if not 0 <= k <= n:
        raise ValueError(f"count needs 0 <= k <= n, got {k} of {n}")
    return f"{k} of {n} {noun}"


def tally(rows: Iterable[Mapping[str, float]]) -> dict[str, int]:
    """How many rows lie above 0, below 0, or span it: ``{'>0': k, '<0': k, 'no detectable difference': k, 'n': n}``."""
    out = {">0": 0, "<0": 0, NO_DIFFERENCE: 0, "n": 0}
    for row in rows:
        out[word_verdict(row)] += 1
        out["n"] += 1
    return out


def tally_sentence(rows: Iterable[Mapping[str, float]], *, higher: str = "higher", lower: str = "lower",
                   noun: str = "conditions") -> str:
    """``'higher in 4 of 8 conditions, lower in 1, no detectable difference in 3'`` (parts that are 0 are left out)."""
    t = tally(rows)
    parts = [(higher, t[">0"]), (lower, t["<0"]), (NO_DIFFERENCE, t[NO_DIFFERENCE])]
    parts = [(w, k) for w, k in parts if k]
    if not parts:
        return f"no {noun}"
    head = f"{parts[0][0]} in {count(parts[0][1], t['n'], noun)}"
    return ", ".join([head] + [f"{w} in {k}" for w, k in parts[1:]])


#: Below this, an error figure is float64 rounding (a few ulps of O(1) numbers); its digits differ between CPUs.
ROUNDING = 1e-12


def mean_sd(mean: float, sd: float, sig: int = 4, *, floor: float | None = None) -> str:
    """``'4.862 ± 0.016'``: a level and its spread, the mean at ``sig`` significant digits and the SD at 2.

    The mean is shown to the decimal of the SD's second significant digit when that is coarser,
    so no digit is printed that the spread makes meaningless.  With ``floor``, a figure that is
    not exactly 0 but has 0 < |mean| + sd < floor prints as ``'< floor'``: rounding error, whose
    digits would change from one CPU to another.
    """
    if floor is not None and 0 < abs(mean) + abs(sd) < floor:
        return f"< {floor:.0e}"
    if sd > 0 and math.isfinite(sd):
        decimals = max(0, 1 - math.floor(math.log10(sd)))
        if decimals <= 6:
            return f"{mean:.{decimals}f} ± {sd:.{decimals}f}"
        return f"{mean:.2g} ± {sd:.2g}"
    return f"{mean:.{sig}g} ± 0"


def z(x: float) -> str:
    """A z-score at one decimal, signed: ``'+1.6'``."""
    return f"{x:+.1f}"
