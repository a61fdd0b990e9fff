"""Each check and metric of pinterest_rlbp catches the faulty versions of the stage it guards.

Every test swaps one plausible bug into the real pipeline (``monkeypatch`` on the name
the pipeline actually calls), runs it end to end on a small configuration, and asserts
that the named check turns false or the named metric turns non-zero.  The first test
runs the same configuration unpatched and asserts the opposite, so a fault test can
only pass because of its fault.  ``FAULTS`` is grouped by the stage each fault breaks:
simulator and auctions, transitions, critic, actor and fusion, evaluation; then the faults of
issue 21 by mechanism: effective settings, random streams, standard errors, figures derived at
collection.  Every fault test carries ``pytest.mark.guards(<check>)`` naming what catches it.
"""

from __future__ import annotations

import pytest
import torch

from litrepro.rlbp import actor as actor_mod
from litrepro.rlbp import critic as critic_mod
from litrepro.rlbp import experiment as ex
from litrepro.rlbp import fixtures, pid, simulator
from litrepro.rlbp.config import RLBPConfig
from litrepro.rlbp.reward import cpc_reduction

#: Small enough for the suite, big enough that the clean run clears the statistical checks by a wide
#: margin (fused-score gain 20 standard errors; regression-control ratio 0.17 against 0.35).
SMALL = RLBPConfig(seed=9, n_campaigns=128, logged_days=3, eval_days=1, critic_steps=600, actor_steps=300)
F64 = torch.float64


@pytest.fixture(scope="module")
def clean():
    return ex.run(SMALL, sweep=False)


def test_the_small_configuration_passes_every_check(clean):
    assert all(clean["checks"].values()), clean["checks"]
    assert all(clean["extra_checks"].values()), clean["extra_checks"]
    assert clean["beyond_seed_metrics"]["td_loss_reference_error"] < 1e-12
    m = clean["metrics"]
    assert m["max_min_backup_error"] == 0 and m["derivative_gain_error"] == 0


def _zero_targets(value_reward, cpc_cost, q_value_next, q_cpc_next, done, gamma, **backup):
    return torch.zeros_like(value_reward), torch.zeros_like(cpc_cost)


def _random_targets(value_reward, cpc_cost, q_value_next, q_cpc_next, done, gamma, **backup):
    g = torch.Generator().manual_seed(int(value_reward.numel()))
    return (torch.randn(value_reward.shape, generator=g, dtype=F64) * value_reward.std() + value_reward.mean(),
            torch.randn(cpc_cost.shape, generator=g, dtype=F64) * cpc_cost.std() + cpc_cost.mean())


def _no_gamma(value_reward, cpc_cost, q_value_next, q_cpc_next, done, gamma, **backup):
    keep = 1.0 - done                                                   # the fault: gamma dropped
    return value_reward + keep * q_value_next.max(1).values, cpc_cost + keep * q_cpc_next.min(1).values


def _abs_total_reward(value_reward, cpc, target_cpc, lam):
    return value_reward + lam * cpc_reduction(cpc, target_cpc).abs()     # the fault: abs() on the reduction


def _abs_cost(cpc, target_cpc):
    return ((cpc - target_cpc) / target_cpc).abs()                      # the fault: abs() on the CPC head's cost


def _sum_fusion(q_value, q_cpc, lam):
    return q_value + lam * q_cpc                                        # the fault: CPC added, not subtracted


def _kick(e, e_prev, kd, dt):
    return kd * (e - (torch.zeros_like(e) if e_prev is None else e_prev)) / dt   # the fault: e_{-1} := 0


def _td_losses_cpc_max(critic, target, batch, gamma, **backup):
    """td_losses with the CPC target backed up by a max, written inline (backup_targets untouched)."""
    with torch.no_grad():
        qv_next, qc_next = target(batch.next_state)
        keep = gamma * (1.0 - batch.done)
        y_value = batch.value_reward + keep * qv_next.max(1).values
        y_cpc = batch.cpc_cost + keep * qc_next.max(1).values              # the fault: max for a cost
    q_value, q_cpc = critic(batch.state)
    taken = batch.action[:, None]
    return ((q_value.gather(1, taken).squeeze(1) - y_value).pow(2).mean(),
            (q_cpc.gather(1, taken).squeeze(1) - y_cpc).pow(2).mean())


def _td_losses_swapped_heads(original):
    def losses(critic, target, batch, gamma, **backup):
        class Swapped(torch.nn.Module):                                  # the fault: heads read the wrong way round
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, state):
                value, cpc = self.inner(state)
                return cpc, value
        return original(Swapped(critic), Swapped(target), batch, gamma, **backup)
    return losses


def _train_mask_keeps_everything(original):
    def flatten(logs, campaigns, lam, keep):
        if int(keep.sum()) * 2 > keep.numel():                           # the training split ...
            keep = torch.ones_like(keep)                                 # ... the fault: it keeps held-out campaigns too
        return original(logs, campaigns, lam, keep)
    return flatten


def _critic_fitted_on_heldout(original):
    def train(critic, train, heldout, **kw):
        return original(critic, heldout, heldout, **kw)                  # the fault: regress on the held-out set
    return train


def _concat(a, b):
    return type(a)(*(torch.cat([getattr(a, f), getattr(b, f)]) for f in a.__dataclass_fields__))


def _actor_data(original, make_train):
    def fit(world, critic, data, generator, lam=None):
        return original(world, critic, {**data, "train": make_train(data)}, generator, lam=lam)
    return fit


FAULTS = {
    # name: (patches [(module, attribute, replacement)], kind, name that must catch it)
    "critic regressed onto zeros": ([(critic_mod, "backup_targets", _zero_targets)], "check",
                                    "actual_reward_regression_update"),
    "critic regressed onto random labels": ([(critic_mod, "backup_targets", _random_targets)], "check",
                                            "actual_reward_regression_update"),
    "backup ignores gamma": ([(critic_mod, "backup_targets", _no_gamma), (fixtures, "backup_targets", _no_gamma)],
                             "metric", "max_min_backup_error"),
    "abs() on the pipeline's reward": ([(ex, "total_reward", _abs_total_reward)], "check",
                                       "CPC_reduction_retains_negative_sign"),
    "abs() on the critic's cost": ([(simulator, "cpc_cost", _abs_cost)], "check",
                                   "CPC_reduction_retains_negative_sign"),
    "actor trained on Qv + lambda Qc": ([(actor_mod, "fused_scores", _sum_fusion)], "check",
                                        "fusion_changes_preference"),
    "derivative kick (e_-1 := 0)": ([(pid, "derivative", _kick)], "metric", "derivative_gain_error"),
    "TD loss backs up the cost with max (td_losses only)": ([(critic_mod, "td_losses", _td_losses_cpc_max)], "check",
                                                            "opposite_backup_directions"),
    "TD loss reads the heads swapped": ([(critic_mod, "td_losses", _td_losses_swapped_heads(critic_mod.td_losses))],
                                        "check", "opposite_backup_directions"),
    "held-out campaigns leak into the training split": ([(ex, "_flatten", _train_mask_keeps_everything(ex._flatten))],
                                                        "extra", "heldout_campaigns_not_trained"),
    "critic fitted on the held-out set": ([(ex, "train_critic", _critic_fitted_on_heldout(ex.train_critic))], "extra",
                                          "heldout_campaigns_not_trained"),
    "actor fitted on the held-out set": ([(ex, "fit_actor", _actor_data(ex.fit_actor, lambda d: d["heldout"]))], "extra",
                                         "heldout_campaigns_not_trained"),
    "actor fitted on train plus held-out": ([(ex, "fit_actor", _actor_data(
        ex.fit_actor, lambda d: _concat(d["train"], d["heldout"])))], "extra", "heldout_campaigns_not_trained"),
}


# --- Simulator and auctions ------------------------------------------------------------------

def _auction(pay_bid=False, no_budget_stop=False, clicks_on_lost=False):
    def step(bid, remaining, price, click_prob, live):
        biddable = live & (price < bid[:, None])                                       # (C, M)
        paid = bid[:, None].expand_as(price) if pay_bid else price                      # fault: first price
        cost = torch.where(biddable, paid, 0.0).cumsum(-1)
        win = biddable if no_budget_stop else biddable & (cost <= remaining[:, None])   # fault: no budget stop
        clicked = biddable if clicks_on_lost else win                                   # fault: lost auctions click
        return torch.where(win, paid, 0.0).sum(-1), torch.where(clicked, click_prob, 0.0).sum(-1)
    return step


def _cpc_without_smoothing(spend, clicks, target_cpc, eps):
    return (spend + target_cpc) / (clicks + 1e-9)                                       # fault: eps dropped


# --- Transitions ---------------------------------------------------------------------------

def _replaced(original, change):
    """``original`` with some fields of its (dataclass) result replaced by ``change(result)``."""
    def call(*args, **kwargs):
        import dataclasses
        out = original(*args, **kwargs)
        return dataclasses.replace(out, **change(out))
    return call


def _features_sign(original):
    def features(step, steps, error, *rest):
        return original(step, steps, -error, *rest)                                     # fault: pacing error negated
    return features


def _flatten_day_major(original):
    def flatten(logs, campaigns, lam, keep):
        out = original(logs, campaigns, lam, keep)
        perm = torch.arange(len(out)).view(len(logs), -1).flip(0).reshape(-1)              # fault: days misaligned
        return type(out)(**{f: (getattr(out, f)[perm] if f == "next_state" else getattr(out, f))
                            for f in out.__dataclass_fields__})
    return flatten


# --- Critic -----------------------------------------------------------------------------------

def _stale_target():
    calls = []

    def sync(target, critic):
        if not calls:                                                                   # fault: only the first copy
            target.load_state_dict(critic.state_dict())
        calls.append(1)
    return sync


def _standardised_rewards(original):
    def losses(critic, target, batch, gamma, **backup):
        import dataclasses
        if not torch.is_grad_enabled():                                                 # evaluation: untouched
            return original(critic, target, batch, gamma, **backup)
        z = (lambda x: (x - x.mean()) / x.std())                                        # fault: per-batch z-scores
        return original(critic, target, dataclasses.replace(batch, value_reward=z(batch.value_reward),
                                                             cpc_cost=z(batch.cpc_cost)), gamma, **backup)
    return losses


def _heldout_loss_on_train(original):
    def train(critic, train, heldout, **kw):
        return original(critic, train, train, **kw)                                     # fault: "held-out" = train
    return train


# --- Actor and fusion -----------------------------------------------------------------------

def _top_k_not_renormalised(logits, k):
    keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, logits.topk(k, dim=-1).indices, True)
    return torch.softmax(logits, -1) * keep                                             # fault: mass not renormalised


# --- Evaluation -----------------------------------------------------------------------------

def _ips_on_train(original):
    def evaluate(world, actor, data, days, generator):
        return original(world, actor, {**data, "heldout": data["train"]}, days, generator)  # fault: train log
    return evaluate


def _eval_days_are_logged(collect_original):
    stash = {}

    def collect(world, generator):
        data = collect_original(world, generator)
        stash["draws"] = data["draws"]
        return data

    def days(world, generator):
        return stash["draws"][:world.cfg.eval_days]                                     # fault: reuses logged days
    return collect, days


def _truth_without_cpc(original):
    def truth(world, days, policy, generator, lam):
        return original(world, days, policy, generator, 0.0)                           # fault: lambda dropped
    return truth


def _transposed_grid(kp_base, ki_base, multipliers, *, kp_bounds, ki_bounds):
    m = torch.tensor(multipliers, dtype=torch.float64)
    return ((kp_base * m).clamp(*kp_bounds).repeat(3),                                  # fault: (Kp, Ki) transposed
            (ki_base * m).clamp(*ki_bounds).repeat_interleave(3))


_collect_stash, _days_from_stash = _eval_days_are_logged(ex.collect_logged_data)

STAGE_FAULTS = {
    # simulator and auctions
    "auction: winner pays its bid (first price)": ([(simulator, "auction_step", _auction(pay_bid=True))], "extra",
                                                   "auction_replay_matches"),
    "auction: no budget stop": ([(simulator, "auction_step", _auction(no_budget_stop=True))], "extra",
                                "auction_replay_matches"),
    "auction: lost auctions bring clicks": ([(simulator, "auction_step", _auction(clicks_on_lost=True))], "extra",
                                            "auction_replay_matches"),
    "CPC without pseudo-click smoothing": ([(simulator, "smoothed_cpc", _cpc_without_smoothing)], "extra",
                                           "auction_replay_matches"),
    # transitions
    "next_state shifted the wrong way": ([(ex, "simulate_day", _replaced(ex.simulate_day, lambda log: {
        "next_states": torch.cat([log.states[:1], log.states[:-1]])}))], "extra", "transitions_consistent"),
    "done set at the first segment": ([(ex, "simulate_day", _replaced(ex.simulate_day, lambda log: {
        "done": log.done.flip(0)}))], "extra", "transitions_consistent"),
    "state feature with the wrong sign": ([(simulator, "_features", _features_sign(simulator._features))], "extra",
                                          "transitions_consistent"),
    "next states misaligned across days when flattened": ([(ex, "_flatten", _flatten_day_major(ex._flatten))], "extra",
                                                          "transitions_consistent"),
    # critic
    "target network never refreshed after its first copy": ([(critic_mod, "sync_target", _stale_target())], "extra",
                                                             "target_network_synced_on_schedule"),
    "stale target network degrades the regression": ([(critic_mod, "sync_target", _stale_target())], "check",
                                                      "actual_reward_regression_update"),
    "rewards standardised per minibatch": ([(critic_mod, "td_losses", _standardised_rewards(critic_mod.td_losses))],
                                           "check", "actual_reward_regression_update"),
    "held-out TD loss measured on training transitions": ([(ex, "train_critic", _heldout_loss_on_train(ex.train_critic))],
                                                          "extra", "evaluation_on_heldout_campaigns"),
    # actor and fusion
    "top-k policy not renormalised": ([(ex, "top_k_policy", _top_k_not_renormalised)], "check", "exact_top_k_support"),
    # evaluation
    "IPS computed on the training transitions": ([(ex, "evaluate_policies", _ips_on_train(ex.evaluate_policies))],
                                                 "extra", "evaluation_on_heldout_campaigns"),
    "evaluation days are the logged days": ([(ex, "collect_logged_data", _collect_stash),
                                             (ex, "draw_eval_days", _days_from_stash)], "extra", "evaluation_days_fresh"),
    "truth scored without the CPC term": ([(ex, "simulate_truth", _truth_without_cpc(ex.simulate_truth))], "extra",
                                          "truth_scored_with_run_lambda"),
    "(Kp, Ki) grid transposed": ([(ex, "action_grid", _transposed_grid)], "check", "nine_bounded_PID_actions"),
}
FAULTS.update(STAGE_FAULTS)


# --- Faults from a blind audit of the stages (each was uncaught before its check existed) ---------

def _over_target_with_mean_tau(original):
    def collect(world, generator):
        data = original(world, generator)
        tau = world.campaigns.target_cpc.mean()                                          # fault: one tau for all
        data["segments_over_target_fraction"] = float((torch.stack([log.cpc for log in data["logs"]]) > tau).double().mean())
        return data
    return collect


def _online_target(original):
    def losses(critic, target, batch, gamma, **backup):
        return original(critic, critic, batch, gamma, **backup)                          # fault: target unused
    return losses


def _sync_swapped(target, critic):
    critic.load_state_dict(target.state_dict())                                          # fault: arguments swapped


def _cpc_head_untrained(original):
    def losses(critic, target, batch, gamma, **backup):
        loss_v, loss_c = original(critic, target, batch, gamma, **backup)
        return loss_v, loss_c.detach()                                                   # fault: CPC loss not backpropagated
    return losses


def _critic_on_a_slice(original):
    def train(critic, train, heldout, **kw):
        return original(critic, train.index(torch.arange(len(train) // 4)), heldout, **kw)  # fault: first quarter only
    return train


def _actor_standardised_across_batch(logits, scores, temperature):
    s = scores.detach()
    s_hat = (s - s.mean()) / s.std()                                                     # fault: over the batch, not per state
    return -(torch.softmax(s_hat / temperature, -1) * torch.log_softmax(logits, -1)).mean(-1).mean()


def _behaviour_skips_action_8(original):
    def make(epsilon):
        def policy(state, generator):
            n = state.shape[0]
            action = torch.randint(8, (n,), generator=generator)                         # fault: action 8 never drawn
            return action.to(state.device), torch.full((n,), 1 / 9, dtype=F64, device=state.device)
        return policy
    return make


def _truth_on_logged_days(collect_original, truth_original):
    stash = {}

    def collect(world, generator):
        data = collect_original(world, generator)
        stash["draws"] = data["draws"]
        return data

    def truth(world, days, policy, generator, lam):
        return truth_original(world, stash["draws"][-len(days):], policy, generator, lam)   # fault: logged days
    return collect, truth


def _per_kind_oracle_wrong(original):
    def room(world, days, generator):
        out = original(world, days, generator)
        return {**out, "best_per_kind": out["best_per_campaign"]}                         # fault: per-campaign max
    return room


def _headroom_without_lambda(original):
    def room(world, days, generator):
        import dataclasses
        return original(dataclasses.replace(world, cfg=dataclasses.replace(world.cfg, lambda_cpc=0.0)), days, generator)
    return room


def _ips_probs_wrong_rows(original):
    def probs(name, actor, state, cfg):
        if name == "learned" and state.shape[0] > 1:
            return original(name, actor, state.flip(0), cfg)                             # fault: pi of other rows
        return original(name, actor, state, cfg)
    return probs


def _actor_scores_on_next_states(original):
    def train(actor, critic, batch, **kw):
        class NextStates(torch.nn.Module):
            def forward(self, states):
                return critic(batch.next_state)                                          # fault: scores of s', not s
        return original(actor, NextStates(), batch, **kw)
    return train


_collect_for_truth, _truth_logged = _truth_on_logged_days(ex.collect_logged_data, ex.simulate_truth)

AUDIT_FAULTS = {
    "spend plan shifted one step": ([(ex, "make_campaigns", _replaced(ex.make_campaigns, lambda c: {
        "plan": torch.cat([torch.zeros_like(c.plan[:1]), c.plan[:-1]])}))], "extra", "market_matches_its_definition"),
    "target CPC from exp(logit) instead of sigmoid": ([(ex, "make_campaigns", _replaced(ex.make_campaigns, lambda c: {
        "target_cpc": c.target_margin * c.price_scale / torch.exp(c.ctr_logit)}))], "extra",
        "market_matches_its_definition"),
    "over-target share against the mean target CPC": ([(ex, "collect_logged_data", _over_target_with_mean_tau(
        ex.collect_logged_data))], "extra", "market_matches_its_definition"),
    "TD targets bootstrap from the online critic": ([(critic_mod, "td_losses", _online_target(critic_mod.td_losses))],
                                                    "check", "opposite_backup_directions"),
    "target sync with its arguments swapped": ([(critic_mod, "sync_target", _sync_swapped)], "extra",
                                               "target_network_synced_on_schedule"),
    "CPC head never trained": ([(critic_mod, "td_losses", _cpc_head_untrained(critic_mod.td_losses))], "check",
                               "actual_reward_regression_update"),
    "critic minibatches from a quarter of the training set": ([(ex, "train_critic", _critic_on_a_slice(ex.train_critic))],
                                                               "extra", "minibatches_cover_training_set"),
    "actor scores standardised across the batch": ([(actor_mod, "actor_loss", _actor_standardised_across_batch)],
                                                   "extra", "actor_trained_on_fused_scores"),
    "behaviour policy never takes action 8 but logs 1/9": ([(ex, "behaviour_policy", _behaviour_skips_action_8(
        ex.behaviour_policy))], "extra", "logged_actions_follow_mu"),
    "truth simulated on the logged days": ([(ex, "collect_logged_data", _collect_for_truth),
                                            (ex, "simulate_truth", _truth_logged)], "extra", "evaluation_days_fresh"),
    "per-kind oracle takes each campaign's best": ([(ex, "headroom", _per_kind_oracle_wrong(ex.headroom))], "extra",
                                                   "headroom_matches_reference"),
    "headroom scored without the CPC term": ([(ex, "headroom", _headroom_without_lambda(ex.headroom))], "extra",
                                             "headroom_matches_reference"),
    "actor scored on next states": ([(ex, "train_actor", _actor_scores_on_next_states(ex.train_actor))], "extra",
                                    "actor_trained_on_fused_scores"),
    "IPS reads pi of other rows": ([(ex, "_target_probs", _ips_probs_wrong_rows(ex._target_probs))], "extra",
                                   "ips_weights_are_served_policy"),
}
FAULTS.update(AUDIT_FAULTS)


# --- Faults from a second blind audit ---------------------------------------------------------

def _heldout_mask_strict(world):
    import math as _math
    cfg = world.cfg
    n = max(1, _math.ceil(cfg.heldout_fraction * cfg.n_campaigns))
    return torch.arange(cfg.n_campaigns, device=world.device) > cfg.n_campaigns - n     # fault: > for >=


def _control_with_other_minibatches(original):
    calls = []

    def train(critic, train, heldout, *, generator, **kw):
        calls.append(1)
        if len(calls) % 2 == 0:                                                         # the control's call
            torch.rand(1, generator=generator)                                           # fault: its draws shifted
        return original(critic, train, heldout, generator=generator, **kw)
    return train


def _permute_value_only(self, generator):
    import dataclasses
    perm = torch.randperm(len(self), generator=generator)
    return dataclasses.replace(self, value_reward=self.value_reward[perm])              # fault: c and r not shuffled


def _truth_serves_full_softmax(original):
    def policy(actor, k):
        def probs(state):
            with torch.no_grad():
                return torch.softmax(actor(state), -1)                                   # fault: no top-k when simulated
        return ex.policy_from_probs(probs)
    return policy


def _click_noise_doubled(c, opportunities, generator):
    steps, n = c.traffic.shape
    shape = (steps, n, opportunities)
    price = c.price_scale[None, :, None] * torch.exp(0.5 * torch.randn(shape, generator=generator, dtype=F64))
    click = torch.sigmoid(c.ctr_logit[None, :, None] + 1.0 * torch.randn(shape, generator=generator, dtype=F64))
    live = torch.rand(shape, generator=generator, dtype=F64) < c.traffic[:, :, None]  # fault: click noise 1.0, not 0.5
    return simulator.DayDraws(price, click, live)


AUDIT2_FAULTS = {
    "held-out mask one campaign short": ([(ex, "heldout_campaigns", _heldout_mask_strict)], "extra",
                                         "heldout_campaigns_not_trained"),
    "control critic draws other minibatches": ([(ex, "train_critic", _control_with_other_minibatches(ex.train_critic))],
                                               "check", "actual_reward_regression_update"),
    "control shuffles the value reward only": ([(critic_mod.Transitions, "with_permuted_rewards", _permute_value_only)],
                                               "check", "actual_reward_regression_update"),
    "truth simulates the full softmax": ([(ex, "learned_policy", _truth_serves_full_softmax(ex.learned_policy))],
                                         "extra", "truth_simulates_served_policy"),
    "click noise twice the model's": ([(ex, "draw_day", _click_noise_doubled)], "extra",
                                      "auction_draws_match_their_distribution"),
}
FAULTS.update(AUDIT2_FAULTS)


# --- Faults of issue 21: effective settings, random streams, standard errors, derived figures -------
# Each is a bug in a *stage* (what reaches an optimiser or loop, which stream a stage draws from,
# the divisor of a standard error, a figure derived when the results are collected).

def _keyword(original, **changes):
    """``original`` called with some keyword arguments replaced (a setting that reaches the wrong place)."""
    def call(*args, **kwargs):
        return original(*args, **{**kwargs, **changes})
    return call


def _keyword_from(original, name, value_of):
    """``original`` with keyword ``name`` replaced by ``value_of(kwargs)``."""
    def call(*args, **kwargs):
        return original(*args, **{**kwargs, name: value_of(kwargs)})
    return call


class _AdamWithDecay(torch.optim.Adam):
    def __init__(self, params, lr=1e-3, **kw):
        super().__init__(params, lr=lr, **{**kw, "weight_decay": 1e-4})              # fault: weight decay added


def _stream_alias(original, alias: dict):
    """``Streams.generator`` answering some names with another stage's stream."""
    def generator(self, name):
        return original(self, alias.get(name, name))
    return generator


def _control_actor_shifted(original):
    def fit(world, critic, data, generator, lam=None):
        if lam == 0.0:                                                                    # the value-only control ...
            from litrepro.rlbp.streams import Streams, as_streams
            streams = as_streams(generator)

            class Shifted(Streams):                                                       # ... fault: one extra draw first
                def generator(self, name):
                    g = streams.generator(name)
                    if name == "actor_minibatches":
                        torch.rand(1, generator=g)
                    return g
            shifted = Shifted(streams.seed)
            shifted.derivations = streams.derivations
            return original(world, critic, data, shifted, lam=lam)
        return original(world, critic, data, generator, lam=lam)
    return fit


def _one_minibatch_stream(original):
    """``Streams.generator`` handing out one shared actor-minibatch generator (it runs on across fits)."""
    cache = {}

    def generator(self, name):
        if name == "actor_minibatches":
            key = (id(self), name)
            if key not in cache:
                cache[key] = original(self, name)
            return cache[key]
        return original(self, name)
    return generator


def _critic_stream_shifted(original):
    def train(critic, train, heldout, *, generator, **kw):
        torch.rand(1, generator=generator)                                               # fault: one draw before training
        return original(critic, train, heldout, generator=generator, **kw)
    return train


class _ReinitialisedCritic(critic_mod.TwoHeadCritic):
    def __init__(self, *args):
        super().__init__(*args)
        g = torch.Generator().manual_seed(0)                                             # fault: weights not from the stream
        with torch.no_grad():
            for p in self.parameters():
                p.uniform_(-0.1, 0.1, generator=g)


def _se_with_n(values):
    import math as _math
    xs = [float(x) for x in values]
    if len(xs) < 2:
        return 0.0
    m = sum(xs) / len(xs)
    return _math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs)) / _math.sqrt(len(xs))     # fault: divisor n, not n - 1


def _true_se_over_campaigns(original):
    def truth(world, days, policy, generator, lam):
        from litrepro.stats import standard_error
        out = original(world, days, policy, generator, lam)
        out["true_se"] = standard_error(out["raw"]["total_per_campaign"].tolist())        # fault: spread over campaigns
        return out
    return truth


def _control_ratio_from_before(report):
    after, control = report["heldout_after"], report["control_heldout_before"]
    out = _TD_FIGURES(report)
    return {**out, "control_ratio": (after[0] + after[1]) / (control[0] + control[1])}   # fault: control before training


_TD_FIGURES = ex.td_figures


def _td_after_value_head_only(report):
    out = _TD_FIGURES(report)
    return {**out, "td_loss_after": report["heldout_after"][0]}                          # fault: the CPC head dropped


def _mean_probs_on_train(original):
    def fit(world, critic, data, generator, lam=None):
        actor, report = original(world, critic, data, generator, lam=lam)
        with torch.no_grad():
            probs = ex.top_k_policy(actor(data["train"].state), world.cfg.top_k)          # fault: training states
        report["mean_action_probs"] = probs.mean(0).tolist()
        return actor, report
    return fit


def _gradient_norm_after_step(original):
    def train(actor, critic, batch, **kw):
        out = original(actor, critic, batch, **kw)
        out["gradient_norms"] = out["gradient_norms"][1:] + out["gradient_norms"][-1:]     # fault: norms one step late
        return out
    return train


def _agreement_with_value_argmax(original):
    def fusion(world, critic, actor, actor_report, data, generator):
        out = original(world, critic, actor, actor_report, data, generator)
        with torch.no_grad():
            q_value, _ = critic(data["heldout"].state)
            out["actor_fused_argmax_agreement"] = float(                                 # fault: against Q^v's argmax
                (actor(data["heldout"].state).argmax(-1) == q_value.argmax(-1)).double().mean())
        return out
    return fusion


def _lam_dropped(original):
    def fit(world, critic, data, generator, lam=None):
        return original(world, critic, data, generator)                   # fault: the row's lambda never arrives
    return fit


def _sweep_rows_shifted(original):
    def sweep(world, critic, data, days, generator, lambdas=ex.LAMBDAS):
        rows = original(world, critic, data, days, generator, lambdas)
        values = [r["value"] for r in rows]
        return [{**r, "value": v} for r, v in zip(rows, values[1:] + values[:1])]        # fault: rows misaligned
    return sweep


from litrepro import stats as stats_mod  # noqa: E402
from litrepro.rlbp.streams import Streams  # noqa: E402

ISSUE21_FAULTS = {
    # effective settings
    "critic optimiser gets the actor's learning rate": ([(ex, "train_critic", _keyword(ex.train_critic, lr=SMALL.actor_lr))],
                                                       "extra", "effective_settings_match_config"),
    "actor optimiser gets the critic's learning rate": ([(ex, "train_actor", _keyword(ex.train_actor, lr=SMALL.critic_lr))],
                                                       "extra", "effective_settings_match_config"),
    "Adam with weight decay": ([(torch.optim, "Adam", _AdamWithDecay)], "extra", "effective_settings_match_config"),
    "actor trains one step short": ([(ex, "train_actor", _keyword_from(ex.train_actor, "steps", lambda k: k["steps"] - 1))],
                                    "extra", "effective_settings_match_config"),
    "target synced on another period": ([(ex, "train_critic", _keyword_from(
        ex.train_critic, "target_update_every", lambda k: 2 * k["target_update_every"]))], "extra",
        "effective_settings_match_config"),
    "critic discounts with another gamma": ([(ex, "train_critic", _keyword(ex.train_critic, gamma=0.5))], "extra",
                                            "effective_settings_match_config"),
    "actor temperature from another setting": ([(ex, "train_actor", _keyword(ex.train_actor, temperature=1.0))], "extra",
                                               "effective_settings_match_config"),
    "critic minibatches of half the size": ([(ex, "train_critic", _keyword_from(
        ex.train_critic, "batch_size", lambda k: k["batch_size"] // 2))], "extra", "effective_settings_match_config"),
    # random streams
    "behaviour actions drawn from the logged days' stream": ([(Streams, "generator", _stream_alias(
        Streams.generator, {"behaviour": "logged_days"}))], "extra", "random_streams_rederived"),
    "behaviour actions drawn from the logged days' stream (replay)": ([(Streams, "generator", _stream_alias(
        Streams.generator, {"behaviour": "logged_days"}))], "extra", "stage_draws_replayed"),
    "actor initialised from the critic's stream": ([(Streams, "generator", _stream_alias(
        Streams.generator, {"actor_init": "critic_init"}))], "extra", "stage_draws_replayed"),
    "learned truth drawn from the behaviour truth's stream": ([(Streams, "generator", _stream_alias(
        Streams.generator, {"truth/learned": "truth/behaviour"}))], "extra", "stage_draws_replayed"),
    "evaluation days from the logged days' stream": ([(Streams, "generator", _stream_alias(
        Streams.generator, {"eval_days": "logged_days"}))], "extra", "random_streams_rederived"),
    "critic minibatch stream shifted by one draw": ([(ex, "train_critic", _critic_stream_shifted(ex.train_critic))],
                                                   "extra", "stage_draws_replayed"),
    "critic weights not from their stream": ([(ex, "TwoHeadCritic", _ReinitialisedCritic)], "extra",
                                             "stage_draws_replayed"),
    "value-only control actor one draw behind": ([(ex, "fit_actor", _control_actor_shifted(ex.fit_actor))], "extra",
                                                 "paired_arms_share_draws"),
    "actor minibatch stream runs on across fits": ([(Streams, "generator", _one_minibatch_stream(Streams.generator))],
                                                   "extra", "paired_arms_share_draws"),
    # standard errors
    "standard error with divisor n": ([(ex, "standard_error", _se_with_n), (stats_mod, "standard_error", _se_with_n)],
                                      "extra", "standard_errors_match_reference"),
    "truth standard error over campaigns, not days": ([(ex, "simulate_truth", _true_se_over_campaigns(ex.simulate_truth))],
                                                      "extra", "standard_errors_match_reference"),
    # figures derived when the results are collected
    "control ratio against the untrained control": ([(ex, "td_figures", _control_ratio_from_before)], "extra",
                                                    "reported_figures_match_audit"),
    "td_loss_after without the CPC head": ([(ex, "td_figures", _td_after_value_head_only)], "extra",
                                           "reported_figures_match_audit"),
    "mean action probabilities on the training states": ([(ex, "fit_actor", _mean_probs_on_train(ex.fit_actor))], "extra",
                                                         "reported_figures_match_audit"),
    "actor gradient norm one step late": ([(ex, "train_actor", _gradient_norm_after_step(ex.train_actor))], "extra",
                                          "reported_figures_match_audit"),
    "argmax agreement against the value head": ([(ex, "fusion_diagnostics", _agreement_with_value_argmax(
        ex.fusion_diagnostics))], "extra", "reported_figures_match_audit"),
}
FAULTS.update(ISSUE21_FAULTS)
#: Faults that need the lambda sweep to show (the sweep's rows are checked against the served truth).
SWEEP_FAULTS = {
    "lambda sweep rows misaligned": ([(ex, "lambda_sweep", _sweep_rows_shifted(ex.lambda_sweep))], "extra",
                                     "paired_arms_share_draws"),
    # the fourth unseen audit's one miss: every row refits the actor at the run's own lambda
    "lambda sweep refits every actor at the run's lambda": ([(ex, "fit_actor", _lam_dropped(ex.fit_actor))], "extra",
                                                            "effective_settings_match_config"),
}


def _fault_params(faults):
    return [pytest.param(name, marks=pytest.mark.guards(faults[name][2])) for name in sorted(faults)]


def _run_fault(faults, fault, monkeypatch, sweep=False):
    patches, kind, name = faults[fault]
    for module, attribute, replacement in patches:
        assert hasattr(module, attribute), f"{getattr(module, '__name__', module)}.{attribute} is gone: the fault no longer applies"
        monkeypatch.setattr(module, attribute, replacement)
    results = ex.run(SMALL, sweep=sweep)
    if kind == "check":
        assert results["checks"][name] is False, f"{fault}: {name} stayed true"
    elif kind == "extra":
        assert results["extra_checks"][name] is False, f"{fault}: {name} stayed true"
    else:
        assert results["metrics"][name] > 1e-9, f"{fault}: {name} stayed {results['metrics'][name]}"


@pytest.mark.parametrize("fault", _fault_params(SWEEP_FAULTS))
def test_sweep_fault_is_caught(fault, monkeypatch):
    _run_fault(SWEEP_FAULTS, fault, monkeypatch, sweep=True)


@pytest.mark.parametrize("fault", _fault_params(FAULTS))
def test_fault_is_caught(fault, monkeypatch):
    _run_fault(FAULTS, fault, monkeypatch)


def _served_full_softmax(original):
    def probs(name, actor, state, cfg):
        if name == "learned":
            with torch.no_grad():
                return torch.softmax(actor(state), -1)                  # the fault: no top-k truncation when served
        return original(name, actor, state, cfg)
    return probs


def _propensity_one(original):
    def make(epsilon):
        policy = original(epsilon)

        def logged(state, generator):
            action, prob = policy(state, generator)
            return action, torch.ones_like(prob)                        # the fault: propensity logged as 1
        return logged
    return make


@pytest.mark.guards("exact_top_k_support")
def test_served_policy_without_top_k_is_caught(monkeypatch):
    monkeypatch.setattr(ex, "_target_probs", _served_full_softmax(ex._target_probs))
    assert ex.run(SMALL, sweep=False)["checks"]["exact_top_k_support"] is False


@pytest.mark.guards("ordinary_IPS_not_self_normalized")
def test_wrong_logged_propensities_are_caught(monkeypatch):
    monkeypatch.setattr(ex, "behaviour_policy", _propensity_one(ex.behaviour_policy))
    results = ex.run(SMALL, sweep=False)
    assert results["checks"]["ordinary_IPS_not_self_normalized"] is False
    assert results["beyond_seed_metrics"]["propensity_error"] > 0.5


@pytest.fixture(scope="module")
def logged():
    g = torch.Generator().manual_seed(3)
    world = ex.build_world(SMALL, g, torch.device("cpu"))
    return world, ex.collect_logged_data(world, g)["logs"]


def test_controller_replay_is_exact_on_the_real_simulator(logged):
    world, logs = logged
    assert ex.controller_replay_error(world, logs) < 1e-9 and ex.bounded_actions_applied(world, logs)


@pytest.mark.guards("nine_bounded_PID_actions")
@pytest.mark.parametrize("fault", ["action ignored (fixed gains)", "Ki read from the Kp grid", "D term not added",
                                   "phi not clipped"])
def test_a_simulator_that_misapplies_the_action_is_caught(logged, fault):
    """Faulty simulators, as the logs they would write: the replay of gains and phi disagrees."""
    import dataclasses

    world, logs = logged
    s = world.settings
    log = max(logs, key=lambda x: int((x.phi.abs() >= s.phi_max).sum()))             # a day that hits the clip
    if fault == "action ignored (fixed gains)":
        bad = dataclasses.replace(log, kp=torch.full_like(log.kp, float(s.kp[4])), ki=torch.full_like(log.ki, float(s.ki[4])))
    elif fault == "Ki read from the Kp grid":
        bad = dataclasses.replace(log, ki=log.kp.clone())
    elif fault == "D term not added":
        bad = dataclasses.replace(log, phi=(log.phi - log.d_term).clamp(-s.phi_max, s.phi_max))
    else:
        unclipped = log.phi.clone()
        unclipped[log.phi.abs() >= s.phi_max] *= 1.5
        assert (log.phi.abs() >= s.phi_max).any(), "no step hits the clip: the fault would be invisible"
        bad = dataclasses.replace(log, phi=unclipped)
    assert not ex.bounded_actions_applied(world, [bad, *[x for x in logs if x is not log]])


@pytest.mark.guards("fusion_changes_preference")
def test_served_actor_trained_without_fusion_is_caught(monkeypatch):
    """The fused check compares with a value-only control from the same generator state, so an actor
    served with lambda = 0 is that control exactly: its fused-score gain is 0, not > 0."""
    original = ex.fit_actor

    def value_only(world, critic, data, generator, lam=None):
        return original(world, critic, data, generator, lam=0.0)           # the fault: fusion weight ignored
    monkeypatch.setattr(ex, "fit_actor", value_only)
    results = ex.run(SMALL, sweep=False)
    assert results["beyond_seed_metrics"]["fused_score_gain"] == 0.0
    assert results["checks"]["fusion_changes_preference"] is False


@pytest.mark.guards("backups_share_draws")
def test_a_backup_drawing_other_minibatches_is_caught(monkeypatch):
    """Two backups of one run must draw the same critic rows; one whose stream is shifted breaks the pairing."""
    original = ex.fit_critic_and_actor

    def fit(world, data, generator):
        if world.cfg.critic_backup == "none":
            monkeypatch.setattr(ex, "train_critic", _critic_stream_shifted(critic_mod.train_critic))  # fault: this arm only
        try:
            return original(world, data, generator)
        finally:
            monkeypatch.setattr(ex, "train_critic", critic_mod.train_critic)
    clean_arms = ex.run_arms(SMALL, backups=("max_min", "none"), sweep=False, with_headroom=False)
    assert all(r["extra_checks"]["backups_share_draws"] for r in clean_arms.values())
    monkeypatch.setattr(ex, "fit_critic_and_actor", fit)
    arms = ex.run_arms(SMALL, backups=("max_min", "none"), sweep=False, with_headroom=False)
    assert arms["none"]["extra_checks"]["backups_share_draws"] is False


def test_guards_name_every_check_of_the_results(clean):
    """``audit.GUARDS`` names exactly the checks a run reports (plus those of multi-backup runs)."""
    from litrepro.rlbp.audit import GUARDS

    reported = set(clean["checks"]) | set(clean["extra_checks"])
    assert reported <= set(GUARDS), sorted(reported - set(GUARDS))
    assert set(GUARDS) - reported == {"backups_share_draws"}
    assert all(len(v) == 2 and all(isinstance(x, str) and x for x in v) for v in GUARDS.values())


def test_every_issue_21_check_has_a_fault_test():
    """Each new check (streams, settings, standard errors, reported figures) is turned false by some fault here."""
    caught = {v[2] for v in {**FAULTS, **SWEEP_FAULTS}.values()} | {"backups_share_draws"}
    new = {"random_streams_rederived", "stage_draws_replayed", "paired_arms_share_draws", "backups_share_draws",
           "effective_settings_match_config", "standard_errors_match_reference", "reported_figures_match_audit"}
    assert new <= caught, sorted(new - caught)


@pytest.mark.guards("no_live_bidder_or_model_calls")
def test_a_model_load_inside_a_stage_fails_the_offline_check(monkeypatch):
    """A stage that tries to load a pretrained checkpoint (``torch.load``) is seen by the offline guard:
    ``no_live_bidder_or_model_calls`` turns false and ``pretrained_model_calls`` counts the attempt."""
    real = ex.collect_logged_data

    def with_a_checkpoint(world, generator):
        try:
            torch.load("pretrained-bidder.pt")
        except Exception:                 # the guard refuses it; the attempt is what counts
            pass
        return real(world, generator)

    monkeypatch.setattr(ex, "collect_logged_data", with_a_checkpoint)
    results = ex.run(SMALL, sweep=False)
    assert results["checks"]["no_live_bidder_or_model_calls"] is False
    assert results["metrics"]["pretrained_model_calls"] >= 1


def test_a_rare_action_sampled_twice_is_not_a_fault_but_a_shifted_count_is():
    """The count test of ``truth_simulates_served_policy`` uses each count's own law for a rare action (budget study,
    seed 60, expected_sarsa@600: action 6, expected 0.088 times, drawn twice: z = 6.5 under the normal law)."""
    import math

    from litrepro.rlbp import audit as rlbp_audit
    lam = 0.08835919005428397
    assert rlbp_audit.count_tail_p(2, lam, lam) == pytest.approx(2 * (1 - math.exp(-lam) * (1 + lam)), rel=1e-9)
    assert rlbp_audit.count_tail_p(2, lam, lam) > rlbp_audit.SERVED_COUNT_P
    assert rlbp_audit.count_tail_p(9, lam, lam) < rlbp_audit.SERVED_COUNT_P          # nine draws of it is a fault
    assert rlbp_audit.count_tail_p(1300 + 5.1 * 18.82, 1300, 18.82 ** 2) < rlbp_audit.SERVED_COUNT_P  # |z| > 5
    assert rlbp_audit.count_tail_p(1300 + 4.9 * 18.82, 1300, 18.82 ** 2) > rlbp_audit.SERVED_COUNT_P
