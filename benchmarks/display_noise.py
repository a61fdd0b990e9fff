"""Cross-run noise of the waypoint_opd figures: how many printed digits are safe on another machine.

    python benchmarks/display_noise.py            # runs itself under each kernel set and thread count

Runs the notebook's sections for one seed (with a short comparison) under
``ATEN_CPU_CAPABILITY`` = default, avx2, avx512 and 1 or 2 intra-op threads,
each in a fresh process, and prints the largest relative difference of any
metric, history or comparison figure from the first setting.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys


def figures(seed: int, threads: int) -> dict[str, float]:
    import torch

    from litrepro.seeding import seed_everything
    from litrepro.waypoint import experiment as wp
    from litrepro.waypoint.config import WaypointConfig
    from litrepro.waypoint.model import flat_parameters, nats_per_byte

    cfg = WaypointConfig(seed=seed, comparison_steps=10, comparison_eval_prompts=64)
    generator = seed_everything(seed)
    torch.set_num_threads(threads)
    device = torch.device("cpu")
    corpus = wp.load_corpus(cfg)
    teacher, losses = wp.pretrained_policy(cfg, corpus, generator, device, steps=cfg.teacher_steps, stage="teacher_pretrain")
    rl = wp.teacher_rl(cfg, teacher, corpus, generator, device)
    student = wp.initial_student(cfg, rl, corpus, device, seed)
    init = flat_parameters(student).clone()
    start = wp.copy.deepcopy(student)
    d = wp.distil(cfg, student, rl["waypoints"], corpus, generator, device, steps=cfg.student_steps, gate_kind=cfg.gate,
                  stage="opd")
    out = {f"pretrain_loss_{i}": x for i, x in enumerate(losses)}
    out |= {f"rl_{h['step']}_{k}": h[k] for h in rl["audit"]["history"] for k in ("mean_rule_reward", "gradient_norm")}
    out |= {f"opd_{h['step']}_{k}": v for h in d["history"] for k, v in h.items() if k != "step"}
    out["validation_nll"] = nats_per_byte(student, corpus.validation_tokens("final_evaluation"), cfg.eval_window)
    out["parameter_delta_l2"] = float((flat_parameters(student) - init).norm())
    cmp = wp.compare_arms(cfg, start, rl["waypoints"], corpus, device, seed)
    out |= {f"cmp_{arm}_{k}": v for arm in wp.ARMS for k, v in cmp[arm].items() if k != "mean_gate"}
    return out


def main() -> int:
    if len(sys.argv) == 3:
        print(json.dumps(figures(int(sys.argv[1]), int(sys.argv[2]))))
        return 0
    runs = {}
    for cap in ("default", "avx2", "avx512"):
        for threads in (1, 2):
            env = {**os.environ, "ATEN_CPU_CAPABILITY": cap}
            proc = subprocess.run([sys.executable, __file__, "42", str(threads)], env=env, capture_output=True, text=True)
            if proc.returncode == -signal.SIGILL:                      # the CPU lacks this instruction set
                print(f"{cap:8s} threads {threads}: skipped, this CPU does not support {cap}")
                continue
            if proc.returncode:
                raise SystemExit(f"{cap} with {threads} threads failed:\n{proc.stderr[-2000:]}")
            runs[(cap, threads)] = json.loads(proc.stdout)
    ref_key = next(iter(runs))
    ref = runs[ref_key]
    for key, run in runs.items():
        rel = max((abs(run[k] - ref[k]) / abs(ref[k]) if ref[k] else abs(run[k])) for k in ref)
        worst = max(ref, key=lambda k: (abs(run[k] - ref[k]) / abs(ref[k]) if ref[k] else abs(run[k])))
        print(f"{key[0]:8s} threads {key[1]}: max relative difference from {ref_key} = {rel:.2e} ({worst})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
