"""Faults: killed runs, concurrent runs, dying workers, Dask scale-out. Real processes, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import TINY, run_cli
from litrepro import outdir, runner
from litrepro.paths import ROOT

SETS = [a for s in TINY["pinterest_rlbp"] for a in ("--set", s)]
FOLDER = ",".join(sorted(TINY["pinterest_rlbp"]))


def _args(out, *seeds, extra=()):
    return ["run", "--methods", "pinterest_rlbp", "--seeds", *map(str, seeds), "--out", str(out), "--no-progress",
            "--no-summary-notebook", *SETS, *extra]


@pytest.fixture(scope="module")
def done_seed(tmp_path_factory):
    """An output folder where seed 5 is complete."""
    out = tmp_path_factory.mktemp("faults")
    proc = run_cli(*_args(out, 5))
    assert proc.returncode == 0, proc.stderr
    return out


def _outputs(out):
    return {p.name: p.read_bytes() for p in (out / "pinterest_rlbp" / FOLDER).glob("seed-*")}


def test_sigkill_mid_notebook_leaves_no_partial_output_and_resumes(done_seed):
    out = done_seed
    before = _outputs(out)
    proc = subprocess.Popen([sys.executable, "-m", "litrepro", *_args(out, 5, 6, extra=["--force"])],
                            cwd=ROOT.parent, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    folder = out / "pinterest_rlbp" / FOLDER
    scratch = out / ".litrepro" / "scratch"
    deadline = time.time() + 120
    while time.time() < deadline and not list(scratch.glob("*/w*/seed-6-*/*.ipynb")):
        time.sleep(0.05)            # papermill has started writing seed 6's notebook: mid-notebook
    assert list(scratch.glob("*/w*/seed-6-*")), "the run never reached seed 6"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    after = _outputs(out)
    assert "seed-6.json" not in after and "seed-6.ipynb" not in after
    for name, data in after.items():                      # what exists is whole
        if name.endswith(".json"):
            assert json.loads(data)["seed"] == 5
    assert after["seed-5.json"] == before["seed-5.json"]    # untouched, or atomically replaced by identical bytes
    resumed = run_cli(*_args(out, 5, 6))
    assert resumed.returncode == 0, resumed.stderr
    assert "skipping 1 job" in resumed.stderr and "1 ran" in resumed.stderr   # only the missing seed reran
    assert {"seed-5.json", "seed-6.json", "seed-6.ipynb"} <= set(_outputs(out))
    assert not list(scratch.iterdir())                    # the killed run's scratch, and this run's, are gone
    assert not list(folder.glob(".*.tmp"))


def test_second_run_on_the_same_out_is_refused(tmp_path):
    with outdir.lock(tmp_path):
        proc = run_cli(*_args(tmp_path, 5))
    assert proc.returncode == 2
    assert "another 'litrepro run' is writing to" in proc.stderr
    assert not (tmp_path / "pinterest_rlbp").exists()


def test_dying_worker_is_reported_and_others_finish(done_seed, tmp_path):
    proc = run_cli(*_args(done_seed, 5, 6, extra=["--force"]), env={"LITREPRO_TEST_FAULT": "worker:pinterest_rlbp:6"})
    assert proc.returncode == 1
    assert "LOST: pinterest_rlbp[" in proc.stderr and "seed 6" in proc.stderr and "killed by signal 9" in proc.stderr
    assert "1 ran" in proc.stderr                       # seed 5 finished


def test_retries_rerun_a_lost_job(done_seed, tmp_path):
    once = tmp_path / "died-once"
    proc = run_cli(*_args(done_seed, 6, extra=["--force", "--retries", "1"]),
                   env={"LITREPRO_TEST_FAULT": f"worker:pinterest_rlbp:6:{once}"})
    assert proc.returncode == 0, proc.stderr
    assert once.exists()                                # it did die once


def test_lost_and_failed_are_retried_only_as_asked():
    calls = []

    def submit(job):
        calls.append(job.seed)
        status = {1: "lost", 2: "failed"}.get(job.seed, "ok")
        return {"status": status, "method": job.method, "seed": job.seed, "error": "x"}

    jobs = [runner.Job("pinterest_rlbp", s, ROOT) for s in (1, 2, 3)]
    out = runner.execute_jobs(jobs, workers=2, retries=2, submit=submit, progress=False)
    assert sorted(calls) == [1, 1, 1, 2, 3] and [o["status"] for o in out] == ["lost", "failed", "ok"]
    calls.clear()
    runner.execute_jobs(jobs, workers=2, retries=1, retry_failed=True, submit=submit, progress=False)
    assert sorted(calls) == [1, 1, 2, 2, 3]

    def raising(job):
        raise RuntimeError("worker connection lost")

    lost = runner.execute_jobs(jobs[:1], workers=1, submit=raising, progress=False)
    assert lost[0]["status"] == "lost" and "worker connection lost" in lost[0]["error"]


def test_dask_local_cluster_matches_a_local_run(done_seed, tmp_path):
    pytest.importorskip("dask.distributed")
    proc = run_cli(*_args(tmp_path, 5, extra=["--scheduler", "dask", "--jobs", "2"]))
    assert proc.returncode == 0, proc.stderr
    dask_result = json.loads((tmp_path / "pinterest_rlbp" / FOLDER / "seed-5.json").read_text())
    local_result = json.loads((done_seed / "pinterest_rlbp" / FOLDER / "seed-5.json").read_text())
    for key in ("metrics", "checks", "curves", "beyond_seed_metrics", "dataset_fingerprint"):
        assert dask_result[key] == local_result[key], key


@pytest.fixture
def own_tmp():
    """A TMPDIR and XDG_RUNTIME_DIR of this test's own, so that no other process on the machine can fail its
    litter check (it once compared the machine-wide /tmp).  Short: the kernels' fallback socket folders
    (107-byte limit) go to $XDG_RUNTIME_DIR first."""
    import shutil
    import tempfile
    from pathlib import Path

    root = Path(tempfile.mkdtemp(prefix="lr-"))
    (root / "tmp").mkdir()
    (root / "run").mkdir(mode=0o700)
    yield root, {"TMPDIR": str(root / "tmp"), "XDG_RUNTIME_DIR": str(root / "run")}
    shutil.rmtree(root, ignore_errors=True)


def _tmp_litter(root) -> set[str]:
    """Everything a run left in the test's own temporary folders."""
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.parent != root}


def test_dask_worker_lost_mid_job_is_rescheduled_and_leaves_no_scratch(tmp_path, own_tmp):
    pytest.importorskip("dask.distributed")
    root, env = own_tmp
    once = tmp_path / "dask-died-once"
    out = tmp_path / "out"
    outdir.claim(out)                                          # stale, from an earlier failure of the runner
    outdir.OutDir(out).write(f"pinterest_rlbp/{FOLDER}/seed-5.failed.ipynb", b"{}")
    proc = run_cli(*_args(out, 5, extra=["--scheduler", "dask", "--jobs", "2"]),
                   env={"LITREPRO_TEST_FAULT": f"dask:pinterest_rlbp:5:{once}", **env})
    assert once.exists() and proc.returncode == 0, proc.stderr
    assert (out / "pinterest_rlbp" / FOLDER / "seed-5.json").is_file()
    assert not (out / "pinterest_rlbp" / FOLDER / "seed-5.failed.ipynb").exists()
    assert _tmp_litter(root) == set() and not list((out / ".litrepro" / "scratch").iterdir())


def _descendants(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc), kernels in their own sessions included."""
    children: dict[int, list[int]] = {}
    for stat in os.listdir("/proc"):
        if stat.isdigit():
            try:
                fields = open(f"/proc/{stat}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(stat))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigkilled_runner_leaves_no_worker_or_kernel_alive(tmp_path, own_tmp):
    root, env = own_tmp
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "litrepro", *_args(out, 5, 6, extra=["--jobs", "2"])],
                            cwd=ROOT.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **env})
    scratch = out / ".litrepro" / "scratch"
    deadline = time.time() + 120
    while time.time() < deadline and len(list(scratch.glob("*/w*/seed-*/*.ipynb"))) < 2:
        time.sleep(0.05)                                      # both notebooks are executing in their kernels
    family = _descendants(proc.pid)
    assert len(family) >= 4, family                           # two workers, two kernels
    litter = _tmp_litter(root)
    proc.kill()                                               # the runner alone: not its process group
    proc.wait()
    deadline = time.time() + 15
    while time.time() < deadline and any(_alive(p) for p in family):
        time.sleep(0.1)
    assert not [p for p in family if _alive(p)]
    time.sleep(1.0)
    assert not list((out / "pinterest_rlbp").rglob("seed-*.json"))   # nobody kept writing after the runner died
    assert _tmp_litter(root) <= litter                        # the kernels' sockets were in the scratch


def test_kernel_killed_mid_notebook_is_lost_kept_and_retried(done_seed, tmp_path):
    folder = done_seed / "pinterest_rlbp" / FOLDER
    proc = run_cli(*_args(done_seed, 6, extra=["--force"]), env={"LITREPRO_TEST_FAULT": "kernel:pinterest_rlbp:6"})
    assert proc.returncode == 1
    assert "LOST: pinterest_rlbp[" in proc.stderr and "kernel died mid-notebook" in proc.stderr, proc.stderr
    assert (folder / "seed-6.failed.ipynb").is_file()          # the partial notebook is kept
    once = tmp_path / "kernel-died-once"
    proc = run_cli(*_args(done_seed, 6, extra=["--force", "--retries", "1"]),
                   env={"LITREPRO_TEST_FAULT": f"kernel:pinterest_rlbp:6:{once}"})
    assert once.exists() and proc.returncode == 0, proc.stderr
    assert (folder / "seed-6.json").is_file() and not (folder / "seed-6.failed.ipynb").exists()


def test_hung_notebook_fails_after_cell_timeout_and_the_next_job_runs(tmp_path):
    """A kernel that stops answering (SIGSTOP) mid-notebook: the job fails after --cell-timeout, with its
    partial notebook kept, and the same worker runs the next seed in a replacement kernel."""
    out = tmp_path / "out"
    proc = run_cli(*_args(out, 6, 7, extra=["--jobs", "1", "--cell-timeout", "5"]),
                   env={"LITREPRO_TEST_FAULT": "hang:pinterest_rlbp:6"}, timeout=240)   # no timeout: this hangs
    assert proc.returncode == 1, proc.stderr
    assert "FAILED: pinterest_rlbp[" in proc.stderr and "longer than --cell-timeout 5 s" in proc.stderr, proc.stderr
    assert "1 ran, 0 current, 1 failed" in proc.stderr
    folder = out / "pinterest_rlbp" / FOLDER
    assert (folder / "seed-6.failed.ipynb").is_file() and not (folder / "seed-6.json").exists()
    assert (folder / "seed-7.json").is_file()


def test_cell_timeout_zero_means_no_limit(tmp_path):
    proc = run_cli(*_args(tmp_path / "out", 5, extra=["--cell-timeout", "0"]))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "pinterest_rlbp" / FOLDER / "seed-5.json").is_file()


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_bad_cell_timeout_is_one_line(tmp_path, value):
    proc = run_cli(*_args(tmp_path / "out", 5, extra=["--cell-timeout", value]))
    assert proc.returncode == 2 and "--cell-timeout" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_unreachable_scheduler_fails_within_seconds(tmp_path):
    pytest.importorskip("dask.distributed")
    start = time.time()
    proc = run_cli(*_args(tmp_path / "out", 5, extra=["--scheduler", "tcp://127.0.0.1:9"]))
    assert proc.returncode == 2 and "cannot reach the Dask scheduler" in proc.stderr
    assert time.time() - start < 45
    assert not (tmp_path / "out").exists()                 # neither --out nor its lock was created


def test_corrupt_seed_json_whose_redo_fails_is_one_line_per_problem(tmp_path):
    out = outdir.OutDir(tmp_path / "out")                      # the runner's own files, corrupted since
    out.claim()
    out.write(f"pinterest_rlbp/{FOLDER}/seed-5.json", b"{corrupt")
    out.write(f"pinterest_rlbp/{FOLDER}/seed-5.ipynb", b"{}")
    proc = run_cli(*_args(tmp_path / "out", 5), env={"LITREPRO_TEST_FAULT": "worker:pinterest_rlbp:5"})
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("LOST: pinterest_rlbp[") and lines[1] == "0 ran, 0 current, 1 failed"
    assert lines[2].startswith("ERROR: ") and "seed-5.json: not a readable seed result" in lines[2]
