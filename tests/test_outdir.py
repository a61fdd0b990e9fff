"""The runner never touches a user's file, and every bad input is one line: fast tests, no notebook runs."""

from __future__ import annotations

import errno
import json
import time
from pathlib import Path

import pytest

from conftest import TINY, run_cli
from litrepro import cli, outdir, runner
from litrepro.errors import UsageError
from litrepro.paths import ROOT

SETS = [a for s in TINY["pinterest_rlbp"] for a in ("--set", s)]


def _user_files(base: Path) -> dict[Path, bytes]:
    """Files a user might keep, named like the old pattern-matched scratch."""
    files = {base / ".tmp-keep" / "important.txt": b"keep me", base / ".draft.tmp": b"draft",
             base / "deep" / "a" / ".cache.tmp": b"cache", base / "pinterest_rlbp" / ".tmp-seed-1-x" / "mine": b"m",
             base / ".litrepro" / "scratch" / "notes.txt": b"n", base / ".litrepro" / "scratch" / "123-notregistered": b"r"}
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return files


def test_cleanup_removes_only_registered_scratch_of_killed_runs(tmp_path):
    out = tmp_path / "out"
    with outdir.lock(out):
        dead = outdir.new_run_scratch(out)          # a run that was killed: registered, left behind
        (dead / "w0" / "seed-5-abc").mkdir(parents=True)
    files = _user_files(out)
    unregistered = out / ".litrepro" / "scratch" / "99-0123456789ab"   # right name, no RUN file
    unregistered.mkdir()
    with outdir.lock(out):
        removed = outdir.remove_stale_scratch(out)
    assert removed == [dead] and not dead.exists() and unregistered.is_dir()
    assert all(p.read_bytes() == data for p, data in files.items())


def test_cli_run_never_deletes_user_files_even_when_it_fails(tmp_path):
    out = tmp_path / "out"
    outdir.claim(out)
    files = _user_files(out)
    proc = run_cli("run", "--methods", "pinterest_rlbp", "--seeds", "5", "--out", str(out), "--no-progress",
                   "--scheduler", "tcp://127.0.0.1:9", *SETS)
    assert proc.returncode == 2
    proc = run_cli("run", "--methods", "pinterest_rlbp", "--seeds", "5", "--out", str(out), "--no-progress",
                   "--no-summary-notebook", *SETS, env={"LITREPRO_TEST_FAULT": "worker:pinterest_rlbp:5"})
    assert proc.returncode == 1 and "LOST" in proc.stderr
    assert all(p.read_bytes() == data for p, data in files.items())


def test_a_parent_run_spares_a_nested_runs_live_scratch(tmp_path):
    parent, nested = tmp_path / "out", tmp_path / "out" / "pinterest_rlbp" / "nested"
    with outdir.lock(nested):
        live = outdir.new_run_scratch(nested)
        (live / "w0" / "seed-3-x").mkdir(parents=True)
        with outdir.lock(parent):
            outdir.remove_stale_scratch(parent)
        assert (live / "w0" / "seed-3-x").is_dir()


def test_a_foreign_non_empty_out_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "thesis.tex").write_text("mine")
    proc = run_cli("run", "--methods", "pinterest_rlbp", "--seeds", "5", "--out", str(tmp_path), "--no-progress")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "not empty and not a litrepro output folder" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thesis.tex"]


def test_out_dot_in_the_repository_is_refused_without_walking_it():
    with pytest.raises(UsageError, match="not a litrepro output folder"):
        outdir.inspect(ROOT)                              # holds .git, src, ...: refused by its top level only
    outdir.inspect(ROOT / "rendered")                     # the committed output folder is litrepro's


@pytest.mark.parametrize("overrides", [{"corpus_path": "../../../x"}, {"corpus_path": "/etc/passwd"},
                                       {"corpus_path": ".."}, {"corpus_path": "a" * 500},
                                       {"corpus_path": "x/../../y", "seed_text": "."}])
def test_variant_folders_stay_one_level_inside_out(tmp_path, overrides):
    folder = runner.variant_dir(tmp_path, "waypoint_opd", overrides)
    assert folder.parent == tmp_path / "waypoint_opd" and folder.resolve().parent == (tmp_path / "waypoint_opd").resolve()
    assert "/" not in folder.name and ".." not in folder.name and len(folder.name) <= 120
    assert runner.variant_dir(tmp_path, "m", {"lambda_cpc": 0.5}).name == "lambda_cpc=0.5"


def test_set_corpus_path_cannot_write_outside_out(tmp_path):
    out = tmp_path / "a" / "b" / "out"
    proc = run_cli("run", "--methods", "waypoint_opd", "--seeds", "1", "--out", str(out), "--no-progress",
                   "--no-summary-notebook", "--set", "corpus_path=../../../x", *[a for s in TINY["waypoint_opd"]
                                                                               for a in ("--set", s)])
    assert proc.returncode == 1, proc.stderr                       # the corpus is missing: a failed notebook
    outside = [p for p in tmp_path.rglob("*") if not p.resolve().is_relative_to(out.resolve())
               and p not in (tmp_path / "a", tmp_path / "a" / "b", out)]
    assert outside == []
    assert list((out / "waypoint_opd").glob("*/seed-1.failed.ipynb"))


def test_huge_seed_range_is_refused_at_once():
    start = time.perf_counter()
    proc = run_cli("run", "--methods", "pinterest_rlbp", "--seeds", "0-100000000", "--no-progress")
    assert proc.returncode == 2 and "--max-jobs" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert time.perf_counter() - start < 30
    with pytest.raises(UsageError, match="100000001 seeds is more than the 10000 allowed"):
        cli.parse_seeds(["0-100000000"], max_count=10_000)


def test_seed_parsing_is_linear_and_bounded():
    start = time.perf_counter()
    seeds = cli.parse_seeds(["0-99999", "5", "50000-150000"], max_count=10**6)
    assert time.perf_counter() - start < 2.0                   # the quadratic version took 33 s for 1e5
    assert len(seeds) == 150001 and seeds[:3] == [0, 1, 2] and seeds[-1] == 150000
    assert cli.count_seeds([(0, 9), (5, 14), (20, 20)]) == 16
    assert cli.parse_seeds(["3,1-2,3"]) == [3, 1, 2]
    assert cli.parse_seeds([str(2**32 - 1)]) == [2**32 - 1]
    with pytest.raises(UsageError, match="at most 2"):
        cli.parse_seeds([str(2**32)])


def test_max_jobs_counts_methods_and_sweep_points():
    proc = run_cli("run", "--seeds", "0-2", "--set", "lambda_cpc=0.5,1", "--max-jobs", "5", "--no-progress")
    assert proc.returncode == 2 and "--max-jobs" in proc.stderr            # (2 rlbp points + 1 opd) x 3 = 9 > 5


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:abc", "tcp://", "tcp://:8786", "tcp://h:0", "tcp://h:99999",
                                     "udp://h:1", "tcp://h:1/x"])
def test_malformed_scheduler_address_is_one_line(tmp_path, address):
    proc = run_cli("run", "--methods", "pinterest_rlbp", "--seeds", "5", "--out", str(tmp_path / "o"),
                   "--no-progress", "--scheduler", address)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "expected local, dask, tls://HOST:PORT or tcp://HOST:PORT" in proc.stderr and not (tmp_path / "o").exists()


def test_unreachable_scheduler_creates_nothing(tmp_path):
    pytest.importorskip("dask.distributed")
    proc = run_cli("run", "--methods", "pinterest_rlbp", "--seeds", "5", "--out", str(tmp_path / "o"),
                   "--no-progress", "--scheduler", "tcp://127.0.0.1:9")
    assert proc.returncode == 2 and "cannot reach the Dask scheduler" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


@pytest.mark.parametrize("content", ["[]", '{"provenance": null}', '"text"', "{corrupt", '{"provenance": {}}'])
def test_seed_json_that_is_not_a_result_is_redone_not_a_traceback(tmp_path, content):
    folder = tmp_path / "pinterest_rlbp"
    folder.mkdir()
    (folder / "seed-5.json").write_text(content)
    (folder / "seed-5.ipynb").write_text("{}")
    job = runner.Job("pinterest_rlbp", 5, folder)
    assert runner.read_result(folder / "seed-5.json") is None
    assert runner.is_fresh(job, {}) is False
    written, problems = runner.write_summaries([job])
    assert written == [] and len(problems) == 1 and "not a readable seed result" in problems[0]


def _fake_run(monkeypatch, status="ok"):
    """Replace the jobs by instant outcomes, so the CLI's reporting can be tested in-process."""
    def fake_execute(todo, **kwargs):
        if kwargs.get("finish"):
            kwargs["finish"]()
        return [{"status": status, "method": j.method, "seed": j.seed, "label": j.label, "error": "boom",
                 "notebook": None} for j in todo]
    monkeypatch.setattr(runner, "execute_jobs", fake_execute)


def test_disk_full_while_writing_the_summary_notebook_is_one_line_after_the_report(tmp_path, monkeypatch, capsys):
    _fake_run(monkeypatch, status="lost")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(runner, "render_summary_notebook", full)
    code = cli.main(["run", "--methods", "pinterest_rlbp", "--seeds", "5", "--out", str(tmp_path / "o"),
                     "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert "LOST: pinterest_rlbp seed 5: boom" in err and "0 ran, 0 current, 1 failed" in err
    assert "ERROR: summary notebook not written: OSError: [Errno 28] No space left on device" in err


def test_disk_full_while_writing_summary_json_is_one_line(tmp_path, monkeypatch, capsys):
    out = outdir.OutDir(tmp_path / "o")
    out.claim()
    out.write("pinterest_rlbp/seed-5.json",
              json.dumps({"provenance": {}, "metrics": {}, "checks": {}, "seed": 5}).encode())
    _fake_run(monkeypatch)
    write = outdir.OutDir.write

    def full(self, rel, data):
        if rel.endswith("summary.json"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return write(self, rel, data)

    monkeypatch.setattr(runner, "summarise", lambda method, results: {"seeds": [5]})
    monkeypatch.setattr(runner.methods.Method, "plot_function", lambda self: (lambda results: {}))
    monkeypatch.setattr(outdir.OutDir, "write", full)
    code = cli.main(["run", "--methods", "pinterest_rlbp", "--seeds", "5", "--out", str(tmp_path / "o"),
                     "--no-progress", "--no-summary-notebook"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and "1 ran, 0 current, 0 failed" in err
    assert "summary.json not written (nothing written): OSError: [Errno 28] No space left on device" in err


def test_local_dask_cluster_gets_no_more_workers_than_jobs(tmp_path, monkeypatch, capsys):
    pytest.importorskip("dask.distributed")
    from litrepro import scheduler

    def fake_connect(name, *, workers=1, local_directory=None, security=None):
        raise UsageError(f"would start {workers} workers")

    monkeypatch.setattr(scheduler, "connect", fake_connect)
    code = cli.main(["run", "--methods", "pinterest_rlbp", "--seeds", "5", "--out", str(tmp_path / "o"),
                     "--no-progress", "--scheduler", "dask", "--jobs", "6"])
    assert code == 2 and "would start 1 workers" in capsys.readouterr().err


def test_the_lock_lives_in_the_runners_own_folder(tmp_path):
    with outdir.lock(tmp_path / "o"):
        pass
    assert (tmp_path / "o" / ".litrepro" / "lock").is_file() and not (tmp_path / "o" / ".litrepro.lock").exists()
    ignored = (ROOT / ".gitignore").read_text().split()
    assert ".litrepro/" in ignored and ".litrepro.lock" in ignored


def test_a_killed_runs_listed_ipc_socket_folders_go_with_its_scratch(tmp_path):
    import tempfile

    from litrepro.kernels import IPC_FALLBACK_LIST, IPC_FALLBACK_PREFIX

    out = tmp_path / "out"
    with outdir.lock(out):
        dead = outdir.new_run_scratch(out)
    ours = Path(tempfile.mkdtemp(prefix=IPC_FALLBACK_PREFIX))
    (ours / "k-1").write_text("")
    users = tmp_path / "litrepro-ipc-users-own"                   # listed, but not in the temp folder: kept
    users.mkdir()
    (dead / "w0" / "k").mkdir(parents=True)
    (dead / "w0" / "k" / IPC_FALLBACK_LIST).write_text(f"{ours}\n{users}\n/\n")
    with outdir.lock(out):
        outdir.remove_stale_scratch(out)
    assert not dead.exists() and not ours.exists() and users.is_dir()
