"""Off-policy estimators of a *sequential* policy's value, each with a 95% interval.

A log holds N trajectories (campaign-days) of K decisions each.  Trajectory i, decision k logged the
state s_ik, the action a_ik drawn from the logging policy mu, and the fused reward r_ik.  The quantity
to estimate is the value of *running* the target policy pi for the whole day,

    V(pi) = E_pi[ (1/K) sum_{k<K} r_k ],

the mean reward per decision.  With the one-step ratio w_ik = pi(a_ik | s_ik) / mu(a_ik | s_ik) and the
cumulative ratio rho_ik = prod_{j<=k} w_ij (rho_{i,-1} = 1):

    one-step IPS   (1/NK) sum_i sum_k w_ik r_ik                                   (:func:`one_step_ips`)
    one-step SNIPS sum_ik w_ik r_ik / sum_ik w_ik                                 (:func:`one_step_snips`)
    PDIS           (1/N) sum_i (1/K) sum_k rho_ik r_ik                            (:func:`pdis`)
    WPDIS          (1/K) sum_k [ sum_i rho_ik r_ik / sum_i rho_ik ]                (:func:`wpdis`)
    DR             (1/N) sum_i (1/K) sum_k [ rho_ik (r_ik - q_ik) + rho_{i,k-1} v_ik ]   (:func:`doubly_robust`)
    FQE            (1/N) sum_i (1/K) sum_a pi(a | s_i0) Qhat_0(s_i0, a)           (:func:`fitted_q_evaluation`)

q_ik = Qhat(s_ik, a_ik) and v_ik = sum_a pi(a | s_ik) Qhat(s_ik, a), where Qhat_k(s, a) is a model of
the reward *to go*, E_pi[sum_{j>=k} r_j | s_k = s, a_k = a] (a sum, not a mean; the 1/K comes last).

PDIS and DR (with a model fixed in advance and v consistent with q) are unbiased for V(pi) when mu > 0
wherever pi > 0 (Precup et al. 2000; Jiang & Li 2016).  WPDIS and SNIPS are consistent but biased at finite N.
One-step IPS is **not** an estimator of V(pi): its expectation is

    E_mu[IPS] = (1/K) sum_k E_{s_k ~ d^mu_k} E_{a ~ pi(.|s_k)} [r(s_k, a)],

pi's one-step reward on the states that *mu* visits, which differs from V(pi) whenever pi changes the
state distribution (the tests build such a case).  It is the seed contract's estimator
(:func:`litrepro.rlbp.ope.ordinary_ips` on the flattened decisions) and is kept for contrast.

Intervals (95% by default), all over trajectories, the independent units (the K decisions of one
trajectory are not independent):

* IPS, PDIS, DR: Student-t interval of the mean of the N per-trajectory terms (:func:`t_interval`);
  for DR the model (q, v) is treated as fixed, so its fitting error is not in the interval.
* SNIPS: delta method for a ratio of means over trajectories, t quantile with N - 1 df.
* WPDIS, FQE: percentile bootstrap over trajectories; the resample indices are
  ``torch.randint(0, N, (reps, N), generator=generator)`` drawn once, so a caller can reproduce them.
  FQE refits its whole procedure (standardisation and ridge regressions) on every resample.

Every function takes float tensors (or anything ``torch.as_tensor`` reads), works in float64 and is
vectorised over trajectories (and over bootstrap replicates); the ``*_reference`` functions are
plain-Python loops written independently for the tests and the study's checks.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats
from torch import Tensor

F64 = torch.float64
#: Floor of a feature's standard deviation in FQE's standardisation (a constant feature becomes 0).
SD_FLOOR = 1e-8
#: Rows of target_probs must sum to 1 within this tolerance.
PROB_SUM_TOL = 1e-6
#: Bound on the elements of one FQE bootstrap chunk's largest intermediate (reps x N x (F+1)^2).
FQE_CHUNK_ELEMENTS = 4_000_000


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its interval [low, high].

    ``terms`` (N,) are the per-trajectory terms whose mean is ``estimate`` (None for the
    self-normalised estimators, whose estimate is not a mean of per-trajectory terms); ``interval``
    names how [low, high] was formed (``"t"``, ``"delta"`` or ``"bootstrap"``).
    """

    estimate: float
    low: float
    high: float
    terms: Tensor | None = dataclasses.field(default=None, compare=False, repr=False)
    interval: str = "t"

    def to_dict(self) -> dict[str, float | str]:
        """``{estimate, low, high, interval}`` (JSON-ready; the terms are left out)."""
        return {"estimate": self.estimate, "low": self.low, "high": self.high, "interval": self.interval}


# --- intervals ------------------------------------------------------------------------------

def _t_quantile(n: int, confidence: float) -> float:
    return float(stats.t.ppf(0.5 + confidence / 2, n - 1))


def t_interval(terms: Tensor, *, confidence: float = 0.95) -> Estimate:
    """Student-t interval of the mean of ``terms`` (n,):

        mean +- t_{n-1, (1+c)/2} sd(terms, n-1) / sqrt(n).

    With n < 2 or no spread the interval collapses to the mean (as :func:`litrepro.stats.mean_interval`).
    """
    terms = torch.as_tensor(terms, dtype=F64).reshape(-1)
    _check_confidence(confidence, "t_interval")
    n = terms.numel()
    if n == 0:
        raise ValueError("t_interval: terms is empty")
    if not torch.isfinite(terms).all():
        raise ValueError("t_interval: terms contains a non-finite value")
    mean = float(terms.mean())
    if n < 2:
        return Estimate(mean, mean, mean, terms, "t")
    se = float(terms.std(unbiased=True)) / math.sqrt(n)
    half = _t_quantile(n, confidence) * se if se > 0 else 0.0
    return Estimate(mean, mean - half, mean + half, terms, "t")


def interval_covers(est: Estimate, truth: float) -> bool:
    """True when low <= truth <= high."""
    return bool(est.low <= float(truth) <= est.high)


def _percentile(values: Tensor, confidence: float) -> tuple[float, float]:
    """Percentile-bootstrap bounds: the (1-c)/2 and (1+c)/2 quantiles (linear interpolation) of (reps,)."""
    q = torch.tensor([0.5 - confidence / 2, 0.5 + confidence / 2], dtype=F64, device=values.device)
    low, high = torch.quantile(values, q).tolist()
    return low, high


def _resample_counts(n: int, reps: int, generator: torch.Generator, device: torch.device) -> Tensor:
    """(reps, n) how often each trajectory appears in each resample of
    ``torch.randint(0, n, (reps, n), generator=generator)``."""
    idx = torch.randint(0, n, (reps, n), generator=generator, device=generator.device).to(device)
    counts = torch.zeros(reps, n, dtype=F64, device=device)
    return counts.scatter_add_(1, idx, torch.ones(reps, n, dtype=F64, device=device))


# --- validation -----------------------------------------------------------------------------

def _check_confidence(confidence: float, fn: str) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"{fn}: confidence must lie in (0, 1), got {confidence}")


def _finite(x: Tensor, name: str, fn: str) -> None:
    if torch.isnan(x).any():
        raise ValueError(f"{fn}: {name} contains NaN at index {tuple(torch.isnan(x).nonzero()[0].tolist())}")
    if torch.isinf(x).any():
        raise ValueError(f"{fn}: {name} contains inf at index {tuple(torch.isinf(x).nonzero()[0].tolist())}")


def _matrix(x, name: str, fn: str, shape: tuple[int, int] | None = None) -> Tensor:
    """``x`` as a finite (N, K) float64 tensor (of ``shape`` when given)."""
    x = torch.as_tensor(x, dtype=F64)
    if x.dim() != 2:
        raise ValueError(f"{fn}: {name} must be 2-D (N, K), got shape {tuple(x.shape)}")
    if shape is not None and tuple(x.shape) != shape:
        raise ValueError(f"{fn}: {name} has shape {tuple(x.shape)}, expected {shape} (the shape of reward)")
    if x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(f"{fn}: {name} needs at least one trajectory and one decision, got {tuple(x.shape)}")
    _finite(x, name, fn)
    return x


def _validated_log(reward, target_prob, logging_prob, fn: str) -> tuple[Tensor, Tensor, Tensor]:
    """reward, pi, mu as finite (N, K) float64 tensors with 0 <= pi <= 1 and 0 < mu <= 1."""
    reward = _matrix(reward, "reward", fn)
    shape = tuple(reward.shape)
    target_prob = _matrix(target_prob, "target_prob", fn, shape).to(reward.device)
    logging_prob = _matrix(logging_prob, "logging_prob", fn, shape).to(reward.device)
    bad = (logging_prob <= 0).nonzero()
    if bad.numel():
        i, k = bad[0].tolist()
        raise ValueError(f"{fn}: logging_prob must be > 0, got {float(logging_prob[i, k])} at index {(i, k)}")
    if (logging_prob > 1).any():
        raise ValueError(f"{fn}: logging_prob must be <= 1")
    if ((target_prob < 0) | (target_prob > 1)).any():
        raise ValueError(f"{fn}: target_prob must lie in [0, 1]")
    return reward, target_prob, logging_prob


# --- small steps (module-level so the fault tests can replace them) -------------------------

def _ratios(target_prob: Tensor, logging_prob: Tensor) -> Tensor:
    """(N, K) one-step ratios w_ik = pi_ik / mu_ik."""
    return target_prob / logging_prob


def _cumulative(w: Tensor) -> Tensor:
    """(N, K) cumulative ratios rho_ik = prod_{j<=k} w_ij."""
    return torch.cumprod(w, dim=1)


def _previous(rho: Tensor) -> Tensor:
    """(N, K) rho_{i,k-1}, with rho_{i,-1} = 1."""
    return torch.cat([torch.ones_like(rho[:, :1]), rho[:, :-1]], dim=1)


def _next_value(q_next: Tensor, probs_next: Tensor) -> Tensor:
    """sum_a' pi(a' | s_{k+1}) Q_{k+1}(s_{k+1}, a'): q_next (..., N, A), probs_next (N, A) -> (..., N)."""
    return (q_next * probs_next).sum(-1)


# --- importance-sampling estimators ---------------------------------------------------------

def one_step_ips(reward, target_prob, logging_prob, *, confidence: float = 0.95) -> Estimate:
    """Ordinary one-step IPS over all N K decisions (the seed contract's estimator):

        IPS = (1/NK) sum_i sum_k w_ik r_ik,   w_ik = pi(a_ik|s_ik) / mu(a_ik|s_ik),

    equal to :func:`litrepro.rlbp.ope.ordinary_ips` on the flattened (NK,) arrays.  Interval: t over
    the N per-trajectory terms (1/K) sum_k w_ik r_ik.  Not unbiased for V(pi) (module docstring).
    Inputs (N, K); ``terms`` (N,).
    """
    reward, target_prob, logging_prob = _validated_log(reward, target_prob, logging_prob, "one_step_ips")
    _check_confidence(confidence, "one_step_ips")
    terms = (_ratios(target_prob, logging_prob) * reward).mean(1)                     # (N,)
    return t_interval(terms, confidence=confidence)


def one_step_snips(reward, target_prob, logging_prob, *, confidence: float = 0.95) -> Estimate:
    """Self-normalised one-step IPS:

        SNIPS = sum_ik w_ik r_ik / sum_ik w_ik = mean_i A_i / mean_i B_i,
        A_i = sum_k w_ik r_ik,   B_i = sum_k w_ik.

    Interval: **delta method** over trajectories for the ratio of means, with influence terms
    psi_i = (A_i - SNIPS B_i) / mean(B), se = sd(psi, N-1) / sqrt(N), SNIPS +- t_{N-1} se.
    When every logged action has pi = 0 (sum w = 0) the estimate is 0 with a collapsed interval
    (the same guard as WPDIS).  Inputs (N, K); ``terms`` is None.
    """
    reward, target_prob, logging_prob = _validated_log(reward, target_prob, logging_prob, "one_step_snips")
    _check_confidence(confidence, "one_step_snips")
    w = _ratios(target_prob, logging_prob)                                             # (N, K)
    a, b = (w * reward).sum(1), w.sum(1)                                               # (N,), (N,)
    if float(b.sum()) == 0.0:
        return Estimate(0.0, 0.0, 0.0, None, "delta")
    value = float(a.sum() / b.sum())
    n = reward.shape[0]
    if n < 2:
        return Estimate(value, value, value, None, "delta")
    psi = (a - value * b) / b.mean()                                                   # (N,)
    se = float(psi.std(unbiased=True)) / math.sqrt(n)
    half = _t_quantile(n, confidence) * se
    return Estimate(value, value - half, value + half, None, "delta")


def pdis(reward, target_prob, logging_prob, *, confidence: float = 0.95) -> Estimate:
    """Per-decision importance sampling (Precup et al. 2000):

        PDIS = (1/N) sum_i (1/K) sum_k rho_ik r_ik,   rho_ik = prod_{j<=k} w_ij.

    Unbiased for V(pi).  Interval: t over the N per-trajectory terms (1/K) sum_k rho_ik r_ik.
    Inputs (N, K); ``terms`` (N,).
    """
    reward, target_prob, logging_prob = _validated_log(reward, target_prob, logging_prob, "pdis")
    _check_confidence(confidence, "pdis")
    rho = _cumulative(_ratios(target_prob, logging_prob))                              # (N, K)
    return t_interval((rho * reward).mean(1), confidence=confidence)


def _wpdis_columns(num: Tensor, den: Tensor) -> Tensor:
    """(..., K) sum_i rho_ik r_ik / sum_i rho_ik, 0 where the column sum of rho is 0."""
    safe = torch.where(den > 0, den, torch.ones_like(den))
    return torch.where(den > 0, num / safe, torch.zeros_like(num))


def wpdis(reward, target_prob, logging_prob, *, generator: torch.Generator | None = None, reps: int = 200,
          confidence: float = 0.95) -> Estimate:
    """Weighted (self-normalised) per-decision IS:

        WPDIS = (1/K) sum_k c_k,   c_k = sum_i rho_ik r_ik / sum_i rho_ik   (c_k = 0 if sum_i rho_ik = 0).

    **Zero-column guard**: when no logged trajectory has pi > 0 on all its actions up to k, decision k
    contributes 0 (it still counts in the 1/K), i.e. an unreachable decision is scored as reward 0.
    Interval: percentile bootstrap over trajectories, ``reps`` resamples drawn from ``generator``
    (a fresh ``torch.Generator().manual_seed(0)`` when None), vectorised over the resamples by counts:
    c_bk = sum_i n_bi rho_ik r_ik / sum_i n_bi rho_ik with n_bi the times trajectory i is in resample b.
    Inputs (N, K); ``terms`` is None.
    """
    reward, target_prob, logging_prob = _validated_log(reward, target_prob, logging_prob, "wpdis")
    _check_confidence(confidence, "wpdis")
    if reps < 2:
        raise ValueError(f"wpdis: reps must be >= 2, got {reps}")
    generator = generator if generator is not None else torch.Generator().manual_seed(0)
    rho = _cumulative(_ratios(target_prob, logging_prob))                              # (N, K)
    value = float(_wpdis_columns((rho * reward).sum(0), rho.sum(0)).mean())
    counts = _resample_counts(reward.shape[0], reps, generator, reward.device)         # (reps, N)
    boot = _wpdis_columns(counts @ (rho * reward), counts @ rho).mean(1)               # (reps,)
    low, high = _percentile(boot, confidence)
    return Estimate(value, low, high, None, "bootstrap")


def doubly_robust(reward, target_prob, logging_prob, q_logged, v_state, *, confidence: float = 0.95) -> Estimate:
    """Per-decision doubly robust estimator (Jiang & Li 2016, gamma = 1, divided by K):

        DR_i = (1/K) sum_k [ rho_ik (r_ik - q_ik) + rho_{i,k-1} v_ik ],   rho_{i,-1} = 1,
        DR   = (1/N) sum_i DR_i,

    q_logged (N, K) = Qhat_k(s_ik, a_ik) and v_state (N, K) = sum_a pi(a|s_ik) Qhat_k(s_ik, a), with Qhat the
    reward-to-go model (e.g. the ``q_all`` of :func:`fitted_q_evaluation`).  With q = v = 0 it is PDIS;
    with the exact Q^pi of a deterministic problem every DR_i equals V(pi).  Unbiased for any model fixed
    independently of the log **provided v is consistent with q** (v_ik = sum_a pi(a|s_ik) Qhat_k(s_ik, a),
    the same Qhat as q_ik); an inconsistent pair (e.g. arbitrary constants) is biased.  Interval: t over
    the N terms DR_i, **the model treated as fixed** (its fitting error, if fitted on the same log, is not
    in the interval).  ``terms`` (N,).
    """
    reward, target_prob, logging_prob = _validated_log(reward, target_prob, logging_prob, "doubly_robust")
    shape = tuple(reward.shape)
    q_logged = _matrix(q_logged, "q_logged", "doubly_robust", shape).to(reward.device)
    v_state = _matrix(v_state, "v_state", "doubly_robust", shape).to(reward.device)
    _check_confidence(confidence, "doubly_robust")
    rho = _cumulative(_ratios(target_prob, logging_prob))                              # (N, K)
    terms = (rho * (reward - q_logged) + _previous(rho) * v_state).mean(1)             # (N,)
    return t_interval(terms, confidence=confidence)


# --- fitted Q evaluation --------------------------------------------------------------------

def _validated_fqe(states, actions, reward, target_probs) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    fn = "fitted_q_evaluation"
    reward = _matrix(reward, "reward", fn)
    n, k = reward.shape
    states = torch.as_tensor(states, dtype=F64).to(reward.device)
    if states.dim() != 3 or tuple(states.shape[:2]) != (n, k) or states.shape[2] < 1:
        raise ValueError(f"{fn}: states must be (N, K, F) = ({n}, {k}, F >= 1), got shape {tuple(states.shape)}")
    _finite(states, "states", fn)
    actions = torch.as_tensor(actions).to(reward.device)
    if actions.dtype.is_floating_point or actions.dtype.is_complex or actions.dtype == torch.bool:
        raise ValueError(f"{fn}: actions must be an integer tensor, got {actions.dtype}")
    if tuple(actions.shape) != (n, k):
        raise ValueError(f"{fn}: actions has shape {tuple(actions.shape)}, expected {(n, k)} (the shape of reward)")
    target_probs = torch.as_tensor(target_probs, dtype=F64).to(reward.device)
    if target_probs.dim() != 3 or tuple(target_probs.shape[:2]) != (n, k) or target_probs.shape[2] < 1:
        raise ValueError(f"{fn}: target_probs must be (N, K, A) = ({n}, {k}, A >= 1), "
                         f"got shape {tuple(target_probs.shape)}")
    _finite(target_probs, "target_probs", fn)
    if ((target_probs < 0) | (target_probs > 1)).any():
        raise ValueError(f"{fn}: target_probs must lie in [0, 1]")
    if ((target_probs.sum(-1) - 1).abs() > PROB_SUM_TOL).any():
        raise ValueError(f"{fn}: target_probs must sum to 1 over actions (tolerance {PROB_SUM_TOL})")
    n_actions = target_probs.shape[2]
    if ((actions < 0) | (actions >= n_actions)).any():
        raise ValueError(f"{fn}: actions must lie in [0, {n_actions}) (A from target_probs)")
    return states, actions.long(), reward, target_probs


def _fqe_fit(states: Tensor, actions: Tensor, reward: Tensor, target_probs: Tensor, weights: Tensor,
             ridge: float, keep_q: bool) -> tuple[Tensor, Tensor | None]:
    """Backward ridge FQE for B weightings of the trajectories at once.

    states (N, K, F), actions (N, K), reward (N, K), target_probs (N, K, A), weights (B, N) (ones for
    the log itself, resample counts for the bootstrap).  Returns the values (B,) and, with ``keep_q``,
    Q (B, N, K, A) with Q[b, i, k, a] = Qhat_k(s_ik, a).
    """
    n, k_dec, f = states.shape
    n_act = target_probs.shape[2]
    b = weights.shape[0]
    f1 = f + 1
    onehot_t = torch.nn.functional.one_hot(actions, n_act).to(F64).permute(1, 2, 0)       # (K, A, N)
    total = weights.sum(1, keepdim=True)                                                  # (B, 1)
    eye = torch.eye(f1, dtype=F64, device=states.device)
    q_store = torch.empty(b, n, k_dec, n_act, dtype=F64, device=states.device) if keep_q else None
    q_next = None                                                                         # (B, N, A)
    for k in reversed(range(k_dec)):                                     # one regression per decision
        x = states[:, k]                                                                  # (N, F)
        mean = (weights @ x) / total                                                      # (B, F)
        centred = x.unsqueeze(0) - mean.unsqueeze(1)                                      # (B, N, F)
        sd = ((weights.unsqueeze(2) * centred ** 2).sum(1) / total).sqrt().clamp_min(SD_FLOOR)  # (B, F)
        z = torch.cat([torch.ones(b, n, 1, dtype=F64, device=x.device), centred / sd.unsqueeze(1)], 2)  # (B, N, F1)
        y = reward[:, k].expand(b, n)                                                     # (B, N)
        if q_next is not None:
            y = y + _next_value(q_next, target_probs[:, k + 1])
        wa = weights.unsqueeze(1) * onehot_t[k].unsqueeze(0)                              # (B, A, N)
        gram = (wa @ (z.unsqueeze(3) * z.unsqueeze(2)).reshape(b, n, f1 * f1)).reshape(b, n_act, f1, f1)
        rhs = (wa * y.unsqueeze(1)) @ z                                                   # (B, A, F1)
        if ridge > 0:
            beta = torch.linalg.solve(gram + ridge * eye, rhs.unsqueeze(3)).squeeze(3)   # (B, A, F1)
        else:
            beta = (torch.linalg.pinv(gram) @ rhs.unsqueeze(3)).squeeze(3)               # minimum norm
        q_next = z @ beta.transpose(1, 2)                                                 # (B, N, A)
        if keep_q:
            q_store[:, :, k] = q_next
    v0 = _next_value(q_next, target_probs[:, 0])                                          # (B, N)
    values = (weights * v0).sum(1) / total.squeeze(1) / k_dec                            # (B,)
    return values, q_store


def fitted_q_evaluation(states, actions, reward, target_probs, *, ridge: float = 1.0,
                        generator: torch.Generator | None = None, reps: int = 100,
                        confidence: float = 0.95) -> tuple[Estimate, Tensor]:
    """Finite-horizon fitted Q evaluation by backward ridge regression, one regression per decision:

        Q_{K-1}(s, a) fits  r_{K-1}
        Q_k(s, a)     fits  r_k + sum_a' pi(a' | s_{k+1}) Q_{k+1}(s_{k+1}, a')      (k = K-2, ..., 0)
        FQE = (1/K) (1/N) sum_i sum_a pi(a | s_i0) Q_0(s_i0, a)

    Q_k is the reward to go (a sum over k..K-1), hence the final 1/K.  Features of (s, a) at decision k:
    the per-action block phi(s, a) = e_a (x) [1, z(s)], z the states[:, k] standardised with their own
    per-feature mean and population sd (sd floored at ``SD_FLOOR``, so a constant feature becomes 0), so
    Q_k(s, a) = beta_{k,a} . [1, z(s)] is a separate linear model per action.  Closed-form ridge,
    **intercept penalised too**: beta = (Phi^T Phi + ridge I)^{-1} Phi^T y (``torch.linalg.solve``); an
    action never logged at decision k gets Q = 0; ``ridge = 0`` gives the minimum-norm least-squares
    fit (``torch.linalg.pinv``), exact when Q is linear in the features.

    Shapes: states (N, K, F) float, actions (N, K) integer in [0, A), reward (N, K), target_probs
    (N, K, A) = pi(. | s_ik) (rows summing to 1).  Returns the :class:`Estimate` (``terms`` (N,) are
    (1/K) sum_a pi(a|s_i0) Q_0(s_i0, a)) and q_all (N, K, A) = Q_k(s_ik, a), for
    :func:`doubly_robust` (q_logged = q_all gathered at the actions, v_state = sum_a target_probs q_all).

    Interval: percentile bootstrap over trajectories, ``reps`` resamples from ``generator`` (a fresh
    ``torch.Generator().manual_seed(0)`` when None); each resample refits everything (standardisation
    and the K regressions), vectorised over resamples as count-weighted fits, in chunks.
    """
    states, actions, reward, target_probs = _validated_fqe(states, actions, reward, target_probs)
    if not (math.isfinite(ridge) and ridge >= 0):
        raise ValueError(f"fitted_q_evaluation: ridge must be finite and >= 0, got {ridge}")
    if reps < 2:
        raise ValueError(f"fitted_q_evaluation: reps must be >= 2, got {reps}")
    _check_confidence(confidence, "fitted_q_evaluation")
    generator = generator if generator is not None else torch.Generator().manual_seed(0)
    n, _, f = states.shape
    ones = torch.ones(1, n, dtype=F64, device=reward.device)
    value, q_store = _fqe_fit(states, actions, reward, target_probs, ones, ridge, keep_q=True)
    q_all = q_store[0]                                                                    # (N, K, A)
    terms = _next_value(q_all[:, 0], target_probs[:, 0]) / reward.shape[1]                # (N,)
    counts = _resample_counts(n, reps, generator, reward.device)                          # (reps, N)
    chunk = max(1, FQE_CHUNK_ELEMENTS // (n * (f + 1) ** 2))
    boot = torch.cat([_fqe_fit(states, actions, reward, target_probs, counts[s:s + chunk], ridge, keep_q=False)[0]
                      for s in range(0, reps, chunk)])                                    # (reps,)
    low, high = _percentile(boot, confidence)
    return Estimate(float(value[0]), low, high, terms, "bootstrap"), q_all


# --- plain-loop references ------------------------------------------------------------------

def _rows(x) -> list[list[float]]:
    return torch.as_tensor(x, dtype=F64).tolist()


def one_step_ips_reference(reward, target_prob, logging_prob) -> float:
    """(1/NK) sum_i sum_k pi_ik / mu_ik r_ik as plain loops."""
    r, p, m = _rows(reward), _rows(target_prob), _rows(logging_prob)
    total, count = 0.0, 0
    for i in range(len(r)):
        for k in range(len(r[i])):
            total += p[i][k] / m[i][k] * r[i][k]
            count += 1
    return total / count


def pdis_reference(reward, target_prob, logging_prob) -> float:
    """(1/N) sum_i (1/K) sum_k (prod_{j<=k} pi_ij / mu_ij) r_ik as plain loops."""
    r, p, m = _rows(reward), _rows(target_prob), _rows(logging_prob)
    total = 0.0
    for i in range(len(r)):
        weight, inner = 1.0, 0.0
        for k in range(len(r[i])):
            weight *= p[i][k] / m[i][k]
            inner += weight * r[i][k]
        total += inner / len(r[i])
    return total / len(r)


def wpdis_reference(reward, target_prob, logging_prob) -> float:
    """(1/K) sum_k sum_i rho_ik r_ik / sum_i rho_ik (0 for a zero column) as plain loops."""
    r, p, m = _rows(reward), _rows(target_prob), _rows(logging_prob)
    n, k_dec = len(r), len(r[0])
    rho = [[0.0] * k_dec for _ in range(n)]
    for i in range(n):
        running = 1.0
        for k in range(k_dec):
            running = running * p[i][k] / m[i][k]
            rho[i][k] = running
    value = 0.0
    for k in range(k_dec):
        num = sum(rho[i][k] * r[i][k] for i in range(n))
        den = sum(rho[i][k] for i in range(n))
        value += num / den if den > 0 else 0.0
    return value / k_dec


def doubly_robust_reference(reward, target_prob, logging_prob, q_logged, v_state) -> float:
    """Jiang & Li's per-decision DR, divided by K, averaged over trajectories, as plain loops."""
    r, p, m = _rows(reward), _rows(target_prob), _rows(logging_prob)
    q, v = _rows(q_logged), _rows(v_state)
    total = 0.0
    for i in range(len(r)):
        before, inner = 1.0, 0.0                                  # rho_{i,k-1}, rho_{i,-1} = 1
        for k in range(len(r[i])):
            now = before * p[i][k] / m[i][k]
            inner += now * (r[i][k] - q[i][k]) + before * v[i][k]
            before = now
        total += inner / len(r[i])
    return total / len(r)


def fitted_q_evaluation_reference(states, actions, reward, target_probs, *, ridge: float = 1.0
                                  ) -> tuple[float, np.ndarray]:
    """FQE as loops over i and k: the full block design matrix, ``numpy.linalg.solve`` (ridge > 0)
    or ``numpy.linalg.lstsq`` (minimum norm, ridge = 0).  Returns (value, q_all (N, K, A))."""
    s = torch.as_tensor(states, dtype=F64).tolist()
    act = torch.as_tensor(actions).tolist()
    r = _rows(reward)
    pi = torch.as_tensor(target_probs, dtype=F64).tolist()
    n, k_dec, f, n_act = len(s), len(s[0]), len(s[0][0]), len(pi[0][0])
    width = n_act * (f + 1)
    q = np.zeros((n, k_dec, n_act))
    for k in range(k_dec - 1, -1, -1):
        mean = [sum(s[i][k][j] for i in range(n)) / n for j in range(f)]
        sd = [max(math.sqrt(sum((s[i][k][j] - mean[j]) ** 2 for i in range(n)) / n), SD_FLOOR) for j in range(f)]

        def design(i: int, a: int) -> np.ndarray:
            row = np.zeros(width)
            row[a * (f + 1)] = 1.0
            for j in range(f):
                row[a * (f + 1) + 1 + j] = (s[i][k][j] - mean[j]) / sd[j]
            return row

        gram, rhs = np.zeros((width, width)), np.zeros(width)
        rows = []
        for i in range(n):
            target = r[i][k]
            if k + 1 < k_dec:
                for a in range(n_act):
                    target += pi[i][k + 1][a] * q[i, k + 1, a]
            row = design(i, act[i][k])
            gram += np.outer(row, row)
            rhs += row * target
            rows.append((row, target))
        if ridge > 0:
            beta = np.linalg.solve(gram + ridge * np.eye(width), rhs)
        else:
            beta = np.linalg.lstsq(np.array([row for row, _ in rows]), np.array([t for _, t in rows]), rcond=None)[0]
        for i in range(n):
            for a in range(n_act):
                q[i, k, a] = float(design(i, a) @ beta)
    value = 0.0
    for i in range(n):
        for a in range(n_act):
            value += pi[i][0][a] * q[i, 0, a]
    return value / n / k_dec, q
