"""What the audit checks (``litrepro.waypoint.audit``) add to one waypoint_opd seed.

    python benchmarks/waypoint_audit_cost.py [--repeats 5] [--seed 42]

Runs ``experiment.run(cfg)`` with and without the audits, interleaved (with, without,
with, ...), after one warm-up of each, and prints the median time of each, the ratio
with / without, and the median time of the two audit calls alone: wall time, and the
process's CPU time (one thread, so CPU time is the work done; on a shared machine it is far
less noisy than wall time).  The machine's load average is printed beside them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    from litrepro.waypoint import audit
    from litrepro.waypoint import experiment as wp
    from litrepro.waypoint.config import WaypointConfig

    cfg = WaypointConfig(seed=args.seed, device="cpu")
    clocks = {"wall": time.perf_counter, "cpu": time.process_time}
    spent = []                                                   # (wall, cpu) inside the two audit calls

    def timed(fn):
        def wrapper(*a, **k):
            start = {c: f() for c, f in clocks.items()}
            try:
                return fn(*a, **k)
            finally:
                spent[-1] = {c: spent[-1][c] + f() - start[c] for c, f in clocks.items()}
        return wrapper

    wp.audit_run, wp.audit_comparison = timed(audit.audit_run), timed(audit.audit_comparison)
    times = {(w, c): [] for w in (True, False) for c in clocks}
    audits = []
    for i in range(args.repeats + 1):
        for with_audits in (True, False):
            spent.append({c: 0.0 for c in clocks})
            start = {c: f() for c, f in clocks.items()}
            wp.run(cfg, audits=with_audits)
            if i:                                                # the first round warms up
                for c, f in clocks.items():
                    times[(with_audits, c)].append(f() - start[c])
                if with_audits:
                    audits.append(spent[-1])
    print(f"run(cfg) seed {args.seed}, {args.repeats} interleaved repeats, load average {os.getloadavg()}")
    for c in clocks:
        on, off = statistics.median(times[(True, c)]), statistics.median(times[(False, c)])
        alone = statistics.median(a[c] for a in audits)
        print(f"  {c:4s}: with audits {on:.3f} s, without {off:.3f} s (medians), ratio {on / off:.3f}; "
              f"audit calls alone {alone:.3f} s = {alone / off:.1%} of the run without them")


if __name__ == "__main__":
    main()
