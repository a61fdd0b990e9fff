"""Each check and metric of pinterest_rlbp catches the faulty versions of the stage it guards.

Every test swaps one plausible bug into the real pipeline (``monkeypatch`` on the name
the pipeline actually calls), runs it end to end on a small configuration, and asserts
that the named check turns false or the named metric turns non-zero.  The first test
runs the same configuration unpatched and asserts the opposite, so a fault test can
only pass because of its fault.  ``FAULTS`` is grouped by the stage each fault breaks:
simulator and auctions, transitions, critic, actor and fusion, evaluation.
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


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fault_is_caught(fault, monkeypatch):
    patches, kind, name = FAULTS[fault]
    for module, attribute, replacement in patches:
        assert hasattr(module, attribute), f"{module.__name__}.{attribute} is gone: the fault no longer applies"
        monkeypatch.setattr(module, attribute, replacement)
    results = ex.run(SMALL, sweep=False)
    if kind == "check":
        assert results["checks"][name] is False, f"{fault}: {name} stayed true"
    elif kind == "extra":
        assert results["extra_checks"][name] is False, f"{fault}: {name} stayed true"
    else:
        assert results["metrics"][name] > 1e-9, f"{fault}: {name} stayed {results['metrics'][name]}"


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


def test_served_policy_without_top_k_is_caught(monkeypatch):
    monkeypatch.setattr(ex, "_target_probs", _served_full_softmax(ex._target_probs))
    assert ex.run(SMALL, sweep=False)["checks"]["exact_top_k_support"] is False


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
