"""The transfer study recomputed independently (``litrepro.recompute_transfer``): each fault below is one its
summary could make, and a named field fails."""

from __future__ import annotations

import copy
import math

import pytest

from litrepro import recompute_transfer as rt
from study_json import load, names


@pytest.fixture(scope="module")
def clean() -> dict:
    return load(rt.TRANSFER)


@pytest.fixture()
def data(clean) -> dict:
    return copy.deepcopy(clean)


def _row(data, comparison, metric):
    return next(r for r in data["differences"] if r["comparison"] == comparison and r["metric"] == metric)


def test_the_committed_file_recomputes(data):
    assert rt.check_transfer(data) == []


def test_a_first_reach_without_interpolation_is_caught(data):
    """``u25`` read as the first curve point at or above 25% instead of interpolating."""
    r, arm = data["per_seed"][0], "waypoint"
    a = r["arms"][arm]
    a["u25"] = float(next(u for u, t in zip(a["updates"], a["tf"]) if t >= 0.25))
    assert names(rt.check_transfer(data), f"per_seed[{r['seed']}].arms.{arm}.u25")


def test_an_area_over_the_points_instead_of_the_updates_is_caught(data):
    r = data["per_seed"][3]
    a = r["arms"]["final_only"]
    a["auc"] = sum((x + y) / 2 for x, y in zip(a["tf"], a["tf"][1:])) / (len(a["tf"]) - 1) * 1.0001
    assert names(rt.check_transfer(data), f"per_seed[{r['seed']}].arms.final_only.auc")


def test_the_arm_sd_in_place_of_the_comparator_sd_is_caught(data):
    row = _row(data, "waypoint - final_only", "tf_final")
    xs = [r["arms"]["waypoint"]["tf_final"] for r in data["per_seed"]]
    m = sum(xs) / len(xs)
    row["in_comparator_sds"] = row["mean_difference"] / math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    assert names(rt.check_transfer(data), "differences[waypoint - final_only on tf_final].in_comparator_sds")


def test_a_holm_family_without_the_gate_controls_is_caught(data):
    """Holm's m counted over the rows against final-only only: every p_holm is too small."""
    row = _row(data, "waypoint - final_only", "tf_final")
    gate_rows = sum(1 for r in data["differences"] if not r["comparison"].endswith("final_only") and "p_raw" in r)
    m = sum(1 for r in data["differences"] if "p_raw" in r)
    row["p_holm"] = row["p_holm"] * (m - gate_rows) / m
    assert names(rt.check_transfer(data), "differences[waypoint - final_only on tf_final].p_holm")


def test_a_multiplier_linear_in_m_is_caught(data):
    f = data["frontier"][0]
    f["equivalent_lr_multiplier"]["mean"] *= 1.001
    assert names(rt.check_transfer(data), f"frontier[{f['arm']}].equivalent_lr_multiplier.mean")


@pytest.mark.parametrize("field, fault", [
    ("holm_high", lambda f: f["nll_gap_to_frontier"]["ci95_high"]),      # the unadjusted bound in the Holm field
    ("p_holm", lambda f: f["p_raw"]),                                     # no adjustment at all
    ("holm_reads", lambda f: "lower"),                                    # the words of the unadjusted interval
])
def test_a_frontier_row_without_its_holm_adjustment_is_caught(data, field, fault):
    f = next(f for f in data["frontier"] if f["arm"] == "binned_shuffle")   # unadjusted below 0, Holm spans 0
    f[field] = fault(f)
    assert names(rt.check_transfer(data), f"frontier[binned_shuffle].{field}")


def test_a_refused_arm_given_an_interval_is_caught(data):
    arm = next(iter(data["frontier_refused"]))
    data["frontier"].append({**copy.deepcopy(data["frontier"][0]), "arm": arm})
    del data["frontier_refused"][arm]
    problems = rt.check_transfer(data)
    assert names(problems, "frontier (arms)") and names(problems, "frontier_refused")


def test_the_primary_endpoint_and_the_mean_curve_are_recomputed(data):
    data["primary_endpoint"]["met"] = not data["primary_endpoint"]["met"]
    data["per_arm"]["waypoint"]["mean_curve"]["tf"][-1] = data["per_seed"][-1]["arms"]["waypoint"]["tf"][-1]
    problems = rt.check_transfer(data)
    assert names(problems, "primary_endpoint.met") and names(problems, "per_arm.waypoint.mean_curve.tf[12]")


def test_a_censored_metric_given_an_interval_and_a_wrong_lr_are_caught(data):
    row = _row(data, "final_only_lr0.1 - final_only", "u25")
    row.update({"n": 16, "mean_difference": 1.0, "ci95_low": 0.5, "ci95_high": 1.5})
    row.pop("censored", None)
    data["per_seed"][0]["arms"]["final_only_lr2"]["lr"] = data["config"]["lr"]
    problems = rt.check_transfer(data)
    assert names(problems, "differences[final_only_lr0.1 - final_only on u25].censored")
    assert names(problems, "arms.final_only_lr2.lr")
