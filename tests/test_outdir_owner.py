"""An ``--out`` no other user controls (issue 33, cases 1 and 2).

Another user (``nobody``) is simulated by ``chown`` (the tests run as root), so no test waits on a race:
a folder squatted by another user, a folder or an ancestor writable by others, a path swapped for a
symlink after the run opened it, and a seed JSON dropped into a method folder without a journal entry.
"""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path

import pytest

from conftest import TINY
from litrepro import cli, outdir, runner, summary
from litrepro.paths import RENDERED

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")

SETS = [a for s in TINY["pinterest_rlbp"] for a in ("--set", s)]


def _nobody() -> int:
    try:
        return pwd.getpwnam("nobody").pw_uid
    except KeyError:
        pytest.skip("no user nobody")


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
def base(tmp_path):
    """A folder like /tmp: sticky and world-writable, owned by root."""
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o1777)
    return folder


# --- case 1: --out created by another user, or writable by others ----------------------------------------

def test_an_out_created_by_another_user_is_refused(base, capsys):
    out = base / "out"
    out.mkdir()
    os.chown(out, _nobody(), -1)
    _refused(capsys, cli.main(_run(out)), "another user")
    assert list(out.iterdir()) == []


def test_an_out_writable_by_others_is_refused_unless_sticky(base, capsys):
    out = base / "out"
    out.mkdir()
    out.chmod(0o777)
    _refused(capsys, cli.main(_run(out)), "writable by group or others")
    assert list(out.iterdir()) == []
    out.chmod(0o1777)                                   # sticky and the user's own: like a private /tmp
    outdir.check_path(out)


def test_an_out_under_a_folder_of_another_user_is_refused(base, capsys):
    theirs = base / "theirs"
    theirs.mkdir()
    os.chown(theirs, _nobody(), -1)
    out = theirs / "out"
    _refused(capsys, cli.main(_run(out)), "another user")
    assert not out.exists()


def test_a_symlinked_out_of_another_user_is_refused(base, tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    link = base / "out"
    link.symlink_to(mine)
    os.chown(link, _nobody(), -1, follow_symlinks=False)
    _refused(capsys, cli.main(_run(link)), "symlink", "another user")
    assert list(mine.iterdir()) == []


def test_a_folder_inside_out_owned_by_another_user_is_refused(tmp_path):
    out = tmp_path / "out"
    folder = outdir.OutDir(out)
    folder.claim()
    (out / "pinterest_rlbp").mkdir()
    os.chown(out / "pinterest_rlbp", _nobody(), -1)
    with pytest.raises(outdir.Refused, match="another user"):
        folder.write("pinterest_rlbp/seed-5.json", b"{}")
    (out / "pinterest_rlbp").chmod(0o777)
    os.chown(out / "pinterest_rlbp", 0, -1)
    with pytest.raises(outdir.Refused, match="writable by group or others"):
        folder.write("pinterest_rlbp/seed-5.json", b"{}")
    assert list((out / "pinterest_rlbp").iterdir()) == []


def test_a_swap_of_out_after_it_was_opened_cannot_redirect_writes(tmp_path, request):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    folder = outdir.OutDir(out)
    folder.claim()
    outdir.pin(out)
    request.addfinalizer(lambda: outdir.unpin(out))
    os.rename(out, tmp_path / "moved")
    out.symlink_to(elsewhere)
    folder.write("pinterest_rlbp/seed-5.json", b"{}")              # the folder it opened, not the new path
    assert (tmp_path / "moved" / "pinterest_rlbp" / "seed-5.json").read_bytes() == b"{}"
    with pytest.raises(outdir.Refused, match="replaced"):
        outdir.OutDir(out).write("pinterest_rlbp/seed-6.json", b"{}")  # a later open in this run sees the swap
    folder.state_path(outdir.SCRATCH)
    assert list(elsewhere.iterdir()) == []


# --- case 2: a summary reads only the seeds the journal records -----------------------------------------

def _result(seed: int) -> bytes:
    data = json.loads((RENDERED / "pinterest_rlbp" / "seed-42.json").read_text())
    data["provenance"]["seed"] = seed
    return json.dumps(data).encode()


def test_a_dropped_seed_json_is_ignored_with_one_warning(tmp_path, capsys):
    out = tmp_path / "out"
    folder = outdir.OutDir(out)
    folder.claim()
    folder.write("pinterest_rlbp/seed-5.json", _result(5))
    (out / "pinterest_rlbp" / "seed-999.json").write_bytes(_result(999))          # no journal entry
    (out / "pinterest_rlbp" / "seed-6.json").write_bytes(_result(6))
    job = runner.Job("pinterest_rlbp", 5, out / "pinterest_rlbp", root=out)
    written, problems = runner.write_summaries([job])
    assert problems == []
    made = json.loads((out / "pinterest_rlbp" / "summary.json").read_text())
    assert "999" not in json.dumps(made.get("seeds", made.get("n_seeds")))
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "seed-999.json" in err[0] and "seed-6.json" in err[0] and "ignored" in err[0]
    seeds = [r["provenance"]["seed"] for r in summary.load_seed_results(out, "pinterest_rlbp")]
    assert seeds == [5]


def test_a_refused_out_is_refused_before_the_sweep_is_validated(base, capsys, monkeypatch):
    """Also noticed: validating a sweep costs milliseconds per point and ran before --out was checked, so a bad
    --out could take a minute to refuse.  Now --out and --seeds are checked first."""
    out = base / "out"
    out.mkdir()
    os.chown(out, _nobody(), -1)

    def no_sweep(*args, **kwargs):
        raise AssertionError("the sweep was validated before --out")

    monkeypatch.setattr(cli, "sweep_points", no_sweep)
    _refused(capsys, cli.main(_run(out)), "another user")


def test_the_summary_notebook_reads_committed_seed_files_a_checkout_changed(tmp_path):
    """A ``git checkout`` may change a committed seed JSON after the last run journalled it: the summary
    notebook still reads it when its bytes are git's committed blob (as a run adopts them), and nothing else."""
    import subprocess

    repo = tmp_path / "repo"
    out = repo / "rendered"
    folder = outdir.OutDir(out)
    folder.claim()
    folder.write("pinterest_rlbp/seed-5.json", _result(5))
    (out / "pinterest_rlbp" / "seed-5.json").write_bytes(_result(5) + b" ")      # a checkout's new bytes
    (out / "pinterest_rlbp" / "seed-7.json").write_bytes(_result(7))
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "rendered/pinterest_rlbp"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    (out / "pinterest_rlbp" / "seed-999.json").write_bytes(_result(999))       # untracked, unjournalled
    seeds = [r["provenance"]["seed"] for r in summary.load_seed_results(out, "pinterest_rlbp")]
    assert seeds == [5, 7]
    (out / "pinterest_rlbp" / "seed-7.json").write_bytes(_result(8))             # edited since the commit
    seeds = [r["provenance"]["seed"] for r in summary.load_seed_results(out, "pinterest_rlbp")]
    assert seeds == [5]


def test_folders_the_run_creates_are_not_group_writable_under_umask_002(tmp_path):
    old = os.umask(0o002)
    try:
        folder = outdir.OutDir(tmp_path / "new" / "out")
        folder.claim()
        folder.write("pinterest_rlbp/x=1/seed-5.json", b"{}")
    finally:
        os.umask(old)
    for path in (tmp_path / "new", tmp_path / "new" / "out", tmp_path / "new" / "out" / "pinterest_rlbp"):
        assert (path.stat().st_mode & 0o022) == 0, path
    outdir.check_path(tmp_path / "new" / "out")


def test_a_worker_refuses_an_out_that_is_not_the_folder_the_run_pinned(tmp_path, monkeypatch):
    """Workers and kernels are other processes: they get the run's pin through LITREPRO_OUT_IDENTITY."""
    out, other = tmp_path / "out", tmp_path / "other"
    outdir.OutDir(out).claim()
    outdir.OutDir(other).claim()
    info = os.stat(other)
    monkeypatch.setenv(outdir.IDENTITY_ENV, f"{info.st_dev}:{info.st_ino}:{out}")
    with pytest.raises(outdir.Refused, match="replaced"):
        outdir.OutDir(out).write("pinterest_rlbp/seed-5.json", b"{}")
    assert not (out / "pinterest_rlbp").exists()
    info = os.stat(out)
    monkeypatch.setenv(outdir.IDENTITY_ENV, f"{info.st_dev}:{info.st_ino}:{out}")
    outdir.OutDir(out).write("pinterest_rlbp/seed-5.json", b"{}")


def test_a_link_of_the_user_inside_a_folder_of_another_user_is_refused(base, tmp_path, capsys):
    """The link is the user's, but the folder holding it is nobody's: nobody could replace the link."""
    theirs = base / "theirs"
    theirs.mkdir()
    mine = tmp_path / "mine"
    mine.mkdir()
    (theirs / "out").symlink_to(mine)
    os.chown(theirs, _nobody(), -1)
    _refused(capsys, cli.main(_run(theirs / "out")), "another user")
    assert list(mine.iterdir()) == []
