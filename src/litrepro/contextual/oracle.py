"""How much a gain policy could win in a market: constants, per-kind and per-campaign choices, and
state-dependent table policies found by search with the truth; and the state-dependence decomposition.

Every choice is made on *fit days* and scored on separate *evaluation days* (the same days for every
policy), so no row is a maximum over the noise it is scored on.  With T_d(pi, c) the mean fused reward
per decision of campaign c under policy pi on days d:

    best constant        a* = argmax_a mean_c T_fit(a, c)                      scored T_eval(a*, c)
    best per kind        a*_k = argmax_a mean_{c in k} T_fit(a, c)             (kind read off budget_share)
    best per campaign    a*_c = argmax_a T_fit(a, c)
    table per kind       pi(s) = A[kind(s), e(s), h(s)]     (pacing-error bin e, half of day h)
    table per campaign   pi(s) = A[c, e(s), h(s)]

The tables are found by coordinate ascent on the fit days (:func:`search_table`): each cell in turn
takes the action that maximises its group's mean fit-day value with every other cell held.  They are
the state-dependent oracles: a policy that may react to the state, found with the simulator's truth.

The decomposition of a policy's value into its action mix and its state dependence:

    V(pi) = M(pi) + G(pi),   M(pi) = sum_a f_pi(a) V(a),   G(pi) = V(pi) - M(pi)

f_pi(a) is the share of pi's decisions (on the evaluation days) that took action a and V(a) the value
of the constant policy a on the same days; G is the state-dependence gain (0 for a constant).
``per-campaign`` mixes use each campaign's own shares and constant values.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from litrepro.contextual.market import ContextualSettings, fused, simulate_contextual_day
from litrepro.rlbp.pid import N_ACTIONS
from litrepro.rlbp.simulator import KINDS, Campaigns, DayDraws, Policy, SimSettings

F64 = torch.float64
#: Pacing-error bin edges of the table policies: ahead of plan (e < -0.05), on plan, behind (e > 0.05).
ERROR_EDGES = (-0.05, 0.05)
#: Halves of the day of the table policies (time of day < 0.5, >= 0.5).
HALVES = 2
#: Coordinate-ascent sweeps over the table's cells.
SWEEPS = 2
#: Column of ``budget_share`` and of ``pacing_error``, ``time_of_day`` in the state (``simulator.FEATURES``).
TIME, ERROR, SHARE = 0, 1, 6


def kind_of_share(budget_share: Tensor) -> Tensor:
    """(C,) kind index read off beta (the kinds' ranges of ``simulator.BETA`` do not overlap):
    beta >= 0.7 -> cpc_constrained, beta < 0.25 -> budget_constrained, else unconstrained."""
    kind = torch.full(budget_share.shape, KINDS.index("unconstrained"), dtype=torch.long)
    kind[budget_share >= 0.7] = KINDS.index("cpc_constrained")
    kind[budget_share < 0.25] = KINDS.index("budget_constrained")
    return kind


def table_policy(table: Tensor) -> Policy:
    """The deterministic policy pi(s_c) = table[c, e(s_c), h(s_c)]; ``table`` (C, 3, 2) long."""
    edges = torch.tensor(ERROR_EDGES, dtype=F64)

    def policy(state: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        e = torch.bucketize(state[:, ERROR].contiguous(), edges)                           # (C,) in 0..2
        h = (state[:, TIME] * HALVES).floor().long().clamp(0, HALVES - 1)                  # (C,) in 0..1
        action = table[torch.arange(state.shape[0]), e, h]                                 # (C,)
        return action, torch.ones(state.shape[0], dtype=F64)
    return policy


def policy_values(c: Campaigns, days: list[DayDraws], policy: Policy, s: SimSettings, ctx: ContextualSettings,
                  lam: float, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """(C,) T(pi, c), the mean fused reward per decision over the days, and (D, K, C) the actions taken."""
    logs = [simulate_contextual_day(c, d, policy, s, ctx, generator) for d in days]
    value = torch.stack([fused(log, c, lam) for log in logs]).mean((0, 1))                 # (C,)
    return value, torch.stack([log.actions for log in logs])                               # (C,), (D, K, C)


def constant_values(c: Campaigns, days: list[DayDraws], s: SimSettings, ctx: ContextualSettings,
                    lam: float) -> Tensor:
    """(A, C) T(a, c) for every action a of ``s`` (constant policies draw nothing)."""
    g = torch.Generator().manual_seed(0)
    rows = []
    for a in range(s.kp.shape[0]):
        def constant(state: Tensor, generator: torch.Generator, a=a) -> tuple[Tensor, Tensor]:
            n = state.shape[0]
            return torch.full((n,), a, dtype=torch.long), torch.ones(n, dtype=F64)
        rows.append(policy_values(c, days, constant, s, ctx, lam, g)[0])
    return torch.stack(rows)


def group_mean(values: Tensor, group: Tensor) -> Tensor:
    """(A, C): each campaign's entry replaced by the mean over its group; ``values`` (A, C), ``group`` (C,)."""
    n_groups = int(group.max()) + 1
    sums = torch.zeros(values.shape[0], n_groups, dtype=F64).index_add_(1, group, values)    # (A, G)
    counts = torch.bincount(group, minlength=n_groups).to(F64).clamp(min=1)                # (G,)
    return (sums / counts)[:, group]                                                        # (A, C)


def search_table(c: Campaigns, days: list[DayDraws], s: SimSettings, ctx: ContextualSettings, lam: float,
                 start: Tensor, group: Tensor, sweeps: int = SWEEPS) -> tuple[Tensor, list[float]]:
    """Coordinate ascent over the cells of a (C, 3, 2) table from ``start`` (C,) on ``days``.

    Cell (e, h) of every campaign takes argmax_a of its group's mean value with cell (e, h) set to a
    and the rest held (``group`` (C,): one group per kind, or one per campaign).  Returns the table
    and the mean fit-day value after each cell (non-decreasing within each group by construction).
    """
    g = torch.Generator().manual_seed(0)
    table = start[:, None, None].expand(-1, len(ERROR_EDGES) + 1, HALVES).clone()          # (C, 3, 2)
    trace = []
    rows = torch.arange(table.shape[0])
    for _ in range(sweeps):
        for e in range(table.shape[1]):
            for h in range(HALVES):
                scores = []
                for a in range(N_ACTIONS):
                    trial = table.clone()
                    trial[:, e, h] = a
                    scores.append(policy_values(c, days, table_policy(trial), s, ctx, lam, g)[0])
                grouped = group_mean(torch.stack(scores), group)                          # (A, C)
                table[:, e, h] = grouped.argmax(0)
                trace.append(float(grouped[table[:, e, h], rows].mean()))
    return table, trace


def action_shares(actions: Tensor, n_actions: int = N_ACTIONS) -> tuple[Tensor, Tensor]:
    """f_pi(a) overall (A,) and per campaign (A, C), from the actions taken (D, K, C)."""
    onehot = torch.nn.functional.one_hot(actions, n_actions).to(F64)                       # (D, K, C, A)
    per_campaign = onehot.mean((0, 1)).T                                                    # (A, C)
    return per_campaign.mean(1), per_campaign


def decomposition(value: Tensor, actions: Tensor, constants: Tensor) -> dict[str, float]:
    """V = M + G overall and per campaign (module docstring).  ``value`` (C,) T(pi, c), ``actions``
    (D, K, C), ``constants`` (A, C) T(a, c), all on the same evaluation days."""
    overall, per_campaign = action_shares(actions, constants.shape[0])                     # (A,), (A, C)
    v = float(value.mean())
    mix = float((overall * constants.mean(1)).sum())                                        # sum_a f(a) V(a)
    mix_c = float((per_campaign * constants).sum(0).mean())                                 # mean_c sum_a f_c(a) T(a, c)
    return {"value": v, "mix_value": mix, "state_gain": v - mix, "campaign_mix_value": mix_c,
            "within_campaign_gain": v - mix_c}


def decomposition_reference(value, actions, constants) -> dict[str, float]:
    """:func:`decomposition` by plain loops (the independent recomputation)."""
    days, segments, n = actions.shape
    n_actions = constants.shape[0]
    counts = [[0] * n for _ in range(n_actions)]
    for d in range(days):
        for k in range(segments):
            for c in range(n):
                counts[int(actions[d, k, c])][c] += 1
    v = sum(float(x) for x in value) / n
    total = days * segments
    mix = sum(sum(counts[a][c] for c in range(n)) / (total * n) * sum(float(constants[a, c]) for c in range(n)) / n
              for a in range(n_actions))
    mix_c = sum(sum(counts[a][c] / total * float(constants[a, c]) for a in range(n_actions)) for c in range(n)) / n
    return {"value": v, "mix_value": mix, "state_gain": v - mix, "campaign_mix_value": mix_c,
            "within_campaign_gain": v - mix_c}


def fine_grid(kp: Tensor, ki: Tensor, points: int = 7) -> tuple[Tensor, Tensor]:
    """(P^2,) Kp and Ki of a geometric P x P grid spanning the action grid's range [min, max] of each gain;
    gain g = 3 i + j indexes (Kp_i, Ki_j) as the action grid does."""
    def span(x: Tensor) -> Tensor:
        lo, hi = math.log(float(x.min())), math.log(float(x.max()))
        return torch.exp(torch.linspace(lo, hi, points, dtype=F64))                        # (P,)
    return span(kp).repeat_interleave(points), span(ki).repeat(points)


def interior(values: Tensor, points: int) -> tuple[bool, int]:
    """Whether the best of a fine grid's (P^2,) values lies off the grid's edge, and its index."""
    best = int(values.argmax())
    i, j = divmod(best, points)
    return (0 < i < points - 1) and (0 < j < points - 1), best
