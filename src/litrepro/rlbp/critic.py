"""The two-head critic and its TD regression with opposite backups.

For a logged transition (s, a, r^v, c, s', d) and discount gamma:

    y^v = r^v + gamma (1 - d) max_{a'} Qbar^v(s', a')     value: a reward, backed up with max
    y^c = c   + gamma (1 - d) min_{a'} Qbar^c(s', a')     CPC:   a cost,   backed up with min
    L^v = mean (Q^v(s, a) - y^v)^2,   L^c = mean (Q^c(s, a) - y^c)^2

Qbar is a target network copied every ``target_update_every`` steps.  The
targets are built from the rewards the simulator actually produced; nothing is
regressed onto synthetic labels.

The max/min pair above is the seed's (``opposite_backup_directions``) and the
default ``critic_backup``.  Three other backups are our reconstruction, kept as
arms of the backup study (``litrepro.rlbp.study``), each with keep = gamma (1 - d):

    fused_greedy:  a* = argmax_a' Qbar^v(s', a') - lambda Qbar^c(s', a')
                   y^v = r^v + keep Qbar^v(s', a*),   y^c = c + keep Qbar^c(s', a*)
    policy:        y^v = r^v + keep sum_a' pi(a'|s') Qbar^v(s', a'),  y^c likewise with Qbar^c
                   (pi: the served top-k policy, or mu before an actor exists)
    none:          y^v = r^v,  y^c = c          (gamma = 0: no bootstrapping)
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor, nn

from litrepro.rlbp.pid import N_ACTIONS

F64 = torch.float64


@dataclass(frozen=True)
class Transitions:
    """A flat batch of logged transitions (N of them)."""

    state: Tensor          # (N, F)
    action: Tensor         # (N,) long
    propensity: Tensor     # (N,) behaviour probability of ``action``
    value_reward: Tensor   # (N,)
    cpc_cost: Tensor       # (N,)
    reward: Tensor         # (N,) value + lambda * CPC reduction
    cpc: Tensor            # (N,) the segment's smoothed CPC
    target_cpc: Tensor     # (N,) the campaign's target CPC tau
    next_state: Tensor     # (N, F)
    done: Tensor           # (N,)
    campaign: Tensor       # (N,) long: the campaign each transition was logged for

    def __len__(self) -> int:
        return self.action.shape[0]

    def index(self, idx: Tensor) -> "Transitions":
        return Transitions(*(getattr(self, f)[idx] for f in self.__dataclass_fields__))

    def with_permuted_rewards(self, generator: torch.Generator) -> "Transitions":
        """The same states and actions with (r^v, c, r) shuffled across transitions: the control
        regression of ``actual_reward_regression_update``, whose targets carry no state-action signal."""
        perm = torch.randperm(len(self), generator=generator).to(self.action.device)   # (N,)
        return dataclasses.replace(self, value_reward=self.value_reward[perm], cpc_cost=self.cpc_cost[perm],
                                   reward=self.reward[perm])


class TwoHeadCritic(nn.Module):
    """MLP trunk with a value head Q^v (B, 9) and a CPC head Q^c (B, 9)."""

    def __init__(self, n_features: int, hidden: int):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(n_features, hidden, dtype=F64), nn.Tanh(),
                                   nn.Linear(hidden, hidden, dtype=F64), nn.Tanh())
        self.heads = nn.Linear(hidden, 2 * N_ACTIONS, dtype=F64)

    def forward(self, state: Tensor) -> tuple[Tensor, Tensor]:
        out = self.heads(self.trunk(state))                  # (B, 18)
        return out[:, :N_ACTIONS], out[:, N_ACTIONS:]        # (B, 9) value, (B, 9) CPC


BACKUPS = ("max_min", "fused_greedy", "policy", "none")

#: next-state policy for the ``policy`` backup: states (B, F) -> probabilities (B, 9)
NextPolicy = Callable[[Tensor], Tensor]


def backup_targets(value_reward: Tensor, cpc_cost: Tensor, q_value_next: Tensor, q_cpc_next: Tensor,
                   done: Tensor, gamma: float, *, kind: str = "max_min", lam: float = 0.0,
                   next_probs: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The TD targets (y^v, y^c) of backup ``kind`` (module docstring); max_min is the seed's:
    y^v = r^v + gamma (1-d) max Q^v(s', .);  y^c = c + gamma (1-d) min Q^c(s', .).

    Args: rewards/costs/done (B,), next-state Q tables (B, 9), ``next_probs`` (B, 9) for
    ``policy``, ``lam`` for ``fused_greedy``.  Returns (B,), (B,).
    """
    keep = gamma * (1.0 - done)                                      # (B,)
    if kind == "max_min":
        return (value_reward + keep * q_value_next.max(dim=1).values,   # max backup for a reward
                cpc_cost + keep * q_cpc_next.min(dim=1).values)         # min backup for a cost
    if kind == "fused_greedy":
        a_star = (q_value_next - lam * q_cpc_next).argmax(dim=1, keepdim=True)            # (B, 1) one next action
        return (value_reward + keep * q_value_next.gather(1, a_star).squeeze(1),
                cpc_cost + keep * q_cpc_next.gather(1, a_star).squeeze(1))
    if kind == "policy":
        if next_probs is None:
            raise ValueError("the 'policy' backup needs next_probs (B, 9)")
        return (value_reward + keep * (next_probs * q_value_next).sum(1),
                cpc_cost + keep * (next_probs * q_cpc_next).sum(1))
    if kind == "none":
        return value_reward.clone(), cpc_cost.clone()
    raise ValueError(f"unknown critic_backup {kind!r} (known: {', '.join(BACKUPS)})")


def backup_reference(value_reward, cpc_cost, q_value_next, q_cpc_next, done, gamma, *, kind: str = "max_min",
                     lam: float = 0.0, next_probs=None) -> tuple[list, list]:
    """The same backups as plain Python loops over rows and actions (for checks)."""
    y_value, y_cpc = [], []
    for i in range(len(value_reward)):
        qv, qc = [float(x) for x in q_value_next[i]], [float(x) for x in q_cpc_next[i]]
        if kind == "max_min":
            next_v, next_c = float("-inf"), float("inf")
            for a in range(len(qv)):
                next_v, next_c = max(next_v, qv[a]), min(next_c, qc[a])
        elif kind == "fused_greedy":
            best = 0
            for a in range(1, len(qv)):
                if qv[a] - lam * qc[a] > qv[best] - lam * qc[best]:
                    best = a
            next_v, next_c = qv[best], qc[best]
        elif kind == "policy":
            probs = [float(x) for x in next_probs[i]]
            next_v = next_c = 0.0
            for a in range(len(qv)):
                next_v += probs[a] * qv[a]
                next_c += probs[a] * qc[a]
        else:                                                        # none
            next_v = next_c = 0.0
        keep = gamma * (1.0 - float(done[i])) if kind != "none" else 0.0
        y_value.append(float(value_reward[i]) + keep * next_v)
        y_cpc.append(float(cpc_cost[i]) + keep * next_c)
    return y_value, y_cpc


def td_losses(critic: TwoHeadCritic, target: TwoHeadCritic, batch: Transitions, gamma: float, *,
              kind: str = "max_min", lam: float = 0.0, policy: NextPolicy | None = None) -> tuple[Tensor, Tensor]:
    """(L^v, L^c) on ``batch``; targets from ``target`` under no_grad, by backup ``kind``."""
    with torch.no_grad():
        qv_next, qc_next = target(batch.next_state)                                  # (B, 9) each
        probs = policy(batch.next_state) if kind == "policy" else None               # (B, 9)
        y_value, y_cpc = backup_targets(batch.value_reward, batch.cpc_cost, qv_next, qc_next, batch.done, gamma,
                                        kind=kind, lam=lam, next_probs=probs)
    q_value, q_cpc = critic(batch.state)                                             # (B, 9) each
    taken = batch.action[:, None]
    loss_value = (q_value.gather(1, taken).squeeze(1) - y_value).pow(2).mean()
    loss_cpc = (q_cpc.gather(1, taken).squeeze(1) - y_cpc).pow(2).mean()
    return loss_value, loss_cpc


def td_loss_reference(critic: TwoHeadCritic, target: TwoHeadCritic, batch: Transitions, gamma: float, *,
                      kind: str = "max_min", lam: float = 0.0, policy: NextPolicy | None = None) -> tuple[float, float]:
    """The same (L^v, L^c) as :func:`td_losses`, written out with plain loops (for checks).

    It reads the two heads straight from the output layer (columns 0-8 value, 9-17
    CPC), backs up with :func:`backup_reference`, and picks Q(s, a) row by row, so a
    fault in ``forward`` or in :func:`td_losses` (a swapped head, a max backup for
    the cost) makes the two disagree.
    """
    n = N_ACTIONS
    with torch.no_grad():
        now = critic.heads(critic.trunk(batch.state)).tolist()                   # N rows of 18
        nxt = target.heads(target.trunk(batch.next_state)).tolist()              # N rows of 18
        probs = policy(batch.next_state).tolist() if kind == "policy" else None  # N rows of 9
    y_value, y_cpc = backup_reference(batch.value_reward.tolist(), batch.cpc_cost.tolist(), [r[:n] for r in nxt],
                                      [r[n:] for r in nxt], batch.done.tolist(), gamma, kind=kind, lam=lam,
                                      next_probs=probs)
    sq_value = sq_cpc = 0.0
    for i, a in enumerate(batch.action.tolist()):
        sq_value += (now[i][a] - y_value[i]) ** 2
        sq_cpc += (now[i][n + a] - y_cpc[i]) ** 2
    return sq_value / len(batch), sq_cpc / len(batch)


def td_loss_reference_error(critic: TwoHeadCritic, batch: Transitions, gamma: float, rows: int = 512,
                            target: TwoHeadCritic | None = None, **backup) -> float:
    """Largest relative gap between :func:`td_losses` and :func:`td_loss_reference` on the first
    ``rows`` transitions of ``batch`` (``backup``: kind, lam, policy).  ``target`` should be a
    network other than ``critic`` (the pipeline passes the control critic), so that TD losses
    which ignore their target argument and bootstrap from the online critic disagree."""
    target = critic if target is None else target
    part = batch.index(torch.arange(min(rows, len(batch)), device=batch.action.device))
    with torch.no_grad():
        losses = [float(x) for x in td_losses(critic, target, part, gamma, **backup)]
    reference = td_loss_reference(critic, target, part, gamma, **backup)
    return max(abs(a - b) / max(abs(b), 1e-300) for a, b in zip(losses, reference))


def heldout_td_loss(critic: TwoHeadCritic, batch: Transitions, gamma: float, **backup) -> tuple[float, float]:
    """TD loss of ``critic`` on a held-out batch, bootstrapping from itself."""
    with torch.no_grad():
        lv, lc = td_losses(critic, critic, batch, gamma, **backup)
    return float(lv), float(lc)


def _flat(module: nn.Module) -> Tensor:
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()])


def sync_target(target: nn.Module, critic: nn.Module) -> None:
    """Qbar <- Q: copy the critic's weights into the target network."""
    target.load_state_dict(critic.state_dict())


def optimiser_settings(opt: torch.optim.Optimizer, module: nn.Module) -> dict:
    """What an optimiser actually used, read back from it after training: its (single) parameter
    group's lr, betas, weight decay, eps and amsgrad; whether it held exactly ``module``'s parameters;
    and Adam's own step counters (min and max over the parameters)."""
    groups = opt.param_groups
    held = [p for g in groups for p in g["params"]]
    steps = [float(opt.state[p]["step"]) for p in held if "step" in opt.state[p]]
    g = groups[0]
    return {"optimiser": type(opt).__name__, "param_groups": len(groups), "lr": g["lr"], "betas": list(g["betas"]),
            "weight_decay": g["weight_decay"], "eps": g["eps"], "amsgrad": g["amsgrad"],
            "holds_all_parameters": len(held) == len(list(module.parameters()))
            and {id(p) for p in held} == {id(p) for p in module.parameters()},
            "adam_steps_min": min(steps) if steps else 0.0, "adam_steps_max": max(steps) if steps else 0.0}


def train_critic(critic: TwoHeadCritic, train: Transitions, heldout: Transitions, *, steps: int, lr: float,
                 batch_size: int, gamma: float, target_update_every: int, generator: torch.Generator,
                 kind: str = "max_min", lam: float = 0.0, policy: NextPolicy | None = None,
                 first_step: int = 0) -> dict:
    """TD regression; returns the loss curves and the held-out losses before and after.

    Returns a dict with ``td_loss_value``/``td_loss_cpc`` (steps,) training curves,
    ``heldout_before``/``heldout_after`` as (value, cpc) pairs,
    ``parameter_change`` (L2 distance the critic's weights moved),
    ``trained_campaigns``, the campaigns of the transitions its minibatches drew,
    ``heldout_evaluated_campaigns``, those of the batch its held-out losses were measured on,
    ``head_changes``: how far each head's output weights moved (value, CPC), ``drawn_rows``
    and ``draws``: distinct training rows drawn and draws made, ``drawn_sha256``: a hash of
    the rows in draw order, and
    ``target_lag_error``: the audit of the target network.  At every step the audit
    keeps its own copy of the critic's weights from the last step s with
    s % target_update_every == 0 (taken before that step's update, as the schedule
    says the copy happens) and measures max |target - copy| over all steps; it is 0
    exactly when the target was synced on schedule and never otherwise written.
    ``first_step`` continues the schedule of an earlier call (the ``policy`` backup's rounds).
    """
    backup = dict(kind=kind, lam=lam, policy=policy)
    start = [p.detach().clone() for p in critic.parameters()]
    before = heldout_td_loss(critic, heldout, gamma, **backup)
    target = copy.deepcopy(critic).requires_grad_(False)
    opt = torch.optim.Adam(critic.parameters(), lr=lr)
    curve_v, curve_c, drawn, syncs = [], [], [], []
    scheduled, lag = None, 0.0
    for step in range(first_step, first_step + steps):
        if step % target_update_every == 0 or scheduled is None:   # the audit's own copy, by the schedule,
            scheduled = _flat(critic)                              # taken before the copy is made
        if step % target_update_every == 0:
            sync_target(target, critic)
            syncs.append(step)
        lag = max(lag, float((_flat(target) - scheduled).abs().max()))
        idx = torch.randint(len(train), (batch_size,), generator=generator).to(train.action.device)
        drawn.append(idx)
        loss_v, loss_c = td_losses(critic, target, train.index(idx), gamma, **backup)
        opt.zero_grad(set_to_none=True)
        (loss_v + loss_c).backward()
        opt.step()
        curve_v.append(loss_v.item())
        curve_c.append(loss_c.item())
    after = heldout_td_loss(critic, heldout, gamma, **backup)
    change = torch.sqrt(sum(((p.detach() - q) ** 2).sum() for p, q in zip(critic.parameters(), start)))
    head_w0, head_b0 = start[-2], start[-1]                                           # (18, H), (18,) output layer
    moved = (critic.heads.weight.detach() - head_w0).abs().sum(1) + (critic.heads.bias.detach() - head_b0).abs()  # (18,)
    rows = torch.cat(drawn) if drawn else torch.zeros(0, dtype=torch.long)
    return {"td_loss_value": curve_v, "td_loss_cpc": curve_c, "heldout_before": before,
            "heldout_after": after, "parameter_change": float(change), "target_lag_error": lag,
            "head_changes": (float(moved[:N_ACTIONS].sum()), float(moved[N_ACTIONS:].sum())),
            "drawn_rows": int(torch.unique(rows).numel()), "draws": int(rows.numel()),
            "drawn_sha256": hashlib.sha256(rows.cpu().numpy().tobytes()).hexdigest(),
            "heldout_evaluated_campaigns": torch.unique(heldout.campaign).tolist(),
            "trained_campaigns": torch.unique(train.campaign[torch.cat(drawn)]).tolist() if drawn else [],
            "rows": rows.cpu(),
            "settings": optimiser_settings(opt, critic) | {
                "steps": len(curve_v), "first_step": first_step, "batch_sizes": sorted({int(i.numel()) for i in drawn}),
                "gamma": gamma, "target_syncs": syncs, "kind": kind, "lam": lam}}
