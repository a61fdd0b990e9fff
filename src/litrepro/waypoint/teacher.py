"""Teacher RL and its frozen waypoints.

REINFORCE on the causal first action.  For prompts x^(i) (one per rollout),
sample a ~ pi(. | x^(i)) and score it with the rule reward

    R(a) = 1 if a is a byte (a < 256) and a is even, else 0   (EOS earns 0)
    A_i  = R(a_i) - mean_j R(a_j)                          (centred, detached)
    L    = -(1/n) sum_i A_i log pi(a_i | x^(i))

with plain SGD.  The policy is frozen (deep-copied, gradients off) at the
``waypoint_steps`` (0 = before the first update): the initial, middle and final
waypoints.  There is no selection and no retry: every update is kept.
"""

from __future__ import annotations

import copy

import torch

from litrepro.waypoint.model import EOS, BytePolicy, flat_parameters

RUN_ID = "tiny-byte-parity-rl"


def parity_reward(actions: torch.Tensor) -> torch.Tensor:
    """1.0 where the action is an even byte, else 0.0 (EOS is not a byte)."""
    return ((actions < EOS) & (actions % 2 == 0)).float()


def freeze(policy: BytePolicy) -> BytePolicy:
    return copy.deepcopy(policy).requires_grad_(False).eval()


def reinforce_step(policy: BytePolicy, prompts: torch.Tensor, generator: torch.Generator,
                   optimizer: torch.optim.Optimizer) -> dict:
    """One REINFORCE update on the first action after each prompt (n, P)."""
    logits = policy(prompts)[:, -1]                                                   # (n, V)
    actions = torch.multinomial(torch.softmax(logits.detach(), -1).cpu(), 1, generator=generator).squeeze(1)
    actions = actions.to(prompts.device)                                              # (n,)
    reward = parity_reward(actions)                                                   # (n,)
    advantage = (reward - reward.mean()).detach()                                     # centred, detached
    logp = torch.log_softmax(logits, -1).gather(1, actions[:, None]).squeeze(1)       # (n,)
    loss = -(advantage * logp).mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.sqrt(sum((p.grad ** 2).sum() for p in policy.parameters()))
    optimizer.step()
    return {"sampled_actions": int(actions.numel()), "mean_rule_reward": float(reward.mean()),
            "gradient_norm": float(grad_norm)}


def run_teacher_rl(teacher: BytePolicy, sample_prompts, generator: torch.Generator, *, updates: int,
                   rollouts: int, lr: float, waypoint_steps: list[int]) -> dict:
    """Run the RL, freezing waypoints; returns snapshots, lineage and the seed-style audit."""
    optimizer = torch.optim.SGD(teacher.parameters(), lr=lr)
    snapshots = {0: freeze(teacher)} if 0 in waypoint_steps else {}
    history = []
    for step in range(1, updates + 1):
        history.append({"step": step, **reinforce_step(teacher, sample_prompts(rollouts), generator, optimizer)})
        if step in waypoint_steps:
            snapshots[step] = freeze(teacher)
    waypoints = [snapshots[s] for s in waypoint_steps]
    audit = {"updates": updates, "rollouts_per_update": rollouts, "rollout_horizon": 1,
             "checkpoint_steps": list(waypoint_steps), "total_sampled_actions": sum(h["sampled_actions"] for h in history),
             "learning_rate": lr, "history": history,
             "selection": "none; fixed checkpoints, no retries or reward/gate-based selection",
             "gradient_estimator": "REINFORCE on the causal first action; detached centered binary reward"}
    return {"waypoints": waypoints, "references": [flat_parameters(w).clone() for w in waypoints],
            "lineage": [{"run_id": RUN_ID, "step": s} for s in waypoint_steps], "audit": audit}
