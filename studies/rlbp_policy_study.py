"""``make rlbp-study``: pinterest_rlbp over 20 seeds, through the runner, then paired statistics.

    python studies/rlbp_policy_study.py [--seeds 42-61] [--jobs 2] [--out build/rlbp-study]

Step 1 runs ``python -m litrepro run --methods pinterest_rlbp`` for the seeds into
``--out/main``, and again with ``--set gamma=0.0`` into ``--out/gamma0`` (the runner
skips seeds whose outputs are current).  The gamma = 0 arm is the ablation that tests
why the learned policy trails the fixed gain: with gamma = 0 the max/min backups vanish.  Step 2 writes
``rendered/pinterest_rlbp/policy_comparison.json``, ``lambda_frontier.json`` and
their PNGs (``litrepro.rlbp.study``).  ``make test`` checks that they are current
with the sources; it does not re-run them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from litrepro import atomic, plotting
from litrepro.paths import ROOT
from litrepro.provenance import source_hashes
from litrepro.rlbp import plots as rlbp_plots
from litrepro import rlbp_study as study


def run_seeds(seeds: str, jobs: str, out: Path, settings: list[str]) -> bool:
    """``python -m litrepro run`` for pinterest_rlbp; True when every seed succeeded."""
    cmd = [sys.executable, "-m", "litrepro", "run", "--methods", "pinterest_rlbp", "--seeds", seeds, "--jobs", jobs,
           "--out", str(out), "--no-summary-notebook", "--no-progress"]
    for setting in settings:
        cmd += ["--set", setting]
    return subprocess.run(cmd, cwd=ROOT).returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="42-61", help="seeds or a range (at least 20 for the study)")
    parser.add_argument("--jobs", default="2")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "rlbp-study")
    args = parser.parse_args(argv)
    if not (run_seeds(args.seeds, args.jobs, args.out / "main", [])
            and run_seeds(args.seeds, args.jobs, args.out / "gamma0", ["gamma=0.0"])):
        print("litrepro: error: the study's runs did not all succeed; nothing written", file=sys.stderr)
        return 1
    results = study.load(args.out / "main" / "pinterest_rlbp")
    ablation = study.load(args.out / "gamma0" / "pinterest_rlbp")
    rows = study.comparisons(results)
    front = study.frontier(results)
    reference = study.reference_points(results)
    payload = {"n_seeds": len(results), "seeds": [r["seed"] for r in results], "comparisons": rows,
               "check_pass_rates": study.check_pass_rates(results),
               "per_seed": study.per_seed_figures(results),
               "reference_points": reference,
               "ablation_gamma_0": {"comparisons": study.comparisons(ablation),
                                    "across_gamma": study.across_gamma(results, ablation),
                                    "per_seed": study.per_seed_figures(ablation)},
               "provenance": {"source_sha256": source_hashes("pinterest_rlbp"),
                              "parameters": {k: v for k, v in results[0]["provenance"]["parameters"].items()
                                             if k != "seed"}}}
    atomic.write_json(study.COMPARISON, payload)
    atomic.write_json(study.FRONTIER, front)
    plotting.save_png(study.comparison_plot(rows), study.FOLDER / "policy_comparison.png")
    plotting.save_png(rlbp_plots.lambda_frontier(front, reference,
                                                 title=f"value vs CPC overshoot by lambda, {len(results)} seeds (bars: s.e.)"),
                      study.FOLDER / "lambda_frontier.png")
    for label, table in (("gamma as configured", rows), ("ablation: gamma = 0", payload["ablation_gamma_0"]["comparisons"]),
                         ("across gamma", payload["ablation_gamma_0"]["across_gamma"])):
        print(f"-- {label}")
        for r in table:
            print(f"{r['comparison']:34s} {r['metric']:18s} {r['mean_difference']:+.4f} "
                  f"[{r['ci95_low']:+.4f}, {r['ci95_high']:+.4f}] {r['verdict']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
