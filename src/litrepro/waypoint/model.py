"""``BytePolicy``: a 257-token causal cumulative-embedding policy.

Tokens are the 256 byte values plus EOS (id 256).  The logits at position t
come from the mean of the embeddings of tokens 0..t:

    h_t = (1 / (t + 1)) sum_{j<=t} E[x_j]          (B, T, D)
    z_t = W h_t + b                                 (B, T, V)

E is drawn N(0, embed_std^2) and W N(0, 0.01 / D).  With ``output_bias=False``
b is a constant zero buffer, not a parameter (the calibrated reproduction;
``litrepro.waypoint.config`` says why).

:func:`policy_logits` works on *stacked* parameters with a leading snapshot
axis S, so the three waypoints are scored in one batched pass.

Parameters are float64 (:data:`DTYPE`).  The policy is tiny, so double
precision costs little, and it pushes the run-to-run noise between CPU kernel
sets (``ATEN_CPU_CAPABILITY``) and thread counts far below the 5 significant
digits the notebook prints (``litrepro.report.DIGITS``; ``benchmarks/display_noise.py``
measures it, and no figure of it is committed).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

VOCAB = 257
EOS = 256
DTYPE = torch.float64


def policy_logits(embed: Tensor, head_w: Tensor, head_b: Tensor, tokens: Tensor, start: int = 0) -> Tensor:
    """Logits of S stacked policies at positions ``start``..T-1.

    Args:
        embed: (S, V, D); head_w: (S, V, D); head_b: (S, V); tokens: (B, T) long.
        start: first position whose logits are needed (the causal mean still
            sums from position 0; only the output projection is skipped before it).
    Returns:
        (S, B, T - start, V) logits; position t predicts token t + 1.
    """
    s, v, d = embed.shape
    b, t = tokens.shape
    offsets = torch.arange(s, device=tokens.device)[:, None, None] * v      # row of snapshot k's table
    e = nn.functional.embedding(tokens[None] + offsets, embed.reshape(s * v, d))  # (S, B, T, D)
    counts = torch.arange(1, t + 1, device=tokens.device, dtype=e.dtype)
    h = (e.cumsum(dim=2) / counts[None, None, :, None])[:, :, start:]       # (S, B, T', D) causal mean
    z = torch.baddbmm(head_b[:, None, :], h.reshape(s, -1, d),               # (S, B*T', V) = b + h W^T
                      head_w.transpose(1, 2).contiguous())
    return z.view(s, b, t - start, v)                                        # (S, B, T', V)


class BytePolicy(nn.Module):
    def __init__(self, width: int, generator: torch.Generator, dtype: torch.dtype = DTYPE, *,
                 embed_std: float = 1.0, output_bias: bool = True):
        super().__init__()
        self.embed = nn.Parameter(torch.randn(VOCAB, width, generator=generator, dtype=dtype) * embed_std)           # (V, D)
        self.head_w = nn.Parameter(torch.randn(VOCAB, width, generator=generator, dtype=dtype) / width ** 0.5 * 0.1)  # (V, D)
        bias = torch.zeros(VOCAB, dtype=dtype)                                                                        # (V,)
        if output_bias:
            self.head_b = nn.Parameter(bias)
        else:
            self.register_buffer("head_b", bias)                                                                      # fixed 0

    def forward(self, tokens: Tensor) -> Tensor:
        """(B, T) -> (B, T, V) logits."""
        return policy_logits(self.embed[None], self.head_w[None], self.head_b[None], tokens)[0]


def stack(policies: list[BytePolicy]) -> tuple[Tensor, Tensor, Tensor]:
    """Stack frozen policies' parameters along a new leading axis (S, ...)."""
    return tuple(torch.stack([getattr(p, name).detach() for p in policies]) for name in ("embed", "head_w", "head_b"))


def flat_parameters(policy: nn.Module) -> Tensor:
    return torch.cat([p.detach().reshape(-1) for p in policy.parameters()])


def flat_state(policy: nn.Module) -> Tensor:
    """Parameters *and* buffers (such as a fixed zero output bias): everything the policy computes with."""
    return torch.cat([t.detach().reshape(-1) for t in policy.state_dict().values()])


def next_byte_nll(policy: BytePolicy, tokens: Tensor) -> Tensor:
    """Mean NLL (nats) of tokens[:, 1:] given their prefixes; tokens (B, T)."""
    logits = policy(tokens)[:, :-1]                                          # (B, T-1, V)
    return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))


@torch.no_grad()
def nats_per_byte(policy: BytePolicy, tokens: Tensor, window: int) -> float:
    """NLL per predicted byte over a whole split, scored in non-overlapping windows.

    The first byte of each window has no context and is not scored.  ``tokens`` may live on another
    device than ``policy`` (the corpus is held on the CPU); they are scored on the policy's.
    """
    tokens = tokens.to(policy.embed.device)                                  # (n,) no copy when already there
    n = tokens.numel()
    full = (n // window) * window
    total, count = 0.0, 0
    chunks = [tokens[:full].view(-1, window)] if full else []                # (W, window)
    if n > full + 1:
        chunks.append(tokens[full:][None])                                   # (1, rest)
    for chunk in chunks:
        logits = policy(chunk)[:, :-1]
        total += float(nn.functional.cross_entropy(logits.reshape(-1, VOCAB), chunk[:, 1:].reshape(-1), reduction="sum"))
        count += chunk[:, 1:].numel()
    return total / count


def pretrain(policy: BytePolicy, sample_windows, *, steps: int, lr: float) -> list[float]:
    """``steps`` Adam steps of next-byte NLL on windows from ``sample_windows()``; returns the losses."""
    opt = torch.optim.Adam(policy.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        loss = next_byte_nll(policy, sample_windows())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
