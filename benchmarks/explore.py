"""How fast the explorers answer: medians of redraw times, in the kernel and in a real browser.

    python benchmarks/explore.py [--repeats 5] [--seeds 3] [--no-browser]

In the kernel (no browser): each explorer is opened once (seed 42, warming the
imports), then
- ``cheap_redraw_s``: a cheap control is moved ``repeats`` times (pinterest_rlbp: lambda,
  top-k and the campaign kind in turn; waypoint_opd: the gate and the OPD steps), every
  stage cached: compute, draw and PNG;
- ``new_seed_s``: the seed is set to ``seeds`` seeds never shown before, each paying the
  expensive stages (world, data, critic, actors; teacher, RL, lineage, arms).
In the browser (``/usr/bin/chromium`` through Playwright, the explorer served by Voila):
the same moves made in the page, timed from the control change until the picture's
image changes: the wire, the kernel and the browser's drawing together.

Goal: cheap redraw median <= 1 s; new seed median <= 10 s on 2 cores.  Writes the
medians under ``explore`` in ``rendered/benchmarks.json``, keeping its other keys.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from litrepro import atomic  # noqa: E402
from litrepro.paths import RENDERED  # noqa: E402

GOAL_CHEAP_S, GOAL_SEED_S = 1.0, 10.0


def _timed(control, value) -> float:
    start = time.perf_counter()
    control.value = value
    return time.perf_counter() - start


def cheap_moves(method: str, repeats: int) -> list[tuple[str, object]]:
    """``repeats`` moves of each cheap control, every move a change from the control's previous value."""
    if method == "pinterest_rlbp":
        from litrepro.explore.rlbp import KINDS, LAMBDA_GRID

        per_round = lambda i: [("lam", LAMBDA_GRID[i % len(LAMBDA_GRID)]), ("top_k", 2 + i % 3),  # noqa: E731
                               ("kind", KINDS[(i + 1) % len(KINDS)])]
    else:
        from litrepro.explore.waypoint import EVAL_EVERY, GATES, MAX_STEPS

        gates = list(GATES.values())
        per_round = lambda i: [("gate", gates[(i + 1) % len(gates)]),  # noqa: E731
                               ("steps", (i % (MAX_STEPS // EVAL_EVERY)) * EVAL_EVERY)]
    return [move for i in range(repeats) for move in per_round(i)]


def in_kernel(repeats: int, seeds: int) -> dict:
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):          # outside a kernel, display() prints a repr
        return _in_kernel(repeats, seeds)


def _in_kernel(repeats: int, seeds: int) -> dict:
    from litrepro.explore import rlbp_explorer, waypoint_explorer

    out = {}
    for method, make in (("pinterest_rlbp", rlbp_explorer), ("waypoint_opd", waypoint_explorer)):
        start = time.perf_counter()
        ex = make(seed=42)
        opened = time.perf_counter() - start
        cheap = [_timed(ex.controls[name], value) for name, value in cheap_moves(method, repeats)]
        fresh = [_timed(ex.controls["seed"], 1000 + s) for s in range(seeds)]
        out[method] = {"open_s": round(opened, 3), "cheap_redraw_s": round(statistics.median(cheap), 3),
                       "cheap_redraws": len(cheap), "new_seed_s": round(statistics.median(fresh), 3),
                       "new_seeds": len(fresh)}
    return out


def in_browser(repeats: int, seeds: int) -> dict:
    import browser

    out = {}
    with tempfile.TemporaryDirectory() as tmp, browser.server("voila", Path(tmp) / "voila.log") as (url, _, token), \
            browser.browser() as b:
        for notebook, (label, option) in browser.EXPLORERS.items():
            page = browser.new_page(b)
            first = browser.open_explorer(page, url, notebook, token)
            options = page.locator(".widget-dropdown", has_text=label).locator("option").all_inner_texts()
            cheap = [browser.choose(page, label, options[(i + 1) % len(options)]) for i in range(repeats)]
            fresh = []
            for s in range(seeds):
                box = page.locator(".widget-text", has_text="seed").locator("input")
                before = page.get_attribute(browser.PICTURE_IMG, "src")
                start = time.perf_counter()
                box.fill(str(2000 + s))
                box.press("Enter")
                page.wait_for_function("([sel, b]) => document.querySelector(sel).getAttribute('src') !== b",
                                       arg=[browser.PICTURE_IMG, before], timeout=120_000, polling=20)
                fresh.append(time.perf_counter() - start)
            assert not browser.errors(page), browser.errors(page)
            out[notebook.removeprefix("explore_").removesuffix(".ipynb")] = {
                "first_view_s": round(first, 3), "cheap_redraw_s": round(statistics.median(cheap), 3),
                "cheap_redraws": len(cheap), "cheap_control": label, "new_seed_s": round(statistics.median(fresh), 3),
                "new_seeds": len(fresh)}
            page.close()
    return out


def measure(repeats: int = 5, seeds: int = 3, use_browser: bool = True) -> dict:
    import browser

    result = {"repeats": repeats, "seeds": seeds, "cores": os.cpu_count(),
              "goal": {"cheap_redraw_s": GOAL_CHEAP_S, "new_seed_s": GOAL_SEED_S},
              "kernel": in_kernel(repeats, seeds)}
    if use_browser and not browser.chromium_missing():
        result["browser"] = in_browser(repeats, seeds)
    else:
        result["browser"] = None
        result["browser_skipped"] = browser.INSTALL_HINT if use_browser else "--no-browser"
    return result


def write(result: dict) -> None:
    """Merge ``result`` into ``rendered/benchmarks.json`` under ``explore``."""
    path = RENDERED / "benchmarks.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data["explore"] = result
    atomic.write_json(path, data)


def report(result: dict) -> None:
    print("== explorers: median seconds (goal: cheap redraw <= 1, new seed <= 10) ==")
    for where in ("kernel", "browser"):
        for method, row in (result.get(where) or {}).items():
            print(f"  {where:8} {method:16} cheap redraw {row['cheap_redraw_s']:.3f} ({row['cheap_redraws']} moves), "
                  f"new seed {row['new_seed_s']:.2f} ({row['new_seeds']} seeds)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    result = measure(args.repeats, args.seeds, not args.no_browser)
    result["command"] = "python benchmarks/explore.py " + " ".join(sys.argv[1:])
    write(result)
    report(result)


if __name__ == "__main__":
    main()
