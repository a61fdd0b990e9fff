"""The waypoint transfer study, recomputed from its per-seed learning curves (issue 34, item 1).

Part of :mod:`litrepro.recompute`: it reads only ``rendered/waypoint_opd/transfer_study.json`` and imports
none of the study, statistics or wording modules.  Definitions, restated from the study's docstring:

* per seed and arm, from the raw curve: TF(k) = (P(k) - P_w0) / (P_wf - P_w0); ``tf_final`` its last
  point; ``auc`` the trapezoid area under TF over the updates divided by the last update; ``u25`` and
  ``u50`` the first update at which TF reaches the level (the first point when it starts there, linear
  between points, none when never reached); ``nll_change`` the last validation NLL minus the first;
  the arm's learning rate and batch are the study's times the arm's multipliers; every check holds;
* per arm and metric: the 95% t interval over seeds with the sample SD, or, when a seed never reaches
  the level, no interval and the count that did (censored); the mean curve, point by point;
* the differences: every arm against final-only and the waypoint gate against its controls
  (:data:`GATE_CONTROLS`), per metric: the paired t interval, d_z = mean / SD of the differences, the
  difference in comparator SDs, and Holm's step-down adjustment over the uncensored rows (sorted by raw
  p, then by the label ``"<A> - <B> | <metric>"``); a row with a censored seed names its seeds;
* the learning-rate frontier: the final-only arms at the sweep's multipliers; for every other arm and
  seed, walking the sweep in increasing multiplier, the first segment whose transfer crosses the arm's
  upward gives the NLL gap and the equivalent multiplier (linear in TF, and in log m); a seed outside
  the sweep is named, and an arm with fewer than two seeds inside gets no interval (refused);
* the chord errors: at each interior multiplier, the NLL minus its neighbours' chord at its transfer;
* the teacher's gain P_wf - P_w0, and the primary endpoint (final-only's ``tf_final``, met when its
  lower bound is at least the threshold).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from litrepro.recompute import _holm, _Ledger, _mean, _run, _sample_sd, t_interval

TRANSFER = "rendered/waypoint_opd/transfer_study.json"
METRICS = ("tf_final", "auc", "nll_change", "u25", "u50")
REFERENCE = "final_only"
GATE_CONTROLS = ("binned_shuffle", "shuffled", "final_only_3x", "abs_advantage")

__all__ = ["TRANSFER", "check_transfer", "plan"]


def _reach(updates, tf, level):
    for i in range(len(updates)):
        if tf[i] >= level:
            if i == 0:
                return float(updates[0])
            return updates[i - 1] + (updates[i] - updates[i - 1]) * (level - tf[i - 1]) / (tf[i] - tf[i - 1])
    return None


def _curve_metrics(arm: Mapping[str, Any], p0: float, pf: float) -> dict[str, Any]:
    tf = [(p - p0) / (pf - p0) for p in arm["p_even"]]
    u = arm["updates"]
    area = 0.0
    for i in range(1, len(u)):
        area += (u[i] - u[i - 1]) * (tf[i - 1] + tf[i]) / 2
    return {"tf": tf, "tf_final": tf[-1], "auc": area / u[-1], "u25": _reach(u, tf, 0.25), "u50": _reach(u, tf, 0.5),
            "nll_change": arm["validation_nll"][-1] - arm["validation_nll"][0]}


def _sd_interval(L: _Ledger, path: str, row: Mapping[str, Any], values) -> None:
    L.interval(path, row, values, verdict=False)
    L.num(f"{path}.sd", row.get("sd"), _sample_sd(values))


def _multiplier_arm(m: float) -> str:
    return "final_only" if m == 1.0 else f"final_only_lr{m:g}"


def _check_transfer(d: Mapping[str, Any], L: _Ledger) -> None:
    rows = sorted(d["per_seed"], key=lambda r: r["seed"])
    seeds = [r["seed"] for r in rows]
    L.same("seeds", d["seeds"], seeds)
    L.same("n_seeds", d["n_seeds"], len(rows))
    arms = list(d["arms"])
    cfg = d["config"]
    values: dict[tuple[str, str], list] = {}
    for r in rows:
        path = f"per_seed[{r['seed']}]"
        L.members(f"{path}.arms", list(r["arms"]), arms)
        L.num(f"{path}.teacher_gain", r["teacher_gain"], r["p_wf"] - r["p_w0"])
        failed = sorted(k for k, v in r["checks"].items() if v is not True)
        failed += sorted(f"{a}.{k}" for a, c in r["arm_checks"].items() for k, v in c.items() if v is not True)
        L.same(f"{path}: failed checks (the study refuses on any)", failed, [])
        for arm in arms:
            a, spec, apath = r["arms"][arm], d["arms"][arm], f"{path}.arms.{arm}"
            with L.section(apath):
                want = _curve_metrics(a, r["p_w0"], r["p_wf"])
                L.vector(f"{apath}.tf", a["tf"], want["tf"])
                for metric in METRICS:
                    L.num(f"{apath}.{metric}", a[metric], want[metric])
                    values.setdefault((arm, metric), []).append(want[metric])
                L.num(f"{apath}.lr", a["lr"], cfg["lr"] * spec["lr_multiplier"])
                L.same(f"{apath}.batch", a["batch"], cfg["batch"] * spec["batch_multiplier"])
    L.members("per_arm (arms)", list(d["per_arm"]), arms)
    for arm in arms:
        got = d["per_arm"][arm]
        for metric in METRICS:
            xs, path = values[(arm, metric)], f"per_arm.{arm}.{metric}"
            with L.section(path):
                if any(x is None for x in xs):
                    L.same(path, got[metric], {"n": len(xs), "reached": sum(x is not None for x in xs), "censored": True})
                else:
                    _sd_interval(L, path, got[metric], xs)
        curves = [r["arms"][arm]["tf"] for r in rows]
        L.same(f"per_arm.{arm}.mean_curve.updates", got["mean_curve"]["updates"], rows[0]["arms"][arm]["updates"])
        L.vector(f"per_arm.{arm}.mean_curve.tf", got["mean_curve"]["tf"],
                 [_mean([c[i] for c in curves]) for i in range(len(curves[0]))])
    _check_differences(d, L, arms, values)
    _check_frontier(d, L, rows, arms)
    with L.section("teacher_gain"):
        _sd_interval(L, "teacher_gain", d["teacher_gain"], [r["p_wf"] - r["p_w0"] for r in rows])
    with L.section("primary_endpoint"):
        p = d["primary_endpoint"]
        _sd_interval(L, "primary_endpoint", p, values[(p["arm"], p["metric"])])
        low = t_interval(values[(p["arm"], p["metric"])])["low"]
        L.same("primary_endpoint.met", p["met"], low >= p["threshold"])


def _check_differences(d, L: _Ledger, arms, values) -> None:
    pairs = [(a, REFERENCE) for a in arms if a != REFERENCE]
    pairs += [("waypoint", c) for c in GATE_CONTROLS if "waypoint" in arms and c in arms]
    want = {(f"{a} - {b}", m): (a, b, m) for a, b in pairs for m in METRICS}
    got = {(r["comparison"], r["metric"]): r for r in d["differences"]}
    L.members("differences (comparison, metric)", [(r["comparison"], r["metric"]) for r in d["differences"]],
              list(want))
    family, refs = {}, {}
    for key, (a, b, m) in want.items():
        xs, ys = values[(a, m)], values[(b, m)]
        if any(v is None for v in xs + ys):
            continue
        family[f"{key[0]} | {m}"] = [x - y for x, y in zip(xs, ys)]
        refs[f"{key[0]} | {m}"] = ys
    adjusted = _holm(family)
    for key, (a, b, m) in want.items():
        row, path = got.get(key), f"differences[{key[0]} on {m}]"
        if row is None:
            continue
        with L.section(path):
            label = f"{key[0]} | {m}"
            if label not in family:
                xs, ys = values[(a, m)], values[(b, m)]
                L.same(f"{path}.censored", row.get("censored"), True)
                L.same(f"{path}.censored_seeds", row.get("censored_seeds"),
                       [s for s, x, y in zip(sorted(d["seeds"]), xs, ys) if x is None or y is None])
                continue
            diffs, h = family[label], adjusted[label]
            L.interval(path, row, diffs, verdict=False)
            mean, sd, sd_ref = _mean(diffs), _sample_sd(diffs), _sample_sd(refs[label])
            L.num(f"{path}.effect_size_dz", row["effect_size_dz"], mean / sd if sd > 0 else None)
            L.num(f"{path}.in_comparator_sds", row["in_comparator_sds"], mean / sd_ref if sd_ref > 0 else None)
            L.holm(path, row, h)


def _check_frontier(d, L: _Ledger, rows, arms) -> None:
    sweep = [(m, _multiplier_arm(m)) for m in sorted(d["lr_multipliers"]) if _multiplier_arm(m) in arms]
    on_sweep = {a for _, a in sweep}
    got = {f["arm"]: f for f in d["frontier"]}
    want_refused, want_arms, family = {}, [], {}
    for arm in arms:
        if arm in on_sweep:
            continue
        gaps, mults, outside = [], [], []
        for r in rows:
            x = r["arms"][arm]["tf_final"]
            pts = [(m, r["arms"][a]["tf_final"], r["arms"][a]["nll_change"]) for m, a in sweep]
            for (m0, t0, n0), (m1, t1, n1) in zip(pts, pts[1:]):
                if t0 <= x <= t1:
                    w = 0.0 if t1 == t0 else (x - t0) / (t1 - t0)
                    gaps.append(r["arms"][arm]["nll_change"] - (n0 + w * (n1 - n0)))
                    mults.append(math.exp(math.log(m0) + w * (math.log(m1) - math.log(m0))))
                    break
            else:
                outside.append(r["seed"])
        if len(gaps) < 2:
            want_refused[arm] = outside
            continue
        want_arms.append(arm)
        family[arm] = gaps
        if arm in got:
            path = f"frontier[{arm}]"
            with L.section(path):
                _sd_interval(L, f"{path}.nll_gap_to_frontier", got[arm]["nll_gap_to_frontier"], gaps)
                _sd_interval(L, f"{path}.equivalent_lr_multiplier", got[arm]["equivalent_lr_multiplier"], mults)
                L.same(f"{path}.seeds_outside", got[arm]["seeds_outside"], outside)
    L.members("frontier (arms)", list(got), want_arms)
    adjusted = _holm(family)                                  # the frontier's arms are a Holm family of their own
    for arm in want_arms:
        if arm in got:
            with L.section(f"frontier[{arm}] Holm"):
                L.holm(f"frontier[{arm}]", got[arm], adjusted[arm])
    L.same("frontier_refused", d["frontier_refused"], want_refused)
    chords = {}
    for (_, a0), (m, a), (_, a1) in zip(sweep, sweep[1:], sweep[2:]):
        errors = []
        for r in rows:
            (t0, n0), (t, n), (t1, n1) = ((r["arms"][x]["tf_final"], r["arms"][x]["nll_change"]) for x in (a0, a, a1))
            if t1 != t0:
                errors.append(n - (n0 + (n1 - n0) * (t - t0) / (t1 - t0)))
        if len(errors) == len(rows):
            chords[str(m)] = errors
    L.members("frontier_chord_errors (multipliers)", list(d["frontier_chord_errors"]), list(chords))
    for m, errors in chords.items():
        if m in d["frontier_chord_errors"]:
            with L.section(f"frontier_chord_errors[{m}]"):
                _sd_interval(L, f"frontier_chord_errors[{m}]", d["frontier_chord_errors"][m], errors)


def check_transfer(data: Mapping[str, Any]) -> list[str]:
    """Problems in ``transfer_study.json`` against its per-seed curves (empty: all recomputed)."""
    return _run(TRANSFER, _check_transfer, data).problems


def plan(load) -> list[tuple[str, Any]]:
    """``(file, fn(data, ledger))`` for :func:`litrepro.recompute.check`."""
    return [(TRANSFER, _check_transfer)]
