"""The d3rlpy cross-check's independent recomputation (``litrepro.recompute_d3rlpy``): faults are named."""

from __future__ import annotations

import copy

import pytest

from litrepro import recompute_d3rlpy as rd
from study_json import load, names


@pytest.fixture()
def data() -> dict:
    return copy.deepcopy(load(rd.D3RLPY))


def test_the_committed_file_recomputes(data):
    assert rd.check_d3rlpy(data) == []


def test_a_row_against_the_held_out_value_is_caught(data):
    """The interval of ``true_value_heldout - best_constant`` shown as ``true_value``'s."""
    row = data["summary"]["rows"][4]
    rows = sorted(data["per_seed"], key=lambda r: r["seed"])
    d = [r["algos"][row["algo"]]["checkpoints"][str(row["steps"])]["true_value_heldout"] - r["best_constant"]
         for r in rows]
    row["minus_best_constant"]["mean_difference"] = sum(d) / len(d)
    assert names(rd.check_d3rlpy(data), "summary.rows[4]")


def test_a_wrong_best_constant_or_fixed_gain_is_caught(data):
    r = data["per_seed"][0]
    r["fixed_gain"] = r["constant"][3]
    r["best_constant_action"] = 7
    problems = rd.check_d3rlpy(data)
    assert names(problems, ".fixed_gain") and names(problems, ".best_constant_action")


def test_shares_verdict_and_missing_row(data):
    data["summary"]["rows"][0]["mean_action_shares"][8] += 0.01
    data["summary"]["headroom"]["verdict"] = "no detectable difference"
    del data["summary"]["rows"][-1]
    problems = rd.check_d3rlpy(data)
    assert names(problems, "mean_action_shares[8]") and names(problems, "summary.headroom.verdict")
    assert names(problems, "learner x checkpoint): missing")
