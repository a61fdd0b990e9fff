"""The one standard-error and interval function against scipy.stats, on hand-made and random data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from litrepro.stats import mean_interval, paired_ci, standard_error


def test_standard_error_is_scipy_sem_with_n_minus_1():
    x = [1.0, 2.0, 4.0, 7.0]
    assert standard_error(x) == pytest.approx(scipy_stats.sem(x), rel=1e-15)
    # by hand: mean 3.5, sum of squares 21, s^2 = 21 / 3 = 7, se = sqrt(7 / 4)
    assert standard_error(x) == pytest.approx(math.sqrt(7 / 4), rel=1e-15)
    assert standard_error([3.0]) == 0.0 and standard_error([]) == 0.0


@pytest.mark.parametrize("n", [2, 3, 5, 20])
def test_mean_interval_is_the_student_t_interval_with_n_minus_1_df(n):
    x = np.random.default_rng(n).normal(0.3, 1.0, n)
    out = mean_interval(x)
    half = scipy_stats.t.ppf(0.975, n - 1) * scipy_stats.sem(x)
    assert out["n"] == n and out["mean"] == pytest.approx(x.mean(), rel=1e-14)
    assert out["se"] == pytest.approx(scipy_stats.sem(x), rel=1e-14)
    assert (out["ci95_low"], out["ci95_high"]) == pytest.approx((x.mean() - half, x.mean() + half), rel=1e-12)
    low, high = scipy_stats.t.interval(0.95, n - 1, loc=x.mean(), scale=scipy_stats.sem(x))
    assert (out["ci95_low"], out["ci95_high"]) == pytest.approx((low, high), rel=1e-12)


def test_a_narrower_interval_would_be_noticed():
    """The n - 1 degrees of freedom matter at 5 seeds: a normal quantile or an n divisor is narrower."""
    x = [0.1, 0.4, -0.2, 0.3, 0.05]
    out = mean_interval(x)
    z_half = scipy_stats.norm.ppf(0.975) * scipy_stats.sem(x)
    assert out["ci95_high"] - out["mean"] > 1.3 * z_half
    assert standard_error(x) > np.std(x) / math.sqrt(len(x))


def test_paired_ci_is_mean_interval_of_the_differences():
    a, b = [1.0, 2.0, 3.5, 2.2], [0.5, 2.5, 1.0, 2.0]
    row, d = paired_ci(a, b), mean_interval(np.subtract(a, b))
    assert row == {"n": 4, "mean_difference": d["mean"], "ci95_low": d["ci95_low"], "ci95_high": d["ci95_high"]}
    assert paired_ci([1.0, 2.0], [0.0, 1.0])["ci95_low"] == 1.0          # no spread: collapsed to the mean
