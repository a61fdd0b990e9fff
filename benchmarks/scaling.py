"""How each method's core scales with work (medians of repeated runs).

* The auto-bidding simulator: campaign-steps per second at 10^3 .. 10^6
  campaigns against the machine's copy bandwidth (``simulator_bandwidth.py``).
* Waypoint OPD: rollout-and-score tokens per second for 64 .. 8192 rollouts,
  with the three waypoints scored in one batched pass against three passes.

    python benchmarks/scaling.py [--device cpu] [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import json

import torch
from simulator_bandwidth import median_time
from simulator_bandwidth import run as simulator_vs_bandwidth

from litrepro.waypoint.model import BytePolicy
from litrepro.waypoint.opd import sample_rollouts, student_logps, waypoint_logps


def waypoint(device: torch.device, repeats: int, sizes: list[int]) -> list[dict]:
    g = torch.Generator().manual_seed(0)
    student = BytePolicy(24, g).to(device)
    waypoints = [BytePolicy(24, g).to(device).requires_grad_(False) for _ in range(3)]
    rows = []
    for b in sizes:
        prompts = torch.randint(256, (b, 8), generator=g).to(device)

        def rollout_and_score(batched: bool) -> None:
            r = sample_rollouts(student, prompts, 16, g)
            student_logps(student, r)
            if batched:
                waypoint_logps(waypoints, r)
            else:
                with torch.no_grad():
                    for w in waypoints:
                        student_logps(w, r)

        tokens = b * 16
        one = median_time(lambda: rollout_and_score(True), repeats)
        three = median_time(lambda: rollout_and_score(False), repeats)
        r = sample_rollouts(student, prompts, 16, g)
        with torch.no_grad():
            score_one = median_time(lambda: waypoint_logps(waypoints, r), repeats)
            score_three = median_time(lambda: [student_logps(w, r) for w in waypoints], repeats)
        rows.append({"rollouts": b, "tokens_per_s_batched": tokens / one, "tokens_per_s_three_passes": tokens / three,
                     "waypoint_scoring_speedup": score_three / score_one})
    return rows


def measure(device: str, repeats: int, quick: bool) -> dict:
    """Both scaling benchmarks; one intra-op thread, as the notebooks use."""
    torch.set_num_threads(1)
    dev = torch.device(device)
    wp_sizes = [64, 256] if quick else [64, 256, 1024, 4096, 8192]
    return {"device": device, "repeats": repeats,
            "simulator": simulator_vs_bandwidth(repeats, 10_000 if quick else 1_000_000),
            "waypoint": waypoint(dev, repeats, wp_sizes)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    args = parser.parse_args()
    print(json.dumps(measure(args.device, args.repeats, args.quick), indent=1))
