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
    """Per policy: IPS estimate and simulated truth, mean with error bars.

    ``rows[policy] = {"ips": [...], "true_value": [...]}``, one entry per seed
    (spread = std across seeds) or one entry with ``*_se`` error bars.
    """
    fig, ax = _figure(6.4, 3.6)
    names = list(rows)
    x = np.arange(len(names))
    for offset, key, label in ((-0.18, "ips", "ordinary IPS (held-out log)"), (0.18, "true_value", "simulated truth")):
        values = [np.asarray(rows[n][key], dtype=float) for n in names]
        means = [v.mean() for v in values]
        errs = [rows[n].get(key + "_err", [v.std(ddof=1) if v.size > 1 else 0.0])[0] for n, v in zip(names, values)]
        ax.bar(x + offset, means, width=0.36, yerr=errs, capsize=4, label=label)
    ax.set_xticks(x, names)
    ax.set(ylabel="mean reward per decision", title=title)
    low = min(min(np.asarray(rows[n][k], dtype=float).min() for n in names) for k in ("ips", "true_value"))
    ax.set_ylim(bottom=min(0.0, low))
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)  # below the axes
    fig.tight_layout()
    return fig


def arm_comparison(values: Mapping[str, Sequence[float]], *, ylabel: str, title: str) -> Figure:
    """Per arm: each seed's value as a dot, and the mean with a +-1 std bar."""
    fig, ax = _figure(6.4, 3.6)
    for i, (arm, ys) in enumerate(values.items()):
        ys = np.asarray(ys, dtype=float)
        ax.errorbar(i, ys.mean(), yerr=ys.std(ddof=1) if ys.size > 1 else 0.0, fmt="s", color="k", capsize=6)
        ax.plot(np.full(ys.size, i) + np.linspace(-0.08, 0.08, ys.size), ys, "o", alpha=0.6)
    ax.set_xticks(range(len(values)), list(values))
    ax.set(ylabel=ylabel, title=title)
    fig.tight_layout()
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
