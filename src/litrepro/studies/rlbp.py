"""The ``pinterest_rlbp`` studies, declared for the runner (:mod:`litrepro.studyrunner`).

Each declaration names its per-seed job (a module-level function of ``(seed, options, context)``), its
summary (which refuses) and its outputs; the study's mechanics live in its module (``litrepro.rlbp``,
``litrepro.contextual``, ``litrepro.studies.rlbp_budget`` and ``litrepro.studies.rlbp_d3rlpy``).  Every
job seeds itself (``seed_everything`` in the pipeline it calls, and one torch thread from the runner) and
reads no global random state, so its row does not depend on the process, the order of seeds or the
scheduler.

``python -m litrepro study --list`` lists them; ``docs/running.md`` says how to add one.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Mapping

from litrepro.paths import ROOT
from litrepro.studyrunner import Block, Stage, Study, StudyRun, claims_block, count_of

DOCS = "docs/pinterest_rlbp.md"


def _rows_as_committed(stage: str):
    """``from_committed`` for a study whose JSON keeps its one stage's rows whole, in seed order, as ``per_seed``."""
    def rows(data: Mapping[str, Any]) -> tuple[dict[str, list[Any]], dict[str, Any]]:
        by_seed = {r["seed"]: r for r in data["per_seed"]}
        return {stage: [by_seed[s] for s in data["seeds"]]}, {}
    return rows


def _parameters() -> dict[str, Any]:
    """The pipeline's defaults less the seed: what every rlbp study records as ``provenance.parameters``."""
    from litrepro.rlbp.config import RLBPConfig

    return {k: v for k, v in dataclasses.asdict(RLBPConfig()).items() if k != "seed"}


def _lines(module: str, *names: str, rel: str):
    """``report``: ``module.table(data)`` when it has one, then ``module.<name>(data)`` for each name."""
    def report(outputs) -> list[str]:
        import importlib

        mod, data = importlib.import_module(module), outputs[rel]
        out = [mod.table(data).to_string()] if hasattr(mod, "table") else []
        for name in names:
            out += getattr(mod, name)(data)
        return out
    return report


def _figure(module: str, rel: str, png: str, fn: str = "plot"):
    def figures(outputs):
        import importlib

        return {png: getattr(importlib.import_module(module), fn)(outputs[rel])}
    return figures


# --- The backup study: policy comparison, lambda frontier, backups and data scaling (make rlbp-study) ------

def backups_job(seed: int, options: dict, context: Any) -> dict:
    """One seed at the default logged days: every backup of :data:`litrepro.rlbp.study.BACKUPS`, with the sweep."""
    from litrepro.rlbp import study
    from litrepro.rlbp.config import RLBPConfig
    from litrepro.rlbp.experiment import run_arms

    cfg = dataclasses.replace(RLBPConfig(seed=seed), logged_days=RLBPConfig().logged_days)
    return run_arms(cfg, "cpu", backups=study.BACKUPS, sweep=True)


def _backup_arms(rows: list[dict]) -> tuple[dict[str, list], dict[str, dict], dict[str, list]]:
    """``(every arm's results, refused arms, arms that passed)``; refuses when the seed's own backup failed."""
    from litrepro.rlbp import study

    arms = {b: [r[b] for r in rows] for b in study.BACKUPS}
    refused = {b: study.refused_seeds(r) for b, r in arms.items() if study.refused_seeds(r)}
    if "max_min" in refused:
        raise study.StudyRefused(f"backup max_min: seeds with failed checks {refused['max_min']}")
    for name, results in arms.items():
        if name not in refused:
            study.verify(results, f"backup {name}")              # also refuses shared evaluation days
    return arms, refused, {b: r for b, r in arms.items() if b not in refused}


def scaling_context(rows: dict[str, list], options: dict) -> dict[str, Any]:
    """The scaling stage's backups: ``max_min`` and the best other backup that passed (refuses like the summary)."""
    from litrepro.rlbp import study

    _, _, passed = _backup_arms(rows["backups"])
    return {"other": study.best_other(study.backup_rows(passed))}


def scaling_job(seed: int, options: dict, context: Any) -> dict:
    """One seed at every other logged-days setting: ``max_min`` and the best other backup, without the sweep."""
    from litrepro.rlbp import study
    from litrepro.rlbp.config import RLBPConfig
    from litrepro.rlbp.experiment import run_arms

    base = RLBPConfig().logged_days
    return {str(d): run_arms(dataclasses.replace(RLBPConfig(seed=seed), logged_days=d), "cpu",
                             backups=("max_min", context["other"]), sweep=False)
            for d in study.SCALING_DAYS if d != base}


def _scaling_arms() -> int:
    """Two backups (``max_min`` and the best other) at each logged-days setting but the default."""
    from litrepro.rlbp import study
    from litrepro.rlbp.config import RLBPConfig

    return 2 * len([d for d in study.SCALING_DAYS if d != RLBPConfig().logged_days])


def backup_study_summary(run: StudyRun) -> dict[str, Any]:
    """The policy comparison and the lambda frontier of ``max_min``, and the backup study; nothing on a refusal."""
    from litrepro.rlbp import plots as rlbp_plots
    from litrepro.rlbp import study
    from litrepro.rlbp.config import RLBPConfig

    seeds, base_days = run.seeds, RLBPConfig().logged_days
    provenance = {"source_sha256": backup_study_hashes(), "parameters": _parameters()}
    arms_all, refused, arms = _backup_arms(run.rows["backups"])
    results = arms_all["max_min"]
    study.verify(results, "backup max_min")
    comparison = {"n_seeds": len(seeds), "seeds": seeds, "backup": "max_min",
                  "comparisons": study.comparisons(results), "check_pass_rates": study.check_pass_rates(results),
                  "per_seed": study.per_seed_figures(results), "reference_points": study.reference_points(results),
                  "provenance": provenance}
    front = study.frontier(results)
    # every row again, by a plain loop over the per-seed values paired by seed; nothing is written on a mismatch
    study.refuse_mismatches(study.check_comparisons(results, comparison["comparisons"])
                            + study.check_frontier(results, front))
    front = {**front, "per_seed": rlbp_plots.frontier_per_seed(results)}   # for the paired frontier_facts
    rows = study.backup_rows(arms)
    other = study.best_other(rows)
    if other != run.contexts["scaling"]["other"]:
        raise study.StudyRefused(f"the scaling stage ran {run.contexts['scaling']['other']}, the summary picks {other}")
    by_days = {base_days: {b: arms[b] for b in ("max_min", other)}}
    for d in (d for d in study.SCALING_DAYS if d != base_days):
        by_days[d] = {b: [r[str(d)][b] for r in run.rows["scaling"]] for b in ("max_min", other)}
        for b, day_results in by_days[d].items():
            study.verify(day_results, f"backup {b}, {d} logged days")
    backup = {"n_seeds": len(seeds), "seeds": seeds, "backups": rows, "best_other_backup": other,
              "policy_rounds": RLBPConfig().policy_rounds, "headroom": study.headroom_summary(results),
              "scaling": study.scaling_rows(by_days),
              "check_pass_rates": {b: study.check_pass_rates(r) for b, r in arms_all.items()},
              "refused_arms": refused,
              "per_seed": {b: {str(r["seed"]): {"learned_true_value": r["beyond_seed_metrics"]["learned_true_value"],
                                                "control_ratio": r["beyond_seed_metrics"]["control_ratio"],
                                                "headroom": r["headroom"]} for r in arms[b]} for b in arms},
              "provenance": provenance}
    study.refuse_mismatches(study.check_backups(arms, rows, backup["headroom"], backup["scaling"], by_days))
    return {"pinterest_rlbp/policy_comparison.json": comparison, "pinterest_rlbp/lambda_frontier.json": front,
            "pinterest_rlbp/backup_study.json": backup}


def backup_study_hashes() -> dict[str, str]:
    from litrepro.rlbp import study
    from litrepro.studies import declaration_hashes

    return {**study.source_hashes(), **declaration_hashes("rlbp-study")}


def _backup_study_figures(outputs):
    from litrepro.rlbp import plots as rlbp_plots
    from litrepro.rlbp import study

    comparison = outputs["pinterest_rlbp/policy_comparison.json"]
    return {"pinterest_rlbp/policy_comparison.png": study.comparison_plot(comparison["comparisons"]),
            "pinterest_rlbp/lambda_frontier.png": rlbp_plots.frontier_figure(
                outputs["pinterest_rlbp/lambda_frontier.json"], comparison),
            "pinterest_rlbp/backup_study.png": study.backup_plot(outputs["pinterest_rlbp/backup_study.json"])}


def _backup_study_report(outputs) -> list[str]:
    backup = outputs["pinterest_rlbp/backup_study.json"]
    out = []
    for r in backup["backups"]:
        x = r["learned_minus_fixed"]
        out.append(f"{r['backup']:13s} learned-fixed {x['mean_difference']:+.4f} [{x['ci95_low']:+.4f}, "
                   f"{x['ci95_high']:+.4f}]  share of per-kind headroom {r['share_of_best_per_kind_headroom']['share']:+.2f}")
    for r in backup["scaling"]:
        x = r["learned_minus_fixed"]
        out.append(f"{r['backup']:13s} days {r['logged_days']:2d} learned-fixed {x['mean_difference']:+.4f} "
                   f"[{x['ci95_low']:+.4f}, {x['ci95_high']:+.4f}]")
    return out


# --- The budget study (make rlbp-budget) ------------------------------------------------------------------

def budget_job(seed: int, options: dict, context: Any) -> dict:
    """One seed: 4 backups x 5 budgets, the scaling arms and the baselines (:func:`litrepro.studies.rlbp_budget.run_seed`)."""
    from litrepro.studies import rlbp_budget

    return rlbp_budget.run_seed(seed)


def budget_summary(run: StudyRun) -> dict[str, Any]:
    from litrepro.studies import rlbp_budget as study

    rows = run.rows["grid"]
    summary = study.summarise(rows)
    seconds = run.job_seconds["grid"]
    return {"pinterest_rlbp/budget_study.json": {
        "n_seeds": len(run.seeds), "seeds": run.seeds, "cpu_seconds_per_seed": round(sum(seconds) / len(seconds), 1),
        "arms": {"backups": study.BACKUPS, "budgets": list(study.BUDGETS), "scaling": [list(x) for x in study.SCALING],
                 "scaling_backups": list(study.SCALING_BACKUPS), "baselines": study.BASELINES},
        "per_seed": rows, "summary": summary,
        "provenance": {"source_sha256": budget_hashes(), "parameters": _parameters()}}}


def budget_hashes() -> dict[str, str]:
    from litrepro.studies import rlbp_budget

    return rlbp_budget.source_hashes()


def _budget_arms() -> int:
    from litrepro.studies import rlbp_budget as study

    return len(study.BACKUPS) * len(study.BUDGETS) + len(study.SCALING) * len(study.SCALING_BACKUPS)


# --- The diagnosis (make rlbp-diagnosis) ------------------------------------------------------------------

def diagnosis_job(seed: int, options: dict, context: Any) -> dict:
    from litrepro.rlbp import diagnosis

    return diagnosis.run_seed(seed)


def diagnosis_summary(run: StudyRun) -> dict[str, Any]:
    from litrepro.rlbp import diagnosis

    rows = run.rows["arms"]
    summary = diagnosis.summarise(rows)                      # refuses failed checks and unrecomputable intervals
    return {"pinterest_rlbp/diagnosis.json": {
        "n_seeds": len(run.seeds), "seeds": run.seeds, "wall_seconds": run.wall_seconds, "jobs": run.jobs,
        "arms": {a: {"changes": c, "config": ch, "target": t} for a, (c, ch, t) in diagnosis.ARMS.items()},
        "per_seed": rows, "summary": summary,
        "provenance": {"source_sha256": diagnosis_hashes(), "parameters": _parameters()}}}


def diagnosis_hashes() -> dict[str, str]:
    from litrepro.rlbp import diagnosis

    return diagnosis.source_hashes()


# --- The TD-loss calibration (make rlbp-td-calibration) ---------------------------------------------------

def td_fit_job(seed: int, options: dict, context: Any) -> dict:
    """The initial held-out TD loss of one of the fit seeds (what the unit is fitted to)."""
    from litrepro.rlbp import td_calibration as tc
    from litrepro.rlbp.config import RLBPConfig

    return {"seed": seed, "td_loss_before": tc.initial_td_loss(RLBPConfig(seed=seed))}


def td_unit_context(rows: dict[str, list], options: dict) -> dict[str, float]:
    """The fitted unit: the fit seeds' initial TD losses scaled to the record's mean."""
    from litrepro import recorded
    from litrepro.rlbp import td_calibration as tc

    rec = recorded.aggregate_metrics("pinterest_rlbp")
    return {"unit": tc.fit_unit(rows["fit"], rec["td_loss_before"]["mean"])}


def td_seed_job(seed: int, options: dict, context: Any) -> dict:
    from litrepro.rlbp import td_calibration as tc
    from litrepro.rlbp.config import RLBPConfig

    return tc.seed_figures(RLBPConfig(seed=seed), unit=context["unit"])


def td_summary(run: StudyRun) -> dict[str, Any]:
    from litrepro import recorded
    from litrepro.rlbp import td_calibration as tc
    from litrepro.rlbp.config import RLBPConfig

    rows, unit = [dict(r) for r in run.rows["seeds"]], run.contexts["seeds"]["unit"]
    fit_before = [r["td_loss_before"] for r in run.rows["fit"]]
    bad = {r["seed"]: sorted(k for k, v in r["checks"].items() if not v) for r in rows}
    bad = {s: v for s, v in bad.items() if v}
    by_seed = {r["seed"]: r for r in rows}
    drift = [s for s, b in zip(tc.FIT_SEEDS, fit_before) if b != by_seed[s]["td_loss_before"]]
    if bad or drift:
        raise ValueError(f"checks failed {bad}, or the fit pass differs from the pipeline on seeds {drift}")
    rec = recorded.aggregate_metrics("pinterest_rlbp")
    body = tc.summarise(rows, rec, unit)
    mismatch = tc.recompute_rows(rows, body)
    if mismatch:
        raise ValueError(f"rows {mismatch} differ from their plain-loop recomputation")
    for r in rows:
        r["ratio_at_budget"] = {str(t): r["ratio_curve"][t] for t in tc.BUDGETS if t < len(r["ratio_curve"])}
        del r["ratio_curve"]
    return {"pinterest_rlbp/td_calibration.json": {
        **body, "critic_steps": RLBPConfig().critic_steps, "per_seed": {str(r["seed"]): r for r in rows},
        "check_pass_rates": {k: sum(r["checks"][k] for r in rows) / len(rows) for k in rows[0]["checks"]},
        "provenance": {"source_sha256": td_hashes(), "parameters": _parameters(),
                       "recorded_file": recorded.load("pinterest_rlbp")["_file"]}}}


def td_hashes() -> dict[str, str]:
    """The rlbp study's sources (``rlbp/`` less plots, ``stats.py``, ...), ``td_calibration.py`` and the declaration."""
    from litrepro.rlbp import study
    from litrepro.studies import declaration_hashes

    rel = "src/litrepro/rlbp/td_calibration.py"
    return {**study.source_hashes(), rel: hashlib.sha256((ROOT / rel).read_bytes()).hexdigest(),
            **declaration_hashes("rlbp-td-calibration")}


def _td_validate(seeds, options) -> None:
    from litrepro.errors import UsageError
    from litrepro.rlbp import td_calibration as tc

    if not set(tc.FIT_SEEDS) <= set(seeds):
        raise UsageError(f"--seeds must include the fit seeds {list(tc.FIT_SEEDS)}")


def _fit_seeds(seeds: list[int]) -> list[int]:
    from litrepro.rlbp import td_calibration as tc

    return list(tc.FIT_SEEDS)


# --- The d3rlpy cross-check (make rlbp-d3rlpy) ------------------------------------------------------------

def d3rlpy_job(seed: int, options: dict, context: Any) -> dict:
    from litrepro.studies import rlbp_d3rlpy as d3

    return d3.run_seed(seed, settings=d3.D3Settings())


def d3rlpy_summary(run: StudyRun) -> dict[str, Any]:
    from litrepro.rlbp.config import RLBPConfig
    from litrepro.studies import rlbp_d3rlpy as d3

    settings = d3.D3Settings()
    rows = run.rows["algos"]
    summary = d3.summarise(rows, settings)                   # refuses failed checks and unrecomputable intervals
    return {"pinterest_rlbp/d3rlpy_crosscheck.json": {
        "n_seeds": len(run.seeds), "seeds": run.seeds, "wall_seconds": run.wall_seconds,
        "cpu_seconds": run.cpu_seconds, "jobs": run.jobs, "d3rlpy_version": d3.import_d3rlpy().__version__,
        "gamma": RLBPConfig().gamma, "reconstruction": "ours: the seed file says nothing about d3rlpy or an export format",
        "settings": dataclasses.asdict(settings), "format_version": d3.FORMAT_VERSION,
        "per_seed": sorted(rows, key=lambda r: r["seed"]), "summary": summary,
        "provenance": {"source_sha256": d3rlpy_hashes(), "parameters": _parameters()}}}


def d3rlpy_hashes() -> dict[str, str]:
    from litrepro.studies import rlbp_d3rlpy as d3

    return d3.source_hashes()


def _d3rlpy_settings() -> dict[str, Any]:
    from litrepro.studies import rlbp_d3rlpy as d3

    return dataclasses.asdict(d3.D3Settings())


# --- The contextual market: its study, budget study, diagnosis and pairing ----------------------------------

def _contextual_settings() -> dict[str, Any]:
    from litrepro.contextual import study

    return dataclasses.asdict(study.StudySettings())


def _contextual_budget_settings() -> dict[str, Any]:
    from litrepro.contextual import budget

    return dataclasses.asdict(budget.BudgetSettings())


def _market_settings() -> dict[str, Any]:
    from litrepro.contextual.market import ContextualSettings

    return dataclasses.asdict(ContextualSettings())


def contextual_job(seed: int, options: dict, context: Any) -> dict:
    from litrepro.contextual import study

    return study.run_seed(seed, settings=study.StudySettings())


def _contextual_arms() -> int:
    """The oracles and the learned bidder at each critic budget."""
    from litrepro.contextual import study

    return len(study.ORACLES) + len(study.StudySettings().budgets)


def contextual_summary(run: StudyRun) -> dict[str, Any]:
    from litrepro.contextual import study
    from litrepro.contextual.market import ContextualSettings

    settings = study.StudySettings()
    rows = run.rows["arms"]
    summary = study.refuse_or_summarise(rows, settings)
    return {"pinterest_rlbp/contextual_study.json": {
        "n_seeds": len(rows), "seeds": run.seeds, "wall_seconds": run.wall_seconds, "cpu_seconds": run.cpu_seconds,
        "jobs": run.jobs, "market": "contextual",
        "reconstruction": "ours: the seed file fixes no market (the default one is ours too), no oracle and no "
                          "estimator but ordinary IPS",
        "settings": dataclasses.asdict(settings), "market_settings": dataclasses.asdict(ContextualSettings()),
        "per_seed": sorted(rows, key=lambda r: r["seed"]), "summary": summary,
        "provenance": {"source_sha256": contextual_hashes()}}}


def contextual_hashes() -> dict[str, str]:
    from litrepro.contextual import study

    return study.source_hashes()


CONTEXTUAL_STUDY = "pinterest_rlbp/contextual_study.json"
CONTEXTUAL_BUDGET = "pinterest_rlbp/contextual_budget.json"


def contextual_budget_job(seed: int, options: dict, context: Any) -> dict:
    from litrepro.contextual import budget

    return budget.run_seed(seed, settings=budget.BudgetSettings())


def contextual_budget_summary(run: StudyRun) -> dict[str, Any]:
    from litrepro.contextual import budget
    from litrepro.contextual.market import ContextualSettings

    settings = budget.BudgetSettings()
    rows = run.rows["arms"]
    summary = budget.refuse_or_summarise(rows, settings, run.inputs[CONTEXTUAL_STUDY])
    return {CONTEXTUAL_BUDGET: {
        "n_seeds": len(run.seeds), "seeds": run.seeds, "wall_seconds": run.wall_seconds,
        "cpu_seconds": run.cpu_seconds, "jobs": run.jobs, "market": "contextual",
        "reconstruction": "ours: the seed file fixes no market (the default one is ours too), no budget (600 "
                          "critic steps is our default), no backup but max_min, no placebo and no convergence rule",
        "settings": dataclasses.asdict(settings), "market_settings": dataclasses.asdict(ContextualSettings()),
        "per_seed": sorted(rows, key=lambda r: r["seed"]), "summary": summary,
        "provenance": {"source_sha256": contextual_budget_hashes()}}}


def contextual_budget_hashes() -> dict[str, str]:
    from litrepro.contextual import budget

    return budget.source_hashes()


def _contextual_budget_arms() -> int:
    from litrepro.contextual import budget

    return len(budget.ARMS) * len(budget.BudgetSettings().budgets)


def contextual_diagnosis_job(seed: int, options: dict, context: Any) -> dict:
    from litrepro.contextual import diagnosis

    return diagnosis.run_seed(seed)


def contextual_diagnosis_summary(run: StudyRun) -> dict[str, Any]:
    from litrepro.contextual import diagnosis

    rows = run.rows["arms"]
    summary = diagnosis.refuse_or_summarise(rows, run.inputs[CONTEXTUAL_BUDGET])
    return {"pinterest_rlbp/contextual_diagnosis.json": {
        "n_seeds": len(run.seeds), "seeds": run.seeds, "wall_seconds": run.wall_seconds,
        "cpu_seconds": run.cpu_seconds, "jobs": run.jobs, "market": "contextual",
        "budgets": list(diagnosis.BUDGETS), "arms": diagnosis.ARMS,
        "reconstruction": "ours: the market, the arms' pairing with the budget study and the budgets",
        "per_seed": sorted(rows, key=lambda r: r["seed"]), "summary": summary,
        "provenance": {"source_sha256": contextual_diagnosis_hashes()}}}


def contextual_diagnosis_hashes() -> dict[str, str]:
    from litrepro.contextual import diagnosis

    return diagnosis.source_hashes()


def _contextual_diagnosis_arms() -> int:
    from litrepro.contextual import diagnosis

    return len(diagnosis.ARMS) * len(diagnosis.BUDGETS)


def contextual_pairing_summary(run: StudyRun) -> dict[str, Any]:
    """The learned bidder minus the table policies, paired by seed from the two committed contextual studies."""
    from litrepro.contextual import pairing

    return {"pinterest_rlbp/contextual_pairing.json": pairing.build_from(run.out / CONTEXTUAL_BUDGET,
                                                                         run.out / CONTEXTUAL_STUDY)}


def _pairing_hashes() -> dict[str, str]:
    from litrepro.contextual import pairing

    return pairing.source_hashes()


STUDIES = (
    Study(name="rlbp-study", title="Every critic backup, the policy comparison, the lambda frontier and more logged days",
          module="litrepro.rlbp.study",
          summary="The seed's max/min backup and our other backups at our default budget on the same data, days and draws; "
                  "then max_min and the best other backup with more logged days.",
          stages=(Stage("backups", backups_job, arms=count_of("litrepro.rlbp.study", "BACKUPS")),
                  Stage("scaling", scaling_job, arms=_scaling_arms,
                        context=scaling_context)),
          summarise=backup_study_summary, source_hashes=backup_study_hashes,
          outputs=("pinterest_rlbp/backup_study.json", "pinterest_rlbp/policy_comparison.json",
                   "pinterest_rlbp/lambda_frontier.json"),
          settings={("provenance", "parameters"): _parameters}, hashed_helpers=(_backup_arms, _parameters),
          figures=_backup_study_figures, pngs=("pinterest_rlbp/policy_comparison.png", "pinterest_rlbp/lambda_frontier.png",
                                                          "pinterest_rlbp/backup_study.png"), report=_backup_study_report,
          blocks=(Block("headline-rlbp-study", "docs/findings.md", claims_block("headline_rlbp_study")),
                  Block("rlbp-backups", DOCS, claims_block("rlbp_backups")),
                  Block("rlbp-policy-comparison", DOCS, claims_block("rlbp_policy_comparison")),
                  Block("rlbp-lambda", DOCS, claims_block("rlbp_lambda"))),
          make_target="rlbp-study"),
    Study(name="rlbp-budget", title="The learned bidder against the critic's budget and a practitioner's baselines",
          module="litrepro.studies.rlbp_budget",
          summary="Every backup at each critic budget of its grid, a convergence rule from logged data (it picks the best budget tried, not a shown convergence), data scaling, and the "
                  "untuned default, an offline-tuned constant and the best constant in hindsight.",
          stages=(Stage("grid", budget_job, arms=_budget_arms),),
          summarise=budget_summary, hashed_helpers=(_parameters,),
          source_hashes=budget_hashes, outputs=("pinterest_rlbp/budget_study.json",),
          settings={("provenance", "parameters"): _parameters},
          figures=_figure("litrepro.studies.rlbp_budget", "pinterest_rlbp/budget_study.json",
                          "pinterest_rlbp/budget_study.png"), pngs=("pinterest_rlbp/budget_study.png",),
          report=_lines("litrepro.studies.rlbp_budget", "findings", rel="pinterest_rlbp/budget_study.json"),
          blocks=(Block("rlbp-budget", DOCS, claims_block("rlbp_budget")),),
          from_committed=_rows_as_committed("grid"), make_target="rlbp-budget"),
    Study(name="rlbp-diagnosis", title="Placebo, operator and ablation arms of the learned bidder (some change several factors)",
          module="litrepro.rlbp.diagnosis",
          summary="Arms that change the critic's targets or the actor's training, on the data, evaluation days and "
                  "draws of max_min, with a reseeded placebo and counterfactual replays.",
          stages=(Stage("arms", diagnosis_job, arms=count_of("litrepro.rlbp.diagnosis", "ARMS")),),
          summarise=diagnosis_summary, hashed_helpers=(_parameters,),
          source_hashes=diagnosis_hashes, outputs=("pinterest_rlbp/diagnosis.json",),
          settings={("provenance", "parameters"): _parameters},
          figures=_figure("litrepro.rlbp.diagnosis", "pinterest_rlbp/diagnosis.json", "pinterest_rlbp/diagnosis.png"), pngs=("pinterest_rlbp/diagnosis.png",),
          report=_lines("litrepro.rlbp.diagnosis", "findings", "ablation_findings", rel="pinterest_rlbp/diagnosis.json"),
          blocks=(Block("rlbp-diagnosis", DOCS, claims_block("rlbp_diagnosis")),
                  Block("rlbp-ablation", DOCS, claims_block("rlbp_ablation"))),
          from_committed=_rows_as_committed("arms"), make_target="rlbp-diagnosis"),
    Study(name="rlbp-td-calibration", title="Hypotheses for why our held-out TD losses differ from the record",
          module="litrepro.rlbp.td_calibration",
          summary="A unit fitted on the rendered seeds and the TD loss against the critic's budget, against the seed file's "
                  "recorded TD losses.",
          stages=(Stage("fit", td_fit_job, seeds=_fit_seeds),
                  Stage("seeds", td_seed_job, context=td_unit_context)),
          summarise=td_summary, hashed_helpers=(_parameters,),
          source_hashes=td_hashes, outputs=("pinterest_rlbp/td_calibration.json",),
          settings={("provenance", "parameters"): _parameters}, validate=_td_validate, min_seeds=3,
          report=_lines("litrepro.rlbp.td_calibration", "findings", rel="pinterest_rlbp/td_calibration.json"),
          blocks=(Block("rlbp-td-calibration", DOCS, claims_block("rlbp_td_calibration")),),
          make_target="rlbp-td-calibration"),
    Study(name="rlbp-d3rlpy", title="d3rlpy's discrete learners on the exported logged transitions",
          module="litrepro.studies.rlbp_d3rlpy",
          summary="DoubleDQN, DiscreteCQL and DiscreteBCQ trained by d3rlpy on each seed's exported logged data and "
                  "scored in the simulator's truth on the studies' evaluation days.",
          stages=(Stage("algos", d3rlpy_job, arms=count_of("litrepro.studies.rlbp_d3rlpy", "ALGOS")),),
          summarise=d3rlpy_summary, hashed_helpers=(_parameters,),
          source_hashes=d3rlpy_hashes, outputs=("pinterest_rlbp/d3rlpy_crosscheck.json",),
          settings={("provenance", "parameters"): _parameters, ("settings",): _d3rlpy_settings},
          figures=_figure("litrepro.studies.rlbp_d3rlpy", "pinterest_rlbp/d3rlpy_crosscheck.json",
                          "pinterest_rlbp/d3rlpy_crosscheck.png"), pngs=("pinterest_rlbp/d3rlpy_crosscheck.png",),
          report=_lines("litrepro.studies.rlbp_d3rlpy", "findings", rel="pinterest_rlbp/d3rlpy_crosscheck.json"),
          blocks=(Block("rlbp-d3rlpy", DOCS, claims_block("rlbp_d3rlpy")),),
          from_committed=_rows_as_committed("algos"), make_target="rlbp-d3rlpy"),
    Study(name="rlbp-contextual", title="The contextual market: oracles, the learned bidder and the off-policy estimators",
          module="litrepro.contextual.study",
          summary="A market where the best gain depends on the state: the ladder of oracles, table policies that react "
                  "to the state, the learned bidder and six off-policy estimators against the truth.",
          stages=(Stage("arms", contextual_job, arms=_contextual_arms),),
          summarise=contextual_summary, source_hashes=contextual_hashes, outputs=(CONTEXTUAL_STUDY,),
          settings={("settings",): _contextual_settings, ("market_settings",): _market_settings},
          figures=_figure("litrepro.contextual.study", CONTEXTUAL_STUDY, "pinterest_rlbp/contextual_study.png"), pngs=("pinterest_rlbp/contextual_study.png",),
          report=_lines("litrepro.contextual.study", "findings", rel=CONTEXTUAL_STUDY),
          blocks=(Block("rlbp-contextual", DOCS, claims_block("rlbp_contextual")),),
          from_committed=_rows_as_committed("arms"), make_target="rlbp-contextual"),
    Study(name="rlbp-contextual-budget", title="The backups, budgets and placebo re-run in the contextual market",
          module="litrepro.contextual.budget",
          summary="The backups and a placebo at each critic budget in the contextual market, the held-out TD rule "
                  "and the baselines; the arms it shares with the contextual study must agree with it exactly.",
          stages=(Stage("arms", contextual_budget_job, arms=_contextual_budget_arms),),
          summarise=contextual_budget_summary, source_hashes=contextual_budget_hashes, outputs=(CONTEXTUAL_BUDGET,),
          inputs={CONTEXTUAL_STUDY: False}, from_committed=_rows_as_committed("arms"),
          settings={("settings",): _contextual_budget_settings, ("market_settings",): _market_settings},
          figures=_figure("litrepro.contextual.budget", CONTEXTUAL_BUDGET, "pinterest_rlbp/contextual_budget.png"),
          report=_lines("litrepro.contextual.budget", "findings", rel=CONTEXTUAL_BUDGET), pngs=("pinterest_rlbp/contextual_budget.png",),
          blocks=(Block("rlbp-contextual-budget", DOCS, claims_block("rlbp_contextual_budget")),),
          make_target="rlbp-contextual-budget"),
    Study(name="rlbp-contextual-diagnosis", title="The seed market's one-factor diagnosis arms in the contextual market",
          module="litrepro.contextual.diagnosis",
          summary="Target sync, gamma, the actor's support and its temperature in the contextual market, paired with "
                  "the contextual budget study's max_min and placebo.",
          stages=(Stage("arms", contextual_diagnosis_job, arms=_contextual_diagnosis_arms),),
          summarise=contextual_diagnosis_summary, source_hashes=contextual_diagnosis_hashes,
          outputs=("pinterest_rlbp/contextual_diagnosis.json",), inputs={CONTEXTUAL_BUDGET: True},
          from_committed=_rows_as_committed("arms"),
          report=_lines("litrepro.contextual.diagnosis", "findings", rel="pinterest_rlbp/contextual_diagnosis.json"),
          blocks=(Block("rlbp-contextual-diagnosis", DOCS, claims_block("rlbp_contextual_diagnosis")),),
          make_target="rlbp-contextual-diagnosis"),
    Study(name="rlbp-contextual-pairing", title="The learned bidder minus the table policies, paired across studies",
          module="litrepro.contextual.pairing",
          summary="Derived from the committed contextual studies alone (no per-seed job).",
          stages=(), summarise=contextual_pairing_summary, source_hashes=_pairing_hashes,
          outputs=("pinterest_rlbp/contextual_pairing.json",),
          inputs={CONTEXTUAL_BUDGET: True, CONTEXTUAL_STUDY: True}, hash_path=("source_sha256",),
          make_target="rlbp-contextual-pairing"),
)
