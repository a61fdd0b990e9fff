"""The trust report: every check of both methods, the stage it guards, where it held, and its fault tests.

Nothing here is typed by hand; every row is read from data:

- the check names: every dict-valued field whose key ends in ``checks`` in the rendered seed
  JSON (``rendered/<method>/seed-<N>.json``), and the per-seed ``checks`` the studies record;
- the stage and what the check recomputes: the method's registry,
  ``GUARDS`` (``{check: (stage, one line)}``) in the module :data:`AUDIT_MODULES` names; a method whose
  audit module or registry is missing shows "not registered";
- where it held: its value on every rendered seed, and its tally over every study record
  (``per_seed[*].checks`` and ``arm_checks``, or ``check_pass_rates`` times ``n_seeds``);
- its fault tests: the tests marked ``@pytest.mark.guards("check")``, collected (not run) by
  ``pytest --collect-only --guards-registry PATH`` (see ``tests/conftest.py``), and each one's outcome in the
  last full ``make test`` whose results were committed (``rendered/fault_tests.json``, written by
  ``pytest --fault-results`` and copied by ``make fault-results``; a test absent from it shows "not run");
- the fault audits: ``rendered/fault_audits.json``, their figures recounted from the committed per-bug reports
  (``benchmarks/fault_audits/*.json``); an audit without one is named and shows no figure.

A check with no fault test is flagged.
"""

from __future__ import annotations

import html
import importlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from litrepro.paths import RENDERED, ROOT

#: Method -> the module holding its check registry ``GUARDS`` (and, optionally, ``ARM_CHECKS``).
AUDIT_MODULES = {"pinterest_rlbp": "litrepro.rlbp.audit", "waypoint_opd": "litrepro.waypoint.registry"}
#: Method -> study modules whose own checks (``STUDY_GUARDS``, same shape as ``GUARDS``) join its registry.
STUDY_MODULES = {"pinterest_rlbp": ("litrepro.rlbp.td_calibration", "litrepro.studies.rlbp_d3rlpy"), "waypoint_opd": ()}
FAULT_AUDITS = RENDERED / "fault_audits.json"
#: The committed outcomes of the fault tests in a full ``make test`` (``make fault-results`` copies them).
FAULT_RESULTS = RENDERED / "fault_tests.json"
OUTCOME_CLASS = {"passed": "ok", "failed": "bad", "error": "bad", "skipped": "neutral", "not run": "bad"}
NOT_REGISTERED = "not registered"


@dataclass
class Links:
    """Where the trust page's cells link to in the book: ``file(repo path)`` gives a page-relative URL of a
    source or test file (or None), ``chapter(method)`` the method's chapter.  Without one, nothing is linked."""
    file: Any = None
    chapter: Any = None

    def to_file(self, rel: str) -> str | None:
        return self.file(rel) if self.file else None

    def to_chapter(self, method: str) -> str | None:
        return self.chapter(method) if self.chapter else None


def module_file(module: str) -> str:
    """The repository path of a ``litrepro`` module (``litrepro.rlbp.audit`` -> ``src/litrepro/rlbp/audit.py``)."""
    return "src/" + module.replace(".", "/") + ".py"


def check_names() -> set[str]:
    """Every check name a trust row can have: those the rendered seeds record and those the registries name."""
    names: set[str] = set()
    for method in AUDIT_MODULES:
        names |= set(seed_checks(method)[0])
        guards, _ = registry(method)
        names |= set(guards or {})
    return names


def test_file(node_id: str) -> str:
    """The file of a pytest node id (``tests/test_x.py::test_y[...]`` -> ``tests/test_x.py``)."""
    return node_id.partition("::")[0]


@dataclass
class StudyTally:
    """How often one check held in one study: ``held`` of ``records`` (a record is a ``unit``)."""
    study: str
    unit: str
    records: int
    held: int


@dataclass
class CheckRow:
    method: str
    name: str
    fields: list[str]                                   # where the seed JSON records it ("checks", "extra_checks")
    stage: str
    recomputes: str
    seeds: dict[int, Any]                                # rendered seed -> recorded value
    studies: list[StudyTally] = field(default_factory=list)
    fault_tests: list[str] = field(default_factory=list)
    note: str = ""                                      # the JSON's check_notes entry, if any

    @property
    def held_on_seeds(self) -> bool:
        return bool(self.seeds) and all(v is True for v in self.seeds.values())

    @property
    def held_in_studies(self) -> bool:
        return all(t.held == t.records for t in self.studies)


def registry(method: str) -> tuple[dict[str, tuple[str, str]] | None, dict[str, str]]:
    """``(GUARDS, ARM_CHECKS)`` of ``method``'s audit module; ``(None, {})`` when it has none yet."""
    name = AUDIT_MODULES[method]
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None, {}
        raise
    guards = getattr(module, "GUARDS", None)
    if guards is not None:
        guards = dict(guards)
        for study in STUDY_MODULES.get(method, ()):
            guards.update(getattr(importlib.import_module(study), "STUDY_GUARDS", {}))
    return guards, dict(getattr(module, "ARM_CHECKS", {}))


def _seed_files(folder: Path) -> list[tuple[int, Path]]:
    found = []
    for path in folder.glob("seed-*.json"):
        stem = path.stem.removeprefix("seed-")
        if stem.isdigit():
            found.append((int(stem), path))
    return sorted(found)


def seed_checks(method: str, rendered: Path = RENDERED) -> tuple[dict[str, dict], dict[str, str]]:
    """``{check: {"fields": [...], "seeds": {seed: value}}}`` and the runs' ``check_notes``."""
    checks: dict[str, dict] = {}
    notes: dict[str, str] = {}
    for seed, path in _seed_files(rendered / method):
        data = json.loads(path.read_text())
        notes.update(data.get("check_notes") or {})
        for key, value in data.items():
            if key.endswith("checks") and isinstance(value, dict):
                for name, result in value.items():
                    entry = checks.setdefault(name, {"fields": [], "seeds": {}})
                    if key not in entry["fields"]:
                        entry["fields"].append(key)
                    entry["seeds"][seed] = result
    return checks, notes


def _add(tallies: dict[str, list[StudyTally]], name: str, study: str, unit: str, records: int, held: int) -> None:
    for t in tallies.setdefault(name, []):
        if t.study == study and t.unit == unit:
            t.records += records
            t.held += held
            return
    tallies[name].append(StudyTally(study, unit, records, held))


def study_tallies(method: str, arm_checks: dict[str, str], rendered: Path = RENDERED) -> dict[str, list[StudyTally]]:
    """Per check, how often it held in each study JSON of ``rendered/<method>/``.

    A study records its checks either per seed (``per_seed`` rows with a ``checks`` dict, and the
    arms' own booleans in ``arm_checks``, counted under the check that aggregates them) or as
    ``check_pass_rates`` over ``n_seeds`` seeds (flat, or per arm such as a critic backup).
    """
    tallies: dict[str, list[StudyTally]] = {}
    for path in sorted((rendered / method).glob("*.json")):
        if path.name == "summary.json" or path.name.startswith("seed-"):
            continue
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            continue
        study = path.stem
        rows = data.get("per_seed")
        if isinstance(rows, list):
            for row in rows:
                for name, value in (row.get("checks") or {}).items():
                    _add(tallies, name, study, "seed x condition", 1, int(value is True))
                for arm_values in (row.get("arm_checks") or {}).values():
                    for name, value in arm_values.items():
                        _add(tallies, arm_checks.get(name, name), study, "seed x condition x arm", 1,
                             int(value is True))
        rates, n = data.get("check_pass_rates"), data.get("n_seeds")
        if isinstance(rates, dict) and isinstance(n, int):
            for key, value in rates.items():
                if isinstance(value, dict):                                     # per arm (backup)
                    for name, rate in value.items():
                        _add(tallies, name, study, "seed x backup", n, round(rate * n))
                else:
                    _add(tallies, key, study, "seed", n, round(value * n))
    return tallies


def collect_fault_registry(out: Path, root: Path = ROOT, timeout: int = 300) -> dict[str, list[str]]:
    """Collect (never run) the test suite and return ``{check: [node ids]}`` of its ``guards`` marks."""
    cmd = [sys.executable, "-m", "pytest", str(root / "tests"), "--collect-only", "-q", "-p", "no:cacheprovider",
           "--guards-registry", str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root / "src"), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=env, timeout=timeout)
    if proc.returncode not in (0, 5) or not out.is_file():
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        raise RuntimeError(f"collecting the fault tests failed (exit {proc.returncode}):\n" + "\n".join(tail))
    return json.loads(out.read_text())


def build_rows(fault_registry: dict[str, list[str]], rendered: Path = RENDERED) -> tuple[list[CheckRow], dict[str, list[str]]]:
    """Every check of every method, and the registry's names that are no check (metric-kind faults)."""
    rows: list[CheckRow] = []
    claimed: set[str] = set()
    for method in AUDIT_MODULES:
        guards, arm_checks = registry(method)
        recorded, notes = seed_checks(method, rendered)
        tallies = study_tallies(method, arm_checks, rendered)
        names = list(recorded) + [n for n in tallies if n not in recorded]
        names += [n for n in (guards or {}) if n not in names]
        for name in sorted(names):
            stage, recomputes = (guards or {}).get(name, (NOT_REGISTERED, ""))
            tests = set(fault_registry.get(name, []))
            for arm_name, aggregate in arm_checks.items():                    # an arm's own boolean
                if aggregate == name:
                    tests |= set(fault_registry.get(arm_name, []))
                    claimed.add(arm_name)
            claimed.add(name)
            entry = recorded.get(name, {"fields": [], "seeds": {}})
            rows.append(CheckRow(method, name, entry["fields"], stage, recomputes, entry["seeds"],
                                 tallies.get(name, []), sorted(tests), notes.get(name, "")))
    others = {k: v for k, v in fault_registry.items() if k not in claimed}
    return rows, others


# --- Rendering (HTML inside MyST markdown: tables the book's sorter can sort and filter) -------------

def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _value(v: Any) -> str:
    return {True: "true", False: "false"}.get(v, str(v)) if isinstance(v, bool) or v is not None else "absent"


def seeds_cell(row: CheckRow) -> tuple[str, str]:
    """(text, css class) for the rendered seeds' values."""
    if not row.seeds:
        return "not recorded in the seed JSON", "neutral"
    values = {_value(v) for v in row.seeds.values()}
    seeds = ", ".join(str(s) for s in row.seeds)
    if values == {"true"}:
        return f"true on {seeds}", "ok"
    if len(values) == 1:
        text = f"{values.pop()} on {seeds}"
        return (text + (f" ({row.note})" if row.note else ""), "neutral" if row.note else "bad")
    return "; ".join(f"{s}: {_value(v)}" for s, v in row.seeds.items()), "bad"


def studies_cell(row: CheckRow) -> tuple[str, str]:
    if not row.studies:
        return "not recorded by a study", "neutral"
    parts = [f"{t.study}: {t.held} of {t.records} ({t.unit})" for t in row.studies]
    return "; ".join(parts), ("ok" if row.held_in_studies else "bad")


def load_fault_results(path: Path = FAULT_RESULTS) -> dict[str, Any]:
    """The committed outcomes ``{"commit", "date", "tests": {node id: outcome}}``; empty ``tests`` when absent."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"commit": None, "date": None, "tests": {}}
    return {"commit": data.get("commit"), "date": data.get("date"), "tests": dict(data.get("tests") or {})}


def outcome(test: str, results: dict[str, Any]) -> str:
    return results["tests"].get(test, "not run")


def _code_link(text: str, href: str | None) -> str:
    code = f"<code>{_e(text)}</code>"
    return f'<a href="{_e(href)}">{code}</a>' if href else code


def faults_cell(row: CheckRow, results: dict[str, Any] | None = None, links: Links | None = None) -> tuple[str, str]:
    """The fault tests of a check with each one's last committed outcome; "bad" when one did not pass."""
    if not row.fault_tests:
        return "<strong>no fault test</strong>", "bad"
    results = results if results is not None else {"tests": {}}
    links = links or Links()
    outcomes = [outcome(t, results) for t in row.fault_tests]
    items = "".join(f'<li>{_code_link(t, links.to_file(test_file(t)))}: '
                    f'<span class="{OUTCOME_CLASS.get(o, "bad")}">{_e(o)}</span></li>'
                    for t, o in zip(row.fault_tests, outcomes))
    passed = outcomes.count("passed")
    summary = (f'{len(row.fault_tests)} test{"s" if len(row.fault_tests) > 1 else ""}, '
               f"{passed} passed" + ("" if passed == len(outcomes) else
                                     " (" + ", ".join(f"{outcomes.count(o)} {o}" for o in sorted(set(outcomes))
                                                      if o != "passed") + ")"))
    return (f"<details><summary>{_e(summary)}</summary><ul>{items}</ul></details>",
            "ok" if passed == len(outcomes) else "bad")


def _table(headers: list[str], rows: list[list[tuple[str, str, str]]], table_id: str) -> str:
    """A sortable, filterable table; a cell is (html, sort key, css class)."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = []
    for cells in rows:
        tds = "".join(f'<td class="{cls}" data-sort="{_e(key)}">{content}</td>' for content, key, cls in cells)
        body.append(f"<tr>{tds}</tr>")
    table = (f'<table class="litrepro-table" id="{_e(table_id)}"><thead><tr>{head}</tr></thead>'
             f"<tbody>{''.join(body)}</tbody></table>")
    return table.replace("\r", "&#13;").replace("\n", "&#10;")   # one line: data cannot end its raw block


AUDIT_REPORTS = ROOT / "benchmarks" / "fault_audits"


def audit_report_tally(path: Path) -> dict[str, Any]:
    """Recount a committed per-bug audit report (``benchmarks/fault_audits/*.json``, one row per bug): a bug is
    number-moving when it moved a reported figure, and caught when a check turned false on it."""
    bugs = json.loads(path.read_text())["bugs"]
    moving = [b for b in bugs if b.get("moved")]
    caught = [b for b in moving if b.get("verdict") == "caught"]
    return {"bugs": len(bugs), "number_moving": len(moving), "caught": len(caught),
            "missed": [b["id"] for b in moving if b.get("verdict") != "caught"]}


def audit_report_parts(path: Path) -> dict[str, dict[str, int]]:
    """Per part (a bug's ``part`` field, when the report's bugs carry one): its number-moving and caught bugs."""
    out: dict[str, dict[str, int]] = {}
    for b in json.loads(path.read_text())["bugs"]:
        if b.get("part") and b.get("moved"):
            t = out.setdefault(str(b["part"]), {"number_moving": 0, "caught": 0})
            t["number_moving"] += 1
            t["caught"] += b.get("verdict") == "caught"
    return out


def moved_by_check() -> dict[str, list[str]]:
    """What moves when a check breaks, from the committed audit reports: for each check, the reported figures
    that the bugs turning it false moved (most often first)."""
    from collections import Counter

    count: dict[str, Counter] = {}
    for report in sorted(AUDIT_REPORTS.glob("*.json")) if AUDIT_REPORTS.is_dir() else []:
        for b in json.loads(report.read_text())["bugs"]:
            for check in b.get("checks_false") or []:
                count.setdefault(check.rpartition(".")[2], Counter()).update(b.get("moved") or [])
    return {k: [f for f, _ in c.most_common()] for k, c in count.items()}


def audited_methods() -> set[str]:
    """The methods whose stage code a committed per-bug report edits (from each bug's file)."""
    out = set()
    for report in sorted(AUDIT_REPORTS.glob("*.json")) if AUDIT_REPORTS.is_dir() else []:
        for b in json.loads(report.read_text())["bugs"]:
            out |= {m for m, folder in (("pinterest_rlbp", "/rlbp/"), ("waypoint_opd", "/waypoint/"))
                    if folder in b.get("file", "")}
    return out


def _report_of(audit: dict) -> Path | None:
    """The committed per-bug report an audit's ``source`` names, if it names one that exists."""
    m = re.match(r"(benchmarks/fault_audits/[A-Za-z0-9_.-]+\.json)", audit.get("source", ""))
    return ROOT / m.group(1) if m and (ROOT / m.group(1)).is_file() else None


def audits_table(path: Path = FAULT_AUDITS) -> str:
    """The audits' figures, recounted from the committed per-bug report; an audit without one is named with its
    source, and its figures are not shown (issue 32: they were typed by hand from an issue or an old README)."""
    if not path.is_file():
        return "<p>No fault audit is recorded (<code>rendered/fault_audits.json</code> is missing).</p>"
    data = json.loads(path.read_text())
    out = [f"<p>{_e(data.get('about', ''))}</p>"]
    rows = []
    for audit in data["audits"]:
        report = _report_of(audit)
        if report is not None:
            t = audit_report_tally(report)
            anchor = f"audit-{report.stem}"
            share = t["caught"] / t["number_moving"] if t["number_moving"] else float("nan")
            rows.append([(_e(audit["name"]), audit["name"], ""), ("all parts of the report", "", ""),
                         (f"{t['caught']} of {t['number_moving']}", f"{share:.6f}", ""),
                         (f"{100 * share:.0f} %", f"{share:.6f}", ""),
                         (_e(audit.get("follow_up", "")), "", ""),
                         (f'recounted from <a href="#{anchor}"><code>{_e(report.relative_to(ROOT).as_posix())}</code></a>, '
                          "one row per bug (below)", report.name, "")])
            for part, pt in audit_report_parts(report).items():          # a report whose bugs name their part
                pshare = pt["caught"] / pt["number_moving"] if pt["number_moving"] else float("nan")
                rows.append([(_e(audit["name"]), audit["name"], ""), (_e(part), part, ""),
                             (f"{pt['caught']} of {pt['number_moving']}", f"{pshare:.6f}", ""),
                             (f"{100 * pshare:.0f} %", f"{pshare:.6f}", ""), ("", "", ""),
                             (f'<a href="#{anchor}">per bug, below</a>', report.name, "")])
            continue
        # no per-bug report: its tallies were typed from an issue or an old README, so they are not quoted
        rows.append([(_e(audit["name"]), audit["name"], ""), ("—", "", ""),
                     ("not quoted", "", "neutral"), ("—", "", ""), (_e(audit.get("follow_up", "")), "", ""),
                     (_e(audit["source"]) + " <strong>(no per-bug report committed, so no figure is shown)</strong>",
                      audit["source"], "neutral")])
    out.append(_table(["audit", "part", "caught among number-moving bugs", "share", "then", "source"], rows,
                      "fault-audits"))
    return "\n".join(out)


def audit_report_sections() -> list[str]:
    """One section per committed per-bug report: every bug, its stage, its verdict and the checks it turned false."""
    lines: list[str] = []
    for report in sorted(AUDIT_REPORTS.glob("*.json")) if AUDIT_REPORTS.is_dir() else []:
        bugs = json.loads(report.read_text())["bugs"]
        t = audit_report_tally(report)
        rel = report.relative_to(ROOT).as_posix()
        rows = [[(_e(b["id"]), b["id"], ""), (_e(b.get("stage", "")), b.get("stage", ""), ""),
                 (_e(b.get("description", "")), "", ""),
                 (_e(b.get("verdict", "")), b.get("verdict", ""), "ok" if b.get("verdict") == "caught" else "bad"),
                 (_e(", ".join(b.get("checks_false") or [])), "", ""),
                 (str(len(b.get("moved") or [])), f"{len(b.get('moved') or []):06d}", "")] for b in bugs]
        lines += [f"### `{rel}`", "",
                  f"{t['bugs']} bugs; {t['caught']} of the {t['number_moving']} that moved a reported figure were "
                  "caught" + (f"; missed: {', '.join(t['missed'])}" if t["missed"] else "") + ". Read from the "
                  "committed report when the book is built.", "", "```{raw} html",
                  f'<span id="audit-{_e(report.stem)}"></span>' + _table(["bug", "stage", "what it changes", "verdict", "checks turned false", "figures moved"], rows,
                         f"audit-{report.stem}-bugs"), "```", ""]
    return lines


def report_markdown(rows: list[CheckRow], others: dict[str, list[str]], *, collected_with: str,
                    links: Links | None = None) -> str:
    """The trust report page (MyST markdown with raw HTML tables, and the checks again as searchable text)."""
    links = links or Links()
    n = len(rows)
    by_method = {m: [r for r in rows if r.method == m] for m in AUDIT_MODULES}
    no_test = [r for r in rows if not r.fault_tests]
    constant = [r for r in no_test if r.note and r.seeds and not r.held_on_seeds]
    unregistered = [r for r in rows if r.stage == NOT_REGISTERED]
    failed = [r for r in rows if (r.seeds and not r.held_on_seeds and not r.note) or not r.held_in_studies]
    results = load_fault_results()
    every_test = sorted({t for r in rows for t in r.fault_tests} | {t for v in others.values() for t in v})
    tally = {o: sum(1 for t in every_test if outcome(t, results) == o) for o in OUTCOME_CLASS}
    run = (f"the full <code>make test</code> at commit <code>{_e(results['commit'])}</code> on {_e(results['date'])}"
           if results["tests"] else "no committed run (<code>rendered/fault_tests.json</code> is missing)")
    lines = ["# Trust report", "",
             "Every check of both methods: the stage it guards and what it recomputes (from each method's check "
             "registry, `GUARDS`), whether it held on every rendered seed and on every "
             "record of every study, and the fault tests that turn it false. This page is generated by "
             "`litrepro.trust` from the committed JSON and the test suite; nothing on it is typed: a fault audit "
             "without a committed per-bug report is named, and its figures are not shown.", "",
             "```{raw} html", "<ul class=\"litrepro-summary\">",
             f"<li>{n} checks: " + ", ".join(f"<code>{m}</code> {len(v)}" for m, v in by_method.items()) + ".</li>",
             f"<li>{n - len(no_test)} of {n} have at least one fault test; "
             + (f"<strong>{len(no_test)} have none</strong>: "
                + ", ".join(f"<code>{_e(r.name)}</code>" for r in no_test) if no_test else "none lacks one")
             + (f" ({len(constant)} of them the seed file records as not built or not applicable: "
                + ", ".join(f"<code>{_e(r.name)}</code>" for r in constant) + ")" if constant else "")
             + ".</li>",
             f"<li>Their {len(every_test)} fault tests in {run}: {tally['passed']} passed"
             + "".join(f", <strong>{tally[o]} {o}</strong>" for o in ("failed", "error", "skipped", "not run") if tally[o])
             + ".</li>",
             f"<li>{len(unregistered)} are not in their method's registry"
             + (": " + ", ".join(f"<code>{_e(r.name)}</code>" for r in unregistered) if unregistered else "")
             + ".</li>",
             f"<li>{len(failed)} did not hold somewhere they were expected to"
             + (": " + ", ".join(f"<code>{_e(r.name)}</code>" for r in failed) if failed else "")
             + ". A check the seed file itself records as false or not applicable shows its recorded note.</li>",
             "</ul>", "```", ""]
    for method, method_rows in by_method.items():
        guards, _ = registry(method)
        lines += [f"## `{method}`", ""]
        if guards is None:
            lines += [f"`{AUDIT_MODULES[method]}` has no `GUARDS` registry yet: every stage shows "
                      f"\"{NOT_REGISTERED}\".", ""]
        table_rows = []
        moved = moved_by_check()
        for r in method_rows:
            figures = moved.get(r.name)
            moves = (", ".join(figures[:4]) + (f" and {len(figures) - 4} more" if len(figures) > 4 else "")
                     if figures else "no audited bug broke it" if method in audited_methods()
                     else "no per-bug audit of this method is committed")
            seeds, seeds_cls = seeds_cell(r)
            studies, studies_cls = studies_cell(r)
            faults, faults_cls = faults_cell(r, results, links)
            chapter = links.to_chapter(method)
            recorded = _e(", ".join(r.fields) or "study only")
            if chapter and r.fields:
                recorded = f'<a href="{_e(chapter)}">{recorded}</a>'
            registry_href = links.to_file(module_file(AUDIT_MODULES[method]))
            stage = _e(r.stage) + (f' (<a href="{_e(registry_href)}">registry</a>)'
                                   if registry_href and r.stage != NOT_REGISTERED else "")
            table_rows.append([
                (f'<code id="check-{_e(r.name)}">{_e(r.name)}</code>', r.name, ""),
                (recorded, ", ".join(r.fields), ""),
                (stage, r.stage, "neutral" if r.stage == NOT_REGISTERED else ""),
                (_e(r.recomputes), r.recomputes, ""),
                (_e(seeds), seeds, seeds_cls),
                (_e(studies), studies, studies_cls),
                (faults, f"{len(r.fault_tests):06d}", faults_cls),
                (_e(moves), f"{len(figures or []):06d}", "")])
        lines += ["```{raw} html",
                  _table(["check", "recorded in", "stage it guards", "what it recomputes", "rendered seeds",
                          "studies (held of records)", "fault tests",
                          "figures that moved when an audited bug broke it"], table_rows, f"checks-{method}"),
                  "```", ""]
    if others:
        lines += ["## Fault tests of metrics", "",
                  "Fault tests whose mark names a metric (a figure that must turn non-zero) or another name that is "
                  "no recorded check.", "", "```{raw} html",
                  _table(["metric or name", "fault tests"],
                         [[(f"<code>{_e(k)}</code>", k, ""),
                           (faults_cell(CheckRow("", k, [], "", "", {}, fault_tests=v), results, links)[0],
                            f"{len(v):06d}", "")]
                          for k, v in sorted(others.items())], "metric-faults"),
                  "```", ""]
    lines += ["## Every check, as text", "",
              "The tables above again, one line per check, so that the book's search finds a check, its stage and "
              "its fault tests.", ""]
    for method, method_rows in by_method.items():
        lines += [f"### `{method}` checks", ""]
        for r in method_rows:
            tests = ", ".join(f"`{t}`" for t in r.fault_tests) or "no fault test"
            lines.append(f"- `{r.name}`: guards {r.stage}; recomputes {r.recomputes or 'not stated'}; "
                         f"fault tests: {tests}.")
        lines.append("")
    lines += ["## Fault audits", "",
              "The last recorded independent fault audits, listed in `rendered/fault_audits.json`. An audit with a "
              "committed per-bug report is recounted from it (its bugs are listed below); the others are named with the "
              "source that reported them, and their figures are not shown, since no per-bug report backs them.", "",
              "```{raw} html", audits_table(), "```", "",
              *audit_report_sections(),
              "## How this page is made", "",
              f"The fault tests were collected with `{collected_with}`: collection only, no test runs. "
              "A test declares the checks its fault turns false with `@pytest.mark.guards(\"name\", ...)`. "
              "Each test's outcome is the one `make test` recorded (`pytest --fault-results build/fault_tests.json`) "
              "in the last full run whose results were committed with `make fault-results`. "
              "`make test` fails when that file misses a fault test or records one that did not pass, so a "
              "committed page cannot show a fault test as passing that was never run. Every cell of the check "
              "tables and every count of the summary above is read back and recomputed from the JSON by "
              "`litrepro.trust_readback`, code that shares nothing with this page's writer, in `make test` "
              "(`tests/test_book.py`).", ""]
    return "\n".join(lines)
