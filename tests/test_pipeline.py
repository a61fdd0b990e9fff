"""The CLI end to end on small configurations: outputs, skipping, failures, bad input."""

from __future__ import annotations

import json

import nbformat
import pytest

from conftest import TINY, run_cli
from litrepro import recorded
from litrepro.runner import variant_dir
from litrepro.summary import mean_std


def _sets(method):
    """The tiny configuration as --set flags (and no summary notebook, which one test covers)."""
    return [arg for s in TINY[method] for arg in ("--set", s)] + ["--no-summary-notebook"]


def _overrides(method):
    return {k: v for k, v in (s.split("=") for s in TINY[method])}


TINY_SETS = [arg for s in TINY["pinterest_rlbp"] for arg in ("--set", s)]


@pytest.fixture(scope="module")
def rlbp_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    proc = run_cli("run", "--methods", "pinterest_rlbp", "--seeds", "7,8", "--jobs", "2", "--out", str(out),
                   "--no-progress", *TINY_SETS)
    assert proc.returncode == 0, proc.stderr
    folder = next((out / "pinterest_rlbp").iterdir())
    return out, folder, proc


def test_run_writes_notebooks_json_summary_and_plots(rlbp_run):
    out, folder, _ = rlbp_run
    assert folder.name == ",".join(f"{k}={v}" for k, v in sorted(_overrides("pinterest_rlbp").items()))
    for seed in (7, 8):
        nb = nbformat.read(folder / f"seed-{seed}.ipynb", as_version=4)
        assert not [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert "start_time" not in nb.metadata["papermill"]                  # volatile metadata removed
        result = json.loads((folder / f"seed-{seed}.json").read_text())
        assert result["seed"] == seed and result["provenance"]["parameters"]["n_campaigns"] == 16
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["seeds"] == [7, 8] and summary["schema_version"] == 2
    per = [r["metrics"]["td_loss_after"] for r in summary["per_seed"]]
    assert summary["metrics"]["td_loss_after"] == mean_std(per)
    for name in ("td_loss_value.png", "td_loss_cpc.png", "ips_vs_truth.png"):
        assert (folder / name).stat().st_size > 1000
    assert not list(folder.glob(".tmp-*")) and not list(folder.glob("*.tmp"))


def test_summary_notebook_and_html_are_written(rlbp_run):
    out, _, _ = rlbp_run
    # The summary notebook reads <out>/<method>/seed-*.json; a sweep folder is one level deeper.
    assert not (out / "summary.ipynb").exists()
    from litrepro.runner import render_summary_notebook

    folder = next((out / "pinterest_rlbp").iterdir())
    flat = out / "flat"
    (flat / "pinterest_rlbp").mkdir(parents=True)
    for p in folder.glob("seed-*.json"):
        (flat / "pinterest_rlbp" / p.name).write_bytes(p.read_bytes())
    assert render_summary_notebook(flat) == flat / "summary.ipynb"
    nb = nbformat.read(flat / "summary.ipynb", as_version=4)
    assert not [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "pinterest_rlbp: seeds [7, 8]" in text
    assert (flat / "summary.html").stat().st_size > 10000


def test_run_carries_every_seed_name(rlbp_run):
    _, folder, _ = rlbp_run
    summary = json.loads((folder / "summary.json").read_text())
    if recorded.load("pinterest_rlbp") is None:
        pytest.skip("seed files not available (LITREPRO_SEEDS_DIR)")
    assert set(recorded.aggregate_metrics("pinterest_rlbp")) <= set(summary["metrics"])
    assert set(recorded.check_names("pinterest_rlbp")) <= set(summary["checks"])


def test_rerun_skips_current_outputs_and_force_reruns(rlbp_run):
    out, folder, _ = rlbp_run
    before = (folder / "seed-7.json").stat().st_mtime_ns
    proc = run_cli("run", "--methods", "pinterest_rlbp", "--seeds", "7", "--out", str(out), "--no-progress",
                   *_sets("pinterest_rlbp"))
    assert proc.returncode == 0 and "skipping 1 job" in proc.stderr
    assert (folder / "seed-7.json").stat().st_mtime_ns == before
    proc = run_cli("run", "--methods", "pinterest_rlbp", "--seeds", "7", "--out", str(out), "--no-progress",
                   "--force", *_sets("pinterest_rlbp"))
    assert proc.returncode == 0 and (folder / "seed-7.json").stat().st_mtime_ns != before


def test_failing_seed_keeps_earlier_results_and_other_methods_finish(rlbp_run, tmp_path):
    """waypoint_opd fails (no corpus) while pinterest_rlbp finishes; nothing earlier is lost."""
    out, folder, _ = rlbp_run
    kept = (folder / "seed-8.json").read_bytes()
    proc = run_cli("run", "--methods", "pinterest_rlbp", "waypoint_opd", "--seeds", "8", "--out", str(out),
                   "--no-progress", "--force", *_sets("pinterest_rlbp"),
                   env={"LITREPRO_CORPUS": str(tmp_path / "missing.txt")})
    assert proc.returncode == 1
    assert "FAILED: waypoint_opd" in proc.stderr and "seed-8.failed.ipynb" in proc.stderr and "cell" in proc.stderr
    assert "CorpusMissing" in proc.stderr
    assert (folder / "seed-8.json").is_file() and (folder / "seed-8.json").read_bytes() != b""
    assert json.loads((folder / "seed-8.json").read_text())["seed"] == 8
    assert (folder / "seed-8.json").read_bytes() == kept             # deterministic rerun of the same seed
    assert not (out / "waypoint_opd" / "seed-8.json").exists()


def test_failed_rerun_does_not_destroy_a_good_result(tmp_path, corpus_path):
    out = tmp_path / "out"
    args = ["run", "--methods", "waypoint_opd", "--seeds", "3", "--out", str(out), "--no-progress", *_sets("waypoint_opd")]
    assert run_cli(*args).returncode == 0
    folder = variant_dir(out, "waypoint_opd", _overrides("waypoint_opd"))
    good = (folder / "seed-3.json").read_bytes()
    proc = run_cli(*args, "--force", env={"LITREPRO_CORPUS": str(tmp_path / "gone.txt")})
    assert proc.returncode == 1
    assert (folder / "seed-3.json").read_bytes() == good
    assert (folder / "seed-3.failed.ipynb").is_file()
    result = json.loads(good)
    assert result["checks"]["heldout_bytes_not_used_for_training"] is True
    assert [h["step"] for h in result["history"]] == [0, 1]


@pytest.mark.parametrize("args, message", [
    (["--methods", "nope"], "unknown method 'nope'"),
    (["--seeds", "5-x"], "--seeds: '5-x' is not a seed or a range"),
    (["--seeds", "9-3"], "range '9-3' is empty"),
    (["--set", "lamda_cpc=1"], "unknown parameter 'lamda_cpc'"),
    (["--set", "top_k=1", "--set", "top_k=2"], "parameter given twice"),
    (["--set", "top_k=12"], "'top_k' = 12 is out of range"),
    (["--set", "top_k"], "expected key=value"),
    (["--out", "/proc/litrepro-out"], "not a writable folder"),
])
def test_bad_input_is_one_clear_line_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "out"
    full = ["run", "--methods", "pinterest_rlbp", "--no-progress", *(["--out", str(out)] if "--out" not in args else []), *args]
    proc = run_cli(*full)
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_seed_ranges_and_lists():
    from litrepro.cli import parse_seeds

    assert parse_seeds(["0-3", "7,9", "3"]) == [0, 1, 2, 3, 7, 9]


def test_a_sweep_gets_a_summary_notebook_with_each_metric_against_the_swept_value(tmp_path):
    out = tmp_path / "out"
    proc = run_cli("run", "--methods", "pinterest_rlbp", "--seeds", "7", "--out", str(out), "--no-progress",
                   *TINY_SETS, "--set", "lambda_cpc=0.5,2")
    assert proc.returncode == 0, proc.stderr
    nb = nbformat.read(out / "sweep_summary.ipynb", as_version=4)
    assert not [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "pinterest_rlbp: 2 results, swept: ['lambda_cpc']" in text
    pngs = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    n_metrics = len(json.loads(next(out.glob("pinterest_rlbp/*/seed-7.json")).read_text())["metrics"])
    assert len(pngs) == n_metrics                             # one plot per metric against lambda_cpc
    assert (out / "sweep_summary.html").stat().st_size > 10000


def test_sweep_table_finds_the_swept_parameter(tmp_path):
    from litrepro import sweep

    for value, metric in ((0.5, 1.0), (2.0, 3.0)):
        folder = tmp_path / "m" / f"lambda_cpc={value}"
        folder.mkdir(parents=True)
        for seed in (1, 2):
            (folder / f"seed-{seed}.json").write_text(json.dumps(
                {"seed": seed, "metrics": {"loss": metric + seed, "ok": True},
                 "provenance": {"parameters": {"seed": seed, "lambda_cpc": value, "n": 3}}}))
    (tmp_path / "m" / "junk").mkdir()
    (tmp_path / "m" / "junk" / "seed-1.json").write_text("[]")
    table, swept = sweep.load_sweep(tmp_path, "m")
    assert swept == ["lambda_cpc"] and list(table.columns) == ["lambda_cpc", "seed", "loss"]
    assert table["loss"].tolist() == [2.0, 3.0, 4.0, 5.0]
    fig = sweep.metric_vs_value(table, "loss", "lambda_cpc", method="m")
    assert fig.axes[0].get_xlabel() == "lambda_cpc"
