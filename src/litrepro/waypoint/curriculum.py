"""A teacher whose RL is not monotone: a two-phase curriculum that forgets (issue 30, item 5).

A reconstruction beyond the seed.  The seed's teacher RL rewards one thing throughout, so no
waypoint holds a preference that the final one gives back, and the gate can only reweight the final
teacher's advantage.  Here the RL changes its reward half-way (:data:`SCHEDULE`):

    updates 1-4:  R(a) = 1[a is an even byte]                          (the seed's parity reward)
    updates 5-8:  R(a) = 1[a is an odd lowercase ASCII letter]         (a, c, e, ..., y)

with the REINFORCE of :mod:`litrepro.waypoint.teacher` (centred reward, plain SGD).  The middle
waypoint (after update 4) holds the parity preference; the second phase moves mass to odd letters and
away from the even bytes the first phase raised, so that the final snapshot is meant to forget it (the
study's check ``phase_two_raises_odd_letters`` compares the final waypoint with waypoint 0, not with the
middle one where the second phase starts, so it does not isolate the second phase; no run of it is
committed).  Tokens gained in phase 1 and lost in phase 2 are the non-monotone ones the straightness
gate turns down.  The question the study asks: does the gate keep more of what the
middle waypoint knew (P(even first byte)) while transferring what the final one learned
(P(odd lowercase first byte)), beyond what its step size and its coupling with |A| explain?

    letters_tf   = (P_odd_lower(student) - P_odd_lower(w0)) / (P_odd_lower(wf) - P_odd_lower(w0))
    even_kept    = (P_even(student) - P_even(w0)) / (P_even(wm) - P_even(w0))

(``even_kept`` of the final teacher itself says how much of the first phase it forgot.)
"""

from __future__ import annotations

import copy

import torch

from litrepro.waypoint.model import EOS, BytePolicy
from litrepro.waypoint.teacher import _state, freeze

#: The reward of each RL update, in order (8 updates: the seed's count).
SCHEDULE = ("even",) * 4 + ("odd_lowercase",) * 4
WAYPOINT_STEPS = [0, 4, 8]


def reward(kind: str, actions: torch.Tensor) -> torch.Tensor:
    """1.0 where the action earns reward ``kind`` (``even``: an even byte; ``lowercase``: a byte in 97..122)."""
    if kind == "even":
        return ((actions < EOS) & (actions % 2 == 0)).float()
    if kind == "lowercase":
        return ((actions >= 97) & (actions <= 122)).float()
    if kind == "odd_lowercase":
        return ((actions >= 97) & (actions <= 122) & (actions % 2 == 1)).float()
    raise ValueError(f"unknown reward {kind!r}")


def curriculum_step(policy: BytePolicy, prompts: torch.Tensor, generator: torch.Generator,
                    optimizer: torch.optim.Optimizer, kind: str) -> tuple[dict, torch.Tensor]:
    """One REINFORCE update on the first action after each prompt (n, P), rewarded by ``kind``."""
    logits = policy(prompts)[:, -1]                                                   # (n, V)
    actions = torch.multinomial(torch.softmax(logits.detach(), -1).cpu(), 1, generator=generator).squeeze(1)
    actions = actions.to(prompts.device)                                              # (n,)
    r = reward(kind, actions)                                                         # (n,)
    advantage = (r - r.mean()).detach()                                               # centred, detached
    logp = torch.log_softmax(logits, -1).gather(1, actions[:, None]).squeeze(1)       # (n,)
    loss = -(advantage * logp).mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return {"sampled_actions": int(actions.numel()), "mean_rule_reward": float(r.mean()), "reward": kind}, actions


def run_curriculum_rl(teacher: BytePolicy, sample_prompts, generator: torch.Generator, *, rollouts: int,
                      lr: float, schedule=SCHEDULE, waypoint_steps=WAYPOINT_STEPS) -> dict:
    """The curriculum RL, freezing waypoints; the record has the keys of ``teacher.run_teacher_rl``'s."""
    start_state = generator.get_state()
    initial = freeze(teacher)
    optimizer = torch.optim.SGD(teacher.parameters(), lr=lr)
    snapshots = {0: freeze(teacher)} if 0 in waypoint_steps else {}
    history, actions = [], []
    trace = {"generator_states": [], "prompts": [], "states": [_state(teacher)]}
    for step, kind in enumerate(schedule, start=1):
        trace["generator_states"].append(generator.get_state())
        prompts = sample_prompts(rollouts, generator)                                 # (rollouts, P)
        trace["prompts"].append(prompts)
        stats, acts = curriculum_step(teacher, prompts, generator, optimizer, kind)
        actions.append(acts)
        history.append({"step": step, **stats})
        trace["states"].append(_state(teacher))
        if step in waypoint_steps:
            snapshots[step] = freeze(teacher)
    return {"waypoints": [snapshots[s] for s in waypoint_steps], "initial": initial, "start_state": start_state,
            "rollouts": rollouts, "lr": lr, "actions": torch.stack(actions), "trace": trace, "schedule": list(schedule),
            "lineage": [{"run_id": "curriculum-even-then-odd-lowercase", "step": s} for s in waypoint_steps],
            "audit": {"updates": len(schedule), "rollouts_per_update": rollouts, "learning_rate": lr, "history": history}}


def copy_student(rl: dict) -> BytePolicy:
    return copy.deepcopy(rl["initial"]).requires_grad_(True).train()
