"""The actor: a policy over the nine actions with exactly top-k support.

Fused preference (lambda is the ``lambda_cpc`` parameter):

    S(s, a) = Q^v(s, a) - lambda Q^c(s, a)

Training objective (an all-actions policy gradient on the critic's scores;
our reconstruction), with Shat the per-state standardised, detached scores:

    L(theta) = - mean_s sum_a softmax(z_theta(s))_a Shat(s, a)

Served policy: keep the k largest logits, renormalise, zero the rest:

    pi(a | s) = exp z_a / sum_{b in topk(z)} exp z_b   if a in topk(z), else 0
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from litrepro.rlbp.critic import Transitions, TwoHeadCritic
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


def actor_loss(logits: Tensor, scores: Tensor) -> Tensor:
    """-mean_s sum_a softmax(z)_a Shat(s, a); ``scores`` (B, 9) are detached here."""
    s = scores.detach()
    s_hat = (s - s.mean(-1, keepdim=True)) / (s.std(-1, keepdim=True) + 1e-8)   # (B, 9)
    return -(torch.softmax(logits, dim=-1) * s_hat).sum(-1).mean()


def train_actor(actor: Actor, critic: TwoHeadCritic, batch: Transitions, *, steps: int, lr: float,
                lam: float, batch_size: int, generator: torch.Generator) -> dict:
    """Fit the actor to the fused critic scores on minibatches of ``batch.state`` (N, F).

    Returns ``loss`` (steps,) and ``gradient_norms`` (steps,), the L2 norm of the
    full actor gradient before each update, and ``trained_campaigns``: the campaigns
    of the rows its minibatches actually drew.
    """
    states = batch.state                                                               # (N, F)
    drawn = []
    with torch.no_grad():
        scores = fused_scores(*critic(states), lam)                                   # (N, 9)
    opt = torch.optim.Adam(actor.parameters(), lr=lr)
    losses, norms = [], []
    for _ in range(steps):
        idx = torch.randint(states.shape[0], (batch_size,), generator=generator).to(states.device)
        drawn.append(idx)
        loss = actor_loss(actor(states[idx]), scores[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norms.append(float(torch.sqrt(sum((p.grad ** 2).sum() for p in actor.parameters()))))
        opt.step()
        losses.append(loss.item())
    used = torch.unique(batch.campaign[torch.cat(drawn)]).tolist() if drawn else []
    return {"loss": losses, "gradient_norms": norms, "trained_campaigns": used}
