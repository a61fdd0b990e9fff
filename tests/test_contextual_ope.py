"""``litrepro.contextual.ope``: sequential off-policy estimators on hand-made logs with known answers,
against their plain-loop references, a Monte-Carlo unbiasedness check, bad inputs and faults."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from litrepro.contextual import ope
from litrepro.contextual.ope import (
    doubly_robust, doubly_robust_reference, fitted_q_evaluation, fitted_q_evaluation_reference,
    interval_covers, one_step_ips, one_step_ips_reference, one_step_snips, pdis, pdis_reference, t_interval,
    wpdis, wpdis_reference,
)
from litrepro.rlbp.ope import ordinary_ips

F64 = torch.float64
TOL = 1e-12
T_975_1DF = 12.706204736174707            # scipy.stats.t.ppf(0.975, 1)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def random_log(seed: int, n: int = 50, k: int = 4, a: int = 3, f: int = 2) -> dict:
    """A random log: per-decision mu and pi over a actions, actions drawn from mu, rewards, states, a model."""
    g = gen(seed)
    mu = torch.softmax(torch.randn(n, k, a, generator=g, dtype=F64), -1)               # (N, K, A)
    pi = torch.softmax(2 * torch.randn(n, k, a, generator=g, dtype=F64), -1)           # (N, K, A)
    actions = torch.multinomial(mu.reshape(-1, a), 1, generator=g).reshape(n, k)       # (N, K)
    at = actions.unsqueeze(2)
    return {
        "reward": torch.randn(n, k, generator=g, dtype=F64),
        "target_prob": pi.gather(2, at).squeeze(2), "logging_prob": mu.gather(2, at).squeeze(2),
        "states": torch.randn(n, k, f, generator=g, dtype=F64), "actions": actions, "target_probs": pi,
        "q_logged": torch.randn(n, k, generator=g, dtype=F64), "v_state": torch.randn(n, k, generator=g, dtype=F64),
    }


def check_against_references(log: dict, ridge: float = 1.0) -> None:
    """Every vectorised estimator equals its plain-loop reference to TOL (FQE's q_all too)."""
    args = (log["reward"], log["target_prob"], log["logging_prob"])
    assert abs(one_step_ips(*args).estimate - one_step_ips_reference(*args)) < TOL, "one_step_ips"
    assert abs(pdis(*args).estimate - pdis_reference(*args)) < TOL, "pdis"
    assert abs(wpdis(*args, reps=2).estimate - wpdis_reference(*args)) < TOL, "wpdis"
    dr_args = (*args, log["q_logged"], log["v_state"])
    assert abs(doubly_robust(*dr_args).estimate - doubly_robust_reference(*dr_args)) < TOL, "doubly_robust"
    fqe_args = (log["states"], log["actions"], log["reward"], log["target_probs"])
    est, q_all = fitted_q_evaluation(*fqe_args, ridge=ridge, reps=2)
    value, q_ref = fitted_q_evaluation_reference(*fqe_args, ridge=ridge)
    assert abs(est.estimate - value) < TOL, "fitted_q_evaluation"
    assert np.abs(q_all.numpy() - q_ref).max() < TOL, "fitted_q_evaluation q_all"


# --- known answers ----------------------------------------------------------------------------

def test_on_policy_every_is_estimator_is_the_mean_reward():
    """pi = mu: every ratio is 1, so IPS, SNIPS, PDIS and WPDIS all equal mean_i (1/K) sum_k r_ik."""
    g = gen(0)
    reward = torch.randn(30, 5, generator=g, dtype=F64)
    p = torch.rand(30, 5, generator=g, dtype=F64) * 0.9 + 0.05
    truth = reward.mean().item()
    for fn in (one_step_ips, one_step_snips, pdis, wpdis):
        assert fn(reward, p, p).estimate == pytest.approx(truth, abs=TOL), fn.__name__
    assert wpdis_reference(reward, p, p) == pytest.approx(truth, abs=TOL)
    assert pdis_reference(reward, p, p) == pytest.approx(truth, abs=TOL)


# Two trajectories, K = 2 (rows i, columns k):
#   reward  r  = [[1, 3], [2, 4]]
#   mu         = [[0.5, 0.5], [0.25, 0.5]]
#   pi         = [[1.0, 0.5], [0.5, 0.0]]
#   w = pi/mu  = [[2, 1], [2, 0]]          rho = cumprod(w) = [[2, 2], [2, 0]]
# PDIS terms: i=0 (2*1 + 2*3)/2 = 4;  i=1 (2*2 + 0*4)/2 = 2;  PDIS = 3.
#   t interval: sd([4, 2]) = sqrt(2), se = 1, 3 +- t_{1, .975} = 3 +- 12.7062.
# WPDIS: k=0 (2*1 + 2*2)/(2 + 2) = 1.5;  k=1 (2*3 + 0*4)/(2 + 0) = 3;  WPDIS = (1.5 + 3)/2 = 2.25.
# DR with q = [[0.5, 1], [1, 2]], v = [[1, 2], [0.5, 1.5]], rho_{-1} = 1:
#   i=0: k=0 2*(1 - 0.5) + 1*1 = 2;   k=1 2*(3 - 1) + 2*2 = 8;     term (2 + 8)/2 = 5
#   i=1: k=0 2*(2 - 1) + 1*0.5 = 2.5; k=1 0*(4 - 2) + 2*1.5 = 3;   term (2.5 + 3)/2 = 2.75
#   DR = (5 + 2.75)/2 = 3.875.
# One-step IPS: w r = [[2, 3], [4, 0]], terms [2.5, 2], IPS = 2.25.
# SNIPS: A = sum_k w r = [5, 4], B = sum_k w = [3, 2], SNIPS = 9/5 = 1.8;
#   delta: psi = (A - 1.8 B)/mean(B) = [-0.4, 0.4]/2.5 = [-0.16, 0.16], se = sd(psi)/sqrt(2) = 0.16.
HAND = {"reward": [[1.0, 3.0], [2.0, 4.0]], "logging_prob": [[0.5, 0.5], [0.25, 0.5]],
        "target_prob": [[1.0, 0.5], [0.5, 0.0]]}
HAND_Q, HAND_V = [[0.5, 1.0], [1.0, 2.0]], [[1.0, 2.0], [0.5, 1.5]]


def test_hand_case_two_trajectories_two_decisions():
    args = (HAND["reward"], HAND["target_prob"], HAND["logging_prob"])
    p = pdis(*args)
    assert p.estimate == pytest.approx(3.0, abs=TOL)
    assert p.terms.tolist() == pytest.approx([4.0, 2.0], abs=TOL)
    assert (p.low, p.high) == pytest.approx((3.0 - T_975_1DF, 3.0 + T_975_1DF), abs=1e-9)
    assert pdis_reference(*args) == pytest.approx(3.0, abs=TOL)
    assert wpdis(*args).estimate == pytest.approx(2.25, abs=TOL)
    assert wpdis_reference(*args) == pytest.approx(2.25, abs=TOL)
    dr = doubly_robust(*args, HAND_Q, HAND_V)
    assert dr.estimate == pytest.approx(3.875, abs=TOL)
    assert dr.terms.tolist() == pytest.approx([5.0, 2.75], abs=TOL)
    assert doubly_robust_reference(*args, HAND_Q, HAND_V) == pytest.approx(3.875, abs=TOL)
    ips = one_step_ips(*args)
    assert ips.estimate == pytest.approx(2.25, abs=TOL)
    assert ips.terms.tolist() == pytest.approx([2.5, 2.0], abs=TOL)
    sn = one_step_snips(*args)
    assert sn.estimate == pytest.approx(1.8, abs=TOL)
    assert (sn.low, sn.high) == pytest.approx((1.8 - 0.16 * T_975_1DF, 1.8 + 0.16 * T_975_1DF), abs=1e-9)
    assert sn.interval == "delta" and p.interval == "t"


def test_wpdis_zero_column_contributes_zero():
    # pi gives 0 to both logged actions at k=1, so rho[:, 1] = 0: c_1 := 0 and WPDIS = (c_0 + 0) / 2.
    reward = [[1.0, 5.0], [3.0, 7.0]]
    mu = [[0.5, 0.5], [0.5, 0.5]]
    pi = [[0.5, 0.0], [1.0, 0.0]]            # rho[:, 0] = [1, 2]: c_0 = (1*1 + 2*3) / 3 = 7/3
    assert wpdis(reward, pi, mu).estimate == pytest.approx(7 / 6, abs=TOL)
    assert wpdis_reference(reward, pi, mu) == pytest.approx(7 / 6, abs=TOL)


def test_one_step_ips_is_the_seed_ordinary_ips_on_flattened_decisions():
    log = random_log(1)
    est = one_step_ips(log["reward"], log["target_prob"], log["logging_prob"])
    flat = ordinary_ips(log["reward"].reshape(-1), log["target_prob"].reshape(-1), log["logging_prob"].reshape(-1))
    assert abs(est.estimate - flat.item()) < TOL
    assert abs(est.estimate - est.terms.mean().item()) < TOL


def test_t_interval_and_coverage_helpers():
    e = t_interval(torch.tensor([4.0, 2.0], dtype=F64))
    assert (e.estimate, e.low, e.high) == pytest.approx((3.0, 3.0 - T_975_1DF, 3.0 + T_975_1DF), abs=1e-9)
    assert interval_covers(e, 3.0) and interval_covers(e, e.low) and not interval_covers(e, e.high + 1e-9)
    one = t_interval(torch.tensor([2.5], dtype=F64))
    assert (one.low, one.high) == (2.5, 2.5)
    assert t_interval(torch.full((5,), 1.5, dtype=F64)).to_dict() == \
        {"estimate": 1.5, "low": 1.5, "high": 1.5, "interval": "t"}
    wide = t_interval(torch.tensor([4.0, 2.0], dtype=F64), confidence=0.99)
    assert wide.high > e.high


# --- DR with a perfect model on a deterministic tabular problem --------------------------------

# States x in {0, 1}, x_0 = 0, actions {0, 1, 2}, x_{k+1} = (x_k + a_k) mod 2, K = 3 decisions.
TAB_K, TAB_A = 3, 3
TAB_R = torch.tensor([[[0.0, 1.0, 2.0], [3.0, -1.0, 0.5]],             # R[k, x, a]
                      [[1.5, 0.0, -2.0], [0.0, 2.5, 1.0]],
                      [[-1.0, 4.0, 0.0], [2.0, 0.0, 1.0]]], dtype=F64)
TAB_PI = torch.tensor([[[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]],            # pi[k, x, a]
                       [[0.1, 0.1, 0.8], [0.3, 0.3, 0.4]],
                       [[0.5, 0.25, 0.25], [0.05, 0.9, 0.05]]], dtype=F64)
TAB_MU = torch.tensor([0.5, 0.3, 0.2], dtype=F64)                     # mu(a), any state


def tabular_truth() -> float:
    """V(pi) by enumerating all A^K action sequences (no dynamic programming)."""
    total = 0.0
    for seq in itertools.product(range(TAB_A), repeat=TAB_K):
        x, prob, ret = 0, 1.0, 0.0
        for k, a in enumerate(seq):
            prob *= float(TAB_PI[k, x, a])
            ret += float(TAB_R[k, x, a])
            x = (x + a) % 2
        total += prob * ret
    return total / TAB_K


def tabular_q() -> torch.Tensor:
    """Q[k, x, a] = R[k, x, a] + sum_a' pi[k+1, x', a'] Q[k+1, x', a'] (reward to go, by backward DP)."""
    q = torch.zeros(TAB_K, 2, TAB_A, dtype=F64)
    for k in reversed(range(TAB_K)):
        for x in range(2):
            for a in range(TAB_A):
                nxt = (x + a) % 2
                later = float((TAB_PI[k + 1, nxt] * q[k + 1, nxt]).sum()) if k + 1 < TAB_K else 0.0
                q[k, x, a] = TAB_R[k, x, a] + later
    return q


def tabular_log(n: int, g: torch.Generator) -> dict:
    actions = torch.multinomial(TAB_MU, n * TAB_K, replacement=True, generator=g).reshape(n, TAB_K)
    x = torch.zeros(n, TAB_K, dtype=torch.long)
    for k in range(1, TAB_K):
        x[:, k] = (x[:, k - 1] + actions[:, k - 1]) % 2
    ks = torch.arange(TAB_K).expand(n, TAB_K)
    q = tabular_q()
    return {"reward": TAB_R[ks, x, actions], "target_prob": TAB_PI[ks, x, actions],
            "logging_prob": TAB_MU[actions], "q_logged": q[ks, x, actions],
            "v_state": (TAB_PI[ks, x] * q[ks, x]).sum(-1)}


def test_dr_with_the_true_q_has_zero_variance_and_equals_the_truth():
    truth = tabular_truth()
    assert abs(float((TAB_PI[0, 0] * tabular_q()[0, 0]).sum()) / TAB_K - truth) < TOL   # DP agrees with enumeration
    log = tabular_log(400, gen(2))
    dr = doubly_robust(log["reward"], log["target_prob"], log["logging_prob"], log["q_logged"], log["v_state"])
    assert dr.terms.std().item() < 1e-12
    assert abs(dr.estimate - truth) < 1e-12
    assert dr.high - dr.low < 1e-10 and dr.low - 1e-12 <= truth <= dr.high + 1e-12
    p = pdis(log["reward"], log["target_prob"], log["logging_prob"])
    assert p.terms.std().item() > 0.1                                   # the problem is not trivial for IS


def test_dr_with_a_zero_model_is_pdis():
    log = random_log(3)
    args = (log["reward"], log["target_prob"], log["logging_prob"])
    zeros = torch.zeros_like(log["reward"])
    dr, p = doubly_robust(*args, zeros, zeros), pdis(*args)
    assert abs(dr.estimate - p.estimate) < TOL
    assert torch.allclose(dr.terms, p.terms, atol=TOL, rtol=0)
    assert (dr.low, dr.high) == pytest.approx((p.low, p.high), abs=TOL)


# --- FQE on a problem where the regression is exact --------------------------------------------

# F = 2, A = 3, K = 3: s_{k+1} = M_a s_k + c_a, r_k = alpha_a + beta_a . s_k (both exact per action),
# pi(a) = LIN_PI in every state, so every regression target is linear in (standardised s_k) per action.
LIN_K, LIN_A = 3, 3
LIN_M = torch.tensor([[[0.9, 0.1], [0.0, 0.8]], [[0.5, -0.3], [0.2, 1.1]], [[1.0, 0.0], [0.4, 0.6]]], dtype=F64)
LIN_C = torch.tensor([[0.1, 0.0], [-0.2, 0.3], [0.0, 0.5]], dtype=F64)
LIN_ALPHA = torch.tensor([5.0, 4.0, 6.0], dtype=F64)
LIN_BETA = torch.tensor([[1.0, -0.5], [0.3, 0.7], [-0.8, 0.2]], dtype=F64)
LIN_PI = torch.tensor([0.6, 0.3, 0.1], dtype=F64)


def linear_truth(s0: torch.Tensor) -> float:
    """(1/N) sum_i V(pi | s_i0) / K by enumerating the A^K action sequences from each start."""
    total = 0.0
    for start in s0.tolist():
        for seq in itertools.product(range(LIN_A), repeat=LIN_K):
            s, prob, ret = torch.tensor(start, dtype=F64), 1.0, 0.0
            for a in seq:
                prob *= float(LIN_PI[a])
                ret += float(LIN_ALPHA[a] + LIN_BETA[a] @ s)
                s = LIN_M[a] @ s + LIN_C[a]
            total += prob * ret
    return total / len(s0) / LIN_K


def linear_log(n: int, g: torch.Generator) -> dict:
    actions = torch.randint(0, LIN_A, (n, LIN_K), generator=g)
    states = torch.empty(n, LIN_K, 2, dtype=F64)
    states[:, 0] = torch.randn(n, 2, generator=g, dtype=F64) * 2 + 1
    for k in range(1, LIN_K):
        a = actions[:, k - 1]
        states[:, k] = (LIN_M[a] @ states[:, k - 1].unsqueeze(2)).squeeze(2) + LIN_C[a]
    reward = LIN_ALPHA[actions] + (LIN_BETA[actions] * states).sum(-1)
    return {"states": states, "actions": actions, "reward": reward,
            "target_probs": LIN_PI.expand(n, LIN_K, LIN_A).clone()}


def test_fqe_recovers_the_exact_value_when_q_is_linear():
    log = linear_log(120, gen(4))
    truth = linear_truth(log["states"][:, 0])
    est, q_all = fitted_q_evaluation(log["states"], log["actions"], log["reward"], log["target_probs"],
                                     ridge=0.0, generator=gen(5), reps=20)
    assert abs(est.estimate - truth) < 1e-8
    # the last decision's Q is the reward function itself, for every action
    s_last = log["states"][:, -1]
    expected = LIN_ALPHA + s_last @ LIN_BETA.T                                          # (N, A)
    assert (q_all[:, -1] - expected).abs().max().item() < 1e-8
    # with exact regressions every resample gives the same model, so the bootstrap spread is that of s_0
    assert est.low <= est.estimate <= est.high
    # and DR fed with FQE's exact model has (numerically) zero spread
    pi_logged = log["target_probs"].gather(2, log["actions"].unsqueeze(2)).squeeze(2)
    dr = doubly_robust(log["reward"], pi_logged, torch.full_like(pi_logged, 1 / LIN_A),
                       q_all.gather(2, log["actions"].unsqueeze(2)).squeeze(2),
                       (log["target_probs"] * q_all).sum(-1))
    assert abs(dr.estimate - est.estimate) < 1e-8


def test_fqe_ridge_shrinks_the_value_toward_zero():
    log = linear_log(120, gen(4))
    truth = linear_truth(log["states"][:, 0])                                           # about 5, rewards > 0
    values = [fitted_q_evaluation(log["states"], log["actions"], log["reward"], log["target_probs"],
                                  ridge=ridge, reps=2)[0].estimate for ridge in (0.0, 1.0, 10.0, 100.0, 1e4)]
    assert abs(values[0] - truth) < 1e-8
    assert all(b < a for a, b in zip(values, values[1:])), values
    assert values[-1] < 0.1 * truth


# --- vectorised = reference loops --------------------------------------------------------------

@pytest.mark.parametrize("seed", [10, 11, 12])
@pytest.mark.parametrize("ridge", [1.0, 0.3])
def test_vectorised_estimators_match_the_reference_loops(seed, ridge):
    check_against_references(random_log(seed, n=50, k=4, a=3), ridge=ridge)


def test_fqe_ridge_zero_matches_least_squares_reference():
    log = random_log(13, n=50, k=4, a=3)
    args = (log["states"], log["actions"], log["reward"], log["target_probs"])
    est, q_all = fitted_q_evaluation(*args, ridge=0.0, reps=2)
    value, q_ref = fitted_q_evaluation_reference(*args, ridge=0.0)
    assert abs(est.estimate - value) < 1e-10 and np.abs(q_all.numpy() - q_ref).max() < 1e-10


def test_bootstraps_equal_a_loop_over_the_documented_resamples():
    """The percentile intervals are the quantiles of the reference refitted on
    torch.randint(0, N, (reps, N), generator) resamples."""
    log = random_log(14, n=40, k=3, a=3)
    reps = 25
    idx = torch.randint(0, 40, (reps, 40), generator=gen(7))
    args = (log["reward"], log["target_prob"], log["logging_prob"])
    boot = [wpdis_reference(*(x[b] for x in args)) for b in idx]
    low, high = np.quantile(boot, [0.025, 0.975])
    w = wpdis(*args, generator=gen(7), reps=reps)
    assert (w.low, w.high) == pytest.approx((low, high), abs=TOL)
    fqe_args = (log["states"], log["actions"], log["reward"], log["target_probs"])
    boot = [fitted_q_evaluation_reference(*(x[b] for x in fqe_args), ridge=1.0)[0] for b in idx]
    low, high = np.quantile(boot, [0.025, 0.975])
    est, _ = fitted_q_evaluation(*fqe_args, ridge=1.0, generator=gen(7), reps=reps)
    assert (est.low, est.high) == pytest.approx((low, high), abs=1e-11)


def test_fqe_bootstrap_chunks_do_not_change_the_interval(monkeypatch):
    log = random_log(15, n=30, k=3, a=3)
    args = (log["states"], log["actions"], log["reward"], log["target_probs"])
    whole, _ = fitted_q_evaluation(*args, generator=gen(8), reps=12)
    monkeypatch.setattr(ope, "FQE_CHUNK_ELEMENTS", 1)                                   # one resample per chunk
    chunked, _ = fitted_q_evaluation(*args, generator=gen(8), reps=12)
    assert (chunked.low, chunked.high) == pytest.approx((whole.low, whole.high), abs=TOL)


# --- unbiasedness: PDIS targets V(pi), one-step IPS does not -----------------------------------

# K = 3, A = 2, x_0 = 0, x_{k+1} = a_k: the action moves the state, so pi changes the states it meets.
# r_k = x_k + 0.2 a_k + N(0, 0.5^2); mu(1) = 0.5, pi(1) = 0.8 in every state.
#   V(pi) = (0.16 + (0.8 + 0.16) + (0.8 + 0.16)) / 3 = 2.08 / 3
#   E_mu[IPS] = pi's one-step reward on mu's states (E_mu[x_k] = 0.5 for k >= 1) = (0.16 + 0.66 + 0.66) / 3 = 1.48 / 3
MC_PI1, MC_MU1, MC_K = 0.8, 0.5, 3


def mc_truth() -> float:
    total = 0.0
    for seq in itertools.product((0, 1), repeat=MC_K):
        x, prob, ret = 0, 1.0, 0.0
        for a in seq:
            prob *= MC_PI1 if a else 1 - MC_PI1
            ret += x + 0.2 * a
            x = a
        total += prob * ret
    return total / MC_K


def mc_logs(sets: int, n: int, g: torch.Generator) -> dict:
    m = sets * n
    actions = (torch.rand(m, MC_K, generator=g, dtype=F64) < MC_MU1).to(F64)
    x = torch.cat([torch.zeros(m, 1, dtype=F64), actions[:, :-1]], 1)
    reward = x + 0.2 * actions + 0.5 * torch.randn(m, MC_K, generator=g, dtype=F64)
    pi = torch.where(actions == 1, MC_PI1, 1 - MC_PI1)
    mu = torch.where(actions == 1, MC_MU1, 1 - MC_MU1)
    return {"reward": reward, "target_prob": pi, "logging_prob": mu, "x": x, "actions": actions}


def test_pdis_is_unbiased_and_one_step_ips_is_not_for_the_sequential_value():
    truth = mc_truth()
    assert truth == pytest.approx(2.08 / 3, abs=TOL)
    sets, n = 400, 200
    log = mc_logs(sets, n, gen(21))
    args = (log["reward"], log["target_prob"], log["logging_prob"])
    first = tuple(x[:n] for x in args)
    per_set = {}
    for name, fn in (("pdis", pdis), ("ips", one_step_ips)):
        per_set[name] = fn(*args).terms.reshape(sets, n).mean(1)    # (sets,) one per log set
        assert per_set[name][0].item() == pytest.approx(fn(*first).estimate, abs=TOL)
    # DR with a fixed, wrong model Qhat(x, a) = 0.3 + 0.5 a - 0.2 x is unbiased too, provided
    # v = sum_a pi(a|x) Qhat(x, a) (a v inconsistent with q, e.g. constants q = 0.7, v = 0.4, is biased)
    x, a = log["x"], log["actions"]
    q_fixed = 0.3 + 0.5 * a - 0.2 * x
    v_fixed = 0.3 + 0.5 * MC_PI1 - 0.2 * x
    per_set["dr"] = doubly_robust(*args, q_fixed, v_fixed).terms.reshape(sets, n).mean(1)

    def z(name: str, target: float) -> float:
        x = per_set[name]
        return (x.mean().item() - target) / (x.std().item() / math.sqrt(sets))

    assert abs(z("pdis", truth)) < 4
    assert abs(z("dr", truth)) < 4
    assert abs(z("ips", truth)) > 10                                   # biased for V(pi) ...
    assert abs(z("ips", 1.48 / 3)) < 4                  # ... it estimates pi's one-step value on mu's states
    assert per_set["ips"].mean().item() < truth - 0.15
    # the per-set PDIS t intervals cover V(pi) at about their nominal rate; the IPS ones do not
    terms = pdis(*args).terms.reshape(sets, n)
    covered = sum(interval_covers(t_interval(row), truth) for row in terms)
    assert 0.90 <= covered / sets <= 0.99
    ips_terms = one_step_ips(*args).terms.reshape(sets, n)
    assert sum(interval_covers(t_interval(row), truth) for row in ips_terms) / sets < 0.5


# --- bad inputs ---------------------------------------------------------------------------------

def _is_estimators():
    return [one_step_ips, one_step_snips, pdis, wpdis,
            lambda r, p, m: doubly_robust(r, p, m, torch.zeros(2, 3, dtype=F64), torch.zeros(2, 3, dtype=F64))]


GOOD = {"reward": [[1.0, 2.0, 3.0], [0.0, 1.0, 2.0]], "target_prob": [[0.5, 0.5, 0.5], [0.2, 0.3, 0.4]],
        "logging_prob": [[0.25, 0.5, 0.5], [0.5, 0.5, 0.5]]}


def _with(name: str, value) -> tuple:
    d = dict(GOOD, **{name: value})
    return d["reward"], d["target_prob"], d["logging_prob"]


@pytest.mark.parametrize("fn", _is_estimators(), ids=["ips", "snips", "pdis", "wpdis", "dr"])
@pytest.mark.parametrize("name, value", [
    ("target_prob", [[0.5, 0.5], [0.2, 0.3]]),                            # shape mismatch
    ("logging_prob", [[0.25, 0.5, 0.5, 0.1], [0.5, 0.5, 0.5, 0.1]]),      # shape mismatch
    ("logging_prob", [[0.25, 0.0, 0.5], [0.5, 0.5, 0.5]]),                # mu = 0
    ("logging_prob", [[0.25, -0.1, 0.5], [0.5, 0.5, 0.5]]),               # mu < 0
    ("logging_prob", [[0.25, 0.5, float("nan")], [0.5, 0.5, 0.5]]),
    ("reward", [[1.0, float("nan"), 3.0], [0.0, 1.0, 2.0]]),
    ("reward", [1.0, 2.0, 3.0]),                                          # 1-D
    ("target_prob", [[0.5, 1.5, 0.5], [0.2, 0.3, 0.4]]),                  # not a probability
    ("target_prob", [[0.5, 0.5, float("nan")], [0.2, 0.3, 0.4]]),
])
def test_is_estimators_refuse_bad_inputs_naming_the_argument(fn, name, value):
    with pytest.raises(ValueError, match=name):
        fn(*_with(name, value))


@pytest.mark.parametrize("name, q, v", [
    ("q_logged", [[0.0, float("nan"), 0.0], [0.0, 0.0, 0.0]], [[0.0] * 3] * 2),
    ("v_state", [[0.0] * 3] * 2, [[0.0] * 2] * 2),
])
def test_dr_refuses_a_bad_model(name, q, v):
    with pytest.raises(ValueError, match=name):
        doubly_robust(GOOD["reward"], GOOD["target_prob"], GOOD["logging_prob"], q, v)


def test_fqe_refuses_bad_inputs_naming_the_argument():
    log = random_log(16, n=6, k=3, a=3)
    base = {k: log[k] for k in ("states", "actions", "reward", "target_probs")}

    def call(**change):
        d = dict(base, **change)
        return fitted_q_evaluation(d["states"], d["actions"], d["reward"], d["target_probs"], reps=2)

    nan_states = base["states"].clone()
    nan_states[1, 2, 0] = float("nan")
    bad_probs = base["target_probs"].clone()
    bad_probs[0, 0] = torch.tensor([0.5, 0.5, 0.5], dtype=F64)
    for change, name in [({"states": base["states"][:, :, 0]}, "states"), ({"states": nan_states}, "states"),
                         ({"actions": base["actions"].to(F64)}, "actions"),
                         ({"actions": base["actions"] + 3}, "actions"),
                         ({"actions": base["actions"][:, :2]}, "actions"),
                         ({"target_probs": bad_probs}, "target_probs"),
                         ({"target_probs": base["target_probs"][:, :2]}, "target_probs"),
                         ({"reward": base["reward"][:, :2]}, "states")]:
        with pytest.raises(ValueError, match=name):
            call(**change)
    with pytest.raises(ValueError, match="ridge"):
        fitted_q_evaluation(*base.values(), ridge=-1.0, reps=2)
    with pytest.raises(ValueError, match="reps"):
        fitted_q_evaluation(*base.values(), reps=1)


# --- faults: the reference comparison catches each one -----------------------------------------

@pytest.mark.parametrize("attr, fault, caught", [
    ("_cumulative", lambda w: w, "pdis"),                                               # w_ik, not prod_{j<=k}
    ("_previous", lambda rho: rho, "doubly_robust"),                                    # rho_k v_k, not rho_{k-1}
    ("_wpdis_columns", lambda num, den: num / den.new_tensor(50.0), "wpdis"),           # unnormalised
    ("_next_value", lambda q, p: q.max(-1).values, "fitted_q_evaluation"),              # greedy, not pi
    ("_ratios", lambda p, m: p, "one_step_ips"),                                        # forgets 1/mu
])
def test_reference_comparison_catches_a_faulty_estimator(monkeypatch, attr, fault, caught):
    log = random_log(17)
    check_against_references(log)                                                       # passes when right
    monkeypatch.setattr(ope, attr, fault)
    with pytest.raises(AssertionError, match=caught):
        check_against_references(log)


def test_faulty_pdis_with_one_step_ratios_misses_the_hand_case():
    """PDIS computed with w_ik instead of rho_ik gives (2*1 + 1*3)/2, (2*2 + 0)/2 -> 2.25, not 3."""
    args = (HAND["reward"], HAND["target_prob"], HAND["logging_prob"])
    w = torch.tensor(HAND["target_prob"], dtype=F64) / torch.tensor(HAND["logging_prob"], dtype=F64)
    faulty = (w * torch.tensor(HAND["reward"], dtype=F64)).mean().item()
    assert faulty == pytest.approx(2.25)
    assert abs(faulty - pdis_reference(*args)) > 0.5
