"""The OPD step against the record (``litrepro.waypoint.opd_calibration``, ``make waypoint-opd-calibration``).

The committed JSON is checked for freshness by source hashes and for z-scores that recompute from
its per-seed values; a tiny real run shows that a corrupted figure is refused.
"""

from __future__ import annotations

import json

import pytest
import torch

from litrepro import recorded
from litrepro.waypoint import experiment as wp
from litrepro.waypoint import opd_calibration as oc
from litrepro.waypoint.config import WaypointConfig


@pytest.fixture(scope="module")
def seed_file():
    data = recorded.load("waypoint_opd")
    if data is None:
        pytest.skip("the waypoint seed file is not found ($LITREPRO_SEEDS_DIR)")
    return data


@pytest.fixture(scope="module")
def data():
    if not oc.PATH.exists():
        pytest.fail(f"{oc.PATH} is missing: run `make waypoint-opd-calibration`")
    return json.loads(oc.PATH.read_text())


def test_opd_calibration_recomputes_and_covers_every_arm(data, seed_file):
    assert {s["arm"] for s in data["arms"]} == set(oc.ARMS) and len(data["seeds"]) >= 16
    oc.check_summary(data["per_seed"], data["arms"], seed_file)
    again = json.loads(json.dumps(oc.summarise(data["per_seed"], seed_file)))
    assert again == data["arms"]
    lines = oc.findings(data)
    assert len(lines) == len(oc.ARMS) + 1 and all(lines)


def test_a_corrupted_gradient_norm_is_refused(corpus_path, seed_file):
    corpus = wp.load_corpus(WaypointConfig(corpus_path=str(corpus_path)))
    rows = [oc.run_seed(s, "as_is", corpus=corpus, device=torch.device("cpu")) for s in (42, 43)]
    assert all(len(r["history"]) == 2 and r["history"][0]["mean_abs_advantage"] > 0 for r in rows)
    summary = oc.summarise(rows, seed_file)
    oc.check_summary(rows, summary, seed_file)
    rows[1]["history"][0]["gradient_norm"] *= 2                                  # a figure that no longer matches
    with pytest.raises(ValueError, match="as_is opd_history.gradient_norm z"):
        oc.check_summary(rows, summary, seed_file)


def test_findings_words_follow_the_verdicts():
    fig = {"run_mean": 1e-3, "recorded_mean": 5e-3, "z": -1.0, "z_per_seed": -1.0, "welch_p": 0.5}
    base = {"figures": {"opd_history.gradient_norm": fig, "metrics.parameter_delta_l2": fig}, "seeds": [1, 2],
            "mean_abs_advantage": 0.01, "gradient_norm_per_abs_advantage": 0.5}
    arms = [{**base, "arm": "as_is", "calibrated_without_breaking": True, "targets_within_3sd": True,
             "others_off": [], "recorded_settings_contradicted": []},
            {**base, "arm": "rl_lr_1", "calibrated_without_breaking": False, "targets_within_3sd": True,
             "others_off": ["opd_history.mean_gate"], "recorded_settings_contradicted": ["teacher_rl_audit.learning_rate"]},
            {**base, "arm": "rl_lr_3", "calibrated_without_breaking": False, "targets_within_3sd": False,
             "others_off": [], "recorded_settings_contradicted": []}]
    lines = oc.findings({"arms": arms})
    assert "breaking no other" in lines[0]
    assert "but it moves opd_history.mean_gate beyond 3 recorded SDs and it contradicts" in lines[1]
    assert "not within 3 recorded SDs" in lines[2]
