"""Independent recomputations of every ``waypoint_opd`` stage, on the run's own data.

Each check re-derives one stage from what the run recorded (its seed, generator
states, prompts, rollouts, gates and parameters) with code of its own: plain
loops over tokens or rollouts, gradients written out by hand or taken by autograd
of a reference forward pass, and the byte ranges of the seed contract.  Nothing
here calls the stage code it guards (``opd``, ``teacher``, ``model.pretrain``,
``model.nats_per_byte``, the corpus' window draws, ``diagnostics``), so a bug in a
stage shows as a gap between the stage and its reference.  Every check returns its
boolean and its measured gap; the gaps go to ``beyond_seed_metrics``.

The reference forward pass of a BytePolicy with tensors (E, W, b) on tokens x:

    h_t = (1 / (t + 1)) sum_{j<=t} E[x_j],    log pi(y | x_<=t) = (W h_t + b)_y - logsumexp(W h_t + b)

Stages and their checks (tolerances are relative to the size of what is compared):

- splits: sha256 of the train, validation and test bytes the run used equal the
  sha256 of the file's contract ranges (``splits_match_contract_ranges``);
- NLL: every reported NLL equals a reference over the contract bytes, and one
  window equals a plain per-position loop (``nll_matches_reference``);
- teacher pretraining: replayed from the seed with a reference initialisation,
  window draws and Adam (``teacher_pretraining_replayed``);
- teacher RL, per update: prompts and actions re-drawn from the recorded generator
  state (``teacher_rl_rollouts_replayed``), the audited reward is the parity of the
  sampled actions (``teacher_rl_reward_is_parity``), the update equals
  -lr * a REINFORCE gradient written out rollout by rollout
  (``teacher_rl_update_matches_reference``), the waypoints are the policy after the
  steps their lineage names (``waypoints_are_rl_states``), and the final waypoint
  puts more mass on even first bytes than waypoint 0 (``final_waypoint_raises_even_mass``);
- OPD, per recorded step: prompts and tokens re-drawn (``opd_rollouts_replayed``),
  sampling log-probs are the student's (``opd_sampled_logps_match_student``), gates
  and mean gate from a loop over the waypoint log-probs (``opd_gates_match_reference``),
  the update equals -lr * the gated gradient with A = log p_final - log p_student
  (``opd_update_matches_reference``), and the rollout counts
  (``rollout_diagnostics_match_reference``);
- the student starts as an exact copy of waypoint 0 (``student_starts_at_waypoint0``);
- comparison arms: paired start, generators and prompts
  (``comparison_arms_paired``), gate kind per arm (``comparison_gate_kinds_match_arms``),
  first update per arm and a trained arm that moved (``comparison_first_updates_match_reference``)
  and each arm's evaluation (``comparison_evaluations_match_reference``);
- every figure the results report equals the audit's reference for it
  (``reported_figures_match_audit``, checked in ``experiment.collect_results``).

Recording costs little (generator states, prompts, rollouts, the student's tensors around
each recorded step); what the audit calls cost beside ``experiment.run(cfg)`` is measured by
``benchmarks/waypoint_audit_cost.py`` (its output is not committed).
"""

from __future__ import annotations

import hashlib
import math
import zlib

import torch
from torch import Tensor

#: The seed contract's byte ranges (``dataset.byte_ranges`` in ``004_c13841344b469e56.txt``).
CONTRACT_RANGES = {"train": (0, 165516), "validation": (165516, 186205), "test": (186205, 206895)}
CONTRACT_SHA256 = "31584c19795779431b5933499a45b9cecb03e8c246b6ea7e245a2b6d65e8e784"
#: The gate each comparison arm must use (written out again here, not read from ``experiment``).
ARM_GATES = {"waypoint": "straightness", "final_only": "final_only", "shuffled": "shuffled"}
#: The comparison arms' named gate stream: seed + 23, a fresh ``torch.Generator`` per arm (written out again
#: here, not read from ``experiment``); the shuffled arm's permutations are re-drawn from it.
GATE_STREAM = 23
EOS = 256
#: Largest relative gap between a stage and its float64 reference that counts as equal.
REL_TOL = 1e-8
#: Largest gate difference that counts as equal: a gate is chord / path, and on a token whose
#: waypoint path is ~1e-6 nats long, float64 rounding of the log-probs moves it by ~1e-10.
GATE_TOL = 1e-8


# --- Reference primitives ---------------------------------------------------------------------

def tensors(policy) -> dict[str, Tensor]:
    """Detached CPU copies of a policy's tensors (E, W, b) by name (every reference runs on the CPU)."""
    return {name: t.detach().to("cpu", copy=True) for name, t in policy.state_dict().items()}


def trainable(policy) -> list[str]:
    return [name for name, _ in policy.named_parameters()]


def sha256_tensor(t: Tensor) -> str:
    return hashlib.sha256(t.detach().cpu().contiguous().numpy().tobytes()).hexdigest()


def sha256_state(state: dict[str, Tensor]) -> str:
    digest = hashlib.sha256()
    for name in sorted(state):
        digest.update(name.encode())
        digest.update(state[name].detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def contract_split(data: bytes, name: str) -> Tensor:
    lo, hi = CONTRACT_RANGES[name]
    return torch.frombuffer(bytearray(data[lo:hi]), dtype=torch.uint8).long()


def read_contract(path) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def ref_windows(split: Tensor, n: int, length: int, generator: torch.Generator) -> Tensor:
    """(n, length) windows of ``split`` at uniform starts, one start per window (the draw's contract)."""
    starts = torch.randint(split.numel() - length + 1, (n,), generator=generator)
    return torch.stack([split[s:s + length] for s in starts.tolist()])


def ref_logits(p: dict[str, Tensor], tokens: Tensor) -> Tensor:
    """(B, T) -> (B, T, V): the causal mean of embeddings, then W h + b."""
    e = p["embed"][tokens]                                                    # (B, T, D)
    h = e.cumsum(1) / torch.arange(1, tokens.shape[1] + 1, dtype=e.dtype)[None, :, None]
    return h @ p["head_w"].T + p["head_b"]                                    # (B, T, V)


def ref_token_logp(p: dict[str, Tensor], context: Tensor, y: int) -> Tensor:
    """log pi(y | context) for one 1-D context, written out (differentiable in p)."""
    h = p["embed"][context].sum(0) / context.numel()                          # (D,)
    z = p["head_w"] @ h + p["head_b"]                                         # (V,)
    m = z.max().detach()
    return z[y] - (m + torch.log(torch.exp(z - m).sum()))


_NLL_CACHE: dict[tuple, float] = {}


def ref_split_nll(p: dict[str, Tensor], tokens: Tensor, window: int) -> float:
    """Nats per predicted byte: non-overlapping windows from the start, the remainder (>= 2 bytes)
    as a last window; the first byte of each window is not scored.  Cached by the sha256 of the
    policy's tensors and of the tokens (the comparison's ``none`` arm is the initial student);
    :func:`audit_run` empties the cache, so one seed's audit never reuses another run's work."""
    key = (sha256_state(p), sha256_tensor(tokens), window)
    if key not in _NLL_CACHE:
        if len(_NLL_CACHE) > 64:
            _NLL_CACHE.clear()
        _NLL_CACHE[key] = _split_nll(p, tokens, window)
    return _NLL_CACHE[key]


def _split_nll(p: dict[str, Tensor], tokens: Tensor, window: int) -> float:
    total, count = 0.0, 0
    with torch.no_grad():
        for lo in range(0, tokens.numel(), window):                             # one window at a time: in cache
            chunk = tokens[lo:lo + window]
            if chunk.numel() < 2:
                continue
            z = ref_logits(p, chunk[None])[0, :-1]                               # (L - 1, V)
            total -= float((z.gather(1, chunk[1:, None])[:, 0] - torch.logsumexp(z, 1)).sum())
            count += chunk.numel() - 1
    return total / count


def plain_window_nll(p: dict[str, Tensor], chunk: Tensor) -> float:
    """The same on one window, position by position: a running embedding sum, W h + b and a
    logsumexp written out for each position."""
    total, running = 0.0, torch.zeros_like(p["embed"][0])
    with torch.no_grad():
        for t, (x, y) in enumerate(zip(chunk[:-1].tolist(), chunk[1:].tolist())):
            running += p["embed"][x]
            z = p["head_w"] @ (running / (t + 1)) + p["head_b"]                  # (V,)
            m = float(z.max())
            total -= float(z[y]) - (m + math.log(float(torch.exp(z - m).sum())))
    return total / (chunk.numel() - 1)


def straightness(l0: float, lm: float, lf: float) -> float:
    """chord / path of the waypoint path, 0/0 -> 1."""
    path = abs(lm - l0) + abs(lf - lm)
    return min(abs(lf - l0) / path, 1.0) if path > 0 else 1.0


def even_mass(p: dict[str, Tensor], prompts: Tensor) -> float:
    """Mean over prompts (n, P) of the exact P(first sampled byte is even)."""
    with torch.no_grad():
        probs = torch.softmax(ref_logits(p, prompts)[:, -1], -1)               # (n, V)
        return float(probs[:, 0:256:2].sum(1).mean())


def sampled_parity(p: dict[str, Tensor], prompts: Tensor, generator: torch.Generator) -> float:
    """Share of even bytes among one first byte drawn after each prompt (one draw per prompt)."""
    with torch.no_grad():
        probs = torch.softmax(ref_logits(p, prompts)[:, -1], -1)
    actions = torch.multinomial(probs, 1, generator=generator)[:, 0].tolist()
    return sum(1 for a in actions if a < EOS and a % 2 == 0) / len(actions)


def train_prompt_even_mass(p: dict[str, Tensor], train: Tensor, prompt_len: int) -> float:
    """P(even first byte) after a random train prompt: exact over byte frequencies for one-byte
    prompts, else the mean over 4096 fixed train windows."""
    if prompt_len == 1:
        freq = torch.bincount(train, minlength=256).to(torch.float64)
        freq = freq / freq.sum()
        with torch.no_grad():
            probs = torch.softmax(ref_logits(p, torch.arange(256)[:, None])[:, -1], -1)
        return float((freq * probs[:, 0:256:2].sum(1)).sum())
    return even_mass(p, ref_windows(train, 4096, prompt_len, torch.Generator().manual_seed(0)))


def _rel_gap(actual: dict[str, Tensor], expected: dict[str, Tensor]) -> float:
    """max |actual - expected| over every tensor, relative to max |expected| (absolute when that is 0)."""
    diff = max(float((actual[k] - expected[k]).abs().max()) for k in expected)
    scale = max(float(expected[k].abs().max()) for k in expected)
    return diff / scale if scale > 0 else diff


def _sub(a: dict[str, Tensor], b: dict[str, Tensor], names) -> dict[str, Tensor]:
    return {k: a[k] - b[k] for k in names}


# --- Splits and NLL ---------------------------------------------------------------------------

def check_splits(corpus, test_tokens: Tensor, data: bytes) -> dict:
    """sha256 of the bytes each split holds against the file's contract byte ranges."""
    used = {"train": corpus.train, "validation": corpus.validation, "test": test_tokens}
    bad = []
    for name, tokens in used.items():
        lo, hi = CONTRACT_RANGES[name]
        ok = tokens.numel() == hi - lo and int(tokens.min()) >= 0 and int(tokens.max()) < 256
        if not ok or hashlib.sha256(tokens.to(torch.uint8).numpy().tobytes()).hexdigest() != \
                hashlib.sha256(data[lo:hi]).hexdigest():
            bad.append(name)
    ok = not bad and hashlib.sha256(data).hexdigest() == CONTRACT_SHA256
    return {"checks": {"splits_match_contract_ranges": ok}, "gaps": {"split_hash_mismatches": len(bad)}}


def check_nll(cfg, data: bytes, *, student_init, student, nll: dict, nats_per_byte) -> dict:
    """Every reported NLL against :func:`ref_split_nll` on the contract bytes; the pipeline's scorer
    (``nats_per_byte``) on one window against :func:`plain_window_nll`."""
    val, test = contract_split(data, "validation"), contract_split(data, "test")
    init, final = tensors(student_init), tensors(student)
    expected = {"baseline_validation": ref_split_nll(init, val, cfg.eval_window),
                "final_validation": ref_split_nll(final, val, cfg.eval_window),
                "final_test": ref_split_nll(final, test, cfg.eval_window)}
    gap = max(abs(nll[k] - v) / v for k, v in expected.items())
    window = val[:cfg.eval_window]
    plain = plain_window_nll(final, window)
    window_gap = abs(nats_per_byte(student, window.to(student.embed.device), cfg.eval_window) - plain) / plain
    return {"checks": {"nll_matches_reference": gap <= REL_TOL and window_gap <= REL_TOL},
            "gaps": {"nll_relative_gap": gap, "nll_one_window_relative_gap": window_gap},
            "reference": {f"{k}_nll": v for k, v in expected.items()}}


# --- Teacher pretraining ----------------------------------------------------------------------

def _nll_gradient(p: dict[str, Tensor], windows: Tensor) -> dict[str, Tensor]:
    """Gradient of the mean next-byte NLL over windows (B, T), written out (no autograd):
        dL/dz_bt = (softmax(z_bt) - onehot(x_b,t+1)) / (B (T - 1)),  dL/dW = sum dz h^T,  dL/db = sum dz,
        dL/dh_bt = W^T dz_bt,  dL/dE[x_bj] += sum_{t >= j} dL/dh_bt / (t + 1)   (h_bt: mean of E[x_b0..x_bt])."""
    b, t = windows.shape
    counts = torch.arange(1, t + 1, dtype=torch.float64)[None, :, None]          # (1, T, 1)
    h = (p["embed"][windows].cumsum(1) / counts)[:, :-1]                          # (B, T - 1, D)
    z = h @ p["head_w"].T + p["head_b"]                                           # (B, T - 1, V)
    dz = torch.softmax(z, -1)
    dz.scatter_add_(2, windows[:, 1:, None], -torch.ones(b, t - 1, 1, dtype=dz.dtype))
    dz /= b * (t - 1)
    dh = torch.cat([dz @ p["head_w"], torch.zeros(b, 1, h.shape[2], dtype=dz.dtype)], 1)   # (B, T, D)
    de = (dh / counts).flip(1).cumsum(1).flip(1)                                  # (B, T, D): sum over t >= j
    embed = torch.zeros_like(p["embed"]).index_add_(0, windows.reshape(-1), de.reshape(-1, de.shape[2]))
    return {"embed": embed, "head_w": dz.reshape(-1, dz.shape[2]).T @ h.reshape(-1, h.shape[2]),
            "head_b": dz.sum((0, 1))}


def check_teacher_pretraining(cfg, rl: dict, data: bytes) -> dict:
    """Replay Section 2 from the seed: initialisation E ~ N(0, embed_std^2), W ~ N(0, 0.01 / D),
    b = 0; ``teacher_steps`` Adam steps (betas 0.9, 0.999, eps 1e-8) of mean next-byte NLL on
    ``pretrain_batch`` train windows, its gradient written out by :func:`_nll_gradient`.  The result must be the pre-RL teacher, and the generator
    must be left where the RL started."""
    train = contract_split(data, "train")
    g = torch.Generator().manual_seed(cfg.seed)
    v, d = 257, cfg.width
    p = {"embed": torch.randn(v, d, generator=g, dtype=torch.float64) * cfg.embed_std,
         "head_w": torch.randn(v, d, generator=g, dtype=torch.float64) / d ** 0.5 * 0.1,
         "head_b": torch.zeros(v, dtype=torch.float64)}
    names = ["embed", "head_w"] + (["head_b"] if cfg.output_bias else [])
    init = {k: t.clone() for k, t in p.items()}
    m = {k: torch.zeros_like(p[k]) for k in names}
    s = {k: torch.zeros_like(p[k]) for k in names}
    b1, b2, eps = 0.9, 0.999, 1e-8
    for step in range(1, cfg.teacher_steps + 1):
        windows = ref_windows(train, cfg.pretrain_batch, cfg.window, g)         # (B, T)
        grads = _nll_gradient(p, windows)
        for k in names:
            gr = grads[k]
            m[k] = b1 * m[k] + (1 - b1) * gr
            s[k] = b2 * s[k] + (1 - b2) * gr * gr
            denom = s[k].sqrt() / math.sqrt(1 - b2 ** step) + eps
            p[k] = p[k] - cfg.pretrain_lr / (1 - b1 ** step) * m[k] / denom
    teacher = {k: t.cpu() for k, t in tensors(rl["initial"]).items()}
    gap = _rel_gap(_sub(teacher, init, p), _sub(p, init, p))                     # relative to the movement
    same_state = torch.equal(g.get_state(), rl["start_state"])
    return {"checks": {"teacher_pretraining_replayed": gap <= REL_TOL and same_state},
            "gaps": {"teacher_pretraining_relative_gap": gap}}


# --- Teacher RL -------------------------------------------------------------------------------

def _reinforce_reference(p: dict[str, Tensor], names: list[str], prompts: Tensor, actions: list[int]) -> dict:
    """The REINFORCE gradient of L = -(1/n) sum_i A_i log pi(a_i | x_i), A_i = R_i - mean R,
    R = 1[a < 256 and a even], written out rollout by rollout:
        dL/dz_i = -(A_i / n) (onehot(a_i) - pi_i),  dL/dW += dz_i h_i^T,  dL/db += dz_i,
        dL/dE[x_ij] += W^T dz_i / P   (h_i = mean_j E[x_ij])."""
    n, plen = prompts.shape
    rewards = [1.0 if a < EOS and a % 2 == 0 else 0.0 for a in actions]
    mean = sum(rewards) / n
    grad = {k: torch.zeros_like(p[k]) for k in names}
    for i in range(n):
        x = prompts[i]
        h = p["embed"][x].sum(0) / plen                                           # (D,)
        z = p["head_w"] @ h + p["head_b"]                                         # (V,)
        pi = torch.softmax(z, 0)
        dz = -pi
        dz[actions[i]] += 1.0
        dz = -(rewards[i] - mean) / n * dz                                        # (V,)
        grad["head_w"] += torch.outer(dz, h)
        if "head_b" in grad:
            grad["head_b"] += dz
        dh = p["head_w"].T @ dz / plen                                            # (D,)
        for j in x.tolist():
            grad["embed"][j] += dh
    return {"grad": grad, "mean_reward": mean}


def _reinforce_vectorised(p: dict[str, Tensor], names: list[str], prompts: Tensor, actions: list[int]) -> dict:
    """:func:`_reinforce_reference`'s gradient for all rollouts at once (updates after the first)."""
    n, plen = prompts.shape
    a = torch.tensor(actions)
    rewards = ((a < EOS) & (a % 2 == 0)).to(torch.float64)                           # (n,)
    h = p["embed"][prompts].sum(1) / plen                                         # (n, D)
    dz = torch.softmax(h @ p["head_w"].T + p["head_b"], 1)                         # (n, V)
    dz[torch.arange(n), a] -= 1.0
    dz = dz * ((rewards - rewards.mean()) / n)[:, None]                           # -(A / n)(onehot - pi)
    dh = dz @ p["head_w"] / plen                                                  # (n, D)
    grad = {"embed": torch.zeros_like(p["embed"]).index_add_(0, prompts.reshape(-1), dh.repeat_interleave(plen, 0)),
            "head_w": dz.T @ h, "head_b": dz.sum(0)}
    return {"grad": {k: grad[k] for k in names}, "mean_reward": float(rewards.mean())}


def check_teacher_rl(cfg, rl: dict, data: bytes) -> dict:
    """Every RL update, from the recorded state before it (see the module docstring).  The first
    update's gradient is the plain loop over rollouts; later ones use the same formula vectorised."""
    train = contract_split(data, "train")
    trace, audit = rl["trace"], rl["audit"]
    names = trainable(rl["initial"])
    replay_bad, reward_gap, update_gap, norm_gap = 0, 0.0, 0.0, 0.0
    for k, hist in enumerate(audit["history"]):
        before, after = trace["states"][k], trace["states"][k + 1]
        prompts, actions = trace["prompts"][k].cpu(), rl["actions"][k].cpu()
        g = torch.Generator().set_state(trace["generator_states"][k])
        redrawn = ref_windows(train, cfg.teacher_rl_rollouts, cfg.prompt_len, g)
        with torch.no_grad():
            probs = torch.softmax(ref_logits({x: t.cpu() for x, t in before.items()}, redrawn)[:, -1], -1)
        resampled = torch.multinomial(probs, 1, generator=g)[:, 0]
        replay_bad += int(not (torch.equal(redrawn, prompts) and torch.equal(resampled, actions)))
        acts = actions.tolist()
        parity = sum(1 for a in acts if a < EOS and a % 2 == 0) / len(acts)
        reward_gap = max(reward_gap, abs(hist["mean_rule_reward"] - parity))
        ref = (_reinforce_reference if k == 0 else _reinforce_vectorised)(
            {x: t.cpu() for x, t in before.items()}, names, prompts, acts)
        expected = {x: -cfg.teacher_rl_lr * ref["grad"][x] for x in names}
        update_gap = max(update_gap, _rel_gap(_sub({x: t.cpu() for x, t in after.items()},
                                                    {x: t.cpu() for x, t in before.items()}, names), expected))
        norm = math.sqrt(sum(float((ref["grad"][x] ** 2).sum()) for x in names))
        norm_gap = max(norm_gap, abs(hist["gradient_norm"] - norm) / norm if norm > 0 else abs(hist["gradient_norm"]))
    steps = [x["step"] for x in rl["lineage"]]
    states = trace["states"]
    on_path = (len(steps) == len(rl["waypoints"]) and all(0 <= s < len(states) for s in steps)
               and all(sha256_state(tensors(w)) == sha256_state(states[s]) for w, s in zip(rl["waypoints"], steps))
               and sha256_state(tensors(rl["initial"])) == sha256_state(states[0]))
    gain = (train_prompt_even_mass(tensors(rl["waypoints"][-1]), train, cfg.prompt_len)
            - train_prompt_even_mass(tensors(rl["waypoints"][0]), train, cfg.prompt_len))
    complete = len(audit["history"]) == cfg.teacher_rl_updates == len(trace["states"]) - 1
    return {"checks": {"teacher_rl_rollouts_replayed": replay_bad == 0,
                       "teacher_rl_reward_is_parity": reward_gap == 0.0,
                       "teacher_rl_update_matches_reference": update_gap <= REL_TOL and norm_gap <= REL_TOL and complete,
                       "waypoints_are_rl_states": on_path,
                       "final_waypoint_raises_even_mass": gain > 0},
            "gaps": {"teacher_rl_updates_not_replayed": replay_bad, "teacher_rl_reward_gap": reward_gap,
                     "teacher_rl_update_relative_gap": update_gap, "teacher_rl_gradient_norm_relative_gap": norm_gap,
                     "final_waypoint_even_mass_gain": gain}}


# --- On-policy distillation -------------------------------------------------------------------

def _replay_rollouts(p: dict[str, Tensor], prompts: Tensor, n_new: int, g: torch.Generator) -> tuple[Tensor, Tensor]:
    """Re-draw a batch: every row draws each step from softmax(W h + b) (temperature 1); a row is
    valid up to and including its first EOS, padded with EOS after it."""
    b, plen = prompts.shape
    rows = [prompts[i].tolist() for i in range(b)]
    alive = [True] * b
    valid = [[] for _ in range(b)]
    with torch.no_grad():
        for t in range(n_new):
            h = torch.stack([p["embed"][torch.tensor(r)].sum(0) / len(r) for r in rows])   # (B, D)
            probs = torch.softmax(h @ p["head_w"].T + p["head_b"], -1)
            draw = torch.multinomial(probs, 1, generator=g)[:, 0].tolist()
            for i in range(b):
                valid[i].append(alive[i])
                rows[i].append(draw[i] if alive[i] else EOS)
                alive[i] = alive[i] and draw[i] != EOS
    return torch.tensor(rows), torch.tensor(valid)


def _generated_logps(p: dict[str, Tensor], tokens: Tensor, plen: int) -> Tensor:
    """(B, N) log pi(y_t | prompt, y_<t) of the generated tokens, by the reference forward pass."""
    z = ref_logits(p, tokens)[:, plen - 1:-1]                                   # (B, N, V)
    return z.gather(2, tokens[:, plen:, None])[..., 0] - torch.logsumexp(z, 2)


def _opd_reference(p: dict[str, Tensor], names: list[str], waypoints: list[dict[str, Tensor]], tokens: Tensor,
                   valid: Tensor, plen: int, gate_kind: str, used_gate: Tensor, gate_mass: float,
                   gate_stream: torch.Generator | None = None) -> dict:
    """Per valid token (b, t), a loop over Python floats: l_k = log pi_k(y_bt) for the three
    waypoints, the gate (straightness, 1, or, for ``shuffled``, the straightness gates permuted by
    the permutation re-drawn from ``gate_stream``, the arm's named stream: token i of the n valid
    ones, in row-major order, takes the gate of token randperm(n)[i]), A = l_f - l_student; then
        grad = autograd of -(s / n) sum g A log pi_student(y_bt),  s = gate_mass / mean g,
    with log pi_student from the reference forward pass."""
    leaves = {k: p[k].clone().requires_grad_(k in names) for k in p}
    student = _generated_logps(leaves, tokens, plen)                             # (B, N), with grad
    with torch.no_grad():
        lw = [_generated_logps(w, tokens, plen).tolist() for w in waypoints]     # 3 x (B, N)
    ls = student.detach().tolist()
    positions = valid.nonzero().tolist()
    straight, adv = [], []
    for b, t in positions:
        l0, lm, lf = lw[0][b][t], lw[1][b][t], lw[2][b][t]
        straight.append(straightness(l0, lm, lf))
        adv.append(lf - ls[b][t])
    used = [float(used_gate[b, t]) for b, t in positions]
    if gate_kind == "straightness":
        gates = straight
    elif gate_kind == "final_only":
        gates = [1.0] * len(positions)
    elif gate_stream is None:                                                    # shuffled without its stream
        raise ValueError("the shuffled gate's reference needs the arm's named gate stream")
    else:                                                                        # shuffled: re-drawn from its stream
        gates = [straight[j] for j in torch.randperm(len(positions), generator=gate_stream).tolist()]
    mean_gate = sum(gates) / len(gates)
    scale = gate_mass / mean_gate
    weights = torch.zeros_like(student)
    for (b, t), g, a in zip(positions, gates, adv):
        weights[b, t] = g * a
    loss = -scale / len(gates) * (weights * student).sum()
    grads = torch.autograd.grad(loss, [leaves[k] for k in names])
    gate_gap = max(abs(u - e) for u, e in zip(used, gates))
    return {"grad": dict(zip(names, grads)), "mean_gate": mean_gate, "gate_gap": gate_gap,
            "logps": [ls[b][t] for b, t in positions], "positions": positions}


def check_opd_steps(cfg, records: list[dict], waypoints, *, data: bytes, gate_kind: str, prefix: str = "opd",
                    student_init=None, student_final=None, gate_stream: torch.Generator | None = None) -> dict:
    """Every recorded OPD step against the references above; with ``student_init``/``student_final``
    also the chain (first step starts at the initial student, each step where the last ended,
    the last where the student is now).  ``gate_stream``, a fresh copy of the arm's named gate
    stream, re-draws the ``shuffled`` gate's permutations (``records`` must then start at step 0)."""
    train = contract_split(data, "train")
    wps = [{k: t.cpu() for k, t in tensors(w).items()} for w in waypoints]
    replay_bad, logp_gap, gate_gap, mean_gate_gap, update_gap, norm_gap = 0, 0.0, 0.0, 0.0, 0.0, 0.0
    for rec in records:
        before = {k: t.cpu() for k, t in rec["before"].items()}
        after = {k: t.cpu() for k, t in rec["after"].items()}
        names = rec["trainable"]
        r = rec["rollouts"]
        tokens, valid, plen = r.tokens.cpu(), r.valid.cpu(), r.prompt_len
        g = torch.Generator().set_state(rec["generator_state"])
        prompts = ref_windows(train, cfg.opd_batch, cfg.prompt_len, g)
        ref_tokens, ref_valid = _replay_rollouts(before, prompts, cfg.max_new_tokens, g)
        replay_bad += int(not (torch.equal(prompts, rec["prompts"].cpu()) and torch.equal(ref_tokens, tokens)
                               and torch.equal(ref_valid, valid)))
        ref = _opd_reference(before, names, wps, tokens, valid, plen, gate_kind, rec["gate"].cpu(), cfg.gate_mass,
                             gate_stream)
        sample = r.sample_logp.cpu()
        logp_gap = max(logp_gap, max(abs(float(sample[b, t]) - x) for (b, t), x in zip(ref["positions"], ref["logps"])))
        gate_gap = max(gate_gap, ref["gate_gap"])
        mean_gate_gap = max(mean_gate_gap, abs(rec["stats"]["mean_gate"] - ref["mean_gate"]),
                            abs(rec["stats"]["batch_scale"] * ref["mean_gate"] - cfg.gate_mass))
        expected = {k: -cfg.student_lr * ref["grad"][k] for k in names}
        update_gap = max(update_gap, _rel_gap(_sub(after, before, names), expected))
        norm = math.sqrt(sum(float((ref["grad"][k] ** 2).sum()) for k in names))
        norm_gap = max(norm_gap, abs(rec["stats"]["gradient_norm"] - norm) / (norm if norm > 0 else 1.0))
    chain = True
    if student_init is not None and records:
        states = [tensors(student_init)] + [x for rec in records for x in (rec["before"], rec["after"])]
        if student_final is not None:
            states.append(tensors(student_final))
        chain = all(sha256_state(states[i]) == sha256_state(states[i + 1]) for i in range(0, len(states) - 1, 2))
    return {"checks": {f"{prefix}_rollouts_replayed": replay_bad == 0,
                       f"{prefix}_sampled_logps_match_student": logp_gap <= 1e-10,
                       f"{prefix}_gates_match_reference": gate_gap <= GATE_TOL and mean_gate_gap <= GATE_TOL,
                       f"{prefix}_update_matches_reference": update_gap <= REL_TOL and norm_gap <= REL_TOL and chain},
            "gaps": {f"{prefix}_steps_not_replayed": replay_bad, f"{prefix}_sampled_logp_max_gap": logp_gap,
                     f"{prefix}_gate_max_gap": gate_gap, f"{prefix}_mean_gate_max_gap": mean_gate_gap,
                     f"{prefix}_update_relative_gap": update_gap, f"{prefix}_gradient_norm_relative_gap": norm_gap}}


def check_rollout_diagnostics(cfg, distillation: dict) -> dict:
    """generated_tokens, natural_eos_rollouts and rejected_diagnostic_groups, recounted with loops
    over the recorded rollouts (a row's tokens are real up to and including its first EOS)."""
    tokens, eos, flagged, valid_bad = 0, 0, 0, 0
    for rec in distillation["records"]:
        r = rec["rollouts"]
        gen = r.tokens[:, r.prompt_len:].cpu().tolist()
        group = bytearray()
        for row, mask in zip(gen, r.valid.cpu().tolist()):
            real = []
            for tok in row:
                real.append(tok)
                if tok == EOS:
                    break
            tokens += len(real)
            eos += int(real[-1] == EOS)
            group += bytes(x for x in real if x < EOS)
            valid_bad += int(mask != [True] * len(real) + [False] * (len(row) - len(real)))
        flagged += int(len(group) >= cfg.deflate_min_bytes
                       and len(zlib.compress(bytes(group), 9)) / len(group) < cfg.deflate_min_ratio)
    complete = len(distillation["records"]) == len(distillation["history"])
    gap = (abs(tokens - distillation["generated_tokens"]) + abs(eos - distillation["natural_eos_rollouts"])
           + abs(flagged - distillation["rejected_diagnostic_groups"]) + valid_bad)
    return {"checks": {"rollout_diagnostics_match_reference": complete and gap == 0},
            "gaps": {"rollout_count_gap": gap},
            "reference": {"generated_tokens": tokens, "natural_eos_rollouts": eos, "rejected_diagnostic_groups": flagged}}


def check_student_start(cfg, rl: dict, student_init) -> dict:
    """The distilled student starts as a copy of waypoint 0 (``student_start: waypoint0``)."""
    if cfg.student_start != "waypoint0":
        return {"checks": {}, "gaps": {}}
    s = sha256_state(tensors(student_init))
    ok = s == sha256_state(tensors(rl["initial"])) and s == sha256_state(tensors(rl["waypoints"][0])) \
        and cfg.waypoint_steps[0] == 0
    return {"checks": {"student_starts_at_waypoint0": ok}, "gaps": {}}


# --- Everything of one seed's run (Sections 1-6) ----------------------------------------------

def _merge(*parts: dict) -> dict:
    out = {"checks": {}, "gaps": {}, "reference": {}}
    for part in parts:
        out["checks"].update(part["checks"])
        out["gaps"].update(part["gaps"])
        out["reference"].update(part.get("reference", {}))
    return out


def audit_run(cfg, *, corpus, rl: dict, student_init, student, distillation: dict, nll: dict,
              test_tokens: Tensor) -> dict:
    """Every check of Sections 1-6 on this run's recorded data: ``{"checks": {...}, "gaps": {...}}``."""
    from litrepro.waypoint.model import nats_per_byte

    _NLL_CACHE.clear()                                  # shared with this seed's audit_comparison only
    data = read_contract(corpus.path)
    opd = check_opd_steps(cfg, distillation["records"], rl["waypoints"], data=data, gate_kind=cfg.gate,
                          student_init=student_init, student_final=student)
    opd["checks"]["opd_gates_match_reference"] &= distillation["gate_kind"] == cfg.gate      # the configured gate
    out = _merge(check_splits(corpus, test_tokens, data),
                 check_nll(cfg, data, student_init=student_init, student=student, nll=nll,
                           nats_per_byte=nats_per_byte),
                 check_teacher_pretraining(cfg, rl, data),
                 check_teacher_rl(cfg, rl, data),
                 check_student_start(cfg, rl, student_init),
                 opd,
                 check_rollout_diagnostics(cfg, distillation))
    names = trainable(student)
    init, final = tensors(student_init), tensors(student)
    delta = math.sqrt(sum(float(((final[k] - init[k]) ** 2).sum()) for k in names))
    out["reference"] = {**out.get("reference", {}), "parameter_delta_l2": delta,
                        }
    return out


def reported_figures_check(metrics: dict, beyond: dict, references: dict) -> dict:
    """``reported_figures_match_audit``: each figure the results report (metrics, and the comparison's
    figures in ``beyond_seed_metrics``) equals the audit's reference for it (1e-8 relative)."""
    gap = 0.0
    for name, ref in references.items():
        value = metrics[name] if name in metrics else beyond.get(name)
        if value is None:                                   # a figure the results do not report
            gap = max(gap, 1.0)
            continue
        gap = max(gap, abs(value - ref) / max(abs(ref), 1.0))
    return {"checks": {"reported_figures_match_audit": gap <= REL_TOL}, "gaps": {"reported_figures_max_gap": gap}}


# --- Comparison arms (Section 7) --------------------------------------------------------------

def _matched_reference(p: dict[str, Tensor], names: list[str], windows: Tensor) -> dict[str, Tensor]:
    leaves = {k: p[k].clone().requires_grad_(k in names) for k in p}
    z = ref_logits(leaves, windows)[:, :-1]
    loss = -(z.gather(2, windows[:, 1:, None])[..., 0] - torch.logsumexp(z, 2)).mean()
    return dict(zip(names, torch.autograd.grad(loss, [leaves[k] for k in names])))


def audit_comparison(cfg, comparison: dict, student_init, waypoints, corpus, seed: int) -> dict:
    """The arms' checks; ``arms`` holds, per arm, its own booleans (the effect study records them)."""
    data = read_contract(corpus.path)
    records = comparison["records"]
    arms = records["arms"]
    start = sha256_state(tensors(student_init))
    train_state = sha256_tensor(torch.Generator().manual_seed(seed + 13).get_state())
    gate_state = sha256_tensor(torch.Generator().manual_seed(seed + GATE_STREAM).get_state())
    opd_arms = [a for a in arms if a in ARM_GATES]
    draws = {arms[a]["draws_sha256"] for a in opd_arms}
    per_arm: dict[str, dict[str, bool]] = {}
    gaps: dict[str, float] = {}
    val = contract_split(data, "validation")
    val_sha = sha256_tensor(val)
    g = torch.Generator().manual_seed(seed + 7)
    eval_prompts = ref_windows(val, cfg.comparison_eval_prompts, cfg.prompt_len, g)
    prompts_ok = torch.equal(eval_prompts, records["eval_prompts"].cpu())
    reference: dict[str, float] = {}

    def evaluation_gap(name: str, p: dict[str, Tensor], nll: float | None) -> float:
        """Reported minus reference: exact P(even), the sampled parity rate (draws from seed + 11), NLL."""
        reported = comparison[name]
        ref = {"expected_parity_rate": even_mass(p, eval_prompts),
               "sampled_parity_rate": sampled_parity(p, eval_prompts, torch.Generator().manual_seed(seed + 11))}
        if nll is not None:
            ref["validation_nll"] = nll
        reference.update({f"comparison_{name}_{k}": v for k, v in ref.items()})
        return max(abs(reported[k] - v) / (v if k == "validation_nll" else 1.0) for k, v in ref.items())

    eval_gap = evaluation_gap("teacher_final", {k: t.cpu() for k, t in tensors(waypoints[-1]).items()}, None)
    for arm, rec in arms.items():
        paired = (rec["start_sha256"] == start and rec["train_generator_sha256"] == train_state
                  and rec["gate_generator_sha256"] == gate_state and (arm not in ARM_GATES or len(draws) == 1))
        if arm in ARM_GATES:
            gates_ok = rec["gate_kind"] == ARM_GATES[arm] and bool(comparison[arm]["mean_gate"])
            if arm == "final_only":
                # within GATE_TOL, not exactly: on CUDA a mean of unit gates can land an ulp below 1
                gates_ok = gates_ok and all(abs(x - 1.0) <= GATE_TOL for x in comparison[arm]["mean_gate"])
            first = check_opd_steps(cfg, rec["records"], waypoints, data=data, gate_kind=ARM_GATES[arm],
                                    prefix="arm", gate_stream=torch.Generator().manual_seed(seed + GATE_STREAM))
            gates_ok = gates_ok and first["checks"]["arm_gates_match_reference"]
            update_ok = first["checks"]["arm_update_matches_reference"] and first["checks"]["arm_rollouts_replayed"] \
                and sha256_state(rec["records"][0]["before"]) == start
            gaps[f"comparison_{arm}_first_update_relative_gap"] = first["gaps"]["arm_update_relative_gap"]
            gaps[f"comparison_{arm}_gate_max_gap"] = first["gaps"]["arm_gate_max_gap"]
        elif arm == "matched_compute":
            gates_ok = rec["gate_kind"] is None and not comparison[arm]["mean_gate"]
            m = rec["first"]
            names = m["trainable"]
            before = {k: t.cpu() for k, t in m["before"].items()}
            gr = _matched_reference(before, names, m["windows"].cpu())
            gap = _rel_gap(_sub({k: t.cpu() for k, t in m["after"].items()}, before, names),
                           {k: -cfg.student_lr * gr[k] for k in names})
            gt = torch.Generator().set_state(m["generator_state"])
            redrawn = ref_windows(contract_split(data, "train"), cfg.opd_batch, cfg.prompt_len + cfg.max_new_tokens, gt)
            update_ok = gap <= REL_TOL and torch.equal(redrawn, m["windows"].cpu()) and sha256_state(m["before"]) == start
            gaps["comparison_matched_compute_first_update_relative_gap"] = gap
        else:                                                                    # none: no update at all
            gates_ok = rec["gate_kind"] is None and not comparison[arm]["mean_gate"]
            update_ok = sha256_state(rec["final"]) == start
        final = {k: t.cpu() for k, t in rec["final"].items()}
        if arm != "none" and cfg.comparison_steps > 0:                           # a trained arm has moved
            update_ok = update_ok and sha256_state(final) != start
        # Validation NLL: recomputed in full for the waypoint arm (which checks the arms' scorer) and
        # the none arm (the initial student, already scored for the baseline); for every arm, the
        # policy, bytes and window it was scored with must be its final policy, the contract's
        # validation bytes and eval_window.
        full = arm in ("waypoint", "none") or "waypoint" not in arms
        arm_gap = evaluation_gap(arm, final, ref_split_nll(final, val, cfg.eval_window) if full else None)
        scored = rec["evaluated"]
        if (scored["policy_sha256"], scored["tokens_sha256"], scored["window"]) != (
                sha256_state(final), val_sha, cfg.eval_window):
            arm_gap = max(arm_gap, 1.0)
        eval_gap = max(eval_gap, arm_gap)
        per_arm[arm] = {"paired": paired, "gate_kind_matches_arm": gates_ok, "first_update_matches_reference": update_ok,
                        "evaluation_matches_reference": prompts_ok and arm_gap <= REL_TOL}
    checks = {"comparison_arms_paired": all(a["paired"] for a in per_arm.values()),
              "comparison_gate_kinds_match_arms": all(a["gate_kind_matches_arm"] for a in per_arm.values()),
              "comparison_first_updates_match_reference": all(a["first_update_matches_reference"]
                                                              for a in per_arm.values()),
              "comparison_evaluations_match_reference": prompts_ok and eval_gap <= REL_TOL}
    gaps["comparison_unpaired_arms"] = sum(not a["paired"] for a in per_arm.values())
    gaps["comparison_evaluation_max_gap"] = eval_gap
    return {"checks": checks, "gaps": gaps, "arms": per_arm, "reference": reference}
