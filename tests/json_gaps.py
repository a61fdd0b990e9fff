"""Comparing two JSON values with a tolerance for the last bits of floats (tests of re-derived summaries)."""

from __future__ import annotations


def json_gaps(a, b, rel: float = 1e-12, where: str = "") -> list[str]:
    """Where two JSON values differ: structure, strings and integers exactly, floats beyond ``rel``.

    A float summary re-derived on another CPU may differ in its last bit (numpy's reductions use the
    machine's vector width), so the test allows 1e-12 relative; on the machine that wrote it, it is exact."""
    if isinstance(a, float) or isinstance(b, float):
        ok = isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) <= rel * max(abs(a), abs(b))
        return [] if ok else [f"{where}: {a!r} vs {b!r}"]
    if type(a) is not type(b):
        return [f"{where}: {type(a).__name__} vs {type(b).__name__}"]
    if isinstance(a, dict):
        if set(a) != set(b):
            return [f"{where}: keys {sorted(set(a) ^ set(b))[:5]}"]
        return [g for k in a for g in json_gaps(a[k], b[k], rel, f"{where}.{k}")]
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} vs {len(b)} items"]
        return [g for i, (x, y) in enumerate(zip(a, b)) for g in json_gaps(x, y, rel, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {a!r} vs {b!r}"]
