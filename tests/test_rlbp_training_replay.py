"""The critic's TD training replayed by a loop of our own (issue 34, item 4: the rlbp miss).

A blind audit bug passed the online critic as the target of the *training* losses while the target network
was passed, synced and left unused; every check that recomputes the TD losses runs under ``no_grad`` on the
finished critic, so none saw it.  This test replays the training independently, on the pipeline's own logged
transitions: from the recorded initial weights and the recorded minibatch rows it takes the same Adam steps,
with targets written out here from a target copy synced on the schedule, and requires the pipeline's critic
to end at the same weights.  A fault test puts the audit's bug in and asserts that the replay disagrees.
"""

from __future__ import annotations

import copy
import dataclasses

import torch

from litrepro.rlbp import critic as critic_mod
from litrepro.rlbp import experiment as ex
from litrepro.rlbp.config import RLBPConfig
from litrepro.rlbp.streams import Streams

TINY = RLBPConfig(seed=5, n_campaigns=16, opportunities_per_step=8, logged_days=2)
STEPS, EVERY = 12, 5                                         # three syncs: steps 0, 5 and 10


def pipeline_fit(cfg: RLBPConfig = TINY):
    """The pipeline's own data and critic fit (``fit_critic``, the seed's max_min backup), short."""
    streams = Streams(cfg.seed)
    world = ex.build_world(cfg, streams, torch.device("cpu"))
    data = ex.collect_logged_data(world, streams)
    world = dataclasses.replace(world, cfg=dataclasses.replace(cfg, target_update_every=EVERY))
    critic, report = ex.fit_critic(world, data, streams, steps=STEPS, with_control=False)
    return world, data, critic, report


def replay(world, data, report) -> torch.nn.Module:
    """The same training, written out: Q(s, a) of the online net regressed on
    y^v = r^v + gamma (1 - d) max_a' Qbar^v(s', a') and y^c = c + gamma (1 - d) min_a' Qbar^c(s', a'),
    where Qbar is a copy of the online net taken at every step s with s % target_update_every == 0."""
    cfg = world.cfg
    net = critic_mod.TwoHeadCritic(len(ex.FEATURES), cfg.hidden)
    net.load_state_dict(report["init_state"])
    opt = torch.optim.Adam(net.parameters(), lr=cfg.critic_lr)
    rows = report["rows"].reshape(STEPS, cfg.batch_size)               # (steps, B), in draw order
    train = data["train"]
    frozen = None
    for step in range(STEPS):
        if step % cfg.target_update_every == 0:
            frozen = copy.deepcopy(net).requires_grad_(False)
        idx = rows[step]
        s, a, s2 = train.state[idx], train.action[idx], train.next_state[idx]
        with torch.no_grad():
            head = frozen.heads(frozen.trunk(s2))                        # (B, 18): value 0-8, CPC 9-17
            keep = cfg.gamma * (1.0 - train.done[idx])
            y_v = train.value_reward[idx] + keep * head[:, :9].max(1).values
            y_c = train.cpc_cost[idx] + keep * head[:, 9:].min(1).values
        out = net.heads(net.trunk(s))                                    # (B, 18)
        q_v, q_c = out[torch.arange(len(idx)), a], out[torch.arange(len(idx)), 9 + a]
        loss = ((q_v - y_v) ** 2).mean() + ((q_c - y_c) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net


def replay_matches(world, data, critic, report, tol: float = 1e-5) -> bool:
    net = replay(world, data, report)
    return all(torch.allclose(p, q, atol=tol, rtol=0) for p, q in zip(critic.state_dict().values(),
                                                                      net.state_dict().values()))


def test_the_critic_is_trained_on_targets_from_its_target_network():
    world, data, critic, report = pipeline_fit()
    assert report["settings"][0]["target_syncs"] == [0, 5, 10]
    assert replay_matches(world, data, critic, report)


def test_training_targets_from_the_online_critic_are_caught(monkeypatch):
    """The audit's bug: the training losses bootstrap from the online critic (the target is passed and synced,
    but unused); losses computed without gradients, as every post-training check computes them, are untouched."""
    real = critic_mod.td_losses

    def online(critic, target, batch, gamma, **backup):
        return real(critic, critic if torch.is_grad_enabled() else target, batch, gamma, **backup)
    monkeypatch.setattr(critic_mod, "td_losses", online)
    world, data, critic, report = pipeline_fit()
    assert not replay_matches(world, data, critic, report)


def test_a_target_synced_every_step_is_caught(monkeypatch):
    monkeypatch.setattr(ex, "train_critic", _every_step(ex.train_critic))
    world, data, critic, report = pipeline_fit()
    assert not replay_matches(world, data, critic, report)


def _every_step(original):
    def train(*args, **kwargs):
        return original(*args, **{**kwargs, "target_update_every": 1})
    return train
