"""Attacks on --out: links, foreign files, FIFOs, killed publishes. Each case once failed; none runs a notebook."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TINY, run_cli
from litrepro import cli, outdir
from litrepro.errors import LitreproError, UsageError

SETS = [a for s in TINY["pinterest_rlbp"] for a in ("--set", s)]
FOLDER = ",".join(sorted(TINY["pinterest_rlbp"]))


def _run(out: Path, *extra: str) -> list[str]:
    return ["run", "--methods", "pinterest_rlbp", "--seeds", "5", "--out", str(out), "--no-progress",
            "--no-summary-notebook", *SETS, *extra]


def _refused(capsys, code: int, *words: str) -> str:
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, err
    return err


@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "victim.txt"
    path.write_text("the user's file")
    return path


# ---------------------------------------------------------------- class 1: links inside --out

def test_a_lock_that_is_a_link_is_refused_and_its_target_not_truncated(tmp_path, victim, capsys):
    out = tmp_path / "out"
    outdir.claim(out)
    (out / ".litrepro" / "lock").symlink_to(victim)
    with pytest.raises(outdir.Refused, match="lock"):
        with outdir.lock(out):
            pass
    _refused(capsys, cli.main(_run(out)), "lock", "symlink")
    assert victim.read_text() == "the user's file"


def test_a_state_folder_that_is_a_link_is_refused(tmp_path, capsys):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / ".litrepro").symlink_to(elsewhere)
    _refused(capsys, cli.main(_run(out)), ".litrepro")
    assert list(elsewhere.iterdir()) == []


def test_a_method_folder_that_is_a_link_is_refused_and_nothing_there_changes(tmp_path, capsys):
    out, mine = tmp_path / "out", tmp_path / "mydir"
    outdir.claim(out)
    (mine / FOLDER).mkdir(parents=True)
    (mine / FOLDER / "summary.json").write_text("mine")
    (mine / FOLDER / "seed-5.failed.ipynb").write_text("mine too")
    (out / "pinterest_rlbp").symlink_to(mine)
    before = {p: p.read_bytes() for p in mine.rglob("*") if p.is_file()}
    _refused(capsys, cli.main(_run(out)), "pinterest_rlbp", "symlink")
    assert {p: p.read_bytes() for p in mine.rglob("*") if p.is_file()} == before


def test_a_seed_file_that_is_a_link_is_refused(tmp_path, victim, capsys):
    out = tmp_path / "out"
    outdir.claim(out)
    (out / "pinterest_rlbp" / FOLDER).mkdir(parents=True)
    (out / "pinterest_rlbp" / FOLDER / "seed-5.json").symlink_to(victim)
    _refused(capsys, cli.main(_run(out)), "seed-5.json", "symlink")
    assert victim.read_text() == "the user's file" and (out / "pinterest_rlbp" / FOLDER / "seed-5.json").is_symlink()


def test_a_folder_swapped_for_a_link_after_the_check_is_still_not_followed(tmp_path, victim):
    out = outdir.OutDir(tmp_path / "out")
    out.claim()
    out.write("m/a.json", b"1")
    os.rename(out.root / "m", tmp_path / "moved")
    (out.root / "m").symlink_to(victim.parent)                 # the attacker's link, planted between two writes
    with pytest.raises(outdir.Refused, match="symlink"):
        out.write("m/victim.txt", b"overwritten")
    with pytest.raises(outdir.Refused):
        out.remove("m/victim.txt")
    assert victim.read_text() == "the user's file"


def test_a_fifo_where_a_seed_file_is_expected_is_refused_without_blocking(tmp_path):
    out = tmp_path / "out"
    outdir.claim(out)
    (out / "pinterest_rlbp" / FOLDER).mkdir(parents=True)
    os.mkfifo(out / "pinterest_rlbp" / FOLDER / "seed-5.json")
    proc = run_cli(*_run(out), timeout=120)                    # the old freshness check blocked here forever
    assert proc.returncode == 2 and "FIFO" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    with pytest.raises(outdir.Refused, match="FIFO"):
        outdir.OutDir(out).read(f"pinterest_rlbp/{FOLDER}/seed-5.json")


# ---------------------------------------------------------------- class 2: foreign folders

@pytest.mark.parametrize("files", [{"summary.html": "my page"},
                                   {"waypoint_opd/summary.json": "{}", "waypoint_opd/notes.md": "n"}])
def test_a_folder_of_litrepro_like_names_without_a_record_is_refused(tmp_path, files, capsys):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    _refused(capsys, cli.main(_run(tmp_path)), "not a litrepro output folder")
    assert not (tmp_path / ".litrepro").exists()
    assert all((tmp_path / n).read_text() == t for n, t in files.items())


def test_only_recorded_files_with_their_recorded_bytes_are_replaced_or_deleted(tmp_path, capsys):
    out = outdir.OutDir(tmp_path / "out")
    out.claim()
    out.write("pinterest_rlbp/summary.json", b"ours")
    out.write("pinterest_rlbp/seed-7.json", b"ours")
    (out.root / "pinterest_rlbp" / "seed-7.json").write_bytes(b"edited by the user")
    (out.root / "pinterest_rlbp" / "seed-8.json").write_bytes(b"the user's")
    out.write("pinterest_rlbp/summary.json", b"ours again")               # recorded, unchanged: replaced
    for rel in ("pinterest_rlbp/seed-7.json", "pinterest_rlbp/seed-8.json"):
        with pytest.raises(outdir.Refused, match="not written by litrepro"):
            out.write(rel, b"x")
        with pytest.raises(outdir.Refused, match=rel.split("/")[1]):
            out.remove(rel)
    assert (out.root / "pinterest_rlbp" / "seed-7.json").read_bytes() == b"edited by the user"
    assert (out.root / "pinterest_rlbp" / "seed-8.json").read_bytes() == b"the user's"
    assert out.remove("pinterest_rlbp/summary.json") and not (out.root / "pinterest_rlbp" / "summary.json").exists()
    # the CLI refuses before it writes anything: a seed file that is not its own
    (out.root / "pinterest_rlbp" / FOLDER).mkdir()
    (out.root / "pinterest_rlbp" / FOLDER / "seed-5.failed.ipynb").write_text("user's notes")
    _refused(capsys, cli.main(_run(out.root)), "seed-5.failed.ipynb", "not written by litrepro")
    assert (out.root / "pinterest_rlbp" / FOLDER / "seed-5.failed.ipynb").read_text() == "user's notes"


def test_the_projects_rendered_folder_adopts_only_committed_unmodified_files(tmp_path):
    if subprocess.run(["git", "--version"], capture_output=True).returncode != 0:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    (repo / "rendered" / "m").mkdir(parents=True)
    for name in ("kept.json", "edited.json"):
        (repo / "rendered" / "m" / name).write_text("committed")
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    (repo / "rendered" / "m" / "edited.json").write_text("edited, uncommitted")
    (repo / "rendered" / "m" / "untracked.json").write_text("new")
    out = outdir.OutDir(repo / "rendered")
    out.claim()
    assert out.adopt_git_tracked(repo) == 1
    out.write("m/kept.json", b"re-rendered")
    for name in ("edited.json", "untracked.json"):
        with pytest.raises(outdir.Refused, match=name):
            out.write(f"m/{name}", b"x")


# ---------------------------------------------------------------- class 6: partial files of killed runs

def test_a_publish_killed_at_the_rename_leaves_a_partial_the_next_run_removes(tmp_path):
    out = tmp_path / "out"
    outdir.claim(out)
    (out / "m").mkdir()
    (out / "m" / ".draft.tmp").write_text("the user's")                 # looks like ours, is not recorded
    code = ("import os, signal, sys\nfrom litrepro import outdir\no = outdir.OutDir(sys.argv[1])\n"
            "os.rename = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\no.write('m/seed-1.json', b'x')\n")
    proc = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    partial = [p for p in (out / "m").iterdir() if p.name.startswith(".seed-1.json.")]
    assert len(partial) == 1                                             # the SIGKILL left it behind
    with outdir.lock(out):
        outdir.remove_stale_scratch(out)
    assert not partial[0].exists() and (out / "m" / ".draft.tmp").read_text() == "the user's"
    assert outdir.OutDir(out).record()[1] == set()


# ---------------------------------------------------------------- class 3 and 9: paths and inputs

def test_out_is_made_absolute_and_checked_in_bytes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert outdir.absolute("rel/out") == tmp_path / "rel" / "out"
    with pytest.raises(UsageError, match="control characters"):
        outdir.absolute("a\nERROR: forged")
    with pytest.raises(UsageError, match="too long"):
        outdir.absolute("é" * 130)                                     # 130 characters, 260 bytes: one name too long


@pytest.mark.parametrize("args, words", [
    (["--set", "n_campaigns=" + "9" * 5000], ["n_campaigns"]),
    (["--out", "x\nERROR: forged"], ["control characters"]),
    (["--kernel-reuse", "0"], ["--kernel-reuse must be >= 1"]),
    (["--out", "/tmp/" + "x" * 300], ["too long"]),
])
def test_bad_inputs_end_in_one_line_and_status_2(tmp_path, capsys, args, words):
    base = ["run", "--methods", "pinterest_rlbp", "--seeds", "5", "--no-progress"]
    if "--out" not in args:
        base += ["--out", str(tmp_path / "o")]
    _refused(capsys, cli.main(base + args), *words)
    assert not (tmp_path / "o").exists()


def test_max_jobs_raises_the_sweep_point_cap():
    settings = ["critic_steps=" + ",".join(str(i) for i in range(1, 102)),
                "actor_steps=" + ",".join(str(i) for i in range(1, 102))]        # 10,201 points
    with pytest.raises(LitreproError, match="10201 sweep points is more than the 10000 allowed"):
        cli.sweep_points(settings, ["pinterest_rlbp"])
    assert len(cli.sweep_points(settings, ["pinterest_rlbp"], max_points=20_000)["pinterest_rlbp"]) == 10_201


def test_compaction_keeps_one_line_per_existing_file_and_the_record_still_proves_ownership(tmp_path):
    out = outdir.OutDir(tmp_path / "out")
    out.claim()
    for data in (b"1", b"2", b"3"):
        out.write("m/a.json", data)
    out.write("m/b.json", b"b")
    (out.root / "m" / "b.json").unlink()                               # removed by the user: dropped from the record
    out.compact()
    lines = (out.root / ".litrepro" / "OWNER").read_text().splitlines()
    assert len(lines) == 1 and '"m/a.json"' in lines[0]
    out.write("m/a.json", b"4")                                          # still ours after compaction
    assert out.record()[0] == {"m/a.json": outdir.sha256_bytes(b"4")}
