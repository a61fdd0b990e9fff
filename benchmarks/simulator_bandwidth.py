"""The auto-bidding simulator against the machine's memory bandwidth.

A simulated campaign-step reads that step's pre-drawn auctions: M competing prices
(float64), M click probabilities (float64) and M liveness flags (bool), 17 M bytes,
which is the least any implementation must touch.  The roofline for the simulator is
then ``copy bandwidth / (17 M)`` campaign-steps per second; the report gives the
measured rate, that bound and the fraction of it reached, from 10^3 to 10^6
campaigns (cost per campaign-step should stay flat).  Copy bandwidth is measured
here as (bytes read + bytes written) / time of a large ``Tensor.copy_``.

    python benchmarks/simulator_bandwidth.py [--repeats 3] [--max-campaigns 1000000] [--json OUT]

Medians of ``--repeats`` runs.  The 10^6 point uses 4 steps per day (2.2 GB of draws)
instead of 24, which changes the number of steps, not the work per campaign-step.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

from litrepro.rlbp import experiment as rlbp
from litrepro.rlbp.config import RLBPConfig
from litrepro.rlbp.simulator import draw_day, simulate_day

BYTES_PER_OPPORTUNITY = 8 + 8 + 1   # price (float64), click probability (float64), live (bool)


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def copy_bandwidth(repeats: int, size_bytes: int = 1 << 30) -> float:
    """Bytes per second moved by ``dst.copy_(src)`` of a 1 GiB float64 buffer (read + write)."""
    src = torch.ones(size_bytes // 8, dtype=torch.float64)
    dst = torch.empty_like(src)
    dst.copy_(src)                                                        # fault the pages in
    seconds = median_time(lambda: dst.copy_(src), repeats)
    return 2 * size_bytes / seconds


def simulator_rate(n: int, repeats: int) -> dict:
    steps = 24 if n <= 100_000 else 4
    cfg = RLBPConfig(n_campaigns=n, steps_per_day=steps, segments_per_day=2 if steps == 4 else 6)
    g = torch.Generator().manual_seed(0)
    world = rlbp.build_world(cfg, g, torch.device("cpu"))
    draws = draw_day(world.campaigns, cfg.opportunities_per_step, g)
    policy = rlbp.constant_policy(4)
    seconds = median_time(lambda: simulate_day(world.campaigns, draws, policy, world.settings, g), repeats)
    campaign_steps = n * steps
    return {"campaigns": n, "steps_per_day": steps, "seconds_per_day": seconds,
            "campaign_steps_per_s": campaign_steps / seconds,
            "ns_per_campaign_step": 1e9 * seconds / campaign_steps,
            "bytes_per_campaign_step": BYTES_PER_OPPORTUNITY * cfg.opportunities_per_step}


def run(repeats: int, max_campaigns: int) -> dict:
    torch.set_num_threads(1)
    bandwidth = copy_bandwidth(repeats)
    rows = []
    n = 1000
    while n <= max_campaigns:
        row = simulator_rate(n, repeats)
        bound = bandwidth / row["bytes_per_campaign_step"]
        row.update(bandwidth_bound_campaign_steps_per_s=bound, fraction_of_bandwidth=row["campaign_steps_per_s"] / bound)
        rows.append(row)
        print(f"{n:>9} campaigns: {row['campaign_steps_per_s']:.3g} campaign-steps/s, "
              f"{row['ns_per_campaign_step']:.0f} ns each, {100 * row['fraction_of_bandwidth']:.1f} % of the copy-bandwidth bound",
              file=sys.stderr)
        n *= 10
    per_step = [r["ns_per_campaign_step"] for r in rows]
    return {"copy_bandwidth_bytes_per_s": bandwidth, "threads": 1, "rows": rows,
            "cost_spread_max_over_min": max(per_step) / min(per_step)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-campaigns", type=int, default=1_000_000)
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    result = run(args.repeats, args.max_campaigns)
    text = json.dumps(result, indent=2, sort_keys=True)
    print(text)
    if args.json:
        with open(args.json, "w") as handle:
            handle.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
