"""Every execution check assembled by ``collect_results`` can be driven false, and our extra checks can fail.

A small but complete run (real corpus, 2 OPD steps, no comparison) is built once
per test by :func:`pipeline`; each test breaks one thing and names the check that
must turn false while the others stay true.
"""

from __future__ import annotations

import json

import pytest
import torch

from litrepro.guard import OfflineGuard
from litrepro.waypoint import calibration, effect_study
from litrepro.waypoint import experiment as wp
from litrepro.waypoint import opd as opd_mod
from litrepro.waypoint.config import WaypointConfig
from litrepro.waypoint.model import BytePolicy, flat_parameters, nats_per_byte, pretrain
from litrepro.waypoint.opd import analytic_gated_gradient, compute_gate, sample_rollouts, surrogate_gradient_check
from litrepro.waypoint.teacher import FrozenLedger, replay_lineage, run_teacher_rl

DEVICE = torch.device("cpu")


def pipeline(corpus_path, *, cfg_overrides=None, tamper=None) -> dict:
    """The notebook's sections in order; ``tamper(stage, state)`` may break something between them."""
    tamper = tamper or (lambda stage, state: None)
    cfg = WaypointConfig(corpus_path=str(corpus_path), comparison_steps=0, **(cfg_overrides or {}))
    generator = torch.Generator().manual_seed(cfg.seed)
    guard = OfflineGuard().start()
    corpus = wp.load_corpus(cfg)
    state = {"cfg": cfg, "corpus": corpus, "generator": generator}
    teacher, _ = wp.pretrained_policy(cfg, corpus, generator, DEVICE, steps=cfg.teacher_steps, stage="teacher_pretrain")
    rl = wp.teacher_rl(cfg, teacher, corpus, generator, DEVICE)
    state["rl"] = rl
    tamper("rl", state)
    ledger = wp.frozen_ledger(rl)
    student = wp.initial_student(cfg, rl, corpus, DEVICE, cfg.seed)
    start = flat_parameters(student).clone()
    base = nats_per_byte(student, corpus.validation_tokens("baseline_evaluation"), cfg.eval_window)
    distillation = wp.distil(cfg, student, rl["waypoints"], corpus, generator, DEVICE, steps=cfg.student_steps,
                             gate_kind=cfg.gate, stage="opd")
    after_opd = ledger.deltas()
    tamper("after_opd", state)
    final = nats_per_byte(student, corpus.validation_tokens("final_evaluation"), cfg.eval_window)
    test = nats_per_byte(student, corpus.test_tokens("final_evaluation"), cfg.eval_window)
    surrogate = wp.surrogate_check(cfg, student, rl["waypoints"], corpus, DEVICE, cfg.seed)
    replayed = wp.replay(cfg, rl, corpus, DEVICE)
    guard.stop()
    return wp.collect_results(cfg, corpus=corpus, student_delta=float((flat_parameters(student) - start).norm()),
                              distillation=distillation, rl=rl,
                              nll={"baseline_validation": base, "final_validation": final, "final_test": test},
                              frozen=wp.frozen_report(ledger, after_opd), padding=wp.padding_fixture(cfg.seed),
                              zero_gate=wp.zero_gate_refused(), guard=guard, comparison=None,
                              execution=("cpu", "cpu"), replayed=replayed, surrogate=surrogate)


EXPECTED_FALSE = {"actual_teacher_self_generation", "original_sif_550_online_path_validated"}


def _false_checks(results: dict) -> set[str]:
    return {k for k, v in results["checks"].items() if v is False}


@pytest.fixture(scope="module")
def clean(corpus_path):
    return pipeline(corpus_path)


def test_clean_run_passes_every_check(clean):
    assert _false_checks(clean) == EXPECTED_FALSE
    assert clean["extra_checks"] == {"surrogate_gradient_matches_analytic": True, "waypoint_lineage_replayed": True}
    assert clean["replayed_waypoint_steps"] == [0, 4, 8]


@pytest.mark.guards("actual_online_student_sampling")
def test_off_policy_scoring_fails_online_sampling(corpus_path, monkeypatch):
    """Rollouts sampled by another policy (logged with that policy's log-probs) are not the student's own."""
    real = opd_mod.sample_rollouts

    def sampled_by_a_stranger(student, prompts, max_new_tokens, generator, pad=256):
        stranger = BytePolicy(student.embed.shape[1], torch.Generator().manual_seed(99))
        return real(stranger, prompts, max_new_tokens, generator, pad)

    monkeypatch.setattr(opd_mod, "sample_rollouts", sampled_by_a_stranger)
    results = pipeline(corpus_path)
    assert _false_checks(results) == EXPECTED_FALSE | {"actual_online_student_sampling"}
    assert results["beyond_seed_metrics"]["on_policy_logprob_gap"] > 1e-4


@pytest.mark.guards("fixed_teacher_rl_8x64_and_0_4_8_lineage")
def test_seven_updates_fail_the_fixed_rl_check(corpus_path):
    results = pipeline(corpus_path, cfg_overrides={"teacher_rl_updates": 7, "waypoint_steps": [0, 4, 7]})
    assert _false_checks(results) == EXPECTED_FALSE | {"fixed_teacher_rl_8x64_and_0_4_8_lineage"}


@pytest.mark.guards("waypoint_lineage_replayed", "fixed_teacher_rl_8x64_and_0_4_8_lineage")
def test_snapshot_one_step_late_fails_lineage(corpus_path):
    """Waypoint 'step 4' frozen after update 5, lineage still saying 4: only the replay can tell."""
    results = pipeline(corpus_path, cfg_overrides={"waypoint_steps": [0, 5, 8]},
                       tamper=lambda stage, s: stage == "rl" and s["rl"]["lineage"][1].update(step=4))
    assert results["teacher_snapshot_lineage"][1]["step"] == 4            # the configured/echoed lineage looks right
    assert results["replayed_waypoint_steps"] == [0, 5, 8]
    assert _false_checks(results) == EXPECTED_FALSE | {"fixed_teacher_rl_8x64_and_0_4_8_lineage"}
    assert results["extra_checks"]["waypoint_lineage_replayed"] is False


@pytest.mark.parametrize("tensor", ["head_w", "head_b"])   # a parameter, and the fixed zero bias (a buffer)
@pytest.mark.guards("frozen_teacher_unchanged", "fixed_teacher_rl_8x64_and_0_4_8_lineage")
def test_moved_frozen_teacher_fails(corpus_path, tensor):
    def nudge(stage, s):
        if stage == "after_opd":
            with torch.no_grad():
                getattr(s["rl"]["waypoints"][-1], tensor).view(-1)[0] += 1e-9
    results = pipeline(corpus_path, tamper=nudge)
    # The moved waypoint is no longer the policy of any replayed RL step, so the lineage fails too.
    assert _false_checks(results) == EXPECTED_FALSE | {"frozen_teacher_unchanged", "fixed_teacher_rl_8x64_and_0_4_8_lineage"}
    assert results["metrics"]["frozen_teacher_parameter_delta_l2"] > 0
    assert results["frozen_teacher_parameter_deltas_l2"][0] == 0.0      # unchanged after OPD, moved later


@pytest.mark.guards("heldout_bytes_not_used_for_training")
def test_heldout_read_fails(corpus_path):
    def peek(stage, s):
        if stage == "rl":
            s["corpus"].validation_windows(2, 8, torch.Generator().manual_seed(0), "opd")   # a training stage reads validation
    results = pipeline(corpus_path, tamper=peek)
    assert _false_checks(results) == EXPECTED_FALSE | {"heldout_bytes_not_used_for_training"}


@pytest.mark.guards("actual_parameters_changed")
def test_optimiser_that_never_steps_fails_parameters_changed(corpus_path, monkeypatch):
    """OPD computes its gradients but the optimiser step is lost: the student never moves."""
    real = wp.opd_step

    def no_step(student, waypoints, prompts, optimizer, generator, **kw):
        step, optimizer.step = optimizer.step, lambda *a, **k: None
        try:
            return real(student, waypoints, prompts, optimizer, generator, **kw)
        finally:
            optimizer.step = step
    monkeypatch.setattr(wp, "opd_step", no_step)
    results = pipeline(corpus_path)
    assert "actual_parameters_changed" in _false_checks(results)
    assert results["metrics"]["parameter_delta_l2"] == 0


@pytest.mark.guards("no_pretrained_checkpoint_downloaded")
def test_a_connection_attempt_fails_the_offline_check(corpus_path):
    """A stage that tries to reach a host (here localhost's discard port) is seen by the guard."""
    import socket

    def phone_home(stage, s):
        if stage == "rl":
            try:
                socket.create_connection(("127.0.0.1", 9), timeout=0.1).close()
            except Exception:   # the guard refuses it (or nothing listens): the attempt is what counts
                pass
    results = pipeline(corpus_path, tamper=phone_home)
    assert _false_checks(results) == EXPECTED_FALSE | {"no_pretrained_checkpoint_downloaded"}


@pytest.mark.guards("zero_waypoint_gate_still_rejected")
def test_loss_without_the_zero_gate_guard_fails_its_check(monkeypatch):
    """An OPD loss that returns 0 for an all-zero gate batch instead of raising ZeroGateError."""
    real = wp.opd_loss

    def silent(student, final, gate, valid, **kw):
        if not bool((gate[valid] != 0).any()):
            return (student * 0).sum(), {}
        return real(student, final, gate, valid, **kw)
    monkeypatch.setattr(wp, "opd_loss", silent)
    assert wp.zero_gate_refused() is False                  # zero_waypoint_gate_still_rejected turns false


@pytest.mark.guards("extreme_finite_padding_zero_gradients")
def test_loss_that_reads_the_padding_fails_its_check(monkeypatch):
    """An OPD loss whose mask lets padded positions in (a mask built from the wrong lengths)."""
    real = wp.opd_loss
    monkeypatch.setattr(wp, "opd_loss", lambda student, final, gate, valid, **kw:
                        real(student, final, gate, torch.ones_like(valid), **kw))
    assert wp.padding_fixture(0)["extreme_finite_padding_zero_gradients"] is False


# --- The surrogate gradient, shown -----------------------------------------------------------

def _small_batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    student, waypoints = BytePolicy(6, g), [BytePolicy(6, g) for _ in range(3)]
    return student, waypoints, torch.randint(256, (3, 4), generator=g), g


@pytest.mark.guards("surrogate_gradient_matches_analytic")
def test_surrogate_gradient_matches_analytic_and_can_fail(monkeypatch):
    student, waypoints, prompts, g = _small_batch()
    out = surrogate_gradient_check(student, waypoints, prompts, g, max_new_tokens=5, gate_mass=0.8)
    assert out["surrogate_gradient_matches_analytic"] and out["analytic_gradient_norm"] > 0
    # A surrogate that forgets the batch scale gives a different gradient, and the check sees it.
    real = opd_mod.opd_loss

    def unscaled(*args, **kwargs):
        loss, stats = real(*args, **kwargs)
        return loss / stats["batch_scale"], stats
    monkeypatch.setattr(opd_mod, "opd_loss", unscaled)
    student, waypoints, prompts, g = _small_batch()
    assert not surrogate_gradient_check(student, waypoints, prompts, g, max_new_tokens=5,
                                        gate_mass=0.8)["surrogate_gradient_matches_analytic"]


def test_analytic_gradient_by_hand_on_one_token():
    """One valid token, gate 1: grad = -gate_mass * A * grad log pi(y)."""
    student, waypoints, prompts, g = _small_batch(1)
    r = sample_rollouts(student, prompts[:1], 1, g)
    final = torch.full((1, 1), -2.0, dtype=torch.float64)
    lp = opd_mod.student_logps(student, r)
    grads = torch.autograd.grad(lp[0, 0], list(student.parameters()))
    expected = [-0.8 * float(final[0, 0] - lp[0, 0].detach()) * x for x in grads]
    got = analytic_gated_gradient(student, r, final, torch.ones(1, 1, dtype=torch.float64), gate_mass=0.8)
    assert all(torch.allclose(a, b, rtol=1e-12, atol=0) for a, b in zip(got, expected))


# --- Replay, ledger, shuffled gate ------------------------------------------------------------

@pytest.mark.guards("waypoint_lineage_replayed")
def test_replay_finds_the_waypoints_and_misses_a_missing_update():
    g = torch.Generator().manual_seed(6)
    teacher = BytePolicy(6, g)
    sampler = lambda n, gen: torch.randint(256, (n, 4), generator=gen)          # noqa: E731
    rl = run_teacher_rl(teacher, sampler, g, updates=8, rollouts=16, lr=0.2, waypoint_steps=[0, 4, 8])
    assert replay_lineage(rl, sampler) == {"replayed_steps": [0, 4, 8], "waypoint_lineage_replayed": True}
    broken = {**rl, "start_state": torch.Generator().manual_seed(7).get_state()}  # not the run's seed
    assert replay_lineage(broken, sampler)["waypoint_lineage_replayed"] is False


def test_ledger_tracks_only_what_it_is_given():
    g = torch.Generator().manual_seed(0)
    a, b = BytePolicy(4, g), BytePolicy(4, g)
    ledger = FrozenLedger({"a": a, "b": b})
    assert ledger.deltas() == {"a": 0.0, "b": 0.0}
    with torch.no_grad():
        b.embed[0, 0] += 0.5
    assert ledger.deltas() == {"a": 0.0, "b": 0.5}


def test_without_output_bias_the_bias_is_a_fixed_zero_buffer():
    """``output_bias=False``: b is not trained (a trainable bias would undo the gate calibration)."""
    g = torch.Generator().manual_seed(0)
    policy = BytePolicy(4, g, output_bias=False, embed_std=0.5)
    assert "head_b" not in dict(policy.named_parameters()) and "head_b" in dict(policy.named_buffers())
    windows = torch.randint(256, (4, 12), generator=g)
    pretrain(policy, lambda: windows, steps=3, lr=0.1)
    assert torch.equal(policy.head_b, torch.zeros_like(policy.head_b))
    assert "head_b" in dict(BytePolicy(4, g).named_parameters())                # the default keeps a trainable bias


def test_gate_legs_splits_tokens_by_rl_sampling(corpus_path):
    """Every token sampled in both legs: that class is all tokens; none sampled: all are 'neither'."""
    cfg = WaypointConfig(corpus_path=str(corpus_path))
    corpus = wp.load_corpus(cfg)
    g = torch.Generator().manual_seed(5)
    student, waypoints = BytePolicy(6, g), [BytePolicy(6, g) for _ in range(3)]
    everything = torch.arange(257).expand(cfg.teacher_rl_updates, -1)                  # (updates, 257)
    legs = wp.gate_legs(cfg, student, waypoints, corpus, DEVICE, 0, everything, rollouts=8)
    assert legs["share_sampled_both"] == 1.0 and legs["gate_sampled_both"] == legs["mean_gate"]
    nothing = torch.zeros(cfg.teacher_rl_updates, 0, dtype=torch.long)
    legs = wp.gate_legs(cfg, student, waypoints, corpus, DEVICE, 0, nothing, rollouts=8)
    assert legs["share_sampled_neither"] == 1.0 and legs["gate_sampled_neither"] == legs["mean_gate"]
    mid = cfg.waypoint_steps[1]
    last_of_leg_1 = torch.full_like(everything, -1)                                # -1 matches no token
    last_of_leg_1[mid - 1] = torch.arange(257)                                     # only update 4 samples anything
    legs = wp.gate_legs(cfg, student, waypoints, corpus, DEVICE, 0, last_of_leg_1, rollouts=8)
    assert legs["share_sampled_one"] == 1.0
    low = torch.arange(128).expand(cfg.teacher_rl_updates, -1)                     # bytes < 128 in both legs
    legs = wp.gate_legs(cfg, student, waypoints, corpus, DEVICE, 0, low, rollouts=8)
    shares = [legs[f"share_sampled_{c}"] for c in ("both", "one", "neither")]
    assert sum(shares) == pytest.approx(1.0) and min(shares[0], shares[2]) > 0
    assert legs["gate_sampled_both"] != legs["gate_sampled_neither"]
    assert sum(legs[f"share_sampled_{c}"] * legs[f"gate_sampled_{c}"] for c in ("both", "neither")) \
        == pytest.approx(legs["mean_gate"])                                        # total expectation over the classes


def test_shuffled_gate_keeps_the_mean_and_values():
    g = torch.Generator().manual_seed(3)
    lp = torch.randn(3, 4, 6, generator=g, dtype=torch.float64)
    valid = torch.rand(4, 6, generator=g) > 0.3
    straight = compute_gate("straightness", lp)
    shuffled = compute_gate("shuffled", lp, valid, torch.Generator().manual_seed(1))
    assert torch.equal(shuffled[~valid], straight[~valid])
    assert sorted(shuffled[valid].tolist()) == sorted(straight[valid].tolist())
    assert not torch.equal(shuffled, straight)
    with pytest.raises(ValueError, match="generator"):
        compute_gate("shuffled", lp)


def test_independent_and_waypoint0_students_differ(corpus_path):
    cfg = WaypointConfig(corpus_path=str(corpus_path))
    corpus = wp.load_corpus(cfg)
    g = torch.Generator().manual_seed(0)
    teacher, _ = wp.pretrained_policy(cfg, corpus, g, DEVICE, steps=1, stage="teacher_pretrain")
    rl = wp.teacher_rl(WaypointConfig(teacher_rl_updates=2, waypoint_steps=[0, 1, 2]), teacher, corpus, g, DEVICE)
    w0 = wp.initial_student(cfg, rl, corpus, DEVICE, 0)
    assert torch.equal(flat_parameters(w0), flat_parameters(rl["initial"])) and w0.embed.requires_grad
    assert w0.embed.data_ptr() != rl["initial"].embed.data_ptr()
    ind = wp.initial_student(cfg, rl, corpus, DEVICE, 0, start="independent")
    assert not torch.equal(flat_parameters(ind), flat_parameters(w0))


# --- Calibration table and effect study -------------------------------------------------------

def test_calibration_rows_z_by_hand():
    seed_file = {"metrics": {"m": {"mean": 1.0, "std": 0.5, "n": 3}, "zero": {"mean": 0, "std": 0, "n": 3}},
                 "per_seed": [{"history": [{f: 1.0 for f in calibration.HISTORY_FIELDS}],
                               "teacher_rl_audit": {"history": [{"mean_rule_reward": 0.5, "gradient_norm": 0.1}]}},
                              {"history": [{f: 3.0 for f in calibration.HISTORY_FIELDS}],
                               "teacher_rl_audit": {"history": [{"mean_rule_reward": 0.7, "gradient_norm": 0.3}]}}]}
    results = [{"metrics": {"m": 2.0, "zero": 0.0}, "history": [{f: 2.0 for f in calibration.HISTORY_FIELDS}],
                "teacher_rl_audit": {"history": [{"mean_rule_reward": 0.6, "gradient_norm": 0.2}]}}]
    rows = {r["figure"]: r for r in calibration.calibration_rows(results, seed_file)}
    assert rows["metrics.m"]["z"] == pytest.approx(2.0)
    assert rows["metrics.zero"]["z"] == 0.0
    assert rows["opd_history.mean_gate"]["z"] == pytest.approx(0.0) and rows["opd_history.loss"]["explanation"]
    assert rows["teacher_rl_history.gradient_norm"]["recorded_std"] == pytest.approx(0.2 ** 0.5 / 10 ** 0.5 * 1)
    assert calibration.calibration_rows(results, None) == []


def test_effect_study_hashes_see_a_changed_default(monkeypatch):
    """The freshness hashes cover the config's defaults, not just files."""
    before = effect_study.source_hashes()["WaypointConfig defaults"]
    import dataclasses

    from litrepro.waypoint import config
    changed = dataclasses.make_dataclass("WaypointConfig", [("student_lr", float, dataclasses.field(default=0.5))])
    monkeypatch.setattr(config, "WaypointConfig", changed)
    assert effect_study.source_hashes()["WaypointConfig defaults"] != before


def test_effect_study_is_complete():
    """The committed effect_study.json holds every condition and comparison (its freshness: tests/test_studies.py)."""
    if not effect_study.PATH.exists():
        pytest.fail(f"{effect_study.PATH} is missing: run `make effect-study`")
    data = json.loads(effect_study.PATH.read_text())
    assert data["n_seeds"] >= 12 and effect_study.PLOT.exists()
    rows = data["differences"]
    assert {r["comparison"] for r in rows} >= {"waypoint - final_only", "waypoint - shuffled", "shuffled - final_only",
                                                "waypoint - matched_compute", "waypoint - none"}
    assert {(r["teacher"], r["student_start"], r["teacher_rl_rollouts"]) for r in rows} == set(effect_study.conditions())
    for r in data["per_seed"]:                                                  # the study inherits the checks
        assert not effect_study.failed_checks(r), (r["seed"], effect_study.failed_checks(r))
    for r in rows:
        assert set(r) >= {"comparison", "metric", "n", "mean_difference", "ci95_low", "ci95_high"}
        assert r["n"] >= 12 and r["ci95_low"] <= r["mean_difference"] <= r["ci95_high"]


def test_rendered_calibration_meets_its_goal():
    """summary.json's calibration: every recorded figure has a row; baseline NLL and mean gate within 3 recorded SDs;
    every figure beyond 3 SDs carries an explanation (the notebook's Section 9 tests it)."""
    from litrepro.paths import ROOT

    summary = json.loads((ROOT / "rendered" / "waypoint_opd" / "summary.json").read_text())
    rows = {r["figure"]: r for r in summary["calibration"]}
    assert set(rows) >= {f"metrics.{m}" for m in summary["metrics"]}
    assert {f"opd_history.{f}" for f in calibration.HISTORY_FIELDS} <= set(rows)
    assert {f"teacher_rl_history.{f}" for f in calibration.RL_FIELDS} <= set(rows)
    for r in rows.values():
        assert set(r) >= {"figure", "recorded_mean", "recorded_std", "run_mean", "run_std", "z", "explanation"}
    assert abs(rows["metrics.baseline_validation_nll"]["z"]) <= 3
    assert abs(rows["opd_history.mean_gate"]["z"]) <= 3
    unexplained = sorted(f for f, r in rows.items() if (r["z"] is None or abs(r["z"]) > 3) and not r["explanation"])
    assert not unexplained, f"figures beyond 3 recorded SDs without an explanation: {unexplained}"
