"""The study runner (``litrepro.studyrunner``) and every study declaration (``litrepro.studies``).

The committed studies are checked from their declarations alone: each is current with its sources and
settings, each that keeps its per-seed rows re-derives its summary from them bit for bit, and each file a
study writes belongs to a declaration.  The runner's mechanics (bounds, dry run, pilot, resuming, refusals,
failed seeds, stage contexts, the output folder's rules) are tested on a tiny in-process study; resuming
after a SIGKILL and a Dask run are tested on a real study (``dose-response``, one OPD update per arm).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_cli
from json_gaps import json_gaps
from litrepro import cli
from litrepro import studyrunner as sr
from litrepro.paths import RENDERED, ROOT

STUDIES = sr.registry()
COMMITTED = sorted(n for n, s in STUDIES.items() if s.committed)


def _main(path: str) -> dict:
    return json.loads((RENDERED / path).read_text())


# --- The committed studies, from their declarations ------------------------------------------------------

@pytest.mark.parametrize("name", COMMITTED)
def test_the_committed_study_is_current_with_its_sources_and_settings(name):
    study = STUDIES[name]
    stale = sr.stale(study, _main(study.main_output))
    assert not stale, f"{study.main_output} is stale ({stale[:4]}): run `make {study.make_target}`"
    for rel in study.outputs[1:]:                     # every other output that records its sources records the same
        recorded = sr._dig(_main(rel), study.hash_path)
        assert recorded is None or recorded == sr._dig(_main(study.main_output), study.hash_path), rel


@pytest.mark.parametrize("name", sorted(n for n in COMMITTED if STUDIES[n].from_committed))
def test_the_committed_json_is_rebuilt_by_todays_summary_from_its_own_per_seed_rows(name):
    """The declaration's whole summary over the committed rows gives the committed JSON (floats to 1e-12 relative;
    the fields that record how it ran are the committed run's)."""
    study = STUDIES[name]
    data = _main(study.main_output)
    gaps = json_gaps(sr.recompute(study, json.loads(json.dumps(data))), data)
    assert not gaps, gaps[:5]


def test_the_studies_that_cannot_be_rebuilt_from_their_json_are_the_ones_that_do_not_keep_their_rows():
    assert sorted(n for n in COMMITTED if STUDIES[n].stages and not STUDIES[n].from_committed) == [
        "rlbp-study", "rlbp-td-calibration"]


def test_json_gaps_finds_a_moved_figure_and_allows_a_last_bit():
    a = {"x": [1.0, 2, "s"], "y": {"z": 0.1 + 0.2}}
    assert json_gaps(a, {"x": [1.0, 2, "s"], "y": {"z": 0.3}}) == []
    assert json_gaps(a, {"x": [1.0 + 1e-9, 2, "s"], "y": {"z": 0.3}}) == [".x[0]: 1.0 vs 1.000000001"]
    assert json_gaps(a, {"x": [1.0, 3, "s"], "y": {"z": 0.3}}) and json_gaps(a, {"x": [1.0, 2], "y": {"z": 0.3}})


def test_every_study_file_in_rendered_belongs_to_a_declared_study():
    declared = {rel for s in STUDIES.values() for rel in s.outputs}
    found = {f"{p.parent.name}/{p.name}" for m in ("pinterest_rlbp", "waypoint_opd") for p in (RENDERED / m).glob("*.json")
             if not p.name.startswith("seed-") and p.name != "summary.json"}
    benchmark_outputs = {"pinterest_rlbp/audit_cost.json"}       # benchmarks/rlbp_check_cost.py --write
    assert found - benchmark_outputs <= declared, sorted(found - benchmark_outputs - declared)
    assert {rel for n in COMMITTED for rel in STUDIES[n].outputs} <= found
    assert not any(rel in found for n, s in STUDIES.items() if not s.committed for rel in s.outputs)


def _make_recipe(target: str) -> str:
    text = (ROOT / "Makefile").read_text()
    m = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)+)", text, re.M)
    assert m, f"Makefile has no target {target}"
    return m.group(1)


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_each_make_target_runs_its_study_through_the_runner(name):
    study = STUDIES[name]
    assert study.make_target, name
    assert re.search(rf"-m litrepro study {re.escape(name)}(\s|$)", _make_recipe(study.make_target))


def test_no_study_script_is_left_outside_the_runner():
    assert not (ROOT / "studies").exists()
    text = (ROOT / "Makefile").read_text()
    assert "studies/" not in text.replace("build/studies/", "")


def test_declarations_are_consistent():
    assert len(STUDIES) >= 14
    for name, s in STUDIES.items():
        assert re.fullmatch(r"[a-z0-9-]+", name) and s.title and s.summary and s.module
        assert s.outputs and len(set(s.outputs)) == len(s.outputs)
        assert all(re.fullmatch(r"(pinterest_rlbp|waypoint_opd)/[a-z0-9_]+\.json", rel) for rel in s.outputs)
        assert all(st.n_arms() >= 1 for st in s.stages) and len({st.name for st in s.stages}) == len(s.stages)
        assert len({o.key for o in s.options}) == len(s.options)
        for o in s.options:
            assert o.lo <= o.default_value() <= o.hi, (name, o.name)
        for b in s.blocks:
            assert f"<!-- BEGIN litrepro:{b.name} -->" in (ROOT / b.page).read_text(), (name, b.name)
    outputs = [rel for s in STUDIES.values() for rel in s.outputs]
    assert len(outputs) == len(set(outputs)), "two studies write the same file"


def test_the_arms_counts_match_the_study_modules():
    from litrepro.rlbp import diagnosis
    from litrepro.studies import rlbp_budget
    from litrepro.waypoint import dose_response, effect_study, transfer

    assert STUDIES["rlbp-diagnosis"].arms() == len(diagnosis.ARMS)
    assert STUDIES["rlbp-budget"].arms() == 24 == len(rlbp_budget.BACKUPS) * len(rlbp_budget.BUDGETS) + 4
    assert STUDIES["dose-response"].arms() == len(dose_response.LEVELS)
    assert STUDIES["effect-study"].arms() == len(effect_study.conditions())
    assert STUDIES["waypoint-transfer"].arms() == len(transfer.ARMS)


def test_declaration_hashes_split_jobs_from_summary_and_follow_the_code(monkeypatch):
    import litrepro.studies as studies

    assert set(studies.declaration_hashes("dose-response")) == {"study dose-response declaration: jobs",
                                                                "study dose-response declaration: summary"}
    assert set(studies.declaration_hashes("effect-holm")) == {"study effect-holm declaration: summary"}
    monkeypatch.setattr(studies, "registry", lambda: {"tiny": _tiny()})
    before = studies.declaration_hashes("tiny")
    monkeypatch.setattr(studies, "registry", lambda: {"tiny": _tiny(stages=(sr.Stage("a", tiny_second_job),))})
    after = studies.declaration_hashes("tiny")                    # another job: the jobs' hash moves, not the summary's
    assert after["study tiny declaration: jobs"] != before["study tiny declaration: jobs"]
    assert after["study tiny declaration: summary"] == before["study tiny declaration: summary"]


# --- The command line: bounds and the dry run ------------------------------------------------------------

def _refused(argv: list[str], capsys) -> str:
    try:
        status = cli.main(["study", *argv])
    except SystemExit as err:
        status = err.code
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2, (argv, err)
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.mark.parametrize("argv, words", [
    ([], "name a study"),
    (["no-such-study"], "not a study"),
    (["rlbp-diagnosis", "--seeds", "0-4294967295"], "--seeds"),
    (["rlbp-diagnosis", "--seeds", "9-3"], "empty"),
    (["rlbp-diagnosis", "--seeds", "x"], "--seeds"),
    (["rlbp-diagnosis", "--seeds", "0-300"], "at most 200"),
    (["rlbp-diagnosis", "--seeds", "42"], "at least 2 seeds"),
    (["rlbp-diagnosis", "--jobs", "0"], "--jobs"),
    (["rlbp-diagnosis", "--jobs", "999"], "--jobs"),
    (["rlbp-diagnosis", "--bogus"], "unrecognized"),
    (["rlbp-diagnosis", "--scheduler", "ftp://x:1"], "--scheduler"),
    (["rlbp-diagnosis", "--tls-cert", "x"], "external tls://"),
    (["dose-response", "--steps", "1000000000"], "--steps"),
    (["dose-response", "--steps", "1e3"], "--steps"),
    (["waypoint-transfer", "--lr", "nan"], "--lr"),
    (["waypoint-transfer", "--lr", "-1"], "--lr"),
    (["rlbp-td-calibration", "--seeds", "50-60"], "fit seeds"),
    (["waypoint-transfer", "--updates", "7"], "multiple of --eval-every"),
])
def test_bad_arguments_are_one_line_and_exit_2(argv, words, capsys):
    assert words in _refused(argv, capsys)


def test_an_unusable_state_folder_is_one_line_and_exit_2(tmp_path, capsys):
    assert "--state" in _refused(["rlbp-diagnosis", "--state", "/dev/null/x", "--out", str(tmp_path / "out")], capsys)


def test_the_arm_grid_is_bounded(monkeypatch, capsys):
    monkeypatch.setattr(sr, "MAX_ARM_RUNS", 100)
    assert "arm runs" in _refused(["rlbp-budget", "--seeds", "42-61"], capsys)    # 20 seeds x 24 arms


def test_list_names_every_study_and_its_make_target(capsys):
    assert cli.main(["study", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(f"make {s.make_target}" in out and name in out for name, s in STUDIES.items())


def test_a_dry_run_prints_the_plan_and_the_recorded_cost_and_writes_nothing(tmp_path, capsys):
    from litrepro.waypoint import transfer

    state = tmp_path / "state"
    before = sorted(p.name for p in RENDERED.iterdir())
    assert cli.main(["study", "waypoint-transfer", "--seeds", "42-57", "--dry-run", "--state", str(state)]) == 0
    err = capsys.readouterr().err
    recorded = _main("waypoint_opd/transfer_study.json")
    per_seed = recorded["cpu_seconds"] / recorded["n_seeds"]
    assert f"16 seed(s) x {len(transfer.ARMS)} arm(s)" in err and f"{per_seed * 16:.0f} CPU-s" in err
    assert "recorded in waypoint_opd/transfer_study.json" in err
    assert not state.exists() and sorted(p.name for p in RENDERED.iterdir()) == before


# --- The runner on a tiny in-process study ---------------------------------------------------------------

CALLS: list[tuple[str, int]] = []


def tiny_job(seed: int, options: dict, context) -> dict:
    CALLS.append(("a", seed))
    if MUTATE.get("on"):
        HASHES["tiny.py"] = "edited while it ran"
    if seed == FAIL.get("seed"):
        raise RuntimeError(f"seed {seed} broke")
    return {"seed": seed, "x": seed * options["scale"], "pair": (seed, seed)}   # a tuple reads back as a list


def tiny_context(rows: dict, options: dict) -> dict:
    return {"total": sum(r["x"] for r in rows["a"])}


def tiny_second_job(seed: int, options: dict, context) -> dict:
    CALLS.append(("b", seed))
    return {"seed": seed, "share": seed * options["scale"] / context["total"]}


def tiny_summary(run: sr.StudyRun) -> dict:
    if REFUSE.get("on"):
        raise ValueError("an interval does not recompute")
    xs = [r["x"] for r in run.rows["a"]]
    return {"pinterest_rlbp/tiny.json": {"seeds": run.seeds, "mean": sum(xs) / len(xs), "rows": run.rows,
                                         "pairs_are_lists": all(isinstance(r["pair"], list) for r in run.rows["a"]),
                                         "jobs": run.jobs, "wall_seconds": run.wall_seconds,
                                         "source_sha256": HASHES}}


FAIL: dict = {}
REFUSE: dict = {}
MUTATE: dict = {}
HASHES = {"tiny.py": "1"}


def _tiny(**changes) -> sr.Study:
    fields = dict(name="tiny", title="a tiny study", module=__name__, summary="for tests",
                  stages=(sr.Stage("a", tiny_job, arms=2), sr.Stage("b", tiny_second_job, context=tiny_context)),
                  summarise=tiny_summary, source_hashes=lambda: dict(HASHES), outputs=("pinterest_rlbp/tiny.json",),
                  options=(sr.Option("--scale", 3, 1, 10, "a factor"),), hash_path=("source_sha256",),
                  make_target="tiny")
    fields.update(changes)
    return sr.Study(**fields)


@pytest.fixture()
def tiny(monkeypatch, tmp_path):
    study = _tiny()
    monkeypatch.setattr(sr, "registry", lambda: {"tiny": study})
    CALLS.clear()
    FAIL.clear()
    REFUSE.clear()
    MUTATE.clear()
    monkeypatch.setitem(HASHES, "tiny.py", "1")
    return study, tmp_path / "out", tmp_path / "state"


def _run(study, out, state, seeds=(1, 2, 3), **kw):
    return sr.run(study, seeds=list(seeds), jobs=1, out=out, state_root=state, progress=kw.pop("progress", False), **kw)


def test_a_run_writes_the_summary_of_rows_read_back_from_the_state_folder(tiny, capsys):
    study, out, state = tiny
    assert _run(study, out, state) == 0
    data = json.loads((out / "pinterest_rlbp" / "tiny.json").read_text())
    assert data["mean"] == 6.0 and data["pairs_are_lists"] and data["rows"]["b"][0]["share"] == 3 / 18
    assert CALLS == [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2), ("b", 3)]
    err = capsys.readouterr().err
    assert "the pilot job of stage a" in err and "the pilot job of stage b" in err
    assert "3 seed(s) x 3 arm(s) in 2 stage(s) (9 arm runs, 6 jobs); 0 job(s) already in" in err and "6 to run" in err
    assert len(list(state.rglob("seed-*.json"))) == 6


def test_a_rerun_computes_nothing_and_other_sources_never_mix_in(tiny, capsys):
    study, out, state = tiny
    assert _run(study, out, state) == 0
    CALLS.clear()
    assert _run(study, out, state) == 0 and CALLS == []
    assert "6 job(s) already in" in capsys.readouterr().err
    HASHES["tiny.py"] = "2"                                       # other sources: a new key, every row again
    assert _run(study, out, state) == 0 and len(CALLS) == 6
    CALLS.clear()
    assert _run(study, out, state, options={"scale": 4}) == 0 and len(CALLS) == 6   # other options too


def test_the_estimate_comes_from_the_rows_already_saved(tiny, capsys):
    study, out, state = tiny
    assert _run(study, out, state, seeds=(1, 2)) == 0
    capsys.readouterr()
    assert _run(study, out, state, seeds=(1, 2, 3, 4)) == 0
    err = capsys.readouterr().err
    assert "this study's earlier rows in the state folder" in err and "pilot" not in err
    assert "2 job(s) already in" in err and "6 to run" in err       # stage b waits on all of stage a


def test_a_failed_seed_keeps_the_others_and_a_rerun_computes_only_it(tiny, capsys):
    study, out, state = tiny
    FAIL["seed"] = 2
    assert _run(study, out, state) == 1
    err = capsys.readouterr().err
    assert "seed 2: RuntimeError: seed 2 broke" in err and "nothing written" in err
    assert not (out / "pinterest_rlbp" / "tiny.json").exists()
    FAIL.clear()
    CALLS.clear()
    assert _run(study, out, state) == 0
    assert CALLS == [("a", 2), ("b", 1), ("b", 2), ("b", 3)]


def test_a_refused_summary_writes_nothing_and_keeps_the_rows(tiny, capsys):
    study, out, state = tiny
    REFUSE["on"] = True
    assert _run(study, out, state) == 1
    assert "an interval does not recompute; nothing written" in capsys.readouterr().err
    assert not (out / "pinterest_rlbp").exists() and len(list(state.rglob("seed-*.json"))) == 6


def test_a_stage_context_keys_its_rows(tiny):
    """A second stage's rows are kept per context: another first stage gives another folder."""
    study, out, state = tiny
    assert _run(study, out, state, seeds=(1, 2)) == 0
    assert _run(study, out, state, seeds=(1, 3)) == 0             # total differs: stage b runs again
    folders = sorted(p.name for p in (state / "tiny").glob("*/b-*"))
    assert len(folders) == 2


def test_a_saved_row_of_another_key_or_seed_is_not_read(tiny):
    study, out, state = tiny
    assert _run(study, out, state, seeds=(1, 2)) == 0
    path = next((state / "tiny").glob("*/a/seed-1.json"))
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "seed": 5}))            # a file moved in from elsewhere
    CALLS.clear()
    assert _run(study, out, state, seeds=(1, 2)) == 0
    assert ("a", 1) in CALLS and ("a", 2) not in CALLS


def test_the_progress_bar_counts_arms(tiny, capsys):
    study, out, state = tiny
    assert _run(study, out, state, progress=True) == 0
    err = capsys.readouterr().err
    assert "9/9" in err and "arm" in err


def test_a_file_the_runner_does_not_own_is_refused_before_any_job(tiny):
    study, out, state = tiny
    (out / "pinterest_rlbp").mkdir(parents=True)
    (out / "pinterest_rlbp" / "tiny.json").write_text("{}")       # someone else's file, in a non-litrepro folder
    from litrepro.errors import UsageError

    with pytest.raises(UsageError, match="not empty and not a litrepro output folder"):
        _run(study, out, state)
    assert CALLS == []


def test_an_output_written_by_the_runner_is_replaced_but_an_edited_one_is_refused(tiny):
    study, out, state = tiny
    assert _run(study, out, state) == 0
    assert _run(study, out, state, options={"scale": 2}) == 0     # its own file: replaced
    assert json.loads((out / "pinterest_rlbp" / "tiny.json").read_text())["mean"] == 4.0
    (out / "pinterest_rlbp" / "tiny.json").write_text('{"edited": true}')
    from litrepro.outdir import Refused

    with pytest.raises(Refused):
        _run(study, out, state, options={"scale": 5})
    assert json.loads((out / "pinterest_rlbp" / "tiny.json").read_text()) == {"edited": True}


def test_the_declared_outputs_must_be_what_the_summary_gives(tiny, monkeypatch):
    study, out, state = tiny
    wrong = _tiny(outputs=("pinterest_rlbp/other.json",))
    monkeypatch.setattr(sr, "registry", lambda: {"tiny": wrong})
    with pytest.raises(sr.LitreproError, match="its declaration says"):
        _run(wrong, out, state)


# --- A real study: resumed after SIGKILL, and on Dask ----------------------------------------------------

TINY_DOSE = ["--steps", "1", "--eval-prompts", "16", "--no-progress"]


def _dose(out: Path, state: Path, *extra: str) -> subprocess.CompletedProcess:
    return run_cli("study", "dose-response", "--seeds", "42-44", "--out", str(out), "--state", str(state),
                   *TINY_DOSE, *extra, timeout=900)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, corpus_path):
    base = tmp_path_factory.mktemp("dose-local")
    proc = _dose(base / "out", base / "state", "--jobs", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((base / "out" / "waypoint_opd" / "dose_response.json").read_text())


def test_a_study_killed_part_way_resumes_with_the_missing_seeds_only(tmp_path, uninterrupted):
    out, state = tmp_path / "out", tmp_path / "state"
    cmd = [sys.executable, "-m", "litrepro", "study", "dose-response", "--seeds", "42-44", "--out", str(out),
           "--state", str(state), "--jobs", "1", *TINY_DOSE]
    proc = subprocess.Popen(cmd, cwd=ROOT.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while not list(state.rglob("seed-*.json")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)                             # killed after its first seed, mid-second
    proc.wait()
    saved = list(state.rglob("seed-*.json"))
    assert len(saved) == 1 and not (out / "waypoint_opd" / "dose_response.json").exists()
    first = saved[0].stat().st_mtime_ns
    again = _dose(out, state, "--jobs", "1")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "1 job(s) already in" in again.stderr and "2 to run" in again.stderr
    assert saved[0].stat().st_mtime_ns == first                    # the saved seed was not recomputed
    resumed = json.loads((out / "waypoint_opd" / "dose_response.json").read_text())
    study = STUDIES["dose-response"]
    assert sr.without_run_fields(study, resumed) == sr.without_run_fields(study, uninterrupted)
    assert resumed["source_sha256"] == uninterrupted["source_sha256"]


def test_a_dask_run_gives_the_local_runs_json(tmp_path, uninterrupted):
    pytest.importorskip("distributed")
    proc = _dose(tmp_path / "out", tmp_path / "state", "--scheduler", "dask", "--jobs", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    on_dask = json.loads((tmp_path / "out" / "waypoint_opd" / "dose_response.json").read_text())
    study = STUDIES["dose-response"]
    assert sr.without_run_fields(study, on_dask) == sr.without_run_fields(study, uninterrupted)
    assert on_dask["jobs"] == 2 and uninterrupted["jobs"] == 1
    assert not list((tmp_path / "state").glob(".dask-*"))          # its Dask scratch is gone


# --- Re-summarising from committed rows ------------------------------------------------------------------

def _owned_copy(out: Path, rel: str, data: dict) -> None:
    from litrepro import atomic, outdir

    outdir.claim(out)
    outdir.OutDir(out).write(rel, atomic.dumps_json(data).encode())


def test_resummarise_rebuilds_the_summary_from_the_committed_rows_and_refuses_stale_rows(tmp_path, capsys):
    from litrepro.waypoint import transfer_study

    from json_gaps import json_gaps

    study, rel = STUDIES["waypoint-transfer"], "waypoint_opd/transfer_study.json"
    assert study.summary_hash_keys == (transfer_study.SUMMARY_HASH,)
    committed = _main(rel)
    summary_moved = json.loads(json.dumps(committed))
    summary_moved["source_sha256"]["study waypoint-transfer declaration: summary"] = "an older summary"
    summary_moved["per_arm"] = {}                                  # what a summary-only change re-derives
    summary_moved["an_old_field"] = 1                              # ... and a field today's summary no longer writes
    out = tmp_path / "out"
    _owned_copy(out, rel, summary_moved)
    assert sr.resummarise(study, out, dry_run=True) == 0           # a dry run writes nothing
    assert json.loads((out / rel).read_text()) == summary_moved
    assert sr.resummarise(study, out) == 0
    again = json.loads((out / rel).read_text())
    assert not json_gaps(again, committed) and again["source_sha256"] == study.source_hashes()
    assert (out / "waypoint_opd" / "transfer_study.png").stat().st_size > 1000
    rows_moved = json.loads(json.dumps(committed))
    rows_moved["source_sha256"]["study waypoint-transfer declaration: jobs"] = "older jobs"
    _owned_copy(out, rel, rows_moved)
    assert sr.resummarise(study, out) == 1
    assert "what its rows depend on changed (source study waypoint-transfer declaration: jobs)" in capsys.readouterr().err
    from litrepro.errors import UsageError

    with pytest.raises(UsageError, match="re-run it"):
        sr.resummarise(STUDIES["rlbp-study"], out)


def test_a_dry_run_counts_the_jobs_of_every_stage(tiny, capsys):
    study, out, state = tiny
    FAIL["seed"] = 3                                               # stage a saves seeds 1 and 2 only
    assert _run(study, out, state) == 1
    FAIL.clear()
    capsys.readouterr()
    assert _run(study, out, state, dry_run=True) == 0
    err = capsys.readouterr().err
    assert "2 job(s) already in" in err and "4 to run" in err


def test_sources_that_change_while_it_runs_refuse_the_summary(tiny, capsys):
    study, out, state = tiny
    MUTATE["on"] = True
    assert _run(study, out, state) == 1
    assert "its sources changed while it ran" in capsys.readouterr().err
    assert not (out / "pinterest_rlbp" / "tiny.json").exists()


def _figure(outputs):
    from matplotlib.figure import Figure

    return {"pinterest_rlbp/tiny.png": Figure(figsize=(1, 1))}


def test_a_figure_the_runner_does_not_own_is_refused_before_any_job(tiny):
    from litrepro.outdir import Refused

    study, out, state = tiny
    drawn = _tiny(figures=_figure, pngs=("pinterest_rlbp/tiny.png",))
    assert _run(drawn, out, state) == 0 and (out / "pinterest_rlbp" / "tiny.png").stat().st_size > 100
    (out / "pinterest_rlbp" / "tiny.png").write_bytes(b"someone else's figure")
    CALLS.clear()
    with pytest.raises(Refused):
        _run(drawn, out, state, options={"scale": 2})
    assert CALLS == []
    undeclared = _tiny(figures=_figure)                            # a figure its declaration does not name
    with pytest.raises(sr.LitreproError, match="its declaration says"):
        _run(undeclared, tmp_out := out.parent / "other", state)
    assert not (tmp_out / "pinterest_rlbp").exists()


def test_an_unreachable_scheduler_is_one_line_and_exit_2(tmp_path):
    proc = run_cli("study", "rlbp-diagnosis", "--seeds", "42-43", "--scheduler", "tls://127.0.0.1:1",
                   "--state", str(tmp_path / "state"), "--out", str(tmp_path / "out"), timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "cannot reach the Dask scheduler" in lines[-1], proc.stderr[-2000:]
    assert not (tmp_path / "out").exists()
