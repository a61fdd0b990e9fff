"""How each method's core scales with work (medians of repeated runs).

* The auto-bidding simulator: campaign-steps per second at 10^2 .. 10^5
  campaigns, against a straightforward per-campaign Python loop (numpy over the
  auctions of one campaign and step, a Python loop over campaigns and steps).
* Waypoint OPD: rollout-and-score tokens per second for 64 .. 8192 rollouts,
  with the three waypoints scored in one batched pass against three passes.

    python benchmarks/scaling.py [--device cpu] [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch

from litrepro.rlbp import experiment as rlbp
from litrepro.rlbp.config import RLBPConfig
from litrepro.rlbp.simulator import draw_day, simulate_day
from litrepro.waypoint.model import BytePolicy
from litrepro.waypoint.opd import sample_rollouts, student_logps, waypoint_logps


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def loop_simulator(world, draws, action: int) -> None:
    """The per-campaign reference: same controller and auction rules, one campaign at a time."""
    c, s = world.campaigns, world.settings
    price, click, live = draws.price.numpy(), draws.click_prob.numpy(), draws.live.numpy()
    plan = c.plan.numpy()
    budget, base_bid = c.budget.numpy(), c.base_bid.numpy()
    kp, ki = float(s.kp[action]), float(s.ki[action])
    steps, n, _ = price.shape
    dt = 1.0 / steps
    for j in range(n):
        spent = clicks = integral = 0.0
        e_prev = None
        for t in range(steps):
            e = (plan[t - 1, j] if t else 0.0) - spent / budget[j]
            integral += e * dt
            d = s.kd * (e - (e if e_prev is None else e_prev)) / dt
            e_prev = e
            phi = min(max(kp * e + ki * integral + d, -s.phi_max), s.phi_max)
            if spent < budget[j]:
                win = live[t, j] & (price[t, j] < base_bid[j] * np.exp(phi))
                spent += float(price[t, j][win].sum())
                clicks += float(click[t, j][win].sum())


def simulator(device: torch.device, repeats: int, sizes: list[int], loop_sizes: list[int]) -> list[dict]:
    rows = []
    for n in sizes:
        cfg = RLBPConfig(n_campaigns=n)
        g = torch.Generator().manual_seed(0)
        world = rlbp.build_world(cfg, g, device)
        draws = draw_day(world.campaigns, cfg.opportunities_per_step, g)
        policy = rlbp.constant_policy(4)
        vec = median_time(lambda: simulate_day(world.campaigns, draws, policy, world.settings, g), repeats)
        row = {"campaigns": n, "vectorised_campaign_steps_per_s": n * cfg.steps_per_day / vec,
               "vectorised_s_per_day": vec}
        if n in loop_sizes and device.type == "cpu":
            loop = median_time(lambda: loop_simulator(world, draws, 4), 1)
            row.update(loop_campaign_steps_per_s=n * cfg.steps_per_day / loop, speedup_vs_loop=loop / vec)
        rows.append(row)
    return rows


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
    sim_sizes = [100, 1000] if quick else [100, 1000, 10_000, 100_000]
    loop_sizes = [100, 1000] if quick else [1000, 10_000]
    wp_sizes = [64, 256] if quick else [64, 256, 1024, 4096, 8192]
    return {"device": device, "repeats": repeats, "simulator": simulator(dev, repeats, sim_sizes, loop_sizes),
            "waypoint": waypoint(dev, repeats, wp_sizes)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    args = parser.parse_args()
    print(json.dumps(measure(args.device, args.repeats, args.quick), indent=1))
