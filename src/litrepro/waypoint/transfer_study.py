"""The transfer study: does on-policy distillation transfer the teacher's behaviour, and is the gate more than a step?

A reconstruction beyond the seed (issue 30); the regime and the arms are in
:mod:`litrepro.waypoint.transfer`.  Per seed, the strongest dose-response teacher is
pretrained and its RL run (8 x 64 updates at learning rate 30, checks replayed as in the
other studies), the ``waypoint0`` student is copied, and every arm of
:data:`~litrepro.waypoint.transfer.ARMS` distils it for the same number of updates from the
same start and streams.  The learning curve of each arm is read as

    TF_s(k) = (P_s(k) - P_w0,s) / (P_wf,s - P_w0,s)      the share of the teacher's RL parity gain recovered

where P is the exact P(even first byte) on the validation prompts of the comparison.

*Primary endpoint* (declared before the run): final-only OPD's transfer fraction at the
last update, ``TF(updates)``, with its 95% t interval over seeds; the regime meets the
issue's bar when the interval's lower bound is at least 0.5.  Secondary: the area under
TF(k) over the run (:func:`~litrepro.waypoint.transfer.area_under_curve`), the updates to
reach 25% and 50% (per seed, linear between curve points; an arm that does not reach it on
every seed gets no interval, only the count), and the validation-NLL change.

*Paired differences*  d_s = X_s - Y_s for every arm X against final-only Y, with 95% t intervals
(:func:`litrepro.stats.paired_ci`), Holm-adjusted intervals across that family
(:func:`holm`), the standardised effect d_z = mean d / sd d, and the difference in units of
the comparator's between-seed SD (mean d / sd Y).

*The learning-rate frontier.*  The final-only arms at learning-rate multipliers
:data:`~litrepro.waypoint.transfer.LR_MULTIPLIERS` trace, per seed, a curve of
(TF(updates), NLL change).  For any other arm X, per seed,

    NLL_front,s = the frontier's NLL change at TF = TF_X,s     (linear between the sweep's points)
    e_s = NLL_X,s - NLL_front,s,    m_s = the multiplier whose TF is TF_X,s (linear in log m)

Walking the sweep in increasing multiplier, the frontier is read on the first segment whose transfer
crosses TF_X,s upward: the lowest step size at which final-only reaches the arm's transfer.  A seed's
sweep need not be monotone (a seed's transfer can dip between two neighbouring multipliers); the first crossing
is defined either way.

The arms placed on the frontier are a family of their own: each row carries the raw 95% t interval
of e and its Holm-adjusted interval over that family (:func:`holm`, the same step-down as the
differences').  X is "beyond the best final-only learning rate" when the Holm interval of e lies
below 0 (at the same transfer it keeps a lower NLL than any final-only step size reaches), "within
it (behind the frontier)" when it lies above 0, and not distinguishable otherwise.  A seed on which
TF_X lies outside the sweep's range leaves X without a frontier interval (refused and named).

:func:`summarise` refuses (:class:`StudyRefused`) when a seed's checks failed, when the
arms do not share their seeds, and when :func:`check_summary` does not recompute every
number from the raw per-seed curves with plain loops.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from litrepro.paths import ROOT
from litrepro.waypoint.effect_study import StudyRefused, failed_checks

__all__ = ["PATH", "PLOT", "StudyRefused", "run_seed", "summarise", "resummarise", "check_summary", "findings", "plot",
           "source_hashes", "load", "holm", "PRIMARY"]

PATH = ROOT / "rendered" / "waypoint_opd" / "transfer_study.json"
PLOT = PATH.with_suffix(".png")
SOURCES = ("src/litrepro/waypoint/model.py", "src/litrepro/waypoint/opd.py", "src/litrepro/waypoint/teacher.py",
           "src/litrepro/waypoint/experiment.py", "src/litrepro/waypoint/audit.py", "src/litrepro/waypoint/effect_study.py",
           "src/litrepro/waypoint/transfer.py", "src/litrepro/waypoint/transfer_audit.py", "src/litrepro/stats.py")
#: The per-seed code (what ``per_seed`` depends on) and the summary code (what is derived from ``per_seed``), hashed
#: apart so that a summary-only change can be re-derived from the committed rows (``python -m litrepro study
#: waypoint-transfer --resummarise``), and a per-seed change cannot.
PER_SEED_COMPUTING = ("run_seed", "_arm_metrics")
SUMMARY_COMPUTING = ("refuse_failed", "summarise", "_metric_values", "check_summary", "holm", "_frontier_rows",
                     "_plain_frontier", "_chord_errors", "_interval")
COMPUTING = PER_SEED_COMPUTING + SUMMARY_COMPUTING
SUMMARY_HASH = "transfer_study summary functions and constants"
#: The study declaration's summary (``litrepro.studies.waypoint.transfer_summary``): summary code too.
SUMMARY_DECLARATION = "study waypoint-transfer declaration: summary"
PRIMARY = {"arm": "final_only", "metric": "tf_final", "threshold": 0.5,
           "statement": "final-only OPD's transfer fraction at the last update; met when the 95% interval's "
                        "lower bound is at least 0.5"}
METRICS = ("tf_final", "auc", "nll_change", "u25", "u50")
REFERENCE_ARM = "final_only"
#: Besides every arm against final-only: the gate against the controls that hold its step size, its coupling
#: with |A| or its teacher compute.
GATE_CONTROLS = ("binned_shuffle", "shuffled", "final_only_3x", "abs_advantage")


def source_hashes() -> dict[str, str]:
    """sha256 of :data:`SOURCES`, the config defaults and the corpus code (``effect_study.source_hashes``), and of
    this module's computing functions and constants (so wording, table and figure edits do not stale it)."""
    import inspect
    import json

    from litrepro.waypoint import effect_study

    out = effect_study.source_hashes(SOURCES, "waypoint-transfer")
    this = globals()
    per_seed = "".join(inspect.getsource(this[name]) for name in PER_SEED_COMPUTING)
    summary = "".join(inspect.getsource(this[name]) for name in SUMMARY_COMPUTING) + json.dumps(
        [PRIMARY, METRICS, REFERENCE_ARM, GATE_CONTROLS], sort_keys=True)
    out["transfer_study per-seed functions"] = hashlib.sha256(per_seed.encode()).hexdigest()
    out[SUMMARY_HASH] = hashlib.sha256(summary.encode()).hexdigest()
    return out


def run_seed(seed: int, *, corpus, device, cfg=None, arms: Sequence[str] | None = None) -> dict[str, Any]:
    """One seed: the strongest teacher and its RL, every arm's learning curve, and every check; one row."""
    import copy

    import torch

    from litrepro.waypoint import audit, transfer, transfer_audit
    from litrepro.waypoint import experiment as wp
    from litrepro.waypoint.config import WaypointConfig

    cfg = cfg or transfer.TransferConfig()
    arms = list(arms or transfer.ARMS)
    data = audit.read_contract(corpus.path)
    wcfg = WaypointConfig(seed=seed, pretrain_lr=cfg.teacher_pretrain_lr, teacher_rl_lr=cfg.teacher_rl_lr)
    generator = torch.Generator().manual_seed(seed)
    teacher, _ = wp.pretrained_policy(wcfg, corpus, generator, device, steps=wcfg.teacher_steps, stage="teacher_pretrain")
    rl = wp.teacher_rl(wcfg, teacher, corpus, generator, device)
    checks = {**audit.check_teacher_pretraining(wcfg, rl, data)["checks"], **audit.check_teacher_rl(wcfg, rl, data)["checks"]}
    ledger = wp.frozen_ledger(rl)
    waypoints = rl["waypoints"]
    start = wp.initial_student(wcfg, rl, corpus, device, seed, start="waypoint0")
    eval_prompts = corpus.validation_windows(cfg.eval_prompts, 1, transfer.stream(seed, "comparison_eval"),
                                             "comparison_eval").to(device)                # (n, 1)
    validation = corpus.validation_tokens("transfer_eval")
    p0, pf = transfer.even_mass(waypoints[0], eval_prompts), transfer.even_mass(waypoints[-1], eval_prompts)
    wps = [{k: t.cpu() for k, t in audit.tensors(w).items()} for w in waypoints]
    names = audit.trainable(start)
    out_arms, arm_checks, gaps = {}, {}, {}
    starts, first_prompts, batches, lrs, declared = {}, {}, {}, {}, {}
    for name in arms:
        arm = transfer.ARMS[name]
        student = copy.deepcopy(start)
        starts[name] = audit.tensors(student)
        res = transfer.run_arm(arm, student, waypoints, corpus, device, seed, cfg, eval_prompts=eval_prompts,
                               validation=validation)
        first = res["first"]
        first_prompts[name], batches[name], lrs[name] = first.prompts.cpu(), res["batch"], first.lr
        declared[name] = cfg.lr * arm.lr_multiplier
        a = transfer_audit.check_first_update(first, kind=arm.gate, waypoints=wps, names=names, data=data,
                                              batch=res["batch"], max_new_tokens=cfg.max_new_tokens,
                                              gate_mass=cfg.gate_mass, bins=cfg.bins, resolution=cfg.bin_resolution,
                                              seed=seed)
        f = transfer_audit.check_final_point(audit.tensors(student), eval_prompts, res["curve"][-1]["p_even"])
        arm_checks[name] = {**a["checks"], **f["checks"]}
        gaps[name] = {**a["gaps"], **f["gaps"]}
        curve = res["curve"]
        out_arms[name] = {"lr": res["lr"], "batch": res["batch"], "updates": [c["update"] for c in curve],
                          "p_even": [c["p_even"] for c in curve], "validation_nll": [c["validation_nll"] for c in curve],
                          **{f"mean_{k}": v for k, v in res["means"].items()},
                          **_arm_metrics([c["update"] for c in curve], [c["p_even"] for c in curve],
                                         [c["validation_nll"] for c in curve], p0, pf)}
    pairing = transfer_audit.check_pairing(starts, first_prompts, batches, lrs, declared)
    checks.update(pairing["checks"])
    checks["waypoints_unchanged"] = all(d == 0.0 for d in ledger.deltas().values())
    checks["student_starts_at_waypoint0"] = audit.sha256_state(audit.tensors(start)) == audit.sha256_state(
        audit.tensors(rl["initial"]))
    return {"seed": seed, "p_w0": p0, "p_wf": pf, "teacher_gain": pf - p0, "arms": out_arms, "checks": checks,
            "arm_checks": arm_checks, "gaps": {**pairing["gaps"], "arms": gaps}}


def _arm_metrics(updates: list[int], p_even: list[float], nll: list[float], p0: float, pf: float) -> dict[str, Any]:
    """The curve's transfer fractions and their summaries (:mod:`litrepro.waypoint.transfer`)."""
    from litrepro.waypoint import transfer

    tf = transfer.transfer_fractions(p_even, p0, pf)
    return {"tf": tf, "tf_final": tf[-1], "auc": transfer.area_under_curve(updates, tf),
            "u25": transfer.updates_to_reach(updates, tf, 0.25), "u50": transfer.updates_to_reach(updates, tf, 0.5),
            "nll_change": nll[-1] - nll[0]}


def refuse_failed(rows: Sequence[Mapping[str, Any]]) -> None:
    """Raise :class:`StudyRefused` naming every seed whose checks failed."""
    bad = [f"seed {r['seed']}: {', '.join(failed_checks(r))}" for r in rows if failed_checks(r)]
    if bad:
        raise StudyRefused(f"transfer study refused, checks failed on {len(bad)} seed(s): {'; '.join(bad)}")


def _interval(values: Sequence[float]) -> dict[str, Any]:
    from litrepro.stats import mean_interval

    out = mean_interval(list(values))
    sd = float(math.sqrt(sum((x - out["mean"]) ** 2 for x in values) / (len(values) - 1))) if len(values) > 1 else 0.0
    return {"n": out["n"], "mean": out["mean"], "ci95_low": out["ci95_low"], "ci95_high": out["ci95_high"], "sd": sd}


def holm(differences: Mapping[str, Sequence[float]], alpha: float = 0.05) -> dict[str, dict[str, Any]]:
    """Holm's step-down adjustment of a family of paired differences (two-sided t tests, scipy).

    Sorted by raw p ascending, p~_(i) = max_{j<=i} min(1, (m - j + 1) p_(j)); the row of rank i is
    tested at level 1 - alpha / (m - i + 1), and its Holm interval is the t interval at that level
    (wider than the raw 95% one).  Our copy of the idea in the project's ``litrepro.holm``.
    """
    from scipy import stats

    tested = {}
    for label, d in differences.items():
        n = len(d)
        mean = sum(d) / n
        var = sum((x - mean) ** 2 for x in d) / (n - 1) if n > 1 else 0.0
        se = math.sqrt(var / n)
        p = float(2 * stats.t.sf(abs(mean) / se, n - 1)) if se > 0 else (0.0 if mean != 0 else 1.0)
        tested[label] = (mean, se, p, n)
    order = sorted(tested, key=lambda k: (tested[k][2], k))
    m = len(order)
    out, running = {}, 0.0
    for i, label in enumerate(order):
        mean, se, p, n = tested[label]
        running = max(running, min(1.0, (m - i) * p))
        level = 1 - alpha / (m - i)
        half = float(stats.t.ppf(1 - (1 - level) / 2, n - 1)) * se if se > 0 else 0.0
        out[label] = {"p_raw": p, "p_holm": running, "rank": i + 1, "holm_level": level,
                      "holm_low": mean - half, "holm_high": mean + half,
                      "holm_reads": ("higher" if mean > 0 else "lower") if running < alpha else "no detectable difference"}
    return out


def _frontier_rows(rows: Sequence[Mapping[str, Any]], arms: Sequence[str]) -> tuple[list[dict], dict[str, list]]:
    """Per non-frontier arm: the per-seed NLL gap to the frontier at its transfer and the equivalent multiplier."""
    from litrepro.waypoint import transfer

    import numpy as np

    sweep = sorted((m, a) for m, a in transfer.FRONTIER.items() if a in arms)
    log_m = np.log([m for m, _ in sweep])                                      # (K,) in increasing multiplier
    out, refused = [], {}
    per_seed: dict[str, dict[str, list]] = {}
    for arm in arms:
        if arm in dict(transfer.FRONTIER.items()).values():
            continue
        e, m_eq, outside = [], [], []
        for r in rows:
            tfs = np.array([r["arms"][a]["tf_final"] for _, a in sweep])          # (K,)
            nlls = np.array([r["arms"][a]["nll_change"] for _, a in sweep])       # (K,)
            x = r["arms"][arm]["tf_final"]
            t0, t1 = tfs[:-1], tfs[1:]                                            # (K-1,) segments
            crossing = (t0 <= x) & (x <= t1)                                      # crossed upward on the way
            if not crossing.any():
                outside.append(r["seed"])
                continue
            k = int(np.argmax(crossing))                                          # the first: the lowest step size
            w = (x - t0[k]) / (t1[k] - t0[k]) if t1[k] != t0[k] else 0.0
            e.append(r["arms"][arm]["nll_change"] - float(nlls[k] + w * (nlls[k + 1] - nlls[k])))
            m_eq.append(float(np.exp(log_m[k] + w * (log_m[k + 1] - log_m[k]))))
        if len(e) < 2:                                                            # no interval over one seed
            refused[arm] = outside
            continue
        per_seed[arm] = {"nll_gap": e, "lr_multiplier": m_eq}
        out.append({"arm": arm, "nll_gap_to_frontier": _interval(e), "equivalent_lr_multiplier": _interval(m_eq),
                    "seeds_outside": outside})
    return out, {"refused": refused, "per_seed": per_seed}


def _chord_errors(rows: Sequence[Mapping[str, Any]], arms: Sequence[str]) -> dict[float, list[float]]:
    """Leave-one-out check of the frontier's linear interpolation: at each interior multiplier m_k, per seed,
    NLL_k minus the chord of its neighbours (m_{k-1}, m_{k+1}) at TF_k.  Below 0: the frontier bends below its
    chords there (convex), so an interpolated frontier overstates the NLL between sweep points."""
    from litrepro.waypoint import transfer

    import numpy as np

    sweep = sorted((m, a) for m, a in transfer.FRONTIER.items() if a in arms)
    log_m = np.log([m for m, _ in sweep])                                      # (K,) in increasing multiplier
    out: dict[float, list[float]] = {}
    for (_, a0), (m, a), (_, a1) in zip(sweep, sweep[1:], sweep[2:]):
        errors = []
        for r in rows:
            t0, t, t1 = (r["arms"][x]["tf_final"] for x in (a0, a, a1))
            n0, n, n1 = (r["arms"][x]["nll_change"] for x in (a0, a, a1))
            if t1 != t0:
                errors.append(n - (n0 + (n1 - n0) * (t - t0) / (t1 - t0)))
        if len(errors) == len(rows):
            out[m] = errors
    return out


def summarise(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The study's summary: primary endpoint, per-arm intervals, paired differences with Holm and effect
    sizes, the mean curves and the frontier; refuses (see the module docstring)."""
    from litrepro.stats import paired_ci

    from litrepro.waypoint.transfer import ARMS

    refuse_failed(rows)
    rows = sorted(rows, key=lambda r: r["seed"])
    if any(set(r["arms"]) != set(rows[0]["arms"]) for r in rows) or not set(rows[0]["arms"]) <= set(ARMS):
        raise StudyRefused("transfer study refused, the seeds do not share their arms (or name one not in ARMS)")
    arms = [a for a in ARMS if a in rows[0]["arms"]]           # declaration order, whatever order the rows carry
    per_arm, differences, family = {}, [], {}
    for arm in arms:
        per_arm[arm] = {}
        for metric in METRICS:
            values = [r["arms"][arm][metric] for r in rows]
            reached = [v for v in values if v is not None]
            per_arm[arm][metric] = _interval(reached) if len(reached) == len(values) else {
                "n": len(values), "reached": len(reached), "censored": True}
        updates = rows[0]["arms"][arm]["updates"]
        per_arm[arm]["mean_curve"] = {"updates": updates, "tf": [sum(r["arms"][arm]["tf"][i] for r in rows) / len(rows)
                                                                 for i in range(len(updates))]}
    pairs = [(arm, REFERENCE_ARM) for arm in arms if arm != REFERENCE_ARM]
    pairs += [("waypoint", c) for c in GATE_CONTROLS if "waypoint" in arms and c in arms]
    for arm, ref in pairs:
        for metric in METRICS:
            a = [r["arms"][arm][metric] for r in rows]
            b = [r["arms"][ref][metric] for r in rows]
            if any(v is None for v in a + b):
                differences.append({"comparison": f"{arm} - {ref}", "metric": metric, "n": len(a),
                                    "censored": True, "censored_seeds": [r["seed"] for r, x, y in zip(rows, a, b)
                                                                         if x is None or y is None]})
                continue
            ci = paired_ci(a, b)
            d = [x - y for x, y in zip(a, b)]
            sd_d = math.sqrt(sum((x - ci["mean_difference"]) ** 2 for x in d) / (len(d) - 1))
            mb = sum(b) / len(b)
            sd_b = math.sqrt(sum((x - mb) ** 2 for x in b) / (len(b) - 1))
            label = f"{arm} - {ref} | {metric}"
            family[label] = d
            differences.append({"comparison": f"{arm} - {ref}", "metric": metric, **ci,
                                "effect_size_dz": ci["mean_difference"] / sd_d if sd_d > 0 else None,
                                "in_comparator_sds": ci["mean_difference"] / sd_b if sd_b > 0 else None})
    adjusted = holm(family)
    for row in differences:
        label = f"{row['comparison']} | {row['metric']}"
        if label in adjusted:
            row.update(adjusted[label])
    frontier, frontier_extra = _frontier_rows(rows, arms)
    # The frontier rows are a family of their own (one per arm placed on it): Holm over them, as over the differences.
    frontier_holm = holm({f["arm"]: frontier_extra["per_seed"][f["arm"]]["nll_gap"] for f in frontier})
    for f in frontier:
        f.update(frontier_holm[f["arm"]])
    loo = _chord_errors(rows, arms)
    prim = per_arm[PRIMARY["arm"]][PRIMARY["metric"]]
    summary = {"primary_endpoint": {**PRIMARY, **prim, "met": prim["ci95_low"] >= PRIMARY["threshold"]},
               "per_arm": per_arm, "differences": differences, "frontier": frontier,
               "frontier_refused": frontier_extra["refused"],
               "frontier_chord_errors": {str(m): _interval(v) for m, v in loo.items()},
               "teacher_gain": _interval([r["teacher_gain"] for r in rows])}
    check_summary(rows, summary)
    return summary


def _metric_values(row: Mapping[str, Any], arm: str, metric: str, p0: float, pf: float):
    """A metric recomputed by plain loops from the raw curve (not from the stored derived values)."""
    c = row["arms"][arm]
    tf = []
    for p in c["p_even"]:
        tf.append((p - p0) / (pf - p0))
    if metric == "tf_final":
        return tf[-1]
    if metric == "nll_change":
        return c["validation_nll"][-1] - c["validation_nll"][0]
    u = c["updates"]
    if metric == "auc":
        total = 0.0
        for i in range(1, len(u)):
            total += (u[i] - u[i - 1]) * (tf[i] + tf[i - 1]) / 2
        return total / u[-1]
    level = 0.25 if metric == "u25" else 0.5
    for i in range(len(u)):
        if tf[i] >= level:
            return float(u[i]) if i == 0 else u[i - 1] + (u[i] - u[i - 1]) * (level - tf[i - 1]) / (tf[i] - tf[i - 1])
    return None


def check_summary(rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any], *, rel_tol: float = 1e-9) -> None:
    """Recompute every per-arm interval and paired difference with plain loops over seeds from the raw curves;
    refuse (:class:`StudyRefused`) a mismatch, a repeated seed or a stored derived value that disagrees."""
    from scipy import stats

    def interval(xs):
        n = len(xs)
        mean = sum(xs) / n
        var = sum((x - mean) ** 2 for x in xs) / (n - 1) if n > 1 else 0.0
        half = stats.t.ppf(0.975, n - 1) * math.sqrt(var / n) if var > 0 else 0.0
        return mean, mean - half, mean + half

    def close(got, expected):
        scale = max(abs(x) for x in expected) or 1.0
        return all(abs(g - e) <= rel_tol * scale for g, e in zip(got, expected))

    bad = []
    seeds = [r["seed"] for r in rows]
    if len(set(seeds)) != len(seeds):
        bad.append("repeated seeds")
    values = {}
    for r in rows:
        for arm in r["arms"]:
            for metric in METRICS:
                v = _metric_values(r, arm, metric, r["p_w0"], r["p_wf"])
                stored = r["arms"][arm][metric]
                if (v is None) != (stored is None) or (v is not None and not abs(v - stored) <= rel_tol * max(abs(v), 1e-12)):
                    bad.append(f"seed {r['seed']} {arm} {metric} stored")
                values.setdefault((arm, metric), []).append(v)
    for arm, metrics in summary["per_arm"].items():
        for metric in METRICS:
            got = metrics[metric]
            xs = values[(arm, metric)]
            if any(x is None for x in xs):
                if not got.get("censored"):
                    bad.append(f"{arm} {metric} not censored")
                continue
            if got.get("censored") or got["n"] != len(xs) or not close(
                    (got["mean"], got["ci95_low"], got["ci95_high"]), interval(xs)):
                bad.append(f"{arm} {metric}")
    for d in summary["differences"]:
        arm, ref = d["comparison"].split(" - ")
        xs = [a - b if a is not None and b is not None else None
              for a, b in zip(values[(arm, d["metric"])], values[(ref, d["metric"])])]
        if any(x is None for x in xs):
            if not d.get("censored"):
                bad.append(f"{d['comparison']} {d['metric']} not censored")
            continue
        if d.get("censored") or d["n"] != len(xs) or not close(
                (d["mean_difference"], d["ci95_low"], d["ci95_high"]), interval(xs)):
            bad.append(f"{d['comparison']} {d['metric']}")
        if not d["holm_low"] <= d["ci95_low"] + rel_tol * abs(d["ci95_low"]) or not d["holm_high"] >= d["ci95_high"] - rel_tol * abs(d["ci95_high"]):
            bad.append(f"{d['comparison']} {d['metric']} holm narrower than raw")
    for f in summary["frontier"]:
        for key, xs in _plain_frontier(rows, f["arm"]).items():
            got = f[key]
            if got["n"] != len(xs) or not close((got["mean"], got["ci95_low"], got["ci95_high"]), interval(xs)):
                bad.append(f"frontier {f['arm']} {key}")
    from litrepro.waypoint.transfer import FRONTIER

    pts = sorted(FRONTIER.items())
    for k in range(1, len(pts) - 1):
        key = str(pts[k][0])
        if key not in summary.get("frontier_chord_errors", {}):
            continue
        xs = []
        for r in rows:
            (t0, n0), (t, n), (t1, n1) = ((r["arms"][a]["tf_final"], r["arms"][a]["nll_change"]) for _, a in pts[k - 1:k + 2])
            xs.append(n - n0 - (n1 - n0) * (t - t0) / (t1 - t0))
        got = summary["frontier_chord_errors"][key]
        if got["n"] != len(xs) or not close((got["mean"], got["ci95_low"], got["ci95_high"]), interval(xs)):
            bad.append(f"chord error at x{key}")
    if bad:
        raise StudyRefused(f"transfer study refused, numbers differ from their plain-loop recomputation: "
                           f"{'; '.join(bad[:6])}{' ...' if len(bad) > 6 else ''}")


def _plain_frontier(rows, arm) -> dict[str, list[float]]:
    """The frontier gaps of ``arm`` by a plain walk along each seed's sweep (ordered by multiplier)."""
    from litrepro.waypoint.transfer import FRONTIER

    gaps, mults = [], []
    for r in rows:
        x = r["arms"][arm]["tf_final"]
        pts = [(m, r["arms"][a]["tf_final"], r["arms"][a]["nll_change"]) for m, a in sorted(FRONTIER.items())
               if a in r["arms"]]
        for (m0, t0, n0), (m1, t1, n1) in zip(pts, pts[1:]):
            if t0 <= x <= t1:
                w = (x - t0) / (t1 - t0) if t1 != t0 else 0.0
                gaps.append(r["arms"][arm]["nll_change"] - (n0 + w * (n1 - n0)))
                mults.append(math.exp(math.log(m0) + w * (math.log(m1) - math.log(m0))))
                break
    return {"nll_gap_to_frontier": gaps, "equivalent_lr_multiplier": mults}


def resummarise(data: Mapping[str, Any], *, allow: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The committed study with its summary re-derived from its own ``per_seed`` rows, by today's summary code.

    Valid only when nothing the rows depend on has changed: every source hash but :data:`SUMMARY_HASH` (and the
    keys in ``allow``, which a caller names after checking them another way) must equal the committed one, else
    it refuses (:class:`StudyRefused`) and the study must be re-run. How the study ran (``wall_seconds``,
    ``cpu_seconds``, ``jobs``) is kept; every summary field is replaced."""
    hashes = source_hashes()
    old = data.get("source_sha256", {})
    changed = sorted(k for k in set(hashes) | set(old) if hashes.get(k) != old.get(k)
                     and k not in (SUMMARY_HASH, SUMMARY_DECLARATION) and k not in allow)
    if changed:
        raise StudyRefused(f"transfer study not re-summarised: what its per-seed rows depend on changed "
                           f"({', '.join(changed)}); re-run it (make waypoint-transfer)")
    summary = summarise(data["per_seed"])
    return {**{k: v for k, v in data.items() if k in ("n_seeds", "seeds", "config", "arms", "lr_multipliers",
                                                       "streams", "wall_seconds", "cpu_seconds", "jobs", "per_seed")},
            "source_sha256": hashes, **summary}


def load(path: Path = PATH) -> dict[str, Any]:
    import json

    return json.loads(Path(path).read_text())


# --- What the intervals say ---------------------------------------------------------------------

ARM_WORDS = {"final_only": "final-only OPD", "waypoint": "the waypoint gate", "full_kl": "the exact full-vocabulary KL",
             "shuffled": "gates shuffled in the batch", "binned_shuffle": "gates shuffled within |A| bins",
             "abs_advantage": "the |A|-only gate", "straightness_x_magnitude": "straightness x |l_f - l_0|",
             "final_only_3x": "final-only with 3x the rollouts (the gate's teacher compute)"}
#: The arms the findings name one by one (the learning-rate arms appear through the frontier).
NAMED_ARMS = ("waypoint", "full_kl", "binned_shuffle", "abs_advantage", "straightness_x_magnitude", "final_only_3x",
              "shuffled")


def _words(arm: str) -> str:
    if arm in ARM_WORDS:
        return ARM_WORDS[arm]
    return f"final-only at {arm.removeprefix('final_only_lr')}x the learning rate"


def _reads(row: Mapping[str, Any], up: str = "higher", down: str = "lower") -> str:
    """The words of one paired interval, with the standardised effect beside a detectable one."""
    from litrepro.stats import fmt_ci

    ci = fmt_ci(row["ci95_low"], row["ci95_high"])
    if row["ci95_low"] > 0 or row["ci95_high"] < 0:
        word = up if row["ci95_low"] > 0 else down
        dz = row.get("effect_size_dz")
        sds = row.get("in_comparator_sds")
        extra = []
        if dz is not None:
            extra.append(f"d_z {dz:+.2g}")
        if sds is not None:
            extra.append(f"{sds:+.2g} between-seed SDs")
        if "holm_reads" in row:
            extra.append(f"Holm: {row['holm_reads']} {fmt_ci(row['holm_low'], row['holm_high'])}")
        return f"{word} by {ci} ({'; '.join(extra)})"
    holm_part = f"; Holm {fmt_ci(row['holm_low'], row['holm_high'])}" if "holm_low" in row else ""
    return f"no detectable difference, {ci}{holm_part}"


def frontier_words(row: Mapping[str, Any]) -> str:
    """``beyond the best final-only learning rate`` when the NLL gap's Holm interval (over the frontier's arms) lies
    below 0, ``within it (behind the frontier)`` above 0, else ``not distinguishable from it``."""
    if row["holm_high"] < 0:
        return "beyond the best final-only learning rate"
    if row["holm_low"] > 0:
        return "within it (behind the frontier)"
    return "not distinguishable from it (the interval spans 0, so it is not shown to lie on the frontier either)"


def findings(data: Mapping[str, Any]) -> list[str]:
    """Sentences from the committed JSON only: the regime, the primary endpoint, each arm against final-only and
    against the learning-rate frontier; words from the intervals, bounds rounded outward."""
    from litrepro.stats import fmt_ci

    from litrepro.waypoint.config import WaypointConfig

    from litrepro.waypoint.dose_response import LEVELS

    cfg, n, seed_cfg = data["config"], data["n_seeds"], WaypointConfig()
    strongest = ", the dose-response's strongest" if cfg["teacher_rl_lr"] == max(LEVELS.values()) else ""
    gain = data["teacher_gain"]
    out = [f"Transfer regime (our reconstruction): the student copy of the pre-RL teacher is distilled from the "
           f"teacher whose RL (learning rate {cfg['teacher_rl_lr']:g}{strongest}) raised P(even first byte) by "
           f"{fmt_ci(gain['ci95_low'], gain['ci95_high'])}, "
           f"for {cfg['updates']} updates of {cfg['batch']} rollouts at learning rate {cfg['lr']:g} "
           f"(our per-seed notebooks: the seed's {seed_cfg.student_steps} updates, of {seed_cfg.opd_batch} rollouts "
           f"(our reading of its {seed_cfg.opd_batch * seed_cfg.max_new_tokens} valid tokens per step) "
           f"at our learning rate {seed_cfg.student_lr:g}), {n} seeds, "
           "every arm from the same start and streams."]
    p = data["primary_endpoint"]
    if p["ci95_low"] >= p["threshold"]:
        verdict = f"at least {p['threshold']:.0%} of the teacher's gain (the whole interval)"
    elif p["ci95_high"] < p["threshold"]:
        verdict = (f"less than {p['threshold']:.0%} of the teacher's gain at the largest budget tried "
                   f"({cfg['updates']} updates)")
    else:
        verdict = f"an interval that straddles {p['threshold']:.0%}"
    fo = data["per_arm"]["final_only"]
    reach = []
    for key, level in (("u25", "25%"), ("u50", "50%")):
        r = fo[key]
        reach.append(f"{level} after [{math.floor(r['ci95_low'])}, {math.ceil(r['ci95_high'])}] updates"   # counts: whole, outward
                     if not r.get("censored")
                     else f"{level} on {r['reached']} of {r['n']} seeds")
    out.append(f"Primary endpoint, final-only OPD's transfer fraction after {cfg['updates']} updates: "
               f"{fmt_ci(p['ci95_low'], p['ci95_high'])}, {verdict}; it reaches {' and '.join(reach)}.")
    finals = [f"{_words(a)} {fmt_ci(data['per_arm'][a]['tf_final']['ci95_low'], data['per_arm'][a]['tf_final']['ci95_high'])}"
              for a in ("final_only", *NAMED_ARMS) if a in data["per_arm"]]
    out.append("Transfer fraction at the last update: " + "; ".join(finals) + ".")
    from litrepro.waypoint.config import WaypointConfig
    from litrepro.waypoint.transfer import FRONTIER

    sweep = []
    for m, arm in sorted(FRONTIER.items()):
        if arm in data["per_arm"]:
            t, v = data["per_arm"][arm]["tf_final"], data["per_arm"][arm]["nll_change"]
            seed_lr = " (our per-seed notebooks' learning rate; the seed file records none)" if math.isclose(m * cfg["lr"], WaypointConfig().student_lr) else ""
            sweep.append(f"x{m:g}{seed_lr} {fmt_ci(t['ci95_low'], t['ci95_high'])} with NLL change "
                         f"{fmt_ci(v['ci95_low'], v['ci95_high'])}")
    out.append("Final-only along the learning-rate sweep, transfer at the last update: " + "; ".join(sweep) + ".")
    diffs = {(d["comparison"], d["metric"]): d for d in data["differences"]}
    for arm in NAMED_ARMS:
        tf, auc, nll = (diffs.get((f"{arm} - {REFERENCE_ARM}", m)) for m in ("tf_final", "auc", "nll_change"))
        if tf is None:
            continue
        out.append(f"{_words(arm)[0].upper()}{_words(arm)[1:]} against final-only OPD: transfer at the last update "
                   f"{_reads(tf)}; area under the curve {_reads(auc)}; validation-NLL change "
                   f"{_reads(nll, 'higher (worse)', 'lower (better)')}.")
    for control in GATE_CONTROLS:
        tf, nll = (diffs.get((f"waypoint - {control}", m)) for m in ("tf_final", "nll_change"))
        if tf is None:
            continue
        out.append(f"The waypoint gate against {_words(control)}: transfer at the last update {_reads(tf)}; "
                   f"validation-NLL change {_reads(nll, 'higher (worse)', 'lower (better)')}.")
    chords = {float(m): v for m, v in data.get("frontier_chord_errors", {}).items()}
    for row in data["frontier"]:
        gap, mult = row["nll_gap_to_frontier"], row["equivalent_lr_multiplier"]
        side = ("lower" if gap["ci95_high"] < 0 else "higher" if gap["ci95_low"] > 0 else "no detectable difference")
        line = (f"Against the final-only learning-rate frontier ({len(data['lr_multipliers'])} multipliers), "
                f"{_words(row['arm'])} is {frontier_words(row)}: at the same transfer its NLL change minus the "
                f"frontier's is {fmt_ci(row['holm_low'], row['holm_high'])} Holm-adjusted over the "
                f"{len(data['frontier'])} arms placed on the frontier (unadjusted {fmt_ci(gap['ci95_low'], gap['ci95_high'])}, "
                f"{side}), and final-only reaches its "
                f"transfer at {fmt_ci(mult['ci95_low'], mult['ci95_high'])} times the learning rate.")
        if row.get("seeds_outside"):
            line += (f" This interval covers the {gap['n']} seeds whose sweep reaches the arm's transfer; on seed(s) "
                     f"{', '.join(map(str, row['seeds_outside']))} its transfer is beyond every final-only learning rate "
                     "tried, so the frontier says nothing there and those seeds are not in the interval.")
        if chords:
            near = min(chords, key=lambda m: abs(math.log(m) - math.log(max(mult["mean"], 1e-12))))
            c = chords[near]
            line += (f" The leave-one-out error of the frontier's chords at the nearest interior multiplier (x{near:g}) "
                     f"is {fmt_ci(c['ci95_low'], c['ci95_high'])}")
            lo, hi = row["holm_low"], row["holm_high"]                        # the interval the words follow
            near0 = min(abs(lo), abs(hi))                                     # its bound nearest 0
            reach = max(abs(c["ci95_low"]), abs(c["ci95_high"]))              # the chords' largest error
            if c["ci95_high"] < 0 and hi < 0:
                line += ": the chords overstate the frontier's NLL there, so this reading may come from the interpolation."
            elif c["ci95_low"] > 0 and lo > 0:
                line += ": the chords understate the frontier's NLL there, so this reading may come from the interpolation."
            elif (lo > 0 or hi < 0) and near0 <= reach:
                line += (": the gap's interval does not carry this error, and its bound nearest 0 lies within the "
                         "chords' error range, so the reading is not separated from the interpolation.")
            else:
                line += "."
        out.append(line)
    for arm, seeds in data.get("frontier_refused", {}).items():
        out.append(f"{_words(arm)[0].upper()}{_words(arm)[1:]} gets no frontier interval: its transfer lies outside "
                   f"the sweep's range on seeds {', '.join(map(str, seeds))}.")
    out.append("The intervals are paired 95% t intervals over seeds; the Holm-adjusted ones of the differences cover "
               "the family of every difference above (every arm against final-only, the gate against its controls, every "
               f"metric), and the frontier's cover their own family, the {len(data['frontier'])} arms placed on the "
               "frontier; d_z is the mean paired difference over its SD, and 'between-seed SDs' divides it by the "
               "comparator's SD.")
    return out


def plot(data: Mapping[str, Any]):
    """Three panels: the mean transfer curves, the (transfer, NLL change) frontier of the learning-rate sweep with
    the other arms, and each arm's NLL gap to that frontier at its own transfer (95% intervals)."""
    import numpy as np
    from matplotlib.figure import Figure

    from litrepro.waypoint.transfer import FRONTIER

    fig = Figure(figsize=(14, 4.4), layout="constrained")
    ax_curve, ax_front, ax_gap = fig.subplots(1, 3)
    sweep = [(m, a) for m, a in sorted(FRONTIER.items()) if a in data["per_arm"]]
    for i, (m, a) in enumerate(sweep):
        c = data["per_arm"][a]["mean_curve"]
        ax_curve.plot(c["updates"], c["tf"], color=str(0.75 - 0.5 * i / max(len(sweep) - 1, 1)), lw=0.9,
                      label="final-only, lr x " + ", ".join(f"{x:g}" for x, _ in sweep) if i == len(sweep) - 1 else None)
    for j, arm in enumerate(("final_only", *NAMED_ARMS)):
        if arm in data["per_arm"]:
            c = data["per_arm"][arm]["mean_curve"]
            ax_curve.plot(c["updates"], c["tf"], color=f"C{j}", lw=1.4, label=_words(arm))
    for level in (0.25, 0.5):
        ax_curve.axhline(level, color="k", lw=0.6, ls=":")
    ax_curve.set_xlabel("OPD updates", fontsize=9)
    ax_curve.set_ylabel("transfer fraction (mean over seeds)", fontsize=9)
    ax_curve.set_title("learning curves", fontsize=10)
    ax_curve.legend(fontsize=6, loc="lower right")

    def point(arm):
        t, v = data["per_arm"][arm]["tf_final"], data["per_arm"][arm]["nll_change"]
        return t["mean"], v["mean"], (t["ci95_high"] - t["ci95_low"]) / 2, (v["ci95_high"] - v["ci95_low"]) / 2
    xs = [point(a) for _, a in sweep]
    ax_front.plot([p[0] for p in xs], [p[1] for p in xs], "-o", color="0.4", ms=4, label="final-only lr sweep")
    for (m, _), p in zip(sweep, xs):
        ax_front.annotate(f"x{m:g}", (p[0], p[1]), fontsize=7, xytext=(3, -9), textcoords="offset points")
    for j, arm in enumerate(("final_only", *NAMED_ARMS)):
        if arm in data["per_arm"] and arm != "final_only":
            x, y, ex, ey = point(arm)
            ax_front.errorbar([x], [y], xerr=[ex], yerr=[ey], fmt="s", ms=4, color=f"C{j}", capsize=2, label=_words(arm))
    ax_front.set_xlabel("transfer fraction at the last update", fontsize=9)
    ax_front.set_ylabel("validation NLL change (nats/byte)", fontsize=9)
    ax_front.set_title("learning-rate frontier (means, 95% CI)", fontsize=10)
    ax_front.legend(fontsize=6, loc="upper left")
    rows = data["frontier"]
    y = np.arange(len(rows))
    for i, row in enumerate(rows):
        g = row["nll_gap_to_frontier"]
        filled = g["ci95_low"] > 0 or g["ci95_high"] < 0
        ax_gap.errorbar([g["mean"]], [i], xerr=[[g["mean"] - g["ci95_low"]], [g["ci95_high"] - g["mean"]]], fmt="o",
                        color="C3" if filled else "0.3", mfc="C3" if filled else "white", capsize=3)
    ax_gap.axvline(0, color="k", lw=0.8)
    import textwrap

    ax_gap.set_yticks(y, [textwrap.fill(_words(r["arm"]), 26) for r in rows], fontsize=7)
    ax_gap.set_xlabel("NLL change − frontier's\n(at the same transfer)", fontsize=9)
    ax_gap.set_title("against the frontier (left of 0: beyond it)", fontsize=10)
    for ax in (ax_curve, ax_front, ax_gap):
        ax.grid(lw=0.4, alpha=0.5)
        ax.tick_params(labelsize=8)
    fig.suptitle(f"waypoint_opd transfer study: {data['n_seeds']} seeds, paired by seed", fontsize=10)
    return fig
