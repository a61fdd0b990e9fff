"""The ``waypoint_opd`` run, one function per notebook section."""

from __future__ import annotations

import copy
import hashlib

import torch

from litrepro.waypoint import audit
from litrepro.waypoint import corpus as corpus_mod
from litrepro.waypoint import diagnostics
from litrepro.waypoint.config import WaypointConfig
from litrepro.waypoint.model import BytePolicy, nats_per_byte, next_byte_nll, pretrain
from litrepro.waypoint.opd import (ZeroGateError, opd_loss, opd_step, sample_rollouts, straightness_gate, student_logps,
                                   surrogate_gradient_check, waypoint_logps)
from litrepro.waypoint.teacher import FrozenLedger, parity_reward, replay_lineage, run_teacher_rl

audit_run = audit.audit_run
reported_figures_check = audit.reported_figures_check
audit_comparison = audit.audit_comparison

#: The comparison's arms: waypoint-gated OPD, final-only OPD (g = 1), OPD with the waypoint gates
#: shuffled among tokens (same mean), the matched-compute control (as many updates, no teacher) and none.
ARMS = ("waypoint", "final_only", "shuffled", "matched_compute", "none")
GATE_OF_ARM = {"waypoint": "straightness", "final_only": "final_only", "shuffled": "shuffled"}


# --- Section 1: corpus ----------------------------------------------------------------------

def load_corpus(cfg: WaypointConfig) -> corpus_mod.Corpus:
    path = corpus_mod.resolve_path(cfg.corpus_path)
    return corpus_mod.load(path, expected_sha256=cfg.corpus_sha256, max_bytes=cfg.max_corpus_bytes,
                           train_end=cfg.train_end, validation_end=cfg.validation_end)


# --- Section 2: policies --------------------------------------------------------------------

def pretrained_policy(cfg: WaypointConfig, corpus: corpus_mod.Corpus, generator: torch.Generator,
                      device: torch.device, *, steps: int, stage: str) -> tuple[BytePolicy, list[float]]:
    """A fresh BytePolicy after ``steps`` next-byte NLL steps on train windows."""
    policy = BytePolicy(cfg.width, generator, embed_std=cfg.embed_std, output_bias=cfg.output_bias).to(device)
    losses = pretrain(policy, lambda: corpus.train_windows(cfg.pretrain_batch, cfg.window, generator, stage).to(device),
                      steps=steps, lr=cfg.pretrain_lr)
    return policy, losses


# --- Section 3: teacher RL ------------------------------------------------------------------

def _prompt_sampler(cfg: WaypointConfig, corpus: corpus_mod.Corpus, device: torch.device, stage: str):
    def prompts(n: int, generator: torch.Generator) -> torch.Tensor:
        return corpus.train_windows(n, cfg.prompt_len, generator, stage).to(device)              # (n, P)
    return prompts


def teacher_rl(cfg: WaypointConfig, teacher: BytePolicy, corpus: corpus_mod.Corpus, generator: torch.Generator,
               device: torch.device) -> dict:
    return run_teacher_rl(teacher, _prompt_sampler(cfg, corpus, device, "teacher_rl"), generator,
                          updates=cfg.teacher_rl_updates, rollouts=cfg.teacher_rl_rollouts, lr=cfg.teacher_rl_lr,
                          waypoint_steps=list(cfg.waypoint_steps))


def replay(cfg: WaypointConfig, rl: dict, corpus: corpus_mod.Corpus, device: torch.device) -> dict:
    """Replay the teacher RL from its stored start (``waypoint_lineage_replayed``)."""
    return replay_lineage(rl, _prompt_sampler(cfg, corpus, device, "lineage_replay"))


def initial_student(cfg: WaypointConfig, rl: dict, corpus: corpus_mod.Corpus, device: torch.device,
                    seed: int, *, start: str | None = None) -> BytePolicy:
    """The student before distillation.

    ``waypoint0``: a trainable copy of the pre-RL teacher (waypoint 0).
    ``independent``: its own initialisation and ``specialist_steps`` next-byte NLL
    steps, drawn from a generator of its own (seed + 17), so the teacher's RL and
    every later draw are the same for both starts.
    """
    start = start or cfg.student_start
    if start == "waypoint0":
        return copy.deepcopy(rl["initial"]).requires_grad_(True).train()
    if start == "independent":
        return pretrained_policy(cfg, corpus, torch.Generator().manual_seed(seed + 17), device,
                                 steps=cfg.specialist_steps, stage="student_pretrain")[0]
    raise ValueError(f"unknown student start {start!r} (known: waypoint0, independent)")


# --- Section 4-5: distillation with diagnostics ---------------------------------------------

def distil(cfg: WaypointConfig, student: BytePolicy, waypoints: list[BytePolicy], corpus: corpus_mod.Corpus,
           generator: torch.Generator, device: torch.device, *, steps: int, gate_kind: str, stage: str,
           gate_generator: torch.Generator | None = None, record: int | None = None, draws=None) -> dict:
    """``steps`` OPD updates; per-step stats plus the rollout diagnostics.

    ``records`` keeps, for the first ``record`` steps (every step when None), what
    :mod:`litrepro.waypoint.audit` recomputes the step from: the generator state before
    its prompts, the prompts, rollouts and gates, and the student's tensors before and
    after the update.  ``draws_sha256`` hashes every prompt drawn (the arms' pairing); ``draws``,
    a ``hashlib`` object, is updated with them too (one hash over an arm's chunks).
    """
    optimizer = torch.optim.SGD(student.parameters(), lr=cfg.student_lr)
    history, gaps, eos, tokens, flagged, ratios = [], [], 0, 0, 0, []
    records, own = [], hashlib.sha256()
    for step in range(steps):
        keep = record is None or step < record
        state = generator.get_state() if keep else None
        prompts = corpus.train_windows(cfg.opd_batch, cfg.prompt_len, generator, stage).to(device)
        for digest in (own, draws) if draws is not None else (own,):
            digest.update(prompts.cpu().numpy().tobytes())
        before, trace = (audit.tensors(student), {}) if keep else (None, None)
        stats, rollouts, gap = opd_step(student, waypoints, prompts, optimizer, generator,
                                        max_new_tokens=cfg.max_new_tokens, gate_kind=gate_kind, gate_mass=cfg.gate_mass,
                                        gate_generator=gate_generator, trace=trace)
        if keep:
            records.append({"generator_state": state, "prompts": prompts, "rollouts": rollouts, "gate": trace["gate"],
                            "before": before, "after": audit.tensors(student), "stats": dict(stats),
                            "trainable": audit.trainable(student)})
        history.append({"step": step, **stats})
        gaps.append(gap)
        eos += diagnostics.natural_eos_count(rollouts.generated, rollouts.valid)
        tokens += int(rollouts.valid.sum())
        data = diagnostics.group_bytes(rollouts.generated, rollouts.valid)
        ratios.append(diagnostics.deflate_ratio(data))
        flagged += diagnostics.is_degenerate(data, min_ratio=cfg.deflate_min_ratio, min_bytes=cfg.deflate_min_bytes)
    return {"history": history, "on_policy_gap": max(gaps) if gaps else 0.0, "natural_eos_rollouts": eos,
            "generated_tokens": tokens, "rejected_diagnostic_groups": int(flagged), "deflate_ratios": ratios,
            "gate_kind": gate_kind, "records": records, "draws_sha256": own.hexdigest()}


def matched_compute(cfg: WaypointConfig, student: BytePolicy, corpus: corpus_mod.Corpus, generator: torch.Generator,
                    device: torch.device, *, steps: int, stage: str, record: dict | None = None,
                    draws=None) -> list[float]:
    """The matched-compute control: ``steps`` SGD updates at ``student_lr`` with no teacher at all.

    Each update is next-byte NLL on ``opd_batch`` train windows of
    ``prompt_len + max_new_tokens`` bytes, the token count of one OPD batch.
    ``record``, when given, gets ``draws_sha256`` (every window drawn) and, unless it
    already holds one, ``first``: the first update's generator state, windows and the
    student's tensors before and after (for :mod:`litrepro.waypoint.audit`).  ``draws``, a
    ``hashlib`` object, is updated with every window too.
    """
    optimizer = torch.optim.SGD(student.parameters(), lr=cfg.student_lr)
    losses, own = [], hashlib.sha256()
    for _ in range(steps):
        keep = record is not None and "first" not in record
        state = generator.get_state() if keep else None
        windows = corpus.train_windows(cfg.opd_batch, cfg.prompt_len + cfg.max_new_tokens, generator, stage).to(device)
        for digest in (own, draws) if draws is not None else (own,):
            digest.update(windows.cpu().numpy().tobytes())
        before = audit.tensors(student) if keep else None
        loss = next_byte_nll(student, windows)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if keep:
            record["first"] = {"generator_state": state, "windows": windows, "before": before,
                               "after": audit.tensors(student), "trainable": audit.trainable(student)}
    if record is not None:
        record["draws_sha256"] = own.hexdigest()
    return losses


def text_deflate_quantiles(corpus: corpus_mod.Corpus, lengths: tuple[int, ...] = (64, 256)) -> dict[int, list[str]]:
    """DEFLATE ratio quantiles (1%, 50%, 99%) of 2000 random train windows per length, rounded to 2 digits."""
    import numpy as np

    data = bytes(corpus.train.to(torch.uint8).tolist())
    q = diagnostics.ratio_quantiles(data, list(lengths), np.random.default_rng(0))
    return {length: [f"{x:.2f}" for x in values] for length, values in q.items()}


# --- Section 6: checks on the mechanism itself ----------------------------------------------

def padding_fixture(seed: int, extreme: float = 3.0e38) -> dict:
    """``extreme_finite_padding_zero_gradients``: padding filled with +-3e38 changes nothing.

    Two batches share their valid tokens; in one, every padded entry of the
    student log-probs, final log-probs and gates holds a huge finite value.  The
    gradients must be identical and exactly zero on the padding.
    """
    g = torch.Generator().manual_seed(seed)
    valid = torch.tensor([[True, True, True, False], [True, True, False, False]])
    base = [-torch.rand(2, 4, generator=g) * 5, -torch.rand(2, 4, generator=g) * 5, torch.rand(2, 4, generator=g)]

    def grads(fill: bool):
        student, final, gate = (torch.where(valid, x, extreme * (-1) ** i) if fill else x.clone()
                                for i, x in enumerate(base))
        student.requires_grad_(True)
        loss, _ = opd_loss(student, final, gate, valid, gate_mass=0.8)
        loss.backward()
        return student.grad

    clean, padded = grads(False), grads(True)
    return {"extreme_finite_padding_zero_gradients": bool(torch.equal(clean, padded) and (padded[~valid] == 0).all()
                                                          and torch.isfinite(padded).all())}


def zero_gate_refused() -> bool:
    """``zero_waypoint_gate_still_rejected``: an all-zero gate batch raises ZeroGateError."""
    logp = torch.full((1, 3), -1.0, requires_grad=True)
    try:
        opd_loss(logp, torch.zeros(1, 3), torch.zeros(1, 3), torch.ones(1, 3, dtype=torch.bool), gate_mass=0.8)
    except ZeroGateError:
        return True
    return False


def frozen_ledger(rl: dict) -> FrozenLedger:
    """The waypoints, the only frozen policies that distillation reads (and so could write to)."""
    return FrozenLedger({f"waypoint_{x['step']}": w for x, w in zip(rl["lineage"], rl["waypoints"])})


def frozen_report(ledger: FrozenLedger, after_opd: dict[str, float]) -> dict:
    """Deltas in the seed's two fields.

    ``frozen_rl_snapshot_parameter_deltas_l2``: each waypoint at the end of the notebook.
    ``frozen_teacher_parameter_deltas_l2``: the final waypoint, the teacher of the advantage,
    after the 2-step distillation and at the end (after the comparison's arms).
    """
    now = ledger.deltas()
    final = list(ledger.modules)[-1]
    return {"frozen_rl_snapshot_parameter_deltas_l2": list(now.values()),
            "frozen_teacher_parameter_deltas_l2": [after_opd[final], now[final]]}


def surrogate_check(cfg: WaypointConfig, student: BytePolicy, waypoints: list[BytePolicy], corpus: corpus_mod.Corpus,
                    device: torch.device, seed: int) -> dict:
    """``surrogate_gradient_matches_analytic`` on one OPD batch of a copy of ``student``."""
    g = torch.Generator().manual_seed(seed + 19)
    prompts = corpus.train_windows(cfg.opd_batch, cfg.prompt_len, g, "surrogate_check").to(device)
    return surrogate_gradient_check(copy.deepcopy(student), waypoints, prompts, g, max_new_tokens=cfg.max_new_tokens,
                                    gate_mass=cfg.gate_mass)


# --- Section 7: beyond the seed -------------------------------------------------------------

@torch.no_grad()
def parity_rate(policy: BytePolicy, prompts: torch.Tensor, generator: torch.Generator) -> dict:
    """First-byte parity of samples after ``prompts`` (the teacher's reward), sampled and exact."""
    probs = torch.softmax(policy(prompts)[:, -1], -1)                                      # (n, V)
    actions = torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(1)
    even_mass = probs[:, :256:2].sum(-1).mean()                                           # P(even byte), exactly
    return {"sampled_parity_rate": float(parity_reward(actions).mean()), "expected_parity_rate": float(even_mass)}


def compare_arms(cfg: WaypointConfig, student_init: BytePolicy, waypoints: list[BytePolicy],
                 corpus: corpus_mod.Corpus, device: torch.device, seed: int, *, arms: tuple[str, ...] = ARMS,
                 steps: int | None = None, eval_every: int = 0) -> dict:
    """Every arm from the same student, with the same prompts and samples (paired by seed).

    With ``eval_every`` = k > 0, each arm also gets ``curve``: its validation NLL and
    exact P(even first byte) after updates 0, k, 2k, ..., steps (the last point is the
    arm's final figures).  The arm is trained in chunks of k updates; plain SGD keeps no
    state between chunks and the evaluations draw from their own generators, so the
    final figures are the same with or without the curve.
    """
    steps = cfg.comparison_steps if steps is None else steps
    eval_gen = torch.Generator().manual_seed(seed + 7)
    prompts = corpus.validation_windows(cfg.comparison_eval_prompts, cfg.prompt_len, eval_gen, "comparison_eval").to(device)
    validation = corpus.validation_tokens("comparison_eval").to(device)

    last = {}

    def evaluate(policy: BytePolicy) -> dict:
        last["evaluated"] = {"policy_sha256": audit.sha256_state(audit.tensors(policy)),   # what was scored
                             "tokens_sha256": audit.sha256_tensor(validation), "window": cfg.eval_window}
        return {**parity_rate(policy, prompts, torch.Generator().manual_seed(seed + 11)),
                "validation_nll": nats_per_byte(policy, validation, last["evaluated"]["window"])}

    chunk = eval_every if eval_every > 0 else max(steps, 1)
    marks = sorted({*range(0, steps, chunk), steps})                                     # update counts evaluated
    out = {"teacher_final": parity_rate(waypoints[-1], prompts, torch.Generator().manual_seed(seed + 11)),
           "records": {"eval_prompts": prompts, "arms": {}}}
    for arm in arms:
        if arm not in ARMS:
            raise ValueError(f"unknown arm {arm!r} (known: {', '.join(ARMS)})")
        student = copy.deepcopy(student_init)
        train_gen = torch.Generator().manual_seed(seed + 13)                                 # same prompts/samples start
        gate_gen = torch.Generator().manual_seed(seed + 23)
        rec = {"start_sha256": audit.sha256_state(audit.tensors(student)),                  # what pairs the arms
               "train_generator_sha256": audit.sha256_tensor(train_gen.get_state()),
               "gate_generator_sha256": audit.sha256_tensor(gate_gen.get_state()), "gate_kind": None, "records": []}
        draws, matched = hashlib.sha256(), {}
        history, curve = [], []
        for lo, hi in zip([0, *marks[:-1]], marks):
            if hi > lo and arm in GATE_OF_ARM:
                part = distil(cfg, student, waypoints, corpus, train_gen, device, steps=hi - lo,
                              gate_kind=GATE_OF_ARM[arm], stage="comparison", gate_generator=gate_gen,
                              record=1 if lo == 0 else 0, draws=draws)
                history += [{**h, "step": h["step"] + lo} for h in part["history"]]
                rec["gate_kind"] = part["gate_kind"]
                rec["records"] += part["records"]
            elif hi > lo and arm == "matched_compute":
                matched_compute(cfg, student, corpus, train_gen, device, steps=hi - lo, stage="comparison",
                                record=matched, draws=draws)
            if eval_every > 0:
                curve.append({"step": hi, **evaluate(student)})
        out[arm] = {**(curve[-1] if curve else evaluate(student)), "mean_gate": [h["mean_gate"] for h in history]}
        rec.update(draws_sha256=draws.hexdigest(), first=matched.get("first"), final=audit.tensors(student),
                   evaluated=last["evaluated"])
        out["records"]["arms"][arm] = rec
        out[arm].pop("step", None)
        if eval_every > 0:
            out[arm]["curve"] = curve
    return out


# --- Section 9: calibration experiments ----------------------------------------------------

@torch.no_grad()
def gate_legs(cfg: WaypointConfig, student: BytePolicy, waypoints: list[BytePolicy], corpus: corpus_mod.Corpus,
              device: torch.device, seed: int, rl_actions: torch.Tensor, *, rollouts: int = 64) -> dict:
    """Why the mean gate is what it is: the two legs of the waypoint path on the student's tokens.

    For each valid token, leg 1 is d1 = l^m - l^0 and leg 2 is d2 = l^f - l^m, so
    g = |d1 + d2| / (|d1| + |d2|), and g = 1 exactly when the legs agree in sign.
    ``independent_legs_gate`` is the mean gate after multiplying d2 by random signs:
    what the gate would average if the legs moved independently of each other.

    The tokens are also split by whether the RL *sampled* that byte as an action
    in leg 1 (updates 1..4), leg 2 (5..8), both or neither (``rl["actions"]``):
    the share of tokens and the mean gate of each class.
    """
    g = torch.Generator().manual_seed(seed + 29)
    prompts = corpus.train_windows(rollouts, cfg.prompt_len, g, "gate_legs").to(device)
    r = sample_rollouts(student, prompts, cfg.max_new_tokens, g)
    lp = waypoint_logps(waypoints, r)[:, r.valid]                                        # (3, n_valid)
    d1, d2 = lp[1] - lp[0], lp[2] - lp[1]                                                # (n_valid,) each leg
    signs = torch.randint(2, d2.shape, generator=g).to(d2) * 2 - 1                        # (n_valid,) +-1
    shuffled = torch.stack([lp[0], lp[0] + d1, lp[0] + d1 + signs * d2])
    advantage = lp[2] - student_logps(student, r)[r.valid]
    gate = straightness_gate(lp)                                                         # (n_valid,)
    mid = cfg.waypoint_steps[1]
    acts = rl_actions.to(device)                                                         # (updates, rollouts)
    y = r.generated[r.valid]                                                             # (n_valid,)
    in1 = torch.isin(y, acts[:mid].reshape(-1))
    in2 = torch.isin(y, acts[mid:cfg.waypoint_steps[2]].reshape(-1))
    classes = {"both": in1 & in2, "one": in1 ^ in2, "neither": ~in1 & ~in2}
    by_class = {}
    for name, m in classes.items():
        by_class[f"share_sampled_{name}"] = float(m.float().mean())
        by_class[f"gate_sampled_{name}"] = float(gate[m].mean()) if bool(m.any()) else float("nan")
    return {"tokens": int(d1.numel()), "leg_correlation": float(torch.corrcoef(torch.stack([d1, d2]))[0, 1]),
            "sign_agreement": float(((d1 * d2) > 0).float().mean()),
            "mean_gate": float(gate.mean()),
            "independent_legs_gate": float(straightness_gate(shuffled).mean()),
            "mean_abs_leg": float(torch.cat([d1, d2]).abs().mean()),
            "mean_abs_advantage": float(advantage.abs().mean()), **by_class}


# --- Results in the seed file's vocabulary --------------------------------------------------

CHECK_NOTES = {
    "actual_teacher_self_generation": "not built: the teacher never generates distillation data here; the seed's "
                                      "TF-OPD self-generation path is out of scope (false, as in the seed).",
    "original_sif_550_online_path_validated": "not built: the seed's SIF default-550 online path is not reproduced.",
    "undefined_tied_weight_policy_rejected": "not applicable: BytePolicy has separate input and output weights.",
}


def collect_results(cfg: WaypointConfig, *, corpus: corpus_mod.Corpus, nll: dict, student_delta: float,
                    distillation: dict, rl: dict, frozen: dict, padding: dict, zero_gate: bool, guard,
                    comparison: dict | None, execution: tuple[str, str], replayed: dict, surrogate: dict,
                    audits: tuple = ()) -> dict:
    """Metrics, per-seed history, teacher-RL audit and execution checks named as in the seed file.

    The lineage in ``fixed_teacher_rl_8x64_and_0_4_8_lineage`` is the one *found* by
    replaying the RL (``replayed``), not the configured one.  Our own checks beyond the
    seed's names go to ``extra_checks``: with them the checks of :mod:`litrepro.waypoint.audit`
    (``audits``: :func:`audit_run`'s and :func:`audit_comparison`'s results), whose gaps go to
    ``beyond_seed_metrics``.  ``comparison_arms`` records, per arm, its gate kind, mean gate,
    the hashes that pair it with the others and its own audit booleans.
    """
    deltas = frozen["frozen_rl_snapshot_parameter_deltas_l2"] + frozen["frozen_teacher_parameter_deltas_l2"]
    audit = rl["audit"]
    metrics = {
        "parameter_delta_l2": student_delta,
        "baseline_validation_nll": nll["baseline_validation"],
        "final_validation_nll": nll["final_validation"],
        "final_test_nll": nll["final_test"],
        "generated_tokens": distillation["generated_tokens"],
        "natural_eos_rollouts": distillation["natural_eos_rollouts"],
        "rejected_diagnostic_groups": distillation["rejected_diagnostic_groups"],
        "frozen_teacher_parameter_delta_l2": max(deltas),
    }
    checks = {
        "actual_teacher_self_generation": False,
        "actual_online_student_sampling": distillation["generated_tokens"] > 0 and distillation["on_policy_gap"] < 1e-4,
        "actual_parameters_changed": student_delta > 0,
        "frozen_teacher_unchanged": all(d == 0.0 for d in deltas),
        "heldout_bytes_not_used_for_training": corpus_mod.heldout_untouched(corpus),
        "no_pretrained_checkpoint_downloaded": guard.clean,
        "original_sif_550_online_path_validated": False,
        "extreme_finite_padding_zero_gradients": padding["extreme_finite_padding_zero_gradients"],
        "undefined_tied_weight_policy_rejected": "not_applicable",
        "oversized_corpus_rejected_before_read": corpus_mod.oversize_refused_before_read(corpus.path, corpus.size - 1),
        "fixed_teacher_rl_8x64_and_0_4_8_lineage": (
            audit["updates"] == 8 and audit["rollouts_per_update"] == 64
            and all(h["sampled_actions"] == 64 for h in audit["history"]) and len(audit["history"]) == 8
            and [x["step"] for x in rl["lineage"]] == [0, 4, 8] and replayed["replayed_steps"] == [0, 4, 8]),
        "zero_waypoint_gate_still_rejected": zero_gate,
    }
    extra_checks = {"surrogate_gradient_matches_analytic": surrogate["surrogate_gradient_matches_analytic"],
                    "waypoint_lineage_replayed": replayed["waypoint_lineage_replayed"]}
    beyond = {"on_policy_logprob_gap": distillation["on_policy_gap"], "network_calls": guard.network_calls,
              "surrogate_gradient_max_abs_difference": surrogate["max_abs_difference"],
              "surrogate_analytic_gradient_norm": surrogate["analytic_gradient_norm"]}
    arm_audit, references = {}, {}
    for part in audits:
        if part:
            extra_checks.update(part["checks"])
            beyond.update(part["gaps"])
            arm_audit.update(part.get("arms", {}))
            references.update(part.get("reference", {}))
    arms_record = {}
    if comparison:
        for arm, rec in comparison["records"]["arms"].items():
            gates = comparison[arm]["mean_gate"]
            arms_record[arm] = {"gate_kind": rec["gate_kind"], "mean_gate": sum(gates) / len(gates) if gates else None,
                                **{k: rec[k] for k in ("start_sha256", "train_generator_sha256",
                                                       "gate_generator_sha256", "draws_sha256")},
                                "checks": arm_audit.get(arm, {})}
    if comparison:
        for arm in (*ARMS, "teacher_final"):
            for key in ("sampled_parity_rate", "expected_parity_rate", "validation_nll"):
                if key in comparison[arm]:
                    beyond[f"comparison_{arm}_{key}"] = comparison[arm][key]
    if references:                                  # every reported figure against the audit's own
        reported = reported_figures_check(metrics, beyond, references)
        extra_checks.update(reported["checks"])
        beyond.update(reported["gaps"])
    return {
        "method": "waypoint_opd", "seed": cfg.seed, "metrics": metrics, "checks": checks, "check_notes": CHECK_NOTES,
        "extra_checks": extra_checks, "replayed_waypoint_steps": replayed["replayed_steps"],
        "beyond_seed_metrics": beyond, "comparison_arms": arms_record,
        "history": distillation["history"],
        "teacher_snapshot_lineage": rl["lineage"],
        "teacher_rl_reward": "first sampled byte ID is even; not language capability",
        "teacher_rl_audit": audit,
        **frozen,
        "curves": {"teacher_rl_reward": [h["mean_rule_reward"] for h in audit["history"]],
                   "comparison_mean_gate": comparison["waypoint"]["mean_gate"] if comparison else []},
        "execution_device": execution[0], "execution_accelerator": execution[1],
        "dataset_fingerprint": f"sha256:{corpus.sha256}",
    }


# --- The whole run, as the notebook runs it -------------------------------------------------

def run(cfg: WaypointConfig, device: torch.device | str | None = None, *, audits: bool = True) -> dict:
    """Every section in the notebook's order, without the displays: the seed's results.

    For tests, the fault suite and scripts; the notebook calls the same functions cell by
    cell, seeded by the same seeding block.  ``device``: None resolves ``cfg.device`` as the
    notebook does.  ``audits=False`` skips the checks of :mod:`litrepro.waypoint.audit`
    (only ``benchmarks/waypoint_audit_cost.py`` does, to measure what they cost).
    """
    from litrepro.guard import OfflineGuard
    from litrepro.seeding import describe_device, resolve_device, seed_everything
    from litrepro.waypoint.model import flat_parameters

    generator = seed_everything(cfg.seed)                                       # Section 1
    device = resolve_device(cfg.device) if device is None else torch.device(device)
    guard = OfflineGuard().start()
    try:
        corpus = load_corpus(cfg)
        teacher, _ = pretrained_policy(cfg, corpus, generator, device, steps=cfg.teacher_steps,   # Section 2
                                       stage="teacher_pretrain")
        rl = teacher_rl(cfg, teacher, corpus, generator, device)                  # Section 3
        ledger = frozen_ledger(rl)
        student = initial_student(cfg, rl, corpus, device, cfg.seed)              # Section 4
        student_init, student_start = copy.deepcopy(student), flat_parameters(student).clone()
        baseline_validation = nats_per_byte(student, corpus.validation_tokens("baseline_evaluation"), cfg.eval_window)
        distillation = distil(cfg, student, rl["waypoints"], corpus, generator, device, steps=cfg.student_steps,
                              gate_kind=cfg.gate, stage="opd")
        after_opd = ledger.deltas()
        final_validation = nats_per_byte(student, corpus.validation_tokens("final_evaluation"), cfg.eval_window)
        test_tokens = corpus.test_tokens("final_evaluation")                      # Section 6
        final_test = nats_per_byte(student, test_tokens, cfg.eval_window)
        student_delta = float((flat_parameters(student) - student_start).norm())
        padding, zero_gate = padding_fixture(cfg.seed), zero_gate_refused()
        surrogate = surrogate_check(cfg, student_init, rl["waypoints"], corpus, device, cfg.seed)
        replayed = replay(cfg, rl, corpus, device)
        nll = {"baseline_validation": baseline_validation, "final_validation": final_validation,
               "final_test": final_test}
        run_audit = audit_run(cfg, corpus=corpus, rl=rl, student_init=student_init, student=student,
                              distillation=distillation, nll=nll, test_tokens=test_tokens) if audits else None
        comparison = compare_arms(cfg, student_init, rl["waypoints"], corpus, device, cfg.seed) \
            if cfg.comparison_steps else None                                      # Section 7
        comparison_audit = audit_comparison(cfg, comparison, student_init, rl["waypoints"], corpus, cfg.seed) \
            if comparison and audits else None
    finally:
        guard.stop()                                                              # Section 8
    frozen = frozen_report(ledger, after_opd)
    return collect_results(cfg, corpus=corpus, student_delta=student_delta, distillation=distillation, rl=rl, nll=nll,
                           frozen=frozen, padding=padding, zero_gate=zero_gate, guard=guard, comparison=comparison,
                           execution=describe_device(device), replayed=replayed, surrogate=surrogate,
                           audits=(run_audit, comparison_audit))
