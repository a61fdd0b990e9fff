"""Finding sentences that the notebooks print from the committed study JSON (through :mod:`litrepro.prose`).

Markdown cells explain mechanisms and hold no result numbers; a short code cell calls one of these
functions and prints what the data say. Each function takes the JSON's path (default: the committed file
under ``rendered/``) and returns a list of sentences.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from litrepro import prose, stats
from litrepro.paths import RENDERED, ROOT

BACKUP_STUDY = RENDERED / "pinterest_rlbp" / "backup_study.json"
EFFECT_STUDY = RENDERED / "waypoint_opd" / "effect_study.json"


def _load(path: Path | str) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def study_findings(path: Path | str, findings_of) -> list[str]:
    """``findings_of(json)`` for the study JSON at ``path``, or one sentence saying it is not there.

    A relative ``path`` is relative to the repository root, as the notebooks' ``results_dir`` is, not to the
    kernel's working folder (``notebooks/`` under nbval and papermill)."""
    path = Path(path)
    path = path if path.is_absolute() else ROOT / path
    if not path.is_file():
        return [f"{path.name} not found under {path.parent}: run its make target"]
    return findings_of(_load(path))


def rlbp_control_ratio(path: Path | str = BACKUP_STUDY, margins: dict[str, float] | None = None) -> list[str]:
    """Per backup: the clean ratio held-out TD loss / permuted-reward control's over the study's seeds, beside its margin."""
    from litrepro.rlbp.experiment import CONTROL_MARGIN

    margins = CONTROL_MARGIN if margins is None else margins
    study = _load(path)
    out = []
    for backup, seeds in study["per_seed"].items():
        r = [row["control_ratio"] for row in seeds.values()]
        mean, sd, top = statistics.fmean(r), statistics.stdev(r), max(r)
        out.append(f"{backup}: control_ratio over {len(r)} seeds has mean {prose.value(mean, 2, sign=False)}, "
                   f"SD {prose.value(sd, 2, sign=False)}, max {prose.value(top, 2, sign=False)}; max + 4 SD is at most "
                   f"{prose.value(stats.round_outward(top + 4 * sd, 2, up=True), 2, sign=False)} against the margin {margins[backup]:g}")
    return out


def rlbp_backup_findings(path: Path | str = BACKUP_STUDY) -> list[str]:
    """The backup study's headroom, each backup against the fixed gain, and the data-scaling arm."""
    study = _load(path)
    n = study["n_seeds"]
    counts = study["headroom"]["best_constant_action_counts"]
    action, k = max(counts.items(), key=lambda kv: kv[1])
    out = [f"best constant action in hindsight: action {action} on {prose.count(k, n, 'seeds')}"]
    for row in study["headroom"]["oracle_minus_fixed"]:
        a, b = row["comparison"].split(" - ")
        out.append(prose.compare(row, a, b, measure="true value"))
    for b in study["backups"]:
        share = b["share_of_best_per_kind_headroom"]
        out.append(prose.compare(b["learned_minus_fixed"], f"learned ({b['backup']})", "fixed gain", measure="true value")
                   + f"; share of the per-kind headroom {prose.percent(share['share'])} "
                   + prose.percent_interval(share["ci95_low"], share["ci95_high"]))
    for s in study["scaling"]:
        out.append(prose.compare(s["learned_minus_fixed"], f"learned ({s['backup']}, {s['logged_days']} logged days)",
                                 "fixed gain", measure="true value"))
    return out + rlbp_refused_arms(study)


def rlbp_refused_arms(study: dict) -> list[str]:
    """One sentence per backup the study refused (no interval written), naming the seeds and checks; or one
    saying that none was refused."""
    refused = study.get("refused_arms", {})
    if not refused:
        return ["no backup was refused: every arm's checks held on every seed"]
    return [f"refused, no interval written: the {arm} backup, whose checks failed on seed(s) "
            + ", ".join(f"{seed} ({', '.join(checks)})" for seed, checks in sorted(seeds.items()))
            + "; the table above has no row for it"
            for arm, seeds in sorted(refused.items())]


def opd_effect_findings(path: Path | str = EFFECT_STUDY) -> list[str]:
    """Per comparison, metric and student start: how many conditions lie above, below or span 0."""
    study = _load(path)
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in study["differences"]:
        groups.setdefault((r["comparison"], r["metric"], r["student_start"]), []).append(r)
    return [f"{c}, {m}, from {s}: {prose.tally_sentence(rows)}" for (c, m, s), rows in sorted(groups.items())]


def opd_effect_rows(path: Path | str = EFFECT_STUDY, comparison: str = "waypoint - final_only") -> list[str]:
    """Every row of one comparison, as a sentence each (no truncated table)."""
    study = _load(path)
    out = []
    for r in study["differences"]:
        if r["comparison"] != comparison:
            continue
        a, b = comparison.split(" - ")
        where = f"{r['teacher']} teacher, {r['student_start']} start, {r['teacher_rl_rollouts']} rollouts"
        out.append(f"{where}: " + prose.compare(r, a, b, measure=r["metric"]))
    return out
