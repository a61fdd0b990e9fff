"""Plots shared by the notebooks, the runner's PNGs and the summary notebook.

Every function returns a ``matplotlib.figure.Figure`` built without pyplot,
so no backend shows it behind the notebook's back: a notebook displays a
figure explicitly with :func:`show` (a PNG rendered here, identical under
papermill, nbval and JupyterLab), and :func:`save_png` writes one atomically
without the version stamp, so PNGs are reproducible.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from litrepro import atomic


def png_bytes(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    return buffer.getvalue()


def save_png(fig: Figure, path: Path | str) -> None:
    atomic.write_bytes(path, png_bytes(fig))


def show(fig: Figure) -> None:
    """Display ``fig`` in the notebook as a PNG."""
    from IPython.display import Image, display

    display(Image(data=png_bytes(fig), format="png"))


def show_file(path: Path | str) -> None:
    """Display a committed PNG (e.g. a study's figure) in the notebook, or one line saying it is missing.

    Give ``path`` from :mod:`litrepro.paths` (nbval runs a notebook in its own folder, not the root).
    """
    from IPython.display import Image, display

    from litrepro.paths import relative

    path = Path(path)
    if not path.is_file():
        print(f"{relative(path)} not found")
        return
    display(Image(filename=str(path)))


def _figure(width: float, height: float, ncols: int = 1):
    fig = Figure(figsize=(width, height))
    axes = fig.subplots(1, ncols)
    return fig, axes


def td_loss_curves(curves: Mapping[str, Sequence[float]], title: str = "TD loss per head") -> Figure:
    """One line per head, log scale, x = training step."""
    fig, ax = _figure(6.4, 3.6)
    for name, values in curves.items():
        ax.plot(np.arange(1, len(values) + 1), values, label=name, lw=1)
    ax.set(xlabel="critic step", ylabel="TD loss (minibatch)", yscale="log", title=title)
    ax.legend()
    fig.tight_layout()
    return fig


def pid_trajectories(demo: Mapping) -> Figure:
    """phi_t and spent fraction vs plan for one campaign under two constant actions."""
    fig, (ax_phi, ax_spend) = _figure(9.6, 3.6, 2)
    for action, trace in demo["traces"].items():
        ax_phi.step(range(len(trace["phi"])), trace["phi"], where="post", label=f"action {action}")
        ax_spend.plot(trace["spent_fraction"], label=f"action {action}")
    ax_spend.plot(demo["plan"], "k--", lw=1, label="plan")
    ax_phi.set(xlabel="hour", ylabel="phi = log bid multiplier", title=f"campaign {demo['campaign']}: PID output")
    ax_spend.set(xlabel="hour", ylabel="spent / budget", title="pacing")
    ax_phi.legend()
    ax_spend.legend()
    fig.tight_layout()
    return fig


def action_distribution(mean_probs: Sequence[float], labels: Sequence[str]) -> Figure:
    """Mean probability of each action over held-out states."""
    fig, ax = _figure(6.4, 3.2)
    ax.bar(range(len(mean_probs)), mean_probs)
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=8)
    ax.set(ylabel="mean pi(a|s)", title="learned policy: action distribution (held-out states)")
    fig.tight_layout()
    return fig


def estimate_vs_truth(rows: Mapping[str, Mapping[str, Sequence[float]]], title: str) -> Figure:
    """Per policy: IPS estimate and simulated truth, each a point with its error bar (no bars from 0).

    ``rows[policy] = {"ips": [...], "true_value": [...]}``, one entry per seed
    (spread = std across seeds) or one entry with ``*_err`` error bars.  The axis
    spans the points, not 0: the figures lie near 1.6, and their gaps are what matters.
    """
    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    ax = fig.subplots()
    names = list(rows)
    x = np.arange(len(names))
    for offset, key, label, marker in ((-0.12, "ips", "ordinary IPS (held-out log)", "o"),
                                       (0.12, "true_value", "simulated truth", "s")):
        values = [np.asarray(rows[n][key], dtype=float) for n in names]
        means = [v.mean() for v in values]
        errs = [rows[n].get(key + "_err", [v.std(ddof=1) if v.size > 1 else 0.0])[0] for n, v in zip(names, values)]
        ax.errorbar(x + offset, means, yerr=errs, fmt=marker, ms=6, capsize=4, label=label)
    ax.set_xticks(x, names)
    ax.set_xlim(-0.6, len(names) - 0.4)
    ax.margins(y=0.15)
    ax.grid(axis="y", lw=0.4, alpha=0.5)
    ax.set(ylabel="mean reward per decision", title=title)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=2, frameon=False)
    return fig


def paired_difference_rows(differences: Mapping[str, Sequence[float]]) -> list[dict]:
    """Per comparison: the per-seed differences d_s with their mean and 95% Student-t interval.

    ``{label, per_seed, n, mean_difference, ci95_low, ci95_high}``, from
    :func:`litrepro.stats.paired_ci` (``mean(d) ± t_{0.975, n-1} · sd(d) / sqrt(n)``).
    """
    from litrepro.stats import paired_ci          # imports scipy: only when a paired figure is drawn

    out = []
    for label, d in differences.items():
        d = [float(x) for x in d]
        out.append({"label": label, "per_seed": d, **paired_ci(d, [0.0] * len(d))})
    return out


def paired_differences(differences: Mapping[str, Sequence[float]], *, xlabel: str, title: str,
                       share_axis: bool = False) -> Figure:
    """One panel per comparison: each seed's difference as a dot, the mean with its 95% t interval, and 0 marked.

    ``differences[label]`` holds one paired difference per seed (same seed order in every
    entry is not needed: each comparison is summarised on its own).  Every panel has its own
    linear x axis, always including 0, because comparisons of one figure can differ by
    orders of magnitude; ``share_axis`` gives all panels one axis (comparisons of one scale).
    A filled mean marker: the interval excludes 0.
    """
    rows = paired_difference_rows(differences)

    def limits(rs: list[dict]) -> tuple[float, float]:
        values = [0.0] + [v for r in rs for v in (r["ci95_low"], r["ci95_high"], *r["per_seed"])]
        span = max(abs(v) for v in values) or 1.0
        return min(values) - 0.12 * span, max(values) + 0.12 * span

    fig = Figure(figsize=(7.2, 0.9 + 1.05 * len(rows)), layout="constrained")
    axes = fig.subplots(len(rows), 1, squeeze=False)[:, 0]
    for ax, r in zip(axes, rows):
        d = np.asarray(r["per_seed"])                                           # (n,)
        jitter = np.linspace(-0.18, 0.18, d.size) if d.size > 1 else np.zeros(1)
        ax.plot(d, 0.25 + jitter * 0.5, "o", ms=4, color="0.45", alpha=0.8, label="seeds")
        m, lo, hi = r["mean_difference"], r["ci95_low"], r["ci95_high"]
        excludes = lo > 0 or hi < 0
        ax.errorbar([m], [-0.2], xerr=[[m - lo], [hi - m]], fmt="D", ms=6, capsize=4, color="C0",
                    mfc="C0" if excludes else "white", mew=1.4, label="mean, 95% t CI")
        ax.axvline(0.0, color="k", lw=0.8)
        ax.set_xlim(*limits(rows if share_axis else [r]))
        ax.set_ylim(-0.6, 0.6)
        ax.set_yticks([])
        ax.ticklabel_format(axis="x", style="sci", scilimits=(-2, 3))
        ax.tick_params(axis="x", labelsize=8)
        ax.grid(axis="x", lw=0.4, alpha=0.5)
        ax.set_title(f"{r['label']} (n = {r['n']})", fontsize=9, loc="left")
    axes[-1].set_xlabel(xlabel, fontsize=9)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=2, fontsize=7, frameon=False)
    fig.suptitle(title, fontsize=10)
    return fig


def curves_across_seeds(curves: Mapping[int, Sequence[float]], *, xlabel: str, ylabel: str, title: str,
                        log: bool = False) -> Figure:
    """Each seed's curve, overlaid, with the mean and a +-1 std band."""
    fig, ax = _figure(6.4, 3.6)
    for seed, values in sorted(curves.items()):
        ax.plot(np.arange(1, len(values) + 1), values, lw=0.8, alpha=0.6, label=f"seed {seed}")
    stacked = np.asarray([list(v) for v in curves.values()], dtype=float)
    if stacked.ndim == 2 and stacked.shape[0] > 1:
        mean, std = stacked.mean(0), stacked.std(0, ddof=1)
        steps = np.arange(1, stacked.shape[1] + 1)
        ax.plot(steps, mean, "k", lw=1.5, label="mean")
        ax.fill_between(steps, mean - std, mean + std, color="k", alpha=0.12, label="±1 std")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title, yscale="log" if log else "linear")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
