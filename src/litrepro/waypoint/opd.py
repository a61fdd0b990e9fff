"""Student on-policy distillation from waypoints.

For a student rollout y (sampled by the student itself) and each generated
token y_t, with l^(k)_t = log pi_k(y_t | y_<t) under waypoints k = 0, m, f
(initial, middle, final):

    A_t = log pi_f(y_t) - log pi_student(y_t)                      (detached)
    g_t = |l^f_t - l^0_t| / (|l^m_t - l^0_t| + |l^f_t - l^m_t|)    "straightness", in [0, 1]
          (0/0 -> 1: a token whose log-prob never moved lies on a straight path)
    s   = gate_mass / mean_valid(g)                                 (batch scale; s * mean g = gate_mass)
    L   = -s * mean_valid( g_t A_t (log pi_student(y_t) - sg[log pi_student(y_t)]) )

L is 0 in value, and its gradient is -s * mean(g A grad log pi_student)
(:func:`analytic_gated_gradient` computes that sum token by token, and
:func:`surrogate_gradient_check` compares the two).  A_t is the *negative* of
the one-sample estimate log pi_student(y_t) - log pi_f(y_t) of the reverse KL,
KL(pi_student || pi_f), on the student's own samples; descending L raises
log pi_student where A_t > 0, which lowers that KL.  The gradient is weighted by
how consistently the teacher's RL moved each token.  The ``final_only`` gate
sets g = 1; the ``shuffled`` gate permutes the straightness gates among the
batch's valid tokens (same values and mean, no per-token waypoint information).  Padding (after EOS) is removed by boolean selection *before* any
arithmetic, so whatever finite values padding holds cannot reach the loss or
its gradient.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from litrepro.waypoint.model import EOS, BytePolicy, policy_logits, stack


class ZeroGateError(ValueError):
    """Every valid token of the batch has gate 0: the batch scale would divide by zero."""


@dataclass(frozen=True)
class Rollouts:
    tokens: Tensor          # (B, P + N) prompt then generated tokens (padding after EOS)
    valid: Tensor           # (B, N) bool: generated position is a real token (EOS included)
    sample_logp: Tensor     # (B, N) log-prob under the student at sampling time
    prompt_len: int

    @property
    def generated(self) -> Tensor:
        return self.tokens[:, self.prompt_len:]                              # (B, N)


@torch.no_grad()
def sample_rollouts(student: BytePolicy, prompts: Tensor, max_new_tokens: int, generator: torch.Generator,
                    pad: int = EOS) -> Rollouts:
    """The student samples its own continuations; an EOS ends a rollout, the rest is ``pad``.

    The causal mean makes decoding incremental: keep the running embedding sum.
    """
    b, p = prompts.shape
    running = student.embed[prompts].sum(1)                                  # (B, D)
    alive = torch.ones(b, dtype=torch.bool, device=prompts.device)
    tokens, valid, logps = [], [], []
    for t in range(max_new_tokens):                                          # autoregressive: sequential in t
        logits = (running / (p + t)) @ student.head_w.T + student.head_b       # (B, V)
        logp = torch.log_softmax(logits, -1)
        tok = torch.multinomial(logp.exp().cpu(), 1, generator=generator).squeeze(1).to(prompts.device)
        valid.append(alive.clone())
        tokens.append(torch.where(alive, tok, pad))
        logps.append(logp.gather(1, tok[:, None]).squeeze(1))
        alive = alive & (tok != EOS)
        running = running + student.embed[tok]
    return Rollouts(torch.cat([prompts, torch.stack(tokens, 1)], 1), torch.stack(valid, 1),
                    torch.stack(logps, 1), p)


def token_logps(logits: Tensor, rollouts: Rollouts) -> Tensor:
    """log pi(y_t) = z_{y_t} - logsumexp_v z_v for the generated tokens.

    ``logits`` (..., B, N + 1, V) start at the last prompt position (position
    P - 1 predicts the first generated token); the last position predicts
    nothing and is dropped.  Returns (..., B, N).  Gather + logsumexp never
    writes a full (..., V) log-softmax tensor.
    """
    z = logits[..., :-1, :]                                                  # (..., B, N, V)
    gen = rollouts.generated.expand(*z.shape[:-1])
    return z.gather(-1, gen[..., None]).squeeze(-1) - z.logsumexp(-1)


def student_logps(student: BytePolicy, rollouts: Rollouts) -> Tensor:
    """(B, N) log-probs of the generated tokens under the student (with grad)."""
    params = (student.embed[None], student.head_w[None], student.head_b[None])
    return token_logps(policy_logits(*params, rollouts.tokens, start=rollouts.prompt_len - 1)[0], rollouts)


@torch.no_grad()
def waypoint_logps_stacked(waypoints: list[BytePolicy], rollouts: Rollouts) -> Tensor:
    """(S, B, N) log-probs under all waypoints in one stacked pass: materialises (S, B, N + 1, V) logits."""
    return token_logps(policy_logits(*stack(waypoints), rollouts.tokens, start=rollouts.prompt_len - 1), rollouts)


@torch.no_grad()
def waypoint_logps_streamed(waypoints: list[BytePolicy], rollouts: Rollouts, *, rows: int = 1024) -> Tensor:
    """(S, B, N) log-probs under all waypoints, streamed through cache-sized blocks of rows.

        h_t = (1 / (t + 1)) sum_{j<=t} E_k[x_j]                      (M, D), M = B * N positions
        log pi_k(y_t) = (W_k h_t + b_k)[y_t] - logsumexp_v (W_k h_t + b_k)_v

    The logits of ``rows`` positions (rows x V) are made, reduced to one number per
    position and dropped, so they stay in cache; the full (S, B, N, V) tensor never exists.
    """
    p = rollouts.prompt_len
    tokens, gen = rollouts.tokens, rollouts.generated.reshape(-1)                      # (B, P + N), (M,)
    b, t = tokens.shape
    counts = torch.arange(1, t + 1, device=tokens.device)[p - 1:-1, None]               # (N, 1): t + 1
    out = []
    for w in waypoints:
        h = (w.embed[tokens].cumsum(1)[:, p - 1:-1] / counts).reshape(-1, w.embed.shape[1])  # (M, D) causal mean
        head_t = w.head_w.T.contiguous()                                                   # (D, V)
        parts = []
        for lo in range(0, h.shape[0], rows):
            z = torch.addmm(w.head_b, h[lo:lo + rows], head_t)                             # (rows, V) = b + h W^T
            parts.append(z.gather(1, gen[lo:lo + rows, None]).squeeze(1) - z.logsumexp(1))  # (rows,)
        out.append(torch.cat(parts).view(b, -1))                                           # (B, N)
    return torch.stack(out)                                                                 # (S, B, N)


#: Up to this many scored positions (B x N) the CPU uses the stacked pass; above it, streaming.
#: ``benchmarks/waypoint_scoring_result.json`` (``python benchmarks/waypoint_scoring.py --repeats 51
#: --sizes 2 8 12 16 64 256 1024 4096``, our 2-core machine, 1 thread) has stacked faster at 2 and 8
#: rollouts of 16 tokens and streamed faster from 12 rollouts (192 positions) on, so the threshold sits
#: above that run's crossover: at 12 rollouts (the threshold itself) the CPU takes the slower path (the
#: two paths agree to 1e-12: ``tests/test_waypoint.py``).  It is not lowered here: the committed
#: studies' source hashes cover this file, so lowering it means re-running them.
CPU_STACKED_MAX_POSITIONS = 192


def scoring_path(device_type: str, positions: int):
    """The faster scoring function for a device and a batch of ``positions`` scored tokens.

    On CUDA we keep the stacked pass, one batched kernel instead of a Python loop of small
    blocks.  That choice is not timed: ``benchmarks/cuda_check_result.json`` (one H200 run)
    checks that the notebooks' results agree across devices, but does not time the scoring
    paths; ``python benchmarks/waypoint_scoring.py --device cuda`` does.
    """
    if device_type == "cpu" and positions > CPU_STACKED_MAX_POSITIONS:
        return waypoint_logps_streamed
    return waypoint_logps_stacked


def waypoint_logps(waypoints: list[BytePolicy], rollouts: Rollouts) -> Tensor:
    """(3, B, N) log-probs of the rollout under all waypoints, by the faster path (:func:`scoring_path`)."""
    return scoring_path(rollouts.tokens.device.type, rollouts.generated.numel())(waypoints, rollouts)


def straightness_gate(lp: Tensor) -> Tensor:
    """g = |l_f - l_0| / (|l_m - l_0| + |l_f - l_m|), 0/0 -> 1; lp (3, ...) -> (...)."""
    l0, lm, lf = lp[0], lp[1], lp[2]
    path = (lm - l0).abs() + (lf - lm).abs()                                 # length of the waypoint path
    chord = (lf - l0).abs()                                                  # straight-line distance
    return torch.where(path > 0, chord / torch.where(path > 0, path, 1.0), 1.0).clamp(max=1.0)


GATE_KINDS = ("straightness", "final_only", "shuffled")


def compute_gate(kind: str, lp: Tensor, valid: Tensor | None = None, generator: torch.Generator | None = None) -> Tensor:
    """The gate of each token; lp (3, B, N) -> (B, N).

    ``shuffled`` permutes the straightness gates among the ``valid`` tokens with
    ``generator``: the batch's mean gate is unchanged, the token-to-gate pairing is random.
    """
    if kind == "straightness":
        return straightness_gate(lp)
    if kind == "final_only":
        return torch.ones_like(lp[0])
    if kind == "shuffled":
        if valid is None or generator is None:
            raise ValueError("the shuffled gate needs the valid mask and a generator")
        gate = straightness_gate(lp)                                          # (B, N)
        values = gate[valid]                                                  # (n_valid,)
        perm = torch.randperm(values.numel(), generator=generator).to(values.device)
        out = gate.clone()
        out[valid] = values[perm]
        return out
    raise ValueError(f"unknown gate kind {kind!r} (known: {', '.join(GATE_KINDS)})")


def opd_loss(student_logp: Tensor, final_logp: Tensor, gate: Tensor, valid: Tensor, *,
             gate_mass: float) -> tuple[Tensor, dict]:
    """The stop-gradient surrogate L (see module docstring) and its diagnostics.

    Args: student_logp (B, N) with grad; final_logp, gate (B, N); valid (B, N) bool.
    """
    lp = student_logp[valid]                                                 # (V,) mask first ...
    advantage = (final_logp[valid] - lp).detach()                            # A_t = -(one-sample reverse-KL estimate)
    g = gate[valid]
    if lp.numel() == 0:
        raise ZeroGateError("no valid tokens in the batch")
    mean_gate = g.mean()
    if not mean_gate > 0:
        raise ZeroGateError(f"all {g.numel()} valid tokens have waypoint gate 0; refusing to divide by a zero mean gate")
    scale = gate_mass / mean_gate                                            # s * mean g = gate_mass
    loss = -scale * (g * advantage * (lp - lp.detach())).mean()              # ... then reduce
    stats = {"loss": loss.item(), "mean_gate": float(mean_gate), "zero_gate_fraction": float((g == 0).float().mean()),
             "batch_scale": float(scale), "valid_tokens": int(lp.numel())}
    return loss, stats


def analytic_gated_gradient(student: BytePolicy, rollouts: Rollouts, final_logp: Tensor, gate: Tensor, *,
                            gate_mass: float) -> list[Tensor]:
    """The gated policy gradient written out, one backward pass per valid token:

        grad = -(s / |valid|) sum_{(b,t) valid} g_bt A_bt grad_theta log pi_theta(y_bt),   s = gate_mass / mean g

    with A = log pi_f - log pi_student as plain numbers.  Returns one tensor per
    student parameter.  Slow by design (it does not use the surrogate): it is the
    reference that :func:`surrogate_gradient_check` compares the surrogate with.
    """
    params = list(student.parameters())
    valid = rollouts.valid                                                    # (B, N)
    lp_all = student_logps(student, rollouts)                                 # (B, N) with grad
    g = gate[valid]                                                           # (n_valid,)
    scale = gate_mass / g.mean()
    total = [torch.zeros_like(p) for p in params]
    positions = valid.nonzero().tolist()
    for i, (b, t) in enumerate(positions):                                    # one token at a time
        grads = torch.autograd.grad(lp_all[b, t], params, retain_graph=True)
        weight = float(g[i] * (final_logp[b, t] - lp_all[b, t].detach()))   # g A, numbers
        total = [acc + weight * gr for acc, gr in zip(total, grads)]
    return [-scale * acc / len(positions) for acc in total]


def surrogate_gradient_check(student: BytePolicy, waypoints: list[BytePolicy], prompts: Tensor,
                             generator: torch.Generator, *, max_new_tokens: int, gate_mass: float,
                             rtol: float = 1e-9) -> dict:
    """``surrogate_gradient_matches_analytic``: autograd of the stop-gradient surrogate L
    equals :func:`analytic_gated_gradient` on one small batch of the student's own rollouts.

    Neither the student nor the waypoints are updated.  Returns the largest absolute
    difference, the norm of the analytic gradient and whether the difference is
    below ``rtol`` times that norm.
    """
    rollouts = sample_rollouts(student, prompts, max_new_tokens, generator)
    lp = waypoint_logps(waypoints, rollouts)                                  # (3, B, N)
    gate = straightness_gate(lp)
    params = list(student.parameters())
    loss, _ = opd_loss(student_logps(student, rollouts), lp[-1], gate, rollouts.valid, gate_mass=gate_mass)
    surrogate = torch.autograd.grad(loss, params)
    analytic = analytic_gated_gradient(student, rollouts, lp[-1], gate, gate_mass=gate_mass)
    diff = max(float((a - b).abs().max()) for a, b in zip(surrogate, analytic))
    norm = float(torch.sqrt(sum((a ** 2).sum() for a in analytic)))
    return {"max_abs_difference": diff, "analytic_gradient_norm": norm, "valid_tokens": int(rollouts.valid.sum()),
            "surrogate_gradient_matches_analytic": bool(norm > 0 and diff <= rtol * norm)}


def opd_step(student: BytePolicy, waypoints: list[BytePolicy], prompts: Tensor, optimizer: torch.optim.Optimizer,
             generator: torch.Generator, *, max_new_tokens: int, gate_kind: str, gate_mass: float,
             gate_generator: torch.Generator | None = None, trace: dict | None = None) -> tuple[dict, Rollouts, float]:
    """Sample, score under student and waypoints, update; returns (stats, rollouts, on-policy gap).

    The on-policy gap is max |log pi at sampling - log pi at scoring| over valid tokens:
    0 (up to float error) when the scored tokens are the student's own samples.
    ``gate_generator`` draws the ``shuffled`` gate's permutations (kept apart from
    ``generator`` so every arm sees the same prompts and samples).  ``trace``, when
    given, gets the gate of every token (``gate``, (B, N)) for :mod:`litrepro.waypoint.audit`.
    """
    rollouts = sample_rollouts(student, prompts, max_new_tokens, generator)
    student_logp = student_logps(student, rollouts)                          # (B, N), with grad
    lp = waypoint_logps(waypoints, rollouts)                                  # (3, B, N)
    gate = compute_gate(gate_kind, lp, rollouts.valid, gate_generator)
    if trace is not None:
        trace["gate"] = gate.detach().clone()
    loss, stats = opd_loss(student_logp, lp[-1], gate, rollouts.valid, gate_mass=gate_mass)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    stats["gradient_norm"] = float(torch.sqrt(sum((p.grad ** 2).sum() for p in student.parameters())))
    optimizer.step()
    gap = float((student_logp.detach() - rollouts.sample_logp)[rollouts.valid].abs().max())
    return stats, rollouts, gap
