"""Unit tests of the pinterest_rlbp mechanisms: hand cases, limits, reference loops."""

from __future__ import annotations

import dataclasses
import math
import socket

import pytest
import torch

import torch.hub

from litrepro import guard as guard_mod
from litrepro.guard import OfflineGuard, OfflineViolation
from litrepro.rlbp import experiment as ex
from litrepro.rlbp import fixtures
from litrepro.rlbp.actor import row_mass_error, support_is_exact_top_k, top_k_policy
from litrepro.rlbp.config import RLBPConfig
from litrepro.rlbp.critic import Transitions, TwoHeadCritic, backup_reference, backup_targets, td_loss_reference, td_losses
from litrepro.rlbp.ope import ips_reference, ordinary_ips, snips
from litrepro.rlbp.pid import action_grid, actions_are_bounded, pid_terms
from litrepro.rlbp.reward import cpc_reduction, smoothed_cpc, total_reward
from litrepro.rlbp.simulator import draw_day, simulate_day

F64 = torch.float64


# --- PID ----------------------------------------------------------------------------------

def test_pid_terms_hand_case():
    p, i, d = pid_terms(torch.tensor([1.0, 2.0, 4.0]), 1.0, 1.0, 1.0, 1.0)
    assert p.tolist() == [1.0, 2.0, 4.0]
    assert i.tolist() == [1.0, 3.0, 7.0]
    assert d.tolist() == [0.0, 1.0, 2.0]          # e_{-1} := e_0: no derivative kick


def test_pid_terms_batched_matches_reference_loop():
    g = torch.Generator().manual_seed(0)
    errors = torch.randn(5, 12, generator=g, dtype=F64)
    kp, ki = torch.rand(5, 12, generator=g, dtype=F64), torch.rand(5, 12, generator=g, dtype=F64)
    kd, dt = 0.3, 0.25
    p, i, d = pid_terms(errors, kp, ki, kd, dt)
    for b in range(5):
        total, prev = 0.0, float(errors[b, 0])
        for t in range(12):
            e = float(errors[b, t])
            total += e * dt
            assert math.isclose(p[b, t], kp[b, t] * e, rel_tol=1e-12)
            assert math.isclose(i[b, t], ki[b, t] * total, rel_tol=1e-12, abs_tol=1e-12)
            assert math.isclose(d[b, t], kd * (e - prev) / dt, rel_tol=1e-12, abs_tol=1e-12)
            prev = e


def test_pid_terms_refuses_non_positive_dt():
    with pytest.raises(ValueError, match="dt must be positive"):
        pid_terms(torch.ones(3), 1.0, 1.0, 1.0, 0.0)


def test_action_grid_is_nine_bounded_and_clipped():
    kp, ki = action_grid(2.0, 1.0, [0.5, 1.0, 4.0], kp_bounds=(0.1, 4.0), ki_bounds=(0.05, 2.0))
    assert kp.tolist() == [1.0] * 3 + [2.0] * 3 + [4.0] * 3       # 8.0 clipped to 4.0
    assert ki.tolist() == [0.5, 1.0, 2.0] * 3                      # 4.0 clipped to 2.0
    assert actions_are_bounded(kp, ki, kp_bounds=(0.1, 4.0), ki_bounds=(0.05, 2.0))
    assert not actions_are_bounded(kp, ki, kp_bounds=(0.1, 3.0), ki_bounds=(0.05, 2.0))
    assert not actions_are_bounded(kp[:8], ki[:8], kp_bounds=(0.1, 4.0), ki_bounds=(0.05, 2.0))


# --- Simulator ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_world():
    cfg = RLBPConfig(n_campaigns=12, opportunities_per_step=8, logged_days=1, eval_days=2, critic_steps=30,
                     actor_steps=10, batch_size=32, actor_batch_size=32)
    g = torch.Generator().manual_seed(3)
    return ex.build_world(cfg, g, torch.device("cpu")), g


def test_controller_d_term_matches_pid_terms(small_world):
    world, g = small_world
    log = ex.pid_demo(world, g, actions=(0, 8))["logs"][8]
    assert ex.derivative_gain_error(log, world.cfg.kd, world.cfg.steps_per_day) == 0.0
    # The check can fail: the setpoint is the plan through step t, so e_0 = plan_0 > 0 and a
    # controller with a derivative kick (e_{-1} := 0) differs at the first step.
    assert (log.errors[0] > 0).all()
    kicked = pid_terms(torch.cat([torch.zeros(12, 1, dtype=F64), log.errors.T], 1), 1.0, 1.0, world.cfg.kd,
                       1 / 24)[2][:, 1:]
    assert (kicked - log.d_term.T).abs().max() > 0


def test_batched_simulation_matches_one_campaign_at_a_time(small_world):
    """The vectorised day equals simulating each campaign alone (no cross-campaign leakage)."""
    world, g = small_world
    draws = draw_day(world.campaigns, world.cfg.opportunities_per_step, torch.Generator().manual_seed(5))
    policy = ex.constant_policy(2)
    batched = simulate_day(world.campaigns, draws, policy, world.settings, g)
    for c in (0, 7):
        one = type(world.campaigns)(*(getattr(world.campaigns, f)[..., c:c + 1]
                                      for f in world.campaigns.__dataclass_fields__))
        one_draws = type(draws)(*(getattr(draws, f)[:, c:c + 1] for f in draws.__dataclass_fields__))
        alone = simulate_day(one, one_draws, policy, world.settings, g)
        assert torch.equal(alone.value_reward[:, 0], batched.value_reward[:, c])
        assert torch.equal(alone.phi[:, 0], batched.phi[:, c])


def test_simulation_is_deterministic_given_the_seed(small_world):
    world, _ = small_world
    runs = []
    for _ in range(2):
        g = torch.Generator().manual_seed(11)
        draws = draw_day(world.campaigns, world.cfg.opportunities_per_step, g)
        runs.append(simulate_day(world.campaigns, draws, ex.behaviour_policy(1.0), world.settings, g))
    assert torch.equal(runs[0].actions, runs[1].actions) and torch.equal(runs[0].cpc, runs[1].cpc)


def test_budget_is_never_exceeded(small_world):
    world, g = small_world
    draws = draw_day(world.campaigns, world.cfg.opportunities_per_step, g)
    log = simulate_day(world.campaigns, draws, ex.constant_policy(8), world.settings, g)
    assert (log.spent_fraction <= 1.0 + 1e-12).all()
    # With a generous budget a campaign at full bid does spend more: the cap is what binds.
    rich = dataclasses.replace(world.campaigns, budget=world.campaigns.budget * 100)
    assert (simulate_day(rich, draws, ex.constant_policy(8), world.settings, g).spent_fraction[-1] * 100
            > log.spent_fraction[-1]).any()


def test_budget_stop_matches_a_per_auction_reference_loop(small_world):
    """The cumsum stop equals taking each step's auctions in order and stopping at the first unaffordable win."""
    world, g = small_world
    c = world.campaigns
    draws = draw_day(c, world.cfg.opportunities_per_step, torch.Generator().manual_seed(9))
    log = simulate_day(c, draws, ex.constant_policy(8), world.settings, g)
    for camp in (0, 5, 11):
        spent, budget = 0.0, float(c.budget[camp])
        for t in range(draws.price.shape[0]):
            bid = float(c.base_bid[camp]) * math.exp(float(log.phi[t, camp]))
            stopped = False
            for m in range(draws.price.shape[2]):
                p = float(draws.price[t, camp, m])
                if stopped or not bool(draws.live[t, camp, m]) or not p < bid:
                    continue
                if spent + p > budget:
                    stopped = True                                          # the rest of this step is lost
                    continue
                spent += p
            assert math.isclose(spent / budget, float(log.spent_fraction[t, camp]), rel_tol=1e-9, abs_tol=1e-12)


def test_behaviour_propensities(small_world):
    _, g = small_world
    state = torch.zeros(4000, 6, dtype=F64)
    action, prob = ex.behaviour_policy(0.3)(state, g)
    expected = torch.where(action == ex.FIXED_GAIN_ACTION, 0.3 / 9 + 0.7, 0.3 / 9).to(F64)
    assert torch.allclose(prob, expected)
    assert abs(float((action == ex.FIXED_GAIN_ACTION).double().mean()) - (0.3 / 9 + 0.7)) < 0.03


# --- Reward -------------------------------------------------------------------------------

def test_cpc_reduction_is_signed_not_absolute():
    tau = torch.tensor([1.0, 1.0])
    assert cpc_reduction(torch.tensor([1.5, 0.5]), tau).tolist() == [-0.5, 0.5]
    assert total_reward(torch.tensor(0.8), torch.tensor(1.5), torch.tensor(1.0), 2.0).item() == pytest.approx(-0.2)
    assert fixtures.cpc_sign_fixture(1.0)["CPC_reduction_retains_negative_sign"]


def test_smoothed_cpc_defined_without_clicks():
    cpc = smoothed_cpc(torch.tensor([0.0, 10.0]), torch.tensor([0.0, 0.0]), torch.tensor([2.0, 2.0]), 1.0)
    assert cpc.tolist() == [2.0, 12.0]


# --- Critic -------------------------------------------------------------------------------

def test_backup_matches_reference_loop_on_random_batch():
    g = torch.Generator().manual_seed(1)
    args = (torch.randn(16, generator=g, dtype=F64), torch.randn(16, generator=g, dtype=F64),
            torch.randn(16, 9, generator=g, dtype=F64), torch.randn(16, 9, generator=g, dtype=F64),
            (torch.rand(16, generator=g) < 0.3).to(F64))
    y_v, y_c = backup_targets(*args, 0.9)
    ref_v, ref_c = backup_reference(*args, 0.9)
    assert torch.allclose(y_v, torch.tensor(ref_v, dtype=F64), rtol=0, atol=1e-15)
    assert torch.allclose(y_c, torch.tensor(ref_c, dtype=F64), rtol=0, atol=1e-15)
    assert (y_v >= args[0] + 0.9 * (1 - args[4]) * args[2].min(1).values).all()


@pytest.mark.parametrize("gamma", [0.0, 0.5, 0.9, 1.0])
def test_backup_fixture_values(gamma):
    out = fixtures.backup_fixture(gamma)
    assert out == {"max_min_backup_error": 0.0, "wrong_cpc_max_backup_gap": 70.0, "opposite_backup_directions": True}


def test_discount_fixture_hand_values():
    """Row 1 bootstraps at gamma: 0.5 + 0.9 * 4.0 and -0.5 + 0.9 * (-0.6); row 2 is terminal."""
    d = fixtures.DISCOUNT_FIXTURE
    args = [torch.tensor(d[k], dtype=F64) for k in ("value_reward", "cpc_cost", "q_value_next", "q_cpc_next", "done")]
    y_v, y_c = backup_targets(*args, 0.9)
    assert y_v.tolist() == pytest.approx([0.5 + 0.9 * 4.0, -0.25]) and y_c.tolist() == pytest.approx([-0.5 - 0.54, 0.75])


def test_terminal_transitions_do_not_bootstrap():
    y_v, y_c = backup_targets(torch.tensor([1.0]), torch.tensor([2.0]), torch.full((1, 9), 100.0),
                              torch.full((1, 9), -100.0), torch.tensor([1.0]), 0.9)
    assert (y_v.item(), y_c.item()) == (1.0, 2.0)


def test_critic_training_is_a_real_regression():
    cfg = RLBPConfig(n_campaigns=128, logged_days=3, critic_steps=600)
    g = torch.Generator().manual_seed(2)
    world = ex.build_world(cfg, g, torch.device("cpu"))
    data = ex.collect_logged_data(world, g)
    critic, report = ex.fit_critic(world, data, g)
    assert report["parameter_change"] > 0
    assert len(report["td_loss_value"]) == world.cfg.critic_steps
    assert ex.reward_regression_update(report, data["train"])
    assert sum(report["heldout_after"]) < ex.CONTROL_MARGIN["max_min"] * sum(report["control_heldout_after"])
    # The control's targets carry no state-action signal: same multiset of rewards, other order.
    shuffled = data["train"].with_permuted_rewards(torch.Generator().manual_seed(0))
    assert torch.equal(shuffled.value_reward.sort().values, data["train"].value_reward.sort().values)
    assert not torch.equal(shuffled.value_reward, data["train"].value_reward)
    assert torch.equal(shuffled.state, data["train"].state)


def test_market_has_every_kind_and_binding_cpc():
    cfg = RLBPConfig(n_campaigns=128, logged_days=1)
    g = torch.Generator().manual_seed(5)
    world = ex.build_world(cfg, g, torch.device("cpu"))
    data = ex.collect_logged_data(world, g)
    rows = {r["kind"]: r for r in ex.market_by_kind(world, data)}
    assert set(rows) == set(ex.KINDS) and all(r["campaigns"] > 0 for r in rows.values())
    assert rows["cpc_constrained"]["segments_over_target"] > 0.4
    assert rows["unconstrained"]["segments_over_target"] < 0.05
    assert rows["budget_constrained"]["mean_spent_fraction"] > rows["cpc_constrained"]["mean_spent_fraction"]
    assert 0.2 <= data["segments_over_target_fraction"] <= 0.6
    assert ex.cpc_sign_retained(world, data)


def test_cpc_sign_check_refuses_a_clipped_cost():
    cfg = RLBPConfig(n_campaigns=32, logged_days=1)
    g = torch.Generator().manual_seed(6)
    world = ex.build_world(cfg, g, torch.device("cpu"))
    data = ex.collect_logged_data(world, g)
    assert ex.cpc_sign_retained(world, data)
    clipped = dataclasses.replace(data["train"], cpc_cost=data["train"].cpc_cost.clamp(min=0))
    assert not ex.cpc_sign_retained(world, {**data, "train": clipped})


# --- Fusion, actor ------------------------------------------------------------------------

def test_fusion_changes_preference_only_with_positive_lambda():
    assert fixtures.fusion_fixture(1.0)["fusion_changes_preference"]
    assert not fixtures.fusion_fixture(0.0)["fusion_changes_preference"]


@pytest.mark.parametrize("k", [1, 3, 9])
def test_top_k_policy_support_and_mass(k):
    logits = torch.randn(50, 9, generator=torch.Generator().manual_seed(k), dtype=F64)
    probs = top_k_policy(logits, k)
    assert ((probs > 0).sum(-1) == k).all()
    assert support_is_exact_top_k(probs, logits, k)
    assert row_mass_error(probs) < 1e-12
    if k == 9:
        assert torch.allclose(probs, torch.softmax(logits, -1))
    if k == 1:
        assert torch.equal(probs.argmax(-1), logits.argmax(-1)) and (probs.max(-1).values == 1).all()


def test_top_k_check_detects_a_wrong_support():
    logits = torch.tensor([[3.0, 2.0, 1.0, 0.0, 0, 0, 0, 0, 0]], dtype=F64)
    wrong = torch.zeros(1, 9, dtype=F64)
    wrong[0, [0, 1, 3]] = 1 / 3                                     # keeps action 3 instead of 2
    assert not support_is_exact_top_k(wrong, logits, 3)
    with pytest.raises(ValueError, match="top_k"):
        top_k_policy(logits, 0)


# --- OPE ----------------------------------------------------------------------------------

def test_ordinary_ips_hand_case_and_not_snips():
    f = fixtures.IPS_FIXTURE
    ips = ordinary_ips(f["reward"], f["target_prob"], f["logging_prob"]).item()
    assert ips == pytest.approx(0.8, abs=1e-15)
    assert snips(f["reward"], f["target_prob"], f["logging_prob"]).item() == pytest.approx(2.4 / 2.7)
    assert fixtures.ips_fixture()["ordinary_IPS_not_self_normalized"]


def test_ordinary_ips_matches_reference_loop():
    g = torch.Generator().manual_seed(4)
    r, pi, mu = torch.randn(1000, generator=g, dtype=F64), torch.rand(1000, generator=g, dtype=F64), \
        torch.rand(1000, generator=g, dtype=F64) + 0.05
    assert abs(ordinary_ips(r, pi, mu).item() - ips_reference(r.tolist(), pi.tolist(), mu.tolist())) < 1e-12


def test_ips_on_policy_equals_the_mean_reward():
    r = torch.tensor([1.0, 2.0, 3.0], dtype=F64)
    p = torch.full((3,), 0.25, dtype=F64)
    assert ordinary_ips(r, p, p).item() == pytest.approx(2.0)


@pytest.mark.parametrize("mu, message", [
    ([0.5, 0.0, 0.5], "logging_prob must be > 0, got 0.0 at index 1"),
    ([0.5, -0.1, 0.5], "logging_prob must be > 0, got -0.1 at index 1"),
    ([0.5, float("nan"), 0.5], "logging_prob contains NaN at index 1"),
    ([0.5, 0.5], "equal length"),
])
def test_ordinary_ips_refuses_bad_propensities(mu, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        ordinary_ips([1.0, 1.0, 1.0], [0.5, 0.5, 0.5], mu)


# --- Offline guard ------------------------------------------------------------------------

def test_offline_guard_counts_and_refuses():
    with OfflineGuard() as guard:
        with pytest.raises(OfflineViolation):
            socket.create_connection(("127.0.0.1", 9), timeout=1)
        with pytest.raises(OfflineViolation):
            torch.hub.load_state_dict_from_url("https://example.invalid/w.pt")
    assert (guard.network_calls, guard.pretrained_model_calls, guard.clean) == (1, 1, False)
    assert socket.socket.connect is not None and torch.hub.load_state_dict_from_url.__name__ != "refuse_model"


def test_offline_guard_sees_udp_lookups_and_torch_load(tmp_path):
    """A UDP datagram (no connect), a DNS lookup and a local checkpoint load are each counted and refused."""
    checkpoint = tmp_path / "w.pt"
    torch.save({"w": torch.zeros(2)}, checkpoint)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        with OfflineGuard() as guard:
            with pytest.raises(OfflineViolation):
                udp.sendto(b"x", ("127.0.0.1", 9))
            with pytest.raises(OfflineViolation):
                socket.getaddrinfo("example.invalid", 80)
            with pytest.raises(OfflineViolation):
                torch.load(checkpoint)
    finally:
        udp.close()
    assert (guard.network_calls, guard.pretrained_model_calls) == (2, 1)
    assert torch.load(checkpoint)["w"].shape == (2,)                  # restored after the guard
    assert socket.getaddrinfo("127.0.0.1", 80)


def test_td_losses_equal_the_loop_reference_with_a_separate_target():
    """With a target network that differs from the critic, the vectorised TD losses still equal the
    plain-loop recomputation (a td_losses that bootstrapped from the online critic would not)."""
    g = torch.Generator().manual_seed(3)
    n, f = 40, 5
    batch = Transitions(state=torch.randn(n, f, generator=g, dtype=torch.float64), action=torch.randint(9, (n,), generator=g),
                        propensity=torch.full((n,), 1 / 9, dtype=torch.float64),
                        value_reward=torch.randn(n, generator=g, dtype=torch.float64),
                        cpc_cost=torch.randn(n, generator=g, dtype=torch.float64),
                        reward=torch.zeros(n, dtype=torch.float64), cpc=torch.ones(n, dtype=torch.float64),
                        target_cpc=torch.ones(n, dtype=torch.float64),
                        next_state=torch.randn(n, f, generator=g, dtype=torch.float64),
                        done=(torch.rand(n, generator=g) < 0.3).to(torch.float64), campaign=torch.arange(n))
    torch.manual_seed(0)
    critic, target = TwoHeadCritic(f, 8), TwoHeadCritic(f, 8)
    with torch.no_grad():
        got = [float(x) for x in td_losses(critic, target, batch, 0.9)]
        online = [float(x) for x in td_losses(critic, critic, batch, 0.9)]
    ref = td_loss_reference(critic, target, batch, 0.9)
    assert got == pytest.approx(ref, rel=1e-12)
    assert abs(online[0] - ref[0]) > 1e-6                    # the fixture can tell the two targets apart


# The guard is checked against this literal list, not against the module's own constants.
GUARDED = [(socket.socket, "connect"), (socket.socket, "connect_ex"), (socket.socket, "sendto"),
           (socket.socket, "sendmsg"), (socket, "getaddrinfo"), (socket, "gethostbyname"),
           (socket, "gethostbyname_ex"), (torch.hub, "load"), (torch.hub, "load_state_dict_from_url"),
           (torch.hub, "download_url_to_file"), (torch, "load")]


def test_offline_guard_restores_exactly_what_it_patched():
    before = {(id(o), n): getattr(o, n) for o, n in GUARDED}
    with OfflineGuard():
        assert all(getattr(o, n) is not before[(id(o), n)] for o, n in GUARDED)
    assert all(getattr(o, n) is before[(id(o), n)] for o, n in GUARDED)
    assert {(id(o), n) for o, n in guard_mod.patched_functions()} == set(before)


def test_offline_guard_refuses_each_socket_path_and_counts_hub_as_a_model():
    tcp, udp = socket.socket(), socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        with OfflineGuard() as guard:
            for call in (lambda: tcp.connect(("127.0.0.1", 9)), lambda: tcp.connect_ex(("127.0.0.1", 9)),
                         lambda: udp.sendmsg([b"x"], [], 0, ("127.0.0.1", 9)), lambda: socket.gethostbyname("a.invalid")):
                with pytest.raises(OfflineViolation):
                    call()
            with pytest.raises(OfflineViolation):
                torch.hub.load("owner/repo", "model")
    finally:
        tcp.close()
        udp.close()
    assert (guard.network_calls, guard.pretrained_model_calls) == (4, 1)


@pytest.mark.parametrize("kind", ["max_min", "fused_greedy", "policy", "none"])
def test_every_backup_matches_its_plain_loop(kind):
    """backup_targets against backup_reference, on random rows with terminal and bootstrapping transitions."""
    from litrepro.rlbp.critic import backup_reference

    g = torch.Generator().manual_seed(11)
    n = 64
    r, c = torch.randn(n, generator=g, dtype=torch.float64), torch.randn(n, generator=g, dtype=torch.float64)
    qv, qc = torch.randn(n, 9, generator=g, dtype=torch.float64), torch.randn(n, 9, generator=g, dtype=torch.float64)
    done = (torch.rand(n, generator=g) < 0.3).to(torch.float64)
    probs = torch.softmax(torch.randn(n, 9, generator=g, dtype=torch.float64), -1)
    y_v, y_c = backup_targets(r, c, qv, qc, done, 0.9, kind=kind, lam=1.5, next_probs=probs)
    ref_v, ref_c = backup_reference(r, c, qv, qc, done, 0.9, kind=kind, lam=1.5, next_probs=probs)
    assert torch.allclose(y_v, torch.tensor(ref_v, dtype=torch.float64), rtol=0, atol=1e-12)
    assert torch.allclose(y_c, torch.tensor(ref_c, dtype=torch.float64), rtol=0, atol=1e-12)


def test_backups_differ_where_they_should():
    """Hand row: value wants action 0, cost wants action 1, the fused score (lambda 1) wants action 2."""
    qv = torch.tensor([[3.0, 0.0, 2.5] + [-9.0] * 6], dtype=torch.float64)
    qc = torch.tensor([[2.0, -1.0, 0.0] + [9.0] * 6], dtype=torch.float64)
    one, zero = torch.tensor([0.0], dtype=torch.float64), torch.tensor([0.0], dtype=torch.float64)
    probs = torch.tensor([[0.5, 0.5] + [0.0] * 7], dtype=torch.float64)
    got = {k: [float(x) for x in backup_targets(one, zero, qv, qc, zero, 1.0, kind=k, lam=1.0, next_probs=probs)]
           for k in ("max_min", "fused_greedy", "policy", "none")}
    assert got == {"max_min": [3.0, -1.0], "fused_greedy": [2.5, 0.0], "policy": [1.5, 0.5], "none": [0.0, 0.0]}


def test_headroom_oracles_are_ordered_and_exact_on_the_constants():
    cfg = RLBPConfig(n_campaigns=48, eval_days=2)
    g = torch.Generator().manual_seed(4)
    world = ex.build_world(cfg, g, torch.device("cpu"))
    days = ex.draw_eval_days(world, g)
    room = ex.headroom(world, days, g)
    # the fixed gain is action 4, and each oracle is at least as good as the one that knows less
    assert room["fixed_gain"] == room["constant"][ex.FIXED_GAIN_ACTION]
    assert room["best_constant"] == max(room["constant"])
    assert room["fixed_gain"] <= room["best_constant"] <= room["best_per_kind"] + 1e-12
    assert room["best_per_kind"] <= room["best_per_campaign"] + 1e-12
    # a constant action's truth is what simulate_truth reports for it
    truth = ex.simulate_truth(world, days, ex.constant_policy(2), g, cfg.lambda_cpc)
    assert truth["true_value"] == pytest.approx(room["constant"][2], rel=1e-12)


def test_policy_backup_alternates_and_keeps_the_critic_step_budget():
    cfg = RLBPConfig(n_campaigns=64, logged_days=2, critic_steps=90, actor_steps=30, policy_rounds=3,
                     critic_backup="policy")
    g = torch.Generator().manual_seed(6)
    world = ex.build_world(cfg, g, torch.device("cpu"))
    data = ex.collect_logged_data(world, g)
    critic, report, actor, actor_report = ex.fit_critic_and_actor(world, data, g)
    assert len(report["td_loss_value"]) == cfg.critic_steps and report["policy_rounds"] == 3
    assert report["target_lag_error"] == 0.0 and report["td_loss_reference_error"] < 1e-9


def test_run_equals_the_notebook(tmp_path):
    """``experiment.run`` (what the fault tests and the study call) and the notebook give the same results."""
    import json

    from conftest import TINY, run_cli

    out = tmp_path / "out"
    settings = [a for s in TINY["pinterest_rlbp"] for a in ("--set", s)]
    done = run_cli("run", "--methods", "pinterest_rlbp", "--seeds", "5", "--out", str(out), "--no-summary-notebook",
                   "--no-progress", *settings)
    assert done.returncode == 0, done.stderr
    (path,) = (out / "pinterest_rlbp").rglob("seed-5.json")               # under the sweep point's folder
    notebook = json.loads(path.read_text())
    params = {k: v for k, v in notebook["provenance"]["parameters"].items()}
    results = ex.run(RLBPConfig(**params))
    for key in ("metrics", "checks", "extra_checks", "beyond_seed_metrics", "headroom", "lambda_sweep", "eval_day_hashes"):
        assert notebook[key] == results[key], key
