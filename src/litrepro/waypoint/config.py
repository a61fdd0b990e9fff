"""Every knob of the ``waypoint_opd`` reconstruction, with its default and range.

``parameters/waypoint_opd.yaml`` and the notebook's parameters cell hold the
same defaults (``tests/test_params.py`` keeps them equal).
"""

from __future__ import annotations

from dataclasses import dataclass

from litrepro.params import knob

HAMLET_SHA256 = "31584c19795779431b5933499a45b9cecb03e8c246b6ea7e245a2b6d65e8e784"


@dataclass(frozen=True)
class WaypointConfig:
    seed: int = knob(42, "Seed for initialisation, window sampling and rollouts.", lo=0, hi=2**32 - 1)
    device: str = knob("auto", "auto (CUDA when present, else CPU), cpu or cuda.", choices=("auto", "cpu", "cuda"))
    # Corpus (Section 1)
    corpus_path: str = knob("", "Hamlet file; empty: $LITREPRO_CORPUS, then the user cache.")
    corpus_sha256: str = knob(HAMLET_SHA256, "Expected sha256 of the corpus file.")
    max_corpus_bytes: int = knob(1000000, "Refuse a larger file before reading it.", lo=1, hi=100_000_000)
    train_end: int = knob(165516, "Train split is bytes [0, train_end).", lo=1)
    validation_end: int = knob(186205, "Validation is [train_end, validation_end); test is the rest.", lo=1)
    # Model and pre-training (Section 2)
    width: int = knob(24, "Embedding width of the BytePolicy.", lo=1)
    embed_std: float = knob(0.5, "Standard deviation of the BytePolicy's initial embeddings.", lo=0.0, lo_open=True)
    output_bias: bool = knob(False, "Whether the BytePolicy's output layer has a trainable bias.")
    window: int = knob(64, "Bytes per training window.", lo=2)
    pretrain_batch: int = knob(32, "Windows per next-byte NLL step.", lo=1)
    teacher_steps: int = knob(8, "Next-byte NLL steps of the teacher.", lo=0)
    specialist_steps: int = knob(4, "Next-byte NLL steps of an independently started student.", lo=0)
    pretrain_lr: float = knob(0.015, "Adam learning rate of both pre-trainings.", lo=0.0, lo_open=True)
    student_start: str = knob("waypoint0", "Student before distillation: waypoint0 (copy of the pre-RL teacher) "
                              "or independent (own init, specialist_steps steps).", choices=("waypoint0", "independent"))
    # Teacher RL and waypoints (Section 3)
    prompt_len: int = knob(1, "Prompt bytes before the first sampled action.", lo=1)
    teacher_rl_updates: int = knob(8, "REINFORCE updates of the teacher.", lo=1)
    teacher_rl_rollouts: int = knob(64, "One-action rollouts per update.", lo=2)
    teacher_rl_lr: float = knob(0.2, "SGD learning rate of the teacher RL.", lo=0.0, lo_open=True)
    waypoint_steps: list[int] = knob([0, 4, 8], "RL steps frozen as initial, middle and final waypoints.", lo=0)
    # Student on-policy distillation (Section 4)
    student_steps: int = knob(2, "Distillation updates.", lo=1)
    opd_batch: int = knob(4, "Student rollouts per update.", lo=1)
    max_new_tokens: int = knob(16, "Tokens per student rollout (EOS ends it early).", lo=1)
    student_lr: float = knob(0.05, "SGD learning rate of the student.", lo=0.0, lo_open=True)
    gate: str = knob("straightness", "Waypoint gate: straightness, or final_only (gate 1).", choices=("straightness", "final_only"))
    gate_mass: float = knob(0.8, "Batch scale is gate_mass / mean gate.", lo=0.0, lo_open=True)
    # Diagnostics and evaluation (Sections 5-6)
    deflate_min_ratio: float = knob(0.5, "Flag a rollout group whose zlib size / raw size is below this.", lo=0.0, hi=2.0)
    deflate_min_bytes: int = knob(32, "Only groups with at least this many bytes are judged.", lo=1)
    eval_window: int = knob(256, "Bytes per window when scoring validation and test NLL.", lo=2)
    # Beyond the seed (Section 7)
    comparison_steps: int = knob(40, "Distillation updates per arm in the comparison (0: skip it).", lo=0)
    comparison_eval_prompts: int = knob(256, "Validation prompts for the parity rate of each arm.", lo=1)

    def check(self) -> None:
        """Cross-field constraints (single-field ranges live in the knobs)."""
        if not self.train_end < self.validation_end:
            raise ValueError(f"parameter 'train_end' = {self.train_end} must be < 'validation_end' = {self.validation_end}")
        if self.validation_end >= self.max_corpus_bytes:
            raise ValueError(f"parameter 'validation_end' = {self.validation_end} must be < 'max_corpus_bytes'")
        steps = self.waypoint_steps
        if len(steps) != 3 or steps != sorted(set(steps)) or steps[-1] > self.teacher_rl_updates:
            raise ValueError(f"parameter 'waypoint_steps' = {steps} must be 3 increasing steps "
                             f"within 0..teacher_rl_updates ({self.teacher_rl_updates})")
        if self.window <= self.prompt_len:
            raise ValueError(f"parameter 'window' = {self.window} must exceed 'prompt_len' = {self.prompt_len}")
