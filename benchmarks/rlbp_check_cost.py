"""What pinterest_rlbp's stage checks cost against one seed's run (issue 14 asks for at most 15%).

    python benchmarks/rlbp_check_cost.py [--seed 42] [--repeats 5]

Times ``experiment.run`` (the notebook's pipeline, lambda sweep included) and, on the same
seed's world and data, each check function alone, as medians of ``--repeats`` runs; the
target audit inside ``train_critic`` is timed as its two flattenings per step.  Prints
each median and the checks' share of the run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from litrepro.rlbp import critic as critic_mod
from litrepro.rlbp import experiment as ex
from litrepro.rlbp.config import RLBPConfig
from litrepro.seeding import seed_everything

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simulator_bandwidth import median_time  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    cfg = RLBPConfig(seed=args.seed)
    g = seed_everything(cfg.seed)
    world = ex.build_world(cfg, g, torch.device("cpu"))
    demo = ex.pid_demo(world, g)
    data = ex.collect_logged_data(world, g)
    days = ex.draw_eval_days(world, g)
    days_report = ex.eval_days_report(data, days, [demo["draws"]])
    critic, critic_report, actor, actor_report = ex.fit_critic_and_actor(world, data, g)
    evaluation = ex.evaluate_policies(world, actor, data, days, g)
    room = ex.headroom(world, days, g)
    net = critic_mod.TwoHeadCritic(len(ex.FEATURES), cfg.hidden)
    steps = 2 * 2 * cfg.critic_steps                    # two flattenings per step, main and control critic
    checks = {
        "transitions_report": lambda: ex.transitions_report(world, data),
        "auction_replay_error": lambda: ex.auction_replay_error(world, data),
        "eval_days_report": lambda: ex.eval_days_report(data, days, [demo["draws"]]),
        "action_label_error": lambda: ex.action_label_error(world),
        "stage_audit": lambda: ex.stage_audit(world, critic, actor, data, critic_report, actor_report, evaluation,
                                              days_report, room),
        "target audit (flattenings)": lambda: [critic_mod._flat(net) for _ in range(steps)],
    }
    costs = {name: median_time(fn, args.repeats) for name, fn in checks.items()}
    run = median_time(lambda: ex.run(cfg), max(1, args.repeats // 2))
    for name, cost in costs.items():
        print(f"{name:28s} {cost * 1e3:8.1f} ms")
    total = sum(costs.values())
    print(f"experiment.run (seed {cfg.seed}) {run:.2f} s; checks {total:.3f} s = {100 * total / run:.1f}% of it")


if __name__ == "__main__":
    main()
