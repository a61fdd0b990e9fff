"""The ``device: cuda`` path of both methods, beside the CPU path, on one seed.

    python benchmarks/cuda_check.py [--seed 42] [--out cuda_check.json]

Runs ``run(cfg, device)`` of each method (the notebook's stages and checks, without papermill) on
CPU and on CUDA and writes, per method and device: whether every check held, the checks that did
not, the wall time, and the largest relative gaps between the two devices' reported metrics, check
residuals (``*gap*``, ``*_error``) left out (CUDA kernels sum in another order, so the digits
differ; the checks must hold on both).  Needs a GPU;
the corpus comes from ``$LITREPRO_CORPUS`` as for the tests.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch

from litrepro.params import load_file
from litrepro.paths import PARAMETERS


def _checks(result: dict) -> dict[str, bool]:
    out = {}
    for key, value in result.items():
        if key.endswith("checks") and isinstance(value, dict):
            out.update({k: v for k, v in value.items() if isinstance(v, bool)})
    return out


def _metrics(result: dict) -> dict[str, float]:
    return {k: float(v) for part in ("metrics", "beyond_seed_metrics") for k, v in (result.get(part) or {}).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))}


def one(method: str, seed: int, device: str) -> dict:
    if method == "pinterest_rlbp":
        from litrepro.rlbp import experiment as ex
        from litrepro.rlbp.config import RLBPConfig as Config
    else:
        from litrepro.waypoint import experiment as ex
        from litrepro.waypoint.config import WaypointConfig as Config
    cfg = load_file(Config, PARAMETERS / f"{method}.yaml", {"seed": seed})
    start = time.perf_counter()
    result = ex.run(cfg, device)
    seconds = time.perf_counter() - start
    checks = _checks(result)
    return {"seconds": seconds, "checks_true": sum(checks.values()), "checks": len(checks),
            "failed": sorted(k for k, v in checks.items() if not v), "metrics": _metrics(result)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--out", default="cuda_check.json")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("cuda_check: no CUDA device here")
    report = {"seed": args.seed, "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "methods": {}}
    for method in ("pinterest_rlbp", "waypoint_opd"):
        runs = {device: one(method, args.seed, device) for device in ("cpu", "cuda")}
        cpu, gpu = runs["cpu"]["metrics"], runs["cuda"]["metrics"]
        residual = lambda k: "gap" in k or k.endswith("_error")     # noqa: E731  a check's residual, not a result
        gaps = {k: abs(cpu[k] - gpu[k]) / max(abs(cpu[k]), 1e-12) for k in cpu if k in gpu and not residual(k)}
        worst = sorted(gaps.items(), key=lambda kv: -kv[1])[:5]
        report["methods"][method] = {d: {k: v for k, v in r.items() if k != "metrics"} for d, r in runs.items()}
        report["methods"][method]["largest_relative_gaps"] = worst
        print(method, {d: (r["checks_true"], r["checks"], r["failed"], round(r["seconds"], 1)) for d, r in runs.items()},
              "largest gaps:", [(k, f"{v:.1e}") for k, v in worst])
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
