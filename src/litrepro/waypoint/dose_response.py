"""The gate's dose-response: does the waypoint gate's effect grow with how far the teacher's RL moves?

A reconstruction beyond the seed (the seed fixes one teacher RL: 8 updates x 64
rollouts at learning rate 0.2).  The effect study (:mod:`litrepro.waypoint.effect_study`)
has two teachers, whose RL moves P(even first byte) by different amounts (its condition means give
how much); this study asks the question along a range of such movements.
Here the *dose* is the teacher RL's learning rate (``LEVELS``): the calibrated
teacher's pretraining (``effect_study.TEACHERS["calibrated"]``), the seed's 8 x 64
updates, and RL learning rates from the seed's 0.2 up to 30, which moves P(even)
from as little as the calibrated teacher's to beyond the strong teacher's (``level_means`` gives each).  The response, at each
level and seed, is the effect study's five arms (:func:`litrepro.waypoint.experiment.compare_arms`)
from the ``waypoint0`` student (the notebook's default), paired by seed:

    d_s = A_s - B_s,  A = gate (``waypoint``),  B in {final_only, shuffled, matched_compute}
    mean d +- t_{0.975, n-1} sd(d) / sqrt(n)                       (paired 95% t interval)

for the exact P(even first byte) (``expected_parity_rate``) and the validation NLL.
The teacher's movement at a level is

    dP_s = P_{w_f}(even | x) - P_{w_0}(even | x)   averaged over the comparison's validation prompts x

(the final waypoint minus the pre-RL one, on the same prompts the arms are scored on).

*The seed spread.*  Beside each interval we keep ``seed_sd``, the between-seed standard
deviation of the comparator arm B's metric at that level (what one seed's figure varies
by), and the interval in units of it.  The gate's effect "exceeds the seed spread" where
the whole interval lies beyond +-seed_sd, and is "detectable" where it excludes 0.

Every row carries its seed's checks, as the effect study's do (teacher pretraining and
every RL update replayed, the arms paired, each arm's first update and evaluation against
the reference); :func:`summarise` refuses (:class:`StudyRefused`) when one failed, and
:func:`check_differences` recomputes every interval and spread with a plain loop over
seeds and refuses a mismatch.  ``python -m litrepro study dose-response`` (``make dose-response``)
writes ``rendered/waypoint_opd/dose_response.json`` with the sha256 of every source it ran
on (:func:`source_hashes`), and ``dose_response.png``.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from litrepro.paths import ROOT
from litrepro.waypoint.effect_study import StudyRefused, failed_checks

__all__ = ["PATH", "PLOT", "LEVELS", "COMPARISONS", "METRICS", "StudyRefused", "run_seed", "summarise",
           "check_differences", "level_means", "findings", "table", "plot", "source_hashes", "load"]

PATH = ROOT / "rendered" / "waypoint_opd" / "dose_response.json"
PLOT = PATH.with_suffix(".png")
#: Files whose content determines the numbers (the effect study's, with the study script).  This module is
#: represented by its computing functions and constants (:data:`COMPUTING`), so that editing the findings'
#: wording, the table or the figure does not mark the study stale.
SOURCES = ("src/litrepro/waypoint/diagnostics.py", "src/litrepro/waypoint/experiment.py",
           "src/litrepro/waypoint/model.py", "src/litrepro/waypoint/opd.py", "src/litrepro/waypoint/teacher.py",
           "src/litrepro/waypoint/effect_study.py", "src/litrepro/waypoint/audit.py", "src/litrepro/stats.py")
COMPUTING = ("run_seed", "refuse_failed", "_levels_in", "summarise", "check_differences", "level_means")
#: The dose: the teacher RL's SGD learning rate (level name -> rate).  0.2 is the seed's (the calibrated teacher).
LEVELS = {"rl_lr_0.2": 0.2, "rl_lr_1": 1.0, "rl_lr_3": 3.0, "rl_lr_10": 10.0, "rl_lr_30": 30.0}
#: The teacher's pretraining learning rate (the effect study's calibrated teacher) and the student's start.
PRETRAIN_LR = 0.015
START = "waypoint0"
METRICS = ("expected_parity_rate", "validation_nll")
#: gate - each control, and final-only - none (what final-only OPD gains at all, for scale).
COMPARISONS = (("waypoint", "final_only"), ("waypoint", "shuffled"), ("waypoint", "matched_compute"),
               ("final_only", "none"))
GATE_COMPARISONS = COMPARISONS[:3]


def source_hashes() -> dict[str, str]:
    """The effect study's hashes over :data:`SOURCES` (files, config defaults, corpus loading), and one of
    this module's computing functions and constants."""
    import inspect
    import json

    from litrepro.waypoint import effect_study

    out = effect_study.source_hashes(SOURCES, "dose-response")
    this = globals()
    code = "".join(inspect.getsource(this[name]) for name in COMPUTING) + json.dumps(
        [LEVELS, PRETRAIN_LR, START, METRICS, COMPARISONS], sort_keys=True)
    out["dose_response computing functions and constants"] = hashlib.sha256(code.encode()).hexdigest()
    return out


def run_seed(seed: int, *, steps: int, eval_prompts: int, corpus, device,
             levels: Mapping[str, float] | None = None) -> list[dict[str, Any]]:
    """One seed: at every RL learning rate, the teacher, its RL, the five arms and their checks; one row per level.

    Each level redoes the teacher's pretraining from the seed (identical at every level:
    same generator, same learning rate), so the levels differ only in the RL's step size.
    """
    import torch

    from litrepro.waypoint import audit
    from litrepro.waypoint import experiment as wp
    from litrepro.waypoint.config import WaypointConfig

    data = audit.read_contract(corpus.path)
    rows = []
    for level, rl_lr in (levels or LEVELS).items():
        cfg = WaypointConfig(seed=seed, pretrain_lr=PRETRAIN_LR, teacher_rl_lr=rl_lr, comparison_steps=steps,
                             comparison_eval_prompts=eval_prompts)
        generator = torch.Generator().manual_seed(seed)
        teacher, _ = wp.pretrained_policy(cfg, corpus, generator, device, steps=cfg.teacher_steps,
                                          stage="teacher_pretrain")
        rl = wp.teacher_rl(cfg, teacher, corpus, generator, device)
        pre = audit.check_teacher_pretraining(cfg, rl, data)
        post = audit.check_teacher_rl(cfg, rl, data)
        student = wp.initial_student(cfg, rl, corpus, device, seed, start=START)
        out = wp.compare_arms(cfg, student, rl["waypoints"], corpus, device, seed)
        arm_audit = wp.audit_comparison(cfg, out, student, rl["waypoints"], corpus, seed)
        prompts = out["records"]["eval_prompts"]
        p0 = wp.parity_rate(rl["waypoints"][0], prompts, torch.Generator().manual_seed(seed + 11))
        is_waypoint0 = audit.sha256_state(audit.tensors(student)) == audit.sha256_state(audit.tensors(rl["initial"]))
        gates = out["waypoint"]["mean_gate"]
        rows.append({"seed": seed, "level": level, "teacher_rl_lr": rl_lr, "mean_gate": sum(gates) / len(gates),
                     "teacher_initial_expected_parity_rate": p0["expected_parity_rate"],
                     "teacher_final_expected_parity_rate": out["teacher_final"]["expected_parity_rate"],
                     "delta_p_even": out["teacher_final"]["expected_parity_rate"] - p0["expected_parity_rate"],
                     "train_prompt_delta_p_even": post["gaps"]["final_waypoint_even_mass_gain"],
                     **{f"{arm}.{m}": out[arm][m] for arm in wp.ARMS for m in METRICS},
                     "checks": {**pre["checks"], **post["checks"], **arm_audit["checks"],
                                "student_start_matches_label": is_waypoint0},
                     "arm_checks": arm_audit["arms"]})
    return rows


def refuse_failed(rows: Sequence[Mapping[str, Any]]) -> None:
    """Raise :class:`StudyRefused` naming every (seed, level) whose checks failed."""
    bad = [f"seed {r['seed']} ({r['level']}): {', '.join(failed_checks(r))}" for r in rows if failed_checks(r)]
    if bad:
        raise StudyRefused(f"dose-response refused, checks failed on {len(bad)} row(s): {'; '.join(bad)}")


def _levels_in(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The levels present, in :data:`LEVELS` order (unknown ones last, by name)."""
    order = list(LEVELS)
    return sorted({r["level"] for r in rows}, key=lambda x: (order.index(x) if x in order else len(order), x))


def summarise(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per level, comparison and metric: ``{n, mean_difference, ci95_low, ci95_high, seed_sd}``.

    Refuses when a row's checks failed, when a level's seeds differ from another's (the
    levels must be paired by the same seeds), and when the plain-loop recomputation disagrees.
    """
    import numpy as np

    from litrepro.stats import paired_ci

    refuse_failed(rows)
    levels = _levels_in(rows)
    seeds = {lv: sorted(r["seed"] for r in rows if r["level"] == lv) for lv in levels}
    if len({tuple(s) for s in seeds.values()}) > 1:
        raise StudyRefused(f"dose-response refused, the levels do not share their seeds: {seeds}")
    out = []
    for level in levels:
        cond = sorted((r for r in rows if r["level"] == level), key=lambda r: r["seed"])
        for a, b in COMPARISONS:
            for metric in METRICS:
                ref = np.array([r[f"{b}.{metric}"] for r in cond], dtype=float)
                ci = paired_ci([r[f"{a}.{metric}"] for r in cond], ref)
                sd = float(ref.std(ddof=1)) if ref.size > 1 else 0.0
                out.append({"level": level, "teacher_rl_lr": cond[0]["teacher_rl_lr"], "comparison": f"{a} - {b}",
                            "metric": metric, **ci, "seed_sd": sd})
    check_differences(rows, out)
    return out


def check_differences(rows: Sequence[Mapping[str, Any]], differences: Sequence[Mapping[str, Any]], *,
                      rel_tol: float = 1e-9) -> None:
    """Recompute every interval and seed spread with a plain loop over seeds; refuse (:class:`StudyRefused`) a mismatch.

    Per level each seed must appear exactly once; d_s = A_s - B_s, mean = sum d / n,
    s^2 = sum (d - mean)^2 / (n - 1), interval mean -+ t_{0.975, n-1} s / sqrt(n) (collapsed
    when n < 2 or s = 0); seed_sd^2 = sum (B_s - mean B)^2 / (n - 1).
    """
    from scipy import stats

    bad = []
    for r in differences:
        cond = [x for x in rows if x["level"] == r["level"]]
        seeds = [x["seed"] for x in cond]
        a, b = r["comparison"].split(" - ")
        d, ref = [], []
        for x in cond:
            d.append(x[f"{a}.{r['metric']}"] - x[f"{b}.{r['metric']}"])
            ref.append(x[f"{b}.{r['metric']}"])
        n = len(d)
        mean = sum(d) / n if n else float("nan")
        var = sum((x - mean) ** 2 for x in d) / (n - 1) if n > 1 else 0.0
        half = stats.t.ppf(0.975, n - 1) * math.sqrt(var / n) if var > 0 else 0.0
        ref_mean = sum(ref) / n if n else float("nan")
        sd = math.sqrt(sum((x - ref_mean) ** 2 for x in ref) / (n - 1)) if n > 1 else 0.0
        expected = (mean, mean - half, mean + half)
        got = (r["mean_difference"], r["ci95_low"], r["ci95_high"])
        scale = max(abs(x) for x in expected) or 1.0
        if (len(set(seeds)) != len(seeds) or r["n"] != n
                or any(not abs(g - e) <= rel_tol * scale for g, e in zip(got, expected))
                or not abs(r["seed_sd"] - sd) <= rel_tol * max(sd, 1e-300)):
            bad.append(f"{r['comparison']} {r['metric']} ({r['level']})")
    if bad:
        raise StudyRefused(f"dose-response refused, intervals differ from their plain-loop recomputation: "
                           f"{'; '.join(bad[:5])}{' ...' if len(bad) > 5 else ''}")


def level_means(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per level: the teacher's mean movement dP(even) (and its range over seeds), the mean gate, each arm's means."""
    out = []
    for level in _levels_in(rows):
        cond = [r for r in rows if r["level"] == level]
        keys = [k for k in cond[0] if k not in ("seed", "level", "teacher_rl_lr", "checks", "arm_checks")]
        moves = [r["delta_p_even"] for r in cond]
        out.append({"level": level, "teacher_rl_lr": cond[0]["teacher_rl_lr"], "n": len(cond),
                    "delta_p_even_min": min(moves), "delta_p_even_max": max(moves),
                    **{k: sum(r[k] for r in cond) / len(cond) for k in keys}})
    return out


def load(path: Path = PATH) -> dict[str, Any]:
    import json

    return json.loads(Path(path).read_text())


# --- What the intervals say ---------------------------------------------------------------------

METRIC_WORDS = {"expected_parity_rate": ("P(even first byte)", "higher", "lower"),
                "validation_nll": ("validation NLL", "higher (worse)", "lower (better)")}
ARM_WORDS = {"final_only": "final-only OPD", "shuffled": "shuffled gates", "matched_compute": "the no-teacher "
             "matched-compute control", "none": "no update", "waypoint": "the gate"}


def standing(row: Mapping[str, float]) -> str:
    """Where the interval lies against 0 and the comparator arm's between-seed SD (``seed_sd``):
    ``beyond_spread`` (the whole interval beyond +-SD), ``within_spread`` (it excludes 0 and lies wholly inside
    +-SD), ``straddles_spread`` (it excludes 0 and crosses +-SD), or ``none`` (it spans 0)."""
    sd, lo, hi = row["seed_sd"], row["ci95_low"], row["ci95_high"]
    if lo > sd or hi < -sd:
        return "beyond_spread"
    if lo > 0 or hi < 0:
        return "within_spread" if -sd < lo and hi < sd else "straddles_spread"
    return "none"


def findings(data: Mapping[str, Any]) -> list[str]:
    """Sentences, from the intervals only: per gate comparison and metric, at which teacher movements the
    gate's effect is detectable (its paired interval excludes 0) and where it exceeds the seed spread
    (the whole interval beyond +-seed_sd), with the bounds rounded outward."""
    from litrepro.stats import fmt_ci

    moves = {m["level"]: m["delta_p_even"] for m in data["level_means"]}
    n = data["n_seeds"]
    out = [f"The teacher's RL learning rate was varied over {len(moves)} levels, which moved P(even first byte) by "
           f"{_range_words(moves.values())} on average; at each level the arms ran on {n} seeds from the waypoint0 "
           "student (a reconstruction beyond the seed)."]
    out.append(f"The study holds {len(data['differences'])} intervals, and the sentences below quote or count the "
               "detectable ones; each is a paired 95% t interval on its own, not adjusted for the number of intervals (so 'detectable at k of n levels' counts unadjusted intervals): at "
               "95% each, about one in twenty would exclude 0 by chance alone when there is no difference.")
    for a, b in GATE_COMPARISONS:
        for metric in METRICS:
            label, up, down = METRIC_WORDS[metric]
            rows = [r for r in data["differences"] if r["comparison"] == f"{a} - {b}" and r["metric"] == metric]
            rows.sort(key=lambda r: moves[r["level"]])
            beyond = [r for r in rows if standing(r) == "beyond_spread"]
            seen = [r for r in rows if standing(r) != "none"]

            def at(r):
                word = up if r["ci95_low"] > 0 else down
                return (f"{word} by {fmt_ci(r['ci95_low'], r['ci95_high'])} at dP(even) {moves[r['level']]:.3g} "
                        f"(seed SD {r['seed_sd']:.2g})")
            head = f"Gate vs {ARM_WORDS[b]}, {label}: "
            if not seen:
                out.append(head + f"no detectable difference at any of the {len(rows)} levels.")
            elif not beyond and all(standing(r) == "within_spread" for r in seen):
                out.append(head + f"detectable at {len(seen)} of {len(rows)} levels, and at each of them the whole "
                           "interval lies within one between-seed SD of the comparator arm: " + "; ".join(map(at, seen)) + ".")
            elif not beyond:
                out.append(head + f"detectable at {len(seen)} of {len(rows)} levels, not shown beyond one between-seed "
                           "SD of the comparator arm at any: " + "; ".join(map(at, seen)) + ".")
            else:
                rest = len(seen) - len(beyond)
                out.append(head + f"beyond the seed spread at {len(beyond)} of {len(rows)} levels: "
                           + "; ".join(map(at, beyond))
                           + (f"; detectable but not shown beyond the spread at {rest} more." if rest else "."))
    scale = sorted((r for r in data["differences"] if r["comparison"] == "final_only - none"
                    and r["metric"] == "expected_parity_rate"), key=lambda r: moves[r["level"]])
    if scale:
        lo, hi = scale[0], scale[-1]
        out.append("For scale, final-only OPD itself moves the student's P(even first byte) against no update by "
                   f"{fmt_ci(lo['ci95_low'], lo['ci95_high'])} at dP(even) {moves[lo['level']]:.3g} and by "
                   f"{fmt_ci(hi['ci95_low'], hi['ci95_high'])} at dP(even) {moves[hi['level']]:.3g}.")
    return out


def _range_words(values) -> str:
    v = sorted(values)
    return f"{v[0]:.2g} to {v[-1]:.2g}"


def table(data: Mapping[str, Any]):
    """The differences as a DataFrame of rounded strings (bounds rounded outward), with the verdict and standing."""
    import pandas as pd

    from litrepro.stats import fmt_ci, verdict

    moves = {m["level"]: m["delta_p_even"] for m in data["level_means"]}
    return pd.DataFrame([{"RL lr": r["teacher_rl_lr"], "dP(even)": f"{moves[r['level']]:.3g}",
                          "comparison": r["comparison"], "metric": r["metric"], "n": r["n"],
                          "mean difference": f"{r['mean_difference']:+.2e}",
                          "95% CI (rounded outward)": fmt_ci(r["ci95_low"], r["ci95_high"]),
                          "seed SD": f"{r['seed_sd']:.2e}", "verdict": verdict(r), "vs seed spread": standing(r)}
                         for r in data["differences"]]).set_index(["RL lr", "dP(even)", "comparison", "metric"])


def plot(data: Mapping[str, Any]):
    """Effect size in seed SDs against the teacher's movement dP(even) (log axis), one panel per metric.

    Each gate comparison's mean paired difference and 95% interval are divided by that
    level's between-seed SD of the comparator arm, so the band between -1 and +1 is the
    seed spread; filled markers: the interval excludes 0.
    """
    import numpy as np
    from matplotlib.figure import Figure

    moves = {m["level"]: m["delta_p_even"] for m in data["level_means"]}
    fig = Figure(figsize=(10, 4.2), layout="constrained")
    axes = fig.subplots(1, len(METRICS), squeeze=False)[0]
    offsets = {c: f for c, f in zip(GATE_COMPARISONS, (0.94, 1.0, 1.06))}
    for ax, metric in zip(axes, METRICS):
        ax.axhspan(-1, 1, color="0.85", alpha=0.6, lw=0, label="within one seed SD")
        ax.axhline(0, color="k", lw=0.8)
        for i, (a, b) in enumerate(GATE_COMPARISONS):
            rows = sorted((r for r in data["differences"] if r["comparison"] == f"{a} - {b}" and r["metric"] == metric),
                          key=lambda r: moves[r["level"]])
            x = np.array([moves[r["level"]] * offsets[(a, b)] for r in rows])
            sd = np.array([r["seed_sd"] if r["seed_sd"] > 0 else 1.0 for r in rows])
            m = np.array([r["mean_difference"] for r in rows]) / sd
            lo = np.array([r["ci95_low"] for r in rows]) / sd
            hi = np.array([r["ci95_high"] for r in rows]) / sd
            colour = f"C{i}"
            ax.plot(x, m, color=colour, lw=0.8, alpha=0.6)
            for xi, mi, li, hi_, r in zip(x, m, lo, hi, rows):
                filled = r["ci95_low"] > 0 or r["ci95_high"] < 0
                ax.errorbar([xi], [mi], yerr=[[mi - li], [hi_ - mi]], fmt="o", ms=5, capsize=3, color=colour,
                            mfc=colour if filled else "white", mew=1.3,
                            label=f"gate − {ARM_WORDS[b]}" if r is rows[0] else None)
        ax.set_xscale("log")
        ax.set_xlabel("teacher's movement dP(even first byte), final − initial waypoint", fontsize=9)
        ax.set_ylabel(f"{METRIC_WORDS[metric][0]}: difference / seed SD", fontsize=9)
        ax.set_title(METRIC_WORDS[metric][0], fontsize=10)
        ax.grid(lw=0.4, alpha=0.5)
        ax.margins(x=0.08, y=0.1)
        ax.tick_params(labelsize=8)
    axes[0].legend(fontsize=7, loc="best")
    fig.suptitle(f"waypoint_opd dose-response: gate effect vs teacher movement, 95% CI, n = {data['n_seeds']} seeds "
                 "per level (filled: excludes 0)", fontsize=10)
    return fig
