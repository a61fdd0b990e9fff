"""The ``pinterest_rlbp`` explorer: lambda, top-k, gamma, behaviour epsilon, campaign kind, seed.

Stages and their caches (``functools.lru_cache`` on frozen keys):

- :func:`base` (seed, gamma, behaviour epsilon): the notebook's own sequence up to the
  critic: ``seed_everything``, ``build_world``, ``pid_demo``, ``collect_logged_data``,
  ``draw_eval_days``, ``fit_critic``, so the world, the data, the evaluation days and the
  critic are the notebook's for the same parameters.
- :func:`actor` (base key, lambda): ``fit_actor`` from the generator state after the
  critic, for every lambda alike (common random numbers, as ``lambda_sweep`` does); at
  the run's ``lambda_cpc`` this is the notebook's served actor.  All lambdas of the slider
  are fitted when a seed is first shown, so moving lambda only draws.
- :func:`truth` (base key, lambda, top-k): ``simulate_truth`` of the served top-k policy.

A redraw simulates one day (``simulate_day``) of one held-out campaign of the chosen
kind under the learned policy and under the fixed gain, and draws four views: spend
against plan, CPC against target, phi and the gains chosen per segment; the fused
against the value-only argmax over held-out states; and the frontier with this lambda.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from litrepro.explore.common import Base
from litrepro.rlbp import experiment as rlbp
from litrepro.rlbp.actor import fused_scores
from litrepro.rlbp.config import RLBPConfig
from litrepro.rlbp.simulator import KINDS, simulate_day

#: The lambdas of the slider (the notebook's trade-off); every one is fitted when a seed is first shown.
LAMBDA_GRID = rlbp.LAMBDAS
GAMMAS = (0.0, 0.5, 0.9)
EPSILONS = (0.25, 0.5, 1.0)


@dataclass(frozen=True)
class BaseKey:
    seed: int = 42
    gamma: float = 0.9
    behaviour_epsilon: float = 1.0

    def config(self) -> RLBPConfig:
        return RLBPConfig(seed=self.seed, gamma=self.gamma, behaviour_epsilon=self.behaviour_epsilon, device="cpu")


@functools.lru_cache(maxsize=8)
def base(key: BaseKey) -> dict:
    """World, logged data, evaluation days and critic, in the notebook's order."""
    from litrepro.seeding import seed_everything

    cfg = key.config()
    device = torch.device("cpu")
    seed_everything(cfg.seed)
    generator = rlbp.Streams(cfg.seed)                                # the notebook's named random streams
    world = rlbp.build_world(cfg, generator, device)
    rlbp.pid_demo(world, generator, actions=(0, 8))                   # keeps the notebook's random stream
    data = rlbp.collect_logged_data(world, generator)
    days = rlbp.draw_eval_days(world, generator)                      # the notebook's evaluation days
    critic, report = rlbp.fit_critic(world, data, generator, with_control=False)   # the same critic, no control
    with torch.no_grad():
        q_value, q_cpc = critic(data["heldout"].state)                # (N, 9) each
    return {"cfg": cfg, "world": world, "data": data, "critic": critic, "critic_report": report, "days": days,
            "q_value": q_value, "q_cpc": q_cpc}


@functools.lru_cache(maxsize=64)
def actor(key: BaseKey, lam: float):
    """The actor trained on Q^v - lam Q^c, from the seed's named actor streams (as the notebook's)."""
    b = base(key)
    return rlbp.fit_actor(b["world"], b["critic"], b["data"], rlbp.Streams(key.seed), lam=lam)


@functools.lru_cache(maxsize=256)
def truth(key: BaseKey, name: str, lam: float, top_k: int) -> dict:
    """Simulated value, CPC overshoot and fused reward of a policy on the evaluation days."""
    b = base(key)
    world = b["world"]
    if name == "learned":
        policy = rlbp.learned_policy(actor(key, lam)[0], top_k)
    elif name == "behaviour":
        policy = rlbp.behaviour_policy(key.behaviour_epsilon)
    else:
        policy = rlbp.constant_policy(rlbp.FIXED_GAIN_ACTION)
    return rlbp.simulate_truth(world, b["days"], policy, rlbp.Streams(key.seed).generator(f"truth/{name}"), lam)


def prepare(key: BaseKey) -> None:
    """Everything a new seed needs before its first view: the base and every lambda's actor."""
    for lam in LAMBDA_GRID:
        actor(key, lam)


def campaign_day(key: BaseKey, lam: float, top_k: int, kind: str) -> dict:
    """The first held-out campaign of ``kind``, one evaluation day, under the learned policy and the fixed gain."""
    b = base(key)
    world, cfg = b["world"], b["cfg"]
    held = rlbp.heldout_campaigns(world)
    candidates = torch.nonzero(held & (world.campaigns.kind == KINDS.index(kind))).flatten()
    c = int(candidates[0]) if candidates.numel() else int(torch.nonzero(held).flatten()[0])
    seg_len = cfg.steps_per_day // cfg.segments_per_day
    policies = {"learned": rlbp.learned_policy(actor(key, lam)[0], top_k),
                "fixed gain": rlbp.constant_policy(rlbp.FIXED_GAIN_ACTION)}
    out = {"campaign": c, "kind": KINDS[int(world.campaigns.kind[c])], "plan": world.campaigns.plan[:, c].tolist(),
           "target_cpc": float(world.campaigns.target_cpc[c]), "policies": {}}
    for name, policy in policies.items():
        log = simulate_day(world.campaigns, b["days"][0], policy, world.settings,
                           torch.Generator().manual_seed(key.seed + 107))
        out["policies"][name] = {"spent_fraction": log.spent_fraction[:, c].tolist(), "cpc": log.cpc[:, c].tolist(),
                                 "phi": log.phi[:, c].tolist(), "kp": log.kp[::seg_len, c].tolist(),
                                 "ki": log.ki[::seg_len, c].tolist()}
    return out


def argmaxes(key: BaseKey, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(N,) value-only and fused argmax of the critic over held-out states."""
    b = base(key)
    return b["q_value"].argmax(-1), fused_scores(b["q_value"], b["q_cpc"], lam).argmax(-1)


def figure(key: BaseKey, lam: float, top_k: int, kind: str):
    """The explorer's picture and its line of numbers."""
    from matplotlib.figure import Figure

    from litrepro.explore import rlbp_plots as plots

    day = campaign_day(key, lam, top_k, kind)
    value_arg, fused_arg = argmaxes(key, lam)
    rows = [{"lambda": x, **truth(key, "learned", x, top_k)} for x in LAMBDA_GRID]
    refs = {name: (t["cpc_overshoot"], t["value"]) for name, t in
            (("fixed gain", truth(key, "fixed_gain", lam, top_k)), ("behaviour", truth(key, "behaviour", lam, top_k)))}
    fig = Figure(figsize=(13, 6.6))
    axes = fig.subplots(2, 3)
    fig.subplots_adjust(left=0.06, right=0.985, top=0.95, bottom=0.08, wspace=0.32, hspace=0.38)
    plots.campaign_day_axes([axes[0, 0], axes[0, 1], axes[1, 0], axes[1, 1]], day)
    plots.argmax_agreement_axes(axes[0, 2], value_arg, fused_arg, lam)
    plots.frontier_axes(axes[1, 2], rows, refs, lam)
    learned = truth(key, "learned", lam, top_k)
    fixed = truth(key, "fixed_gain", lam, top_k)
    spend = {n: p["spent_fraction"][-1] for n, p in day["policies"].items()}
    line = (f"seed {key.seed}, γ={key.gamma:g}, ε={key.behaviour_epsilon:g}, λ={lam:g}, top-{top_k}: "
            f"fused reward learned {learned['true_value']:.4f} vs fixed gain {fixed['true_value']:.4f}; "
            f"CPC overshoot {learned['cpc_overshoot']:.4f} vs {fixed['cpc_overshoot']:.4f}; "
            f"fusion moves the argmax on {100 * float((value_arg != fused_arg).double().mean()):.0f} % of held-out states; "
            f"campaign {day['campaign']} spends {100 * spend['learned']:.0f} % (learned) / "
            f"{100 * spend['fixed gain']:.0f} % (fixed) of its budget")
    return fig, line


class Explorer(Base):
    """Controls: lambda, top-k, gamma, behaviour epsilon, campaign kind, seed."""

    def __init__(self, seed: int = 42):
        import ipywidgets as w

        style = {"description_width": "110px"}
        self.controls = {
            "lam": w.SelectionSlider(options=LAMBDA_GRID, value=1.0, description="λ (fusion)", continuous_update=False,
                                     style=style),
            "top_k": w.IntSlider(value=3, min=1, max=9, description="top-k", continuous_update=False, style=style),
            "kind": w.Dropdown(options=KINDS, value=KINDS[0], description="campaign kind", style=style),
            "gamma": w.SelectionSlider(options=GAMMAS, value=0.9, description="γ", continuous_update=False, style=style),
            "epsilon": w.SelectionSlider(options=EPSILONS, value=1.0, description="behaviour ε",
                                         continuous_update=False, style=style),
            "seed": w.BoundedIntText(value=seed, min=0, max=2**32 - 1, description="seed", style=style),
        }
        super().__init__()

    def compute(self, *, lam, top_k, kind, gamma, epsilon, seed):
        key = BaseKey(seed=int(seed), gamma=float(gamma), behaviour_epsilon=float(epsilon))
        prepare(key)
        return figure(key, float(lam), int(top_k), kind)
