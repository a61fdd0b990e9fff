"""The transfer regime (``litrepro.waypoint.transfer``), its checks and its study (``make waypoint-transfer``).

Hand-made cases for the gates, the exact KL and the curve readings; a tiny real run that passes
its checks; faulty versions of the stage that turn a named check false; the study's refusals;
and the committed study's freshness (source hashes) and recomputation.
"""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from litrepro.waypoint import transfer, transfer_study
from litrepro.waypoint import experiment as wp
from litrepro.waypoint.config import WaypointConfig
from litrepro.waypoint.model import BytePolicy
from litrepro.waypoint.opd import sample_rollouts, straightness_gate, student_logps

TINY = transfer.TransferConfig(updates=4, eval_every=2, batch=6, eval_prompts=16)


# --- Gates, loss and curve readings on hand-made cases ----------------------------------------------

def _lp():
    g = torch.Generator().manual_seed(0)
    lp = -torch.rand(3, 4, 5, generator=g, dtype=torch.float64) * 4                  # (3, B, N)
    student = -torch.rand(4, 5, generator=g, dtype=torch.float64) * 4
    valid = torch.ones(4, 5, dtype=torch.bool)
    valid[1, 3:] = False
    return lp, student, valid


def test_gates_follow_their_formulas():
    lp, s, valid = _lp()
    assert torch.equal(transfer.transfer_gate("final_only", lp, s, valid, None), torch.ones(4, 5, dtype=torch.float64))
    assert torch.equal(transfer.transfer_gate("straightness", lp, s, valid, None), straightness_gate(lp))
    assert torch.equal(transfer.transfer_gate("abs_advantage", lp, s, valid, None), (lp[2] - s).abs())
    l0, lm, lf = 0.0, -1.0, -0.5                                                      # path 1.5, chord 0.5
    one = torch.tensor([[[l0]], [[lm]], [[lf]]], dtype=torch.float64)
    got = transfer.transfer_gate("straightness_x_magnitude", one, one[0], torch.ones(1, 1, dtype=torch.bool), None)
    assert float(got) == pytest.approx((0.5 / 1.5) * 0.5, rel=1e-15)
    with pytest.raises(ValueError, match="unknown gate"):
        transfer.transfer_gate("nope", lp, s, valid, None)


def test_binned_shuffle_permutes_within_abs_advantage_bins_only():
    lp, s, valid = _lp()
    straight = straightness_gate(lp)[valid]
    adv = (lp[2] - s)[valid].abs()
    got = transfer.transfer_gate("binned_shuffle", lp, s, valid, torch.Generator().manual_seed(1), bins=3)[valid]
    order = torch.argsort(torch.round(adv / 1e-6), stable=True)
    n = order.numel()
    for b in range(3):
        members = order[[r for r in range(n) if r * 3 // n == b]]
        assert torch.equal(got[members].sort().values, straight[members].sort().values)
    assert not torch.equal(got, straight)                                             # it did move gates
    same = transfer.transfer_gate("binned_shuffle", lp, s, valid, torch.Generator().manual_seed(1), bins=n)[valid]
    assert torch.equal(same, straight)                                                # one token per bin: identity
    padded = transfer.transfer_gate("binned_shuffle", lp, s, valid, torch.Generator().manual_seed(1), bins=3)
    assert torch.equal(padded[~valid], straightness_gate(lp)[~valid])                  # padding untouched


def _policies():
    g = torch.Generator().manual_seed(3)
    return BytePolicy(6, g, embed_std=0.5, output_bias=False), BytePolicy(6, g, embed_std=0.5, output_bias=False)


def test_full_kl_is_zero_for_the_teacher_itself_and_equals_a_plain_loop():
    student, final = _policies()
    r = sample_rollouts(student, torch.tensor([[72], [101], [32]]), 5, torch.Generator().manual_seed(2))
    same = transfer.full_kl_loss(student, student, r, r.valid, gate_mass=0.8)
    assert abs(float(same.detach())) < 1e-15
    loss = transfer.full_kl_loss(student, final, r, r.valid, gate_mass=0.8)
    total, n = 0.0, 0
    with torch.no_grad():
        zs, zf = student(r.tokens), final(r.tokens)                                    # (B, T, V)
    for b, t in r.valid.nonzero().tolist():
        ps = torch.softmax(zs[b, r.prompt_len - 1 + t], 0).tolist()
        pf = torch.softmax(zf[b, r.prompt_len - 1 + t], 0).tolist()
        total += sum(x * (math.log(x) - math.log(y)) for x, y in zip(ps, pf))            # KL(student || final)
        n += 1
    assert float(loss.detach()) == pytest.approx(0.8 * total / n, rel=1e-10)


def test_full_kl_gradient_is_the_expected_sampled_gradient():
    """Score-function identity: grad KL_t = E_{v ~ pi_s}[(log pi_s(v) - log pi_f(v)) grad log pi_s(v)]."""
    student, final = _policies()
    r = sample_rollouts(student, torch.tensor([[72], [101]]), 3, torch.Generator().manual_seed(5))
    params = list(student.parameters())
    exact = torch.autograd.grad(transfer.full_kl_loss(student, final, r, r.valid, gate_mass=1.0), params)
    p = r.prompt_len
    z = student(r.tokens)[:, p - 1:-1][r.valid]                                          # (n, V)
    with torch.no_grad():
        zf = final(r.tokens)[:, p - 1:-1][r.valid]
    log_s, log_f = torch.log_softmax(z, -1), torch.log_softmax(zf, -1)
    weight = (log_s.exp() * (log_s - log_f)).detach()                                   # pi_s(v) (log pi_s - log pi_f)
    expected = torch.autograd.grad((weight * log_s).sum(-1).mean(), params)
    for a, b in zip(exact, expected):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-14)


def test_curve_readings():
    assert transfer.transfer_fractions([0.5, 0.6, 0.7], 0.5, 0.9) == pytest.approx([0.0, 0.25, 0.5])
    with pytest.raises(ValueError, match="not positive"):
        transfer.transfer_fractions([0.5], 0.5, 0.5)
    assert transfer.area_under_curve([0, 10, 20], [0.0, 0.5, 0.5]) == pytest.approx((2.5 + 5.0) / 20)
    assert transfer.updates_to_reach([0, 10, 20], [0.0, 0.2, 0.6], 0.5) == pytest.approx(17.5)
    assert transfer.updates_to_reach([0, 10, 20], [0.0, 0.2, 0.4], 0.5) is None
    assert transfer.interpolate(0.5, [0.0, 1.0], [2.0, 4.0]) == 3.0 and transfer.interpolate(2.0, [0.0, 1.0], [0, 1]) is None
    assert transfer.log_lr_at(0.5, [1.0, 4.0], [0.0, 1.0]) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="multiple"):
        dataclasses.replace(TINY, updates=5).marks()


def test_holm_matches_its_formula():
    from scipy import stats

    fam = {"a": [1.0, 1.2, 0.9, 1.1, 1.0], "b": [0.1, -0.2, 0.3, 0.05, 0.0]}
    out = transfer_study.holm(fam)
    ps = {k: float(stats.ttest_1samp(v, 0).pvalue) for k, v in fam.items()}
    first, second = sorted(ps, key=ps.get)
    assert out[first]["p_holm"] == pytest.approx(min(1, 2 * ps[first]))
    assert out[second]["p_holm"] == pytest.approx(max(min(1, 2 * ps[first]), ps[second]))
    raw = stats.t.interval(0.95, 4, loc=sum(fam["a"]) / 5, scale=stats.sem(fam["a"]))
    assert out["a"]["holm_low"] < raw[0] and out["a"]["holm_high"] > raw[1]


# --- A tiny real run, and faulty versions of the stage ----------------------------------------------

@pytest.fixture(scope="module")
def corpus(corpus_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)                      # the tiny runs are faster on one thread (and the studies use one)
    yield wp.load_corpus(WaypointConfig(corpus_path=str(corpus_path)))
    torch.set_num_threads(threads)


def _run(corpus, seed, arms=None):
    return transfer_study.run_seed(seed, corpus=corpus, device=torch.device("cpu"), cfg=TINY, arms=arms)


@pytest.fixture(scope="module")
def clean(corpus):
    return [_run(corpus, 42), _run(corpus, 43)]


def test_a_tiny_run_passes_every_check_and_summarises(clean):
    for row in clean:
        assert not transfer_study.failed_checks(row), transfer_study.failed_checks(row)
        assert set(row["arms"]) == set(transfer.ARMS) and row["teacher_gain"] > 0.2
        for arm in row["arms"].values():
            assert arm["tf"][0] == 0.0 and arm["updates"] == TINY.marks()
    from litrepro.waypoint.registry import GUARDS
    assert set(GUARDS) >= set(clean[0]["checks"]) | set(clean[0]["arm_checks"]["waypoint"])   # the trust report's
    summary = transfer_study.summarise(clean)
    assert summary["primary_endpoint"]["arm"] == "final_only" and summary["primary_endpoint"]["met"] is False
    assert all(d["n"] == 2 for d in summary["differences"])


def test_a_seed_reruns_bit_for_bit(corpus, clean):
    again = _run(corpus, 42, ["final_only", "binned_shuffle", "full_kl"])
    for arm in again["arms"]:
        assert again["arms"][arm] == clean[0]["arms"][arm]                  # every curve point, every diagnostic


@pytest.mark.guards("gate_matches_reference")
def test_a_binned_shuffle_that_shuffles_the_whole_batch_fails_its_gate_check(corpus, monkeypatch):
    real = transfer.transfer_gate
    monkeypatch.setattr(transfer, "transfer_gate",
                        lambda kind, *a, **k: real("shuffled" if kind == "binned_shuffle" else kind, *a, **k))
    row = _run(corpus, 44, ["final_only", "binned_shuffle"])
    assert row["arm_checks"]["binned_shuffle"]["gate_matches_reference"] is False
    assert row["arm_checks"]["final_only"]["gate_matches_reference"] is True


@pytest.mark.guards("gate_matches_reference")
@pytest.mark.parametrize("kind", ["shuffled", "binned_shuffle"])
def test_a_shuffle_drawn_from_a_fixed_generator_fails_its_gate_check(corpus, monkeypatch, kind):
    """Still a permutation (within the |A| bins for binned_shuffle) that moves gates, but not the arm's named
    stream's: the audit re-draws it from seed + 41."""
    real = transfer.transfer_gate

    def fixed(k, lp, s_lp, valid, generator, **kw):
        return real(k, lp, s_lp, valid, torch.Generator().manual_seed(0) if k == kind else generator, **kw)
    monkeypatch.setattr(transfer, "transfer_gate", fixed)
    row = _run(corpus, 44, ["final_only", kind])
    assert row["arm_checks"][kind]["gate_matches_reference"] is False
    assert row["arm_checks"]["final_only"]["gate_matches_reference"] is True


@pytest.mark.guards("gate_matches_reference")
def test_a_gate_that_ignores_the_middle_waypoint_fails_its_gate_check(corpus, monkeypatch):
    monkeypatch.setattr(transfer, "straightness_gate", lambda lp: (lp[2] - lp[0]).abs().clamp(max=1.0))
    row = _run(corpus, 44, ["final_only", "waypoint"])
    assert row["arm_checks"]["waypoint"]["gate_matches_reference"] is False


@pytest.mark.guards("update_matches_reference")
def test_a_forward_kl_fails_the_full_kl_update_check(corpus, monkeypatch):
    def forward_kl(student, final, rollouts, valid, *, gate_mass):
        p = rollouts.prompt_len
        z_s = student(rollouts.tokens)[:, p - 1:-1][valid]
        with torch.no_grad():
            z_f = final(rollouts.tokens)[:, p - 1:-1][valid]
        log_s, log_f = torch.log_softmax(z_s, -1), torch.log_softmax(z_f, -1)
        return gate_mass * (log_f.exp() * (log_f - log_s)).sum(-1).mean()           # KL(final || student): wrong way
    monkeypatch.setattr(transfer, "full_kl_loss", forward_kl)
    row = _run(corpus, 44, ["final_only", "full_kl"])
    assert row["arm_checks"]["full_kl"]["update_matches_reference"] is False
    assert row["arm_checks"]["final_only"]["update_matches_reference"] is True


@pytest.mark.guards("lr_matches_arm")
def test_an_arm_run_at_the_base_learning_rate_fails_lr_matches_arm(corpus, monkeypatch):
    real = transfer.run_arm
    monkeypatch.setattr(transfer, "run_arm", lambda arm, *a, **k: real(dataclasses.replace(arm, lr_multiplier=1.0), *a, **k))
    row = _run(corpus, 44, ["final_only", "final_only_lr2"])
    assert row["checks"]["lr_matches_arm"] is False


@pytest.mark.guards("arms_paired")
def test_an_arm_with_its_own_prompt_stream_fails_arms_paired(corpus, monkeypatch):
    real, calls = transfer.stream, []

    def faulty(seed, name):                                         # the second arm draws other prompts
        calls.append(name)
        return real(seed + 1 if calls.count("transfer_prompts") == 2 and name == "transfer_prompts" else seed, name)
    monkeypatch.setattr(transfer, "stream", faulty)
    row = _run(corpus, 44, ["final_only", "waypoint"])
    assert row["checks"]["arms_paired"] is False


@pytest.mark.guards("final_p_even_matches_reference")
def test_a_curve_scored_on_other_prompts_fails_the_final_point_check(corpus, monkeypatch):
    real = transfer.even_mass
    monkeypatch.setattr(transfer, "even_mass", lambda policy, prompts: real(policy, prompts[:-1]))
    row = _run(corpus, 44, ["final_only"])
    assert row["arm_checks"]["final_only"]["final_p_even_matches_reference"] is False


def test_the_summary_refuses_a_failed_check_and_an_interval_that_does_not_recompute(clean, monkeypatch):
    rows = json.loads(json.dumps(clean))
    rows[1]["arm_checks"]["waypoint"]["gate_matches_reference"] = False
    with pytest.raises(transfer_study.StudyRefused, match=r"seed 43: waypoint.gate_matches_reference"):
        transfer_study.summarise(rows)
    from litrepro import stats
    real = stats.paired_ci
    monkeypatch.setattr(stats, "paired_ci", lambda a, b, **k: real(sorted(a), sorted(b), **k))
    with pytest.raises(transfer_study.StudyRefused, match="plain-loop"):
        transfer_study.summarise(clean + [_shift(clean[0], 44), _shift(clean[1], 45)])
    monkeypatch.setattr(stats, "paired_ci", real)
    stored = json.loads(json.dumps(clean))
    stored[0]["arms"]["waypoint"]["tf_final"] += 0.01                                 # a derived value that lies
    with pytest.raises(transfer_study.StudyRefused, match="seed 42 waypoint tf_final stored"):
        transfer_study.summarise(stored)


def _shift(row, seed):
    out = json.loads(json.dumps(row))
    out["seed"] = seed
    for arm in out["arms"].values():
        arm["p_even"] = [p + 0.001 * (seed - 42) * i for i, p in enumerate(arm["p_even"])]
        arm.update(transfer_study._arm_metrics(arm["updates"], arm["p_even"], arm["validation_nll"], out["p_w0"], out["p_wf"]))
    return out


def test_findings_words_follow_the_intervals(clean):
    rows = clean + [_shift(clean[0], 44), _shift(clean[1], 45)]
    data = {"n_seeds": 4, "config": dataclasses.asdict(TINY), "lr_multipliers": list(transfer.LR_MULTIPLIERS),
            **transfer_study.summarise(rows)}
    lines = transfer_study.findings(data)
    assert "Primary endpoint" in lines[1] and "less than 50%" in lines[1]
    assert all(isinstance(x, str) and x for x in lines)
    # the words follow the Holm interval over the frontier's arms, not the unadjusted one
    fake = {"nll_gap_to_frontier": {"ci95_low": -0.2, "ci95_high": -0.1}, "holm_low": -0.2, "holm_high": -0.1}
    assert transfer_study.frontier_words(fake) == "beyond the best final-only learning rate"
    fake.update(holm_low=-0.25, holm_high=0.05)                       # unadjusted below 0, Holm spans 0
    assert transfer_study.frontier_words(fake).startswith("not distinguishable from it")   # spans 0: no claim either way
    fake.update(holm_low=0.1, holm_high=0.2)
    assert transfer_study.frontier_words(fake) == "within it (behind the frontier)"
    assert all(f["holm_low"] <= f["nll_gap_to_frontier"]["ci95_low"] and
               f["holm_high"] >= f["nll_gap_to_frontier"]["ci95_high"] for f in data["frontier"])   # Holm is wider
    row = {"ci95_low": 0.1, "ci95_high": 0.3, "effect_size_dz": 1.5, "in_comparator_sds": 0.4}
    assert transfer_study._reads(row).startswith("higher by [+0.10, +0.30] (d_z +1.5")


# --- The committed study ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def data():
    if not transfer_study.PATH.exists():
        pytest.fail(f"{transfer_study.PATH} is missing: run `make waypoint-transfer`")
    return json.loads(transfer_study.PATH.read_text())


def test_transfer_study_is_complete_and_every_number_recomputes(data):
    assert data["n_seeds"] >= 16 and transfer_study.PLOT.exists()
    assert data["config"] == dataclasses.asdict(transfer.TransferConfig())
    assert set(data["per_arm"]) == set(transfer.ARMS) and len(data["lr_multipliers"]) >= 5
    assert not [r for r in data["per_seed"] if transfer_study.failed_checks(r)]
    # the whole file, rows in their committed order, is its own per-seed rows re-summarised (refuses on a mismatch)
    from json_gaps import json_gaps

    gaps = json_gaps(json.loads(json.dumps(transfer_study.resummarise(data))), data)   # last bits: the CPU's
    assert not gaps, gaps[:5]


def test_resummarise_refuses_when_the_per_seed_code_changed(data, monkeypatch):
    hashes = transfer_study.source_hashes()
    moved = {**hashes, "transfer_study per-seed functions": "0" * 64}
    monkeypatch.setattr(transfer_study, "source_hashes", lambda: moved)
    with pytest.raises(transfer_study.StudyRefused, match="per-seed functions"):
        transfer_study.resummarise(data)
    moved = {**hashes, transfer_study.SUMMARY_HASH: "0" * 64}         # summary code only: re-derived, not refused
    assert transfer_study.resummarise(data)["source_sha256"] == moved


def test_shuffled_rows_summarise_in_declaration_order(data):
    rows = [{**r, "arms": dict(reversed(list(r["arms"].items())))} for r in reversed(data["per_seed"])]
    again = json.loads(json.dumps(transfer_study.summarise(rows)))
    assert [f["arm"] for f in again["frontier"]] == [f["arm"] for f in data["frontier"]]
    assert again["differences"] == data["differences"]


def test_committed_study_holds_its_primary_endpoint(data):
    assert data["primary_endpoint"]["arm"] == "final_only" and data["primary_endpoint"]["metric"] == "tf_final"


def test_transfer_study_findings_and_figure(data):
    from litrepro import figcheck

    lines = transfer_study.findings(data)
    assert lines[1].startswith("Primary endpoint") and all(lines)
    assert any(("learning-rate frontier" in x and "the waypoint gate is" in x)
               or x.startswith("The waypoint gate gets no frontier interval") for x in lines)
    assert figcheck.outside_canvas(transfer_study.plot(data)) == []


def test_effect_study_holm_rows_recompute_and_widen():
    from litrepro.waypoint import effect_holm, effect_study

    data = effect_study.load()
    rows = effect_holm.adjusted_rows(data)
    assert len(rows) == len(data["differences"])
    for r in rows:
        assert r["holm_low"] <= r["ci95_low"] + 1e-12 * abs(r["ci95_low"]) and r["holm_high"] >= r["ci95_high"] - 1e-12 * abs(r["ci95_high"])
        if r["holm_reads"] != "no detectable difference":
            assert r["raw_reads"] == r["holm_reads"]                     # Holm never detects what raw does not
    lines = effect_holm.findings(data)
    assert lines[0].startswith(f"Of the effect study's {len(rows)} paired intervals")
    broken = json.loads(json.dumps(data))
    broken["per_seed"][0]["waypoint.validation_nll"] += 1.0            # a per-seed value that no longer gives the mean
    with pytest.raises(ValueError, match="do not give the study's mean"):
        effect_holm.adjusted_rows(broken)


def test_frontier_gap_equivalent_rate_and_chord_errors_by_hand():
    """Hand-made sweep: TF = m / 4 and NLL change = m^2 (convex in TF); an arm at TF 0.25 with NLL 0.9."""
    mults = sorted(transfer.FRONTIER)
    rows = []
    for seed, shift in ((1, 0.0), (2, 0.1), (3, -0.1)):
        arms = {a: {"tf_final": m / 4, "nll_change": m * m} for m, a in transfer.FRONTIER.items()}
        arms["waypoint"] = {"tf_final": 0.25, "nll_change": 0.9 + shift}
        rows.append({"seed": seed, "arms": arms})
    front, extra = transfer_study._frontier_rows(rows, list(rows[0]["arms"]))
    (row,) = front
    assert row["arm"] == "waypoint" and row["nll_gap_to_frontier"]["mean"] == pytest.approx(0.9 - 1.0)
    assert row["equivalent_lr_multiplier"]["mean"] == pytest.approx(1.0)
    assert transfer_study._plain_frontier(rows, "waypoint")["nll_gap_to_frontier"] == pytest.approx([-0.1, 0.0, -0.2])
    chords = transfer_study._chord_errors(rows, list(rows[0]["arms"]))
    k = mults.index(1.0)
    m0, m1 = mults[k - 1], mults[k + 1]
    expected = 1.0 - (m0 * m0 + (m1 * m1 - m0 * m0) * (1.0 - m0) / (m1 - m0))     # a convex curve lies below its chords
    assert chords[1.0] == pytest.approx([expected] * 3) and expected < 0
