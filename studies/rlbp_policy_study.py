"""``make rlbp-study``: pinterest_rlbp over 20 seeds, every critic backup, the headroom and more logged data.

    python studies/rlbp_policy_study.py [--seeds 42-61] [--jobs 2]

``--seeds`` (a range or one seed) and ``--jobs`` are validated by :mod:`litrepro.study_args`
(the runner's bounds; one line and exit status 2).

Calls the package directly (the notebook adds nothing to the numbers): per seed,
``litrepro.rlbp.experiment.run_arms`` with all four backups on the same data and
evaluation days (the seed's ``max_min`` also runs the lambda sweep), then, for
``max_min`` and the best other backup, the same at 8 and 16 logged days.  Writes
``policy_comparison.json``, ``lambda_frontier.json``, ``backup_study.json`` and
their PNGs into ``rendered/pinterest_rlbp/`` (``litrepro.rlbp.study``); refuses to
write an output over a seed whose checks failed: ``policy_comparison`` and
``lambda_frontier`` need every ``max_min`` seed to pass, ``backup_study`` every seed of
every backup; every row is recomputed by a plain loop first, and a mismatch writes nothing.  ``make test`` checks that the files are
current with the sources; it does not re-run them.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from litrepro import atomic, plotting, study_args
from litrepro.rlbp import plots as rlbp_plots
from litrepro.rlbp import study
from litrepro.rlbp.config import RLBPConfig


def _seed_job(args: tuple[int, int, tuple[str, ...], bool]) -> dict:
    """One seed, one logged_days: every requested backup, in one process."""
    from litrepro.rlbp.experiment import run_arms

    seed, days, backups, sweep = args
    cfg = dataclasses.replace(RLBPConfig(seed=seed), logged_days=days)
    return run_arms(cfg, "cpu", backups=backups, sweep=sweep)


def _run(jobs: list, workers: int) -> list[dict]:
    if workers <= 1:
        return [_seed_job(j) for j in jobs]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_seed_job, jobs))


def main(argv: list[str] | None = None) -> int:
    parser = study_args.parser(__doc__.splitlines()[0], seeds="42-61", jobs=2)
    args = parser.parse_args(argv)
    seeds = args.seeds                           # at least 20 for the study
    base_days = RLBPConfig().logged_days
    start = time.perf_counter()
    main_runs = _run([(s, base_days, study.BACKUPS, True) for s in seeds], args.jobs)
    arms = {b: [r[b] for r in main_runs] for b in study.BACKUPS}
    print(f"backups done ({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    params = {k: v for k, v in dataclasses.asdict(RLBPConfig()).items() if k != "seed"}
    provenance = {"source_sha256": study.source_hashes(), "parameters": params}
    results = arms["max_min"]
    # 1. the seed's backup: policy comparison and lambda frontier (written only if every max_min seed passed)
    try:
        study.verify(results, "backup max_min")
        comparison = {"n_seeds": len(seeds), "seeds": seeds, "backup": "max_min",
                      "comparisons": study.comparisons(results), "check_pass_rates": study.check_pass_rates(results),
                      "per_seed": study.per_seed_figures(results), "reference_points": study.reference_points(results),
                      "provenance": provenance}
        front = study.frontier(results)
        # every row again, by a plain loop over the per-seed values paired by seed; nothing is written on a mismatch
        study.refuse_mismatches(study.check_comparisons(results, comparison["comparisons"])
                                + study.check_frontier(results, front))
        front = {**front, "per_seed": rlbp_plots.frontier_per_seed(results)}   # for the paired frontier_facts
    except study.StudyRefused as err:
        print(f"litrepro: error: {err}; nothing written", file=sys.stderr)
        return 1
    atomic.write_json(study.COMPARISON, comparison)
    atomic.write_json(study.FRONTIER, front)
    plotting.save_png(study.comparison_plot(comparison["comparisons"]), study.FOLDER / "policy_comparison.png")
    plotting.save_png(rlbp_plots.frontier_figure(front, comparison), study.FOLDER / "lambda_frontier.png")
    print(f"wrote {study.COMPARISON.name}, {study.FRONTIER.name}", file=sys.stderr)
    # 2. the backup study: every backup, the headroom and more logged days (written only if every arm passed)
    try:
        # An arm with a seed whose checks failed gets no interval: it is named, with the failing seeds and
        # checks, under ``refused_arms``.  The seed's own backup (max_min) must pass, or nothing is written.
        refused = {b: study.refused_seeds(r) for b, r in arms.items() if study.refused_seeds(r)}
        if "max_min" in refused:
            raise study.StudyRefused(f"backup max_min: seeds with failed checks {refused['max_min']}")
        for backup_name, arm_results in arms.items():
            if backup_name not in refused:
                study.verify(arm_results, f"backup {backup_name}")      # also refuses shared evaluation days
        arms_all, arms = arms, {b: r for b, r in arms.items() if b not in refused}
        rows = study.backup_rows(arms)
        other = study.best_other(rows)
        more = {d: _run([(s, d, ("max_min", other), False) for s in seeds], args.jobs)
                for d in study.SCALING_DAYS if d != base_days}
        by_days = {base_days: {b: arms[b] for b in ("max_min", other)}}
        for d, runs in more.items():
            by_days[d] = {b: [r[b] for r in runs] for b in ("max_min", other)}
            for b, day_results in by_days[d].items():
                study.verify(day_results, f"backup {b}, {d} logged days")
        backup = {"n_seeds": len(seeds), "seeds": seeds, "backups": rows, "best_other_backup": other,
                  "policy_rounds": RLBPConfig().policy_rounds, "headroom": study.headroom_summary(results),
                  "scaling": study.scaling_rows(by_days),
                  "check_pass_rates": {b: study.check_pass_rates(r) for b, r in arms_all.items()},
                  "refused_arms": refused,
                  "per_seed": {b: {str(r["seed"]): {"learned_true_value": r["beyond_seed_metrics"]["learned_true_value"],
                                                    "control_ratio": r["beyond_seed_metrics"]["control_ratio"],
                                                    "headroom": r["headroom"]} for r in arms[b]} for b in arms},
                  "provenance": provenance}
        study.refuse_mismatches(study.check_backups(arms, rows, backup["headroom"], backup["scaling"], by_days))
    except study.StudyRefused as err:
        print(f"litrepro: error: {err}; {study.BACKUP_STUDY.name} not written", file=sys.stderr)
        return 1
    print(f"scaling done ({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    atomic.write_json(study.BACKUP_STUDY, backup)
    plotting.save_png(study.backup_plot(backup), study.FOLDER / "backup_study.png")
    for r in rows:
        print(f"{r['backup']:13s} learned-fixed {r['learned_minus_fixed']['mean_difference']:+.4f} "
              f"[{r['learned_minus_fixed']['ci95_low']:+.4f}, {r['learned_minus_fixed']['ci95_high']:+.4f}]  "
              f"share of per-kind headroom {r['share_of_best_per_kind_headroom']['share']:+.2f}")
    for r in backup["scaling"]:
        x = r["learned_minus_fixed"]
        print(f"{r['backup']:13s} days {r['logged_days']:2d} learned-fixed {x['mean_difference']:+.4f} "
              f"[{x['ci95_low']:+.4f}, {x['ci95_high']:+.4f}]")
    print(f"wrote {study.BACKUP_STUDY.name} ({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
