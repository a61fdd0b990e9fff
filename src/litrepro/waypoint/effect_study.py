"""The effect study: can the waypoint gate be seen at all?  Paired per-seed differences.

For each seed, both RL noise levels (``teacher_rl_rollouts``) and both student
starts, the five arms of :func:`litrepro.waypoint.experiment.compare_arms` run
from the same student, on the same prompts and random streams.  Each comparison
``A - B`` is a per-seed difference d_s, summarised by its mean and 95% Student-t
interval (:func:`litrepro.stats.paired_ci`).  ``python -m litrepro study effect-study``
runs it (``make effect-study``) and writes ``rendered/waypoint_opd/effect_study.json``
with the sha256 of every source file it ran on, so a test can tell that the
committed file is current without re-running it.

The study inherits the notebook's checks: every row records, for its seed and
condition, the teacher's checks (pretraining replay and every RL update,
:mod:`litrepro.waypoint.audit`) and, per arm, whether it was paired with the others,
used its own gate, made a first update equal to the reference and was evaluated as
the reference evaluates it.  :func:`summarise` refuses (:class:`StudyRefused`) to
compute any interval when a check failed on any seed, and names the seed,
condition and checks; no row whose arms are not paired is summarised.  Every interval
it computes is recomputed by :func:`check_differences` with a plain loop over the
seeds of its condition, and a mismatch is refused too.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

from litrepro.paths import ROOT

PATH = ROOT / "rendered" / "waypoint_opd" / "effect_study.json"
PLOT = PATH.with_suffix(".png")
#: Files whose content determines the study's numbers.  ``config.py`` and ``corpus.py`` are
#: represented by what matters in them (the config's defaults; the Corpus class and ``load``),
#: so that edits of their bounds or of the download code do not mark the study stale.
SOURCES = ("src/litrepro/waypoint/diagnostics.py", "src/litrepro/waypoint/experiment.py",
           "src/litrepro/waypoint/model.py", "src/litrepro/waypoint/opd.py", "src/litrepro/waypoint/teacher.py",
           "src/litrepro/waypoint/effect_study.py", "src/litrepro/waypoint/audit.py", "src/litrepro/stats.py")
#: Teacher pretraining: the calibrated learning rate, and 0.05, whose teacher the RL moves far more.
TEACHERS = {"calibrated": 0.015, "strong": 0.05}
STARTS = ("independent", "waypoint0")
RL_ROLLOUTS = (8, 64)
METRICS = ("validation_nll", "expected_parity_rate")
COMPARISONS = (("waypoint", "final_only"), ("waypoint", "shuffled"), ("shuffled", "final_only"),
               ("waypoint", "matched_compute"), ("waypoint", "none"), ("final_only", "none"), ("matched_compute", "none"))
CONDITION_KEYS = ("teacher", "student_start", "teacher_rl_rollouts")
#: Per-row keys that hold check results, not figures.
CHECK_KEYS = ("checks", "arm_checks")


class StudyRefused(ValueError):
    """A check failed on some seed (or its arms were not paired): no interval is computed."""


def source_hashes(sources: tuple[str, ...] = SOURCES, study: str = "effect-study") -> dict[str, str]:
    """sha256 of each file in ``sources`` (default :data:`SOURCES`), of the config's defaults, of the
    corpus loading code and of study ``study``'s declaration (its jobs and summary,
    :func:`litrepro.studies.declaration_hashes`); the other waypoint studies add their own entries to these."""
    import dataclasses
    import inspect

    from litrepro.studies import declaration_hashes
    from litrepro.waypoint import corpus
    from litrepro.waypoint.config import WaypointConfig

    out = {name: hashlib.sha256((ROOT / name).read_bytes()).hexdigest() for name in sources}
    defaults = json.dumps(dataclasses.asdict(WaypointConfig()), sort_keys=True)
    out["WaypointConfig defaults"] = hashlib.sha256(defaults.encode()).hexdigest()
    code = inspect.getsource(corpus.Corpus) + inspect.getsource(corpus.load)
    out["corpus.Corpus + corpus.load"] = hashlib.sha256(code.encode()).hexdigest()
    out.update(declaration_hashes(study))
    return out


def run_seed(seed: int, *, steps: int, eval_prompts: int, corpus, device) -> list[dict[str, Any]]:
    """One seed: every (teacher, RL rollouts, start) condition, every arm; one row per condition."""
    import torch

    from litrepro.waypoint import audit
    from litrepro.waypoint import experiment as wp
    from litrepro.waypoint.config import WaypointConfig

    data = audit.read_contract(corpus.path)
    rows = []
    for teacher_name, lr in TEACHERS.items():
        for rollouts in RL_ROLLOUTS:
            cfg = WaypointConfig(seed=seed, pretrain_lr=lr, teacher_rl_rollouts=rollouts, comparison_steps=steps,
                                 comparison_eval_prompts=eval_prompts)
            generator = torch.Generator().manual_seed(seed)
            teacher, _ = wp.pretrained_policy(cfg, corpus, generator, device, steps=cfg.teacher_steps,
                                              stage="teacher_pretrain")
            rl = wp.teacher_rl(cfg, teacher, corpus, generator, device)
            teacher_checks = {**audit.check_teacher_pretraining(cfg, rl, data)["checks"],
                              **audit.check_teacher_rl(cfg, rl, data)["checks"]}
            for start in STARTS:
                student = wp.initial_student(cfg, rl, corpus, device, seed, start=start)
                out = wp.compare_arms(cfg, student, rl["waypoints"], corpus, device, seed)
                arm_audit = wp.audit_comparison(cfg, out, student, rl["waypoints"], corpus, seed)
                is_waypoint0 = audit.sha256_state(audit.tensors(student)) == audit.sha256_state(audit.tensors(rl["initial"]))
                gates = out["waypoint"]["mean_gate"]
                rows.append({"seed": seed, "teacher": teacher_name, "teacher_rl_rollouts": rollouts,
                             "student_start": start, "mean_gate": sum(gates) / len(gates),
                             "teacher_final_expected_parity_rate": out["teacher_final"]["expected_parity_rate"],
                             **{f"{arm}.{m}": out[arm][m] for arm in wp.ARMS for m in METRICS},
                             "checks": {**teacher_checks, **arm_audit["checks"],
                                        "student_start_matches_label": is_waypoint0 == (start == "waypoint0")},
                             "arm_checks": arm_audit["arms"]})
    return rows


def failed_checks(row: Mapping[str, Any]) -> list[str]:
    """The checks of one row that did not hold (``arm.check`` for an arm's own); a row without checks fails."""
    if not row.get("checks") or not row.get("arm_checks"):
        return ["checks not recorded"]
    bad = [name for name, ok in row["checks"].items() if ok is not True]
    bad += [f"{arm}.{name}" for arm, checks in row["arm_checks"].items() for name, ok in checks.items() if ok is not True]
    return bad


def refuse_failed(rows: list[Mapping[str, Any]]) -> None:
    """Raise :class:`StudyRefused` naming every (seed, condition) whose checks failed."""
    bad = [f"seed {r['seed']} ({r['teacher']}, {r['student_start']}, {r['teacher_rl_rollouts']} rollouts): "
           f"{', '.join(failed_checks(r))}" for r in rows if failed_checks(r)]
    if bad:
        raise StudyRefused(f"effect study refused, checks failed on {len(bad)} row(s): {'; '.join(bad)}")


def conditions() -> list[tuple[str, str, int]]:
    return [(t, s, k) for t in TEACHERS for k in RL_ROLLOUTS for s in STARTS]


def summarise(rows: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Paired differences ``{comparison, metric, n, mean_difference, ci95_low, ci95_high}`` per condition."""
    from litrepro.stats import paired_ci

    refuse_failed(rows)
    out = []
    for teacher, start, rollouts in conditions():
        cond = sorted((r for r in rows if (r["teacher"], r["student_start"], r["teacher_rl_rollouts"])
                       == (teacher, start, rollouts)), key=lambda r: r["seed"])
        for a, b in COMPARISONS:
            for metric in METRICS:
                ci = paired_ci([r[f"{a}.{metric}"] for r in cond], [r[f"{b}.{metric}"] for r in cond])
                out.append({"comparison": f"{a} - {b}", "metric": metric, "teacher": teacher,
                            "student_start": start, "teacher_rl_rollouts": rollouts, **ci})
    check_differences(rows, out)
    return out


def check_differences(rows: list[Mapping[str, Any]], differences: list[Mapping[str, Any]], *,
                      rel_tol: float = 1e-9) -> None:
    """Recompute every interval with a plain loop over seeds and refuse (:class:`StudyRefused`) a mismatch.

    Per condition, each seed must appear exactly once; d_s = A_s - B_s on the same seed,
    mean = sum d / n, s^2 = sum (d - mean)^2 / (n - 1), interval mean -+ t_{0.975, n-1} s / sqrt(n)
    (the collapsed interval when n < 2 or s = 0, as in ``stats.paired_ci``).
    """
    import math

    from scipy import stats

    bad = []
    for r in differences:
        cond = [x for x in rows if (x["teacher"], x["student_start"], x["teacher_rl_rollouts"])
                == (r["teacher"], r["student_start"], r["teacher_rl_rollouts"])]
        seeds = [x["seed"] for x in cond]
        a, b = r["comparison"].split(" - ")
        d = [x[f"{a}.{r['metric']}"] - x[f"{b}.{r['metric']}"] for x in cond]
        n = len(d)
        mean = sum(d) / n if n else float("nan")
        var = sum((x - mean) ** 2 for x in d) / (n - 1) if n > 1 else 0.0
        half = stats.t.ppf(0.975, n - 1) * math.sqrt(var / n) if var > 0 else 0.0
        expected = (mean, mean - half, mean + half)
        got = (r["mean_difference"], r["ci95_low"], r["ci95_high"])
        scale = max(abs(x) for x in expected) or 1.0
        if len(set(seeds)) != len(seeds) or r["n"] != n or any(
                not abs(g - e) <= rel_tol * scale for g, e in zip(got, expected)):
            bad.append(f"{r['comparison']} {r['metric']} ({r['teacher']}, {r['student_start']}, "
                       f"{r['teacher_rl_rollouts']} rollouts)")
    if bad:
        raise StudyRefused(f"effect study refused, intervals differ from their plain-loop recomputation: "
                           f"{'; '.join(bad[:5])}{' ...' if len(bad) > 5 else ''}")


def condition_means(rows: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per condition: mean gate, the final teacher's and each arm's mean P(even first byte) and NLL."""
    out = []
    for teacher, start, rollouts in conditions():
        cond = [r for r in rows if (r["teacher"], r["student_start"], r["teacher_rl_rollouts"]) == (teacher, start, rollouts)]
        keys = [k for k in cond[0] if k not in ("seed", *CONDITION_KEYS, *CHECK_KEYS)]
        out.append({"teacher": teacher, "student_start": start, "teacher_rl_rollouts": rollouts, "n": len(cond),
                    **{k: sum(r[k] for r in cond) / len(cond) for k in keys}})
    return out


def load(path: Path = PATH) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def table(data: Mapping[str, Any]):
    """The differences as a DataFrame of rounded strings (interval bounds rounded outward), with each verdict."""
    import pandas as pd

    from litrepro.stats import fmt_ci, verdict

    return pd.DataFrame([{"teacher": r["teacher"], "start": r["student_start"], "RL rollouts": r["teacher_rl_rollouts"],
                          "comparison": r["comparison"], "metric": r["metric"], "n": r["n"],
                          "mean difference": f"{r['mean_difference']:+.2e}",
                          "95% CI (rounded outward)": fmt_ci(r["ci95_low"], r["ci95_high"]), "verdict": verdict(r)}
                         for r in data["differences"]]).set_index(["teacher", "start", "RL rollouts", "comparison", "metric"])


def means_table(data: Mapping[str, Any]):
    """Per condition: mean gate, and P(even first byte) of the final teacher and of each arm (4 digits)."""
    import pandas as pd

    from litrepro.waypoint.experiment import ARMS

    return pd.DataFrame([{"teacher": r["teacher"], "start": r["student_start"], "RL rollouts": r["teacher_rl_rollouts"],
                          "mean gate": f"{r['mean_gate']:.3f}",
                          "teacher P(even)": f"{r['teacher_final_expected_parity_rate']:.4f}",
                          **{f"{arm} P(even)": f"{r[f'{arm}.expected_parity_rate']:.4f}" for arm in ARMS}}
                         for r in data["condition_means"]]).set_index(["teacher", "start", "RL rollouts"])


def plot(data: Mapping[str, Any]):
    """The study at a glance (:func:`litrepro.waypoint.plots.effect_study_figure`); the full table is :func:`table`."""
    from litrepro.waypoint.plots import effect_study_figure

    return effect_study_figure(data)
