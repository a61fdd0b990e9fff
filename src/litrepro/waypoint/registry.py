"""The ``waypoint_opd`` check registry: every check a result records, the stage it guards, what it recomputes.

Read by :mod:`litrepro.trust` for the book's trust report.  It lives beside ``audit.py`` rather than in
it because ``audit.py`` is one of the effect study's hashed sources (``effect_study.SOURCES``): a
registry edit there would mark the committed study stale without changing a number.  The checks
themselves are computed in ``audit.py`` and ``experiment.py``.
"""

from __future__ import annotations

#: Every check a ``waypoint_opd`` result records, by the key it has in the seed JSON (``checks``,
#: ``extra_checks``) or in the effect study's per-seed ``checks``: (the stage it guards, one line
#: on what it recomputes).  ``tests/test_book.py`` asserts that the rendered JSON has no check
#: missing here and that this registry names no check the JSON lacks.
GUARDS: dict[str, tuple[str, str]] = {
    # The seed file's execution checks (computed in ``experiment.collect_results`` and its helpers).
    "actual_online_student_sampling": (
        "OPD sampling", "the student's log-probs of its own sampled tokens, rescored, equal the logged ones (gap < 1e-4)"),
    "actual_parameters_changed": ("OPD update", "the L2 distance of the student's parameters from its start is > 0"),
    "actual_teacher_self_generation": (
        "not built", "false by design, as in the seed: the teacher never generates distillation data here"),
    "extreme_finite_padding_zero_gradients": (
        "OPD loss masking", "padding filled with +-3e38 leaves the loss gradient unchanged and exactly 0 on the padding"),
    "fixed_teacher_rl_8x64_and_0_4_8_lineage": (
        "teacher RL", "8 updates of 64 sampled actions, and waypoints found at steps 0, 4, 8 by replaying the RL"),
    "frozen_teacher_unchanged": (
        "frozen waypoints", "the L2 change of every frozen snapshot since it was frozen is exactly 0"),
    "heldout_bytes_not_used_for_training": (
        "splits", "the corpus' access log: training stages read only train bytes, test bytes only the final evaluation"),
    "no_pretrained_checkpoint_downloaded": ("offline run", "the network guard saw no connection during the run"),
    "original_sif_550_online_path_validated": (
        "not built", "false by design, as in the seed: the SIF default-550 online path is not reproduced"),
    "oversized_corpus_rejected_before_read": (
        "corpus loading", "a size limit below the file's size raises before the file is opened (opens counted)"),
    "undefined_tied_weight_policy_rejected": (
        "not applicable", "BytePolicy has separate input and output weights, so there is no tied-weight case"),
    "zero_waypoint_gate_still_rejected": ("OPD loss", "an all-zero gate batch raises ZeroGateError"),
    # Our checks beyond the seed file's names.
    "surrogate_gradient_matches_analytic": (
        "OPD loss", "autograd of the stop-gradient surrogate against the gated policy gradient summed token by token"),
    "waypoint_lineage_replayed": (
        "teacher RL", "the RL replayed from its stored start passes through each waypoint at the step its lineage names"),
    "splits_match_contract_ranges": (
        "splits", "sha256 of each split's bytes against the seed contract's byte ranges of the file"),
    "nll_matches_reference": (
        "NLL evaluation", "every reported NLL by a reference scorer on the contract bytes, one window by a plain loop"),
    "teacher_pretraining_replayed": (
        "teacher pretraining", "pretraining replayed from the seed: reference initialisation, window draws and Adam"),
    "teacher_rl_rollouts_replayed": (
        "teacher RL", "every update's prompts and actions re-drawn from the recorded generator state"),
    "teacher_rl_reward_is_parity": ("teacher RL", "every reward recomputed as the parity of the sampled action"),
    "teacher_rl_update_matches_reference": (
        "teacher RL", "every update against -lr times a REINFORCE gradient written out rollout by rollout"),
    "waypoints_are_rl_states": (
        "teacher RL", "each waypoint's tensors against the policy after the RL steps its lineage names"),
    "final_waypoint_raises_even_mass": (
        "teacher RL", "exact P(even first byte) over train prompts is higher at the final waypoint than at waypoint 0"),
    "opd_rollouts_replayed": (
        "OPD sampling", "every recorded step's prompts and tokens re-drawn from its generator state (temperature 1)"),
    "opd_sampled_logps_match_student": (
        "OPD sampling", "the logged sampling log-probs against the student's, by the reference forward pass"),
    "opd_gates_match_reference": (
        "OPD gate", "gates and mean gate by a loop over tokens of the waypoints' log-probs (chord / path)"),
    "opd_update_matches_reference": (
        "OPD update", "every step against -lr times the gated gradient with A = log p_final - log p_student"),
    "rollout_diagnostics_match_reference": (
        "rollout diagnostics", "generated tokens, natural EOS and DEFLATE-flagged groups recounted by loops over rollouts"),
    "student_starts_at_waypoint0": (
        "student start", "sha256 of the student's start against waypoint 0's and the RL's initial policy"),
    "comparison_arms_paired": (
        "comparison arms", "every arm starts from the same student, generator states and prompts (hashes compared)"),
    "comparison_gate_kinds_match_arms": (
        "comparison arms", "each arm's gate kind, mean gate and first-update gates against the gate its name prescribes "
        "(the shuffled arm's permutation re-drawn from its named stream, seed + 23)"),
    "comparison_first_updates_match_reference": (
        "comparison arms", "each arm's first update against a reference gradient, and every trained arm moved"),
    "comparison_evaluations_match_reference": (
        "comparison arms", "each arm's NLL and parity by the reference scorer on its final policy and the contract bytes"),
    "reported_figures_match_audit": (
        "reported figures", "every figure in metrics and the comparison's figures against the audit's reference"),
    # Recorded by the effect study only (``effect_study.run_condition``).
    "student_start_matches_label": (
        "effect study", "the condition's student start label against the sha256 of the student it actually started from"),
    # Recorded by the transfer study only (``transfer_study.run_seed``; computed in ``transfer_audit``).
    "arms_paired": ("transfer arms", "one start for every arm, and the same first prompts for arms with the same batch"),
    "lr_matches_arm": ("transfer arms", "the learning rate each arm used against the multiplier it declares"),
    "waypoints_unchanged": ("transfer arms", "the L2 change of every waypoint since it was frozen is exactly 0"),
    "first_update_replayed": (
        "transfer step", "each arm's first prompts and rollouts re-drawn token by token from the recorded stream states"),
    "gate_matches_reference": (
        "transfer gate", "each token's gate by the arm's formula from Python floats; a shuffle's permutation (within |A| "
        "bins for binned_shuffle) re-drawn from the arm's named stream, seed + 41"),
    "update_matches_reference": (
        "transfer step", "each arm's first update against -lr times a reference loss's gradient (exact KL position by position)"),
    "curriculum_rl_replayed": ("curriculum RL", "every update's prompts and actions re-drawn from the recorded generator state"),
    "curriculum_reward_matches_schedule": (
        "curriculum RL", "each update's reward kind against the schedule, its mean reward by a loop over the actions"),
    "curriculum_update_matches_reference": (
        "curriculum RL", "every update against -lr times a REINFORCE gradient written out with the loop's rewards"),
    "phase_one_raises_even_mass": ("curriculum RL", "P(even first byte) of the middle waypoint above waypoint 0's"),
    "phase_two_raises_odd_letters": ("curriculum RL", "P(odd lowercase first byte) of the final waypoint above waypoint 0's"),
    "final_p_even_matches_reference": (
        "transfer curve", "the learning curve's last P(even first byte) by the reference forward pass on the final student"),
}

#: The comparison arms' own booleans (``comparison_arms[arm].checks``, the effect study's ``arm_checks``)
#: and the check of :data:`GUARDS` that aggregates each over the arms.
ARM_CHECKS: dict[str, str] = {
    "paired": "comparison_arms_paired",
    "gate_kind_matches_arm": "comparison_gate_kinds_match_arms",
    "first_update_matches_reference": "comparison_first_updates_match_reference",
    "evaluation_matches_reference": "comparison_evaluations_match_reference",
}
