"""Calibration at both scales (litrepro.calibration): hand-computed cases, checked against scipy."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from litrepro import calibration, summary


def test_welch_matches_scipy_on_raw_samples():
    """t, df and p from (mean, SD, n) equal scipy's ttest_ind(equal_var=False) on the raw values."""
    run, rec = [1.0, 2.0, 4.0], [0.5, 0.7, 0.6, 0.9]
    ref = stats.ttest_ind(run, rec, equal_var=False)
    got = calibration.welch(calibration._mean_sd(run), calibration._mean_sd(rec))
    assert got["t"] == pytest.approx(float(ref.statistic), rel=1e-12)
    assert got["p"] == pytest.approx(float(ref.pvalue), rel=1e-12)
    assert got["df"] == pytest.approx(float(ref.df), rel=1e-12)


def test_welch_by_hand():
    """u = (1, 3), r = (0, 0, 3): means 2 and 1, variances 2 and 3; t = 1 / sqrt(2/2 + 3/3) = 1/sqrt 2,
    df = (1 + 1)^2 / (1/1 + 1/2) = 8/3."""
    got = calibration.welch(calibration._mean_sd([1.0, 3.0]), calibration._mean_sd([0.0, 0.0, 3.0]))
    assert got["t"] == pytest.approx(1 / math.sqrt(2))
    assert got["df"] == pytest.approx(8 / 3)
    assert got["p"] == pytest.approx(2 * stats.t.sf(1 / math.sqrt(2), 8 / 3))


def test_welch_refuses_what_it_cannot_test():
    assert calibration.welch((1.0, None, 1), (0.0, 1.0, 3))["p"] is None
    same = calibration.welch((70.0, 0.0, 3), (70.0, 0.0, 3))
    assert same["p"] is None and "equal" in same["note"]
    assert "differ" in calibration.welch((1.0, 0.0, 3), (0.0, 0.0, 3))["note"]
    one_sided = calibration.welch((1.0, 0.0, 3), (0.0, 1.0, 3))       # no spread on one side: still a test
    assert one_sided["t"] == pytest.approx(math.sqrt(3)) and one_sided["df"] == pytest.approx(2.0)


def test_row_at_both_scales_by_hand():
    """Two recorded seeds of two steps, (0, 2) and (4, 6): pooled mean 3, pooled SD sqrt(20/3); per-seed means
    1 and 5, their SD 2*sqrt 2.  The run, (3, 5) and (5, 7): mean 5, so z = 2/sqrt(20/3) and z_per_seed = 2/(2 sqrt 2)."""
    r = calibration.row("f", [[3.0, 5.0], [5.0, 7.0]], [[0.0, 2.0], [4.0, 6.0]])
    assert r["recorded_mean"] == 3.0 and r["recorded_std"] == pytest.approx(math.sqrt(20 / 3))
    assert r["recorded_seed_means"] == [1.0, 5.0] and r["recorded_seed_sd"] == pytest.approx(2 * math.sqrt(2))
    assert r["z"] == pytest.approx(2 / math.sqrt(20 / 3))
    assert r["z_per_seed"] == pytest.approx(1 / math.sqrt(2))
    ref = stats.ttest_ind([4.0, 6.0], [1.0, 5.0], equal_var=False)       # Welch over the per-seed means
    assert r["welch_t"] == pytest.approx(float(ref.statistic)) and r["welch_p"] == pytest.approx(float(ref.pvalue))


def test_per_seed_metric_uses_one_scale_and_zero_is_equal_up_to_rounding():
    agg = {"mean": 1.0, "std": 0.5, "n": 3}
    r = calibration.row("metrics.m", [[2.0], [2.5], [1.5]], recorded_stats=agg)
    assert r["z"] == r["z_per_seed"] == pytest.approx(2.0)
    ref = stats.ttest_ind_from_stats(2.0, 0.5, 3, 1.0, 0.5, 3, equal_var=False)
    assert r["welch_p"] == pytest.approx(float(ref.pvalue))
    zero = calibration.row("metrics.zero", [[0.0], [2e-16], [0.0]], recorded_stats={"mean": 0, "std": 0, "n": 3})
    assert zero["zero_at_rounding"] and zero["z"] == 0.0 and zero["welch_p"] is None
    off = calibration.row("metrics.zero", [[0.0], [1e-6], [0.0]], recorded_stats={"mean": 0, "std": 0, "n": 3})
    assert not off["zero_at_rounding"] and off["z"] is None           # recorded SD 0, means differ: no z


def test_verdicts_name_the_figures_off_at_each_scale():
    rows = [calibration.row("a", [[3.0, 5.0], [5.0, 7.0]], [[0.0, 2.0], [4.0, 6.0]]),        # within at both
            calibration.row("b", [[10.0, 10.2], [10.1, 10.3]], [[0.0, 20.0], [9.0, 11.0]]),   # seed means 10, 10
            calibration.row("c", [[100.0]], recorded_stats={"mean": 0.0, "std": 1.0, "n": 3})]  # off at both
    assert abs(rows[1]["z"]) < calibration.THRESHOLD and rows[1]["z_per_seed"] is None      # seed-mean SD 0
    v = calibration.verdicts(rows)
    assert v["off_at_recorded_scale"] == ["c"]
    assert v["off_at_per_seed_scale"] == ["b", "c"]
    assert "2 of 3 recorded figures are within it, and c (z = +100.0) is not." in v["sentence"]
    assert "b (no z: recorded SD 0)" in v["sentence"]
    assert v["definition"] == calibration.DEFINITION


def test_verdicts_see_a_figure_off_only_at_the_per_seed_scale():
    """Wide within-seed spread, narrow seed-to-seed spread: within 3 recorded SDs, beyond 3 SDs of the seed means."""
    rec = [[0.0, 2.0], [0.1, 2.1], [0.2, 1.9]]                    # per-seed means 1.0, 1.1, 1.05: SD 0.05
    run = [[1.4, 1.4], [1.5, 1.5], [1.45, 1.45]]                  # mean 1.45
    r = calibration.row("g", run, rec)
    assert abs(r["z"]) < 3 and r["z_per_seed"] == pytest.approx((1.45 - 1.05) / 0.05)
    v = calibration.verdicts([r])
    assert v["off_at_recorded_scale"] == [] and v["off_at_per_seed_scale"] == ["g"]
    assert "g (z = +8.0)" in v["sentence"] and "1 of 1 recorded figures are within it" in v["sentence"]


def test_rendered_rows_recompute_from_the_seed_json():
    """On the committed seed results, the mean gate's z against the SD of the recorded per-seed means, recomputed
    with numpy from the seed JSON and the shipped recorded figures, is the table's (issue 22 quotes +4.0)."""
    import numpy as np

    from litrepro import recorded

    results = summary.load_seed_results("rendered", "waypoint_opd")
    rec = recorded.load("waypoint_opd")
    if rec is None or not results:
        pytest.skip("no recorded figures or no rendered seeds")
    table, v = summary.calibration_table("waypoint_opd", results)
    for field in ("mean_gate", "gradient_norm"):
        run = np.array([np.mean([h[field] for h in r["history"]]) for r in results])
        seeds = np.array([np.mean([h[field] for h in r["history"]]) for r in rec["per_seed"]])
        z = (run.mean() - seeds.mean()) / seeds.std(ddof=1)
        assert table.loc[f"opd_history.{field}", "z (seed-mean SD)"] == f"{z:+.2f}"
        p = stats.ttest_ind(run, seeds, equal_var=False).pvalue
        assert table.loc[f"opd_history.{field}", "Welch p (seeds)"] == f"{p:.2g}"
        assert (f"opd_history.{field}" in v["off_at_per_seed_scale"]) == (abs(z) > 3)
    _, rv = summary.calibration_table("pinterest_rlbp", summary.load_seed_results("rendered", "pinterest_rlbp"))
    assert "logged once per seed" in rv["sentence"]
