"""Fault tests of the waypoint_opd audit (``litrepro.waypoint.audit``), organised by mechanism.

Each test applies one faulty version of a stage (a monkeypatched stage function, the
kind of bug a careful developer could make), runs the real pipeline
(:func:`litrepro.waypoint.experiment.run`, the path the notebook's cells call) on a
small configuration, and asserts that the *named* checks that guard that stage turn
false.  A section per mechanism:

1. OPD update (sampling, gate, advantage, scale, update direction and size)
2. Teacher RL (sampling, reward, advantage, update, waypoints)
3. Teacher pretraining
4. Splits and NLL
5. Rollout diagnostics
6. Comparison arms (pairing, gates, first updates, evaluations)
7. The effect study inherits the checks
"""

from __future__ import annotations

import copy
import functools

import pytest
import torch

from litrepro.waypoint import corpus as corpus_mod
from litrepro.waypoint import diagnostics
from litrepro.waypoint import effect_study
from litrepro.waypoint import experiment as wp
from litrepro.waypoint import model as model_mod
from litrepro.waypoint import opd as opd_mod
from litrepro.waypoint import teacher as teacher_mod
from litrepro.waypoint.config import WaypointConfig
from litrepro.waypoint.model import EOS, VOCAB

SMALL = {"seed": 42, "comparison_steps": 1, "comparison_eval_prompts": 16, "device": "cpu"}


def run(corpus_path, **overrides) -> dict:
    return wp.run(WaypointConfig(corpus_path=str(corpus_path), **{**SMALL, **overrides}))


def patch_during_compare_arms(monkeypatch, module, name: str, fault) -> None:
    """Replace ``module.name`` by ``fault`` only while ``compare_arms`` runs (the fault lives in the arms' stage)."""
    real_compare, real = wp.compare_arms, getattr(module, name)

    def compare(*a, **k):
        monkeypatch.setattr(module, name, fault)
        try:
            return real_compare(*a, **k)
        finally:
            monkeypatch.setattr(module, name, real)
    monkeypatch.setattr(wp, "compare_arms", compare)


def assert_caught(results: dict, *names: str) -> None:
    """Every named check is false (and exists); the message shows what did fire and the gaps."""
    checks = results["extra_checks"]
    missing = [n for n in names if n not in checks]
    assert not missing, f"checks not computed: {missing}"
    held = [n for n in names if checks[n] is not False]
    fired = sorted(k for k, v in checks.items() if v is False)
    assert not held, f"fault not caught by {held}; fired: {fired}; gaps: {results['beyond_seed_metrics']}"


@pytest.fixture(scope="module")
def clean(corpus_path):
    return run(corpus_path)


def test_clean_run_passes_every_audit_check(clean):
    """The configuration the faults run on: every check holds, and the gaps are float rounding."""
    assert all(v is True for v in clean["extra_checks"].values()), clean["extra_checks"]
    gaps = clean["beyond_seed_metrics"]
    for name in ("opd_update_relative_gap", "teacher_rl_update_relative_gap", "teacher_pretraining_relative_gap",
                 "nll_relative_gap", "comparison_evaluation_max_gap"):
        assert 0 <= gaps[name] < 1e-9, (name, gaps[name])
    assert gaps["final_waypoint_even_mass_gain"] > 1e-3
    arms = clean["comparison_arms"]
    assert arms["final_only"]["mean_gate"] == 1.0 and arms["waypoint"]["gate_kind"] == "straightness"
    assert len({a["train_generator_sha256"] for a in arms.values()}) == 1
    assert len({arms[a]["draws_sha256"] for a in ("waypoint", "final_only", "shuffled")}) == 1


# --- 1. OPD update ------------------------------------------------------------------------------

def _patch_loss(monkeypatch, change):
    """opd_loss with its inputs or output changed by ``change(args, kwargs, real)``."""
    real = opd_mod.opd_loss
    monkeypatch.setattr(opd_mod, "opd_loss", lambda *a, **k: change(a, k, real))


@pytest.mark.guards("opd_update_matches_reference", "comparison_first_updates_match_reference")
def test_gradient_ascent(corpus_path, monkeypatch):
    def ascend(a, k, real):
        loss, stats = real(*a, **k)
        return -loss, stats
    _patch_loss(monkeypatch, ascend)
    assert_caught(run(corpus_path), "opd_update_matches_reference", "comparison_first_updates_match_reference")


@pytest.mark.guards("opd_update_matches_reference", "comparison_first_updates_match_reference")
def test_advantage_sign_flipped(corpus_path, monkeypatch):
    def flipped(a, k, real):                                     # A = log p_student - log p_final
        student, final, gate, valid = a
        return real(student, 2 * student.detach() - final, gate, valid, **k)
    _patch_loss(monkeypatch, flipped)
    assert_caught(run(corpus_path), "opd_update_matches_reference", "comparison_first_updates_match_reference")


@pytest.mark.guards("opd_update_matches_reference")
def test_advantage_from_middle_waypoint(corpus_path, monkeypatch):
    seen = {}
    real_scores = opd_mod.waypoint_logps

    def scores(waypoints, rollouts):
        seen["lp"] = real_scores(waypoints, rollouts)
        return seen["lp"]

    def middle(a, k, real):
        student, _, gate, valid = a
        return real(student, seen["lp"][1], gate, valid, **k)
    monkeypatch.setattr(opd_mod, "waypoint_logps", scores)
    _patch_loss(monkeypatch, middle)
    assert_caught(run(corpus_path), "opd_update_matches_reference")


@pytest.mark.guards("opd_update_matches_reference")
def test_batch_scale_multiplies_by_the_mean_gate(corpus_path, monkeypatch):
    def wrong_scale(a, k, real):                                 # s = gate_mass * mean g, logged as if right
        loss, stats = real(*a, **k)
        return loss * stats["mean_gate"] ** 2, stats
    _patch_loss(monkeypatch, wrong_scale)
    assert_caught(run(corpus_path), "opd_update_matches_reference")


@pytest.mark.parametrize("fault", ["inverted", "final_snapshot_only", "half"])
@pytest.mark.guards("opd_gates_match_reference", "comparison_gate_kinds_match_arms")
def test_gate_formula_faults(corpus_path, monkeypatch, fault):
    real = opd_mod.straightness_gate
    wrong = {"inverted": lambda lp: 1 - real(lp), "final_snapshot_only": lambda lp: torch.ones_like(lp[0]),
             "half": lambda lp: real(lp) / 2}[fault]
    monkeypatch.setattr(opd_mod, "straightness_gate", wrong)
    results = run(corpus_path)
    assert_caught(results, "opd_gates_match_reference", "comparison_gate_kinds_match_arms")
    if fault != "half":                                          # half the gate: same update after the batch scale
        assert_caught(results, "opd_update_matches_reference")


@pytest.mark.guards("opd_gates_match_reference", "opd_update_matches_reference")
def test_middle_and_final_waypoints_swapped_in_scoring(corpus_path, monkeypatch):
    real = opd_mod.waypoint_logps
    monkeypatch.setattr(opd_mod, "waypoint_logps", lambda w, r: real(w, r)[[0, 2, 1]])
    assert_caught(run(corpus_path), "opd_gates_match_reference", "opd_update_matches_reference")


@pytest.mark.guards("opd_rollouts_replayed", "opd_sampled_logps_match_student")
def test_sampling_at_another_temperature(corpus_path, monkeypatch):
    """Samples (and their logged log-probs) from softmax(2 z): not the student's distribution."""
    real = opd_mod.sample_rollouts

    def hot(student, prompts, max_new_tokens, generator, pad=EOS):
        sharp = copy.deepcopy(student)
        with torch.no_grad():
            sharp.head_w.mul_(2.0)
        return real(sharp, prompts, max_new_tokens, generator, pad)
    monkeypatch.setattr(opd_mod, "sample_rollouts", hot)
    assert_caught(run(corpus_path), "opd_rollouts_replayed", "opd_sampled_logps_match_student")


@pytest.mark.guards("opd_update_matches_reference")
def test_student_scored_one_position_late(corpus_path, monkeypatch):
    real = opd_mod.student_logps
    monkeypatch.setattr(opd_mod, "student_logps", lambda s, r: torch.roll(real(s, r), 1, dims=1))
    assert_caught(run(corpus_path), "opd_update_matches_reference")


@pytest.mark.guards("opd_update_matches_reference", "comparison_first_updates_match_reference")
def test_update_applied_twice(corpus_path, monkeypatch):
    real = wp.opd_step

    def twice(student, waypoints, prompts, optimizer, generator, **kw):
        out = real(student, waypoints, prompts, optimizer, generator, **kw)
        optimizer.step()                                        # the gradients are still there: 2 x lr
        return out
    monkeypatch.setattr(wp, "opd_step", twice)
    assert_caught(run(corpus_path), "opd_update_matches_reference", "comparison_first_updates_match_reference")


@pytest.mark.guards("opd_update_matches_reference", "teacher_rl_update_matches_reference")
def test_momentum_in_the_optimiser(corpus_path, monkeypatch):
    """SGD with momentum 0.9: the first step is plain SGD, the second is not."""
    monkeypatch.setattr(torch.optim, "SGD", functools.partial(torch.optim.SGD, momentum=0.9))
    assert_caught(run(corpus_path), "opd_update_matches_reference", "teacher_rl_update_matches_reference")


@pytest.mark.guards("opd_rollouts_replayed", "rollout_diagnostics_match_reference")
def test_valid_mask_drops_the_last_token(corpus_path, monkeypatch):
    real = opd_mod.sample_rollouts

    def short(*a, **k):
        r = real(*a, **k)
        valid = r.valid.clone()
        valid[:, -1] = False
        return opd_mod.Rollouts(r.tokens, valid, r.sample_logp, r.prompt_len)
    monkeypatch.setattr(opd_mod, "sample_rollouts", short)
    assert_caught(run(corpus_path), "opd_rollouts_replayed", "rollout_diagnostics_match_reference")


@pytest.mark.guards("student_starts_at_waypoint0")
def test_student_starts_from_the_final_waypoint(corpus_path, monkeypatch):
    """``waypoint0`` start built from the wrong snapshot."""
    monkeypatch.setattr(wp, "initial_student", lambda cfg, rl, corpus, device, seed, *, start=None:
                        copy.deepcopy(rl["waypoints"][-1]).requires_grad_(True).train())
    assert_caught(run(corpus_path), "student_starts_at_waypoint0")


# --- 2. Teacher RL ------------------------------------------------------------------------------

def faulty_reinforce(*, reward=None, advantage=None, temperature=1.0, reduce="mean"):
    """``teacher.reinforce_step`` with one piece replaced (the same code otherwise)."""
    def step(policy, prompts, generator, optimizer, sampled=None):
        logits = policy(prompts)[:, -1]
        probs = torch.softmax(logits.detach() / temperature, -1)
        actions = torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(1).to(prompts.device)
        if sampled is not None:
            sampled.append(actions)
        r = reward(actions, prompts) if reward else teacher_mod.parity_reward(actions)
        adv = (advantage(r) if advantage else r - r.mean()).detach()
        logp = torch.log_softmax(logits, -1).gather(1, actions[:, None]).squeeze(1)
        loss = -(adv * logp).sum() if reduce == "sum" else -(adv * logp).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.sqrt(sum((p.grad ** 2).sum() for p in policy.parameters()))
        optimizer.step()
        return {"sampled_actions": int(actions.numel()), "mean_rule_reward": float(r.mean()),
                "gradient_norm": float(grad_norm)}
    return step


@pytest.mark.guards("teacher_rl_update_matches_reference", "final_waypoint_raises_even_mass")
def test_rl_advantage_sign_flipped(corpus_path, monkeypatch):
    monkeypatch.setattr(teacher_mod, "reinforce_step", faulty_reinforce(advantage=lambda r: r.mean() - r))
    results = run(corpus_path)
    assert_caught(results, "teacher_rl_update_matches_reference", "final_waypoint_raises_even_mass")
    assert results["beyond_seed_metrics"]["final_waypoint_even_mass_gain"] < 0


@pytest.mark.guards("teacher_rl_update_matches_reference", "teacher_rl_reward_is_parity")
def test_rl_reward_on_the_prompt_byte(corpus_path, monkeypatch):
    monkeypatch.setattr(teacher_mod, "reinforce_step",
                        faulty_reinforce(reward=lambda a, prompts: teacher_mod.parity_reward(prompts[:, -1])))
    assert_caught(run(corpus_path), "teacher_rl_update_matches_reference", "teacher_rl_reward_is_parity")


@pytest.mark.guards("teacher_rl_update_matches_reference")
def test_rl_reward_not_centred(corpus_path, monkeypatch):
    monkeypatch.setattr(teacher_mod, "reinforce_step", faulty_reinforce(advantage=lambda r: r))
    assert_caught(run(corpus_path), "teacher_rl_update_matches_reference")


@pytest.mark.guards("teacher_rl_reward_is_parity", "teacher_rl_update_matches_reference",
                    "final_waypoint_raises_even_mass")
def test_rl_reward_counts_odd_bytes(corpus_path, monkeypatch):
    monkeypatch.setattr(teacher_mod, "reinforce_step",
                        faulty_reinforce(reward=lambda a, p: ((a < EOS) & (a % 2 == 1)).float()))
    assert_caught(run(corpus_path), "teacher_rl_reward_is_parity", "teacher_rl_update_matches_reference",
                  "final_waypoint_raises_even_mass")


@pytest.mark.guards("teacher_rl_update_matches_reference")
def test_rl_loss_summed_not_averaged(corpus_path, monkeypatch):
    monkeypatch.setattr(teacher_mod, "reinforce_step", faulty_reinforce(reduce="sum"))
    assert_caught(run(corpus_path), "teacher_rl_update_matches_reference")


@pytest.mark.guards("teacher_rl_rollouts_replayed")
def test_rl_samples_at_another_temperature(corpus_path, monkeypatch):
    monkeypatch.setattr(teacher_mod, "reinforce_step", faulty_reinforce(temperature=0.5))
    assert_caught(run(corpus_path), "teacher_rl_rollouts_replayed")


@pytest.mark.guards("teacher_rl_rollouts_replayed")
def test_rl_prompts_from_the_validation_split(corpus_path, monkeypatch):
    def sampler(cfg, corpus, device, stage):
        return lambda n, g: corpus.validation_windows(n, cfg.prompt_len, g, stage).to(device)
    monkeypatch.setattr(wp, "_prompt_sampler", sampler)
    assert_caught(run(corpus_path), "teacher_rl_rollouts_replayed")


@pytest.mark.guards("teacher_rl_update_matches_reference")
def test_rl_learning_rate_doubled(corpus_path, monkeypatch):
    real = wp.run_teacher_rl
    monkeypatch.setattr(wp, "run_teacher_rl", lambda *a, lr, **k: real(*a, lr=2 * lr, **k))
    assert_caught(run(corpus_path), "teacher_rl_update_matches_reference")


@pytest.mark.guards("waypoints_are_rl_states")
def test_middle_and_final_waypoints_swapped_in_the_list(corpus_path, monkeypatch):
    real = wp.run_teacher_rl

    def swapped(*a, **k):
        rl = real(*a, **k)
        rl["waypoints"] = [rl["waypoints"][0], rl["waypoints"][2], rl["waypoints"][1]]
        return rl
    monkeypatch.setattr(wp, "run_teacher_rl", swapped)
    assert_caught(run(corpus_path), "waypoints_are_rl_states")


@pytest.mark.guards("waypoints_are_rl_states")
def test_waypoint_frozen_one_step_late(corpus_path, monkeypatch):
    real = wp.run_teacher_rl

    def late(*a, waypoint_steps, **k):
        rl = real(*a, waypoint_steps=[0, 5, 8], **k)
        rl["lineage"][1]["step"] = 4                              # the lineage still says 4
        return rl
    monkeypatch.setattr(wp, "run_teacher_rl", late)
    assert_caught(run(corpus_path), "waypoints_are_rl_states")


# --- 3. Teacher pretraining ---------------------------------------------------------------------

@pytest.mark.guards("teacher_pretraining_replayed")
def test_pretraining_targets_not_shifted(corpus_path, monkeypatch):
    def unshifted(policy, tokens):                               # predicts the byte it has already seen
        logits = policy(tokens)[:, :-1]
        return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, :-1].reshape(-1))
    monkeypatch.setattr(model_mod, "next_byte_nll", unshifted)
    assert_caught(run(corpus_path), "teacher_pretraining_replayed")


@pytest.mark.guards("teacher_pretraining_replayed")
def test_pretraining_ignores_embed_std(corpus_path, monkeypatch):
    real = wp.BytePolicy
    monkeypatch.setattr(wp, "BytePolicy", lambda width, g, **k: real(width, g, **{**k, "embed_std": 1.0}))
    assert_caught(run(corpus_path), "teacher_pretraining_replayed")


@pytest.mark.guards("teacher_pretraining_replayed")
def test_pretraining_learning_rate_doubled(corpus_path, monkeypatch):
    real = wp.pretrain
    monkeypatch.setattr(wp, "pretrain", lambda policy, sample, *, steps, lr: real(policy, sample, steps=steps, lr=2 * lr))
    assert_caught(run(corpus_path), "teacher_pretraining_replayed")


# --- 4. Splits and NLL --------------------------------------------------------------------------

def _patch_load(monkeypatch, change):
    real = corpus_mod.load

    def load(*a, **k):
        c = real(*a, **k)
        change(c)
        return c
    monkeypatch.setattr(corpus_mod, "load", load)


@pytest.mark.guards("splits_match_contract_ranges", "nll_matches_reference")
def test_validation_starts_one_byte_early(corpus_path, monkeypatch):
    def early(c):
        c.validation = torch.cat([c.train[-1:], c.validation])
    _patch_load(monkeypatch, early)
    assert_caught(run(corpus_path), "splits_match_contract_ranges", "nll_matches_reference")


@pytest.mark.guards("splits_match_contract_ranges")
def test_train_split_one_byte_short(corpus_path, monkeypatch):
    def short(c):
        c.train = c.train[:-1]
    _patch_load(monkeypatch, short)
    assert_caught(run(corpus_path), "splits_match_contract_ranges")


@pytest.mark.guards("splits_match_contract_ranges", "nll_matches_reference")
def test_test_bytes_read_one_byte_early(corpus_path, monkeypatch):
    def early(self, stage):
        with open(self.path, "rb") as handle:
            handle.seek(self.validation_end - 1)
            data = handle.read(self.size - self.validation_end)
        self.accesses.append(("test", stage, self.validation_end, self.size))
        return torch.frombuffer(bytearray(data), dtype=torch.uint8).long()
    monkeypatch.setattr(corpus_mod.Corpus, "test_tokens", early)
    assert_caught(run(corpus_path), "splits_match_contract_ranges", "nll_matches_reference")


@pytest.mark.parametrize("fault", ["drops_the_remainder", "scores_the_first_byte", "mean_of_window_means"])
@pytest.mark.guards("nll_matches_reference", "comparison_evaluations_match_reference")
def test_nll_scorer_faults(corpus_path, monkeypatch, fault):
    @torch.no_grad()
    def scorer(policy, tokens, window):
        n = tokens.numel()
        chunks = [tokens[i:i + window] for i in range(0, n, window)]
        if fault == "drops_the_remainder":
            chunks = [c for c in chunks if c.numel() == window]
        chunks = [c for c in chunks if c.numel() > 1]
        means, total, count = [], 0.0, 0
        for c in chunks:
            logp = torch.log_softmax(policy(c[None])[0], -1)
            if fault == "scores_the_first_byte":                 # the first byte scored against position 0
                nll = -(logp[:-1].gather(1, c[1:, None]).sum() + logp[0, c[0]])
                k = c.numel()
            else:
                nll, k = -logp[:-1].gather(1, c[1:, None]).sum(), c.numel() - 1
            total, count = total + float(nll), count + k
            means.append(float(nll) / k)
        return sum(means) / len(means) if fault == "mean_of_window_means" else total / count
    monkeypatch.setattr(wp, "nats_per_byte", scorer)
    monkeypatch.setattr(model_mod, "nats_per_byte", scorer)
    assert_caught(run(corpus_path), "nll_matches_reference", "comparison_evaluations_match_reference")


@pytest.mark.guards("nll_matches_reference", "comparison_evaluations_match_reference")
def test_validation_figures_scored_on_train_bytes(corpus_path, monkeypatch):
    monkeypatch.setattr(corpus_mod.Corpus, "validation_tokens", lambda self, stage: self.train[:self.validation.numel()])
    assert_caught(run(corpus_path), "nll_matches_reference", "comparison_evaluations_match_reference")


# --- 5. Rollout diagnostics ---------------------------------------------------------------------

@pytest.mark.guards("rollout_diagnostics_match_reference", "reported_figures_match_audit")
def test_natural_eos_counts_rows_without_eos(corpus_path, monkeypatch):
    monkeypatch.setattr(diagnostics, "natural_eos_count",
                        lambda gen, valid: int((~((gen == EOS) & valid).any(1)).sum()))
    assert_caught(run(corpus_path), "rollout_diagnostics_match_reference", "reported_figures_match_audit")


@pytest.mark.guards("rollout_diagnostics_match_reference")
def test_deflate_filter_inverted(corpus_path, monkeypatch):
    monkeypatch.setattr(diagnostics, "is_degenerate", lambda data, *, min_ratio, min_bytes:
                        len(data) >= min_bytes and diagnostics.deflate_ratio(data) >= min_ratio)
    assert_caught(run(corpus_path), "rollout_diagnostics_match_reference")


# --- 6. Comparison arms -------------------------------------------------------------------------

@pytest.mark.guards("comparison_arms_paired")
def test_arms_share_one_generator(corpus_path, monkeypatch):
    """The arms are not paired: each arm continues the previous arm's random stream."""
    real = wp.distil
    shared = {}

    def unpaired(cfg, student, waypoints, corpus, generator, device, **kw):
        if kw.get("stage") == "comparison":
            generator = shared.setdefault("g", torch.Generator().manual_seed(cfg.seed + 13))
        return real(cfg, student, waypoints, corpus, generator, device, **kw)
    monkeypatch.setattr(wp, "distil", unpaired)
    results = run(corpus_path)
    assert_caught(results, "comparison_arms_paired")
    assert results["beyond_seed_metrics"]["comparison_unpaired_arms"] >= 2


@pytest.mark.guards("comparison_arms_paired")
def test_arm_generators_created_once_for_all_arms(corpus_path, monkeypatch):
    """The textbook version of the same bug: the arms' seeded generators made once, outside the arm loop."""
    real_generator = torch.Generator
    made = {}

    class SeededOnce:                                            # torch.Generator().manual_seed(s): one per s
        def manual_seed(self, seed):
            return made.setdefault(seed, real_generator().manual_seed(seed))

    patch_during_compare_arms(monkeypatch, torch, "Generator", SeededOnce)
    assert_caught(run(corpus_path), "comparison_arms_paired")


@pytest.mark.guards("comparison_gate_kinds_match_arms")
def test_final_only_arm_given_the_waypoint_gate(corpus_path, monkeypatch):
    monkeypatch.setitem(wp.GATE_OF_ARM, "final_only", "straightness")
    results = run(corpus_path)
    assert_caught(results, "comparison_gate_kinds_match_arms")
    assert results["comparison_arms"]["final_only"]["mean_gate"] != 1.0


@pytest.mark.guards("comparison_gate_kinds_match_arms")
def test_shuffled_arm_not_shuffled(corpus_path, monkeypatch):
    real = opd_mod.compute_gate
    monkeypatch.setattr(opd_mod, "compute_gate", lambda kind, lp, valid=None, generator=None:
                        real("straightness" if kind == "shuffled" else kind, lp, valid, generator))
    assert_caught(run(corpus_path), "comparison_gate_kinds_match_arms")


@pytest.mark.guards("comparison_gate_kinds_match_arms")
def test_shuffled_permutation_from_a_fixed_generator(corpus_path, monkeypatch):
    """The arm's gates are still a moved permutation of the straightness gates, with the right mean, but the
    permutation comes from a fixed generator instead of the arm's named stream (seed + 23)."""
    real = opd_mod.compute_gate
    monkeypatch.setattr(opd_mod, "compute_gate", lambda kind, lp, valid=None, generator=None:
                        real(kind, lp, valid, torch.Generator().manual_seed(0) if kind == "shuffled" else generator))
    assert_caught(run(corpus_path), "comparison_gate_kinds_match_arms")


@pytest.mark.guards("comparison_arms_paired", "comparison_first_updates_match_reference")
def test_arms_start_from_another_student(corpus_path, monkeypatch):
    real = wp.compare_arms

    def moved(cfg, student_init, *a, **k):
        other = copy.deepcopy(student_init)
        with torch.no_grad():
            other.embed.add_(1e-3)
        return real(cfg, other, *a, **k)
    monkeypatch.setattr(wp, "compare_arms", moved)
    assert_caught(run(corpus_path), "comparison_arms_paired", "comparison_first_updates_match_reference")


@pytest.mark.guards("comparison_first_updates_match_reference")
def test_matched_compute_targets_not_shifted(corpus_path, monkeypatch):
    def unshifted(policy, tokens):
        logits = policy(tokens)[:, :-1]
        return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, :-1].reshape(-1))
    monkeypatch.setattr(wp, "next_byte_nll", unshifted)
    assert_caught(run(corpus_path), "comparison_first_updates_match_reference")


@pytest.mark.guards("comparison_first_updates_match_reference")
def test_matched_compute_trains_a_copy(corpus_path, monkeypatch):
    """The control's updates land on a copy: the arm is evaluated as the untrained student."""
    real = wp.matched_compute
    monkeypatch.setattr(wp, "matched_compute", lambda cfg, student, *a, **k: real(cfg, copy.deepcopy(student), *a, **k))
    assert_caught(run(corpus_path), "comparison_first_updates_match_reference")


@pytest.mark.guards("comparison_evaluations_match_reference")
def test_arm_parity_measured_on_odd_bytes(corpus_path, monkeypatch):
    real = wp.parity_rate

    def odd(policy, prompts, generator):
        out = real(policy, prompts, generator)
        with torch.no_grad():
            probs = torch.softmax(policy(prompts)[:, -1], -1)
        return {**out, "expected_parity_rate": float(probs[:, 1:256:2].sum(-1).mean())}
    monkeypatch.setattr(wp, "parity_rate", odd)
    assert_caught(run(corpus_path), "comparison_evaluations_match_reference")


@pytest.mark.guards("comparison_evaluations_match_reference", "reported_figures_match_audit")
def test_arm_parity_sampled_with_another_generator(corpus_path, monkeypatch):
    real = wp.parity_rate
    monkeypatch.setattr(wp, "parity_rate", lambda policy, prompts, generator: real(policy, prompts,
                                                                                   torch.Generator().manual_seed(0)))
    assert_caught(run(corpus_path), "comparison_evaluations_match_reference", "reported_figures_match_audit")


@pytest.mark.guards("student_start_matches_label")
def test_study_rows_check_the_student_start_label(corpus_path, one_condition, monkeypatch):
    """A row labelled waypoint0 whose student is the independent one (the starts swapped)."""
    real = wp.initial_student
    swap = {"waypoint0": "independent", "independent": "waypoint0"}
    monkeypatch.setattr(wp, "initial_student", lambda cfg, rl, corpus, device, seed, *, start=None:
                        real(cfg, rl, corpus, device, seed, start=swap[start or cfg.student_start]))
    row = _study_rows(corpus_path, [42])[0]
    assert row["checks"]["student_start_matches_label"] is False


@pytest.mark.guards("comparison_evaluations_match_reference")
def test_arm_evaluated_before_its_updates(corpus_path, monkeypatch):
    """Every arm scored as the initial student (for example, an evaluation moved before the loop)."""
    real = wp.nats_per_byte
    init = {}

    def first_policy(policy, tokens, window):
        init.setdefault(id(tokens), copy.deepcopy(policy))
        return real(init[id(tokens)], tokens, window)
    patch_during_compare_arms(monkeypatch, wp, "nats_per_byte", first_policy)
    assert_caught(run(corpus_path), "comparison_evaluations_match_reference")


# --- 7. The effect study inherits the checks ----------------------------------------------------

@pytest.fixture
def one_condition(monkeypatch):
    """The study cut to one condition (calibrated teacher, waypoint0, 64 rollouts)."""
    monkeypatch.setattr(effect_study, "TEACHERS", {"calibrated": 0.015})
    monkeypatch.setattr(effect_study, "STARTS", ("waypoint0",))
    monkeypatch.setattr(effect_study, "RL_ROLLOUTS", (64,))


def _study_rows(corpus_path, seeds):
    corpus = wp.load_corpus(WaypointConfig(corpus_path=str(corpus_path)))
    return [r for s in seeds for r in effect_study.run_seed(s, steps=1, eval_prompts=16, corpus=corpus,
                                                             device=torch.device("cpu"))]


def test_study_rows_record_every_check_and_summarise(corpus_path, one_condition):
    rows = _study_rows(corpus_path, [42, 43])
    for r in rows:
        assert set(r["arm_checks"]) == set(wp.ARMS)
        assert all(r["checks"].values()) and not effect_study.failed_checks(r)
        assert r["checks"]["teacher_rl_update_matches_reference"] and r["checks"]["comparison_arms_paired"]
    assert effect_study.summarise(rows)


@pytest.mark.guards("gate_kind_matches_arm")
def test_study_refuses_a_seed_whose_checks_failed(corpus_path, one_condition, monkeypatch, tmp_path):
    clean = _study_rows(corpus_path, [42])
    monkeypatch.setitem(wp.GATE_OF_ARM, "final_only", "straightness")
    faulty = _study_rows(corpus_path, [43])
    assert faulty[0]["arm_checks"]["final_only"]["gate_kind_matches_arm"] is False
    assert "final_only.gate_kind_matches_arm" in effect_study.failed_checks(faulty[0])
    with pytest.raises(effect_study.StudyRefused, match="seed 43 .*final_only.gate_kind_matches_arm"):
        effect_study.summarise(clean + faulty)
    # ... and the study, run by the runner, writes nothing.
    from litrepro import studyrunner

    monkeypatch.setenv("LITREPRO_CORPUS", str(corpus_path))
    out = tmp_path / "out"
    assert studyrunner.run(studyrunner.get("effect-study"), seeds=[42, 43], options={"steps": 1, "eval_prompts": 16},
                           jobs=1, out=out, state_root=tmp_path / "state", progress=False) == 1
    assert not out.exists()


@pytest.mark.guards("comparison_arms_paired")
def test_study_refuses_unpaired_rows(corpus_path, one_condition, monkeypatch):
    real = wp.distil
    shared = {}

    def unpaired(cfg, student, waypoints, corpus, generator, device, **kw):
        if kw.get("stage") == "comparison":
            generator = shared.setdefault("g", torch.Generator().manual_seed(cfg.seed + 13))
        return real(cfg, student, waypoints, corpus, generator, device, **kw)
    monkeypatch.setattr(wp, "distil", unpaired)
    rows = _study_rows(corpus_path, [42, 43])
    assert not rows[0]["checks"]["comparison_arms_paired"]
    with pytest.raises(effect_study.StudyRefused, match="comparison_arms_paired"):
        effect_study.summarise(rows)


def test_study_refuses_intervals_that_do_not_pair_by_seed(monkeypatch):
    """An interval computed on the sorted arms (pairing lost) differs from the plain-loop recomputation."""
    from litrepro import stats

    rows = [{"seed": s, "teacher": "calibrated", "student_start": "waypoint0", "teacher_rl_rollouts": 64,
             **{f"{arm}.{m}": float((s * 7919 + i * 104729 + j) % 97) for i, arm in enumerate(wp.ARMS)
                for j, m in enumerate(effect_study.METRICS)}} for s in range(42, 48)]
    monkeypatch.setattr(effect_study, "TEACHERS", {"calibrated": 0.015})
    monkeypatch.setattr(effect_study, "STARTS", ("waypoint0",))
    monkeypatch.setattr(effect_study, "RL_ROLLOUTS", (64,))
    monkeypatch.setattr(effect_study, "refuse_failed", lambda rows: None)       # these rows carry no checks
    assert effect_study.summarise(rows)                                         # the clean intervals pass
    real = stats.paired_ci
    monkeypatch.setattr(stats, "paired_ci", lambda a, b, **k: real(sorted(a), sorted(b), **k))
    with pytest.raises(effect_study.StudyRefused, match="plain-loop"):
        effect_study.summarise(rows)
