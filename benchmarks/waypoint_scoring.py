"""Waypoint scoring paths, timed side by side: medians of repeated calls.

    python benchmarks/waypoint_scoring.py [--device cpu|cuda] [--repeats 7] [--sizes 64 256 1024 4096]

For rollouts of 16 tokens after an 8-byte prompt, scores the generated tokens
under three waypoints by:
- ``streamed``: :func:`waypoint_logps_streamed` (cache-sized blocks, no full logits);
- ``stacked``: :func:`waypoint_logps_stacked` (one pass over stacked parameters);
- ``three_passes``: three separate :func:`student_logps` calls under ``no_grad``;
and reports which path ``waypoint_logps`` picks for the device and size, and its speed-up
over three passes and over the other path.  One intra-op thread, as in the notebooks.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

from litrepro.waypoint.model import BytePolicy
from litrepro.waypoint.opd import (sample_rollouts, scoring_path, student_logps, waypoint_logps_stacked,
                                   waypoint_logps_streamed)


def median_times(fns: dict, repeats: int, device: torch.device) -> dict[str, float]:
    """Median seconds per function; the functions take turns in every round, so load spikes hit all alike."""
    def timed(fn):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start
    for fn in fns.values():                                                     # warm-up
        timed(fn)
    samples = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            samples[name].append(timed(fn))
    return {name: statistics.median(v) for name, v in samples.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024, 4096])
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    device = torch.device(args.device)
    g = torch.Generator().manual_seed(0)
    waypoints = [BytePolicy(24, g).to(device).requires_grad_(False) for _ in range(3)]
    sampler = BytePolicy(24, g).to(device)
    rows = []
    for b in args.sizes:
        r = sample_rollouts(sampler, torch.randint(256, (b, 8), generator=g).to(device), 16, g)
        chosen = scoring_path(device.type, r.generated.numel()).__name__.rsplit("_", 1)[1]
        with torch.no_grad():
            times = median_times({"streamed": lambda: waypoint_logps_streamed(waypoints, r),
                                  "stacked": lambda: waypoint_logps_stacked(waypoints, r),
                                  "three_passes": lambda: [student_logps(w, r) for w in waypoints]}, args.repeats, device)
        other = min(v for k, v in times.items() if k != chosen)
        rows.append({"rollouts": b, "median_s": times, "chosen": chosen,
                     "speedup_vs_three_passes": times["three_passes"] / times[chosen],
                     "speedup_vs_best_other": other / times[chosen]})
        print(f"{b:>5} rollouts: " + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in times.items())
              + f"; chosen {chosen}: {rows[-1]['speedup_vs_three_passes']:.2f}x three passes, "
              f"{rows[-1]['speedup_vs_best_other']:.2f}x the best other path", file=sys.stderr)
    print(json.dumps({"device": device.type, "repeats": args.repeats, "rows": rows}, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
