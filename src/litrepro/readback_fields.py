"""Read generated tables and sentences back field by field: each printed number against the JSON key it names.

:mod:`litrepro.readback` reads every printed interval and its word. What it cannot see is a well-formed number
taken from the wrong key, column or formula (the prose misses P04, P10, P12, P14 and P19–P20 of the fifth
unseen fault audit, ``benchmarks/fault_audits/unseen_5.md``). This module reads the generated forms whose
columns or clauses name a field, and recomputes each printed number from the committed JSON (or from the
seed file) with code of its own. It imports nothing from ``prose``, ``claims``, ``findings``, ``stats`` or the
study modules.

- **The recorded-figures table** (``| figure | this run | recorded | z |``): "this run" is the mean ± sample SD
  over the rendered seeds' ``metrics[key]``; "recorded" is the same over the seed file's per-seed values; z is
  (run mean − recorded mean) / recorded SD at one decimal, or "(recorded SD 0)". A ± figure prints its SD to
  two significant digits and its mean to the SD's decimals (the house convention; a figure with SD 0 prints
  "x ± 0", and one with |mean| + SD below the floor prints "< floor").
- **Any table with "recorded", "ours" and "z" columns** (the TD-calibration table): each z must follow from the
  row's own printed recorded mean ± SD and figure, by interval arithmetic over their printed precision.
- **The λ table** (``| λ | CPC overshoot | value reward |``): each cell is the mean over the cited JSON's
  ``per_seed`` records at that λ of the column's key.
- **"x (mean of seeds a, b, c; `key`)"**: x (or x %) is the mean of ``key`` in those rendered seeds' JSON.
- **"the largest, higher by Holm [lo, hi] (conditions), is d_z D but S between-seed SDs of the comparator"**:
  the row is the Holm-detectable row of that comparison and metric with the largest \\|effect in comparator
  SDs\\| in ``effect_holm.json``, and D and S are its d_z and comparator SDs.
- **"`arm` (N seeds): OPD gradient norm g (recorded r; z per step a, per seed b, Welch p p), parameter change
  ..."**: each figure is read from that arm's ``figures`` in ``opd_calibration.json``; both z are recomputed
  (per step from the pooled mean and SD, per seed from the per-seed means).

- **Any other table whose cells name JSON rows by their labels** (an arm, a backup, a metric; with a plain
  integer such as a budget narrowing them to the rows that hold it): each bare number is a figure of those rows
  (a field, a field of an object inside, an element or the mean of a list of numbers). This is weaker than the
  forms above (any figure of the named rows will do), but a figure from another arm's row, or one that no study
  wrote (a mean plus its SD, a population SD, a halved share), is named.

- **"LABEL (z = -3.1)" in a sentence**: the numbers in parentheses right after a JSON row's name (an
  identifier such as ``opd_history.mean_gate``) are figures of a row so named, in the same weaker sense.

- **Words and counts of the sixth unseen audit's misses** (``benchmarks/fault_audits/unseen_6.md``): every nonzero
  bound of an interval has two significant digits or more; an interval column whose header names a field
  (:data:`COLUMN_KEYS`: CPC overshoot, state-dependence gain, ...) holds that field's interval; "beyond / within /
  not distinguishable from the frontier" follows the NLL gap's Holm interval, and both of the sentence's intervals are
  one frontier row's; "[lo, hi], below 0.9025" lies on the
  side it says; the backup study's check sentence lists exactly the checks whose pass rate is below 1; the TD
  calibration's spread sentence prints the record's and the study's numbers of seeds; the effect study's Holm
  count is recounted; and each diagnosis verdict on a cause ("lifts the policy above max_min ...", "does not
  settle it") follows from the intervals of the arms it lists.

Every number is compared at its printed precision: it must be within half a unit of its last printed digit.
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
from pathlib import Path
from typing import Any, Iterator, Mapping

NUM = r"[+\-−]?\d+(?:\.\d+)?(?:[eE][+\-−]?\d+)?"
_PARTS = re.compile(r"([+-]?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?")


def reading(text: str) -> tuple[float, float]:
    """``(value, half a unit of the last printed digit)`` of a printed number: '0.039' -> (0.039, 0.0005)."""
    s = text.strip().replace("−", "-")
    m = _PARTS.fullmatch(s)
    if m is None:
        raise ValueError(f"not a number: {text!r}")
    half = 0.5 * 10.0 ** (int(m.group(4) or 0) - len(m.group(3) or ""))
    return float(s), half


def agrees(text: str, x: float, scale: float = 1.0) -> bool:
    """Whether ``x * scale`` prints as ``text`` at the text's precision (within half a unit of its last digit)."""
    v, half = reading(text)
    return abs(x * scale - v) <= half * (1 + 1e-9) + 1e-12 * abs(v)


def significant(text: str) -> int:
    """Significant digits of a printed positive number: '0.039' -> 2, '8.4' -> 2, '120' -> 3."""
    digits = _PARTS.fullmatch(text.strip().replace("−", "-"))
    return len(((digits.group(2) or "") + (digits.group(3) or "")).lstrip("0"))


def decimals(text: str) -> int:
    m = _PARTS.fullmatch(text.strip().replace("−", "-"))
    return len(m.group(3) or "") - int(m.group(4) or 0)


def cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def tables(text: str) -> Iterator[tuple[int, list[str], list[list[str]]]]:
    """``(offset, header, rows)`` of every markdown table of a text (cells stripped, separator row dropped)."""
    lines = text.split("\n")
    pos, i = 0, 0
    offsets = []
    for line in lines:
        offsets.append(pos)
        pos += len(line) + 1
    while i < len(lines):
        if lines[i].lstrip().startswith("|") and i + 1 < len(lines) and re.fullmatch(r"\s*\|[\s|:-]+\|\s*", lines[i + 1]):
            header, rows, j = cells(lines[i]), [], i + 2
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                rows.append(cells(lines[j]))
                j += 1
            yield offsets[i], header, rows
            i = j
        else:
            i += 1


def holds(lo_text: str, hi_text: str, low: float, high: float) -> bool:
    """Whether printed bounds are ``[low, high]`` rounded outward: each on its side, within one printed unit."""
    (lo, h_lo), (hi, h_hi) = reading(lo_text), reading(hi_text)
    tiny = 1e-12 * max(abs(low), abs(high), 1e-300)
    return lo <= low + tiny and low - lo <= 2 * h_lo + tiny and hi >= high - tiny and hi - high <= 2 * h_hi + tiny


def _key(cell: str) -> str:
    return cell.strip().strip("`")


def _mean_sd(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def check_pm(cell: str, mean: float, sd: float, what: str, floor: float = 1e-12) -> list[str]:
    """A 'mean ± SD' cell: the numbers at their precision, the SD at two significant digits, the mean at its decimals."""
    cell = cell.replace("\\", "")
    if cell.startswith("<"):
        bound, _ = reading(cell.lstrip("< ").strip())
        return [] if 0 < abs(mean) + abs(sd) < bound else [f"{what}: '{cell}' but |mean| + SD is {abs(mean) + abs(sd):.3g}"]
    m = re.fullmatch(rf"({NUM}) ± ({NUM})", cell)
    if m is None:
        return [f"{what}: '{cell}' is no 'mean ± SD'"]
    shown_mean, shown_sd = m.groups()
    out = []
    if not agrees(shown_sd, sd):
        out.append(f"{what}: SD printed {shown_sd}, the data's is {sd:.6g}")
    if not agrees(shown_mean, mean):
        out.append(f"{what}: mean printed {shown_mean}, the data's is {mean:.6g}")
    if sd > 0 and "e" not in shown_sd.lower():
        if decimals(shown_sd) > 0 and significant(shown_sd) != 2:
            out.append(f"{what}: SD '{shown_sd}' is not at two significant digits")
        if decimals(shown_mean) != decimals(shown_sd):
            out.append(f"{what}: mean '{shown_mean}' not at the SD's decimals ('{shown_sd}')")
    return out


def _seed_values(root: Path, method: str, key: str) -> list[float] | None:
    vals = []
    for path in sorted((root / "rendered" / method).glob("seed-*.json")):
        v = json.loads(path.read_text(encoding="utf-8")).get("metrics", {}).get(key)
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            return None
        vals.append(float(v))
    return vals or None


def _recorded_values(root: Path, method: str, key: str) -> tuple[float, float] | None:
    """The seed file's per-seed values of ``key`` (under ``metrics`` or at the record's top level), else the
    summary's recorded figure; ``None`` when neither has it."""
    summary = json.loads((root / "rendered" / method / "summary.json").read_text(encoding="utf-8"))
    seeds_dir = os.environ.get("LITREPRO_SEEDS_DIR")
    path = Path(seeds_dir) / str(summary.get("recorded_seed_file", "")) if seeds_dir else None
    if path is not None and path.is_file():
        per_seed = json.loads(path.read_text(encoding="utf-8")).get("per_seed", [])
        vals = [r.get("metrics", r).get(key) for r in per_seed]
        if vals and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            return _mean_sd([float(v) for v in vals])
    rec = summary.get("comparison_with_recorded", {}).get(key, {}).get("recorded")
    return (float(rec["mean"]), float(rec["std"])) if rec else None


_CITED_SUMMARY = re.compile(r"`rendered/(\w+)/summary\.json`")


def check_recorded_table(text: str, where: str, root: Path) -> list[str]:
    """The ``| figure | this run | recorded | z |`` table, every cell recomputed from the seed JSON and the seed file."""
    out = []
    for offset, header, rows in tables(text):
        if [h.lower() for h in header] != ["figure", "this run", "recorded", "z"]:
            continue
        cited = _CITED_SUMMARY.findall(text[:offset])
        if not cited:
            out.append(f"{where}: a recorded-figures table cites no rendered/<method>/summary.json before it")
            continue
        method = cited[-1]
        for row in rows:
            key, ours, recorded, z = (row + ["", "", "", ""])[:4]
            key = _key(key)
            run = _seed_values(root, method, key)
            rec = _recorded_values(root, method, key)
            if run is None or rec is None:
                out.append(f"{where}: row `{key}` names no per-seed metric of rendered/{method}")
                continue
            mean, sd = _mean_sd(run)
            out += check_pm(ours, mean, sd, f"{where}: `{key}` this run")
            out += check_pm(recorded, *rec, f"{where}: `{key}` recorded", floor=0.0)
            if rec[1] == 0:
                if z != "(recorded SD 0)":
                    out.append(f"{where}: `{key}` z printed '{z}', the recorded SD is 0")
            elif not re.fullmatch(NUM, z) or not agrees(z, (mean - rec[0]) / rec[1]):
                out.append(f"{where}: `{key}` z printed '{z}', the data's is {(mean - rec[0]) / rec[1]:+.2f}")
    return out


def _box(text: str) -> tuple[float, float]:
    v, h = reading(text)
    return v - h, v + h


def z_range(figure: str, rec_mean: str, rec_sd: str) -> tuple[float, float]:
    """The z = (figure − recorded mean) / recorded SD that the printed numbers allow (interval arithmetic)."""
    f, m, s = _box(figure), _box(rec_mean), _box(rec_sd)
    if s[0] <= 0:
        return -math.inf, math.inf
    ends = [(a - b) / c for a in f for b in m for c in s]
    return min(ends), max(ends)


def check_z_columns(text: str, where: str) -> list[str]:
    """Tables with a ``recorded`` 'mean ± SD' column, an ``ours`` figure and ``z as is``: each z (and ``z under
    it`` beside ``ours under it``) must follow from the row's own printed numbers."""
    out = []
    pairs = (("ours", "z as is"), ("ours under it", "z under it"))
    for _, header, rows in tables(text):
        low = [h.lower() for h in header]
        if "recorded" not in low or not any(z in low for _, z in pairs):
            continue
        for row in rows:
            cell = dict(zip(low, row))
            m = re.fullmatch(rf"({NUM}) ± ({NUM})", cell.get("recorded", ""))
            if m is None:
                continue
            for fig, zcol in pairs:
                f, z = cell.get(fig, ""), cell.get(zcol, "")
                if not (re.fullmatch(NUM, f) and re.fullmatch(NUM, z)):
                    continue
                lo, hi = z_range(f, *m.groups())
                v, half = reading(z)
                if v + half < lo - 1e-9 or v - half > hi + 1e-9:
                    out.append(f"{where}: row {row[0]}: '{zcol}' {z} does not follow from recorded "
                               f"{cell['recorded']} and '{fig}' {f} (z in [{lo:.3g}, {hi:.3g}])")
    return out


_CITED_JSON = re.compile(r"`(rendered/[\w./-]+\.json)`")
#: The λ table's columns and the per-seed record key each one prints.
LAMBDA_COLUMNS = {"λ": "lambda", "cpc overshoot": "cpc_overshoot", "value reward": "value"}


def check_lambda_table(text: str, where: str, root: Path) -> list[str]:
    """``| λ | CPC overshoot | value reward |``: each cell the mean over seeds of its key at the row's λ."""
    out = []
    for offset, header, rows in tables(text):
        low = [h.lower() for h in header]
        if low[:1] != ["λ"] or not set(low) <= set(LAMBDA_COLUMNS):
            continue
        cited = _CITED_JSON.findall(text[:offset])
        data = json.loads((root / cited[-1]).read_text(encoding="utf-8")) if cited else {}
        per_seed = data.get("per_seed", {})
        if not per_seed:
            out.append(f"{where}: a λ table cites no JSON with per_seed records before it")
            continue
        for row in rows:
            shown = reading(row[0])[0]
            lam = [min(recs, key=lambda r: abs(r["lambda"] - shown)) for recs in per_seed.values()]
            if not all(agrees(row[0], r["lambda"]) for r in lam):
                out.append(f"{where}: λ {row[0]} is not one record per seed of {cited[-1]}")
                continue
            for col, cell in zip(low[1:], row[1:]):
                key = LAMBDA_COLUMNS[col]
                mean = statistics.fmean(r[key] for r in lam)
                if not agrees(cell, mean):
                    out.append(f"{where}: λ {row[0]}, '{col}' printed {cell}, the mean of `{key}` is {mean:.4g}")
    return out


SEED_MEAN = re.compile(rf"(?<![\w.])(?P<num>{NUM})(?P<pct>\s?%)?[^()\n]*?\(mean of seeds (?P<seeds>\d+(?:, \d+)*); `(?P<key>\w+)`\)")


def _find(obj: Any, key: str) -> list[float]:
    found = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == key and isinstance(v, (int, float)) and not isinstance(v, bool):
                found.append(float(v))
            elif k == key and isinstance(v, dict) and isinstance(v.get("mean"), (int, float)):
                found.append(float(v["mean"]))
            else:
                found += _find(v, key)
    elif isinstance(obj, list):
        for v in obj:
            found += _find(v, key)
    return found


def check_seed_means(text: str, where: str, root: Path) -> list[str]:
    """"x (mean of seeds a, b, c; `key`)": x is the mean over those rendered seeds of ``key`` (x % is 100 times it)."""
    out = []
    for m in SEED_MEAN.finditer(text):
        seeds, key = [s.strip() for s in m.group("seeds").split(",")], m.group("key")
        for method_dir in sorted((root / "rendered").iterdir()):
            files = [method_dir / f"seed-{s}.json" for s in seeds]
            if not all(f.is_file() for f in files):
                continue
            vals = [_find(json.loads(f.read_text(encoding="utf-8")), key) for f in files]
            if all(len(v) == 1 for v in vals):
                mean = statistics.fmean(v[0] for v in vals)
                if not agrees(m.group("num"), mean, 100.0 if m.group("pct") else 1.0):
                    out.append(f"{where}: '{m.group(0)}' but the mean of `{key}` over seeds {', '.join(seeds)} is {mean:.4g}")
                break
        else:
            out.append(f"{where}: `{key}` is no single figure of every seed named in '{m.group(0)}'")
    return out


HOLM_LARGEST = re.compile(
    rf"(?P<comp>\w+ - \w+), (?P<metric>\w+): detectable after Holm in (?P<k>\d+) of (?P<n>\d+) conditions; the largest, "
    rf"(?P<word>higher|lower) by Holm \[(?P<lo>{NUM}), (?P<hi>{NUM})\] \((?P<cond>[^)]*)\), is d_z (?P<dz>{NUM}) but "
    rf"(?P<sds>{NUM}) between-seed SDs of the comparator")
#: The effect study's condition keys, in the order the sentence prints them.
HOLM_CONDITION = ("teacher", "student_start", "teacher_rl_rollouts")


def check_holm_largest(text: str, where: str, root: Path) -> list[str]:
    """"the largest, ... is d_z D but S between-seed SDs": the row of largest |in_comparator_sds| among the
    comparison and metric's Holm-detectable rows, its Holm bounds, its d_z and its comparator SDs."""
    out, rows = [], None
    for m in HOLM_LARGEST.finditer(text):
        if rows is None:
            rows = json.loads((root / "rendered/waypoint_opd/effect_holm.json").read_text(encoding="utf-8"))["rows"]
        sub = [r for r in rows if r["comparison"] == m.group("comp") and r["metric"] == m.group("metric")]
        kept = [r for r in sub if r["holm_low"] > 0 or r["holm_high"] < 0]
        if not kept:
            out.append(f"{where}: '{m.group(0)[:80]}…' but no row of that comparison and metric is detectable after Holm")
            continue
        big = max(kept, key=lambda r: abs(r["in_comparator_sds"]))
        cond = ", ".join(f"{big[k]} rollouts" if k == "teacher_rl_rollouts" else str(big[k]) for k in HOLM_CONDITION)
        word = "higher" if big["holm_low"] > 0 else "lower"
        problems = [f"conditions ({m.group('cond')}) are not the largest row's ({cond})" if m.group("cond") != cond else "",
                    f"word '{m.group('word')}', the row's is '{word}'" if m.group("word") != word else "",
                    f"Holm [{m.group('lo')}, {m.group('hi')}] is not the row's [{big['holm_low']:.3g}, {big['holm_high']:.3g}] "
                    "rounded outward" if not holds(m.group("lo"), m.group("hi"), big["holm_low"], big["holm_high"]) else "",
                    f"d_z {m.group('dz')}, the row's is {big['effect_size_dz']:+.2g}" if not two_digits(m.group("dz"), big["effect_size_dz"]) else "",
                    f"{m.group('sds')} comparator SDs, the row's is {big['in_comparator_sds']:+.2g}"
                    if not two_digits(m.group("sds"), big["in_comparator_sds"]) else "",
                    f"{m.group('k')} of {m.group('n')}, the JSON has {len(kept)} of {len(sub)}"
                    if (int(m.group("k")), int(m.group("n"))) != (len(kept), len(sub)) else ""]
        out += [f"{where}: {m.group('comp')}, {m.group('metric')}: {p}" for p in problems if p]
    return out


OPD_ARM = re.compile(
    rf"`(?P<arm>[\w.]+)` \((?P<n>\d+) seeds\): OPD gradient norm (?P<g>{NUM}) \(recorded (?P<gr>{NUM}); z per step "
    rf"(?P<zs>{NUM}), per seed (?P<zp>{NUM})(?:, Welch p (?P<p>{NUM}))?\), parameter change (?P<d>{NUM}) \(recorded "
    rf"(?P<dr>{NUM}); z (?P<dz>{NUM})\); mean \|A\| per token (?P<a>{NUM}), gradient norm / mean \|A\| (?P<q>{NUM})")


def check_opd_calibration(text: str, where: str, root: Path) -> list[str]:
    """Each OPD-calibration arm sentence, figure by figure, against that arm of ``opd_calibration.json``."""
    out, arms = [], None
    for m in OPD_ARM.finditer(text):
        if arms is None:
            data = json.loads((root / "rendered/waypoint_opd/opd_calibration.json").read_text(encoding="utf-8"))
            arms = {a["arm"]: a for a in data["arms"]}
        arm = arms.get(m.group("arm"))
        if arm is None:
            out.append(f"{where}: `{m.group('arm')}` is no arm of opd_calibration.json")
            continue
        g, d = arm["figures"]["opd_history.gradient_norm"], arm["figures"]["metrics.parameter_delta_l2"]
        z_step = (g["run_mean"] - g["recorded_mean"]) / g["recorded_std"]
        z_seed = ((statistics.fmean(g["run_seed_means"]) - statistics.fmean(g["recorded_seed_means"])) / g["recorded_seed_sd"]
                  if g.get("recorded_seed_means") else z_step)
        want = {"n": float(len(arm["seeds"])), "g": g["run_mean"], "gr": g["recorded_mean"], "zs": z_step, "zp": z_seed,
                "p": g.get("welch_p"), "d": d["run_mean"], "dr": d["recorded_mean"],
                "dz": (d["run_mean"] - d["recorded_mean"]) / d["recorded_std"], "a": arm["mean_abs_advantage"],
                "q": arm["gradient_norm_per_abs_advantage"]}
        for name, x in want.items():
            shown = m.group(name)
            if (shown is None) != (x is None) or (shown is not None and not agrees(shown, x)):
                out.append(f"{where}: `{m.group('arm')}` {name} printed {shown}, the JSON gives {x if x is None else f'{x:.4g}'}")
    return out


def _label(value: str) -> str:
    return " ".join(value.replace("`", "").replace("−", "-").split())


_VERDICT_WORDS = {"above", "below", "higher", "lower", "no detectable difference", ">0", "<0"}


def value_rows(root: Path) -> list[tuple[frozenset[str], list[float]]]:
    """``(labels, numbers)`` of every JSON object under ``rendered/`` that has a label: its string fields (not its
    verdict words) and the keys above it; its numbers are its own numeric fields and those of the objects directly
    inside it (``{"mean": ...}``)."""
    out = []

    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    def nums(obj: dict) -> list[float]:
        """Its numeric fields, and each list of numbers' elements (a per-action share, a per-action bias) and mean
        (a per-seed list's mean over seeds)."""
        lists = [v for v in obj.values() if isinstance(v, list) and v and all(map(number, v))]
        return [float(v) for v in obj.values() if number(v)] + [float(x) for v in lists for x in v] + [statistics.fmean(v) for v in lists]

    def walk(obj: Any, keys: frozenset[str]) -> None:
        if isinstance(obj, dict):
            labels = frozenset(_label(v) for k, v in obj.items() if isinstance(v, str) and v.strip() and "verdict" not in k
                               and not k.endswith("reads") and _label(v) not in _VERDICT_WORDS) | keys
            values = nums(obj) + [x for v in obj.values() if isinstance(v, dict) for x in nums(v)]
            if labels and values:
                out.append((labels, values))
            for k, v in obj.items():
                arm_at = re.fullmatch(r"(.+)_\d+", k)           # "max_min_600": the arm max_min at 600 steps
                walk(v, keys | {_label(k)} | ({_label(arm_at.group(1))} if arm_at else set()))
        elif isinstance(obj, list):
            for v in obj:
                walk(v, keys)

    for path in sorted((root / "rendered").rglob("*.json")):
        try:
            walk(json.loads(path.read_text(encoding="utf-8")), frozenset({"@" + path.relative_to(root).as_posix()}))
        except (OSError, ValueError):
            continue
    return out


def cited_rows(text: str, index: dict[str, Any]) -> set[int] | None:
    """The rows of the JSON files a text cites (`` `rendered/....json` ``), or ``None`` when it cites none."""
    files = [f"@{c}" for c in _CITED_JSON.findall(text) if f"@{c}" in index]
    return set().union(*(set(index[f]) for f in files)) if files else None


_BARE = re.compile(rf"(?P<num>{NUM})(?P<pct>\s?%)?")


def check_labelled_figures(text: str, where: str, rows: list[tuple[frozenset[str], list[float]]]) -> list[str]:
    """In a table row whose cells name JSON rows by their labels (an arm, a backup, a metric), every bare number
    (a cell that is one number, not an interval) must be a figure of one of those rows at its printed precision:
    a figure from another row, or one no study wrote (a mean plus its SD, a population SD), is named."""
    out = []
    index: dict[str, set[int]] = {}
    for i, (labels, _) in enumerate(rows):
        for lab in labels:
            index.setdefault(lab, set()).add(i)
    cited = cited_rows(text, index)
    for _, header, table in tables(text):
        if [h.lower() for h in header] == ["figure", "this run", "recorded", "z"]:
            continue                           # read cell by cell by check_recorded_table
        for row in table:
            names = {_label(c) for c in row if _label(c) in index and not re.fullmatch(rf"{NUM}%?", _label(c))}
            if not names:
                continue
            hits = set.intersection(*(index[n] for n in names))
            hits = (hits & cited) or hits if cited else hits        # the cited file's rows, when it has such rows
            if not hits:
                continue
            steps = [int(c.strip()) for c in row if re.fullmatch(r"\d+", c.strip())]   # `max_min` | 600: at 600 steps
            at = {i for i in hits if all(k in rows[i][1] or any(lab.endswith(f"_{k}") for lab in rows[i][0]) for k in steps)}
            hits = at or hits                  # integers that no row holds are structure of the table alone
            for col, cell in zip(header, row):
                m = _BARE.fullmatch(cell.strip())
                if m is None or re.fullmatch(r"\d+", cell.strip()):
                    continue                   # a plain integer is structure (a budget, a bound), as for claims
                scale = 100.0 if m.group("pct") else 1.0
                if not any(agrees(m.group("num"), x, scale) for i in hits for x in rows[i][1]):
                    out.append(f"{where}: row {sorted(names)}, '{col}' {cell}: no figure of the rows so labelled "
                               "prints as it")
    return out


_LABELLED = re.compile(r"(?P<label>`?[A-Za-z_][\w.-]*`?) \((?P<inner>[^()\[\]]*)\)")


def check_labelled_sentences(text: str, where: str, rows: list[tuple[frozenset[str], list[float]]]) -> list[str]:
    """"LABEL (z = -3.1)", "LABEL (seed SD 0.081)": in a sentence, the numbers in parentheses right after a JSON
    label must be figures of a row so labelled (plain integers, read as structure, are skipped)."""
    out = []
    labelled: dict[str, list[int]] = {}
    for i, (labels, _) in enumerate(rows):
        for lab in labels:
            labelled.setdefault(lab, []).append(i)
    cited = cited_rows(text, labelled)
    for m in _LABELLED.finditer(text):
        label = _label(m.group("label"))
        if label not in labelled or re.fullmatch(NUM, label) or not re.search(r"[_.`]", m.group("label")):
            continue                           # a plain word ("steps") is prose, not a JSON row's name
        named = [i for i in labelled[label] if cited is None or i in cited] or labelled[label]
        for n in re.finditer(rf"(?<![\w.]){NUM}(?P<pct>\s?%)?(?![\w.])", m.group("inner")):
            shown = n.group(0).rstrip("% ")
            if re.fullmatch(r"\d+", shown):
                continue
            scale = 100.0 if n.group("pct") else 1.0
            if not any(agrees(shown, x, scale) for i in named for x in rows[i][1]):
                out.append(f"{where}: '{m.group(0)}': {n.group(0)} is no figure of a row labelled {label}")
    return out


#: Printed intervals whose generator asks for more than the house's two significant digits, by the words right before
#: the interval (the TD calibration's fitted exponent, its one-step ratio and its mean crossing step), with the digits.
MORE_DIGITS = (("td_loss_before with exponent ", 3), ("After 1 Adam step our ratio is ", 4),
               ("across seeds (mean ", 3))


def check_bound_precision(text: str, where: str) -> list[str]:
    """Every nonzero bound of a printed decimal interval has exactly two significant digits (the house rule: a bound
    printed as ``-0.04`` for ``-0.040`` has lost a digit a reader needs to compare it with its neighbours, and one
    printed as ``-0.0403`` claims a precision the interval does not have), or the digits :data:`MORE_DIGITS` names for
    its context. Intervals of whole numbers (counts of updates, floored and ceiled) are read as counts."""
    out = []
    for m in re.finditer(rf"\[(?P<lo>{NUM})(?:\s?%)?, (?P<hi>{NUM})(?:\s?%)?\]", text):
        if not any(c in m.group("lo") + m.group("hi") for c in ".eE+-−"):
            continue                                       # "[77, 113] updates": whole-number bounds of a count
        before = text[max(0, m.start() - 60):m.start()]
        want = next((d for words, d in MORE_DIGITS if before.endswith(words)), 2)
        for b in (m.group("lo"), m.group("hi")):
            if reading(b)[0] != 0 and significant(b) != want:
                out.append(f"{where}: '{m.group(0)}': bound {b} is printed with {significant(b)} significant digits, "
                           f"not {want}")
    return out


#: Table columns whose header names the JSON field its intervals come from: (words in the header, a fragment of
#: the JSON path of the interval).  A column of CPC overshoot that prints the true-value interval is named.
COLUMN_KEYS = (("cpc overshoot", "cpc_overshoot"), ("state-dependence gain", "state_gain"),
               ("rank correlation", "rank_correlation"), ("greedy action agrees", "greedy"),
               ("share of the per-kind headroom", "share"), ("holm-adjusted", "holm"))


def check_interval_columns(text: str, where: str, pool: list[tuple]) -> list[str]:
    """An interval in a column of :data:`COLUMN_KEYS` is one of the JSON's intervals of that field."""
    out = []
    for _, header, table in tables(text):
        keys = [next((frag for words, frag in COLUMN_KEYS if words in h.lower()), None) for h in header]
        if not any(keys):
            continue
        for row in table:
            for col, frag, cell in zip(header, keys, row):
                m = re.search(rf"\[(?P<lo>{NUM})(?P<pct>\s?%)?, (?P<hi>{NUM})\s?%?\]", cell)
                if frag is None or m is None:
                    continue
                scale = 0.01 if m.group("pct") else 1.0
                if not any(frag in p[3] and holds(m.group("lo"), m.group("hi"), p[0] / scale, p[1] / scale) for p in pool):
                    out.append(f"{where}: row {row[0]}, column '{col}': {m.group(0)} is no interval of a `{frag}` field")
    return out


_FRONTIER = re.compile(rf"is (?P<words>beyond the best final-only learning rate|within it \(behind the frontier\)|not "
                       rf"distinguishable from it)[^:]*: at the same transfer its NLL change minus the frontier's is "
                       rf"\[(?P<lo>{NUM}), (?P<hi>{NUM})\] Holm-adjusted over the (?P<m>\d+) arms placed on the frontier "
                       rf"\(unadjusted \[(?P<rlo>{NUM}), (?P<rhi>{NUM})\], (?P<side>lower|higher|no detectable difference)\)")
_FRONTIER_START = re.compile(r"at the same transfer its NLL change minus the frontier's is")


def check_frontier_words(text: str, where: str, root: Path) -> list[str]:
    """The frontier sentence of the transfer study, read against ``transfer_study.json``'s ``frontier`` rows: the
    first interval is one row's Holm interval (``holm_low``, ``holm_high``) and the raw one the same row's
    ``nll_gap_to_frontier``; the family size is the number of rows; "beyond the best final-only learning rate"
    needs the Holm interval below 0, "within it" above 0, "not distinguishable" spanning 0; and the raw side word
    (lower / higher / no detectable difference) follows the raw interval. A sentence of that start which this
    form does not parse is named too."""
    out, parsed = [], 0
    rows = None
    for m in _FRONTIER.finditer(text):
        parsed += 1
        if rows is None:
            rows = json.loads((root / "rendered/waypoint_opd/transfer_study.json").read_text(encoding="utf-8"))["frontier"]
        lo, hi = reading(m.group("lo"))[0], reading(m.group("hi"))[0]
        want = ("beyond the best final-only learning rate" if hi < 0 else "within it (behind the frontier)" if lo > 0
                else "not distinguishable from it")
        if m.group("words") != want:
            out.append(f"{where}: '{m.group('words')}' beside the gap [{m.group('lo')}, {m.group('hi')}], which reads '{want}'")
        rlo, rhi = reading(m.group("rlo"))[0], reading(m.group("rhi"))[0]
        side = "lower" if rhi < 0 else "higher" if rlo > 0 else "no detectable difference"
        if m.group("side") != side:
            out.append(f"{where}: '{m.group('side')}' beside the raw gap [{m.group('rlo')}, {m.group('rhi')}], which reads '{side}'")
        if int(m.group("m")) != len(rows):
            out.append(f"{where}: a Holm family of {m.group('m')} frontier arms, but the study places {len(rows)} on it")
        if not any(holds(m.group("lo"), m.group("hi"), r["holm_low"], r["holm_high"])
                   and holds(m.group("rlo"), m.group("rhi"), r["nll_gap_to_frontier"]["ci95_low"],
                             r["nll_gap_to_frontier"]["ci95_high"]) for r in rows):
            out.append(f"{where}: frontier gap Holm [{m.group('lo')}, {m.group('hi')}] with raw [{m.group('rlo')}, "
                       f"{m.group('rhi')}] is no row's pair of intervals in transfer_study.json")
    if len(_FRONTIER_START.findall(text)) != parsed:
        out.append(f"{where}: a frontier sentence that the read-back cannot parse "
                   f"({len(_FRONTIER_START.findall(text))} found, {parsed} parsed)")
    return out


_AGAINST = re.compile(rf"\[(?P<lo>{NUM}), (?P<hi>{NUM})\],? (?P<word>above|below) (?P<ref>{NUM})(?!\d|\.\d)")


def check_against_reference(text: str, where: str) -> list[str]:
    """"[lo, hi], below 0.9025": an interval set against a printed value lies wholly on the side the word says."""
    out = []
    for m in _AGAINST.finditer(text):
        lo, hi, ref = (reading(m.group(k))[0] for k in ("lo", "hi", "ref"))
        if (m.group("word") == "above" and not lo > ref) or (m.group("word") == "below" and not hi < ref):
            out.append(f"{where}: '{m.group(0)}': the interval is not {m.group('word')} {m.group('ref')}")
    return out


_CHECK_RATES = re.compile(r"`(?P<check>\w+)` held on (?P<pct>" + NUM + r") % of the seeds of `(?P<backup>\w+)`")
_ALL_HELD = re.compile(r"all (?P<n>\d+) checks held on every seed of every backup")


def check_pass_rate_sentence(text: str, where: str, root: Path) -> list[str]:
    """The backup study's check sentence: the checks it lists as short of every seed are exactly those whose pass
    rate in ``backup_study.json`` is below 1, each at its rate; "all N checks held" needs every rate 1."""
    listed = {(m.group("backup"), m.group("check")): m.group("pct") for m in _CHECK_RATES.finditer(text)}
    every = _ALL_HELD.search(text)
    if not listed and not every:
        return []
    rates = json.loads((root / "rendered/pinterest_rlbp/backup_study.json").read_text(encoding="utf-8"))["check_pass_rates"]
    short = {(b, c): r for b, per in rates.items() for c, r in per.items() if r < 1}
    out = []
    if every and short:
        out.append(f"{where}: '{every.group(0)}' but {len(short)} check(s) fell short on some seed: {sorted(short)}")
    if every and int(every.group("n")) != len({c for per in rates.values() for c in per}):
        out.append(f"{where}: '{every.group(0)}' but the study has {len({c for per in rates.values() for c in per})} checks")
    if listed and set(listed) != set(short):
        out.append(f"{where}: the checks listed short of every seed {sorted(listed)} are not the JSON's {sorted(short)}")
    out += [f"{where}: `{c}` on `{b}` printed {p} %, the JSON's rate is {100 * short[(b, c)]:.4g} %"
            for (b, c), p in listed.items() if (b, c) in short and not agrees(p, short[(b, c)], 100.0)]
    return out


_SPREAD = re.compile(rf"the record's seed-to-seed spread \(SD/mean (?P<rec>{NUM}), n = (?P<n_rec>\d+)\) is "
                     rf"(?P<word>larger|smaller) than ours \((?P<ours>{NUM}), n = (?P<n_ours>\d+)")


def check_spread_sentence(text: str, where: str, root: Path) -> list[str]:
    """The TD calibration's spread sentence: n of the record is the seed file's recorded seeds (the rendered
    summary's recorded n), ours the study's seeds, and "larger"/"smaller" follows the two printed CVs."""
    out = []
    for m in _SPREAD.finditer(text):
        summary = json.loads((root / "rendered/pinterest_rlbp/summary.json").read_text(encoding="utf-8"))
        n_rec = summary["comparison_with_recorded"]["td_loss_after"]["recorded"]["n"]
        n_ours = len(json.loads((root / "rendered/pinterest_rlbp/td_calibration.json").read_text(encoding="utf-8"))["seeds"])
        if int(m.group("n_rec")) != n_rec or int(m.group("n_ours")) != n_ours:
            out.append(f"{where}: spread sentence prints n = {m.group('n_rec')} and {m.group('n_ours')}, the record has "
                       f"{n_rec} seeds and the study {n_ours}")
        rec, ours = reading(m.group("rec"))[0], reading(m.group("ours"))[0]
        if (m.group("word") == "larger") != (rec > ours):
            out.append(f"{where}: '{m.group(0)}': {m.group('rec')} is not {m.group('word')} than {m.group('ours')}")
    return out


_HOLM_COUNT = re.compile(r"Of the effect study's (?P<n>\d+) paired intervals, (?P<raw>\d+) exclude 0 on their own and "
                         r"(?P<holm>\d+) remain detectable after Holm's adjustment over all (?P<n2>\d+)")


def check_holm_counts(text: str, where: str, root: Path) -> list[str]:
    """The effect-Holm count sentence, recounted from ``effect_holm.json``'s raw and Holm intervals."""
    out = []
    for m in _HOLM_COUNT.finditer(text):
        rows = json.loads((root / "rendered/waypoint_opd/effect_holm.json").read_text(encoding="utf-8"))["rows"]
        raw = sum(r["ci95_low"] > 0 or r["ci95_high"] < 0 for r in rows)
        holm = sum(r["holm_low"] > 0 or r["holm_high"] < 0 for r in rows)
        shown = tuple(int(m.group(k)) for k in ("n", "raw", "holm", "n2"))
        if shown != (len(rows), raw, holm, len(rows)):
            out.append(f"{where}: '{m.group(0)}' but the JSON has {len(rows)} rows, {raw} excluding 0 raw and {holm} after Holm")
    return out


#: The diagnosis's verdict on a cause, as printed, from the intervals of the arms that change it.
CAUSE_WORDS = {"finds_headroom": "lifts the policy above max_min and above the fixed gain",
               "lifts_to_fixed": "lifts the policy above max_min, to no detectable difference from the fixed gain",
               "lifts": "lifts the policy above max_min; against the fixed gain",
               "not_sufficient": "leaves the policy below the fixed gain and not detectably above max_min",
               "open": "does not settle it",
               "within_placebo": "moves the policy above max_min, but each such interval's lower end lies within the placebo's"}
_PLACEBO = re.compile(rf"The placebo, [^:\n]*?max_min \(\[(?P<lo>{NUM}), (?P<hi>{NUM})\]\)")
_CAUSE = re.compile(r"^(?:- )?Changing (?P<rest>.*)$", re.M)
_ARM_CLAUSE = re.compile(rf"(?P<arm>[\w.]+) is [^;]*?the fixed gain \(\[(?P<flo>{NUM}), (?P<fhi>{NUM})\]\) and [^;]*?max_min "
                         rf"\(\[(?P<mlo>{NUM}), (?P<mhi>{NUM})\]\)")


def _cause(arms: list[tuple[float, float, float, float]], placebo_high: float | None = None) -> str:
    above_base = [a for a in arms if a[2] > 0]
    below_fixed = [a for a in arms if a[1] < 0]
    if any(a[0] > 0 for a in above_base):
        return "finds_headroom"
    within = placebo_high is not None and all(a[2] <= placebo_high for a in above_base)
    if len(above_base) == len(arms) and not below_fixed:
        return "within_placebo" if within else "lifts_to_fixed"
    if above_base:
        return "within_placebo" if within else "lifts"
    return "not_sufficient" if len(below_fixed) == len(arms) else "open"


def check_cause_verdicts(text: str, where: str) -> list[str]:
    """"Changing X lifts the policy above max_min ...: a is ... the fixed gain ([..]) and ... max_min ([..]); b ...":
    the verdict follows from the arms' printed intervals (some arm above max_min and above the fixed gain; every
    arm above max_min and none below the fixed gain; some above max_min; every arm below the fixed gain), and a lift
    above max_min whose every lower end lies within the placebo's printed interval (the block's "The placebo, ...
    max_min ([lo, hi])") is read as within the placebo's reach, not as a lift."""
    out = []
    placebo = _PLACEBO.search(text)
    placebo_high = reading(placebo.group("hi"))[0] if placebo else None
    for m in _CAUSE.finditer(text):
        rest = m.group("rest")
        head = rest[:rest.find(": ")] if ": " in rest else rest      # "the target network's sync period lifts ..."
        said = next((k for k, w in CAUSE_WORDS.items() if w in head), None)
        arms = [tuple(reading(a.group(k))[0] for k in ("flo", "fhi", "mlo", "mhi")) for a in _ARM_CLAUSE.finditer(rest)]
        if said is None or not arms:
            continue
        want = _cause(arms, placebo_high)
        if said != want:
            out.append(f"{where}: 'Changing {rest[:60]}…' says '{CAUSE_WORDS[said]}', its arms' intervals give '{CAUSE_WORDS[want]}'")
    return out


def effect_rows(root: Path) -> list[Mapping[str, Any]]:
    """Every JSON object under ``rendered/`` with a 95% interval and its standardised effects (``effect_size_dz``,
    ``in_comparator_sds``)."""
    out: list[Mapping[str, Any]] = []

    def walk(obj: Any) -> None:
        if isinstance(obj, dict):
            if {"ci95_low", "ci95_high", "effect_size_dz", "in_comparator_sds"} <= set(obj):
                out.append(obj)
            for v in obj.values():
                walk(v)
        elif isinstance(obj, list):
            for v in obj:
                walk(v)

    for path in sorted((root / "rendered").rglob("*.json")):
        try:
            walk(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return out


def two_digits(shown: str, x: float | None) -> bool:
    """``shown`` is ``x`` at two significant digits, signed, as the findings print a standardised effect."""
    return x is not None and shown.replace("−", "-") == f"{x:+.2g}"


_EFFECT = re.compile(rf"\[(?P<lo>{NUM}), (?P<hi>{NUM})\] \(d_z (?P<dz>{NUM}); (?P<sds>{NUM}) between-seed SDs"
                     rf"(?:; Holm: (?P<hword>[a-z ]+) \[(?P<hlo>{NUM}), (?P<hhi>{NUM})\])?\)")


def check_effect_sizes(text: str, where: str, rows: list[Mapping[str, Any]]) -> list[str]:
    """"[lo, hi] (d_z D; S between-seed SDs; Holm: ...)": D and S are the d_z and comparator SDs, at two significant
    digits, of a JSON row whose 95% interval (and Holm interval) the printed bounds hold."""
    out = []
    for m in _EFFECT.finditer(text):
        cands = [r for r in rows if holds(m.group("lo"), m.group("hi"), r["ci95_low"], r["ci95_high"])
                 and (m.group("hlo") is None or ("holm_low" in r
                                                 and holds(m.group("hlo"), m.group("hhi"), r["holm_low"], r["holm_high"])))]
        if not cands:
            out.append(f"{where}: '{m.group(0)[:70]}…' is no interval with effect sizes in the JSON")
        elif not any(two_digits(m.group("dz"), r["effect_size_dz"]) and two_digits(m.group("sds"), r["in_comparator_sds"])
                     for r in cands):
            r = cands[0]
            out.append(f"{where}: '{m.group(0)[:70]}…': its row has d_z {r['effect_size_dz']:+.2g} and "
                       f"{r['in_comparator_sds']:+.2g} between-seed SDs")
    return out


_DOSE_RANGE = re.compile(rf"moved P\(even first byte\) by (?P<lo>{NUM}) to (?P<hi>{NUM}) on average")


def check_dose_range(text: str, where: str, root: Path) -> list[str]:
    """"moved P(even first byte) by a to b on average": the smallest and largest level means of the dose-response
    study's teacher movement (``level_means[*].delta_p_even``)."""
    out = []
    for m in _DOSE_RANGE.finditer(text):
        data = json.loads((root / "rendered/waypoint_opd/dose_response.json").read_text(encoding="utf-8"))
        means = data["level_means"]
        vals = sorted(float(v["delta_p_even"]) for v in (means.values() if isinstance(means, dict) else means))
        if not (agrees(m.group("lo"), vals[0]) and agrees(m.group("hi"), vals[-1])):
            out.append(f"{where}: '{m.group(0)}' but the level means run from {vals[0]:.3g} to {vals[-1]:.3g}")
    return out


def check(text: str, where: str, root: Path, rows: list[tuple[frozenset[str], list[float]]] | None = None,
          pool: list[tuple] | None = None, effects: list[Mapping[str, Any]] | None = None) -> list[str]:
    """Every field-aware reading of one text (a generated block or a notebook's printed output). ``rows``
    (:func:`value_rows`) and ``effects`` (:func:`effect_rows`) of ``root`` are computed once by a caller that
    reads many texts; ``pool`` is the JSON's intervals (``readback.intervals``), for :data:`COLUMN_KEYS`."""
    rows = value_rows(root) if rows is None else rows
    effects = effect_rows(root) if effects is None else effects
    return (check_recorded_table(text, where, root) + check_z_columns(text, where) + check_lambda_table(text, where, root)
            + check_seed_means(text, where, root) + check_holm_largest(text, where, root)
            + check_opd_calibration(text, where, root) + check_labelled_figures(text, where, rows)
            + check_labelled_sentences(text, where, rows) + check_bound_precision(text, where)
            + check_frontier_words(text, where, root) + check_against_reference(text, where)
            + check_pass_rate_sentence(text, where, root) + check_spread_sentence(text, where, root)
            + check_holm_counts(text, where, root) + check_cause_verdicts(text, where)
            + check_effect_sizes(text, where, effects) + check_dose_range(text, where, root)
            + (check_interval_columns(text, where, pool) if pool is not None else []))
