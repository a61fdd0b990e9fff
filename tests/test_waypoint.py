"""Unit tests of the waypoint_opd mechanisms and corpus guards."""

from __future__ import annotations

import hashlib

import pytest
import torch

from litrepro.waypoint import corpus as corpus_mod
from litrepro.waypoint import diagnostics
from litrepro.waypoint import experiment as ex
from litrepro.waypoint.config import HAMLET_SHA256, WaypointConfig
from litrepro.waypoint.model import EOS, VOCAB, BytePolicy, flat_parameters, nats_per_byte
from litrepro.waypoint.opd import (ZeroGateError, compute_gate, opd_loss, sample_rollouts, straightness_gate,
                                   scoring_path, student_logps, waypoint_logps, waypoint_logps_stacked,
                                   waypoint_logps_streamed)
from litrepro.waypoint.teacher import parity_reward, reinforce_step, run_teacher_rl

CFG = WaypointConfig()


def load(path, **kw):
    args = dict(expected_sha256=HAMLET_SHA256, max_bytes=CFG.max_corpus_bytes, train_end=CFG.train_end,
                validation_end=CFG.validation_end)
    return corpus_mod.load(path, **{**args, **kw})


# --- Corpus guards and splits -------------------------------------------------------------

def test_splits_match_the_seed(corpus_path):
    c = load(corpus_path)
    assert (c.size, c.train.numel(), c.validation.numel()) == (206895, 165516, 20689)
    assert c.train[-1].item() == ord("\r") and c.validation[0].item() == ord("\n")   # the split cuts a CRLF
    assert bytes(c.validation[-4:].tolist()).endswith(b"sigh")                       # ... and "sigh|t"
    assert c.test_tokens("final_evaluation").numel() == 20690


@pytest.mark.guards("oversized_corpus_rejected_before_read")
def test_oversized_corpus_refused_before_any_read(corpus_path):
    opened = []
    with pytest.raises(corpus_mod.CorpusTooLarge, match="206895 bytes, over max_corpus_bytes = 1000"):
        load(corpus_path, max_bytes=1000, opener=lambda *a: opened.append(a))
    assert opened == []
    assert corpus_mod.oversize_refused_before_read(corpus_path, 206894)
    assert not corpus_mod.oversize_refused_before_read(corpus_path, 206895)   # at the limit it is read
    # so oversized_corpus_rejected_before_read turns false when the limit lets the file be read


def test_wrong_hash_names_both_hashes(tmp_path):
    fake = tmp_path / "hamlet.txt"
    fake.write_bytes(b"x" * 300)
    actual = hashlib.sha256(b"x" * 300).hexdigest()
    with pytest.raises(corpus_mod.CorpusHashMismatch, match=f"sha256 {actual}, expected {HAMLET_SHA256}"):
        load(fake, train_end=100, validation_end=200)


def test_missing_corpus_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.delenv("LITREPRO_CORPUS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(corpus_mod.CorpusMissing, match="python -m litrepro fetch-corpus"):
        corpus_mod.resolve_path("")
    with pytest.raises(corpus_mod.CorpusMissing, match="from parameter 'corpus_path'"):
        corpus_mod.resolve_path(str(tmp_path / "nope.txt"))


def test_path_precedence(tmp_path, monkeypatch):
    param, env, cached = tmp_path / "p.txt", tmp_path / "e.txt", tmp_path / "litrepro" / corpus_mod.FILE_NAME
    for f in (param, env, cached):
        f.parent.mkdir(exist_ok=True)
        f.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("LITREPRO_CORPUS", str(env))
    assert corpus_mod.resolve_path(str(param)) == param
    assert corpus_mod.resolve_path("") == env
    monkeypatch.delenv("LITREPRO_CORPUS")
    assert corpus_mod.resolve_path("") == cached


def test_heldout_check_reads_the_access_log(corpus_path):
    c = load(corpus_path)
    g = torch.Generator().manual_seed(0)
    windows = c.train_windows(500, 64, g, "teacher_pretrain")
    assert windows.shape == (500, 64) and corpus_mod.heldout_untouched(c)
    assert max(hi for _, _, _, hi in c.accesses) <= CFG.train_end
    c.test_tokens("opd")                                           # test bytes read outside the final evaluation
    assert not corpus_mod.heldout_untouched(c)
    c2 = load(corpus_path)
    c2.train_windows(2, 8, g, "opd")
    c2.validation_windows(2, 8, g, "opd")                         # validation used by a training stage
    assert not corpus_mod.heldout_untouched(c2)


# --- Model --------------------------------------------------------------------------------

def test_cumulative_mean_logits_by_hand():
    policy = BytePolicy(4, torch.Generator().manual_seed(0))
    tokens = torch.tensor([[3, 7, 7]])
    logits = policy(tokens)
    h2 = policy.embed[[3, 7, 7]].mean(0)
    assert torch.allclose(logits[0, 2], policy.head_w @ h2 + policy.head_b, atol=1e-6)
    assert logits.shape == (1, 3, VOCAB)


def test_batched_waypoint_scoring_equals_separate_passes():
    g = torch.Generator().manual_seed(1)
    waypoints = [BytePolicy(8, g) for _ in range(3)]
    student = BytePolicy(8, g)
    rollouts = sample_rollouts(student, torch.randint(256, (5, 4), generator=g), 6, g)
    batched = waypoint_logps(waypoints, rollouts)
    p = rollouts.prompt_len
    for k, w in enumerate(waypoints):
        with torch.no_grad():
            reference = torch.log_softmax(w(rollouts.tokens), -1)[:, p - 1:-1]      # plain full pass
        expected = reference.gather(-1, rollouts.generated[..., None]).squeeze(-1)
        assert torch.allclose(batched[k], expected, atol=1e-5)
        assert torch.allclose(student_logps(w, rollouts), expected, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 7, 1024])
def test_streamed_and_stacked_scoring_agree(rows):
    """Both scoring paths (and the per-device choice) give the plain full-softmax scores, across block edges."""
    g = torch.Generator().manual_seed(11)
    waypoints = [BytePolicy(8, g) for _ in range(3)]
    rollouts = sample_rollouts(BytePolicy(8, g), torch.randint(256, (5, 4), generator=g), 6, g)
    streamed = waypoint_logps_streamed(waypoints, rollouts, rows=rows)
    stacked = waypoint_logps_stacked(waypoints, rollouts)
    p = rollouts.prompt_len
    with torch.no_grad():
        full = torch.stack([torch.log_softmax(w(rollouts.tokens), -1)[:, p - 1:-1] for w in waypoints])   # (3, B, N, V)
    reference = full.gather(-1, rollouts.generated.expand(3, -1, -1)[..., None]).squeeze(-1)
    assert streamed.shape == stacked.shape == (3, 5, 6)
    assert torch.allclose(streamed, reference, rtol=0, atol=1e-12)
    assert torch.allclose(stacked, reference, rtol=0, atol=1e-12)
    assert torch.equal(waypoint_logps(waypoints, rollouts), stacked)              # 30 positions on CPU: stacked
    assert scoring_path("cpu", 4 * 16) is waypoint_logps_stacked
    assert scoring_path("cpu", 16 * 16) is waypoint_logps_streamed
    assert scoring_path("cuda", 4096 * 16) is waypoint_logps_stacked


def test_nats_per_byte_matches_reference():
    g = torch.Generator().manual_seed(2)
    policy = BytePolicy(8, g)
    tokens = torch.randint(256, (21,), generator=g)
    total, count = 0.0, 0
    for chunk in (tokens[:8], tokens[8:16], tokens[16:]):
        with torch.no_grad():
            logp = torch.log_softmax(policy(chunk[None])[0], -1)
        total -= sum(float(logp[t, chunk[t + 1]]) for t in range(len(chunk) - 1))
        count += len(chunk) - 1
    assert nats_per_byte(policy, tokens, 8) == pytest.approx(total / count, rel=1e-6)


def test_rollouts_stop_at_eos_and_pad():
    g = torch.Generator().manual_seed(3)
    student = BytePolicy(8, g)
    with torch.no_grad():
        student.head_b[EOS] = 4.0                                  # EOS is likely: rollouts end early
    r = sample_rollouts(student, torch.randint(256, (64, 3), generator=g), 10, g)
    gen = r.generated
    ended = ((gen == EOS) & r.valid).any(1)
    assert ended.any() and diagnostics.natural_eos_count(gen, r.valid) == int(ended.sum())
    for b in range(64):
        valid = r.valid[b].tolist()
        n = sum(valid)
        assert valid == [True] * n + [False] * (10 - n)           # valid prefix, then padding
        if n < 10:
            assert gen[b, n - 1] == EOS and (gen[b, n:] == EOS).all()


# --- Teacher RL ---------------------------------------------------------------------------

def test_parity_reward():
    assert parity_reward(torch.tensor([0, 1, 2, 255, 254, EOS])).tolist() == [1, 0, 1, 0, 1, 0]


def test_reinforce_with_constant_reward_has_zero_gradient():
    """Centering: when every sample earns the same reward, the update is exactly zero."""
    g = torch.Generator().manual_seed(4)
    policy = BytePolicy(8, g)
    with torch.no_grad():
        policy.head_b[1::2] = -1e4                                 # only even tokens can be sampled
        policy.head_b[EOS] = -1e4
    before = flat_parameters(policy).clone()
    stats = reinforce_step(policy, torch.randint(256, (16, 4), generator=g), g,
                           torch.optim.SGD(policy.parameters(), lr=1.0))
    assert stats["mean_rule_reward"] == 1.0 and stats["gradient_norm"] == 0.0
    assert torch.equal(flat_parameters(policy), before)


def test_reinforce_raises_the_even_mass():
    g = torch.Generator().manual_seed(5)
    policy = BytePolicy(8, g)
    prompts = torch.randint(256, (64, 4), generator=g)

    def even_mass():
        with torch.no_grad():
            return float(torch.softmax(policy(prompts)[:, -1], -1)[:, :256:2].sum(-1).mean())

    start = even_mass()
    opt = torch.optim.SGD(policy.parameters(), lr=5.0)
    for _ in range(40):
        reinforce_step(policy, prompts, g, opt)
    assert even_mass() > start + 0.05


def test_teacher_rl_audit_and_frozen_snapshots():
    g = torch.Generator().manual_seed(6)
    teacher = BytePolicy(8, g)
    rl = run_teacher_rl(teacher, lambda n, gen: torch.randint(256, (n, 4), generator=gen), g, updates=8, rollouts=64,
                        lr=0.2, waypoint_steps=[0, 4, 8])
    audit = rl["audit"]
    assert (audit["updates"], audit["total_sampled_actions"], audit["checkpoint_steps"]) == (8, 512, [0, 4, 8])
    assert [x["step"] for x in rl["lineage"]] == [0, 4, 8]
    assert torch.equal(flat_parameters(rl["waypoints"][-1]), flat_parameters(teacher))
    assert not torch.equal(flat_parameters(rl["waypoints"][0]), flat_parameters(teacher))
    assert all(not p.requires_grad for w in rl["waypoints"] for p in w.parameters())
    # Distillation never writes to the waypoints ...
    ledger = ex.frozen_ledger(rl)
    student = BytePolicy(8, g)
    data = ex.distil(WaypointConfig(student_steps=3, opd_batch=4), student, rl["waypoints"], _FakeCorpus(g), g,
                     torch.device("cpu"), steps=3, gate_kind="straightness", stage="opd")
    assert len(data["history"]) == 3
    assert ledger.deltas() == {"waypoint_0": 0.0, "waypoint_4": 0.0, "waypoint_8": 0.0}
    # ... and the delta check would see it if something did.
    with torch.no_grad():
        rl["waypoints"][1].head_b += 1e-3
    assert ledger.deltas()["waypoint_4"] > 0


class _FakeCorpus:
    def __init__(self, g):
        self.g = g

    def train_windows(self, n, length, generator, stage):
        return torch.randint(256, (n, length), generator=generator)


# --- Gate, scale, loss --------------------------------------------------------------------

def test_straightness_gate_by_hand():
    lp = torch.tensor([[0.0, 0.0, 0.0, -1.0], [1.0, 2.0, 0.0, -1.0], [2.0, 0.0, 0.0, -3.0]])  # (3, 4)
    assert straightness_gate(lp).tolist() == [1.0, 0.0, 1.0, 1.0]    # straight, round trip, 0/0, straight
    lp = torch.tensor([[0.0], [3.0], [1.0]])
    assert straightness_gate(lp).item() == pytest.approx(1 / 5)
    random = torch.randn(3, 1000, generator=torch.Generator().manual_seed(7))
    g = straightness_gate(random)
    assert ((g >= 0) & (g <= 1)).all()
    assert torch.equal(compute_gate("final_only", random), torch.ones(1000))


def test_loss_value_zero_gradient_formula_and_scale_identity():
    g = torch.Generator().manual_seed(8)
    logp = -torch.rand(3, 5, generator=g) * 4
    final = -torch.rand(3, 5, generator=g) * 4
    gate = torch.rand(3, 5, generator=g)
    valid = torch.rand(3, 5, generator=g) > 0.3
    x = logp.clone().requires_grad_(True)
    loss, stats = opd_loss(x, final, gate, valid, gate_mass=0.8)
    loss.backward()
    assert loss.item() == 0.0
    assert stats["batch_scale"] * stats["mean_gate"] == pytest.approx(0.8, abs=1e-6)
    assert stats["valid_tokens"] == int(valid.sum())
    s = 0.8 / gate[valid].mean()
    expected = torch.zeros_like(logp)
    expected[valid] = -s * gate[valid] * (final[valid] - logp[valid]) / valid.sum()
    assert torch.allclose(x.grad, expected, atol=1e-6)


def test_zero_gate_batch_is_refused():
    with pytest.raises(ZeroGateError, match="gate 0"):
        opd_loss(torch.zeros(2, 3, requires_grad=True), torch.zeros(2, 3), torch.zeros(2, 3),
                 torch.ones(2, 3, dtype=torch.bool), gate_mass=0.8)
    assert ex.zero_gate_refused()


def test_extreme_finite_padding_gives_zero_gradient():
    assert ex.padding_fixture(0)["extreme_finite_padding_zero_gradients"]
    # Masking by multiplication instead of selection would not survive the same padding:
    # the padded advantage overflows to inf, and inf * 0 is NaN.
    lp = torch.tensor([-1.0, -3e38], requires_grad=True)
    advantage = (torch.tensor([-0.5, 3e38]) - lp).detach()          # [0.5, inf]
    (-(torch.tensor([1.0, 0.0]) * advantage * (lp - lp.detach())).sum()).backward()
    assert torch.isnan(lp.grad[1])


# --- Diagnostics --------------------------------------------------------------------------

def test_deflate_flags_repetition_not_text_or_noise():
    assert diagnostics.is_degenerate(b"ab" * 40, min_ratio=0.5, min_bytes=32)
    text = b"To be, or not to be, that is the question: Whether 'tis nobler"
    assert not diagnostics.is_degenerate(text, min_ratio=0.5, min_bytes=32)
    noise = bytes(torch.randint(256, (64,), generator=torch.Generator().manual_seed(9)).tolist())
    assert not diagnostics.is_degenerate(noise, min_ratio=0.5, min_bytes=32)
    assert not diagnostics.is_degenerate(b"a" * 10, min_ratio=0.5, min_bytes=32)   # too short to judge


def test_group_bytes_drop_eos_and_padding():
    gen = torch.tensor([[65, EOS, EOS], [66, 67, 68]])
    valid = torch.tensor([[True, True, False], [True, True, True]])
    assert diagnostics.group_bytes(gen, valid) == b"ABCD"


def test_distillation_is_deterministic_and_on_policy():
    outs = []
    for _ in range(2):
        g = torch.Generator().manual_seed(10)
        student, waypoints = BytePolicy(8, g), [BytePolicy(8, g) for _ in range(3)]
        d = ex.distil(WaypointConfig(), student, waypoints, _FakeCorpus(g), g, torch.device("cpu"), steps=2,
                      gate_kind="straightness", stage="opd")
        outs.append((d["history"], flat_parameters(student)))
        assert d["on_policy_gap"] < 1e-5 and d["generated_tokens"] > 0
    assert outs[0][0] == outs[1][0] and torch.equal(outs[0][1], outs[1][1])


def test_fetch_corpus_verifies_before_writing(corpus_path, tmp_path):
    """fetch-corpus over a file:// URL (no network in tests): verified copy written, bad hash writes nothing."""
    dest = tmp_path / "cache" / "hamlet.txt"
    assert corpus_mod.fetch_corpus(dest, url=corpus_path.resolve().as_uri()) == dest
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == HAMLET_SHA256
    other = tmp_path / "other.txt"
    with pytest.raises(corpus_mod.CorpusHashMismatch, match="nothing written"):
        corpus_mod.fetch_corpus(other, url=corpus_path.resolve().as_uri(), expected_sha256="0" * 64)
    assert not other.exists()
