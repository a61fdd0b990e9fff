"""The ``waypoint_opd`` figures written beside ``summary.json``."""

from __future__ import annotations

from typing import Any, Mapping

from matplotlib.figure import Figure

import numpy as np

from litrepro import plotting, recorded
from litrepro.waypoint.experiment import ARMS


def recorded_rl_rewards() -> dict[int, list[float]]:
    """The seed file's teacher-RL reward curve per seed (empty without the recorded figures)."""
    data = recorded.load("waypoint_opd")
    if not data:
        return {}
    return {int(r["seed"]): [h["mean_rule_reward"] for h in r["teacher_rl_audit"]["history"]] for r in data["per_seed"]}


def reward_with_recorded(run: Mapping[int, list[float]], title: str) -> Figure:
    """This run's teacher-RL reward curves with the recorded ones overlaid (dashed)."""
    fig = plotting.curves_across_seeds(dict(run), xlabel="RL update", ylabel="mean rule reward (even first byte)",
                                       title=title)
    ax = fig.axes[0]
    rec = recorded_rl_rewards()
    for seed, values in sorted(rec.items()):
        ax.plot(np.arange(1, len(values) + 1), values, ls="--", lw=0.8, color="tab:gray",
                label="recorded (seed file)" if seed == min(rec) else None)
    if rec:
        ax.axhline(0.5, color="k", lw=0.5, ls=":")
        ax.legend(fontsize=7)
    return fig


def history_beside_recorded(history: list[Mapping[str, Any]], seed: int):
    """This run's OPD history beside the recorded one of the same seed (strings, 5 digits)."""
    import pandas as pd

    from litrepro import report

    data = recorded.load("waypoint_opd")
    rec = {int(r["seed"]): r["history"] for r in data["per_seed"]} if data else {}
    rows = []
    for h in history:
        r = next((x for x in rec.get(seed, []) if x["step"] == h["step"]), {})
        for key in ("loss", "gradient_norm", "mean_gate", "zero_gate_fraction", "batch_scale", "valid_tokens"):
            show = report.fmt_zero if key == "loss" else report.fmt
            rows.append({"step": h["step"], "field": key, "this run": show(h[key]),
                         "recorded": report.fmt(r[key], 3) if key in r else "-"})
    return pd.DataFrame(rows).pivot(index="field", columns="step", values=["this run", "recorded"])


def arm_differences(results: list[Mapping[str, Any]], key: str) -> dict[str, list[float]]:
    """Per seed, the gate arm (``waypoint``) minus each other arm on ``key`` (e.g. ``expected_parity_rate``).

    The arms of one seed start from the same student and share its prompts and random
    streams, so they are compared within the seed; an arm missing on some seed is left out.
    """
    b = [r["beyond_seed_metrics"] for r in sorted(results, key=lambda r: r["seed"])]
    return {f"waypoint − {arm}": [x[f"comparison_waypoint_{key}"] - x[f"comparison_{arm}_{key}"] for x in b]
            for arm in ARMS if arm != "waypoint" and all(f"comparison_{arm}_{key}" in x for x in b)}


def summary_plots(results: list[Mapping[str, Any]]) -> dict[str, Figure]:
    """Teacher-RL reward curves across seeds (recorded ones overlaid), and the arms as paired per-seed differences."""
    figures = {"teacher_rl_reward.png": reward_with_recorded(
        {r["seed"]: r["curves"]["teacher_rl_reward"] for r in results}, "teacher RL reward across seeds")}
    with_comparison = [r for r in results if "comparison_waypoint_validation_nll" in r["beyond_seed_metrics"]]
    if with_comparison:
        seeds = ", ".join(str(r["seed"]) for r in sorted(with_comparison, key=lambda r: r["seed"]))
        for key, label in (("expected_parity_rate", "P(even first byte)"), ("validation_nll", "validation NLL (nats/byte)")):
            diffs = arm_differences(with_comparison, key)
            if diffs:
                figures[f"opd_comparison_{key}.png"] = plotting.paired_differences(
                    diffs, xlabel=f"paired difference in {label}",
                    title=f"OPD arms, {label}: gate arm minus each other arm, per seed ({seeds}), 95% t CI")
    return figures


# --- Mechanism figures of the notebook and the explorer -------------------------------------

ARM_COLOURS = {"waypoint": "C0", "final_only": "C1", "shuffled": "C2", "matched_compute": "C3", "none": "C7"}
CLASS_COLOURS = {"both": "C0", "one": "C1", "neither": "C7"}


def lineage_axes(ax, lineage: Mapping[str, Any]) -> None:
    """P(even first byte) after each RL update; the waypoints as large markers at the steps they replay to."""
    steps, parity = lineage["steps"], lineage["expected_parity_rate"]
    ax.plot(steps, parity, "-o", color="C0", ms=3, lw=1.2, label="exact P(even first byte)")
    for k, (named, found) in enumerate(zip(lineage["waypoint_steps"], lineage["waypoint_found_at"])):
        ax.plot([named], [parity[named]], "D", ms=9, mfc="none", mec="C3", mew=1.6,
                label="waypoints (found at their steps)" if k == 0 else None)
        ax.annotate(f"w{named}" + ("" if found == [named] else " ✗"), (named, parity[named]),
                    textcoords="offset points", xytext=(0, 9), ha="center", fontsize=8, color="C3")
    ax.set(xlabel="RL update", ylabel="P(even first byte)", title="teacher RL lineage (replayed)")
    ax.set_xticks(steps)
    ax.margins(y=0.25)
    ax.legend(fontsize=7, loc="lower right")


def lineage_figure(lineage: Mapping[str, Any], title: str = "") -> Figure:
    """The lineage across RL steps with waypoints 0/4/8 marked."""
    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    ax = fig.subplots()
    lineage_axes(ax, lineage)
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def gate_class_axes(ax, tokens: Mapping[str, Any]) -> None:
    """Histogram of per-token gates, one per RL-sampling class (normalised within each class)."""
    from litrepro.waypoint.views import CLASSES

    gate, klass = np.asarray(tokens["gate"], dtype=float), np.asarray(tokens["klass"])
    bins = np.linspace(0, 1, 21)
    for i, name in enumerate(CLASSES):
        g = gate[klass == i]
        if g.size:
            ax.hist(g, bins=bins, histtype="step", lw=1.6, density=True, color=CLASS_COLOURS[name],
                    label=f"sampled by RL in {name} leg{'s' if name == 'both' else ''}: n={g.size}, mean {g.mean():.2f}")
    ax.set(xlabel=f"gate ({tokens.get('gate_kind', 'straightness')})", ylabel="density",
           title="gate by RL-sampling class of the token")
    ax.legend(fontsize=7, loc="upper left")


def gate_class_figure(tokens: Mapping[str, Any], title: str = "") -> Figure:
    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    ax = fig.subplots()
    gate_class_axes(ax, tokens)
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def rollout_axes(ax, tokens: Mapping[str, Any], rows: int = 6) -> None:
    """A few sampled rollouts, one byte per cell, each cell coloured by its gate (0 light, 1 dark)."""
    import matplotlib as mpl

    gen, valid, grid = (np.asarray(tokens[k]) for k in ("generated", "valid", "gate_grid"))
    rows = min(rows, gen.shape[0])
    cmap = mpl.colors.ListedColormap(mpl.colormaps["Blues"](np.linspace(0.1, 0.9, 64))).with_extremes(bad="white")
    shown = np.ma.masked_where(~valid[:rows], grid[:rows].astype(float))                  # (rows, N)
    image = ax.imshow(shown, cmap=cmap, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    for r in range(rows):
        for c in range(gen.shape[1]):
            if valid[r, c]:
                b = int(gen[r, c])
                text = "⏎" if b == 10 else "EOS" if b == 256 else "·" if b == 32 else chr(b) if 32 < b < 127 else f"{b:02x}"
                ax.text(c, r, text, ha="center", va="center", fontsize=7 if len(text) > 1 else 9, family="monospace",
                        color="white" if grid[r, c] > 0.6 else "black")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(f"sampled rollouts, bytes coloured by gate ({tokens.get('gate_kind', 'straightness')})")
    ax.figure.colorbar(image, ax=ax, fraction=0.04, pad=0.01, label="gate")


def arm_curve_axes(ax_nll, ax_parity, comparison: Mapping[str, Any], *, highlight: str | None = None,
                   until: int | None = None, relative: bool = False) -> None:
    """Validation NLL and exact P(even first byte) against OPD updates, one line per arm.

    ``relative``: each of the gated arms minus final-only OPD at the same update (the
    gate's own effect, 1e-6 to 1e-3, which the absolute curves cannot show beside the
    matched-compute control's 1e-1).
    """
    base = {p["step"]: p for p in comparison["final_only"]["curve"]}
    arms = ("waypoint", "shuffled") if relative else ARMS
    for arm in arms:
        curve = comparison[arm]["curve"]
        steps = [p["step"] for p in curve]
        bold = arm == highlight
        for ax, key in ((ax_nll, "validation_nll"), (ax_parity, "expected_parity_rate")):
            ys = [p[key] - (base[p["step"]][key] if relative else 0.0) for p in curve]
            ax.plot(steps, ys, "-o" if relative else "-", ms=3, color=ARM_COLOURS[arm], lw=2.4 if bold else 1.1,
                    alpha=1.0 if bold or highlight is None else 0.7, label=arm + (" − final_only" if relative else ""))
    if relative:
        for ax in (ax_nll, ax_parity):
            ax.axhline(0, color=ARM_COLOURS["final_only"], lw=1, label="final_only")
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
    elif "teacher_final" in comparison:
        ax_parity.axhline(comparison["teacher_final"]["expected_parity_rate"], color="k", ls=":", lw=1,
                          label="final teacher")
    for ax in (ax_nll, ax_parity):
        if until is not None:
            ax.axvline(until, color="k", lw=0.8, ls="--")
        ax.set_xlabel("OPD update")
    what = " − final-only" if relative else ""
    ax_nll.set(ylabel="validation NLL" + what, title="arms: validation NLL" + what)
    ax_parity.set(ylabel="P(even first byte)" + what, title="arms: parity" + what)
    ax_parity.legend(fontsize=7, loc="best")


def arm_curves_figure(comparison: Mapping[str, Any], title: str = "") -> Figure:
    """The arms' NLL and parity curves (needs ``compare_arms(..., eval_every=k)``): absolute, then minus final-only."""
    fig = Figure(figsize=(10, 6.8), layout="constrained")
    (ax_nll, ax_parity), (ax_dnll, ax_dparity) = fig.subplots(2, 2)
    arm_curve_axes(ax_nll, ax_parity, comparison)
    arm_curve_axes(ax_dnll, ax_dparity, comparison, relative=True)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def calibration_figure(rows: list[Mapping[str, Any]], title: str = "") -> Figure:
    """z of every recorded figure at both scales, with the +-3 band.

    Filled circle: z against the recorded SD of the values as logged (per step for a
    history field); open diamond: z against the SD of the seed file's per-seed means
    (:mod:`litrepro.calibration`).  For a metric, logged once per seed, the two coincide.
    Figures without a z (recorded SD 0, the means differ) are listed as such.
    """
    rows = list(rows)
    fig = Figure(figsize=(7.2, 0.9 + 0.26 * max(len(rows), 1)), layout="constrained")
    ax = fig.subplots()
    names = [r["figure"] for r in rows]
    y = np.arange(len(rows))[::-1]
    ax.axvspan(-3, 3, color="C2", alpha=0.12, label="|z| ≤ 3")
    ax.axvline(0, color="k", lw=0.6)
    zs = [z for r in rows for z in (r["z"], r.get("z_per_seed")) if z is not None]
    lim = max([3.5] + [abs(z) + 0.5 for z in zs])
    labelled = set()
    for yi, r in zip(y, rows):
        if r["z"] is None and r.get("z_per_seed") is None:
            ax.text(0, yi, "no z: recorded std 0", ha="center", va="center", fontsize=7, color="0.4")
            continue
        for key, marker, label in (("z", "o", "z: recorded SD (as logged)"),
                                   ("z_per_seed", "D", "z: SD of recorded per-seed means")):
            z = r.get(key)
            if z is None:
                continue
            colour = "C3" if abs(z) > 3 and not r.get("explanation") else "C0"
            ax.plot([z], [yi], marker, color=colour, ms=5 if marker == "o" else 6,
                    mfc=colour if marker == "o" else "none", mew=1.2,
                    label=label if key not in labelled else None)
            labelled.add(key)
    ax.set_yticks(y, names, fontsize=7)
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel("z = (this run − recorded mean) / SD;  red: beyond 3, unexplained", fontsize=9)
    ax.set_title(title or "calibration: every recorded figure", fontsize=10)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=3, fontsize=7, frameon=False)
    return fig


def effect_study_figure(data: Mapping[str, Any]) -> Figure:
    """The effect study at a glance: gate − final-only and gate − matched-compute, per condition.

    One panel per (teacher, metric) and comparison; in it, each (student start, RL
    rollouts) condition is one row with its mean paired difference and 95% t interval.
    Each panel has its own linear axis in the units its label names (the differences
    span 1e-6 to 1e-1, so a shared axis would flatten most of them).  Filled markers:
    the interval excludes 0.
    """
    comparisons = (("waypoint - final_only", "gate − final-only"),
                   ("waypoint - matched_compute", "gate − matched-compute"))
    metrics = (("expected_parity_rate", "P(even first byte)"), ("validation_nll", "validation NLL"))
    teachers = sorted({r["teacher"] for r in data["differences"]}, key=lambda t: t != "calibrated")
    conds = sorted({(r["student_start"], r["teacher_rl_rollouts"]) for r in data["differences"]})
    panels = [(t, m) for t in teachers for m in metrics]
    fig = Figure(figsize=(11, 2.1 * len(panels) + 0.6), layout="constrained")
    axes = fig.subplots(len(panels), len(comparisons), squeeze=False)
    labels = [f"{s}, {k} rollouts" for s, k in conds]
    for row, (teacher, (metric, mlabel)) in zip(axes, panels):
        for ax, (comp, clabel) in zip(row, comparisons):
            rows = {(r["student_start"], r["teacher_rl_rollouts"]): r for r in data["differences"]
                    if r["comparison"] == comp and r["metric"] == metric and r["teacher"] == teacher}
            span = max(max(abs(r["ci95_low"]), abs(r["ci95_high"])) for r in rows.values())
            exp = int(np.floor(np.log10(span))) if span > 0 else 0
            scale = 10.0 ** exp
            for i, c in enumerate(conds):
                r = rows[c]
                m, lo, hi = (r[k] / scale for k in ("mean_difference", "ci95_low", "ci95_high"))
                excludes = r["ci95_low"] > 0 or r["ci95_high"] < 0
                colour = f"C{i}"
                ax.errorbar([m], [len(conds) - 1 - i], xerr=[[m - lo], [hi - m]], fmt="o", ms=6, capsize=3,
                            color=colour, mfc=colour if excludes else "white", mew=1.4)
            ax.axvline(0, color="k", lw=0.8)
            ax.set_yticks(range(len(conds)), labels[::-1], fontsize=9)
            ax.set_xlabel(f"{mlabel}: difference (× 1e{exp})", fontsize=9)
            ax.set_title(f"{teacher} teacher: {clabel}", fontsize=10)
            ax.tick_params(axis="x", labelsize=9)
            ax.margins(x=0.15, y=0.15)
            ax.grid(axis="x", lw=0.4, alpha=0.5)
    fig.suptitle(f"waypoint_opd effect study: paired differences with 95% CI, n = {data['n_seeds']} seeds per "
                 "condition (filled: the interval excludes 0)", fontsize=11)
    return fig
