"""The ``waypoint_opd`` studies, declared for the runner (:mod:`litrepro.studyrunner`).

Each declaration names its per-seed job (a module-level function of ``(seed, options, context)``), its
summary (which refuses) and its outputs; the study's mechanics live in its module under
``litrepro.waypoint``.  A job seeds itself (:func:`litrepro.seeding.seed_everything`: deterministic
algorithms, one thread), loads the corpus and calls the module's ``run_seed``; nothing in a job reads a
global random state, so its row does not depend on the process, the order of seeds or the scheduler.

``python -m litrepro study --list`` lists them; ``docs/running.md`` says how to add one.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Mapping

from litrepro.paths import ROOT
from litrepro.studyrunner import Block, Option, Stage, Study, StudyRun, claims_block, count_of


def _setup(seed: int):
    """The corpus and the CPU device, after seeding this process from ``seed``."""
    import torch

    from litrepro.seeding import seed_everything
    from litrepro.waypoint import experiment as wp
    from litrepro.waypoint.config import WaypointConfig

    seed_everything(seed)                                      # deterministic algorithms, one thread
    return wp.load_corpus(WaypointConfig()), torch.device("cpu")


def _config_default(field: str):
    """An option's default: ``WaypointConfig``'s ``field``, read when asked."""
    def default():
        from litrepro.waypoint.config import WaypointConfig

        return getattr(WaypointConfig(), field)
    return default


def _transfer_default(field: str):
    def default():
        from litrepro.waypoint.transfer import TransferConfig

        return getattr(TransferConfig(), field)
    return default


def _transfer_config() -> dict[str, Any]:
    from litrepro.waypoint.transfer import TransferConfig

    return dataclasses.asdict(TransferConfig())


#: ``litrepro.waypoint.transfer_study.SUMMARY_HASH`` (tests/test_studies.py checks it): the transfer study's summary
#: functions, hashed apart from its per-seed ones.
TRANSFER_SUMMARY_HASH = "transfer_study summary functions and constants"

def _grouped_rows(stage: str, options: dict[str, str] | None = None):
    """``from_committed`` for a study whose ``per_seed`` is every job's rows one after the other, seed by seed
    (``options``: option key -> the JSON field that records it)."""
    def rows(data: Mapping[str, Any]) -> tuple[dict[str, list[Any]], dict[str, Any]]:
        by_seed: dict[int, list] = {s: [] for s in data["seeds"]}
        for r in data["per_seed"]:
            by_seed[r["seed"]].append(r)
        return {stage: [by_seed[s] for s in data["seeds"]]}, {k: data[v] for k, v in (options or {}).items()}
    return rows


def _opd_calibration_rows(data: Mapping[str, Any]) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """The committed rows are arm by arm; a job's row is one seed's arms, in ``ARMS`` order."""
    from litrepro.waypoint import opd_calibration as oc

    by = {(r["seed"], r["arm"]): r for r in data["per_seed"]}
    return {"arms": [[by[(s, arm)] for arm in oc.ARMS] for s in data["seeds"]]}, {}


def _transfer_rows(data: Mapping[str, Any]) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    return {"arms": list(data["per_seed"])}, {k: data["config"][k] for k in ("updates", "eval_every", "batch", "lr")}


COMPARISON_OPTIONS = {"steps": "comparison_steps", "eval_prompts": "comparison_eval_prompts"}

STEPS = Option("--steps", _config_default("comparison_steps"), 1, 100_000, "OPD updates per arm (comparison_steps)")
EVAL_PROMPTS = Option("--eval-prompts", _config_default("comparison_eval_prompts"), 1, 65_536,
                      "validation prompts per evaluation (comparison_eval_prompts)")


# --- The OPD step's calibration ---------------------------------------------------------------------------

def opd_calibration_job(seed: int, options: dict, context: Any) -> list[dict]:
    """Sections 2-4 of the notebook for one seed under every explaining arm (``opd_calibration.ARMS`` order)."""
    from litrepro.waypoint import opd_calibration as oc

    corpus, device = _setup(seed)
    return [oc.run_seed(seed, arm, corpus=corpus, device=device) for arm in oc.ARMS]


def _seed_file() -> Mapping[str, Any]:
    from litrepro import recorded

    seed_file = recorded.load("waypoint_opd")
    if seed_file is None:
        raise ValueError("the waypoint_opd seed file is not found ($LITREPRO_SEEDS_DIR)")
    return seed_file


def opd_calibration_summary(run: StudyRun) -> dict[str, Any]:
    """The rows arm by arm (each arm's seeds in order), the z-scores against the record, checked by a plain loop."""
    from litrepro.waypoint import opd_calibration as oc

    seed_file = _seed_file()
    per_seed = run.rows["arms"]
    rows = [per_seed[s][i] for i, _arm in enumerate(oc.ARMS) for s in range(len(run.seeds))]
    summary = oc.summarise(rows, seed_file)
    oc.check_summary(rows, summary, seed_file)               # ValueError: nothing is written
    return {"waypoint_opd/opd_calibration.json": {
        "seeds": run.seeds, "wall_seconds": run.wall_seconds, "source_sha256": opd_calibration_hashes(),
        "per_seed": rows, "arms": summary}}


def _opd_calibration_validate(seeds, options) -> None:
    from litrepro.errors import UsageError

    try:
        _seed_file()
    except ValueError as err:
        raise UsageError(str(err)) from None


def opd_calibration_hashes() -> dict[str, str]:
    from litrepro.waypoint import opd_calibration as oc

    return oc.source_hashes()


# --- The dose-response ----------------------------------------------------------------------------------

def dose_response_job(seed: int, options: dict, context: Any) -> list[dict]:
    """One seed at every teacher-RL learning rate: one row per level."""
    from litrepro.waypoint import dose_response

    corpus, device = _setup(seed)
    return dose_response.run_seed(seed, steps=options["steps"], eval_prompts=options["eval_prompts"], corpus=corpus,
                                  device=device)


def dose_response_summary(run: StudyRun) -> dict[str, Any]:
    from litrepro.waypoint import dose_response
    from litrepro.waypoint.config import WaypointConfig

    rows = [r for part in run.rows["levels"] for r in part]
    differences = dose_response.summarise(rows)              # refuses when a check failed on any seed
    return {"waypoint_opd/dose_response.json": {
        "n_seeds": len(run.seeds), "seeds": run.seeds, "comparison_steps": run.options["steps"],
        "comparison_eval_prompts": run.options["eval_prompts"], "student_start": dose_response.START,
        "teacher_pretrain_lr": dose_response.PRETRAIN_LR, "levels_teacher_rl_lr": dose_response.LEVELS,
        "teacher_rl_updates": WaypointConfig().teacher_rl_updates,
        "teacher_rl_rollouts": WaypointConfig().teacher_rl_rollouts,
        "wall_seconds": run.wall_seconds, "jobs": run.jobs, "source_sha256": dose_response_hashes(), "per_seed": rows,
        "level_means": dose_response.level_means(rows), "differences": differences}}


def dose_response_hashes() -> dict[str, str]:
    from litrepro.waypoint import dose_response

    return dose_response.source_hashes()


def _dose_response_figures(outputs):
    from litrepro.waypoint import dose_response

    return {"waypoint_opd/dose_response.png": dose_response.plot(outputs["waypoint_opd/dose_response.json"])}


# --- The effect study -----------------------------------------------------------------------------------

def effect_study_job(seed: int, options: dict, context: Any) -> list[dict]:
    """One seed, every condition (teacher x student start x RL rollouts): one row per condition."""
    from litrepro.waypoint import effect_study

    corpus, device = _setup(seed)
    return effect_study.run_seed(seed, steps=options["steps"], eval_prompts=options["eval_prompts"], corpus=corpus,
                                 device=device)


def effect_study_summary(run: StudyRun) -> dict[str, Any]:
    from litrepro.waypoint import effect_study

    rows = [r for part in run.rows["conditions"] for r in part]
    differences = effect_study.summarise(rows)               # refuses when a check failed on any seed
    return {"waypoint_opd/effect_study.json": {
        "n_seeds": len(run.seeds), "seeds": run.seeds, "comparison_steps": run.options["steps"],
        "comparison_eval_prompts": run.options["eval_prompts"], "student_starts": list(effect_study.STARTS),
        "teacher_rl_rollouts": list(effect_study.RL_ROLLOUTS), "teachers_pretrain_lr": effect_study.TEACHERS,
        "source_sha256": effect_study_hashes(), "per_seed": rows,
        "condition_means": effect_study.condition_means(rows), "differences": differences}}


def effect_study_hashes() -> dict[str, str]:
    from litrepro.waypoint import effect_study

    return effect_study.source_hashes()


def _effect_study_figures(outputs):
    from litrepro.waypoint import effect_study

    return {"waypoint_opd/effect_study.png": effect_study.plot(outputs["waypoint_opd/effect_study.json"])}


# --- The effect study's Holm-adjusted rows (derived: no per-seed job) ------------------------------------

def effect_holm_summary(run: StudyRun) -> dict[str, Any]:
    """Every adjusted row from the effect study in the output folder, and that file's sha256."""
    from litrepro.waypoint import effect_holm

    return {"waypoint_opd/effect_holm.json": effect_holm.build_from(run.out / "waypoint_opd" / "effect_study.json")}


def _effect_holm_hashes() -> dict[str, str]:
    path = ROOT / "rendered" / "waypoint_opd" / "effect_study.json"
    return {"effect_study.json": hashlib.sha256(path.read_bytes()).hexdigest()} if path.is_file() else {}


# --- The transfer regime --------------------------------------------------------------------------------

def transfer_job(seed: int, options: dict, context: Any) -> dict:
    """One seed, every arm, in one process; the row records its own wall seconds (``seconds``)."""
    import time

    from litrepro.waypoint import transfer, transfer_study

    corpus, device = _setup(seed)
    start = time.perf_counter()
    cfg = dataclasses.replace(transfer.TransferConfig(), updates=options["updates"], eval_every=options["eval_every"],
                              batch=options["batch"], lr=options["lr"])
    row = transfer_study.run_seed(seed, corpus=corpus, device=device, cfg=cfg)
    row["seconds"] = round(time.perf_counter() - start, 1)
    return row


def _transfer_validate(seeds, options) -> None:
    """The learning curve's points must divide the updates: refused before any job runs."""
    from litrepro.errors import UsageError

    if options["updates"] % options["eval_every"]:
        raise UsageError(f"--updates {options['updates']} must be a multiple of --eval-every {options['eval_every']}")


def transfer_summary(run: StudyRun) -> dict[str, Any]:
    from litrepro.waypoint import transfer, transfer_study

    rows = run.rows["arms"]
    summary = transfer_study.summarise(rows)                 # refuses on a failed check or a mismatch
    cfg = dataclasses.replace(transfer.TransferConfig(), updates=run.options["updates"],
                              eval_every=run.options["eval_every"], batch=run.options["batch"], lr=run.options["lr"])
    return {"waypoint_opd/transfer_study.json": {
        "n_seeds": len(run.seeds), "seeds": run.seeds, "config": dataclasses.asdict(cfg),
        "arms": {name: dataclasses.asdict(arm) for name, arm in transfer.ARMS.items()},
        "lr_multipliers": list(transfer.LR_MULTIPLIERS), "streams": transfer.STREAMS,
        "wall_seconds": run.wall_seconds, "cpu_seconds": round(sum(r["seconds"] for r in rows), 1), "jobs": run.jobs,
        "source_sha256": transfer_hashes(), "per_seed": rows, **summary}}


def transfer_hashes() -> dict[str, str]:
    from litrepro.waypoint import transfer_study

    return transfer_study.source_hashes()


def _transfer_figures(outputs):
    from litrepro.waypoint import transfer_study

    return {"waypoint_opd/transfer_study.png": transfer_study.plot(outputs["waypoint_opd/transfer_study.json"])}


# --- The curriculum (a teacher that forgets; no committed run) ---------------------------------------------

def curriculum_job(seed: int, options: dict, context: Any) -> dict:
    from litrepro.waypoint import curriculum_study

    corpus, device = _setup(seed)
    return curriculum_study.run_seed(seed, corpus=corpus, device=device)


def curriculum_summary(run: StudyRun) -> dict[str, Any]:
    from litrepro.waypoint import curriculum, curriculum_study, transfer

    rows = run.rows["arms"]
    summary = curriculum_study.summarise(rows)
    return {"waypoint_opd/curriculum_study.json": {
        "n_seeds": len(run.seeds), "seeds": run.seeds, "rl_lr": curriculum_study.RL_LR,
        "schedule": list(curriculum.SCHEDULE), "config": dataclasses.asdict(transfer.TransferConfig()),
        "wall_seconds": run.wall_seconds, "jobs": run.jobs, "source_sha256": curriculum_hashes(), "per_seed": rows,
        **summary}}


def curriculum_hashes() -> dict[str, str]:
    from litrepro.waypoint import curriculum_study

    return curriculum_study.source_hashes()


def _curriculum_figures(outputs):
    from litrepro.waypoint import curriculum_study

    return {"waypoint_opd/curriculum_study.png": curriculum_study.plot(outputs["waypoint_opd/curriculum_study.json"])}


def _report(module: str, rel: str):
    """``report``: the findings of ``module`` on the written ``rel``."""
    def report(outputs) -> list[str]:
        import importlib

        return importlib.import_module(module).findings(outputs[rel])
    return report


STUDIES = (
    Study(name="waypoint-opd-calibration", title="The OPD step's gradient norm and parameter change against the record",
          module="litrepro.waypoint.opd_calibration",
          summary="The notebook's teacher, RL and OPD sections under each explaining arm, seed by seed, with every figure's z-score "
                  "against the seed file's record.",
          stages=(Stage("arms", opd_calibration_job, arms=count_of("litrepro.waypoint.opd_calibration", "ARMS")),),
          summarise=opd_calibration_summary, source_hashes=opd_calibration_hashes,
          hashed_helpers=(_setup, _seed_file),
          outputs=("waypoint_opd/opd_calibration.json",), default_seeds="42-57",
          validate=_opd_calibration_validate, hash_path=("source_sha256",),
          report=_report("litrepro.waypoint.opd_calibration", "waypoint_opd/opd_calibration.json"),
          blocks=(Block("opd-step-calibration", "docs/waypoint_opd.md", claims_block("opd_step_calibration")),),
          from_committed=_opd_calibration_rows, make_target="waypoint-opd-calibration"),
    Study(name="dose-response", title="The waypoint gate's effect against the teacher RL's movement",
          module="litrepro.waypoint.dose_response",
          summary="The gate against final-only OPD and shuffled gates at each teacher-RL learning rate of its grid, "
                  "paired by "
                  "seed.",
          stages=(Stage("levels", dose_response_job, arms=count_of("litrepro.waypoint.dose_response", "LEVELS")),),
          summarise=dose_response_summary, hashed_helpers=(_setup,),
          source_hashes=dose_response_hashes,
          outputs=("waypoint_opd/dose_response.json",), options=(STEPS, EVAL_PROMPTS), default_seeds="42-57",
          settings={("comparison_steps",): STEPS.default_value, ("comparison_eval_prompts",): EVAL_PROMPTS.default_value},
          hash_path=("source_sha256",), figures=_dose_response_figures, pngs=("waypoint_opd/dose_response.png",),
          report=_report("litrepro.waypoint.dose_response", "waypoint_opd/dose_response.json"),
          blocks=(Block("opd-dose-response", "docs/waypoint_opd.md", claims_block("opd_dose_response")),),
          from_committed=_grouped_rows("levels", COMPARISON_OPTIONS), make_target="dose-response"),
    Study(name="effect-study", title="The waypoint gate against final-only OPD and its controls, per condition",
          module="litrepro.waypoint.effect_study",
          summary="Every arm of the notebook's comparison under each teacher, student start and RL rollout "
                  "count of its grid, paired by seed.",
          stages=(Stage("conditions", effect_study_job, arms=count_of("litrepro.waypoint.effect_study", "conditions")),),
          summarise=effect_study_summary, hashed_helpers=(_setup,),
          source_hashes=effect_study_hashes,
          outputs=("waypoint_opd/effect_study.json",), options=(STEPS, EVAL_PROMPTS), default_seeds="42-57",
          settings={("comparison_steps",): STEPS.default_value, ("comparison_eval_prompts",): EVAL_PROMPTS.default_value},
          hash_path=("source_sha256",), figures=_effect_study_figures, pngs=("waypoint_opd/effect_study.png",),
          blocks=(Block("headline-effect-study", "docs/findings.md", claims_block("headline_effect_study")),
                  Block("opd-effect-tally", "docs/waypoint_opd.md", claims_block("opd_effect_tally")),
                  Block("opd-effect-rows", "docs/waypoint_opd.md", claims_block("opd_effect_rows"))),
          from_committed=_grouped_rows("conditions", COMPARISON_OPTIONS), make_target="effect-study"),
    Study(name="effect-holm", title="The effect study's intervals, Holm-adjusted, with standardised effects",
          module="litrepro.waypoint.effect_holm",
          summary="Derived from the committed effect study alone (no per-seed job): Holm over its whole family.",
          stages=(), summarise=effect_holm_summary, source_hashes=_effect_holm_hashes,
          outputs=("waypoint_opd/effect_holm.json",), inputs={"waypoint_opd/effect_study.json": True},
          hash_path=(), blocks=(Block("opd-effect-holm", "docs/waypoint_opd.md", claims_block("opd_effect_holm")),),
          make_target="effect-holm"),
    Study(name="waypoint-transfer", title="A regime where distillation transfers, and the gate against a larger step",
          module="litrepro.waypoint.transfer_study",
          summary="Every arm over many OPD updates from a teacher whose RL moves P(even) far, with learning "
                  "curves, a learning-rate frontier and Holm-adjusted paired differences.",
          stages=(Stage("arms", transfer_job, arms=count_of("litrepro.waypoint.transfer", "ARMS")),),
          summarise=transfer_summary, hashed_helpers=(_setup,),
          source_hashes=transfer_hashes,
          outputs=("waypoint_opd/transfer_study.json",), default_seeds="42-57",
          validate=_transfer_validate,
          options=(Option("--updates", _transfer_default("updates"), 1, 100_000, "OPD updates per arm"),
                   Option("--eval-every", _transfer_default("eval_every"), 1, 100_000,
                          "updates between two points of the learning curve"),
                   Option("--batch", _transfer_default("batch"), 1, 65_536, "student rollouts per update"),
                   Option("--lr", _transfer_default("lr"), 1e-9, 1e6, "the student's SGD learning rate", kind=float)),
          hash_path=("source_sha256",), settings={("config",): _transfer_config}, figures=_transfer_figures, pngs=("waypoint_opd/transfer_study.png",),
          report=_report("litrepro.waypoint.transfer_study", "waypoint_opd/transfer_study.json"),
          blocks=(Block("opd-transfer", "docs/waypoint_opd.md", claims_block("opd_transfer")),),
          from_committed=_transfer_rows, row_run_fields=("seconds",), summary_hash_keys=(TRANSFER_SUMMARY_HASH,),
          make_target="waypoint-transfer"),
    Study(name="waypoint-curriculum", title="The transfer regime's arms from a teacher that forgets",
          module="litrepro.waypoint.curriculum_study",
          summary="A teacher curriculum in phases (no run of it is committed).",
          stages=(Stage("arms", curriculum_job, arms=count_of("litrepro.waypoint.curriculum_study", "ARMS")),),
          summarise=curriculum_summary, hashed_helpers=(_setup,),
          source_hashes=curriculum_hashes,
          outputs=("waypoint_opd/curriculum_study.json",), default_seeds="42-57", hash_path=("source_sha256",),
          figures=_curriculum_figures, pngs=("waypoint_opd/curriculum_study.png",),
          report=_report("litrepro.waypoint.curriculum_study", "waypoint_opd/curriculum_study.json"),
          make_target="waypoint-curriculum", committed=False),
)
