"""The actor: a policy over the nine actions with exactly top-k support.

Fused preference (lambda is the ``lambda_cpc`` parameter):

    S(s, a) = Q^v(s, a) - lambda Q^c(s, a)

Training objective (our reconstruction): the actor regresses onto the critic's
Boltzmann policy.  With Shat the per-state standardised, detached scores and a
temperature T (``actor_temperature``):

    q(a | s)  = softmax_a(Shat(s, a) / T)                         (target, no gradient)
    L(theta)  = - mean_s (1/9) sum_a q(a | s) log softmax(z_theta(s))_a
              = mean_s KL(q(.|s) || pi_theta(.|s)) / 9 + const     (forward KL, target first)

Its gradient in the logits is (pi_theta - q) / 9, which does not vanish when the
softmax saturates on a wrong action.  The expected-score objective we used before,
- mean_s sum_a pi_theta(a|s) Shat(s, a), has gradient pi (Shat - E_pi Shat), which does:
on seed 53 its actor locked onto two actions and scored below a value-only actor on
the fused objective (``fusion_changes_preference`` false).  The 1/9 (a mean over
actions) only sets the loss scale, which Adam ignores, so it is a free constant; we
chose it so that the first update's gradient norm (``actor_gradient_norm``) lands on
the recorded scale.  That is a calibration of a free constant, not evidence.

Served policy: keep the k largest logits, renormalise, zero the rest:

    pi(a | s) = exp z_a / sum_{b in topk(z)} exp z_b   if a in topk(z), else 0
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from litrepro.rlbp.critic import Transitions, TwoHeadCritic, optimiser_settings
from litrepro.rlbp.pid import N_ACTIONS

F64 = torch.float64


class Actor(nn.Module):
    """MLP from state (B, F) to action logits (B, 9)."""

    def __init__(self, n_features: int, hidden: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_features, hidden, dtype=F64), nn.Tanh(),
                                 nn.Linear(hidden, N_ACTIONS, dtype=F64))

    def forward(self, state: Tensor) -> Tensor:
        return self.net(state)


def fused_scores(q_value: Tensor, q_cpc: Tensor, lam: float) -> Tensor:
    """S = Q^v - lambda Q^c; (B, 9)."""
    return q_value - lam * q_cpc


def top_k_policy(logits: Tensor, k: int) -> Tensor:
    """(B, 9) probabilities with exactly ``k`` non-zeros per row (masked softmax)."""
    if not 1 <= k <= logits.shape[-1]:
        raise ValueError(f"top_k = {k} must be between 1 and {logits.shape[-1]}")
    keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, logits.topk(k, dim=-1).indices, True)
    return torch.softmax(logits.masked_fill(~keep, float("-inf")), dim=-1)


def support_is_exact_top_k(probs: Tensor, logits: Tensor, k: int) -> bool:
    """``exact_top_k_support``: k non-zeros per row, and they are the k largest logits."""
    nonzero = probs > 0
    top = torch.zeros_like(nonzero).scatter(-1, logits.topk(k, dim=-1).indices, True)
    return bool((nonzero.sum(-1) == k).all() and (nonzero == top).all())


def row_mass_error(probs: Tensor) -> float:
    """``policy_row_mass_error`` = max_s |sum_a pi(a|s) - 1|."""
    return float((probs.sum(-1) - 1.0).abs().max())


def actor_loss(logits: Tensor, scores: Tensor, temperature: float) -> Tensor:
    """- mean_s mean_a q(a|s) log pi(a|s), q = softmax(Shat / T); ``logits``, ``scores`` (B, 9), scores detached."""
    s = scores.detach()
    s_hat = (s - s.mean(-1, keepdim=True)) / (s.std(-1, keepdim=True) + 1e-8)   # (B, 9) per-state standardised
    target = torch.softmax(s_hat / temperature, dim=-1)                          # (B, 9) q, the critic's Boltzmann policy
    return -(target * torch.log_softmax(logits, dim=-1)).mean(-1).mean()         # forward KL(q || pi) / 9 + const


def train_actor(actor: Actor, critic: TwoHeadCritic, batch: Transitions, *, steps: int, lr: float,
                lam: float, batch_size: int, generator: torch.Generator, temperature: float = 0.25) -> dict:
    """Fit the actor to the fused critic scores on minibatches of ``batch.state`` (N, F).

    Returns ``loss`` (steps,) and ``gradient_norms`` (steps,), the L2 norm of the
    full actor gradient before each update, ``trained_campaigns``: the campaigns
    of the rows its minibatches actually drew, ``drawn_rows``: how many distinct rows
    they drew, and ``first_step``: the first minibatch's row indices and the logits the
    actor gave them (for :func:`~litrepro.rlbp.experiment.actor_loss_reference_error`).
    """
    states = batch.state                                                               # (N, F)
    drawn = []
    with torch.no_grad():
        scores = fused_scores(*critic(states), lam)                                   # (N, 9)
    opt = torch.optim.Adam(actor.parameters(), lr=lr)
    losses, norms = [], []
    first = None
    for _ in range(steps):
        idx = torch.randint(states.shape[0], (batch_size,), generator=generator).to(states.device)
        drawn.append(idx)
        logits = actor(states[idx])                                                    # (B, 9)
        if first is None:
            first = {"rows": idx.clone(), "logits": logits.detach().clone()}
        loss = actor_loss(logits, scores[idx], temperature)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norms.append(float(torch.sqrt(sum((p.grad ** 2).sum() for p in actor.parameters()))))
        opt.step()
        losses.append(loss.item())
    rows = torch.cat(drawn) if drawn else torch.zeros(0, dtype=torch.long)
    used = torch.unique(batch.campaign[rows]).tolist() if drawn else []
    return {"loss": losses, "gradient_norms": norms, "trained_campaigns": used, "first_step": first,
            "drawn_rows": int(torch.unique(rows).numel()), "draws": int(rows.numel()), "rows": rows.cpu(),
            "settings": optimiser_settings(opt, actor) | {
                "steps": len(losses), "batch_sizes": sorted({int(i.numel()) for i in drawn}),
                "temperature": temperature, "lam": lam}}

