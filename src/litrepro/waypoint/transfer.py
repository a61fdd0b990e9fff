"""The transfer regime: on-policy distillation long and wide enough to move the student, and its arms.

A reconstruction beyond the seed (issue 30).  The seed's OPD budget (2 updates; of 4 rollouts in our reading
of its history's at most 64 valid tokens per step of 16-token rollouts), run at our per-seed notebooks' learning
rate 0.05 (the seed file records none), moves the student little in parameters (the seed records the change),
and 40 such updates from the calibrated teachers recover a small part of the teacher's RL parity gain (the
dose-response's "for scale" line gives it).  Here the student (the ``waypoint0``
copy of the pre-RL teacher) is distilled from the dose-response's strongest teacher
(pretraining learning rate 0.015, RL learning rate 30, 8 x 64 updates) with many more
updates, larger batches and a larger step (:class:`TransferConfig`), and the arms differ
in one thing each (:data:`ARMS`).

*The sampled-token arms* (our reconstruction of the seed's OPD, :mod:`litrepro.waypoint.opd`).  On the student's
own rollouts y, with l^(k)_t = log pi_k(y_t | y_<t) under waypoints k = 0, m, f:

    A_t = l^f_t - log pi_student(y_t)                      (detached; -(one-sample reverse-KL estimate))
    L   = -s * mean_valid( g_t A_t log pi_student(y_t) ),  s = gate_mass / mean_valid(g)

with the gate g_t of the arm (:func:`transfer_gate`):

- ``final_only``:   g = 1;
- ``straightness``: g = |l^f - l^0| / (|l^m - l^0| + |l^f - l^m|)   (our formula for the seed's waypoint gate: the seed logs the gate, not its formula);
- ``shuffled``:     the straightness gates permuted among the batch's valid tokens;
- ``abs_advantage``: g = |A_t| (weights from |A| alone: no waypoint enters; our reconstruction);
- ``binned_shuffle``: the straightness gates permuted *within* ``bins`` equal-count bins of |A|
  (|A| rounded to ``bin_resolution``, ties in position order; keeps the gate's coupling with |A| at the bins' resolution, breaks the rest; our reconstruction);
- ``straightness_x_magnitude``: g = straightness * |l^f - l^0| (a gate that sees how far the token
  moved, not only how straight; our reconstruction of issue 30's item 4).

*The full-vocabulary arm* (``full_kl``).  At every valid position of the same student rollouts,
the exact reverse KL over the 257 symbols,

    KL_t(pi_student || pi_f) = sum_v pi_s(v | y_<t) (log pi_s(v | y_<t) - log pi_f(v | y_<t))
    L = gate_mass * mean_valid( KL_t )

Its gradient at a position is the expectation over v ~ pi_s of the sampled arm's per-token
gradient with g = 1 (the score-function identity sum_v pi_s grad log pi_s = 0), so it is
``final_only`` with the sampling noise of the token at each position removed, at the same
step size (the factor gate_mass is final-only's batch scale).  Both treat the prefix as
given (token-level, not sequence-level, KL).

Plain SGD; every arm starts from the same student and draws its prompts, samples and gate
permutations from streams named after their stage (:func:`stream`), so arms with the same
batch see the same prompts.  The stage records its first update (:class:`StepRecord`) for
:mod:`litrepro.waypoint.transfer_audit`, which recomputes it; this module never imports
that audit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

from litrepro.waypoint.model import BytePolicy, nats_per_byte, policy_logits
from litrepro.waypoint.opd import Rollouts, sample_rollouts, straightness_gate, student_logps, waypoint_logps


@dataclass(frozen=True)
class TransferConfig:
    """The transfer regime (every field is our reconstruction; the seed fixes none of them)."""

    teacher_pretrain_lr: float = 0.015
    """The teacher's pretraining learning rate: the calibrated teacher of the effect and dose-response studies."""
    teacher_rl_lr: float = 30.0
    """The teacher RL's learning rate: the dose-response's strongest level (its level means give how far its RL moves P(even))."""
    batch: int = 64
    """Student rollouts per update (our per-seed notebooks use 4, our reading of the seed's at most 64 valid tokens of 16-token rollouts).  16x the tokens per update, so the gradient is less noisy."""
    lr: float = 0.5
    """SGD learning rate of the student (our per-seed notebooks use 0.05; the seed file records none).  The learning-rate sweep scales it."""
    updates: int = 240
    """OPD updates per arm (the seed: 2; the comparison: 40)."""
    eval_every: int = 20
    """Updates between two points of the learning curve (point 0 is the start)."""
    eval_prompts: int = 256
    """Validation prompts on which P(even first byte) is computed exactly."""
    max_new_tokens: int = 16
    """Tokens per student rollout, as the seed's."""
    gate_mass: float = 0.8
    """Batch scale s = gate_mass / mean gate, as the seed's."""
    bins: int = 8
    """Equal-count |A| bins of the ``binned_shuffle`` gate."""
    bin_resolution: float = 1e-6
    """|A| is rounded to this grid before the tokens are ordered into bins (ties keep their position order), so that
    last-bit differences between two ways of computing A cannot reorder tokens across a bin boundary."""
    eval_window: int = 256
    """Bytes per window when scoring the validation NLL, as the notebook's."""

    def marks(self) -> list[int]:
        """Updates after which the curve is evaluated: 0, eval_every, ..., updates."""
        if self.updates % self.eval_every:
            raise ValueError(f"updates = {self.updates} must be a multiple of eval_every = {self.eval_every}")
        return list(range(0, self.updates + 1, self.eval_every))


@dataclass(frozen=True)
class Arm:
    """One arm: its gate (or ``full_kl``), its learning-rate and batch multipliers, and what it isolates."""

    gate: str
    lr_multiplier: float = 1.0
    batch_multiplier: int = 1
    isolates: str = ""


GATES = ("final_only", "straightness", "shuffled", "abs_advantage", "binned_shuffle", "straightness_x_magnitude",
         "full_kl")
#: The final-only learning-rate sweep (multipliers of ``TransferConfig.lr``; 0.1 is our notebooks' 0.05), dense around 1,
#: where the gated arms land, so that the frontier is interpolated over short chords.
LR_MULTIPLIERS = (0.1, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0)
ARMS: dict[str, Arm] = {
    "final_only": Arm("final_only", isolates="the reference: our OPD with g = 1"),
    "waypoint": Arm("straightness", isolates="the waypoint gate (our straightness formula)"),
    "full_kl": Arm("full_kl", isolates="the sampling noise of the distilled token (exact KL over 257 symbols)"),
    "shuffled": Arm("shuffled", isolates="the gate's values without their tokens (breaks the coupling with |A| too)"),
    "binned_shuffle": Arm("binned_shuffle", isolates="what the gate knows beyond its coupling with |A|"),
    "abs_advantage": Arm("abs_advantage", isolates="weighting by |A| alone, no waypoint"),
    "straightness_x_magnitude": Arm("straightness_x_magnitude", isolates="a gate that also sees how far the token moved"),
    "final_only_3x": Arm("final_only", batch_multiplier=3,
                         isolates="the gate's teacher compute: 3 scorings per token, as 3x the rollouts"),
    **{f"final_only_lr{m:g}": Arm("final_only", lr_multiplier=m, isolates="the step size")
       for m in LR_MULTIPLIERS if m != 1.0},
}
#: The arms that trace the final-only learning-rate frontier, by multiplier.
FRONTIER = {m: ("final_only" if m == 1.0 else f"final_only_lr{m:g}") for m in LR_MULTIPLIERS}

#: Named random streams: stream ``name`` of seed s is a fresh ``torch.Generator`` seeded s + offset.
#: ``comparison_eval`` and ``eval_samples`` are the offsets ``experiment.compare_arms`` uses, so the
#: curve is scored on the same validation prompts as the effect and dose-response studies.
STREAMS = {"comparison_eval": 7, "eval_samples": 11, "transfer_prompts": 31, "transfer_samples": 37,
           "transfer_gate": 41}


def stream(seed: int, name: str) -> torch.Generator:
    """The generator of stream ``name`` for ``seed`` (one rule for every stream: seed + its offset)."""
    return torch.Generator().manual_seed(seed + STREAMS[name])


def transfer_gate(kind: str, lp: Tensor, student_lp: Tensor, valid: Tensor, generator: torch.Generator | None, *,
                  bins: int = 8, resolution: float = 1e-6) -> Tensor:
    """The gate of each token (see the module docstring); lp (3, B, N), student_lp, valid (B, N) -> (B, N).

    ``shuffled`` and ``binned_shuffle`` draw their permutation from ``generator``.
    """
    if kind == "final_only":
        return torch.ones_like(lp[0])
    straight = straightness_gate(lp)                                          # (B, N)
    if kind == "straightness":
        return straight
    if kind == "straightness_x_magnitude":
        return straight * (lp[2] - lp[0]).abs()                               # chord/path * chord
    advantage = (lp[2] - student_lp).detach()                                 # (B, N) A_t
    if kind == "abs_advantage":
        return advantage.abs()
    if kind in ("shuffled", "binned_shuffle"):
        if generator is None:
            raise ValueError(f"the {kind} gate needs a generator")
        values = straight[valid]                                              # (n,)
        n = values.numel()
        if kind == "shuffled":
            source = torch.randperm(n, generator=generator)                   # (n,)
        else:
            grid = torch.round(advantage[valid].abs() / resolution)            # (n,) |A| on a grid
            order = torch.argsort(grid, stable=True)                           # (n,) valid tokens by |A|, ties by position
            bin_of_rank = torch.arange(n) * bins // max(n, 1)                 # (n,) equal-count bins
            keys = bin_of_rank.to(torch.float64) + torch.rand(n, generator=generator, dtype=torch.float64)
            within = torch.argsort(keys)                                      # a random order inside each bin
            source = torch.empty_like(order)
            source[order] = order[within]                                     # token order[r] takes order[within[r]]'s gate
        out = straight.clone()
        out[valid] = values[source.to(values.device)]
        return out
    raise ValueError(f"unknown gate {kind!r} (known: {', '.join(GATES)})")


def full_kl_loss(student: BytePolicy, final: BytePolicy, rollouts: Rollouts, valid: Tensor, *,
                 gate_mass: float) -> Tensor:
    """gate_mass * mean over valid positions of KL(pi_student || pi_f) over all 257 symbols (with grad)."""
    p = rollouts.prompt_len
    z_s = policy_logits(student.embed[None], student.head_w[None], student.head_b[None], rollouts.tokens,
                        start=p - 1)[0][:, :-1]                                # (B, N, V)
    with torch.no_grad():
        z_f = policy_logits(final.embed[None], final.head_w[None], final.head_b[None], rollouts.tokens,
                            start=p - 1)[0][:, :-1]                            # (B, N, V)
    log_s, log_f = torch.log_softmax(z_s[valid], -1), torch.log_softmax(z_f[valid], -1)   # (n, V) mask first
    kl = (log_s.exp() * (log_s - log_f)).sum(-1)                               # (n,) KL(student || final)
    return gate_mass * kl.mean()                                               # ... then reduce


@dataclass
class StepRecord:
    """What :mod:`litrepro.waypoint.transfer_audit` recomputes one update from."""

    prompt_state: Tensor
    sample_state: Tensor
    prompts: Tensor
    rollouts: Rollouts
    gate: Tensor | None
    before: dict
    after: dict
    lr: float
    stats: dict = field(default_factory=dict)


def _tensors(policy: BytePolicy) -> dict[str, Tensor]:
    return {name: t.detach().to("cpu", copy=True) for name, t in policy.state_dict().items()}


def transfer_step(student: BytePolicy, waypoints: list[BytePolicy], prompts: Tensor, optimizer: torch.optim.Optimizer,
                  sample_gen: torch.Generator, gate_gen: torch.Generator, *, gate: str, cfg: TransferConfig) -> tuple[dict, Rollouts, Tensor | None]:
    """One update of an arm: sample, score, gate, step.  Returns (stats, rollouts, gate)."""
    rollouts = sample_rollouts(student, prompts, cfg.max_new_tokens, sample_gen)
    valid = rollouts.valid                                                    # (B, N)
    if gate == "full_kl":                                                     # scores the final waypoint only
        loss, g = full_kl_loss(student, waypoints[-1], rollouts, valid, gate_mass=cfg.gate_mass), None
        stats = {"mean_gate": 1.0, "gate_abs_advantage_coupling": 1.0}
    else:
        lp = waypoint_logps(waypoints, rollouts)                              # (3, B, N)
        s_lp = student_logps(student, rollouts)                               # (B, N) with grad
        g = transfer_gate(gate, lp, s_lp.detach(), valid, gate_gen, bins=cfg.bins, resolution=cfg.bin_resolution)
        lp_v, gv = s_lp[valid], g[valid]                                      # (n,) mask first
        advantage = (lp[2][valid] - lp_v).detach()                            # A_t
        mean_gate = gv.mean()
        if not mean_gate > 0:
            raise ValueError(f"all {gv.numel()} valid tokens have gate 0 ({gate})")
        scale = cfg.gate_mass / mean_gate                                     # s * mean g = gate_mass
        loss = -scale * (gv * advantage * (lp_v - lp_v.detach())).mean()      # ... then reduce
        coupling = (gv * advantage.abs()).mean() / (mean_gate * advantage.abs().mean())   # E[g|A|] / (E g E|A|)
        stats = {"mean_gate": float(mean_gate), "gate_abs_advantage_coupling": float(coupling)}
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    stats["gradient_norm"] = float(torch.sqrt(sum((q.grad ** 2).sum() for q in student.parameters())))
    optimizer.step()
    return stats, rollouts, g


@torch.no_grad()
def even_mass(policy: BytePolicy, prompts: Tensor) -> float:
    """Mean over prompts (n, P) of the exact P(first generated byte is even) (the teacher's RL reward)."""
    probs = torch.softmax(policy(prompts)[:, -1], -1)                         # (n, V)
    return float(probs[:, :256:2].sum(-1).mean())


def run_arm(arm: Arm, student: BytePolicy, waypoints: list[BytePolicy], corpus, device: torch.device, seed: int,
            cfg: TransferConfig, *, eval_prompts: Tensor, validation: Tensor, measures=None) -> dict:
    """Train ``student`` (in place) for ``cfg.updates`` updates of ``arm``; its learning curve and first update.

    ``curve``: P(even first byte) on ``eval_prompts`` and the validation NLL after each of
    :meth:`TransferConfig.marks`, and ``measures`` (name -> f(policy, prompts) -> float) when given.
    Per-update diagnostics are averaged over updates.
    """
    def point(update: int) -> dict:
        extra = {name: f(student, eval_prompts) for name, f in (measures or {}).items()}
        return {"update": update, "p_even": even_mass(student, eval_prompts),
                "validation_nll": nats_per_byte(student, validation, cfg.eval_window), **extra}

    lr = cfg.lr * arm.lr_multiplier
    batch = cfg.batch * arm.batch_multiplier
    optimizer = torch.optim.SGD(student.parameters(), lr=lr)
    prompt_gen, sample_gen = stream(seed, "transfer_prompts"), stream(seed, "transfer_samples")
    gate_gen = stream(seed, "transfer_gate")
    marks = set(cfg.marks())
    curve, first, sums = [], None, {}
    if 0 in marks:
        curve.append(point(0))
    for update in range(1, cfg.updates + 1):
        prompt_state, sample_state = prompt_gen.get_state(), sample_gen.get_state()
        prompts = corpus.train_windows(batch, 1, prompt_gen, "transfer").to(device)   # (batch, 1)
        before = _tensors(student) if first is None else None
        stats, rollouts, gate = transfer_step(student, waypoints, prompts, optimizer, sample_gen, gate_gen,
                                              gate=arm.gate, cfg=cfg)
        if first is None:
            first = StepRecord(prompt_state, sample_state, prompts, rollouts, None if gate is None else gate.detach().clone(),
                               before, _tensors(student), lr, dict(stats))
        for k, v in stats.items():
            sums[k] = sums.get(k, 0.0) + v
        if update in marks:
            curve.append(point(update))
    means = {k: v / cfg.updates for k, v in sums.items()}
    return {"curve": curve, "first": first, "lr": lr, "batch": batch, "means": means}


# --- Reading a learning curve ---------------------------------------------------------------------

def transfer_fractions(curve_p: list[float], p0: float, pf: float) -> list[float]:
    """TF(k) = (P_student(k) - P_w0) / (P_wf - P_w0): the share of the teacher's RL parity gain recovered."""
    gain = pf - p0
    if not gain > 0:
        raise ValueError(f"the teacher's RL gain P_wf - P_w0 = {gain} is not positive: no transfer fraction")
    return [(p - p0) / gain for p in curve_p]


def area_under_curve(updates: list[int], values: list[float]) -> float:
    """Trapezoid area under TF(updates), divided by the last update (the mean TF over the run)."""
    area = sum((u1 - u0) * (v0 + v1) / 2 for u0, u1, v0, v1 in zip(updates, updates[1:], values, values[1:]))
    return area / updates[-1]


def updates_to_reach(updates: list[int], values: list[float], level: float) -> float | None:
    """First update at which TF reaches ``level``, linear between curve points; None when never reached."""
    for u0, u1, v0, v1 in zip(updates, updates[1:], values, values[1:]):
        if v0 >= level:
            return float(u0)
        if v1 >= level:
            return u0 + (u1 - u0) * (level - v0) / (v1 - v0)
    return None


def interpolate(x: float, xs: list[float], ys: list[float]) -> float | None:
    """Linear interpolation of y at x along points sorted by xs; None outside [min xs, max xs]."""
    pts = sorted(zip(xs, ys))
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return None


def log_lr_at(tf: float, multipliers: list[float], tfs: list[float]) -> float | None:
    """The final-only learning-rate multiplier whose transfer fraction is ``tf`` (linear in log m); None outside."""
    out = interpolate(tf, tfs, [math.log(m) for m in multipliers])
    return None if out is None else math.exp(out)
