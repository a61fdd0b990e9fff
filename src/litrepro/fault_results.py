"""The fault tests' outcomes in a full ``make test``, checked and committed for the trust report.

``make test`` runs pytest with ``--fault-results build/fault_tests.json`` (see ``tests/conftest.py``), which
records ``{"commit", "date", "tests": {node id: passed|failed|skipped|error}}`` for every test marked
``@pytest.mark.guards``.  ``make fault-results`` runs :func:`main`, which copies that file to
``rendered/fault_tests.json`` only when every fault test the suite collects is in it and passed; the trust
report (:mod:`litrepro.trust`) shows each test's outcome from the committed copy, and ``make test`` fails when
the committed copy misses a fault test or records one that did not pass (:func:`problems`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

__all__ = ["problems", "main"]


def problems(results: Mapping[str, Any], collected: Iterable[str]) -> list[str]:
    """What keeps ``results`` from vouching for every collected fault test: missing, extra or not passed."""
    tests = dict(results.get("tests") or {})
    collected = set(collected)
    out = [f"{t}: not in the run" for t in sorted(collected - set(tests))]
    out += [f"{t}: recorded but no longer collected" for t in sorted(set(tests) - collected)]
    out += [f"{t}: {o}" for t, o in sorted(tests.items()) if t in collected and o != "passed"]
    if not results.get("commit") or not results.get("date"):
        out.append("the run names no commit or date")
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m litrepro.fault_results SOURCE DEST``: copy a full run's outcomes after checking them."""
    import tempfile

    from litrepro import atomic
    from litrepro.paths import ROOT
    from litrepro.trust import collect_fault_registry

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m litrepro.fault_results SOURCE DEST", file=sys.stderr)
        return 2
    source, dest = Path(args[0]), Path(args[1])
    try:
        results = json.loads(source.read_text())
    except (OSError, ValueError) as err:
        print(f"{source}: cannot be read as JSON ({type(err).__name__})", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        registry = collect_fault_registry(Path(tmp) / "registry.json", root=ROOT)
    bad = problems(results, {t for ids in registry.values() for t in ids})
    if bad:
        print(f"{source}: not copied, {len(bad)} fault test(s) not vouched for, first: {bad[0]}", file=sys.stderr)
        return 2
    atomic.write_json(dest, results)
    print(f"wrote {dest} ({len(results['tests'])} fault tests passed at commit {results['commit']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
