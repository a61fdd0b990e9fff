"""``pinterest_rlbp``: the logged transitions in a documented format, and a cross-check with d3rlpy.

**Everything in this module is our reconstruction.**  The seed file says nothing about d3rlpy
or about an export format.  Issue 28 asks for a library cross-check: trained on the same
logged transitions, do off-the-shelf discrete offline-RL learners find the headroom that the
pipeline's critic misses at its seed budget?

The export format (``FORMAT_VERSION`` 1)
----------------------------------------
:func:`export_logged` turns one run's logged data (the ``train`` and ``heldout``
:class:`~litrepro.rlbp.critic.Transitions` of ``collect_logged_data``) into a
:class:`LoggedExport`.  :meth:`LoggedExport.save` writes it as one ``.npz`` file (plain numpy
arrays, no pickles), and :meth:`LoggedExport.load` reads it back and validates it.

There are N rows, one per logged decision (campaign c, day d, segment k), in *episode
order*: the training rows come first, then the held-out rows, each sorted by day, campaign
and segment.  So each run of K = ``segments_per_day`` consecutive rows is one campaign's day,
which is one episode.  F = 8 is the number of state features (``meta["features"]``, the
simulator's ``FEATURES``).

=============  =======  ======  ===================================================================
field          dtype    shape   meaning
=============  =======  ======  ===================================================================
state          float64  (N, F)  s_k: the features at the first control step of segment k
action         int64    (N,)    a_k in 0..8: the (Kp, Ki) gain pair used for the segment (``meta["actions"]``)
reward         float64  (N,)    r_k = r^v_k - lambda c_k: the fused reward the simulator's truth averages
next_state     float64  (N, F)  s_{k+1}; on the day's last row, the features after the day's last step
end_of_day     bool     (N,)    True on the day's last segment (k = K - 1): the episode ends there
propensity     float64  (N,)    mu(a_k | s_k) = epsilon / 9 + (1 - epsilon) [a_k = 4]: the behaviour policy's
                                probability of the action it took
value_reward   float64  (N,)    r^v_k: the value part of the reward
cpc_cost       float64  (N,)    c_k = (CPC_k - tau) / tau: the CPC part, so reward = value_reward - lambda cpc_cost
heldout        bool     (N,)    True for the held-out campaigns (IPS, held-out TD loss); False for training
day            int64    (N,)    d: the logged day, 0-based
campaign       int64    (N,)    c: the campaign, an index into the world's campaigns
segment        int64    (N,)    k: the decision segment of the day, 0..K-1
=============  =======  ======  ===================================================================

``meta`` is a JSON object with ``format_version``, ``features``, ``actions`` (Kp, Ki of each
action), ``n_actions``, ``gamma``, ``lambda_cpc``, ``behaviour_epsilon``, ``segments_per_day``,
``logged_days``, ``n_campaigns``, ``seed`` and ``dataset_fingerprint`` (the pipeline's
:func:`~litrepro.rlbp.experiment.dataset_fingerprint`).

*End of day* is a terminal in the RL sense, not a time-out.  The next day starts afresh: the
budget and the controller are reset.  So the pipeline's TD target does not bootstrap past it
(keep = gamma (1 - d)), and the d3rlpy dataset marks it as a terminal.  On every other row,
next_state equals the next row's state.

*Propensity* is the probability that the behaviour (logging) policy gave to the action it drew,
as the simulator recorded it at the draw.  With the default epsilon = 1 (uniform logging),
every propensity is 1/9.

:func:`check_export` (check ``export_matches_pipeline``) guards the export.  It recomputes every
row by a plain loop over the pipeline's own Transitions and day logs.  It checks each field, the
reward formula, the propensity formula, the end of day and next-state continuity, and it returns
the largest gap of each.

The cross-check
---------------
:func:`run_seed` builds the world, the logged data, the evaluation days and the headroom
exactly as :func:`litrepro.rlbp.diagnosis.run_seed` does (same seed, same named streams), so
the fixed gain, the best constant and the evaluation days are those of the committed studies.
It then trains d3rlpy's ``DoubleDQN``, ``DiscreteCQL`` and ``DiscreteBCQ`` on the training rows
of the export (the pipeline's critic trains on the same rows), with the scalar fused reward.
Each policy is evaluated at the step counts in ``D3Settings.checkpoints``.  It is served
greedily (d3rlpy's ``predict``) as a :data:`~litrepro.rlbp.simulator.Policy` and simulated with
:func:`~litrepro.rlbp.experiment.simulate_truth` on the same evaluation days.
:func:`summarise` pairs each policy by seed with the fixed gain and with the best constant
action in hindsight (95% t intervals, :func:`litrepro.stats.paired_ci`), recomputes every
interval by a plain loop (:func:`check_intervals`), and refuses (:class:`StudyRefused`) a failed
check or a mismatch.

What the cross-check does not hold fixed, compared with the pipeline:

* a single Q on the fused reward, where the pipeline uses two heads (value with a max backup,
  CPC with a min backup) fused afterwards;
* float32 networks (d3rlpy's), where the pipeline uses float64;
* d3rlpy's own minibatch sampler;
* no actor: the greedy policy is served directly (one action), where the pipeline serves the
  top-3 of an actor.

Where :class:`D3Settings` has a counterpart in the pipeline's critic, we match it: gamma, two
hidden layers of 64 tanh units, Adam at 1e-3, batches of 256, and a target copy every 50 steps.

Random draws: ``d3rlpy.seed`` seeds Python's, numpy's and torch's global generators.  We call
it with ``stream_seed(seed, "d3rlpy/<algo>/fit") mod 2^32``, inside a block that restores the
global states afterwards.  Each truth simulation takes
``torch.Generator().manual_seed(stream_seed(seed, "d3rlpy/<algo>"))``; a greedy policy draws
nothing from it.  No pipeline stream is drawn from for anything new.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from litrepro.paths import RENDERED

F64 = torch.float64
FORMAT_VERSION = 1
PATH = RENDERED / "pinterest_rlbp" / "d3rlpy_crosscheck.json"
PLOT = PATH.with_suffix(".png")
#: The d3rlpy release the extra pins (pyproject.toml ``d3rlpy`` extra); the study records the one it ran.
D3RLPY_VERSION = "2.8.1"

#: field -> (dtype, shape); shapes name N rows and F features.  The module docstring's table says what each means.
FIELDS: dict[str, tuple[str, str]] = {
    "state": ("float64", "(N, F)"), "action": ("int64", "(N,)"), "reward": ("float64", "(N,)"),
    "next_state": ("float64", "(N, F)"), "end_of_day": ("bool", "(N,)"), "propensity": ("float64", "(N,)"),
    "value_reward": ("float64", "(N,)"), "cpc_cost": ("float64", "(N,)"), "heldout": ("bool", "(N,)"),
    "day": ("int64", "(N,)"), "campaign": ("int64", "(N,)"), "segment": ("int64", "(N,)"),
}


class StudyRefused(ValueError):
    """A seed's checks failed, seeds share evaluation days, or an interval does not recompute: nothing is written."""


# --- The export -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class LoggedExport:
    """The logged transitions in the documented format (module docstring); arrays are numpy, rows in episode order."""

    state: np.ndarray         # (N, F) float64
    action: np.ndarray        # (N,) int64
    reward: np.ndarray        # (N,) float64
    next_state: np.ndarray    # (N, F) float64
    end_of_day: np.ndarray    # (N,) bool
    propensity: np.ndarray    # (N,) float64
    value_reward: np.ndarray  # (N,) float64
    cpc_cost: np.ndarray      # (N,) float64
    heldout: np.ndarray       # (N,) bool
    day: np.ndarray           # (N,) int64
    campaign: np.ndarray      # (N,) int64
    segment: np.ndarray       # (N,) int64
    meta: dict

    def __len__(self) -> int:
        return int(self.action.shape[0])

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in FIELDS}

    def part(self, heldout: bool) -> "LoggedExport":
        """The training rows (``heldout=False``) or the held-out rows, still in episode order."""
        keep = self.heldout == heldout
        return dataclasses.replace(self, **{k: v[keep] for k, v in self.arrays().items()})

    def validate(self) -> None:
        """Refuse (ValueError) a wrong format version, field set, dtype or shape, naming the values."""
        if self.meta.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"export format_version {self.meta.get('format_version')!r}, expected {FORMAT_VERSION}")
        n, f = len(self), len(self.meta["features"])
        for name, (dtype, shape) in FIELDS.items():
            x = getattr(self, name)
            want = (n, f) if shape == "(N, F)" else (n,)
            if str(x.dtype) != dtype or x.shape != want:
                raise ValueError(f"export field {name!r}: dtype {x.dtype} shape {x.shape}, expected {dtype} {want}")

    def save(self, path: Path | str) -> None:
        """One ``.npz``: every field as an array, and ``meta`` as a JSON string (no pickles)."""
        self.validate()
        with open(path, "wb") as fh:
            np.savez(fh, **self.arrays(), meta=np.array(json.dumps(self.meta, sort_keys=True)))

    @classmethod
    def load(cls, path: Path | str) -> "LoggedExport":
        with np.load(path, allow_pickle=False) as z:
            names = set(z.files)
            if names != set(FIELDS) | {"meta"}:
                raise ValueError(f"export {path}: fields {sorted(names)}, expected {sorted(set(FIELDS) | {'meta'})}")
            out = cls(**{name: z[name] for name in FIELDS}, meta=json.loads(str(z["meta"])))
        out.validate()
        return out


def _episode_order(n_rows: int, days: int, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rows of a pipeline part in (day, kept campaign, segment) order.

    The pipeline's ``_flatten`` lays a part out as (D, K, C_kept) flattened, so row i = d K n + k n + j.
    Returns (index into the part, day, segment), each (N,)."""
    n = n_rows // (days * k)
    assert n * days * k == n_rows, f"{n_rows} rows are not {days} days x {k} segments x whole campaigns"
    index = torch.arange(n_rows).view(days, k, n).permute(0, 2, 1).reshape(-1)           # (D, n, K) -> (N,)
    day = torch.arange(days)[:, None, None].expand(days, n, k).reshape(-1)               # (N,)
    segment = torch.arange(k)[None, None, :].expand(days, n, k).reshape(-1)              # (N,)
    return index, day, segment


def export_logged(world, data: Mapping[str, Any]) -> LoggedExport:
    """The run's logged transitions (``data["train"]``, then ``data["heldout"]``) in the documented format."""
    from litrepro.rlbp import experiment as ex
    from litrepro.rlbp.pid import N_ACTIONS
    from litrepro.rlbp.simulator import FEATURES

    cfg = world.cfg
    cols: dict[str, list[np.ndarray]] = {name: [] for name in FIELDS}
    for heldout, part in ((False, data["train"]), (True, data["heldout"])):
        index, day, segment = _episode_order(len(part), len(data["logs"]), cfg.segments_per_day)
        rows = part.index(index.to(part.action.device))
        got = {"state": rows.state, "action": rows.action, "reward": rows.reward, "next_state": rows.next_state,
               "end_of_day": rows.done > 0.5, "propensity": rows.propensity, "value_reward": rows.value_reward,
               "cpc_cost": rows.cpc_cost, "heldout": torch.full((len(rows),), heldout), "day": day,
               "campaign": rows.campaign, "segment": segment}
        for name, (dtype, _) in FIELDS.items():
            cols[name].append(got[name].detach().cpu().numpy().astype(dtype, copy=False))
    s = world.settings
    meta = {"format_version": FORMAT_VERSION, "features": list(FEATURES), "n_actions": N_ACTIONS,
            "actions": [[float(s.kp[a]), float(s.ki[a])] for a in range(N_ACTIONS)],
            "gamma": cfg.gamma, "lambda_cpc": cfg.lambda_cpc, "behaviour_epsilon": cfg.behaviour_epsilon,
            "segments_per_day": cfg.segments_per_day, "logged_days": len(data["logs"]),
            "n_campaigns": cfg.n_campaigns, "seed": cfg.seed, "dataset_fingerprint": ex.dataset_fingerprint(cfg, data)}
    out = LoggedExport(**{name: np.concatenate(v) for name, v in cols.items()}, meta=meta)
    out.validate()
    return out


#: A formula's recomputation may differ from the stored value by float64 rounding, no more.
FORMULA_TOLERANCE = 1e-12


def check_export(export: LoggedExport, world, data: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``export_matches_pipeline``, which guards :func:`export_logged`.  It recomputes the export by a plain loop.

    For every (part, day d, kept campaign j, segment k), in the documented order, the row must be the pipeline's
    Transitions row i = d K n + k n + j of that part (``_flatten``'s layout), field by field; it must also equal
    the day log's entry (logs[d].states[k, c], ...).  It must satisfy reward = r^v - lambda c, propensity =
    epsilon / 9 + (1 - epsilon) [a = 4], end_of_day = [k = K - 1], and next_state = the next row's state
    when the day goes on.  Returns each largest gap, the count of integer mismatches, and the check.
    """
    cfg = world.cfg
    lam, eps, k_seg = cfg.lambda_cpc, cfg.behaviour_epsilon, cfg.segments_per_day
    logs = data["logs"]
    exp = {name: getattr(export, name).tolist() for name in FIELDS}
    gaps = {"copy_gap": 0.0, "day_log_gap": 0.0, "reward_formula_gap": 0.0, "propensity_formula_gap": 0.0,
            "next_state_continuity_gap": 0.0}
    mismatches = 0
    row = 0

    def gap(a, b) -> float:
        if isinstance(a, list):
            return max(abs(x - y) for x, y in zip(a, b))
        return abs(a - b)

    day_logs = [{name: getattr(log, name).tolist() for name in ("states", "next_states", "actions", "propensity")}
                for log in logs]                                                         # each [k][c](...)
    for heldout, part in ((False, data["train"]), (True, data["heldout"])):
        n = len(part) // (len(logs) * k_seg)
        src = {name: getattr(part, name).tolist() for name in ("state", "action", "reward", "next_state", "done",
                                                                "propensity", "value_reward", "cpc_cost", "campaign")}
        for d in range(len(logs)):
            log = day_logs[d]
            for j in range(n):
                for k in range(k_seg):
                    i = d * k_seg * n + k * n + j                      # the pipeline's flat row
                    if row >= len(export):
                        return {**gaps, "integer_mismatches": mismatches + 1, "rows_missing": True,
                                "export_matches_pipeline": False}
                    c = src["campaign"][i]
                    for name in ("state", "reward", "next_state", "propensity", "value_reward", "cpc_cost"):
                        gaps["copy_gap"] = max(gaps["copy_gap"], gap(exp[name][row], src[name][i]))
                    mismatches += int(exp["action"][row] != src["action"][i]) + int(exp["campaign"][row] != c)
                    mismatches += int(exp["end_of_day"][row] != (src["done"][i] == 1.0))
                    mismatches += int(exp["end_of_day"][row] != (k == k_seg - 1))
                    mismatches += int(exp["day"][row] != d) + int(exp["segment"][row] != k)
                    mismatches += int(exp["heldout"][row] != heldout)
                    # the simulator's own day log, campaign c, segment k
                    gaps["day_log_gap"] = max(gaps["day_log_gap"], gap(exp["state"][row], log["states"][k][c]),
                                              gap(exp["next_state"][row], log["next_states"][k][c]),
                                              gap(exp["propensity"][row], log["propensity"][k][c]))
                    mismatches += int(exp["action"][row] != log["actions"][k][c])
                    # r = r^v - lambda c  and  mu(a|s) = eps / 9 + (1 - eps) [a = 4]
                    gaps["reward_formula_gap"] = max(gaps["reward_formula_gap"], abs(
                        exp["reward"][row] - (exp["value_reward"][row] - lam * exp["cpc_cost"][row])))
                    mu = eps / 9 + (1 - eps) * (exp["action"][row] == 4)
                    gaps["propensity_formula_gap"] = max(gaps["propensity_formula_gap"], abs(exp["propensity"][row] - mu))
                    if k < k_seg - 1 and row + 1 >= len(export):     # the day goes on past the last row
                        mismatches += 1
                    elif k < k_seg - 1:                                # the day goes on: s' is the next row's s
                        gaps["next_state_continuity_gap"] = max(gaps["next_state_continuity_gap"],
                                                                gap(exp["next_state"][row], exp["state"][row + 1]))
                    row += 1
    extra_rows = len(export) - row
    ok = (mismatches == 0 and extra_rows == 0 and gaps["copy_gap"] == 0.0 and gaps["day_log_gap"] == 0.0
          and gaps["next_state_continuity_gap"] == 0.0 and gaps["reward_formula_gap"] <= FORMULA_TOLERANCE
          and gaps["propensity_formula_gap"] <= FORMULA_TOLERANCE)
    return {**gaps, "integer_mismatches": mismatches, "extra_rows": extra_rows, "export_matches_pipeline": ok}


# --- d3rlpy ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class D3Settings:
    """What the cross-check gives d3rlpy.  It is our choice, matched to the pipeline's critic where that has a counterpart."""

    #: The algorithms, by d3rlpy config class: ``double_dqn``, ``discrete_cql``, ``discrete_bcq``.
    algos: tuple[str, ...] = ("double_dqn", "discrete_cql", "discrete_bcq")
    #: Gradient steps at which each policy is evaluated.  600 is the pipeline critic's seed budget; 3000 and 6000
    #: are the budgets of issue 28's table.
    checkpoints: tuple[int, ...] = (600, 3000, 6000)
    #: d3rlpy's epoch length.  Every checkpoint must be a multiple of it, and it does not change training.
    steps_per_epoch: int = 600
    #: Transitions per minibatch (the pipeline's ``batch_size``).
    batch_size: int = 256
    #: Adam learning rate (the pipeline's ``critic_lr``).
    learning_rate: float = 1e-3
    #: Steps between target-network copies (the pipeline's ``target_update_every``).
    target_update_interval: int = 50
    #: Hidden layers of the Q network's encoder (the pipeline's two layers of ``hidden`` = 64).
    hidden_units: tuple[int, ...] = (64, 64)
    #: The encoder's activation (the pipeline's critic uses tanh).
    activation: str = "tanh"
    #: DiscreteCQL's conservative weight alpha (d3rlpy's default).
    cql_alpha: float = 1.0
    #: DiscreteBCQ's action flexibility tau (d3rlpy's default).  An action is allowed when its imitation
    #: probability is at least tau times the largest.
    bcq_action_flexibility: float = 0.3
    #: DiscreteBCQ's weight on the imitation network's regulariser (d3rlpy's default).
    bcq_beta: float = 0.5

    def check(self) -> None:
        bad = [c for c in self.checkpoints if c <= 0 or c % self.steps_per_epoch]
        if bad or list(self.checkpoints) != sorted(set(self.checkpoints)):
            raise ValueError(f"checkpoints {self.checkpoints} must be increasing multiples of steps_per_epoch "
                             f"= {self.steps_per_epoch}")
        unknown = set(self.algos) - set(ALGOS)
        if unknown:
            raise ValueError(f"unknown algos {sorted(unknown)} (known: {', '.join(ALGOS)})")


#: name -> d3rlpy config class (``d3rlpy.algos.<name>``).
ALGOS = {"double_dqn": "DoubleDQNConfig", "discrete_cql": "DiscreteCQLConfig", "discrete_bcq": "DiscreteBCQConfig"}


def import_d3rlpy():
    """Import d3rlpy, quietly.  Its import prints gym's deprecation notice and sets up structlog at info level;
    this keeps both out of the output (warnings and above still show).  On a CUDA machine, d3rlpy's import
    also switches on compiled autograd and TF32 matmuls.  So the pipeline never imports it: only this module does."""
    import logging

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        import d3rlpy
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    return d3rlpy


def to_d3rlpy(export: LoggedExport):
    """A d3rlpy ``MDPDataset`` of the export's rows (episode order), with terminals = ``end_of_day``.

    d3rlpy reads s' as the next row's observation within an episode (a zero observation after a terminal,
    masked by (1 - terminal)); :func:`d3rlpy_dataset_gap` checks that this is the export's next_state."""
    d3rlpy = import_d3rlpy()
    from d3rlpy.constants import ActionSpace

    return d3rlpy.dataset.MDPDataset(
        observations=export.state.astype(np.float32), actions=export.action, rewards=export.reward.astype(np.float32),
        terminals=export.end_of_day.astype(np.float32), action_space=ActionSpace.DISCRETE,
        action_size=int(export.meta["n_actions"]))


def d3rlpy_dataset_gap(dataset, export: LoggedExport) -> dict[str, Any]:
    """Check ``d3rlpy_dataset_matches_export``: what d3rlpy trains on is the export, transition by transition.

    This reads the dataset back through d3rlpy's own transition picker, episode by episode.  The observation,
    action, reward and terminal must equal the export's row (cast to float32).  The next observation must
    equal its next_state wherever the day goes on.  Each episode must be one campaign's day."""
    picker = dataset.transition_picker
    state, next_state = export.state.astype(np.float32), export.next_state.astype(np.float32)
    reward = export.reward.astype(np.float32)
    row, gap, mismatches = 0, 0.0, 0
    k_seg = int(export.meta["segments_per_day"])
    for episode in dataset.episodes:
        mismatches += int(episode.size() != k_seg)
        for t in range(episode.size()):
            if row >= len(export):
                return {"d3rlpy_transition_gap": math.inf, "d3rlpy_mismatches": mismatches + 1,
                        "d3rlpy_dataset_matches_export": False}
            tr = picker(episode, t)
            gap = max(gap, float(np.abs(tr.observation - state[row]).max()), abs(float(tr.reward[0]) - float(reward[row])))
            mismatches += int(int(tr.action[0]) != int(export.action[row]))
            mismatches += int(bool(tr.terminal) != bool(export.end_of_day[row]))
            if not export.end_of_day[row]:
                gap = max(gap, float(np.abs(tr.next_observation - next_state[row]).max()))
            row += 1
    mismatches += abs(len(export) - row)
    return {"d3rlpy_transition_gap": gap, "d3rlpy_mismatches": mismatches,
            "d3rlpy_dataset_matches_export": gap == 0.0 and mismatches == 0}


def make_algo(name: str, settings: D3Settings, gamma: float):
    """The d3rlpy learner ``name`` with :class:`D3Settings`, on the CPU."""
    d3rlpy = import_d3rlpy()
    from d3rlpy.models.encoders import VectorEncoderFactory

    common = dict(batch_size=settings.batch_size, learning_rate=settings.learning_rate, gamma=gamma,
                  target_update_interval=settings.target_update_interval,
                  encoder_factory=VectorEncoderFactory(hidden_units=list(settings.hidden_units),
                                                       activation=settings.activation))
    extra = {"discrete_cql": dict(alpha=settings.cql_alpha),
             "discrete_bcq": dict(action_flexibility=settings.bcq_action_flexibility, beta=settings.bcq_beta)}
    config = getattr(d3rlpy.algos, ALGOS[name])(**common, **extra.get(name, {}))
    return config.create(device="cpu:0")


@contextlib.contextmanager
def _global_generators_restored():
    """``d3rlpy.seed`` and d3rlpy's sampler use the global generators.  Restore them afterwards, so that nothing
    else is touched."""
    py_state, np_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)


def greedy_policy(algo):
    """The d3rlpy policy as a pipeline :data:`~litrepro.rlbp.simulator.Policy`.  Its action is ``algo.predict`` on
    the float32 state, with probability 1, and it draws nothing from the generator."""
    def policy(state: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        obs = state.detach().cpu().numpy().astype(np.float32)                            # (C, F)
        action = torch.as_tensor(algo.predict(obs), dtype=torch.long)                    # (C,)
        return action.to(state.device), torch.ones(state.shape[0], dtype=F64, device=state.device)
    return policy


def served_action_mismatches(algo, raw: Mapping[str, torch.Tensor]) -> int:
    """How many decisions on the evaluation days did not take ``algo.predict``'s action for the logged state.

    The states of each (day, segment) are recomputed in the batch the simulator served them in.  Used by check
    ``served_actions_are_d3rlpys``."""
    states, actions = raw["states"], raw["actions"]                                      # (D, K, C, F), (D, K, C)
    bad = 0
    for d in range(states.shape[0]):
        for k in range(states.shape[1]):
            want = algo.predict(states[d, k].cpu().numpy().astype(np.float32))           # (C,)
            bad += int((actions[d, k].cpu().numpy() != want).sum())
    return bad


def fit_and_evaluate(name: str, dataset, world, days: list, seed: int, settings: D3Settings) -> dict[str, Any]:
    """Train d3rlpy's ``name`` on ``dataset``, and simulate its greedy policy on ``days`` at every checkpoint.

    Returns ``{"fit_seed", "checkpoints": {steps: {true_value, value, cpc_overshoot, true_value_heldout,
    action_shares, served_action_mismatches, loss}}}``.  Here loss is d3rlpy's mean loss over the epoch before
    the checkpoint.  Evaluating draws nothing that training uses, so a checkpoint's numbers are those of a fit
    that stops there."""
    from d3rlpy.logging import NoopAdapterFactory

    from litrepro.rlbp import experiment as ex
    from litrepro.rlbp.pid import N_ACTIONS
    from litrepro.rlbp.streams import stream_seed

    d3rlpy = import_d3rlpy()
    fit_seed = stream_seed(seed, f"d3rlpy/{name}/fit") % 2**32                          # numpy takes 32 bits
    out: dict[str, Any] = {"fit_seed": fit_seed, "checkpoints": {}}
    with _global_generators_restored():
        d3rlpy.seed(fit_seed)
        algo = make_algo(name, settings, world.cfg.gamma)
        fitter = algo.fitter(dataset, n_steps=max(settings.checkpoints), n_steps_per_epoch=settings.steps_per_epoch,
                             experiment_name=f"litrepro_{name}", with_timestamp=False,
                             logger_adapter=NoopAdapterFactory(), show_progress=False, save_interval=10**9)
        for epoch, metrics in fitter:
            steps = epoch * settings.steps_per_epoch
            if steps not in settings.checkpoints:
                continue
            truth = ex.simulate_truth(world, days, greedy_policy(algo),
                                      torch.Generator().manual_seed(stream_seed(seed, f"d3rlpy/{name}")),
                                      world.cfg.lambda_cpc)
            raw = truth.pop("raw")
            taken = raw["actions"].reshape(-1)
            out["checkpoints"][str(steps)] = {
                **{k: truth[k] for k in ("true_value", "value", "cpc_overshoot", "true_value_heldout")},
                "action_shares": (torch.bincount(taken, minlength=N_ACTIONS).to(F64) / taken.numel()).tolist(),
                "served_action_mismatches": served_action_mismatches(algo, raw),
                "loss": float(metrics["loss"])}
    return out


# --- One seed ------------------------------------------------------------------------------------

def run_seed(seed: int, *, settings: D3Settings = D3Settings(), overrides: Mapping[str, Any] | None = None,
             export_dir: Path | str | None = None) -> dict[str, Any]:
    """The export and every d3rlpy algorithm on one seed, on the world, data and evaluation days of the studies.

    The preamble is :func:`litrepro.rlbp.diagnosis.run_seed`'s, call for call: seeding, the named streams, the
    world, the PID demo, the logged data with the pipeline's transition audit, the evaluation days and the
    headroom.  So the fixed gain, the best constant and the day hashes are those of ``diagnosis.json`` for the
    same seed.  ``overrides`` change the config (tests use tiny ones).  ``export_dir`` also writes the export
    there as ``seed-<N>.npz``.
    """
    from litrepro.guard import OfflineGuard
    from litrepro.rlbp import audit as rlbp_audit
    from litrepro.rlbp import experiment as ex
    from litrepro.rlbp.config import RLBPConfig
    from litrepro.rlbp.streams import Streams
    from litrepro.seeding import seed_everything

    settings.check()
    cfg = RLBPConfig(seed=seed, **(overrides or {}))
    cfg.check()
    seed_everything(cfg.seed)
    generator = Streams(cfg.seed)                      # every stage takes its own named stream, as in run_arms
    device = torch.device("cpu")
    with OfflineGuard() as guard:
        world = ex.build_world(cfg, generator, device)
        demo = ex.pid_demo(world, generator, actions=(0, 8))
        data = ex.collect_logged_data(world, generator)
        transitions = rlbp_audit.transitions_report(world, data)
        days = ex.draw_eval_days(world, generator)
        days_report = rlbp_audit.eval_days_report(data, days, [demo["draws"]])
        room = ex.headroom(world, days, generator)
        export = export_logged(world, data)
        export_report = check_export(export, world, data)
        if export_dir is not None:
            export.save(Path(export_dir) / f"seed-{seed}.npz")
        train = export.part(heldout=False)
        dataset = to_d3rlpy(train)
        dataset_report = d3rlpy_dataset_gap(dataset, train)
        algos = {name: fit_and_evaluate(name, dataset, world, days, cfg.seed, settings) for name in settings.algos}
    checks = {"no_network_or_model_loads": guard.network_calls == 0 and guard.pretrained_model_calls == 0,
              "transitions_consistent": bool(transitions["transitions_consistent"]),
              "evaluation_days_fresh": bool(days_report["evaluation_days_fresh"]),
              "export_matches_pipeline": export_report["export_matches_pipeline"],
              "d3rlpy_dataset_matches_export": dataset_report["d3rlpy_dataset_matches_export"],
              "served_actions_are_d3rlpys": all(c["served_action_mismatches"] == 0 for a in algos.values()
                                                for c in a["checkpoints"].values())}
    integers = hashlib.sha256()
    for name in ("action", "end_of_day", "heldout", "day", "campaign", "segment"):
        integers.update(getattr(export, name).astype(np.int64).tobytes())
    return {"seed": seed, "eval_day_hashes": days_report["eval_day_hashes"],
            "dataset_fingerprint": export.meta["dataset_fingerprint"],
            "export_integer_sha256": integers.hexdigest()[:16], "export_rows": len(export), "train_rows": len(train),
            "fixed_gain": room["fixed_gain"], "best_constant": room["best_constant"],
            "best_constant_action": room["best_constant_action"], "constant": room["constant"],
            "export_report": {k: v for k, v in export_report.items() if k != "export_matches_pipeline"},
            "dataset_report": {k: v for k, v in dataset_report.items() if k != "d3rlpy_dataset_matches_export"},
            "algos": algos, "checks": checks}


# --- Across seeds ---------------------------------------------------------------------------------

def failed(row: Mapping[str, Any]) -> list[str]:
    return sorted(k for k, v in row["checks"].items() if v is not True)


def refuse_failed(rows: Sequence[Mapping[str, Any]]) -> None:
    """Refuse a seed whose checks failed, a seed that appears twice, and two seeds that share an evaluation day."""
    bad = {r["seed"]: failed(r) for r in rows if failed(r)}
    if bad:
        raise StudyRefused(f"d3rlpy cross-check refused, checks failed on seeds {bad}; no interval is written")
    seeds = [r["seed"] for r in rows]
    if len(set(seeds)) != len(seeds):
        raise StudyRefused(f"d3rlpy cross-check refused: a seed appears twice in {seeds}")
    seen: dict[str, int] = {}
    for r in rows:
        for h in r["eval_day_hashes"]:
            if h in seen and seen[h] != r["seed"]:
                raise StudyRefused(f"d3rlpy cross-check refused: seeds {seen[h]} and {r['seed']} share an evaluation day")
            seen[h] = r["seed"]


#: The cross-check's own checks, in the shape of ``litrepro.rlbp.audit.GUARDS``: check -> (stage it guards, what it
#: recomputes).  ``transitions_consistent`` and ``evaluation_days_fresh`` are the pipeline's, and registered there.
STUDY_GUARDS: dict[str, tuple[str, str]] = {
    "export_matches_pipeline": ("rlbp_d3rlpy.export_logged", "every exported row, by a plain loop, against the "
                                "pipeline's Transitions and day logs; reward = r^v - lambda c; propensity = mu(a|s) by "
                                "its formula; end of day; next_state = the next row's state within a day"),
    "d3rlpy_dataset_matches_export": ("rlbp_d3rlpy.to_d3rlpy", "every transition d3rlpy's own transition picker "
                                      "yields against the export's row (float32), episodes of one campaign's day"),
    "served_actions_are_d3rlpys": ("rlbp_d3rlpy.greedy_policy", "every action taken on the evaluation days against "
                                   "d3rlpy's predict on the state, in the batch it was served in"),
    "no_network_or_model_loads": ("rlbp_d3rlpy.run_seed", "the offline guard's counts of network calls and "
                                  "checkpoint loads while the seed ran"),
}

#: (key in the summary, what the d3rlpy policy is compared with, the per-seed field)
BASELINES = (("minus_fixed_gain", "fixed gain", "fixed_gain"), ("minus_best_constant", "best constant", "best_constant"))


def summarise(rows: Sequence[Mapping[str, Any]], settings: D3Settings) -> dict[str, Any]:
    """Per algorithm and checkpoint, the d3rlpy policy minus the fixed gain and minus the best constant in
    hindsight, as paired 95% t intervals with a verdict, and the mean action shares.  Also the headroom (best
    constant minus fixed gain).  Refuses failed checks (:func:`refuse_failed`) and intervals that do not
    recompute (:func:`check_intervals`)."""
    from litrepro.stats import paired_ci, verdict

    refuse_failed(rows)
    rows = sorted(rows, key=lambda r: r["seed"])
    rows_out = []
    for name in settings.algos:
        for steps in settings.checkpoints:
            values = [r["algos"][name]["checkpoints"][str(steps)]["true_value"] for r in rows]
            entry = {"algo": name, "steps": steps, "n": len(rows),
                     "mean_action_shares": np.mean([r["algos"][name]["checkpoints"][str(steps)]["action_shares"]
                                                    for r in rows], 0).tolist()}
            for key, label, field in BASELINES:
                row = paired_ci(values, [r[field] for r in rows])
                entry[key] = {**row, "verdict": verdict(row), "comparison": f"d3rlpy {name} at {steps} steps - {label}",
                              "metric": "true_value"}
            rows_out.append(entry)
    head = paired_ci([r["best_constant"] for r in rows], [r["fixed_gain"] for r in rows])
    out = {"rows": rows_out, "headroom": {**head, "verdict": verdict(head), "comparison": "best constant - fixed gain",
                                          "metric": "true_value"}}
    check_intervals(rows, out)
    return out


def _plain_ci(d: list[float]) -> tuple[int, float, float, float]:
    from scipy import stats

    n = len(d)
    mean = sum(d) / n
    var = sum((x - mean) ** 2 for x in d) / (n - 1) if n > 1 else 0.0
    half = stats.t.ppf(0.975, n - 1) * math.sqrt(var / n) if var > 0 else 0.0
    return n, mean, mean - half, mean + half


def check_intervals(rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any], *, rel_tol: float = 1e-9) -> None:
    """Recompute every interval of :func:`summarise` by a plain loop over the seeds.  Refuse
    (:class:`StudyRefused`) any mismatch.

    d_s = A_s - B_s on the same seed, mean = sum d / n, s^2 = sum (d - mean)^2 / (n - 1), and the interval is
    mean -+ t_{0.975, n-1} s / sqrt(n) (collapsed when s = 0).  The verdict is recomputed from the bounds.
    """
    by_seed = {r["seed"]: r for r in rows}
    bad = [] if len(by_seed) == len(rows) else ["a seed appears twice"]

    def compare(label, got, d):
        n, *expected = _plain_ci(d)
        values = (got["mean_difference"], got["ci95_low"], got["ci95_high"])
        scale = max(abs(x) for x in expected) or 1.0
        word = ">0" if expected[1] > 0 else "<0" if expected[2] < 0 else "no detectable difference"
        if got["n"] != n or any(not abs(g - e) <= rel_tol * scale for g, e in zip(values, expected)) \
                or got["verdict"] != word:
            bad.append(label)

    for entry in summary["rows"]:
        for key, _, field in BASELINES:
            d = []
            for s in sorted(by_seed):
                r = by_seed[s]
                d.append(r["algos"][entry["algo"]]["checkpoints"][str(entry["steps"])]["true_value"] - r[field])
            compare(f"{entry['algo']}@{entry['steps']} {key}", entry[key], d)
    compare("headroom", summary["headroom"],
            [by_seed[s]["best_constant"] - by_seed[s]["fixed_gain"] for s in sorted(by_seed)])
    if bad:
        raise StudyRefused(f"d3rlpy cross-check refused, intervals differ from their plain-loop recomputation: "
                           f"{'; '.join(bad[:5])}{' ...' if len(bad) > 5 else ''}")


# --- What the intervals say -------------------------------------------------------------------------

LABELS = {"double_dqn": "DoubleDQN", "discrete_cql": "DiscreteCQL", "discrete_bcq": "DiscreteBCQ"}


def findings(data: Mapping[str, Any]) -> list[str]:
    """The cross-check in sentences.  Every number and word comes from ``data`` (the committed JSON) through
    :mod:`litrepro.prose`, which picks "higher"/"lower" only when the interval excludes 0."""
    from litrepro import prose

    s = data["summary"]
    last = max(data["settings"]["checkpoints"])
    out = [f"Our reconstruction (the seed file says nothing about d3rlpy): d3rlpy {data['d3rlpy_version']}'s "
           f"{', '.join(LABELS[a] for a in data['settings']['algos'])} were trained on the exported training "
           f"transitions of {data['n_seeds']} seeds, with the fused reward and gamma {data['gamma']}.  Their greedy "
           "policies were simulated on the same evaluation days as the committed studies.  Each interval is a "
           "paired 95% t interval at 95% on its own, not adjusted for the number shown."]
    out.append("Headroom on these seeds: " + prose.compare(s["headroom"], "the best constant action", "the fixed gain",
                                                            measure="true value") + ".")
    for name in data["settings"]["algos"]:
        rows = [r for r in s["rows"] if r["algo"] == name]
        final = next(r for r in rows if r["steps"] == last)
        label = f"d3rlpy {LABELS[name]} at {last} steps"
        out.append(prose.compare(final["minus_fixed_gain"], label, "the fixed gain", measure="true value") + "; "
                   + prose.compare(final["minus_best_constant"], label, "the best constant in hindsight",
                                   measure="true value") + ".")
        tally = prose.tally_sentence([r["minus_fixed_gain"] for r in rows], noun="budgets")
        out.append(f"d3rlpy {LABELS[name]} against the fixed gain over the budgets "
                   f"{', '.join(str(r['steps']) for r in rows)} steps (`{name}`, `minus_fixed_gain`): {tally}.")
    out.append("Not held fixed against the pipeline: one Q on the fused reward instead of two heads, float32, "
               "d3rlpy's sampler, and a greedy policy instead of the top-3 actor; a difference between these rows "
               "and the pipeline's learned policy is not attributable to one of them.")
    return out


def table(data: Mapping[str, Any]):
    """One row per algorithm and budget: minus the fixed gain and minus the best constant, bounds rounded outward."""
    import pandas as pd

    from litrepro import prose

    return pd.DataFrame([{"algo": r["algo"], "steps": r["steps"],
                          "− fixed gain": prose.estimate(r["minus_fixed_gain"]),
                          "reads": prose.direction(r["minus_fixed_gain"]),
                          "− best constant": prose.estimate(r["minus_best_constant"]),
                          "share on action 8": f"{r['mean_action_shares'][8]:.2f}"}
                         for r in data["summary"]["rows"]]).set_index(["algo", "steps"])


def plot(data: Mapping[str, Any]):
    """Left: each d3rlpy policy minus the fixed gain against its gradient steps, with 95% intervals, and the best
    constant's headroom as a band.  Right: the action shares at the last budget."""
    import numpy as np
    from matplotlib.figure import Figure

    s = data["summary"]
    algos, checkpoints = data["settings"]["algos"], data["settings"]["checkpoints"]
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[1.3, 1])
    head = s["headroom"]
    left.axhspan(head["ci95_low"], head["ci95_high"], color="C3", alpha=0.15, lw=0)
    left.axhline(head["mean_difference"], color="C3", lw=1, ls="--", label="best constant in hindsight")
    left.axhline(0, color="k", lw=0.8, label="fixed gain (action 4)")
    for i, name in enumerate(algos):
        rows = sorted((r for r in s["rows"] if r["algo"] == name), key=lambda r: r["steps"])
        x = np.array([r["steps"] for r in rows], dtype=float) * (1 + 0.03 * (i - 1))      # a small dodge per algo
        m = np.array([r["minus_fixed_gain"]["mean_difference"] for r in rows])
        lo = m - np.array([r["minus_fixed_gain"]["ci95_low"] for r in rows])
        hi = np.array([r["minus_fixed_gain"]["ci95_high"] for r in rows]) - m
        left.errorbar(x, m, yerr=[lo, hi], fmt="o-", capsize=3, color=f"C{i}", label=f"d3rlpy {LABELS[name]}")
    left.set_xscale("log")
    left.set_xticks(checkpoints, [str(c) for c in checkpoints])
    left.minorticks_off()
    left.set_xlabel("d3rlpy gradient steps", fontsize=9)
    left.set_ylabel("true value − fixed gain (paired, 95% CI)", fontsize=9)
    left.set_title("d3rlpy policy − fixed gain, by budget", fontsize=10)
    left.legend(fontsize=8, loc="best")
    left.grid(lw=0.4, alpha=0.5)
    last = max(checkpoints)
    shares = np.array([next(r for r in s["rows"] if r["algo"] == a and r["steps"] == last)["mean_action_shares"]
                       for a in algos])                                                 # (algos, 9)
    im = right.imshow(shares, aspect="auto", cmap="Blues", vmin=0, vmax=max(float(shares.max()), 1e-9))
    right.set_xticks(range(9), [str(i) for i in range(9)], fontsize=8)
    right.set_yticks(range(len(algos)), [LABELS[a] for a in algos], fontsize=8)
    for i in range(shares.shape[0]):
        for j in range(9):
            right.text(j, i, f"{shares[i, j]:.2f}", ha="center", va="center", fontsize=6,
                       color="white" if shares[i, j] > 0.6 * shares.max() else "black")
    right.set_xlabel("action (4: fixed gain)", fontsize=9)
    right.set_title(f"share of decisions at {last} steps", fontsize=10)
    fig.colorbar(im, ax=right, shrink=0.8)
    fig.suptitle(f"pinterest_rlbp: d3rlpy cross-check (our reconstruction), {data['n_seeds']} seeds", fontsize=11)
    return fig


# --- Provenance ------------------------------------------------------------------------------------

#: This module's functions that compute the numbers (the findings' wording, the table and the figure are not).
COMPUTING = ("LoggedExport", "_episode_order", "export_logged", "check_export", "D3Settings", "import_d3rlpy",
             "to_d3rlpy", "d3rlpy_dataset_gap", "make_algo", "_global_generators_restored", "greedy_policy",
             "served_action_mismatches", "fit_and_evaluate", "run_seed", "failed", "refuse_failed", "summarise",
             "_plain_ci", "check_intervals")


def source_hashes() -> dict[str, str]:
    """The sources of the cross-check's numbers.  They are the pipeline's (:func:`litrepro.rlbp.study.source_hashes`:
    the rlbp package less its display code and other studies' modules, plus ``stats.py``), the study's declaration, and
    this module's computing functions and constants (:data:`COMPUTING`).  So editing the findings' wording or the
    figure does not mark it stale."""
    import inspect

    from litrepro.rlbp.study import source_hashes as study_hashes

    from litrepro.studies import declaration_hashes

    out = dict(study_hashes())
    out.update(declaration_hashes("rlbp-d3rlpy"))
    this = globals()
    code = "".join(inspect.getsource(this[name]) for name in COMPUTING) + json.dumps(
        [FORMAT_VERSION, FIELDS, ALGOS, FORMULA_TOLERANCE, BASELINES], sort_keys=True)
    out["d3rlpy cross-check computing functions and constants"] = hashlib.sha256(code.encode()).hexdigest()
    return out


def load(path: Path = PATH) -> dict[str, Any]:
    return json.loads(Path(path).read_text())
