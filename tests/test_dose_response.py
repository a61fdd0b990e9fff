"""The waypoint gate's dose-response (``litrepro.waypoint.dose_response``, ``make dose-response``).

The committed study is checked for freshness by source hashes (never re-run here), for
completeness, and for intervals that recompute; the study's refusals and its finding
sentences are tested on tiny real runs and on hand-made rows.
"""

from __future__ import annotations

import json

import pytest
import torch

from litrepro import figcheck
from litrepro.waypoint import dose_response as dr
from litrepro.waypoint import effect_study
from litrepro.waypoint import experiment as wp
from litrepro.waypoint.config import WaypointConfig


@pytest.fixture(scope="module")
def data():
    if not dr.PATH.exists():
        pytest.fail(f"{dr.PATH} is missing: run `make dose-response`")
    return json.loads(dr.PATH.read_text())


def test_dose_response_is_complete_and_its_intervals_recompute(data):
    assert data["n_seeds"] >= 16 and len(data["level_means"]) >= 4 and dr.PLOT.exists()
    assert not [r for r in data["per_seed"] if dr.failed_checks(r)]             # the study inherits the checks
    dr.check_differences(data["per_seed"], data["differences"])                  # every interval, by a plain loop
    assert dr.summarise(data["per_seed"]) == data["differences"]
    wanted = {(f"{a} - {b}", m) for a, b in dr.GATE_COMPARISONS for m in dr.METRICS}
    for level in data["level_means"]:
        got = {(r["comparison"], r["metric"]) for r in data["differences"] if r["level"] == level["level"]}
        assert wanted <= got and level["n"] == data["n_seeds"]
    assert 0 < data["wall_seconds"] < 20 * 60


def test_levels_span_the_calibrated_teacher_to_beyond_the_strong_one(data):
    """The first level is the seed's RL (the calibrated teacher); the last moves P(even) further than the
    effect study's strong teacher (its waypoint0 'none' arm is the pre-RL teacher on the same prompts)."""
    moves = [m["delta_p_even"] for m in data["level_means"]]
    assert moves == sorted(moves) and data["level_means"][0]["teacher_rl_lr"] == WaypointConfig().teacher_rl_lr
    strong = [r for r in effect_study.load()["condition_means"]
              if (r["teacher"], r["student_start"], r["teacher_rl_rollouts"]) == ("strong", "waypoint0", 64)][0]
    strong_move = strong["teacher_final_expected_parity_rate"] - strong["none.expected_parity_rate"]
    calibrated = [r for r in effect_study.load()["condition_means"]
                  if (r["teacher"], r["student_start"], r["teacher_rl_rollouts"]) == ("calibrated", "waypoint0", 64)][0]
    assert moves[0] == pytest.approx(calibrated["teacher_final_expected_parity_rate"]
                                     - calibrated["none.expected_parity_rate"], rel=1e-9)
    assert moves[-1] > strong_move


def test_dose_response_figure_fits_its_canvas(data):
    assert figcheck.outside_canvas(dr.plot(data)) == []


def test_findings_come_from_the_intervals(data):
    lines = dr.findings(data)
    assert len(lines) == 2 + 2 * len(dr.GATE_COMPARISONS) + 1
    assert "not adjusted for the number of intervals" in lines[1]   # the tallies count unadjusted intervals
    assert all(isinstance(x, str) and x for x in lines)


def _hand_data(low: float, high: float, sd: float) -> dict:
    diffs = [{"level": lv, "teacher_rl_lr": lr, "comparison": f"{a} - {b}", "metric": m, "n": 16,
              "mean_difference": (low + high) / 2, "ci95_low": low, "ci95_high": high, "seed_sd": sd}
             for lv, lr in list(dr.LEVELS.items())[:4] for a, b in dr.COMPARISONS for m in dr.METRICS]
    means = [{"level": lv, "teacher_rl_lr": lr, "delta_p_even": 0.01 * (i + 1)}
             for i, (lv, lr) in enumerate(list(dr.LEVELS.items())[:4])]
    return {"n_seeds": 16, "differences": diffs, "level_means": means}


def test_findings_words_follow_the_interval():
    spanning = dr.findings(_hand_data(-1e-4, 2e-4, 1e-3))
    assert all("no detectable difference at any of the 4 levels" in x for x in spanning[2:-1])
    within = dr.findings(_hand_data(1e-4, 2e-4, 1e-3))
    assert "detectable at 4 of 4 levels, and at each of them the whole interval lies within one between-seed SD" in within[2]
    assert "higher by [+0.00010, +0.00020]" in within[2] and "higher (worse)" in within[3]
    straddle = dr.findings(_hand_data(5e-4, 1.5e-3, 1e-3))             # crosses +SD: neither within nor beyond
    assert "not shown beyond one between-seed SD" in straddle[2] and "within one" not in straddle[2]
    beyond = dr.findings(_hand_data(-3e-3, -2e-3, 1e-3))
    assert "beyond the seed spread at 4 of 4 levels" in beyond[2] and "lower by [-0.0030, -0.0020]" in beyond[2]
    assert "lower (better)" in beyond[3]


def _rows(seeds, level_of=lambda s: "rl_lr_1"):
    arms = ("waypoint", "final_only", "shuffled", "matched_compute", "none")
    return [{"seed": s, "level": level_of(s), "teacher_rl_lr": 1.0, "checks": {"ok": True}, "arm_checks": {"x": {"ok": True}},
             **{f"{arm}.{m}": float((s * 7919 + i * 104729 + j) % 97) for i, arm in enumerate(arms)
                for j, m in enumerate(dr.METRICS)}} for s in seeds]


def test_summary_refuses_a_failed_check_unshared_seeds_and_unpaired_intervals(monkeypatch):
    rows = _rows(range(42, 48))
    assert dr.summarise(rows)
    rows[2]["arm_checks"]["x"]["ok"] = False
    with pytest.raises(dr.StudyRefused, match=r"seed 44 \(rl_lr_1\): x.ok"):
        dr.summarise(rows)
    mixed = _rows(range(42, 48)) + [dict(r, level="rl_lr_3") for r in _rows(range(43, 49))]
    with pytest.raises(dr.StudyRefused, match="do not share their seeds"):
        dr.summarise(mixed)
    from litrepro import stats
    real = stats.paired_ci
    monkeypatch.setattr(stats, "paired_ci", lambda a, b, **k: real(sorted(a), sorted(b), **k))
    with pytest.raises(dr.StudyRefused, match="plain-loop"):
        dr.summarise(_rows(range(42, 48)))


def test_a_tiny_run_passes_its_checks_and_a_faulty_arm_is_refused(corpus_path, monkeypatch):
    corpus = wp.load_corpus(WaypointConfig(corpus_path=str(corpus_path)))
    levels = {"rl_lr_0.2": 0.2, "rl_lr_3": 3.0}

    def rows(seed):
        return dr.run_seed(seed, steps=1, eval_prompts=16, corpus=corpus, device=torch.device("cpu"), levels=levels)
    clean = rows(42) + rows(43)
    assert not [r for r in clean if dr.failed_checks(r)]
    assert [r["delta_p_even"] < s["delta_p_even"] for r, s in zip(clean[::2], clean[1::2])] == [True, True]
    assert dr.summarise(clean)
    monkeypatch.setitem(wp.GATE_OF_ARM, "final_only", "straightness")            # final-only silently gated
    faulty = rows(44)
    with pytest.raises(dr.StudyRefused, match="seed 44 .*final_only.gate_kind_matches_arm"):
        dr.summarise(clean + faulty)
