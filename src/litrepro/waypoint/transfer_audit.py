"""Checks of the transfer regime (:mod:`litrepro.waypoint.transfer`), recomputed on its own records.

Each arm's first update is re-derived from what the stage recorded (generator states,
prompts, rollouts, gate, tensors before and after), with the reference forward pass of
:mod:`litrepro.waypoint.audit` and plain loops over tokens:

- ``first_update_replayed``: the prompts re-drawn from the recorded prompt-stream state
  with the contract's window rule, and every rollout re-sampled token by token from the
  student before the update, equal the recorded ones;
- ``gate_matches_reference``: the gate of every valid token, computed from Python floats
  by the arm's formula (1; straightness; |A|; straightness x |l_f - l_0|), or, for the
  shuffles, the straightness gates permuted by the permutation re-drawn from the arm's named
  gate stream (seed + :data:`GATE_STREAM`): ``shuffled`` by ``randperm(n)``, ``binned_shuffle``
  by ordering each equal-count |A| bin (the bins formed by a plain sort of |A| on the stage's
  grid) by ``rand(n)`` draws;
- ``update_matches_reference``: the parameter change equals -lr times the gradient of the
  reference loss (the gated surrogate from those floats, or the exact KL summed over the
  257 symbols position by position), and the recorded gradient norm is that gradient's;
- ``final_p_even_matches_reference``: the last point of the learning curve equals P(even
  first byte) of the final student by the reference forward pass.

Across arms: ``arms_paired`` (same start, same evaluation prompts, same first prompts
for arms with the same batch) and ``lr_matches_arm`` (the learning rate used is the one
the arm declares).  This module never imports the stage.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from litrepro.waypoint.audit import (GATE_TOL, REL_TOL, _generated_logps, _rel_gap, _replay_rollouts, _sub,
                                     contract_split, even_mass, ref_logits, ref_windows, sha256_state, straightness)


#: The transfer arms' named gate stream: seed + 41, fresh for each arm (written out again here, not read from
#: ``transfer.STREAMS``); the shuffles' permutations are re-drawn from it.
GATE_STREAM = 41


def _gate_reference(kind: str, positions, lw, ls, used: list[float], bins: int,
                    resolution: float, gate_stream: torch.Generator) -> tuple[list[float], float]:
    """(expected gates, gap) for the valid ``positions``.  For the shuffles, the permutation is re-drawn from
    ``gate_stream``: ``shuffled``, token i takes the gate of token randperm(n)[i]; ``binned_shuffle``, the tokens
    in rank order of |A| (rounded to ``resolution``, ties by position) form equal-count bins (rank r in bin
    r * bins // n), and the rank-r token takes the gate of the token whose key bin + u, u = rand(n)[r'], is r-th."""
    straight = [straightness(lw[0][b][t], lw[1][b][t], lw[2][b][t]) for b, t in positions]
    adv = [lw[2][b][t] - ls[b][t] for b, t in positions]
    if kind == "final_only":
        gates = [1.0] * len(positions)
    elif kind == "straightness":
        gates = straight
    elif kind == "abs_advantage":
        gates = [abs(a) for a in adv]
    elif kind == "straightness_x_magnitude":
        gates = [s * abs(lw[2][b][t] - lw[0][b][t]) for s, (b, t) in zip(straight, positions)]
    elif kind == "shuffled":
        gates = [straight[j] for j in torch.randperm(len(positions), generator=gate_stream).tolist()]
    elif kind == "binned_shuffle":
        n = len(positions)
        by_abs = sorted(range(n), key=lambda i: round(abs(adv[i]) / resolution))       # a plain stable sort on the grid
        u = torch.rand(n, generator=gate_stream, dtype=torch.float64).tolist()
        keys = [r * bins // n + u[r] for r in range(n)]                                 # bin of rank r, then its draw
        within = sorted(range(n), key=lambda r: keys[r])
        source = [0] * n
        for r in range(n):
            source[by_abs[r]] = by_abs[within[r]]
        gates = [straight[source[i]] for i in range(n)]
    else:
        return [float("nan")] * len(positions), 1.0
    return gates, max(abs(u - e) for u, e in zip(used, gates))


def check_first_update(record, *, kind: str, waypoints: list[dict[str, Tensor]], names: list[str], data: bytes,
                       batch: int, max_new_tokens: int, gate_mass: float, bins: int, resolution: float,
                       seed: int) -> dict:
    """The four per-arm checks' booleans and gaps for one arm's recorded first update (see the docstring);
    ``seed`` names the arm's gate stream."""
    train = contract_split(data, "train")
    before = {k: t.cpu() for k, t in record.before.items()}
    after = {k: t.cpu() for k, t in record.after.items()}
    r = record.rollouts
    tokens, valid, plen = r.tokens.cpu(), r.valid.cpu(), r.prompt_len
    prompts = ref_windows(train, batch, 1, torch.Generator().set_state(record.prompt_state))
    ref_tokens, ref_valid = _replay_rollouts(before, prompts, max_new_tokens,
                                             torch.Generator().set_state(record.sample_state))
    replayed = (torch.equal(prompts, record.prompts.cpu()) and torch.equal(ref_tokens, tokens)
                and torch.equal(ref_valid, valid))
    leaves = {k: before[k].clone().requires_grad_(k in names) for k in before}
    positions = valid.nonzero().tolist()
    if kind == "full_kl":
        z_s = ref_logits(leaves, tokens)[:, plen - 1:-1]                              # (B, N, V)
        with torch.no_grad():
            z_f = ref_logits(waypoints[-1], tokens)[:, plen - 1:-1]
        total = 0.0
        for b, t in positions:                                                       # one position at a time
            log_s = z_s[b, t] - torch.logsumexp(z_s[b, t], 0)                        # (V,)
            log_f = z_f[b, t] - torch.logsumexp(z_f[b, t], 0)
            total = total + (log_s.exp() * (log_s - log_f)).sum()                    # KL(student || final)
        loss, gate_gap = gate_mass * total / len(positions), 0.0 if record.gate is None else 1.0
    else:
        student = _generated_logps(leaves, tokens, plen)                              # (B, N) with grad
        with torch.no_grad():
            lw = [_generated_logps(w, tokens, plen).tolist() for w in waypoints]
        ls = student.detach().tolist()
        used = [float(record.gate[b, t]) for b, t in positions] if record.gate is not None else [float("nan")] * len(positions)
        gates, gate_gap = _gate_reference(kind, positions, lw, ls, used, bins, resolution,
                                          torch.Generator().manual_seed(seed + GATE_STREAM))
        scale = gate_mass / (sum(gates) / len(gates))
        weights = torch.zeros_like(student)
        for (b, t), g in zip(positions, gates):
            weights[b, t] = g * (lw[2][b][t] - ls[b][t])                             # g A, numbers
        loss = -scale / len(gates) * (weights * student).sum()
    grads = dict(zip(names, torch.autograd.grad(loss, [leaves[k] for k in names])))
    expected = {k: -record.lr * grads[k] for k in names}
    update_gap = _rel_gap(_sub(after, before, names), expected)
    norm = math.sqrt(sum(float((g ** 2).sum()) for g in grads.values()))
    norm_gap = abs(record.stats["gradient_norm"] - norm) / (norm if norm > 0 else 1.0)
    return {"checks": {"first_update_replayed": bool(replayed), "gate_matches_reference": gate_gap <= GATE_TOL,
                       "update_matches_reference": update_gap <= REL_TOL and norm_gap <= REL_TOL},
            "gaps": {"gate_max_gap": gate_gap, "update_relative_gap": update_gap, "gradient_norm_relative_gap": norm_gap}}


def check_final_point(final: dict[str, Tensor], prompts: Tensor, recorded_p_even: float) -> dict:
    """``final_p_even_matches_reference``: the curve's last P(even) against the reference forward pass."""
    ref = even_mass({k: t.cpu() for k, t in final.items()}, prompts.cpu())
    gap = abs(ref - recorded_p_even)
    return {"checks": {"final_p_even_matches_reference": gap <= 1e-10}, "gaps": {"final_p_even_gap": gap}}


def check_pairing(starts: dict[str, dict], first_prompts: dict[str, Tensor], batches: dict[str, int],
                  lrs: dict[str, float], declared_lrs: dict[str, float]) -> dict:
    """``arms_paired`` and ``lr_matches_arm`` across the arms of one seed."""
    start_hashes = {sha256_state(s) for s in starts.values()}
    same_batch_ok = True
    for arm, p in first_prompts.items():
        for other, q in first_prompts.items():
            if batches[arm] == batches[other] and not torch.equal(p, q):
                same_batch_ok = False
    lr_gap = max(abs(lrs[a] - declared_lrs[a]) for a in lrs)
    return {"checks": {"arms_paired": len(start_hashes) == 1 and same_batch_ok, "lr_matches_arm": lr_gap == 0.0},
            "gaps": {"distinct_starts": len(start_hashes), "lr_max_gap": lr_gap}}


#: The curriculum's rewards as plain predicates (the audit's own definitions, not the stage's).
CURRICULUM_REWARDS = {"even": lambda a: a < 256 and a % 2 == 0,
                      "lowercase": lambda a: 97 <= a <= 122,
                      "odd_lowercase": lambda a: 97 <= a <= 122 and a % 2 == 1}


def check_curriculum_rl(rl: dict, data: bytes, *, schedule: list[str], prompt_len: int) -> dict:
    """The curriculum RL (:mod:`litrepro.waypoint.curriculum`), update by update, from its recorded states:

    - ``curriculum_rl_replayed``: prompts and actions re-drawn from the recorded generator state;
    - ``curriculum_reward_matches_schedule``: each update's logged reward kind is the schedule's, and its mean
      reward is the loop over its actions of that kind's predicate;
    - ``curriculum_update_matches_reference``: the update equals -lr times the REINFORCE gradient written out
      for all rollouts at once, A_i = R_i - mean R with the loop's rewards.
    """
    train = contract_split(data, "train")
    trace, hist = rl["trace"], rl["audit"]["history"]
    names = [k for k in ("embed", "head_w", "head_b") if k in dict(rl["initial"].named_parameters())]
    replay_bad, reward_gap, update_gap = 0, 0.0, 0.0
    kinds_ok = len(hist) == len(schedule) == len(trace["prompts"])
    for k, h in enumerate(hist):
        before = {x: t.cpu() for x, t in trace["states"][k].items()}
        after = {x: t.cpu() for x, t in trace["states"][k + 1].items()}
        prompts, actions = trace["prompts"][k].cpu(), rl["actions"][k].cpu()
        g = torch.Generator().set_state(trace["generator_states"][k])
        redrawn = ref_windows(train, rl["rollouts"], prompt_len, g)
        with torch.no_grad():
            probs = torch.softmax(ref_logits(before, redrawn)[:, -1], -1)
        resampled = torch.multinomial(probs, 1, generator=g)[:, 0]
        replay_bad += int(not (torch.equal(redrawn, prompts) and torch.equal(resampled, actions)))
        kind = schedule[k] if k < len(schedule) else None
        kinds_ok = kinds_ok and h.get("reward") == kind
        acts = actions.tolist()
        rewards = [1.0 if CURRICULUM_REWARDS[kind](a) else 0.0 for a in acts] if kind in CURRICULUM_REWARDS else [0.0] * len(acts)
        mean = sum(rewards) / len(rewards)
        reward_gap = max(reward_gap, abs(h["mean_rule_reward"] - mean))
        n, plen = prompts.shape
        a = torch.tensor(acts)
        hidden = before["embed"][prompts].sum(1) / plen                                  # (n, D)
        dz = torch.softmax(hidden @ before["head_w"].T + before["head_b"], 1)             # (n, V)
        dz[torch.arange(n), a] -= 1.0
        dz = dz * ((torch.tensor(rewards, dtype=torch.float64) - mean) / n)[:, None]     # -(A / n)(onehot - pi)
        dh = dz @ before["head_w"] / plen
        grad = {"embed": torch.zeros_like(before["embed"]).index_add_(0, prompts.reshape(-1), dh.repeat_interleave(plen, 0)),
                "head_w": dz.T @ hidden, "head_b": dz.sum(0)}
        expected = {x: -rl["lr"] * grad[x] for x in names}
        update_gap = max(update_gap, _rel_gap(_sub(after, before, names), expected))
    return {"checks": {"curriculum_rl_replayed": replay_bad == 0,
                       "curriculum_reward_matches_schedule": kinds_ok and reward_gap == 0.0,
                       "curriculum_update_matches_reference": update_gap <= REL_TOL},
            "gaps": {"curriculum_updates_not_replayed": replay_bad, "curriculum_reward_gap": reward_gap,
                     "curriculum_update_relative_gap": update_gap}}
