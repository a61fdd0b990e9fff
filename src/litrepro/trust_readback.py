"""Read the trust report back: every cell of its check tables and its summary, recomputed from the JSON.

A reader-side check (issue 34, item 3).  It shares no code with :mod:`litrepro.trust`: it parses the generated
page (``trust.md``, MyST with raw HTML tables) into its rows, and recomputes each row's cells from the committed
files with loops of its own:

- *rendered seeds*: the check's value in every ``rendered/<method>/seed-<N>.json`` field whose key ends in
  ``checks``; "true on 42, 43, 44" must be every seed that records it, each ``true``; "V on ..." (a value the
  seed file records, with its note) must be that value on each; "42: true; 43: false" must be each seed's own;
  and the cell's mark is "ok" when every seed holds, "neutral" for one noted value (or none recorded), else "bad";
- *studies*: "study: k of n (unit)" per study JSON, recounted from its ``per_seed[*].checks``, its
  ``per_seed[*].arm_checks`` (an arm's boolean counted under the check the registry's ``ARM_CHECKS`` names) and
  its ``check_pass_rates`` times ``n_seeds``; the cell is marked held ("ok") only when k = n everywhere;
- *fault tests*: "N tests, P passed": N the tests that the collected registry marks as guarding the check (or an
  arm boolean counted under it), P those that ``rendered/fault_tests.json`` records as passed;
- the summary: the number of checks per method, how many have a fault test, the fault tests' outcome tally and
  how many checks did not hold somewhere;
- the fault audits (:func:`audit_problems`): every "C of M" and share of the audit table, each report's summary line
  and its per-bug rows, recounted from the committed per-bug reports by a loop of its own.

It never reads a figure from the page to compute another; a cell that does not recompute is one problem line.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from litrepro.paths import ROOT

_ROW = re.compile(r"<tr>(.*?)</tr>", re.S)
_CELL = re.compile(r'<td class="(?P<cls>[^"]*)" data-sort="(?P<key>[^"]*)">(?P<body>.*?)</td>', re.S)
_STUDY = re.compile(r"^(?P<study>[\w.-]+): (?P<held>\d+) of (?P<records>\d+) \((?P<unit>[^)]*)\)$")
_FAULTS = re.compile(r"^(?P<n>\d+) (?P<noun>tests?), (?P<passed>\d+) passed")


def _json(path: Path, cache: dict[Path, Any]) -> Any:
    """A JSON file, read once per :func:`check`."""
    if path not in cache:
        cache[path] = json.loads(path.read_text(encoding="utf-8"))
    return cache[path]


def _text(body: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", body)).split())


def table_rows(markdown: str, table_id: str) -> list[list[dict[str, str]]]:
    """The rows of the page's table ``table_id``: per cell its css class, sort key and plain text."""
    m = re.search(rf'<table class="litrepro-table" id="{re.escape(table_id)}">(.*?)</table>', markdown, re.S)
    if not m:
        return []
    body = m.group(1).split("<tbody>", 1)[-1]
    return [[{"cls": c.group("cls"), "key": html.unescape(c.group("key")), "text": _text(c.group("body"))}
             for c in _CELL.finditer(row)] for row in _ROW.findall(body)]


def seed_values(method: str, name: str, root: Path, cache: dict[Path, Any] | None = None) -> dict[int, Any]:
    """Seed -> the check's recorded value, over every seed JSON that records it."""
    out = {}
    for path in (root / "rendered" / method).glob("seed-*.json"):
        stem = path.stem[len("seed-"):]
        if not stem.isdigit():
            continue
        data = _json(path, {} if cache is None else cache)
        for key, value in data.items():
            if key.endswith("checks") and isinstance(value, dict) and name in value:
                out[int(stem)] = value[name]
    return dict(sorted(out.items()))


def _word(v: Any) -> str:
    if v is True:
        return "true"
    if v is False:
        return "false"
    return "absent" if v is None else str(v)


def seed_problem(text: str, values: dict[int, Any]) -> str | None:
    """Why the rendered-seeds cell ``text`` does not say ``values``; None when it does."""
    if not values:
        return None if text == "not recorded in the seed JSON" else f"'{text}', but no seed JSON records it"
    seeds = ", ".join(str(s) for s in values)
    words = {_word(v) for v in values.values()}
    if len(words) == 1:
        word = words.pop()
        if text == f"{word} on {seeds}" or text.startswith(f"{word} on {seeds} ("):
            return None
        return f"'{text}', but the seeds record {word} on {seeds}"
    want = "; ".join(f"{s}: {_word(v)}" for s, v in values.items())
    return None if text == want else f"'{text}', but the seeds record {want}"


def study_counts(method: str, name: str, arm_map: dict[str, str], root: Path,
                 cache: dict[Path, Any] | None = None) -> dict[tuple[str, str], tuple[int, int]]:
    """(study, unit) -> (held, records) of the check, recounted from each study JSON: a per-seed row's own check
    is a "seed x condition" record, an arm's boolean a "seed x condition x arm" record, a per-backup pass rate
    ``n_seeds`` "seed x backup" records and a flat one ``n_seeds`` "seed" records."""
    out: dict[tuple[str, str], list[int]] = {}

    def add(study: str, unit: str, held: int, records: int) -> None:
        t = out.setdefault((study, unit), [0, 0])
        t[0] += held
        t[1] += records

    for path in sorted((root / "rendered" / method).glob("*.json")):
        if path.name == "summary.json" or path.name.startswith("seed-"):
            continue
        data = _json(path, {} if cache is None else cache)
        if not isinstance(data, dict):
            continue
        for row in data.get("per_seed") or []:
            if not isinstance(row, dict):
                continue
            checks = row.get("checks") or {}
            if name in checks:
                add(path.stem, "seed x condition", int(checks[name] is True), 1)
            for arm in (row.get("arm_checks") or {}).values():
                for arm_name, value in arm.items():
                    if arm_map.get(arm_name, arm_name) == name:
                        add(path.stem, "seed x condition x arm", int(value is True), 1)
        rates, n = data.get("check_pass_rates"), data.get("n_seeds")
        if isinstance(rates, dict) and isinstance(n, int):
            for key, value in rates.items():
                if isinstance(value, dict):
                    for check, rate in value.items():
                        if check == name:
                            add(path.stem, "seed x backup", int(round(rate * n)), n)
                elif key == name:
                    add(path.stem, "seed", int(round(value * n)), n)
    return {k: (v[0], v[1]) for k, v in out.items()}


def study_problem(text: str, cls: str, counts: dict[tuple[str, str], tuple[int, int]]) -> str | None:
    if not counts:
        return None if text == "not recorded by a study" else f"'{text}', but no study records it"
    shown = {}
    for part in text.split("; "):
        m = _STUDY.match(part)
        if not m:
            return f"'{text}' is not a list of 'study: k of n (unit)'"
        shown[(m.group("study"), m.group("unit"))] = (int(m.group("held")), int(m.group("records")))
    if shown != counts:
        return f"'{text}', but the study JSON gives " + "; ".join(f"{s}: {h} of {n} ({u})"
                                                                  for (s, u), (h, n) in counts.items())
    held = all(h == n for h, n in counts.values())
    if (cls == "ok") != held:
        return f"marked '{cls}', but it held on {'every' if held else 'not every'} study record"
    return None


def fault_tests_of(name: str, arm_map: dict[str, str], fault_registry: dict[str, list[str]]) -> set[str]:
    tests = set(fault_registry.get(name, []))
    for arm_name, aggregate in arm_map.items():
        if aggregate == name:
            tests |= set(fault_registry.get(arm_name, []))
    return tests


def check(markdown: str, fault_registry: dict[str, list[str]], arm_maps: dict[str, dict[str, str]],
          root: Path = ROOT) -> list[str]:
    """Every trust-page cell that does not recompute, one line each; ``arm_maps`` is, per method, the registry's
    ``ARM_CHECKS`` (an arm's boolean -> the check it is counted under)."""
    root = Path(root)
    try:
        outcomes = json.loads((root / "rendered" / "fault_tests.json").read_text(encoding="utf-8"))["tests"]
    except (OSError, ValueError, KeyError):
        outcomes = {}
    problems, per_method, with_tests, not_held, all_tests = [], {}, 0, 0, set()
    cache: dict[Path, Any] = {}
    tables = {method: table_rows(markdown, f"checks-{method}") for method in arm_maps}
    for method, arm_map in arm_maps.items():
        rows = tables[method]
        per_method[method] = len(rows)
        if not rows:
            problems.append(f"trust: no table of {method}'s checks")
        for cells in rows:
            if len(cells) < 7:
                problems.append(f"trust: a {method} row has {len(cells)} cells")
                continue
            name = cells[0]["key"]
            values = seed_values(method, name, root, cache)
            if (p := seed_problem(cells[4]["text"], values)):
                problems.append(f"trust: {name}, rendered seeds: {p}")
            counts = study_counts(method, name, arm_map, root, cache)
            if (p := study_problem(cells[5]["text"], cells[5]["cls"], counts)):
                problems.append(f"trust: {name}, studies: {p}")
            tests = fault_tests_of(name, arm_map, fault_registry)
            all_tests |= tests
            with_tests += bool(tests)
            passed = sum(outcomes.get(t) == "passed" for t in tests)
            m = _FAULTS.match(cells[6]["text"])
            if tests and not (m and int(m.group("n")) == len(tests) and int(m.group("passed")) == passed
                              and m.group("noun") == ("test" if len(tests) == 1 else "tests")):   # "1 test", "2 tests"
                problems.append(f"trust: {name}, fault tests: '{cells[6]['text'][:60]}', but {len(tests)} tests "
                                f"guard it and {passed} passed")
            elif not tests and cells[6]["text"] != "no fault test":
                problems.append(f"trust: {name}, fault tests: '{cells[6]['text'][:60]}', but no test guards it")
            note = cells[4]["text"].endswith(")") and "(" in cells[4]["text"]
            seeds_bad = bool(values) and not all(v is True for v in values.values()) and not note
            want_cls = ("neutral" if not values else "ok" if all(v is True for v in values.values())
                        else "neutral" if note and len({json.dumps(v) for v in values.values()}) == 1 else "bad")
            if cells[4]["cls"] != want_cls:                   # the colour a reader sees: held, noted, or failed
                problems.append(f"trust: {name}, rendered seeds: marked '{cells[4]['cls']}', but its values "
                                f"{sorted(set(map(_word, values.values())))}{' with a note' if note else ''} "
                                f"make it '{want_cls}'")
            not_held += seeds_bad or any(h != n for h, n in counts.values())
    claimed = {cells[0]["key"] for rows in tables.values() for cells in rows if cells}
    claimed |= {a for arm_map in arm_maps.values() for a, aggregate in arm_map.items() if aggregate in claimed}
    for name, tests in fault_registry.items():                      # the fault tests of metrics (no check row)
        if name not in claimed:
            all_tests |= set(tests)
    total = sum(per_method.values())
    summary = _text(markdown.split('<ul class="litrepro-summary">', 1)[-1].split("</ul>", 1)[0])
    wants = [f"{total} checks: " + ", ".join(f"{m} {k}" for m, k in per_method.items()) + ".",
             f"{with_tests} of {total} have at least one fault test",
             f"Their {len(all_tests)} fault tests in",
             f": {sum(outcomes.get(t) == 'passed' for t in all_tests)} passed",
             f"{not_held} did not hold somewhere"]
    for want in wants:
        if want not in summary:
            problems.append(f"trust: the summary does not say '{want}' (it says: {summary[:200]})")
    return problems + audit_problems(markdown, root)


_REPORT = re.compile(r"benchmarks/fault_audits/[A-Za-z0-9_.-]+\.json")
_TALLY = re.compile(r"^(?P<c>\d+) of (?P<m>\d+)$")
_REPORT_LINE = re.compile(r"^### `(?P<rel>benchmarks/fault_audits/[A-Za-z0-9_.-]+\.json)`\n\n(?P<line>[^\n]*)$", re.M)


def _recount(bugs: list[dict], part: str | None = None) -> tuple[int, int, list[str]]:
    """(caught, number-moving, missed ids) of a per-bug report's rows, by a loop of our own: a bug moves a number
    when its ``moved`` list is not empty, and is caught when its verdict says so."""
    caught = moving = 0
    missed = []
    for b in bugs:
        if part is not None and b.get("part") != part:
            continue
        if not b.get("moved"):
            continue
        moving += 1
        if b.get("verdict") == "caught":
            caught += 1
        else:
            missed.append(b["id"])
    return caught, moving, missed


def audit_problems(markdown: str, root: Path = ROOT) -> list[str]:
    """The fault-audit table, each report's summary line and its per-bug table, recounted from the committed
    per-bug reports: "C of M" and its share per audit and per part, "N bugs; C of the M that moved a reported
    figure were caught; missed: ...", and one table row per bug with its verdict and its number of moved figures."""
    problems: list[str] = []
    reports: dict[str, list[dict]] = {}

    def bugs_of(rel: str) -> list[dict] | None:
        if rel not in reports:
            try:
                reports[rel] = json.loads((Path(root) / rel).read_text(encoding="utf-8"))["bugs"]
            except (OSError, ValueError, KeyError):
                problems.append(f"trust: fault audits: {rel} cannot be read")
                reports[rel] = []
        return reports[rel]

    committed = sorted(p.relative_to(root).as_posix() for p in (Path(root) / "benchmarks/fault_audits").glob("*.json"))
    for cells in table_rows(markdown, "fault-audits"):
        if len(cells) < 6:
            problems.append(f"trust: fault audits: a row has {len(cells)} cells")
            continue
        m = _REPORT.search(cells[5]["text"] + " " + cells[5]["key"]) or _REPORT.search(
            "benchmarks/fault_audits/" + cells[5]["key"])
        tally = _TALLY.match(cells[2]["text"])
        if m is None:
            if tally:
                problems.append(f"trust: fault audits: '{cells[0]['text'][:50]}' shows {cells[2]['text']} with no report")
            continue
        part = None if cells[1]["text"] == "all parts of the report" else cells[1]["text"]
        caught, moving, _ = _recount(bugs_of(m.group(0)), part)
        share = f"{round(100 * caught / moving)} %" if moving else None
        if not tally or (int(tally.group("c")), int(tally.group("m"))) != (caught, moving):
            problems.append(f"trust: fault audits: {m.group(0)} ({part or 'all parts'}) shows '{cells[2]['text']}', "
                            f"its rows give {caught} of {moving}")
        elif share is not None and cells[3]["text"] != share:
            problems.append(f"trust: fault audits: {m.group(0)} ({part or 'all parts'}) shows '{cells[3]['text']}', "
                            f"its rows give {share}")
    seen = set()
    for m in _REPORT_LINE.finditer(markdown):
        rel, bugs = m.group("rel"), bugs_of(m.group("rel"))
        seen.add(rel)
        caught, moving, missed = _recount(bugs)
        want = (f"{len(bugs)} bugs; {caught} of the {moving} that moved a reported figure were caught"
                + (f"; missed: {', '.join(missed)}" if missed else "") + ".")
        if not m.group("line").startswith(want):
            problems.append(f"trust: fault audits: {rel} says '{m.group('line')[:120]}', its rows give '{want}'")
        rows = table_rows(markdown, f"audit-{Path(rel).stem}-bugs")
        if len(rows) != len(bugs):
            problems.append(f"trust: fault audits: {rel} lists {len(rows)} bugs, the report has {len(bugs)}")
        for cells, b in zip(rows, bugs):
            if len(cells) < 6 or cells[0]["text"] != b["id"] or cells[3]["text"] != b.get("verdict", "") \
                    or cells[5]["text"] != str(len(b.get("moved") or [])):
                problems.append(f"trust: fault audits: {rel} row {b['id']} does not show its id, verdict and "
                                f"{len(b.get('moved') or [])} moved figures")
                break
    for rel in committed:
        if rel not in seen:
            problems.append(f"trust: fault audits: the committed report {rel} has no section on the page")
    return problems
