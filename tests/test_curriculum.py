"""The curriculum teacher (``litrepro.waypoint.curriculum``) and its study (``make waypoint-curriculum``)."""

from __future__ import annotations

import json

import pytest
import torch

from litrepro.waypoint import curriculum, curriculum_study
from litrepro.waypoint import experiment as wp
from litrepro.waypoint.config import WaypointConfig
from litrepro.waypoint.transfer import TransferConfig

TINY = TransferConfig(updates=4, eval_every=2, batch=6, eval_prompts=16)


def test_rewards_by_hand():
    a = torch.tensor([0, 1, 97, 98, 122, 123, 256])
    assert curriculum.reward("even", a).tolist() == [1, 0, 0, 1, 1, 0, 0]
    assert curriculum.reward("odd_lowercase", a).tolist() == [0, 0, 1, 0, 0, 0, 0]
    with pytest.raises(ValueError, match="unknown reward"):
        curriculum.reward("nope", a)


@pytest.fixture(scope="module")
def corpus(corpus_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield wp.load_corpus(WaypointConfig(corpus_path=str(corpus_path)))
    torch.set_num_threads(threads)


def _run(corpus, seed):
    return curriculum_study.run_seed(seed, corpus=corpus, device=torch.device("cpu"), cfg=TINY,
                                     arms=("final_only", "waypoint", "binned_shuffle"))


def test_a_tiny_run_passes_its_checks_and_the_teacher_forgets(corpus):
    rows = [_run(corpus, 42), _run(corpus, 43)]
    for r in rows:
        assert not curriculum_study.failed_checks(r), curriculum_study.failed_checks(r)
        assert r["teacher_even_kept"] < 1.0                          # the second phase undoes part of the first
    summary = curriculum_study.summarise(rows)
    assert {d["comparison"] for d in summary["differences"]} == {"waypoint - final_only", "waypoint - binned_shuffle"}
    broken = json.loads(json.dumps(rows))
    broken[0]["arms"]["waypoint"]["even_kept"] += 0.01
    with pytest.raises(curriculum_study.StudyRefused, match="seed 42 waypoint even_kept stored"):
        curriculum_study.summarise(broken)


@pytest.mark.guards("curriculum_reward_matches_schedule", "curriculum_update_matches_reference")
def test_a_curriculum_that_never_switches_its_reward_fails_its_checks(corpus, monkeypatch):
    real = curriculum.reward
    monkeypatch.setattr(curriculum, "reward", lambda kind, actions: real("even", actions))
    row = _run(corpus, 44)
    assert row["checks"]["curriculum_reward_matches_schedule"] is False
    assert row["checks"]["curriculum_update_matches_reference"] is False

# The committed-study tests are left out: the 16-seed run refused (seeds 48 and 54: phase_two_raises_odd_letters),
# so there is no curriculum_study.json yet.
