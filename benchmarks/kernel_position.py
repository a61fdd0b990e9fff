"""Per-notebook cost against position in one warm kernel (issue 18).

    python benchmarks/kernel_position.py [--notebooks 20] [--size full|tiny] [--device cpu]
                                         [--methods M ...] [--vary-seeds] [--keep-clients]
                                         [--diagnose] [--write] [--json FILE]

Runs ``--notebooks`` notebooks, methods alternating (``pinterest_rlbp`` first),
one after another in ONE warm kernel (``KernelSlot(reuse=notebooks + 1)``), through
the runner's own job path (:func:`litrepro.worker.execute`).  Every notebook of
a method has the same seed (42) and parameters, so the work is identical and
only the position in the kernel changes (``--vary-seeds``: 42, 43, ... as a run
of many seeds has).  Per notebook it records the wall time of the job (kernel
preparation, execution, publication), the CPU seconds of the kernel (from
/proc) and of this process, which drives papermill as a worker does, the RSS of
both, and this process's threads and open file descriptors.  Per method it fits
each cost against position (:func:`scipy.stats.linregress`) and reports the slope
with its 95% interval (slope +- t(0.975, n-2) x stderr), and the ratio of the
method's last notebook to its first one after the kernel's first (which pays the
imports).  The goal: the interval includes 0, or the ratio is at most 1.10.

``--keep-clients`` is the control: each notebook's kernel client is left
running, as papermill leaves it and as the slot did before issue 18.

``--diagnose`` also probes the kernel after every notebook: live objects
(``len(gc.get_objects())``, before and after a full collection), the permanent
generation (``gc.get_freeze_count()``), collections and seconds spent in the
collector during the notebook (a ``gc.callbacks`` hook), the sizes of IPython's
``Out``/``_oh`` and input history, open pyplot figures, live threads,
``sys.modules`` and torch's thread counts.  These are the candidates the issue
names; the probe runs after the notebook, outside its timing, before the next
notebook's reset.

``--write`` merges the result into ``rendered/benchmarks.json`` under
``kernel_position`` (other keys are kept).  ``--size tiny`` uses the tests' tiny
configurations (seconds per notebook), for a smoke run.  Wall times move with the
machine's load; the result records the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path

from litrepro import atomic, methods, worker
from litrepro.kernels import KernelSlot
from litrepro.paths import NOTEBOOKS, RENDERED

#: The tests' tiny configurations (tests/conftest.py), for ``--size tiny``.
TINY = {
    "pinterest_rlbp": {"n_campaigns": 16, "logged_days": 1, "eval_days": 2, "critic_steps": 20, "actor_steps": 10,
                       "batch_size": 32},
    "waypoint_opd": {"comparison_steps": 2, "comparison_eval_prompts": 16},
}

#: Kernel side of ``--diagnose``: a gc callback that times the collector, installed once.
_HOOK = r'''
def _lk_install_gc_hook():
    import builtins, gc, time
    state = {"t": 0.0, "start": 0.0, "n": [0, 0, 0], "full_s": 0.0}
    def hook(phase, info, state=state, clock=time.perf_counter):
        if phase == "start":
            state["start"] = clock()
            return
        dt = clock() - state["start"]
        state["t"] += dt
        state["n"][info["generation"]] += 1
        if info["generation"] == 2:
            state["full_s"] += dt
    gc.callbacks.append(hook)
    builtins._lk_gc_state = state
_lk_install_gc_hook()
del _lk_install_gc_hook
'''

#: Kernel side of ``--diagnose``: write the probe's figures to ``PATH`` (JSON), then zero the gc counters.
_PROBE = r'''
def _lk_probe(path):
    import builtins, gc, json, sys, threading, time
    from IPython import get_ipython
    shell = get_ipython()
    state = builtins._lk_gc_state
    row = {"gc_objects": len(gc.get_objects()), "gc_freeze_count": gc.get_freeze_count(),
           "gc_counts": list(gc.get_count()), "gc_enabled": gc.isenabled(), "gc_threshold": list(gc.get_threshold()),
           "gc_callbacks": len(gc.callbacks), "gc_collections": list(state["n"]),
           "gc_s": state["t"], "gc_full_s": state["full_s"],
           "out_len": len(shell.user_ns.get("Out", {})), "oh_len": len(shell.user_ns.get("_oh", {})),
           "history_in": len(shell.history_manager.input_hist_raw),
           "history_out": len(shell.history_manager.output_hist),
           "threads": threading.active_count(), "modules": len(sys.modules),
           "rss_mb": int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20}
    if "matplotlib.pyplot" in sys.modules:
        row["fignums"] = len(sys.modules["matplotlib.pyplot"].get_fignums())
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        row["torch_threads"] = torch.get_num_threads()
        row["torch_interop_threads"] = torch.get_num_interop_threads()
        row["torch_grad"] = torch.is_grad_enabled()
    t = time.perf_counter()
    gc.collect()
    row["full_collect_s"] = time.perf_counter() - t
    row["gc_objects_after_collect"] = len(gc.get_objects())
    state["t"] = state["full_s"] = 0.0
    state["n"][:] = [0, 0, 0]
    open(path, "w").write(json.dumps(row))
_lk_probe(PATH)
del _lk_probe
'''


def machine_info() -> dict:
    """The machine the figures were taken on: what varies between machines, and the load at the time."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"node": platform.node(), "cpu_model": cpu or platform.processor() or platform.machine(),
            "cores": os.cpu_count(), "processor": platform.machine(), "python": platform.python_version(),
            "system": platform.system(),
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}


def kernel_rss_mb(pid: int | None) -> float | None:
    """Resident set size of the kernel process, from /proc (None where there is no /proc)."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, TypeError):
        return None


def kernel_cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds the kernel process has used so far (all its threads), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, TypeError, IndexError):
        return None


def fit(positions: list[int], times: list[float]) -> dict:
    """Least-squares slope of time against position, with its 95% interval."""
    from scipy import stats

    res = stats.linregress(positions, times)
    half = stats.t.ppf(0.975, len(positions) - 2) * res.stderr
    first, last = res.intercept + res.slope * positions[0], res.intercept + res.slope * positions[-1]
    return {"slope_s_per_notebook": float(res.slope), "slope_ci95": [float(res.slope - half), float(res.slope + half)],
            "ci_includes_zero": bool(res.slope - half <= 0 <= res.slope + half), "intercept_s": float(res.intercept),
            "fitted_last_over_first": float(last / first), "n": len(positions)}


def run(notebooks: int, size: str, device: str, diagnose: bool, seed: int = 42,
        names: list[str] | None = None, vary_seeds: bool = False, keep_clients: bool = False) -> dict:
    names = list(names or methods.METHODS)
    order = [names[i % len(names)] for i in range(notebooks)]
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        slot = KernelSlot(reuse=notebooks + 1, scratch=tmp / "k", cwd=NOTEBOOKS)
        if keep_clients:  # the control: the behaviour before issue 18, every notebook's client left running
            slot._stop_notebook_clients = lambda: None
        try:
            for position, method in enumerate(order, start=1):
                job_seed = seed + (position - 1) // len(names) if vary_seeds else seed
                overrides = dict(TINY[method]) if size == "tiny" else {}
                cpu_before = kernel_cpu_s(slot.pid) if slot.pid else 0.0
                own_before = time.process_time()
                start = time.perf_counter()
                outcome = worker.execute(method, job_seed, str(tmp / "out" / method), device, overrides,
                                         slot=slot, scratch=tmp / "s")
                wall = time.perf_counter() - start
                own_cpu = time.process_time() - own_before
                if outcome["status"] != "ok":
                    raise SystemExit(f"notebook {position} ({method}) {outcome['status']}: {outcome.get('error')}")
                if slot.started != 1:
                    raise SystemExit(f"notebook {position} ran in a new kernel: the benchmark needs one warm kernel")
                row = {"position": position, "method": method, "seed": job_seed, "wall_s": wall,
                       "prepare_s": outcome["timings"]["kernel_s"], "execute_s": outcome["timings"]["execute_s"],
                       "kernel_rss_mb": kernel_rss_mb(slot.pid)}
                row["worker_cpu_s"] = own_cpu
                row["worker_threads"] = threading.active_count()
                row["worker_open_fds"] = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
                row["worker_rss_mb"] = kernel_rss_mb(os.getpid())
                cpu_after = kernel_cpu_s(slot.pid)
                row["kernel_cpu_s"] = None if cpu_after is None or cpu_before is None else cpu_after - cpu_before
                if diagnose:
                    if position == 1:
                        slot._run(_HOOK)
                    probe = tmp / "probe.json"
                    slot._run(_PROBE.replace("PATH", repr(str(probe))))
                    row["kernel"] = json.loads(probe.read_text())
                rows.append(row)
                extra = ""
                if diagnose:
                    k = row["kernel"]
                    extra = (f" objects {k['gc_objects']:>8} frozen {k['gc_freeze_count']:>8} gc {k['gc_s']:5.2f}s"
                             f" ({k['gc_collections'][2]} full, {k['gc_full_s']:.2f}s) collect {k['full_collect_s']:.3f}s"
                             f" Out {k['out_len']} hist {k['history_in']} figs {k.get('fignums')} threads {k['threads']}")
                print(f"{position:3} {method:15} {wall:6.2f}s (execute {row['execute_s']:6.2f}s)"
                      f" cpu {row['kernel_cpu_s'] or 0:6.2f}s rss {row['kernel_rss_mb'] or 0:7.1f} MB"
                      f" | worker: cpu {own_cpu:5.2f}s threads {row['worker_threads']} fds {row['worker_open_fds']}"
                      f" rss {row['worker_rss_mb'] or 0:6.1f} MB{extra}", flush=True)
        finally:
            slot.kill()
    per_method = {}
    for method in names:
        mine = [r for r in rows if r["method"] == method and r["position"] > 1]
        if len(mine) < 3:
            continue
        first, last = mine[0], mine[-1]
        positions = [r["position"] for r in mine]
        per_method[method] = {**fit(positions, [r["wall_s"] for r in mine]),
                              "first_position": first["position"], "last_position": last["position"],
                              "last_over_first": last["wall_s"] / first["wall_s"],
                              "rss_growth_mb": (last["kernel_rss_mb"] or 0) - (first["kernel_rss_mb"] or 0),
                              "worker_rss_growth_mb": (last["worker_rss_mb"] or 0) - (first["worker_rss_mb"] or 0)}
        # CPU seconds move far less with other processes' load than wall time does.
        for key in ("kernel_cpu_s", "worker_cpu_s"):
            if all(r.get(key) is not None for r in mine):
                cpu = fit(positions, [r[key] for r in mine])
                per_method[method][key.replace("_s", "")] = {
                    "slope_s_per_notebook": cpu["slope_s_per_notebook"], "slope_ci95": cpu["slope_ci95"],
                    "fitted_last_over_first": cpu["fitted_last_over_first"],
                    "last_over_first": last[key] / first[key] if first[key] else None}
    return {"notebooks": notebooks, "size": size, "device": device, "seed": seed, "vary_seeds": vary_seeds,
            "keep_clients": keep_clients,
            "order": "cycling " + ", ".join(names),
            "rows": rows, "per_method": per_method,
            "goal": "per method: slope's 95% interval includes 0, or the last notebook within 10% of the first "
                    "after the kernel's first"}


def measure(notebooks: int = 20, size: str = "full", device: str = "cpu", *, diagnose: bool = False,
            names: list[str] | None = None, vary_seeds: bool = False, keep_clients: bool = False,
            command: str | None = None) -> dict:
    """:func:`run`, plus the machine it ran on (with the load average before and after) and the verdict."""
    load_at_start = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    result = run(notebooks, size, device, diagnose, names=names, vary_seeds=vary_seeds, keep_clients=keep_clients)
    result["machine"] = {**machine_info(), "load_average_at_start": load_at_start}
    result["command"] = command or f"python benchmarks/kernel_position.py --notebooks {notebooks} --size {size}"
    for fitted in result["per_method"].values():
        fitted["goal_met"] = bool(fitted["ci_includes_zero"] or fitted["last_over_first"] <= 1.10)
    return result


def report_lines(result: dict) -> list[str]:
    """The benchmark's summary, one line per figure."""
    m = result["machine"]
    lines = [f"{result['notebooks']} notebooks ({result['order']}, {result['size']} size) in one warm kernel on "
             f"{m['cpu_model']} ({m['cores']} cores), load average {m['load_average_at_start'][0]:.1f} at the start, "
             f"{m['load_average'][0]:.1f} at the end" if m.get("load_average") and m.get("load_average_at_start")
             else f"{result['notebooks']} notebooks in one warm kernel on {m['cpu_model']} ({m['cores']} cores)"]
    for method, fitted in result["per_method"].items():
        lo, hi = fitted["slope_ci95"]
        lines.append(f"  {method:15} wall: slope {fitted['slope_s_per_notebook']:+.3f} s/notebook (95% CI {lo:+.3f} .. "
                     f"{hi:+.3f}); notebook {fitted['last_position']} / notebook {fitted['first_position']} = "
                     f"{fitted['last_over_first']:.3f}; goal (CI includes 0, or ratio <= 1.10) "
                     f"{'met' if fitted['goal_met'] else 'MISSED'}")
        for key in ("kernel_cpu", "worker_cpu"):
            if key in fitted:
                cpu = fitted[key]
                lo, hi = cpu["slope_ci95"]
                lines.append(f"  {'':15} {key}: slope {cpu['slope_s_per_notebook']:+.4f} s/notebook (95% CI {lo:+.4f} .."
                             f" {hi:+.4f}), fitted last / first {cpu['fitted_last_over_first']:.3f}")
        lines.append(f"  {'':15} kernel RSS {fitted['rss_growth_mb']:+.1f} MB, worker RSS "
                     f"{fitted['worker_rss_growth_mb']:+.1f} MB from notebook {fitted['first_position']} to "
                     f"{fitted['last_position']}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", type=int, default=20)
    parser.add_argument("--size", choices=("full", "tiny"), default="full")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--methods", nargs="+", choices=list(methods.METHODS), default=list(methods.METHODS),
                        help="methods in the order they cycle (default: both, alternating)")
    parser.add_argument("--vary-seeds", action="store_true",
                        help="seed 42, 43, ... per method instead of 42 every time (as a run of many seeds does)")
    parser.add_argument("--keep-clients", action="store_true",
                        help="control: leave every notebook's kernel client running, as before issue 18")
    parser.add_argument("--diagnose", action="store_true", help="probe the kernel's state after every notebook")
    parser.add_argument("--write", action="store_true", help="merge into rendered/benchmarks.json (kernel_position)")
    parser.add_argument("--json", type=Path, help="also write the result to this file")
    args = parser.parse_args()
    if args.notebooks < 4 * len(args.methods):
        parser.error(f"--notebooks must be at least {4 * len(args.methods)} (three per method after the first)")
    result = measure(args.notebooks, args.size, args.device, diagnose=args.diagnose, names=args.methods,
                     vary_seeds=args.vary_seeds, keep_clients=args.keep_clients,
                     command="python benchmarks/kernel_position.py " + " ".join(sys.argv[1:]))
    print("\n".join(report_lines(result)))
    if args.json:
        atomic.write_json(args.json, result)
    if args.write:
        target = RENDERED / "benchmarks.json"
        merged = json.loads(target.read_text()) if target.is_file() else {}
        merged["kernel_position"] = result
        atomic.write_json(target, merged)
        print(f"written to {target} (kernel_position)")


if __name__ == "__main__":
    main()
