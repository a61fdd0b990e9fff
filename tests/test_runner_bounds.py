"""Sweeps, summaries and waits that are bounded: each case once failed (a crash, a mismatch or a hang)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import nbformat
import pytest

from conftest import TINY, run_cli
from litrepro import outdir, runner, sweep
from litrepro.kernels import KernelError, KernelSlot
from litrepro.paths import NOTEBOOKS

SETS = [a for s in TINY["pinterest_rlbp"] for a in ("--set", s)]


def _seed_json(seed: int, params: dict, metric: float) -> bytes:
    return json.dumps({"seed": seed, "metrics": {"m": metric}, "checks": {"c": True},
                       "provenance": {"parameters": {**params, "seed": seed}}}).encode()


# ---------------------------------------------------------------- class 7: sweeps and summaries

def test_sweep_summary_handles_a_list_parameter_that_differs_between_points(tmp_path):
    for i, gains in enumerate([[0.5, 1.0, 2.0], [1.0, 2.0, 4.0]]):
        folder = tmp_path / "pinterest_rlbp" / f"p{i}"
        folder.mkdir(parents=True)
        for seed in (1, 2):
            (folder / f"seed-{seed}.json").write_bytes(_seed_json(seed, {"gain_multipliers": gains}, seed + 10 * i))
    table, swept = sweep.load_sweep(tmp_path, "pinterest_rlbp")
    assert swept == ["gain_multipliers"]
    assert list(table["gain_multipliers"]) == ["[0.5, 1.0, 2.0]"] * 2 + ["[1.0, 2.0, 4.0]"] * 2
    assert list(table["m"]) == [1, 2, 11, 12]
    fig = sweep.metric_vs_value(table, "m", "gain_multipliers")
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["[0.5, 1.0, 2.0]", "[1.0, 2.0, 4.0]"]


def test_no_plain_value_names_the_folder_of_a_hashed_one(tmp_path):
    hashed = runner.variant_dir(tmp_path, "waypoint_opd", {"corpus_path": "a/b"}).name
    value = hashed.split("=", 1)[1]
    assert value.startswith("@h")
    imitation = runner.variant_dir(tmp_path, "waypoint_opd", {"corpus_path": value}).name
    assert imitation != hashed and imitation.split("=", 1)[1].startswith("@h")
    plain = runner.variant_dir(tmp_path, "waypoint_opd", {"corpus_path": value[1:]}).name  # "h<hex>": plain text
    assert plain == f"corpus_path={value[1:]}" != hashed


def test_summary_json_covers_the_same_seeds_as_the_summary_notebook(tmp_path, monkeypatch):
    from litrepro import summary

    out = outdir.OutDir(tmp_path / "o")
    out.claim()
    for seed in (42, 43):
        out.write(f"pinterest_rlbp/seed-{seed}.json", _seed_json(seed, {}, seed))
    monkeypatch.setattr(runner, "summarise", lambda method, results: {"seeds": [r["seed"] for r in results]})
    monkeypatch.setattr(runner.methods.Method, "plot_function", lambda self: (lambda results: {}))
    job = runner.Job("pinterest_rlbp", 43, out.root / "pinterest_rlbp", root=out.root)   # a run of --seeds 43 alone
    written, problems = runner.write_summaries([job])
    assert problems == [] and written == [out.root / "pinterest_rlbp" / "summary.json"]
    in_json = json.loads((out.root / "pinterest_rlbp" / "summary.json").read_text())["seeds"]
    in_notebook = [r["seed"] for r in summary.load_seed_results(out.root, "pinterest_rlbp")]
    assert in_json == in_notebook == [42, 43]


# ---------------------------------------------------------------- class 5: nothing hangs

def test_a_warm_kernel_stopped_between_notebooks_is_lost_after_the_slots_timeout(tmp_path):
    slot = KernelSlot(reuse=3, scratch=tmp_path / "s", cwd=NOTEBOOKS, preload=False, timeout=120)
    try:
        slot.acquire(tmp_path / "r1.json")
        slot.timeout = 3                                            # as KernelSlot(timeout=3), after a slow start
        os.kill(slot.pid, signal.SIGSTOP)
        start = time.monotonic()
        with pytest.raises(KernelError, match="no reply in 3 s"):
            slot.acquire(tmp_path / "r2.json")
        assert time.monotonic() - start < 30                        # not the old fixed 120 s
    finally:
        slot.kill()


def test_a_summary_notebook_is_bounded_by_the_cell_timeout(tmp_path):
    from nbclient.exceptions import CellTimeoutError

    source = tmp_path / "slow.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("import time\ntime.sleep(600)")]
    nbformat.write(nb, source)
    start = time.monotonic()
    with pytest.raises(CellTimeoutError):
        runner._execute_summary(source, tmp_path / "done.ipynb", {}, tmp_path / "s", cell_timeout=3)
    assert time.monotonic() - start < 60


def test_a_stopped_worker_is_lost_after_the_cell_timeout_not_waited_for(tmp_path):
    proc = run_cli("run", "--methods", "pinterest_rlbp", "--seeds", "5", "--out", str(tmp_path / "o"),
                   "--no-progress", "--no-summary-notebook", "--cell-timeout", "5", *SETS,
                   env={"LITREPRO_TEST_FAULT": "stopworker:pinterest_rlbp:5"}, timeout=180)   # the old runner hung
    assert proc.returncode == 1 and "LOST" in proc.stderr and "no sign of life for 5 s" in proc.stderr, proc.stderr


# ---------------------------------------------------------------- classes 3 and 8: paths, and nothing outside --out

def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_a_relative_long_non_ascii_out_runs_and_leaves_nothing_in_home_or_tmpdir(tmp_path):
    """Relative --out whose absolute path is past 107 bytes in UTF-8 (not in characters); read-only HOME."""
    from conftest import ROOT

    home, tmpdir = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmpdir.mkdir()
    (home / ".keep").write_text("")
    home.chmod(0o555)
    out = tmp_path / ("ü" * 30) / "out"
    relative = os.path.relpath(out, ROOT.parent)                      # run_cli runs in ROOT.parent
    assert not os.path.isabs(relative) and len(str(out)) < 107 < len(os.fsencode(str(out)) + b"/.litrepro/scratch")
    env = {"HOME": str(home), "TMPDIR": str(tmpdir), "XDG_RUNTIME_DIR": "", "XDG_CACHE_HOME": "", "XDG_CONFIG_HOME": ""}
    env = {k: v for k, v in env.items() if v} | {"IPYTHONDIR": "", "MPLCONFIGDIR": ""}
    try:
        proc = run_cli("run", "--methods", "pinterest_rlbp", "--seeds", "5", "--out", relative, "--no-progress",
                       "--no-summary-notebook", "--fresh-kernels", *SETS, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr
        assert _tree(home) == {".keep"} and _tree(tmpdir) == set()
        folder = out / "pinterest_rlbp" / ",".join(sorted(TINY["pinterest_rlbp"]))
        notebook = (folder / "seed-5.ipynb").read_text()
        assert "Matplotlib created a temporary" not in notebook and "is not a writable directory" not in notebook
        assert str(home) not in notebook and str(tmpdir) not in notebook and ".litrepro" not in notebook
        assert not list((out / ".litrepro" / "scratch").iterdir())
    finally:
        home.chmod(0o755)
