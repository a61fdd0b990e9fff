"""Why our OPD step is weaker than the record: gradient norm and parameter change against the seed file.

Issue 30, item 1.  The seed file records, for the 2-update OPD of seeds 42-44, a per-step
gradient norm of about 0.0052 and a parameter change of about 3e-4; ours are smaller (this study's
JSON gives both, with z-scores).  This module runs the notebook's Sections 2-4 (teacher pretraining, teacher RL, the
2-update OPD; no comparison) under a few *explaining arms* (:data:`ARMS`) and sets each
calibrated figure beside the record at both scales, per step (pooled over steps and seeds,
``z``) and per seed (against the spread of the recorded per-seed means, ``z_per_seed``), with
:func:`litrepro.calibration.row`.

The measured mechanism.  The OPD gradient is  -s * mean(g A grad log pi_student)  with
A = log pi_f - log pi_student, so at a fixed student its size scales with the size of A,
how far the final waypoint is from the student on the student's own tokens.  The ``waypoint0``
student *is* waypoint 0, so A = l_f - l_0 is exactly the RL's movement of each token; per
step we record the mean |A| over valid tokens and the ratio gradient norm / mean |A|.  Two
ways to enlarge A are tried (our reconstructions, not the seed's protocol):

- a larger teacher-RL learning rate (the record's ``teacher_rl_audit.learning_rate`` is 0.2,
  so every other rate contradicts a recorded setting; the RL's own recorded figures are
  scored too);
- an ``independent`` student start (its own initialisation and 4 pretraining steps), which
  changes the student's baseline NLL, a recorded figure.

:func:`summarise` says, per arm, whether the gradient norm and parameter change are within 3
recorded SDs at both scales (the issue asks for the per-seed scale), which other calibrated
figures leave 3 SDs on the project's scale (``litrepro.calibration.DEFINITION``: |z| <= 3 per
step, pooled), and whether a recorded setting is contradicted.  Pure measurement: nothing here changes the notebook's defaults.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from litrepro.paths import ROOT

PATH = ROOT / "rendered" / "waypoint_opd" / "opd_calibration.json"
SOURCES = ("src/litrepro/waypoint/model.py", "src/litrepro/waypoint/opd.py", "src/litrepro/waypoint/teacher.py",
           "src/litrepro/waypoint/experiment.py", "src/litrepro/waypoint/audit.py", "src/litrepro/calibration.py",
           "src/litrepro/waypoint/calibration.py", "src/litrepro/waypoint/opd_calibration.py")
#: Explaining arms: overrides of the notebook's defaults.  ``as_is`` is the notebook.
ARMS: dict[str, dict[str, Any]] = {
    "as_is": {},
    "rl_lr_0.5": {"teacher_rl_lr": 0.5},
    "rl_lr_1": {"teacher_rl_lr": 1.0},
    "rl_lr_1.5": {"teacher_rl_lr": 1.5},
    "rl_lr_2": {"teacher_rl_lr": 2.0},
    "rl_lr_3": {"teacher_rl_lr": 3.0},
    "independent_start": {"student_start": "independent"},
}
#: The two figures issue 30 asks to calibrate, and the other calibrated figures an arm must not break.
TARGETS = ("opd_history.gradient_norm", "metrics.parameter_delta_l2")
OTHERS = ("metrics.baseline_validation_nll", "opd_history.mean_gate", "opd_history.batch_scale",
          "teacher_rl_history.gradient_norm", "teacher_rl_history.mean_rule_reward",
          "teacher_rl_history.mean_rule_reward_at_last_update")
#: Settings the seed file records (``teacher_rl_audit``), compared with each arm's.
RECORDED_SETTINGS = {"teacher_rl_audit.learning_rate": 0.2, "teacher_rl_audit.updates": 8,
                     "teacher_rl_audit.rollouts_per_update": 64}


def source_hashes() -> dict[str, str]:
    from litrepro.waypoint import effect_study

    return effect_study.source_hashes(SOURCES, "waypoint-opd-calibration")


def run_seed(seed: int, arm: str, *, corpus, device) -> dict[str, Any]:
    """Sections 2-4 of the notebook under ``ARMS[arm]``: the seed-file-shaped result, per-step |A| and the ratio."""
    import torch

    from litrepro.waypoint import audit
    from litrepro.waypoint import experiment as wp
    from litrepro.waypoint.config import WaypointConfig
    from litrepro.waypoint.model import flat_parameters, nats_per_byte

    cfg = WaypointConfig(seed=seed, comparison_steps=0, **ARMS[arm])
    generator = torch.Generator().manual_seed(seed)
    teacher, _ = wp.pretrained_policy(cfg, corpus, generator, device, steps=cfg.teacher_steps, stage="teacher_pretrain")
    rl = wp.teacher_rl(cfg, teacher, corpus, generator, device)
    student = wp.initial_student(cfg, rl, corpus, device, seed)
    start = flat_parameters(student).clone()
    base = nats_per_byte(student, corpus.validation_tokens("baseline_evaluation"), cfg.eval_window)
    d = wp.distil(cfg, student, rl["waypoints"], corpus, generator, device, steps=cfg.student_steps, gate_kind=cfg.gate,
                  stage="opd")
    final = {k: t.cpu() for k, t in audit.tensors(rl["waypoints"][-1]).items()}
    history = []
    for h, rec in zip(d["history"], d["records"]):
        r = rec["rollouts"]
        before = {k: t.cpu() for k, t in rec["before"].items()}
        with torch.no_grad():
            adv = (audit._generated_logps(final, r.tokens.cpu(), r.prompt_len)
                   - audit._generated_logps(before, r.tokens.cpu(), r.prompt_len))[r.valid.cpu()]   # (n,) A_t
        mean_abs = float(adv.abs().mean())
        history.append({**{k: h[k] for k in ("gradient_norm", "mean_gate", "batch_scale", "valid_tokens", "loss")},
                        "mean_abs_advantage": mean_abs,
                        "gradient_norm_per_abs_advantage": h["gradient_norm"] / mean_abs if mean_abs > 0 else None})
    metrics = {"baseline_validation_nll": base, "parameter_delta_l2": float((flat_parameters(student) - start).norm())}
    return {"seed": seed, "arm": arm, "metrics": metrics, "history": history,
            "teacher_rl_audit": {k: rl["audit"][k] for k in ("updates", "rollouts_per_update", "learning_rate", "history")}}


def _figure_values(row: Mapping[str, Any], figure: str) -> list[float]:
    """One seed's values of a figure as the seed file logs it (one per step for a history field)."""
    kind, name = figure.split(".", 1)
    if kind == "metrics":
        return [row["metrics"][name]]
    if kind == "opd_history":
        return [h[name] for h in row["history"]]
    if name == "mean_rule_reward_at_last_update":
        return [row["teacher_rl_audit"]["history"][-1]["mean_rule_reward"]]
    return [h[name] for h in row["teacher_rl_audit"]["history"]]


def summarise(rows: Sequence[Mapping[str, Any]], seed_file: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per arm: each target and other figure at both scales (:func:`litrepro.calibration.row`), |A| and the ratio,
    the recorded settings it contradicts, and whether the targets come within 3 SDs without breaking the rest."""
    from litrepro import calibration as shared

    recorded = {f: [_figure_values(r, f) for r in seed_file["per_seed"]] for f in (*TARGETS, *OTHERS)
                if not f.startswith("metrics.")}
    out = []
    for arm in ARMS:
        arm_rows = sorted((r for r in rows if r["arm"] == arm), key=lambda r: r["seed"])
        if not arm_rows:
            continue
        figures = {}
        for f in (*TARGETS, *OTHERS):
            run = [_figure_values(r, f) for r in arm_rows]
            if f.startswith("metrics."):
                figures[f] = shared.row(f, run, recorded_stats=seed_file["metrics"][f.split(".", 1)[1]])
            else:
                figures[f] = shared.row(f, run, recorded[f])
        abs_a = [h["mean_abs_advantage"] for r in arm_rows for h in r["history"]]
        ratio = [h["gradient_norm_per_abs_advantage"] for r in arm_rows for h in r["history"]]
        settings = {k: arm_rows[0]["teacher_rl_audit"][k.split(".", 1)[1]] for k in RECORDED_SETTINGS}
        contradicted = sorted(k for k, v in settings.items() if v != RECORDED_SETTINGS[k])

        def within(f, *, both=True):
            z, zs = figures[f]["z"], figures[f]["z_per_seed"]
            return z is not None and abs(z) <= shared.THRESHOLD and (
                not both or (zs is not None and abs(zs) <= shared.THRESHOLD))
        broken = sorted(f for f in OTHERS if not within(f, both=False))     # the project's definition: |z| <= 3
        out.append({"arm": arm, "overrides": ARMS[arm], "seeds": [r["seed"] for r in arm_rows], "figures": figures,
                    "mean_abs_advantage": sum(abs_a) / len(abs_a),
                    "gradient_norm_per_abs_advantage": sum(ratio) / len(ratio),
                    "targets_within_3sd": all(within(f) for f in TARGETS), "others_off": broken,
                    "recorded_settings_contradicted": contradicted,
                    "calibrated_without_breaking": all(within(f) for f in TARGETS) and not broken and not contradicted})
    return out


def check_summary(rows: Sequence[Mapping[str, Any]], summary: Sequence[Mapping[str, Any]], seed_file) -> None:
    """Recompute every target's z at both scales with a plain loop over the raw values; raise on a mismatch."""
    bad = []
    for s in summary:
        arm_rows = [r for r in rows if r["arm"] == s["arm"]]
        for f in TARGETS:
            values = [v for r in arm_rows for v in _figure_values(r, f)]
            mean = sum(values) / len(values)
            if f.startswith("metrics."):
                agg = seed_file["metrics"][f.split(".", 1)[1]]
                rec_mean, rec_sd, rec_seed_sd = agg["mean"], agg["std"], agg["std"]
            else:
                rec = [_figure_values(r, f) for r in seed_file["per_seed"]]
                pooled = [v for seed in rec for v in seed]
                rec_mean = sum(pooled) / len(pooled)
                rec_sd = math.sqrt(sum((v - rec_mean) ** 2 for v in pooled) / (len(pooled) - 1))
                means = [sum(seed) / len(seed) for seed in rec]
                mm = sum(means) / len(means)
                rec_seed_sd = math.sqrt(sum((v - mm) ** 2 for v in means) / (len(means) - 1))
            got = s["figures"][f]
            for key, expected in (("z", (mean - rec_mean) / rec_sd), ("z_per_seed", (mean - rec_mean) / rec_seed_sd)):
                if not abs(got[key] - expected) <= 1e-9 * max(1.0, abs(expected)):
                    bad.append(f"{s['arm']} {f} {key}")
    if bad:
        raise ValueError(f"OPD calibration refused, z-scores differ from their plain-loop recomputation: {bad}")


def findings(data: Mapping[str, Any]) -> list[str]:
    """Sentences from the committed JSON: each arm's gradient norm and parameter change against the record at both
    scales, what it breaks, and the measured ratio of gradient norm to |A|."""
    out = []
    for s in data["arms"]:
        g, p = s["figures"]["opd_history.gradient_norm"], s["figures"]["metrics.parameter_delta_l2"]
        seed_scale_off = sorted(f for f, v in s["figures"].items() if f not in TARGETS
                                and v.get("z_per_seed") is not None and abs(v["z_per_seed"]) > 3)
        if s["calibrated_without_breaking"]:
            verdict = ("within 3 recorded SDs at both scales, breaking no other calibrated figure or recorded setting "
                       "at the per-step scale")
            if seed_scale_off:
                verdict += (f"; at the scale of per-seed means {', '.join(seed_scale_off)} "
                            f"{'is' if len(seed_scale_off) == 1 else 'are'} beyond 3 recorded SDs")
        elif s["targets_within_3sd"]:
            parts = ([f"it moves {', '.join(s['others_off'])} beyond 3 recorded SDs"] if s["others_off"] else []) + (
                [f"it contradicts the recorded {', '.join(s['recorded_settings_contradicted'])}"]
                if s["recorded_settings_contradicted"] else [])
            verdict = "within 3 recorded SDs at both scales, but " + " and ".join(parts)
        else:
            verdict = "not within 3 recorded SDs at both scales"
        welch = f", Welch p {g['welch_p']:.2g}" if g.get("welch_p") is not None else ""
        out.append(f"`{s['arm']}` ({len(s['seeds'])} seeds): OPD gradient norm {g['run_mean']:.2g} (recorded "
                   f"{g['recorded_mean']:.2g}; z per step {g['z']:+.1f}, per seed {g['z_per_seed']:+.1f}{welch}), parameter change {p['run_mean']:.2g} (recorded "
                   f"{p['recorded_mean']:.2g}; z {p['z']:+.1f}); mean |A| per token {s['mean_abs_advantage']:.2g}, "
                   f"gradient norm / mean |A| {s['gradient_norm_per_abs_advantage']:.3g}: {verdict}.")
    same_student = [s for s in data["arms"] if s["arm"].startswith(("as_is", "rl_lr"))]
    ratios = [s["gradient_norm_per_abs_advantage"] for s in same_student]
    sizes = [s["mean_abs_advantage"] for s in same_student]
    out.append(f"Across the notebook and the RL-rate arms (the same waypoint0 student) the gradient norm per unit of "
               f"mean |A| stays between {min(ratios):.3g} and {max(ratios):.3g} while mean |A| changes "
               f"{max(sizes) / min(sizes):.1f}-fold: at a fixed student the step's size scales with mean |A|, how far "
               "the final waypoint is from it in log-probability, as the surrogate's gradient (A times the score) "
               "makes it by construction; these arms vary only the teacher's RL learning rate.")
    return out


def load(path: Path = PATH) -> dict[str, Any]:
    import json

    return json.loads(Path(path).read_text())
