"""litrepro.prose: hand-computed cases, the review's examples included."""

import pytest

from litrepro import prose


def row(mean, low, high, n=20):
    return {"n": n, "mean_difference": mean, "ci95_low": low, "ci95_high": high}


def test_value_is_rounded_once_at_its_precision():
    assert prose.value(0.04746952431109317, 2) == "+0.047"       # the review: not +0.048
    assert prose.value(5.849986e-4, 2) == "+0.00058"              # not the double rounding 5.85e-4 -> 5.9e-4
    assert prose.value(-0.013238449988882661, 2) == "-0.013"
    assert prose.value(0.0, 2) == "0"
    assert prose.value(1.597, 4, sign=False) == "1.597"
    assert prose.value(50.0, 2) == "+50"


def test_interval_bounds_are_rounded_outward():
    # mean 0.04747 in [0.04652, 0.04842]: low rounds down, high rounds up
    r = row(0.04746952431109317, 0.04651995457956538, 0.048419094042620965)
    assert prose.interval(r) == "[+0.046, +0.049]"
    assert prose.estimate(r) == "+0.047 [+0.046, +0.049]"
    # a negative interval: -0.02204 goes down to -0.023, -0.004441 goes up to -0.0044
    r = row(-0.013238449988882661, -0.02203587611416928, -0.004441023863596041)
    assert prose.estimate(r) == "-0.013 [-0.023, -0.0044]"
    # a bound already on the grid stays
    assert prose.interval(row(0.5, 0.25, 0.75)) == "[+0.25, +0.75]"


def test_words_follow_the_interval():
    above, below, spans = row(0.047, 0.046, 0.049), row(-0.013, -0.023, -0.0044), row(0.0028, -0.0031, 0.0088)
    assert prose.direction(above) == "higher"
    assert prose.direction(below) == "lower"
    assert prose.direction(spans) == "no detectable difference"
    assert prose.compare(below, "learned", "fixed gain", measure="true value") == \
        "learned has lower true value than fixed gain: -0.013 [-0.023, -0.0044]"
    assert prose.compare(spans, "none", "fixed gain", measure="true value") == \
        "none against fixed gain, true value: no detectable difference (+0.0028 [-0.0031, +0.0088])"
    # an interval that touches 0 is not an effect
    assert prose.direction(row(0.001, 0.0, 0.002)) == "no detectable difference"


def test_review_interval_is_no_detectable_difference():
    # "knowing each campaign's kind adds nothing" was said of +0.00035 [-0.000026, +0.00073]: it spans 0
    r = row(0.00035, -0.000026, 0.00073)
    assert prose.direction(r) == "no detectable difference"
    assert prose.estimate(r) == "+0.00035 [-2.6e-05, +0.00073]"


def test_percent_and_percent_interval():
    assert prose.percent(-0.2788831398883212) == "-28 %"
    assert prose.percent_interval(-0.43824444779542515, -0.09639509449046217) == "[-44 %, -9.6 %]"
    assert prose.percent(0.37, sign=False) == "37 %"


def test_counts_and_tallies():
    assert prose.count(4, 4) == "4 of 4 conditions"
    with pytest.raises(ValueError):
        prose.count(5, 4)
    rows = [row(1, 0.5, 2), row(1, 0.5, 2), row(-1, -2, -0.5), row(0, -1, 1)]
    assert prose.tally(rows) == {">0": 2, "<0": 1, "no detectable difference": 1, "n": 4}
    assert prose.tally_sentence(rows) == "higher in 2 of 4 conditions, lower in 1, no detectable difference in 1"
    assert prose.tally_sentence(rows[:2], noun="cells") == "higher in 2 of 2 cells"


def test_mean_sd_and_z():
    assert prose.mean_sd(4.8621, 0.0163) == "4.862 ± 0.016"
    assert prose.mean_sd(0.80412, 0.0321) == "0.804 ± 0.032"
    assert prose.mean_sd(6.7e-16, 3.8e-16, floor=prose.ROUNDING) == "< 1e-12"
    assert prose.mean_sd(6.7e-16, 3.8e-16) == "6.7e-16 ± 3.8e-16"             # no floor: the digits
    assert prose.mean_sd(0.0, 0.0, floor=prose.ROUNDING) == "0 ± 0"             # exactly 0 on every seed
    assert prose.mean_sd(2e-12, 0.0, floor=prose.ROUNDING) == "2e-12 ± 0"       # above the floor: the digits
    assert prose.z(1.6123) == "+1.6"
    assert prose.z(-0.4567) == "-0.5"


def test_a_zero_width_interval_earns_no_direction():
    """One seed, or the same difference on every seed: paired_ci collapses the interval to the mean, and the
    words never say higher or lower for it (issue 32)."""
    from litrepro import stats

    one_seed = stats.paired_ci([1.2], [1.0])
    same = stats.paired_ci([1.2, 1.3, 1.4], [1.0, 1.1, 1.2])
    for row in (one_seed, same):
        assert row["ci95_low"] == row["ci95_high"] and row["mean_difference"] > 0
        assert prose.direction(row) == prose.NO_DIFFERENCE
        assert prose.tally([row])[prose.NO_DIFFERENCE] == 1
        assert "higher" not in prose.compare(row, "a", "b", measure="reward")
    wide = stats.paired_ci([1.2, 1.35, 1.5], [1.0, 1.1, 1.2])
    assert prose.direction(wide) == "higher"
