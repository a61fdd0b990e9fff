"""Per-step and per-token views of the ``waypoint_opd`` run, for its figures and its explorer.

Scope: read-only recomputations on the run's own objects; nothing here trains the
student or changes a waypoint.

- :func:`lineage_parity`: replays the teacher's RL from its stored start (as
  :func:`litrepro.waypoint.teacher.replay_lineage` does) and records, after every
  update s = 0..U, the exact P(even first byte) on validation prompts,

      p_s = mean_prompts sum_{b even, b < 256} softmax(policy_s(prompt))_b,

  and which replayed step each waypoint equals bit for bit.
- :func:`gate_tokens`: the per-token gate of a batch of student rollouts, with the
  RL-sampling class of each token (the byte was sampled by the RL in leg 1 only,
  leg 2 only, both legs or neither), the per-token form of
  :func:`litrepro.waypoint.experiment.gate_legs`'s class means.
"""

from __future__ import annotations

import copy

import torch

from litrepro.waypoint.config import WaypointConfig
from litrepro.waypoint.model import BytePolicy, flat_state
from litrepro.waypoint.opd import GATE_KINDS, compute_gate, sample_rollouts, waypoint_logps
from litrepro.waypoint.teacher import reinforce_step

#: RL-sampling classes of a token (see :func:`gate_tokens`), in display order.
CLASSES = ("both", "one", "neither")


@torch.no_grad()
def expected_parity(policy: BytePolicy, prompts: torch.Tensor) -> float:
    """Exact P(even first byte) after ``prompts`` (n, P), averaged over the prompts."""
    probs = torch.softmax(policy(prompts)[:, -1], -1)                                   # (n, V)
    return float(probs[:, :256:2].sum(-1).mean())


def lineage_parity(cfg: WaypointConfig, rl: dict, corpus, device: torch.device, seed: int, *,
                   prompts: int = 256) -> dict:
    """Replay the RL and measure P(even first byte) after each update.

    Returns ``steps`` [0..U], ``expected_parity_rate`` (U + 1,), ``sampled_reward``
    (U,) as the run logged it, and ``waypoint_found_at``: for each waypoint, the
    replayed steps whose parameters equal it (one step, its lineage's, when the
    replay is faithful).
    """
    eval_gen = torch.Generator().manual_seed(seed + 31)
    eval_prompts = corpus.validation_windows(prompts, cfg.prompt_len, eval_gen, "lineage_view").to(device)   # (n, P)
    generator = torch.Generator().set_state(rl["start_state"])
    policy = copy.deepcopy(rl["initial"]).requires_grad_(True).train()
    optimizer = torch.optim.SGD(policy.parameters(), lr=rl["lr"])
    states, parity = [flat_state(policy).clone()], [expected_parity(policy, eval_prompts)]
    for _ in range(rl["audit"]["updates"]):
        batch = corpus.train_windows(rl["rollouts"], cfg.prompt_len, generator, "lineage_replay").to(device)
        reinforce_step(policy, batch, generator, optimizer)
        states.append(flat_state(policy).clone())
        parity.append(expected_parity(policy, eval_prompts))
    found = [[s for s, p in enumerate(states) if torch.equal(p, flat_state(w))] for w in rl["waypoints"]]
    return {"steps": list(range(len(parity))), "expected_parity_rate": parity,
            "sampled_reward": [h["mean_rule_reward"] for h in rl["audit"]["history"]],
            "waypoint_steps": [x["step"] for x in rl["lineage"]], "waypoint_found_at": found}


@torch.no_grad()
def gate_tokens(cfg: WaypointConfig, student: BytePolicy, waypoints: list[BytePolicy], corpus, device: torch.device,
                seed: int, rl_actions: torch.Tensor, *, rollouts: int = 64, gate_kind: str = "straightness") -> dict:
    """Sample ``rollouts`` student rollouts as :func:`~litrepro.waypoint.experiment.gate_legs` does.

    Returns the rollouts' ``generated`` bytes (B, N) and ``valid`` mask, the gate of
    every position (B, N) under ``gate_kind``, and per valid token its ``gate`` and
    ``klass`` (index into :data:`CLASSES`).  With the straightness gate and the same
    seed, the class means equal ``gate_legs``'s ``gate_sampled_*``.
    """
    if gate_kind not in GATE_KINDS:
        raise ValueError(f"unknown gate kind {gate_kind!r} (known: {', '.join(GATE_KINDS)})")
    g = torch.Generator().manual_seed(seed + 29)
    prompts = corpus.train_windows(rollouts, cfg.prompt_len, g, "gate_legs").to(device)      # (B, P)
    r = sample_rollouts(student, prompts, cfg.max_new_tokens, g)
    lp = waypoint_logps(waypoints, r)                                                    # (3, B, N)
    gate = compute_gate(gate_kind, lp, r.valid, torch.Generator().manual_seed(seed + 23))  # (B, N)
    mid, end = cfg.waypoint_steps[1], cfg.waypoint_steps[2]
    acts = rl_actions.to(device)                                                         # (updates, rollouts)
    y = r.generated[r.valid]                                                             # (n_valid,)
    in1 = torch.isin(y, acts[:mid].reshape(-1))
    in2 = torch.isin(y, acts[mid:end].reshape(-1))
    klass = torch.where(in1 & in2, 0, torch.where(in1 ^ in2, 1, 2))                       # (n_valid,)
    return {"generated": r.generated.cpu(), "valid": r.valid.cpu(), "gate_grid": gate.cpu(),
            "gate": gate[r.valid].cpu(), "klass": klass.cpu(), "gate_kind": gate_kind}


def class_summary(tokens: dict) -> dict:
    """Share of tokens and mean gate per RL-sampling class (NaN for an empty class)."""
    out = {}
    for i, name in enumerate(CLASSES):
        m = tokens["klass"] == i
        out[f"share_sampled_{name}"] = float(m.float().mean())
        out[f"gate_sampled_{name}"] = float(tokens["gate"][m].mean()) if bool(m.any()) else float("nan")
    return out
