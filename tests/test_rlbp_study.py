"""The committed 20-seed pinterest_rlbp study is current, complete and internally consistent.

``make rlbp-study`` writes it; these tests never re-run it.  They check that it was
made by the current sources and parameters, that every interval recomputes from the
stored per-seed figures, and what the issue asks of the frontier.
"""

from __future__ import annotations

import json

import pytest

from litrepro import methods
from litrepro.provenance import source_hashes
from litrepro.rlbp import experiment as ex
from litrepro import rlbp_study as study
from litrepro.worker import job_parameters


@pytest.fixture(scope="module")
def comparison():
    assert study.COMPARISON.is_file(), "run `make rlbp-study` and commit rendered/pinterest_rlbp/"
    return json.loads(study.COMPARISON.read_text())


def test_study_is_current_with_the_sources_and_parameters(comparison):
    stale = sorted(k for k, v in source_hashes("pinterest_rlbp").items()
                   if comparison["provenance"]["source_sha256"].get(k) != v)
    assert not stale, f"policy_comparison.json is stale for {stale}: run `make rlbp-study`"
    defaults = job_parameters(methods.get("pinterest_rlbp"), 0, None, {})
    defaults.pop("seed")
    assert comparison["provenance"]["parameters"] == defaults


def test_study_has_twenty_seeds_and_recomputable_intervals(comparison):
    assert comparison["n_seeds"] >= 20 and len(comparison["per_seed"]) == comparison["n_seeds"]
    again = study.comparisons_from_figures(comparison["per_seed"])
    assert again == comparison["comparisons"]
    for row in comparison["comparisons"]:
        assert row["n"] == comparison["n_seeds"]
        assert row["ci95_low"] <= row["mean_difference"] <= row["ci95_high"]
    names = {(r["comparison"], r["metric"]) for r in comparison["comparisons"]}
    assert {("learned - fixed_gain", "true_value"), ("learned - behaviour", "true_value"),
            ("IPS - truth (learned)", "true_value_heldout"), ("IPS - truth (behaviour)", "true_value_heldout"),
            ("IPS - truth (fixed_gain)", "true_value_heldout")} <= names


def test_gamma_ablation_is_paired_and_recomputable(comparison):
    ablation = comparison["ablation_gamma_0"]
    assert len(ablation["per_seed"]) == comparison["n_seeds"]
    assert study.comparisons_from_figures(ablation["per_seed"]) == ablation["comparisons"]
    main = [{"seed": int(s), "beyond_seed_metrics": f} for s, f in comparison["per_seed"].items()]
    zero = [{"seed": int(s), "beyond_seed_metrics": f} for s, f in ablation["per_seed"].items()]
    assert study.across_gamma(main, zero) == ablation["across_gamma"]


def test_a_tampered_figure_is_caught(comparison):
    per_seed = json.loads(json.dumps(comparison["per_seed"]))
    first = next(iter(per_seed))
    per_seed[first]["learned_true_value"] += 1.0
    assert study.comparisons_from_figures(per_seed) != comparison["comparisons"]


def test_lambda_frontier_covers_the_grid_and_overshoot_falls():
    front = json.loads(study.FRONTIER.read_text())
    assert [row["lambda"] for row in front] == list(ex.LAMBDAS)
    assert all(len(row["seeds"]) >= 20 for row in front)
    over = [row["cpc_overshoot"] for row in front]
    assert all(b <= a for a, b in zip(over, over[1:])), f"CPC overshoot does not fall with lambda: {over}"
    assert over[-1] < over[0]
    assert (study.FOLDER / "lambda_frontier.png").stat().st_size > 1000
    assert (study.FOLDER / "policy_comparison.png").stat().st_size > 1000
