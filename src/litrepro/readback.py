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

In a table row it also reads the labels: the row's cells that are some JSON interval row's label (a string field,
such as a comparison, a metric, a backup or a student start; backticks dropped, "−" read as "-") name the JSON rows
the table row is about, and

- a printed interval must be one of those rows' (the label names the row, not any interval that prints alike);
- a tally cell, "higher in 5 of 8 conditions, no detectable difference in 3" (or "k of n levels" under a header
  that says "seed SD"), must equal a count of one JSON group of exactly n such rows (the rows of one list): each
  row's word read from its own 95% interval, or, for the seed-SD column, whether the whole interval lies beyond
  plus or minus the row's ``seed_sd``.

In a sentence, a tally ("lower in 2 of 3 backups, no detectable difference in 1", "detectable at 3 of 5 levels",
"detectable after Holm in 3 of 8 conditions", "beyond the seed spread at 5 of 5 levels") is recounted the same way
from the JSON rows that carry every label written before it, or else from the rows whose intervals it prints after
it (:func:`check_sentence_tallies`).

Tables and sentences whose columns or clauses name a JSON key are read field by field in
:mod:`litrepro.readback_fields`, which :func:`check` runs too.

What it cannot check: which row a sentence (not a table row) names when two intervals of the JSON print the
same (it accepts any interval that fits), a "k of n" that is no tally of intervals ("on 15 of 20 seeds"), and
numbers that are not in an interval.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterator

from litrepro import readback_fields
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


def _label(value: str) -> str:
    """A label as a table prints it and as the JSON holds it, alike: no backticks, "-" for "−", single spaces."""
    return " ".join(value.replace("`", "").replace("−", "-").split())


def labels_of(obj: dict) -> frozenset[str]:
    """The string fields of a JSON row that label it (not its words: a verdict or a "reads" field)."""
    return frozenset(_label(v) for k, v in obj.items() if isinstance(v, str) and v.strip()
                     and "verdict" not in k and not k.endswith("reads") and _label(v) not in WORDS)


def intervals(root: Path = ROOT) -> list[tuple[float, float, list[float], str, frozenset[str]]]:
    """``(low, high, [estimates], where, labels)`` of every pair of bounds ``NAME_low``, ``NAME_high`` in a dict (the
    95% ``ci95_low``/``ci95_high``, Holm's ``holm_low``/``holm_high``, a bare ``low``/``high``), and of
    every ``NAME_ci95: [low, high]`` pair beside its estimate (a key starting ``NAME``), in every JSON under
    ``rendered/``; ``labels`` are the dict's label fields (:func:`labels_of`)."""
    out = []

    def walk(obj: Any, where: str, keys: frozenset[str] = frozenset()) -> None:
        if isinstance(obj, dict):
            est = [float(obj[k]) for k in ESTIMATES if isinstance(obj.get(k), (int, float))
                   and not isinstance(obj.get(k), bool)]
            labels = labels_of(obj) | keys
            for low_key in [k for k in obj if k == "low" or k.endswith("_low")]:   # ci95_, holm_, or low/high
                lo, hi = obj.get(low_key), obj.get(low_key[:-len("low")] + "high")
                if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (lo, hi)):
                    out.append((float(lo), float(hi), est, f"{where}.{low_key[:-len('low')].rstrip('_') or 'interval'}",
                                labels))
            for k, v in obj.items():
                if (k.endswith("_ci95") and isinstance(v, list) and len(v) == 2
                        and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)):
                    stem = k[:-len("_ci95")]                  # "slope_ci95": [low, high] beside "slope_s_per_..."
                    est = [float(x) for name, x in obj.items() if name != k and name.startswith(stem)
                           and isinstance(x, (int, float)) and not isinstance(x, bool)]
                    out.append((float(v[0]), float(v[1]), est, f"{where}.{k}", labels))
                walk(v, f"{where}.{k}", keys | {_label(k)})
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                walk(v, f"{where}[{i}]", keys)

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
    lo, hi, est = row[0], row[1], row[2]
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


_NUMERIC = re.compile(rf"{_NUM}%?")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def row_labels(line: str, vocabulary: set[str] | frozenset[str]) -> frozenset[str]:
    """The cells of a table row that are JSON labels (the row's names for what it reports)."""
    if not line.lstrip().startswith("|"):
        return frozenset()
    return frozenset(_label(c) for c in _cells(line) if _label(c) in vocabulary)


def _line_at(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start:end if end >= 0 else len(text)]


#: A ratio printed as "... is larger than ours (...; ratio [low, high] ...)": its word compares the interval with 1.
_RATIO_WORD = re.compile(r"larger than|smaller than|not shown different from")
_RATIO_INTERVAL = re.compile(rf"ratio \[(?P<lo>{_NUM}), (?P<hi>{_NUM})\]")


def check_ratio_words(text: str, where: str) -> list[str]:
    """Problems of a ratio's word: the last of "larger than", "smaller than", "not shown different from" before a
    printed ``ratio [low, high]`` in its sentence must be what the printed interval says about 1."""
    problems = []
    for m in _RATIO_INTERVAL.finditer(text):
        start = max(text.rfind(". ", 0, m.start()) + 2, text.rfind("\n", 0, m.start()) + 1, 0)
        words = _RATIO_WORD.findall(text, start, m.start())
        if not words:
            continue
        lo, hi = _float(m.group("lo")), _float(m.group("hi"))
        want = "larger than" if lo > 1 else "smaller than" if hi < 1 else "not shown different from"
        if words[-1] != want:
            problems.append(f"{where}: '{words[-1]}' beside the ratio [{m.group('lo')}, {m.group('hi')}], which reads "
                            f"'{want}' 1")
    return problems


def check_text(text: str, where: str, pool: list[tuple]) -> list[str]:
    """Problems of one generated text: an interval that no JSON interval prints as, an interval in a table row that
    is not the labelled row's, or a word it contradicts."""
    problems, prev_end = [], 0
    vocabulary = frozenset(v for v in frozenset().union(*(row[4] for row in pool if len(row) > 4))
                           if not _NUMERIC.fullmatch(v))            # a number in a cell is a figure, not a label
    for m in INTERVAL.finditer(text):
        matches = [row for row in pool if fits(m, row)]
        shown = m.group(0)
        names = row_labels(_line_at(text, m.start()), vocabulary)
        labelled = [row for row in matches if len(row) > 4 and names <= row[4]]
        if matches and names and not labelled:
            problems.append(f"{where}: '{shown}' in the row labelled {sorted(names)} is the interval of another "
                            f"row ({matches[0][3]})")
            prev_end = m.end()
            continue
        matches = labelled if names else matches
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


#: ``higher in 5 of 8 conditions, no detectable difference in 3`` or ``0 of 5 levels``.
_TALLY_HEAD = re.compile(r"^(?:(?P<word>higher|lower|no detectable difference) in )?(?P<k>\d+) of (?P<n>\d+) [a-z]+$")
_TALLY_MORE = re.compile(r"^(?P<word>higher|lower|no detectable difference) in (?P<k>\d+)$")


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _has_interval(r: Any) -> bool:
    return isinstance(r, dict) and _number(r.get("ci95_low")) and _number(r.get("ci95_high"))


def _group_row(r: dict, labels: frozenset[str]) -> tuple:
    return (labels, float(r["ci95_low"]), float(r["ci95_high"]), float(r["seed_sd"]) if _number(r.get("seed_sd")) else None,
            (float(r["holm_low"]), float(r["holm_high"])) if _number(r.get("holm_low")) and _number(r.get("holm_high"))
            else None, [float(r[k]) for k in ESTIMATES if _number(r.get(k))])


def tally_groups(root: Path = ROOT) -> list[list[tuple]]:
    """The JSON's lists of interval rows: per list, ``(labels, ci95_low, ci95_high, seed_sd, (holm_low, holm_high)
    or None, [estimates])`` of each row that has a 95% interval (labels as in :func:`labels_of`, with the keys
    above the list); and per key of a list's elements that holds an interval (``backups[i].learned_minus_fixed``),
    the group of those intervals, labelled also by the element's labels and the key."""
    groups = []

    def walk(obj: Any, keys: frozenset[str]) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(v, keys | {_label(k)})
        elif isinstance(obj, list):
            rows = [_group_row(r, labels_of(r) | keys) for r in obj if _has_interval(r)]
            if rows:
                groups.append(rows)
            nested = [k for k in dict.fromkeys(k for r in obj if isinstance(r, dict) for k in r)
                      if any(_has_interval(r.get(k)) for r in obj if isinstance(r, dict))]
            for k in nested:                       # [{"backup": "max_min", "learned_minus_fixed": {interval}}, ...]
                groups.append([_group_row(r[k], labels_of(r) | labels_of(r[k]) | keys | {_label(k)})
                               for r in obj if isinstance(r, dict) and _has_interval(r.get(k))])
            for v in obj:
                walk(v, keys)

    for path in sorted((root / "rendered").rglob("*.json")):
        try:
            walk(json.loads(path.read_text(encoding="utf-8")), frozenset())
        except (OSError, ValueError):
            continue
    return groups


def parse_tally(cell: str) -> tuple[int, dict[str, int]] | None:
    """``(n, {word: k})`` of a tally cell, the word ``""`` for a bare ``k of n``; None when it is no tally."""
    parts = [p.strip() for p in cell.split(",")]
    head = _TALLY_HEAD.match(parts[0]) if parts else None
    if not head:
        return None
    counts = {head.group("word") or "": int(head.group("k"))}
    for part in parts[1:]:
        more = _TALLY_MORE.match(part)
        if not more:
            return None
        counts[more.group("word")] = int(more.group("k"))
    return int(head.group("n")), counts


def _row_word(lo: float, hi: float) -> str:
    return "higher" if lo > 0 else "lower" if hi < 0 else "no detectable difference"


def count_rows(rows: list[tuple], beyond_sd: bool) -> dict[str, int]:
    """What a tally of ``rows`` should say: the words of their intervals, or (``beyond_sd``) how many lie wholly
    beyond plus or minus their seed SD."""
    if beyond_sd:
        return {"": sum(1 for row in rows if row[3] is not None and (row[1] > row[3] or row[2] < -row[3]))}
    out: dict[str, int] = {}
    for row in rows:
        out[_row_word(row[1], row[2])] = out.get(_row_word(row[1], row[2]), 0) + 1
    return out


def table_rows(text: str) -> Iterator[tuple[str, list[str], list[str]]]:
    """``(line, header cells, cells)`` of every data row of the markdown tables in ``text`` (separators skipped)."""
    header = None
    for line in text.splitlines():
        if not line.lstrip().startswith("|"):
            header = None
            continue
        cells = _cells(line)
        if header is None:
            header = cells
        elif not set(cells) <= {"---", ""}:
            yield line, header, cells


def check_tallies(text: str, where: str, groups: list[list[tuple]]) -> list[str]:
    """Problems of the tally cells of a text's tables: a count that no group of the labelled JSON rows gives."""
    vocabulary = frozenset(v for g in groups for row in g for v in row[0] if not _NUMERIC.fullmatch(v))
    problems = []
    for _, header, cells in table_rows(text):
        names = frozenset(_label(c) for c in cells if _label(c) in vocabulary)
        for i, cell in enumerate(cells):
            tally = parse_tally(cell)
            if tally is None:
                continue
            n, said = tally
            title = header[i] if i < len(header) else ""
            beyond_sd = "seed sd" in title.lower()
            if "" in said and not beyond_sd:
                continue                                   # a bare "k of n" under another header: not read
            if not names:
                problems.append(f"{where}: the tally '{cell}' has no label that names JSON rows")
                continue
            counts = []
            for g in groups:
                chosen = [row for row in g if names <= row[0]]
                if len(chosen) == n:
                    counts.append(count_rows(chosen, beyond_sd))
            want = {w: k for w, k in said.items() if k}
            if not any({w: k for w, k in c.items() if k} == want for c in counts):
                problems.append(f"{where}: row {sorted(names)} says '{cell}'; the {n} JSON rows so labelled give "
                                + (", ".join(str(c) for c in counts[:2]) or "no group of that size"))
    return problems


#: A tally inside a sentence: ``lower in 2 of 3 backups, no detectable difference in 1``, ``detectable at 3 of 5
#: levels``, ``detectable after Holm in 3 of 8 conditions`` or ``beyond the seed spread at 5 of 5 levels``.
_W = r"higher|lower|no detectable difference"
SENTENCE_TALLY = re.compile(
    rf"(?<![\w-])(?:(?P<word>{_W}) in (?P<k>\d+) of (?P<n>\d+) [a-z]+(?P<more>(?:, (?:{_W}) in \d+)*)"
    r"|detectable (?P<holm>after Holm )?(?:at|in) (?P<dk>\d+) of (?P<dn>\d+) [a-z]+"
    r"|beyond the seed spread at (?P<sk>\d+) of (?P<sn>\d+) [a-z]+)")


def labels_in(context: str, vocabulary: frozenset[str]) -> frozenset[str]:
    """The JSON labels written in ``context`` (backticks dropped, "−" read as "-"), each as a whole phrase, and only
    the longest where one is inside another ("waypoint - final_only", not also "waypoint")."""
    text = _label(context)
    spans = []
    for v in vocabulary:
        for m in re.finditer(rf"(?<![\w-]){re.escape(v)}(?![\w-])", text):
            spans.append((m.start(), m.end(), v))
    return frozenset(v for a, b, v in spans if not any(c <= a and b <= d and (c, d) != (a, b) for c, d, _ in spans))


def _holm_word(row: tuple) -> str:
    return _row_word(*row[4]) if len(row) > 4 and row[4] is not None else "?"


def check_sentence_tallies(text: str, where: str, groups: list[list[tuple]]) -> list[str]:
    """Problems of the tallies written in sentences (not table rows; :data:`SENTENCE_TALLY`). The rows counted are
    one JSON group's rows that carry every label the sentence names before its tally; a sentence that names none
    is about the rows whose intervals it prints after the tally (the rows of one group that share all their
    labels), as is one whose labels give no group of its n rows. The count is an independent recount of those rows: the words of their 95% intervals, how many
    exclude 0 (after Holm: their Holm intervals), or how many lie wholly beyond their seed SD."""
    vocabulary = frozenset(v for g in groups for row in g for v in row[0] if not _NUMERIC.fullmatch(v))
    problems = []
    for line in text.splitlines():
        if line.lstrip().startswith("|"):
            continue                                         # table cells are check_tallies' to read
        for m in SENTENCE_TALLY.finditer(line):
            if m.group("word"):
                n, kind = int(m.group("n")), "words"
                said = {m.group("word"): int(m.group("k"))}
                for w, k in re.findall(rf"({_W}) in (\d+)", m.group("more") or ""):
                    said[w] = int(k)
            elif m.group("dk"):
                n, kind, said = int(m.group("dn")), "holm" if m.group("holm") else "detectable", int(m.group("dk"))
            else:
                n, kind, said = int(m.group("sn")), "beyond_sd", int(m.group("sk"))
            names = labels_in(line[:m.start()], vocabulary)
            candidates = [c for c in ([row for row in g if names <= row[0]] for g in groups) if len(c) == n] \
                if names else []
            if not candidates:                               # the rows whose intervals it prints after the tally
                shown = list(INTERVAL.finditer(line, m.end()))
                for g in groups:
                    hit = [row for row in g if any(fits(x, (row[1], row[2], row[5] if len(row) > 5 else [], ""))
                                                   for x in shown)]
                    if shown and len(hit) >= len(shown):
                        common = frozenset.intersection(*(row[0] for row in hit))
                        candidates.append([row for row in g if common <= row[0]])
            counts = []
            for rows in (c for c in candidates if len(c) == n):
                if kind == "words":
                    counts.append({w: k for w, k in count_rows(rows, False).items() if k})
                elif kind == "beyond_sd":
                    counts.append(count_rows(rows, True)[""])
                else:
                    words = [_holm_word(r) if kind == "holm" else _row_word(r[1], r[2]) for r in rows]
                    counts.append(sum(w in ("higher", "lower") for w in words))
            want = {w: k for w, k in said.items() if k} if kind == "words" else said
            if not candidates:
                problems.append(f"{where}: the tally '{m.group(0)}' names no JSON rows (no label before it, no "
                                "interval of the JSON after it)")
            elif want not in counts:
                problems.append(f"{where}: '{m.group(0)}' about {sorted(names) or 'the rows it prints'}; the JSON's "
                                f"groups of {n} such rows give " + (", ".join(str(c) for c in counts[:2]) or "none"))
    return problems


def seed_check_counts(method: str, field: str, root: Path) -> tuple[int, int, list[str]]:
    """(true on every seed, boolean checks, false on some seed) of one ``*checks`` field over the rendered seed
    JSON: a check whose value is not a boolean on some seed (``"not_applicable"``) is no boolean check."""
    values: dict[str, list[Any]] = {}
    for path in sorted((root / "rendered" / method).glob("seed-*.json")):
        if not path.stem[len("seed-"):].isdigit():
            continue
        for name, v in (json.loads(path.read_text(encoding="utf-8")).get(field) or {}).items():
            values.setdefault(name, []).append(v)
    boolean = {k: v for k, v in values.items() if all(isinstance(x, bool) for x in v)}
    return (sum(all(v) for v in boolean.values()), len(boolean),
            sorted(k for k, v in boolean.items() if not all(v)))


_COUNT_CELL = re.compile(r"^(\d+) of (\d+) checks$")


def check_check_counts(text: str, where: str, root: Path) -> list[str]:
    """Problems of a table whose columns count checks ("seed-file checks true", "our extra checks true", and the
    false checks' names): each row names its method, and every count is recounted from the seed JSON."""
    problems = []
    columns = {"seed-file checks true": "checks", "our extra checks true": "extra_checks"}
    for line, header, cells in table_rows(text):
        if not any(h in columns for h in header):
            continue
        method = next((_label(c) for c in cells if _label(c) in ("pinterest_rlbp", "waypoint_opd")), None)
        if method is None:
            problems.append(f"{where}: a check-count row names no method: {line.strip()[:80]}")
            continue
        for title, cell in zip(header, cells):
            if title in columns:
                k, n, _ = seed_check_counts(method, columns[title], root)
                if cell != f"{k} of {n} checks":
                    problems.append(f"{where}: {method}, '{title}' says '{cell}'; the seed JSON gives {k} of {n}")
            elif title.startswith("false"):
                _, _, false = seed_check_counts(method, "checks", root)
                named = sorted(re.findall(r"`([^`]+)`", cell))
                if named != false:
                    problems.append(f"{where}: {method}, '{title}' names {named}; false on some seed: {false}")
    return problems


#: "600 critic steps" in a generated sentence: the number must be a critic budget of the JSON the block cites.
_CRITIC_STEPS = re.compile(r"(?<![\w.])(\d+) critic steps")
_CITED = re.compile(r"`(rendered/[\w./-]+\.json)`")


def check_critic_steps(text: str, where: str, root: Path) -> list[str]:
    """Problems of "N critic steps" in a generated block: N is no ``critic_steps`` value (nor a step count of a
    critic budget grid: a key with "steps" or "budget" in it) of the JSON files the block cites."""
    cited = [root / rel for rel in _CITED.findall(text) if (root / rel).is_file()]
    if not cited:
        return []
    allowed: set[int] = set()

    def walk(obj: Any, key: str = "") -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                if "actor" not in k:
                    walk(v, k)
        elif isinstance(obj, list):
            for v in obj:
                walk(v, key)
        elif isinstance(obj, int) and not isinstance(obj, bool) and ("steps" in key or "budget" in key):
            allowed.add(obj)
        elif isinstance(obj, str) and ("steps" in key or "budget" in key) and obj.isdigit():
            allowed.add(int(obj))

    for path in cited:
        walk(json.loads(path.read_text(encoding="utf-8")))
    return [f"{where}: '{m.group(0)}' is no critic budget of {', '.join(p.name for p in cited)}"
            for m in _CRITIC_STEPS.finditer(text) if int(m.group(1)) not in allowed]


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
    groups = tally_groups(root)
    figures = readback_fields.value_rows(root)
    effects = readback_fields.effect_rows(root)
    pages = ([root / "README.md"] if os.path.isfile(root / "README.md") else []) + sorted((root / "docs").rglob("*.md"))
    problems = []
    for page in pages:
        rel = page.relative_to(root).as_posix()
        for name, inner in blocks(page.read_text(encoding="utf-8")):
            problems += check_text(inner, f"{rel}: block {name!r}", pool)
            problems += check_tallies(inner, f"{rel}: block {name!r}", groups)
            problems += check_sentence_tallies(inner, f"{rel}: block {name!r}", groups)
            problems += check_check_counts(inner, f"{rel}: block {name!r}", root)
            problems += check_ratio_words(inner, f"{rel}: block {name!r}")
            problems += check_critic_steps(inner, f"{rel}: block {name!r}", root)
            problems += readback_fields.check(inner, f"{rel}: block {name!r}", root, figures, pool, effects)
    for path in sorted((root / "rendered").rglob("*.ipynb")):
        rel = path.relative_to(root).as_posix()
        for cell, text in printed_outputs(path):
            problems += check_text(text, f"{rel} cell {cell} (output)", pool)
            problems += check_sentence_tallies(text, f"{rel} cell {cell} (output)", groups)
            problems += check_ratio_words(text, f"{rel} cell {cell} (output)")
            problems += readback_fields.check(text, f"{rel} cell {cell} (output)", root, figures, pool, effects)
    return problems
