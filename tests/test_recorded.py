"""The recorded figures shipped in the package are exactly the seed files' numbers."""

from __future__ import annotations

import json

import pytest

from litrepro import recorded, report
from litrepro.paths import seeds_dir


@pytest.mark.parametrize("method", sorted(recorded.SEED_METHOD))
def test_shipped_figures_equal_a_fresh_extraction_of_the_seed_file(method):
    path = recorded.find_seed_file(method)
    if path is None:
        pytest.skip(f"no seed files in {seeds_dir()} (set LITREPRO_SEEDS_DIR); the shipped copy is used as is")
    shipped = json.loads((recorded.FIGURES / f"{method}.json").read_text())
    assert shipped == recorded.extract(path), "shipped figures are stale: run python -m litrepro.recorded"


@pytest.mark.parametrize("method", sorted(recorded.SEED_METHOD))
def test_shipped_figures_hold_numbers_not_prose(method):
    data = recorded.load(method)
    assert data is not None and data["_file"].endswith(".txt") and len(data["_sha256"]) == 64
    text = json.dumps(data)
    for prose in ("claim_policy", "full_experiment", "provenance", "dataset", "source_url"):
        assert prose not in text
    assert recorded.aggregate_metrics(method) and recorded.per_seed_metrics(method).keys() == {42, 43, 44}


def test_a_changed_seed_file_is_caught(tmp_path):
    source = recorded.find_seed_file("pinterest_rlbp")
    if source is None:
        pytest.skip("no seed files")
    data = json.loads(source.read_text())
    data["per_seed"][0]["metrics"]["td_loss_before"] += 1e-9
    (tmp_path / source.name).write_text(json.dumps(data))
    assert recorded.extract(tmp_path / source.name) != recorded.load("pinterest_rlbp")


def test_zero_contract_figures_print_as_bounds():
    assert report.fmt_zero(0) == "0"                                     # a count is exact
    assert report.fmt_zero(0.0) == report.fmt_zero(2.220446049250313e-16) == report.fmt_zero(-4.4e-16) == "< 1e-12"
    assert report.fmt_zero(3e-6) == "3e-06"
    table = report.comparison_table("pinterest_rlbp", 42, {"policy_row_mass_error": 4.440892098500626e-16,
                                                           "td_loss_after": 0.123456789})
    assert table.loc["policy_row_mass_error", "this run (seed 42)"] == "< 1e-12"
    assert table.loc["td_loss_after", "this run (seed 42)"] == "0.12346"
