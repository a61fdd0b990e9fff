"""Property tests (hypothesis): parameter validation and the summary statistics."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litrepro.params import ParameterError, validate
from litrepro.rlbp.config import RLBPConfig
from litrepro.summary import mean_std

FIELDS = {f.name: f for f in dataclasses.fields(RLBPConfig)}


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6))
def test_float_knob_accepts_exactly_its_range(value):
    meta = FIELDS["heldout_fraction"].metadata                     # (0, 0.9]
    inside = meta["lo"] < value <= meta["hi"]
    if inside:
        assert validate(RLBPConfig, {"heldout_fraction": value}, "h").heldout_fraction == value
    else:
        with pytest.raises(ParameterError, match="'heldout_fraction'"):
            validate(RLBPConfig, {"heldout_fraction": value}, "h")


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=-50, max_value=50))
def test_int_knob_accepts_exactly_its_range(value):
    if 1 <= value <= 9:
        assert validate(RLBPConfig, {"top_k": value}, "h").top_k == value
    else:
        with pytest.raises(ParameterError, match="'top_k' = .* out of range"):
            validate(RLBPConfig, {"top_k": value}, "h")


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(FIELDS)), st.one_of(st.text(max_size=5), st.lists(st.integers(), max_size=2),
                                                   st.none(), st.dictionaries(st.text(max_size=2), st.integers())))
def test_wrong_types_are_refused_naming_the_key(key, value):
    tp = dataclasses.fields(RLBPConfig)[[f.name for f in dataclasses.fields(RLBPConfig)].index(key)].type
    if (tp == "str" and isinstance(value, str)) or (tp == "list[float]" and isinstance(value, list)):
        return  # may be valid; covered elsewhere
    with pytest.raises(ParameterError, match=f"'{key}"):
        validate(RLBPConfig, {key: value}, "h")


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=12).filter(lambda k: k not in FIELDS))
def test_unknown_keys_are_refused(key):
    with pytest.raises(ParameterError, match="unknown parameter"):
        validate(RLBPConfig, {key: 1}, "h")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e9, max_value=1e9),
                min_size=1, max_size=40))
def test_mean_std_against_numpy(values):
    out = mean_std(values)
    assert out["n"] == len(values)
    assert out["mean"] == pytest.approx(np.mean(values), rel=1e-9, abs=1e-6)
    if len(values) > 1:
        assert out["std"] == pytest.approx(np.std(values, ddof=1), rel=1e-7, abs=1e-6)
    else:
        assert out["std"] is None
