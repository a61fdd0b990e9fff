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

from litrepro.waypoint.model import EOS, BytePolicy, flat_state

RUN_ID = "tiny-byte-parity-rl"


def parity_reward(actions: torch.Tensor) -> torch.Tensor:
    """1.0 where the action is an even byte, else 0.0 (EOS is not a byte)."""
    return ((actions < EOS) & (actions % 2 == 0)).float()


def _state(policy: BytePolicy) -> dict[str, torch.Tensor]:
    return {name: t.detach().clone() for name, t in policy.state_dict().items()}


def freeze(policy: BytePolicy) -> BytePolicy:
    return copy.deepcopy(policy).requires_grad_(False).eval()


def reinforce_step(policy: BytePolicy, prompts: torch.Tensor, generator: torch.Generator,
                   optimizer: torch.optim.Optimizer, sampled: list | None = None) -> dict:
    """One REINFORCE update on the first action after each prompt (n, P).

    ``sampled``, when given, gets the (n,) tensor of sampled actions appended.
    """
    logits = policy(prompts)[:, -1]                                                   # (n, V)
    actions = torch.multinomial(torch.softmax(logits.detach(), -1).cpu(), 1, generator=generator).squeeze(1)
    actions = actions.to(prompts.device)                                              # (n,)
    if sampled is not None:
        sampled.append(actions)
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
    """Run the RL, freezing waypoints; returns snapshots, lineage and the seed-style audit.

    ``sample_prompts(n, generator)`` draws n prompts.  The generator's state at the
    start and the pre-RL policy are kept, so :func:`replay_lineage` can redo the run,
    and so are the sampled actions (``actions``, one row per update).  ``trace`` keeps,
    per update, the generator state before its prompts, the prompts, and the policy's
    tensors before the first and after every update: what
    :mod:`litrepro.waypoint.audit` recomputes each update from.
    """
    start_state = generator.get_state()
    initial = freeze(teacher)
    optimizer = torch.optim.SGD(teacher.parameters(), lr=lr)
    snapshots = {0: freeze(teacher)} if 0 in waypoint_steps else {}
    history, actions = [], []
    trace = {"generator_states": [], "prompts": [], "states": [_state(teacher)]}   # read by litrepro.waypoint.audit
    for step in range(1, updates + 1):
        trace["generator_states"].append(generator.get_state())
        prompts = sample_prompts(rollouts, generator)                                 # (rollouts, P)
        trace["prompts"].append(prompts)
        history.append({"step": step, **reinforce_step(teacher, prompts, generator, optimizer, actions)})
        trace["states"].append(_state(teacher))
        if step in waypoint_steps:
            snapshots[step] = freeze(teacher)
    waypoints = [snapshots[s] for s in waypoint_steps]
    audit = {"updates": updates, "rollouts_per_update": rollouts, "rollout_horizon": 1,
             "checkpoint_steps": list(waypoint_steps), "total_sampled_actions": sum(h["sampled_actions"] for h in history),
             "learning_rate": lr, "history": history,
             "selection": "none; fixed checkpoints, no retries or reward/gate-based selection",
             "gradient_estimator": "REINFORCE on the causal first action; detached centered binary reward"}
    return {"waypoints": waypoints, "initial": initial, "start_state": start_state, "rollouts": rollouts, "lr": lr,
            "actions": torch.stack(actions),                                  # (updates, rollouts) sampled actions
            "trace": trace,
            "lineage": [{"run_id": RUN_ID, "step": s} for s in waypoint_steps], "audit": audit}


def replay_lineage(rl: dict, sample_prompts) -> dict:
    """``waypoint_lineage_replayed``: redo the RL from its stored start and find each waypoint in it.

    A fresh generator gets the stored start state; a copy of the pre-RL policy is
    trained with the same updates, rollouts and learning rate, and its parameters
    are kept after every step s = 0..updates.  Waypoint k is *found* at the step
    whose replayed parameters equal its own bit for bit.  The check holds when
    every waypoint is found exactly at the step its lineage names, so a snapshot
    frozen one step late, a mislabelled lineage or a missing update all fail it.
    """
    generator = torch.Generator().set_state(rl["start_state"])
    policy = copy.deepcopy(rl["initial"]).requires_grad_(True).train()
    optimizer = torch.optim.SGD(policy.parameters(), lr=rl["lr"])
    after = [flat_state(policy).clone()]                                      # after[s]: state after step s
    for _ in range(rl["audit"]["updates"]):
        reinforce_step(policy, sample_prompts(rl["rollouts"], generator), generator, optimizer)
        after.append(flat_state(policy).clone())
    found = []
    for w in rl["waypoints"]:
        ref = flat_state(w)
        found.append([s for s, p in enumerate(after) if torch.equal(p, ref)])
    named = [x["step"] for x in rl["lineage"]]
    ok = len(found) == len(named) and all(f == [s] for f, s in zip(found, named))
    return {"replayed_steps": [f[0] if len(f) == 1 else None for f in found], "waypoint_lineage_replayed": ok}


class FrozenLedger:
    """The frozen policies that later code could write to, each with its state at freezing
    (parameters and buffers, :func:`~litrepro.waypoint.model.flat_state`).

    Only modules that are *used* after freezing belong here (the waypoints read by
    distillation).  A private copy that nothing touches cannot change, and a delta
    of it would be a check that cannot fail.
    """

    def __init__(self, modules: dict[str, torch.nn.Module]):
        self.modules = dict(modules)
        self.references = {name: flat_state(m).clone() for name, m in self.modules.items()}

    def deltas(self) -> dict[str, float]:
        """``{name: ||state_now - state_frozen||_2}``; every value must be exactly 0."""
        return {name: float((flat_state(m) - self.references[name]).norm()) for name, m in self.modules.items()}
