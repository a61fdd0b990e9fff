"""What the audit checks (``litrepro.waypoint.audit``) add to one waypoint_opd seed.

    python benchmarks/waypoint_audit_cost.py [--repeats 5] [--seed 42]

Runs ``experiment.run(cfg)`` with and without the audits, interleaved (with, without,
with, ...), after one warm-up of each, and prints the median wall time of each, the
ratio with / without, and the median time of the two audit calls alone.  The machine's
load average is printed beside them: on a shared machine the figures are noisy.
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
    spent = []                                                   # time inside the two audit calls

    def timed(fn):
        def wrapper(*a, **k):
            start = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[-1] += time.perf_counter() - start
        return wrapper

    wp.audit_run, wp.audit_comparison = timed(audit.audit_run), timed(audit.audit_comparison)
    times = {True: [], False: []}
    for i in range(args.repeats + 1):
        for with_audits in (True, False):
            spent.append(0.0)
            start = time.perf_counter()
            wp.run(cfg, audits=with_audits)
            if i:                                                # the first round warms up
                times[with_audits].append(time.perf_counter() - start)
            elif with_audits:
                spent.pop()
    on, off = statistics.median(times[True]), statistics.median(times[False])
    audit_only = statistics.median([s for s in spent if s > 0])
    print(f"run(cfg) seed {args.seed}, {args.repeats} interleaved repeats, load average {os.getloadavg()}")
    print(f"  with audits    {on:.3f} s (median)")
    print(f"  without audits {off:.3f} s (median)")
    print(f"  ratio {on / off:.3f}; audit calls alone {audit_only:.3f} s = {audit_only / off:.1%} of the run without them")


if __name__ == "__main__":
    main()
