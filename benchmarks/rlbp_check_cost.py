"""What pinterest_rlbp's checks cost against one seed's run (issues 14 and 21 ask for at most 15%).

    python benchmarks/rlbp_check_cost.py [--seed 42] [--repeats 5] [--write]

Times ``experiment.run`` (the notebook's pipeline, lambda sweep included, checks included)
and, on the same seed's stages, each audit function of ``litrepro.rlbp.audit`` alone, as
medians of ``--repeats`` runs: the stage replays and reference recomputations
(``stage_audit``, which now also replays every random stream and rebuilds the reported
figures), the assembled checks (seed contract, stage checks, and issue 21's streams,
settings, standard errors and reported figures), the transitions and auction replays, the
TD-loss plain loop inside ``fit_critic`` and the target audit's flattenings inside
``train_critic``.  Control arms (the permuted-reward critic, the value-only actor) are
part of the method's evidence and are not counted.  Prints each median and the checks'
share of the run; ``--write`` records them in ``rendered/pinterest_rlbp/audit_cost.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

from litrepro import atomic
from litrepro.guard import OfflineGuard
from litrepro.paths import RENDERED
from litrepro.rlbp import audit
from litrepro.rlbp import critic as critic_mod
from litrepro.rlbp import experiment as ex
from litrepro.rlbp.config import RLBPConfig
from litrepro.seeding import describe_device, seed_everything

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simulator_bandwidth import median_time  # noqa: E402

OUT = RENDERED / "pinterest_rlbp" / "audit_cost.json"
GOAL = 0.15


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--write", action="store_true", help=f"record the figures in {OUT.relative_to(RENDERED.parent)}")
    args = parser.parse_args()
    cfg = RLBPConfig(seed=args.seed)
    seed_everything(cfg.seed)
    g = ex.Streams(cfg.seed)
    device = torch.device("cpu")
    with OfflineGuard() as guard:
        world = ex.build_world(cfg, g, device)
        demo = ex.pid_demo(world, g)
        data = ex.collect_logged_data(world, g)
        days = ex.draw_eval_days(world, g)
        days_report = audit.eval_days_report(data, days, [demo["draws"]])
        critic, critic_report, actor, actor_report = ex.fit_critic_and_actor(world, data, g)
        fusion = ex.fusion_diagnostics(world, critic, actor, actor_report, data, g)
        evaluation = ex.evaluate_policies(world, actor, data, days, g)
        sweep = ex.lambda_sweep(world, critic, data, days, g)
        room = ex.headroom(world, days, g)
    transitions = audit.transitions_report(world, data)
    auction_error = audit.auction_replay_error(world, data)
    stage = audit.stage_audit(world, critic, actor, data, critic_report, actor_report, evaluation, days_report, room)
    results = ex.collect_results(world, critic_report=critic_report, actor_report=actor_report, data=data,
                                 evaluation=evaluation, fusion=fusion, sweep=sweep, derivative_error=0.0, guard=guard,
                                 execution=describe_device(device), fingerprint="", days_report=days_report,
                                 transitions=transitions, auction_error=auction_error, audit=stage, headroom_report=room)
    assert all(results["checks"].values()) and all(results["extra_checks"].values())
    net = critic_mod.TwoHeadCritic(len(ex.FEATURES), cfg.hidden)
    steps = 2 * 2 * cfg.critic_steps                    # two flattenings per step, main and control critic
    backup = ex.fixtures.backup_fixture(cfg.gamma)
    row_mass = results["metrics"]["policy_row_mass_error"]
    checks = {
        "transitions_report": lambda: audit.transitions_report(world, data),
        "auction_replay_error": lambda: audit.auction_replay_error(world, data),
        "eval_days_report": lambda: audit.eval_days_report(data, days, [demo["draws"]]),
        "derivative_gain_error": lambda: audit.derivative_gain_error(demo["logs"][8], cfg.kd, cfg.steps_per_day),
        "stage_audit (replays, streams, references)": lambda: audit.stage_audit(
            world, critic, actor, data, critic_report, actor_report, evaluation, days_report, room),
        "seed_contract_checks": lambda: audit.seed_contract_checks(
            world, critic_report=critic_report, actor_report=actor_report, data=data, evaluation=evaluation,
            fusion=fusion, guard=guard, backup=backup, row_mass=row_mass),
        "stage_checks": lambda: audit.stage_checks(
            world, critic_report=critic_report, actor_report=actor_report, data=data, evaluation=evaluation,
            days_report=days_report, transitions=transitions, auction_error=auction_error, audit=stage),
        "seed_checks (streams, settings, SE, figures)": lambda: audit.seed_checks(
            world, results, audit=stage, data=data, critic_report=critic_report, actor_report=actor_report,
            evaluation=evaluation, fusion=fusion, sweep=sweep, days_report=days_report),
        "controller_replay + action_label": lambda: (audit.controller_replay_error(world, data["logs"]),
                                                     audit.action_label_error(world)),
        "td_loss_reference_error (in fit_critic)": lambda: critic_mod.td_loss_reference_error(
            critic, data["heldout"], cfg.gamma, target=critic_report["critics"][1], kind=cfg.critic_backup,
            lam=cfg.lambda_cpc),
        "target audit (flattenings)": lambda: [critic_mod._flat(net) for _ in range(steps)],
    }
    costs = {name: median_time(fn, args.repeats) for name, fn in checks.items()}
    run = median_time(lambda: ex.run(cfg), max(1, args.repeats // 2))
    for name, cost in costs.items():
        print(f"{name:46s} {cost * 1e3:8.1f} ms")
    total = sum(costs.values())
    share = total / run
    print(f"experiment.run (seed {cfg.seed}) {run:.2f} s; checks {total:.3f} s = {100 * share:.1f}% of it "
          f"(goal <= {100 * GOAL:.0f}%)")
    if args.write:
        atomic.write_json(OUT, {
            "command": f"python benchmarks/rlbp_check_cost.py --seed {args.seed} --repeats {args.repeats} --write",
            "seed": cfg.seed, "repeats": args.repeats, "cores": os.cpu_count(), "statistic": "median",
            "run_s": round(run, 3), "checks_s": round(total, 3), "checks_share_of_run": round(share, 4),
            "goal_share": GOAL, "within_goal": share <= GOAL,
            "per_check_ms": {k: round(v * 1e3, 1) for k, v in costs.items()}})
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
