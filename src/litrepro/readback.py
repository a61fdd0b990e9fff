"""Read the generated text back: every printed interval and the word beside it, checked against the JSON.

A reader-side check (issue 34, item 2). It shares no code with the writers (``prose``, ``claims``'s block
functions, ``findings``, ``stats`` and the study modules): it parses the text a reader sees, each
``estimate [low, high]`` and each bare ``[low, high]``, into numbers at their printed precision, and requires
that some interval of the committed JSON under ``rendered/``

- lies inside the printed bounds (bounds are rounded outward, never inward),
- is within one printed unit of each bound (the bound is that interval's, not a wider one's),
- has the printed estimate at its printed precision, when one is printed,

and that the direction word printed with it ("above", "below", "higher", "lower", "no detectable difference",
">0", "<0") is the one that interval implies: above 0 for "above" and "higher", below 0 for "below" and "lower",
spanning 0 for "no detectable difference". The word is the nearest one before the interval in the same clause, after the last
comma or semicolon (for a sentence) or the cell right after it (for a table's "reads" column).

What it cannot check: which row a label names when two intervals of the JSON print the same (it accepts any
interval that fits), counts written "k of n", and numbers that are not in an interval.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterator

from litrepro.paths import ROOT

_NUM = r"[+\-−]?\d+(?:\.\d+)?(?:[eE][+\-−]?\d+)?"
#: ``+0.013 [+0.0078, +0.024]``, ``-45 % [-62 %, -32 %]`` or a bare ``[0.39, 0.41]``.
INTERVAL = re.compile(rf"(?:(?<![\w.])(?P<est>{_NUM})(?P<est_pct>\s?%)?\s+\(?)?\[(?P<lo>{_NUM})(?P<lo_pct>\s?%)?,\s*(?P<hi>{_NUM})(?P<hi_pct>\s?%)?\]")
WORDS = {"above": ">0", "higher": ">0", ">0": ">0", "below": "<0", "lower": "<0", "<0": "<0",
         "no detectable difference": "0"}
_WORD = re.compile(r"no detectable difference|(?<![\w-])(?:above|below|higher|lower)(?![\w-])|(?<![\w.])[<>]0(?![\w.])")
MARKER = re.compile(r"^<!-- (BEGIN|END) litrepro:([A-Za-z0-9_.-]+) -->[ \t]*$", re.M)
ESTIMATES = ("mean_difference", "mean", "estimate", "share", "ratio")


def _float(text: str) -> float:
    return float(text.replace("−", "-"))


def unit(text: str) -> float:
    """One unit in the last printed digit of ``text`` (``-0.0078`` -> 0.0001, ``12`` -> 1, ``1.5e-3`` -> 1e-4)."""
    t = text.replace("−", "-").lstrip("+-")
    mant, _, exp = t.lower().partition("e")
    decimals = len(mant.partition(".")[2])
    return 10.0 ** ((int(exp) if exp else 0) - decimals)


def intervals(root: Path = ROOT) -> list[tuple[float, float, list[float], str]]:
    """``(low, high, [estimates], where)`` of every pair of bounds ``NAME_low``, ``NAME_high`` in a dict (the 95%
    ``ci95_low``/``ci95_high``, Holm's ``holm_low``/``holm_high``, a bare ``low``/``high``), and of
    every ``NAME_ci95: [low, high]`` pair beside its estimate (a key starting ``NAME``), in every JSON under ``rendered/``."""
    out = []

    def walk(obj: Any, where: str) -> None:
        if isinstance(obj, dict):
            est = [float(obj[k]) for k in ESTIMATES if isinstance(obj.get(k), (int, float))
                   and not isinstance(obj.get(k), bool)]
            for low_key in [k for k in obj if k == "low" or k.endswith("_low")]:   # ci95_, holm_, or low/high
                lo, hi = obj.get(low_key), obj.get(low_key[:-len("low")] + "high")
                if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (lo, hi)):
                    out.append((float(lo), float(hi), est, f"{where}.{low_key[:-len('low')].rstrip('_') or 'interval'}"))
            for k, v in obj.items():
                if (k.endswith("_ci95") and isinstance(v, list) and len(v) == 2
                        and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)):
                    stem = k[:-len("_ci95")]                  # "slope_ci95": [low, high] beside "slope_s_per_..."
                    est = [float(x) for name, x in obj.items() if name != k and name.startswith(stem)
                           and isinstance(x, (int, float)) and not isinstance(x, bool)]
                    out.append((float(v[0]), float(v[1]), est, f"{where}.{k}"))
                walk(v, f"{where}.{k}")
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                walk(v, f"{where}[{i}]")

    for path in sorted((root / "rendered").rglob("*.json")):
        try:
            walk(json.loads(path.read_text(encoding="utf-8")), path.relative_to(root).as_posix())
        except (OSError, ValueError):
            continue                     # an unreadable file is the writers' checks' business
    return out


def _scale(pct: str | None) -> float:
    return 0.01 if pct else 1.0


def fits(m: re.Match, row: tuple[float, float, list[float], str]) -> bool:
    """Whether the printed interval ``m`` is ``row`` printed at its precision, bounds rounded outward."""
    lo, hi, est, _ = row
    plo, phi = _float(m.group("lo")) * _scale(m.group("lo_pct")), _float(m.group("hi")) * _scale(m.group("hi_pct"))
    ulo, uhi = unit(m.group("lo")) * _scale(m.group("lo_pct")), unit(m.group("hi")) * _scale(m.group("hi_pct"))
    tiny = 1e-12 * max(1.0, abs(lo), abs(hi))
    if not (plo <= lo + tiny and phi >= hi - tiny):             # outward: the printed bounds contain the interval
        return False
    if not (plo > lo - ulo * (1 + 1e-9) - tiny and phi < hi + uhi * (1 + 1e-9) + tiny):   # and are its bounds
        return False
    if m.group("est"):
        pe = _float(m.group("est")) * _scale(m.group("est_pct"))
        ue = unit(m.group("est")) * _scale(m.group("est_pct"))
        return any(abs(e - pe) <= 0.5 * ue * (1 + 1e-9) + 1e-12 * max(1.0, abs(e)) for e in est)
    return True


def sign_of(row: tuple[float, float, list[float], str]) -> str:
    lo, hi = row[0], row[1]
    return ">0" if lo > 0 else "<0" if hi < 0 else "0"


def word_for(text: str, m: re.Match, prev_end: int) -> str | None:
    """The direction word printed with the interval at ``m``: the cell right after it in a table row, else the
    nearest word before it, after the previous interval and within its line and clause."""
    line_start = text.rfind("\n", 0, m.start()) + 1
    line_end = text.find("\n", m.end())
    line = text[line_start:line_end if line_end >= 0 else len(text)]
    if line.lstrip().startswith("|"):
        after = text[m.end():line_end if line_end >= 0 else len(text)]
        cells = after.split("|")
        if len(cells) >= 2 and not cells[0].strip():
            cell = cells[1].strip()
            return cell if cell in WORDS else None
        return None
    start = max(prev_end, line_start, *(text.rfind(c, 0, m.start()) + 1 for c in ";,"))
    found = list(_WORD.finditer(text, start, m.start()))
    return found[-1].group(0) if found else None


def check_text(text: str, where: str, pool: list[tuple[float, float, list[float], str]]) -> list[str]:
    """Problems of one generated text: an interval that no JSON interval prints as, or a word it contradicts."""
    problems, prev_end = [], 0
    for m in INTERVAL.finditer(text):
        matches = [row for row in pool if fits(m, row)]
        shown = m.group(0)
        if not matches:
            problems.append(f"{where}: '{shown}' is no interval of the JSON under rendered/ at its printed precision "
                            "(a bound rounded inward, a wrong figure, or a figure no study wrote)")
        else:
            word = word_for(text, m, prev_end)
            if word is not None and not any(sign_of(r) == WORDS[word] for r in matches):
                problems.append(f"{where}: '{word}' beside '{shown}', whose interval is "
                                f"{ {'>0': 'above 0', '<0': 'below 0', '0': 'spanning 0'}[sign_of(matches[0])] } "
                                f"({matches[0][3]})")
        prev_end = m.end()
    return problems


def blocks(text: str) -> Iterator[tuple[str, str]]:
    """``(name, inner text)`` of each generated block of a page (unbalanced markers are ``claims``'s to report)."""
    open_ = None
    for m in MARKER.finditer(text):
        if m.group(1) == "BEGIN":
            open_ = (m.group(2), m.end())
        elif open_ is not None and open_[0] == m.group(2):
            yield open_[0], text[open_[1]:m.start()]
            open_ = None


def printed_outputs(path: Path) -> Iterator[tuple[str, str]]:
    """``(cell id, text)`` of every stream and plain-text output of a rendered notebook."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            text = out.get("text") if out.get("output_type") == "stream" else out.get("data", {}).get("text/plain")
            if text:
                yield str(cell.get("id", "?")), "".join(text) if isinstance(text, list) else str(text)


def check(root: Path = ROOT) -> list[str]:
    """Every problem in the generated blocks of README.md and the pages under docs/, and in the printed output of
    the rendered notebooks (the findings a chapter prints), one line each."""
    root = Path(root)
    pool = intervals(root)
    pages = ([root / "README.md"] if os.path.isfile(root / "README.md") else []) + sorted((root / "docs").rglob("*.md"))
    problems = []
    for page in pages:
        rel = page.relative_to(root).as_posix()
        for name, inner in blocks(page.read_text(encoding="utf-8")):
            problems += check_text(inner, f"{rel}: block {name!r}", pool)
    for path in sorted((root / "rendered").rglob("*.ipynb")):
        rel = path.relative_to(root).as_posix()
        for cell, text in printed_outputs(path):
            problems += check_text(text, f"{rel} cell {cell} (output)", pool)
    return problems
