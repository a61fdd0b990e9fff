"""The waypoint run's reported aggregates recomputed from the per-step figures it made (issue 34, item 4).

A blind audit found three figures that no check recomputed: the comparison arms' mean gate (recorded from
the last step instead of the mean), the OPD stage's on-policy log-prob gap (the last step's instead of the
maximum), and the surrogate-gradient check run on the distilled student instead of the initial one (a stale
variable).  Here the run is executed with ``opd_step`` and ``surrogate_gradient_check`` wrapped, so every
per-step value and the student each saw are recorded as they are made; the reported figures are then
recomputed from those records, and fault tests put each audit bug in and assert the recomputation disagrees.
"""

from __future__ import annotations

import statistics

import pytest

from litrepro.waypoint import audit
from litrepro.waypoint import experiment as wp
from litrepro.waypoint.config import WaypointConfig

#: Three comparison steps, so the last step's gate is not the mean of the steps'.
SMALL = {"seed": 42, "comparison_steps": 3, "comparison_eval_prompts": 16, "device": "cpu"}


def recorded_run(corpus_path, monkeypatch) -> tuple[dict, dict]:
    """The run's results and what the wrappers saw: ``steps``, one {stage, gate_kind, mean_gate, gap} per OPD
    step in call order, and ``surrogate_student``, the sha256 of the student the surrogate check was given."""
    seen: dict = {"steps": [], "stage": None, "surrogate_student": None}
    real_distil, real_step, real_surrogate = wp.distil, wp.opd_step, wp.surrogate_gradient_check

    def distil(*a, **kw):
        seen["stage"] = kw["stage"]
        return real_distil(*a, **kw)

    def step(student, waypoints, prompts, optimizer, generator, **kw):
        stats, rollouts, gap = real_step(student, waypoints, prompts, optimizer, generator, **kw)
        seen["steps"].append({"stage": seen["stage"], "gate_kind": kw["gate_kind"],
                              "mean_gate": float(stats["mean_gate"]), "gap": float(gap)})
        return stats, rollouts, gap

    def surrogate(student, *a, **kw):
        seen["surrogate_student"] = audit.sha256_state(audit.tensors(student))
        return real_surrogate(student, *a, **kw)
    monkeypatch.setattr(wp, "distil", distil)
    monkeypatch.setattr(wp, "opd_step", step)
    monkeypatch.setattr(wp, "surrogate_gradient_check", surrogate)
    results = wp.run(WaypointConfig(corpus_path=str(corpus_path), **SMALL))
    return results, seen


def aggregates_agree(results: dict, seen: dict) -> dict[str, bool]:
    """Each reported aggregate against its recomputation from the recorded steps."""
    arms = results["comparison_arms"]
    comparison = [s for s in seen["steps"] if s["stage"] == "comparison"]
    out, k = {}, 0
    for arm, rec in arms.items():                     # the gated arms ran in this order, each for every step
        if not rec["gate_kind"]:
            continue
        mine = comparison[k:k + SMALL["comparison_steps"]]
        k += SMALL["comparison_steps"]
        out[f"{arm} mean gate"] = (len(mine) == SMALL["comparison_steps"]
                                   and all(s["gate_kind"] == rec["gate_kind"] for s in mine)
                                   and abs(rec["mean_gate"] - statistics.fmean(s["mean_gate"] for s in mine)) < 1e-12)
    opd = [s["gap"] for s in seen["steps"] if s["stage"] == "opd"]
    out["on-policy gap"] = bool(opd) and results["beyond_seed_metrics"]["on_policy_logprob_gap"] == max(opd)
    out["surrogate on the initial student"] = seen["surrogate_student"] == arms["waypoint"]["start_sha256"]
    return out


@pytest.fixture(scope="module")
def clean(corpus_path):
    mp = pytest.MonkeyPatch()
    try:
        yield recorded_run(corpus_path, mp)
    finally:
        mp.undo()


def test_the_reported_aggregates_are_the_recorded_steps(clean):
    results, seen = clean
    agree = aggregates_agree(results, seen)
    assert agree and all(agree.values()), agree
    gates = [s["mean_gate"] for s in seen["steps"] if s["stage"] == "comparison" and s["gate_kind"] == "straightness"]
    assert max(gates) - min(gates) > 1e-6                       # the last step's gate is not the mean here


def _reported_from_the_last_step(original):
    def collect(cfg, **kw):
        comparison = kw.get("comparison")
        if comparison:
            for arm in comparison:
                if isinstance(comparison[arm], dict) and comparison[arm].get("mean_gate"):
                    comparison[arm]["mean_gate"] = [comparison[arm]["mean_gate"][-1]]      # fault: the last step only
        return original(cfg, **kw)
    return collect


def _gap_of_the_last_step(original):
    def distil(*a, **kw):
        out = original(*a, **kw)
        if kw.get("stage") == "opd":
            out["on_policy_gap"] = _LAST_GAP[-1]                 # fault: the last step's gap, not the maximum
        return out
    return distil


_LAST_GAP: list[float] = []


@pytest.mark.parametrize("fault", ["arm mean gate from the last step", "on-policy gap of the last step",
                                   "surrogate check on the distilled student"])
def test_each_audit_bug_is_caught(corpus_path, monkeypatch, fault):
    _LAST_GAP.clear()
    if fault == "arm mean gate from the last step":
        monkeypatch.setattr(wp, "collect_results", _reported_from_the_last_step(wp.collect_results))
    elif fault == "on-policy gap of the last step":
        real_step = wp.opd_step

        def step(*a, **kw):
            # The true gap is rounding noise (about 1e-15, equal at every step on some CPUs), so that the last
            # step's and the maximum can coincide; a decreasing offset per step makes them differ on any machine.
            stats, rollouts, gap = real_step(*a, **kw)
            gap = float(gap) + 1e-9 * (10 - len(_LAST_GAP))
            _LAST_GAP.append(gap)
            return stats, rollouts, gap
        monkeypatch.setattr(wp, "opd_step", step)
        monkeypatch.setattr(wp, "distil", _gap_of_the_last_step(wp.distil))
    else:
        real_check = wp.surrogate_check

        def stale(cfg, student, *a, **kw):
            moved = wp.copy.deepcopy(student)
            with wp.torch.no_grad():
                next(moved.parameters()).add_(1e-3)            # fault: a student other than the initial one
            return real_check(cfg, moved, *a, **kw)
        monkeypatch.setattr(wp, "surrogate_check", stale)
    results, seen = recorded_run(corpus_path, monkeypatch)
    agree = aggregates_agree(results, seen)
    caught = {"arm mean gate from the last step": "waypoint mean gate",
              "on-policy gap of the last step": "on-policy gap",
              "surrogate check on the distilled student": "surrogate on the initial student"}[fault]
    assert agree[caught] is False, agree
    assert sum(not v for v in agree.values()) <= 2, agree          # the fault's own figure, not the whole run
