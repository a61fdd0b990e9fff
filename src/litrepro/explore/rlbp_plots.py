"""The ``pinterest_rlbp`` explorer's views, each drawn into given axes.

Kept out of :mod:`litrepro.rlbp.plots` so that the method's rendered results, whose
provenance hashes that module, do not depend on the explorer.
"""

from __future__ import annotations

from typing import Any, Mapping


def campaign_day_axes(axes, day: Mapping[str, Any]) -> None:
    """One campaign's day under two policies: spend against plan, CPC against target, phi, the gains chosen.

    ``day``: ``campaign``, ``kind``, ``plan`` (T,), ``target_cpc``, and under ``policies``, per policy name
    ``spent_fraction`` (T,), ``cpc`` (K,), ``phi`` (T,), ``kp`` (K,), ``ki`` (K,).
    """
    import numpy as np

    ax_spend, ax_cpc, ax_phi, ax_gain = axes
    hours = np.arange(1, len(day["plan"]) + 1)
    ax_spend.plot(hours, day["plan"], "k--", lw=1, label="plan")
    for i, name in enumerate(day["policies"]):
        p = day["policies"][name]
        c = f"C{i}"
        ax_spend.plot(hours, p["spent_fraction"], color=c, label=name)
        segs = np.arange(1, len(p["cpc"]) + 1)
        ax_cpc.plot(segs, np.asarray(p["cpc"]) / day["target_cpc"], "o-", color=c, ms=4, label=name)
        ax_phi.step(hours, p["phi"], where="post", color=c, label=name)
        ax_gain.step(segs, p["kp"], where="mid", color=c, label=f"{name}: Kp")
        ax_gain.step(segs, p["ki"], where="mid", color=c, ls=":", label=f"{name}: Ki")
    ax_cpc.axhline(1.0, color="k", lw=0.8, ls="--")
    ax_spend.set(xlabel="hour", ylabel="spent / budget", title=f"campaign {day['campaign']} ({day['kind']}): pacing")
    ax_cpc.set(xlabel="segment", ylabel="CPC / target", title="CPC against target")
    ax_phi.set(xlabel="hour", ylabel="phi (log bid multiplier)", title="PID output")
    ax_gain.set(xlabel="segment", ylabel="gain", title="gains chosen per segment")
    for ax in axes:
        ax.legend(fontsize=7, loc="best")


def argmax_agreement_axes(ax, value_argmax, fused_argmax, lam: float) -> None:
    """9 x 9 counts of (value-only argmax, fused argmax) over held-out states; off-diagonal: fusion moved it."""
    import numpy as np

    v, f = np.asarray(value_argmax), np.asarray(fused_argmax)
    counts = np.zeros((9, 9))
    np.add.at(counts, (v, f), 1)
    ax.imshow(counts, cmap="Greys", origin="lower")
    changed = float((v != f).mean()) if v.size else 0.0
    ax.set(xlabel="fused argmax (Qᵛ − λQᶜ)", ylabel="value-only argmax (Qᵛ)",
           title=f"λ={lam:g}: fusion moves the argmax on {100 * changed:.0f} %")
    ax.set_xticks(range(9))
    ax.set_yticks(range(9))
    ax.tick_params(labelsize=7)


def frontier_axes(ax, rows, points, current: float) -> None:
    """Value against CPC overshoot per lambda (``rows``), the reference ``points``, ``current`` ringed."""
    xs = [r["cpc_overshoot"] for r in rows]
    ys = [r["value"] for r in rows]
    ax.plot(xs, ys, "o-", color="C0", ms=4, label="learned, by λ")
    for r in rows:
        if r["lambda"] == current:
            ax.plot([r["cpc_overshoot"]], [r["value"]], "o", ms=12, mfc="none", mec="C3", mew=2, label=f"λ={current:g}")
        ax.annotate(f"{r['lambda']:g}", (r["cpc_overshoot"], r["value"]), textcoords="offset points", xytext=(4, 3),
                    fontsize=7)
    for (name, (x, y)), marker in zip(points.items(), ("s", "^", "D")):
        ax.plot([x], [y], marker, ms=7, label=name)
    ax.set(xlabel="CPC overshoot", ylabel="value reward", title="where this λ sits on the frontier")
    ax.margins(0.15)
    ax.legend(fontsize=7, loc="best")
