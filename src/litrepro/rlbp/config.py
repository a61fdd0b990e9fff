"""Every knob of the ``pinterest_rlbp`` reconstruction, with its default and range.

``parameters/pinterest_rlbp.yaml`` and the notebook's parameters cell hold the
same defaults (``tests/test_params.py`` keeps them equal).
"""

from __future__ import annotations

from dataclasses import dataclass

from litrepro.params import knob


@dataclass(frozen=True)
class RLBPConfig:
    seed: int = knob(42, "Seed for campaigns, auctions, the logging policy and the networks.", lo=0, hi=2**32 - 1)
    device: str = knob("auto", "auto (CUDA when present, else CPU), cpu or cuda.", choices=("auto", "cpu", "cuda"))
    # Simulator (Section 1 of the notebook)
    n_campaigns: int = knob(256, "Campaigns simulated side by side.", lo=2)
    steps_per_day: int = knob(24, "Control steps per day (hours).", lo=2)
    segments_per_day: int = knob(6, "RL decisions per day; divides steps_per_day.", lo=1)
    opportunities_per_step: int = knob(32, "Auction opportunities per campaign and step.", lo=1)
    logged_days: int = knob(4, "Days of logged data collected by the behaviour policy.", lo=1)
    heldout_fraction: float = knob(0.25, "Share of campaigns whose transitions are held out.", lo=0.0, lo_open=True, hi=0.9)
    eval_days: int = knob(4, "Fresh simulated days used for each policy's true value.", lo=1)
    # PID controller and the nine actions (Section 2)
    kp_base: float = knob(2.0, "Proportional gain before the action's multiplier.", lo=0.0, lo_open=True)
    ki_base: float = knob(1.0, "Integral gain before the action's multiplier.", lo=0.0, lo_open=True)
    kd: float = knob(0.05, "Derivative gain (fixed; not part of the action).", lo=0.0)
    gain_multipliers: list[float] = knob([0.5, 1.0, 2.0], "The 3 multipliers of the 3x3 (Kp, Ki) action grid.", lo=0.0, lo_open=True)
    kp_min: float = knob(0.1, "Lower bound of every Kp.", lo=0.0)
    kp_max: float = knob(4.0, "Upper bound of every Kp.", lo=0.0)
    ki_min: float = knob(0.05, "Lower bound of every Ki.", lo=0.0)
    ki_max: float = knob(2.0, "Upper bound of every Ki.", lo=0.0)
    phi_max: float = knob(2.0, "Bound on the log bid multiplier phi (the PID output).", lo=0.0, lo_open=True)
    # Reward (Section 3)
    pacing_weight: float = knob(0.5, "Weight of the |pacing error| penalty in the value reward.", lo=0.0)
    lambda_cpc: float = knob(1.0, "Fusion weight lambda: score is value - lambda * CPC.", lo=0.0)
    cpc_smoothing: float = knob(1.0, "Pseudo-clicks eps: CPC is (spend + eps*target) / (clicks + eps).", lo=0.0, lo_open=True)
    behaviour_epsilon: float = knob(1.0, "Logging policy: epsilon-greedy around the fixed-gain action (1 is uniform).", lo=0.0, lo_open=True, hi=1.0)
    # Critic (Section 4)
    gamma: float = knob(0.9, "Discount between decisions.", lo=0.0, hi=1.0)
    hidden: int = knob(64, "Hidden width of the critic and actor MLPs.", lo=1)
    critic_steps: int = knob(600, "TD regression steps.", lo=1)
    critic_lr: float = knob(0.001, "Adam learning rate of the critic.", lo=0.0, lo_open=True)
    batch_size: int = knob(256, "Transitions per TD minibatch.", lo=1)
    target_update_every: int = knob(50, "Steps between target-network copies.", lo=1)
    critic_backup: str = knob("max_min", "TD backup: max_min (the seed's), fused_greedy, policy or none (gamma 0).",
                              choices=("max_min", "fused_greedy", "policy", "none"))
    policy_rounds: int = knob(3, "Rounds of alternating critic and actor fits under the policy backup.", lo=1)
    # Actor (Section 6)
    top_k: int = knob(3, "Support size of the policy.", lo=1, hi=9)
    actor_steps: int = knob(400, "Actor updates on the fused critic scores.", lo=1)
    actor_lr: float = knob(0.01, "Adam learning rate of the actor.", lo=0.0, lo_open=True)
    actor_batch_size: int = knob(256, "States per actor minibatch.", lo=1)
    actor_temperature: float = knob(0.25, "Temperature T of the critic's Boltzmann policy the actor regresses onto.",
                                    lo=0.0, lo_open=True)

    def check(self) -> None:
        """Cross-field constraints (single-field ranges live in the knobs)."""
        if self.steps_per_day % self.segments_per_day:
            raise ValueError(f"parameter 'segments_per_day' = {self.segments_per_day} must divide "
                             f"'steps_per_day' = {self.steps_per_day}")
        if self.critic_backup == "policy" and self.critic_steps % self.policy_rounds:
            raise ValueError(f"parameter 'policy_rounds' = {self.policy_rounds} must divide "
                             f"'critic_steps' = {self.critic_steps}")
        if len(self.gain_multipliers) != 3:
            raise ValueError(f"parameter 'gain_multipliers' must have 3 values for the 3x3 grid, got {len(self.gain_multipliers)}")
        if self.kp_min > self.kp_max or self.ki_min > self.ki_max:
            raise ValueError("parameters 'kp_min'/'kp_max' or 'ki_min'/'ki_max' are in the wrong order")
