"""``make bench``: every benchmark, side by side, into ``rendered/benchmarks.json``.

    python benchmarks/run.py [--repeats 3] [--device cpu] [--quick]

Every figure is a median over ``--repeats`` runs (default 3), and the file names
the machine (CPU model, cores, load average before and after), since the ratios
move with both.  Prints per-notebook cost against position in one warm kernel
(20 notebooks, methods alternating: slope and 95% interval, issue 18); then the
medians and the ratios the project tracks for the reproduction
(both methods x 10 seeds, 2 workers): (b)/(a), warm-kernel runs over
sequential papermill calls (goal >= 4); (a)/(d), warm runs over the floor of
the notebooks' own cell times (goal <= 1.5); (c)/(a), fresh-kernel runs over
warm ones (goal >= 2); then the per-notebook
time split, the simulator against the copy-bandwidth bound (10^3 to 10^6
campaigns), the batched-waypoint speed-up and the explorers' redraw times
(``explore.py``: cheap redraw median <= 1 s, new seed <= 10 s).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import explore  # noqa: E402
import kernel_position  # noqa: E402
import reproduction  # noqa: E402
import scaling  # noqa: E402

from litrepro import atomic  # noqa: E402
from litrepro.paths import RENDERED  # noqa: E402


def notebook_split(repeats: int, device: str) -> dict:
    out = subprocess.run([sys.executable, str(Path(__file__).parent / "notebook_time.py"), "--repeats", str(repeats),
                          "--device", device], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["medians"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true", help="one repeat, small sizes (a smoke run)")
    parser.add_argument("--seeds", type=int, default=10, help="seeds per method in the reproduction benchmark")
    parser.add_argument("--workers", type=int, default=2, help="parallel workers of (a), (c) and (d)")
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    load_at_start = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    position = kernel_position.measure(8 if args.quick else 20, "tiny" if args.quick else "full", args.device)
    print("\n== per-notebook cost against position in one warm kernel ==")
    print("\n".join(kernel_position.report_lines(position)), flush=True)
    result = {"command": "python benchmarks/run.py " + " ".join(sys.argv[1:]),
              "kernel_position": position,
              "reproduction": reproduction.main(repeats, 2 if args.quick else args.seeds, args.workers),
              "notebook_split": notebook_split(repeats, args.device),
              "scaling": scaling.measure(args.device, repeats, args.quick),
              "explore": explore.measure(max(repeats, 3), 1 if args.quick else 3)}
    result["machine"] = {**kernel_position.machine_info(), "load_average_at_start": load_at_start}
    atomic.write_json(RENDERED / "benchmarks.json", result)      # every key is measured by this run

    rep, machine = result["reproduction"], result["machine"]
    print(f"\n== reproduction: 2 methods x {len(rep['seeds'])} seeds, {rep['workers']} workers, median of "
          f"{rep['repeats']} (seconds), on {machine['cpu_model']}, {machine['cores']} cores ==")
    for key, value in rep["median_s"].items():
        print(f"  {key:30} {value:8.1f}")
    print(f"  (b)/(a) = {rep['ratio_b_over_a']:.2f}   (goal >= 4)")
    print(f"  (a)/(d) = {rep['ratio_a_over_d']:.2f}   (goal <= 1.5)")
    print(f"  (c)/(a) = {rep['ratio_c_over_a']:.2f}   (goal >= 2)")
    print("\n== one notebook: where the time goes (median seconds) ==")
    for method, row in result["notebook_split"].items():
        print(f"  {method:16} " + ", ".join(f"{k} {v}" for k, v in row.items()))
    sim = result["scaling"]["simulator"]
    print(f"\n== simulator: campaign-steps per second (copy bandwidth {sim['copy_bandwidth_bytes_per_s'] / 1e9:.1f} GB/s) ==")
    for row in sim["rows"]:
        print(f"  {row['campaigns']:>8} campaigns: {row['campaign_steps_per_s']:.3g}/s, {row['ns_per_campaign_step']:.0f} ns "
              f"each, {100 * row['fraction_of_bandwidth']:.1f} % of the bandwidth bound")
    print(f"  cost per campaign-step, max / min over sizes: {sim['cost_spread_max_over_min']:.2f}")
    print("\n== waypoint OPD: rollout-and-score tokens per second ==")
    for row in result["scaling"]["waypoint"]:
        print(f"  {row['rollouts']:>5} rollouts: batched {row['tokens_per_s_batched']:.3g}/s, three passes "
              f"{row['tokens_per_s_three_passes']:.3g}/s, scoring speed-up {row['waypoint_scoring_speedup']:.2f}x")
    print()
    explore.report(result["explore"])
    print(f"\nwritten to {RENDERED / 'benchmarks.json'}")


if __name__ == "__main__":
    main()
