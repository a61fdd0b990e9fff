"""Issue 24: the seven cases a third attack broke, one test each (the docstring names the case), and the fixes' edges.

Each numbered test failed on the code before the fix: it let another user run code through a
Dask run (1), deleted user files a journal line named (2), replaced summary.json before refusing
a user's figure (3), appended to a snapshot's journal through a hard link (4), accepted a step
count of a billion (5), printed a 15 MB error line (6), or lost every job to an OverflowError (7).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from users import as_nobody

from conftest import TINY, run_cli
from litrepro import cli, methods, outdir, params
from litrepro.params import ParameterError

SETS = [a for s in TINY["pinterest_rlbp"] for a in ("--set", s)]
FOLDER = ",".join(sorted(TINY["pinterest_rlbp"]))


def _run(out: Path, *extra: str) -> list[str]:
    return ["run", "--methods", "pinterest_rlbp", "--seeds", "5", "--out", str(out), "--no-progress",
            "--no-summary-notebook", *SETS, *extra]


def _one_line(capsys, code: int, *words: str) -> str:
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err[:2000]
    for word in words:
        assert word in err, err
    return err


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------- case 1: another user and the Dask cluster



_INTRUDER = """
import os, sys
from distributed import Client, Security
address = sys.argv[1]
attempts = [("as given", address, None), ("as tcp", address.replace("tls://", "tcp://"), None)]
try:
    attempts.append(("own certificates", address, Security.temporary()))
except ImportError:
    pass
for name, where, security in attempts:
    try:
        client = Client(where, security=security, timeout="5s")
        print("RAN CODE", name, client.run_on_scheduler(os.getuid), flush=True)
        client.close()
    except Exception as err:
        print("REFUSED", name, type(err).__name__, flush=True)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="setpriv is Linux")
def test_case1_another_local_user_cannot_run_code_through_the_runs_dask_cluster(tmp_path):
    """Case 1: a distributed.Client started by user nobody connected to the run's local scheduler and ran
    code as the owner.  Now the cluster speaks TLS with this run's certificates only: nobody is refused."""
    pytest.importorskip("dask.distributed")
    probe = as_nobody("import distributed")
    if probe is None or probe.returncode != 0:
        pytest.skip("cannot run Python as user nobody here (needs root and setpriv)")
    from litrepro.scheduler import connect

    client, cluster = connect("dask", workers=1, local_directory=tmp_path / "dask")
    try:
        assert client.run_on_scheduler(os.getuid) == os.getuid()              # control: the run's own client works
        proc = as_nobody(_INTRUDER, cluster.scheduler_address)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "RAN CODE" not in proc.stdout and proc.stdout.count("REFUSED") >= 2, proc.stdout
    finally:
        client.close()
        cluster.close()


def test_case1_the_local_cluster_is_tls_on_localhost_without_http_routes(tmp_path):
    pytest.importorskip("dask.distributed")
    from litrepro.scheduler import connect

    client, cluster = connect("dask", workers=1, local_directory=tmp_path / "dask")
    try:
        assert cluster.scheduler_address.startswith("tls://127.0.0.1:")
        assert all(w.startswith("tls://127.0.0.1:") for w in client.scheduler_info()["workers"])
        import urllib.error
        import urllib.request

        port = cluster.scheduler.http_server.port                   # bound, but it serves no page
        for page in ("info/main/workers.html", "json/identity.json", "status", "metrics"):
            with pytest.raises(urllib.error.URLError) as err:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/{page}", timeout=10)
            assert getattr(err.value, "code", 404) == 404, page
    finally:
        client.close()
        cluster.close()


def test_an_external_scheduler_takes_a_security_configuration(tmp_path, capsys):
    pytest.importorskip("dask.distributed")
    from litrepro.scheduler import external_security

    for name in ("ca.pem", "cert.pem", "key.pem"):
        (tmp_path / name).write_text("x")
    security = external_security(*(str(tmp_path / n) for n in ("ca.pem", "cert.pem", "key.pem")))
    assert security.require_encryption and security.tls_ca_file == str(tmp_path / "ca.pem")
    code = cli.main(_run(tmp_path / "o", "--scheduler", "tls://127.0.0.1:9", "--tls-cert", str(tmp_path / "cert.pem")))
    _one_line(capsys, code, "--tls-ca-file, --tls-key: needed with the other --tls-* options")
    code = cli.main(_run(tmp_path / "o", "--tls-cert", str(tmp_path / "cert.pem")))
    _one_line(capsys, code, "for an external tls:// scheduler")
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- case 2: the journal cannot delete a user's file

def test_case2_partial_lines_naming_user_files_delete_nothing(tmp_path):
    """Case 2: two ``partial`` lines added to .litrepro/OWNER, naming a user's notes.txt and mydata.csv, made the
    next run delete both.  Now only a name of the runner's temporary pattern whose device, inode and size match
    what the runner recorded at creation is removed."""
    out = tmp_path / "out"
    folder = outdir.OutDir(out)
    folder.claim()
    (out / "m").mkdir()
    users = {"notes.txt": b"my notes", "mydata.csv": b"a,b\n1,2\n", "m/.report.txt.0123456789ab.tmp": b"mine too"}
    for rel, data in users.items():
        (out / rel).write_bytes(data)
    info = os.stat(out / "m/.report.txt.0123456789ab.tmp")
    lines = [{"partial": "notes.txt"}, {"partial": "mydata.csv"},
             # the identity of the user's file, forged, under a name that is not the runner's pattern
             {"partial": "notes.txt", "dev": info.st_dev, "ino": os.stat(out / "notes.txt").st_ino, "size": 99},
             # the runner's pattern, but no identity, then an identity that is not this file's
             {"partial": "m/.report.txt.0123456789ab.tmp"},
             {"partial": "m/.report.txt.0123456789ab.tmp", "dev": info.st_dev, "ino": info.st_ino + 1, "size": 99}]
    with open(out / ".litrepro" / "OWNER", "a") as journal:
        journal.writelines(json.dumps(line) + "\n" for line in lines)
    with outdir.lock(out):
        outdir.remove_stale_scratch(out)
    assert {rel: (out / rel).read_bytes() for rel in users} == users
    assert folder.record()[1] == set()                          # forgotten, not deleted


def test_case2_a_killed_publishs_own_partial_is_still_removed(tmp_path):
    out = outdir.OutDir(tmp_path / "out")
    out.claim()
    code = ("import os, signal, sys\nfrom litrepro import outdir\no = outdir.OutDir(sys.argv[1])\n"
            "os.rename = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\no.write('m/seed-1.json', b'xyz')\n")
    subprocess.run([sys.executable, "-c", code, str(out.root)], capture_output=True, timeout=60)
    (partial,) = [p for p in (out.root / "m").iterdir()]
    entry = [json.loads(x) for x in (out.root / ".litrepro" / "OWNER").read_text().splitlines()][-1]
    assert entry["partial"] == f"m/{partial.name}" and entry["size"] == 3 and entry["ino"] == partial.stat().st_ino
    with outdir.lock(out.root):
        outdir.remove_stale_scratch(out.root)
    assert not partial.exists()


# ---------------------------------------------------------------- case 3: every refusal before the first write

def test_case3_a_users_figure_is_refused_before_any_seed_or_summary_is_written(tmp_path, capsys):
    """Case 3: a user's own figure in the method folder was refused only after summary.json had been replaced
    (exit 1, "summary not written", false).  Now every file the run may replace is checked first: exit 2,
    and the message says nothing was written."""
    out = outdir.OutDir(tmp_path / "out")
    out.claim()
    out.write(f"pinterest_rlbp/{FOLDER}/summary.json", b'{"an earlier": "summary"}')
    (out.root / "pinterest_rlbp" / FOLDER / "td_loss_value.png").write_bytes(b"the user's own figure")
    before = {k: v for k, v in _tree(out.root).items() if not k.startswith(".litrepro/")}
    err = _one_line(capsys, cli.main(_run(out.root, "--force", "--cell-timeout", "60")), "td_loss_value.png",
                    "refused before the run: nothing in --out was written, replaced or deleted")
    after = _tree(out.root)
    assert {k: v for k, v in after.items() if not k.startswith(".litrepro/")} == before, err


def test_case3_summary_files_are_checked_together_and_the_message_says_what_was_written(tmp_path, monkeypatch):
    from litrepro import runner

    out = outdir.OutDir(tmp_path / "o")
    out.claim()
    out.write("pinterest_rlbp/seed-1.json", json.dumps({"seed": 1, "metrics": {}, "checks": {},
                                                        "provenance": {}}).encode())
    out.write("pinterest_rlbp/summary.json", b"old")
    (out.root / "pinterest_rlbp" / "b.png").write_bytes(b"user's")
    monkeypatch.setattr(runner, "summarise", lambda method, results: {"n": len(results)})
    monkeypatch.setattr(runner.methods.Method, "plot_function", lambda self: (lambda results: {"a.png": None, "b.png": None}))
    monkeypatch.setattr("litrepro.plotting.png_bytes", lambda fig: b"png")
    job = runner.Job("pinterest_rlbp", 1, out.root / "pinterest_rlbp", root=out.root)
    written, problems = runner.write_summaries([job])
    assert written == [] and len(problems) == 1 and "summary.json, a.png, b.png not written (nothing written)" in problems[0]
    assert (out.root / "pinterest_rlbp" / "summary.json").read_bytes() == b"old"
    assert not (out.root / "pinterest_rlbp" / "a.png").exists()


@pytest.mark.parametrize("name", list(methods.METHODS))
def test_case3_the_figures_checked_up_front_are_every_figure_a_summary_writes(name):
    from litrepro import runner
    from litrepro.paths import RENDERED

    results = [r for r in (runner.read_result(p) for p in sorted((RENDERED / name).glob("seed-*.json"))) if r]
    if not results:
        pytest.skip(f"no rendered {name} seeds")
    figures = methods.get(name).plot_function()(results)
    assert set(figures) <= set(runner.SUMMARY_FIGURES[name]), sorted(figures)


# ---------------------------------------------------------------- case 4: no writes through a hard link

@pytest.mark.parametrize("shared", ["snapshot", "lock"])
def test_case4_a_hard_linked_journal_or_lock_is_refused_and_the_other_copy_untouched(tmp_path, capsys, shared):
    """Case 4: after ``cp -al`` of an output folder, a run on the original appended 12 lines to the snapshot's
    .litrepro/OWNER.  Now a journal or lock with more than one link is refused with one line, before any write."""
    out = outdir.OutDir(tmp_path / "out")
    out.claim()
    out.write(f"pinterest_rlbp/{FOLDER}/seed-9.json", b"{}")
    with outdir.lock(out.root):
        pass                                                      # the lock file exists, as after any run
    snapshot = tmp_path / "snapshot"
    if shared == "snapshot":
        subprocess.run(["cp", "-al", str(out.root), str(snapshot)], check=True)
    else:
        snapshot.mkdir()
        os.link(out.root / ".litrepro" / "lock", snapshot / "lock")
    before = _tree(snapshot)
    _one_line(capsys, cli.main(_run(out.root)), "2 hard links")
    assert _tree(snapshot) == before
    assert not (out.root / "pinterest_rlbp" / FOLDER / "seed-5.json").exists()


def test_case4_a_journal_that_is_not_the_users_is_refused(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("chown needs root")
    out = outdir.OutDir(tmp_path / "out")
    out.claim()
    os.chown(out.root / ".litrepro" / "OWNER", 65534, 65534)
    with pytest.raises(outdir.Refused, match="belongs to another user"):
        out.write("a.json", b"1")


# ---------------------------------------------------------------- case 5: sizes and times are bounded

def test_case5_a_billion_critic_steps_is_refused_up_front(tmp_path, capsys):
    """Case 5: ``--set critic_steps=1000000000`` was accepted and ran until the cell timeout.  Now it is refused
    before anything is created, with one line naming the parameter and its bound."""
    args = [a if a != "critic_steps=20" else "critic_steps=1000000000" for a in _run(tmp_path / "o", "--cell-timeout", "5")]
    code = cli.main(args)
    _one_line(capsys, code, "critic_steps", "upper bound 100_000")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("settings, words", [
    (["n_campaigns=65536", "opportunities_per_step=4096"], ["auctions", "WORK_BOUNDS"]),
    (["critic_steps=100000", "batch_size=65536"], ["critic samples"]),
    (["hidden=1000000"], ["hidden", "upper bound 4_096"]),
    (["gain_multipliers=[" + ",".join(["1.0"] * 100) + "]"], ["100 items"]),
])
def test_products_of_bounded_sizes_are_bounded_too(settings, words):
    with pytest.raises(ParameterError) as err:
        cli.sweep_points(settings, ["pinterest_rlbp"])
    assert all(w in str(err.value) for w in words) and len(str(err.value)) < 300


@pytest.mark.parametrize("option, value", [("--max-jobs", "10000000"), ("--jobs", "100000"), ("--retries", "1000")])
def test_command_line_counts_have_upper_bounds(tmp_path, capsys, option, value):
    _one_line(capsys, cli.main(_run(tmp_path / "o", option, value)), option, "upper bound")


@pytest.mark.parametrize("name", list(methods.METHODS))
def test_every_bound_leaves_room_over_the_defaults_and_the_studies(name):
    """Defaults, the notebooks' parameters and every study arm validate, and each bound is >= 10x its default."""
    from litrepro.rlbp.study import SCALING_DAYS
    from litrepro.waypoint import effect_study

    method = methods.get(name)
    cls = method.config_class()
    config = params.load_file(cls, method.parameters)
    params.validate(cls, methods.notebook_defaults(method.notebook), "notebook")
    for key, value in params.as_dict(config).items():
        if key in params.UPPER_BOUNDS and isinstance(value, int) and value > 0:
            assert params.UPPER_BOUNDS[key] >= 10 * value, key
    if name == "pinterest_rlbp":
        for days in SCALING_DAYS:
            params.validate(cls, {"logged_days": days * 10}, "study")
    else:
        for lr in effect_study.TEACHERS.values():
            for rollouts in effect_study.RL_ROLLOUTS:
                params.validate(cls, {"pretrain_lr": lr, "teacher_rl_rollouts": rollouts * 10,
                                      "comparison_steps": config.comparison_steps * 10}, "study")


# ---------------------------------------------------------------- case 6: YAML aliases, and values quoted short

def _alias_bomb() -> str:
    """``critic_backup=[...]``, about 230 bytes, whose YAML aliases expand to a list of 17 MB when printed."""
    parts = ["&a [1,1,1,1,1,1,1,1,1]"]
    for prev, cur in zip("abcdef", "bcdef"):
        parts.append(f"&{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    parts.append("[" + ",".join(["*f"] * 9) + "]")
    return "critic_backup=[" + ",".join(parts) + "]"


def test_case6_a_yaml_alias_bomb_in_set_is_one_short_line(tmp_path, capsys):
    """Case 6: a 301-byte YAML alias bomb in ``--set`` gave exit 2 with a 15.5 MB error line.  Now aliases are
    refused before anything is expanded, in one short line."""
    bomb = _alias_bomb()
    assert len(bomb) < 301
    err = _one_line(capsys, cli.main(_run(tmp_path / "o", "--set", bomb)), "anchors and aliases")
    assert len(err) < 300
    assert not (tmp_path / "o").exists()


def test_an_alias_in_a_parameter_file_is_refused(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("gain_multipliers: &g [0.5, 1.0, 2.0]\nother: *g\n")
    with pytest.raises(ParameterError, match="anchors and aliases"):
        params.load_yaml(path)


@pytest.mark.parametrize("values", [{"gain_multipliers": [[1.0] * 10_000]}, {"critic_backup": "x" * 10_000},
                                    {"critic_steps": 10 ** 4000}, {"y" * 10_000: 1}])
def test_every_parameter_error_cuts_the_value_it_quotes(values):
    cls = methods.get("pinterest_rlbp").config_class()
    with pytest.raises(ParameterError) as err:
        params.validate(cls, values, "--set")
    assert len(str(err.value)) < 600, len(str(err.value))


def test_the_cli_cuts_any_error_line():
    assert len(cli.one_line("x" * 10**6)) <= cli.MAX_MESSAGE + 10


# ---------------------------------------------------------------- case 7: a huge --cell-timeout

def test_case7_a_cell_timeout_of_1e10_means_no_limit_not_an_overflow(tmp_path):
    """Case 7: ``--cell-timeout 1e10`` lost every job with ``OverflowError: timestamp out of range``.  Now any
    value above MAX_CELL_TIMEOUT (7 days) means no limit, like 0."""
    proc = run_cli(*_run(tmp_path / "out", "--cell-timeout", "1e10"), env={"TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "pinterest_rlbp" / FOLDER / "seed-5.json").is_file()
    assert cli.cell_timeout(1e10) is None and cli.cell_timeout(0) is None and cli.cell_timeout(5) == 5.0


# ---------------------------------------------------------------- the import cycle

def test_summary_reads_results_without_importing_the_runner():
    """summary.py imported read_result from runner.py, which imports summary: reading a result now lives below both."""
    code = "import sys, litrepro.summary, litrepro.results; print('litrepro.runner' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "False", proc.stderr


def test_the_security_page_shows_the_bounds_in_the_code():
    """docs/security.md's bounds table is the one litrepro.params.bounds_markdown() prints, and its numbers are the code's."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "security.md").read_text()
    block = text.split("<!-- BEGIN litrepro:bounds -->\n", 1)[1].split("\n<!-- END litrepro:bounds -->", 1)[0]
    assert block == params.bounds_markdown()
    assert f"{cli.MAX_CELL_TIMEOUT:,.0f} s" in text
    assert all(f"`{option}` {bound:,}" in text for option, bound in cli.RUN_BOUNDS.items())


# ---------------------------------------------------------------- explorers (also noticed: make explore had no token)

def test_make_explore_serves_with_a_fresh_token_kept_off_the_command_line():
    """``make explore`` runs litrepro.explore.serve: a new token each start, in the environment (a command line is
    readable by every local user in /proc), printed in the addresses; Voila gets litrepro's template."""
    from litrepro.explore import serve

    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    recipe = makefile.split("\nexplore:", 1)[1].split("\n\n", 1)[0]
    assert "-m litrepro.explore.serve" in recipe and "voila" not in recipe.replace("litrepro.explore.serve", "")
    first, second = serve.new_token(), serve.new_token()
    assert first != second and len(first) >= 40
    cmd = serve.voila_command(Path("notebooks"), 8866)
    assert first not in " ".join(cmd) and "--Voila.ip=127.0.0.1" in cmd and "--Voila.auto_token=True" in cmd
    assert f"--VoilaConfiguration.template={serve.TEMPLATE}" in cmd
    env = serve.voila_environment(first, {"JUPYTER_TOKEN_FILE": "/elsewhere"})
    assert env["JUPYTER_TOKEN"] == first and "JUPYTER_TOKEN_FILE" not in env
    assert env["JUPYTER_PATH"].split(os.pathsep)[0] == str(serve.JUPYTER_DATA)
    assert all(url.endswith(f"?token={first}") and url.startswith("http://127.0.0.1:8866/")
               for url in serve.addresses(8866, first).values())


def test_litrepros_voila_template_links_no_other_host():
    from litrepro.explore import serve

    folder = serve.JUPYTER_DATA / "voila" / "templates" / serve.TEMPLATE
    import re

    for path in folder.iterdir():
        text = re.sub(r"\{#.*?#\}", "", path.read_text(), flags=re.S)     # Jinja comments name the hosts dropped
        assert "cdn" not in text and "https://" not in text and "http://" not in text, path
