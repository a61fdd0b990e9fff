"""Bounded inputs (issue 33, cases 7-9): ``--set`` nesting and size, ``seed`` in ``--set``, and the study
scripts' arguments, each refused in one line with exit status 2 before any work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from litrepro import cli, study_args
from litrepro.cli import MAX_SET_CHARS
from litrepro.params import ParameterError, parse_override


def _run(out: Path, *extra: str) -> list[str]:
    return ["run", "--methods", "pinterest_rlbp", "--seeds", "5", "--out", str(out), "--no-progress",
            "--no-summary-notebook", *extra]


def _one_line(capsys, code: int, *words: str) -> str:
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err[:2000]
    for word in words:
        assert word in err, err
    return err


# --- case 7: --set nested 1,000 deep, or huge ----------------------------------------------------------

@pytest.mark.parametrize("value", ["[" * 1000 + "]" * 1000, "{a: " * 500 + "1" + "}" * 500,
                                   "\n".join("  " * i + "-" for i in range(40))])
def test_a_deeply_nested_set_value_is_one_line(tmp_path, capsys, value):
    err = _one_line(capsys, cli.main(_run(tmp_path / "o", "--set", f"gain_multipliers={value}")), "nested")
    assert len(err) < 400
    assert not (tmp_path / "o").exists()


def test_a_huge_set_value_is_one_line(tmp_path, capsys):
    value = "[" + ",".join(["1.0"] * (MAX_SET_CHARS // 2)) + "]"
    _one_line(capsys, cli.main(_run(tmp_path / "o", "--set", f"gain_multipliers={value}")), str(MAX_SET_CHARS))


def test_ordinary_list_values_still_parse():
    assert parse_override("gain_multipliers=[0.5, 1.0, 2.0]") == ("gain_multipliers", [[0.5, 1.0, 2.0]])


# --- case 8: the seed comes from --seeds only -------------------------------------------------------------

def test_seed_in_set_is_refused(tmp_path, capsys):
    _one_line(capsys, cli.main(_run(tmp_path / "o", "--set", "seed=7")), "seed", "--seeds")
    assert not (tmp_path / "o").exists()
    with pytest.raises(ParameterError, match="--seeds"):
        cli.sweep_points(["seed=7,8"], ["pinterest_rlbp"])


# --- case 9: the study scripts' arguments (litrepro.study_args) ----------------------------------------------

@pytest.mark.parametrize("text, seeds", [("42", [42]), ("42-44", [42, 43, 44]), ("0-0", [0])])
def test_study_seeds_parse(text, seeds):
    assert study_args.seeds(text) == seeds


@pytest.mark.parametrize("text, words", [
    ("0-4294967295", "at most"), ("44-42", "empty"), ("x", "a seed or a range"), ("-1", "a seed or a range"),
    ("4294967296", "2**32-1"), ("", "a seed or a range"), ("1-2-3", "a seed or a range"), ("9" * 5000, "a seed or a range"), ("99999999999", "2**32-1")])
def test_study_seeds_refused(text, words):
    with pytest.raises(study_args.StudyArgError) as err:
        study_args.seeds(text)
    assert words in str(err.value) and len(str(err.value)) < 300


@pytest.mark.parametrize("argv, words", [
    (["--seeds", "0-4294967295"], "--seeds"), (["--seeds", "nope"], "--seeds"), (["--jobs", "0"], "--jobs"),
    (["--jobs", "65"], "--jobs"), (["--jobs", "x"], "--jobs"), (["--steps", "1000000000"], "--steps"),
    (["--steps", "0"], "--steps"), (["--bogus"], "unrecognized")])
def test_the_parser_exits_2_in_one_line(capsys, argv, words):
    parser = study_args.parser("a study", steps=("critic_steps", 3000))
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err


def test_the_parser_gives_defaults_and_bounded_values():
    parser = study_args.parser("a study", seeds="42-44", jobs=2, steps=("critic_steps", 3000))
    args = parser.parse_args([])
    assert args.seeds == [42, 43, 44] and args.jobs == 2 and args.steps == 3000
    args = parser.parse_args(["--seeds", "5", "--jobs", "64", "--steps", "100000"])
    assert args.seeds == [5] and args.jobs == 64 and args.steps == 100_000


@pytest.mark.parametrize("argv, content, words", [
    (["--only", "bogus"], None, "invalid choice"),
    (["--only", "effect-study"], '{"rows": [1, 2', "effect_study.json: not valid JSON"),
    (["--only", "effect-study"], "[" * 100_000 + "]" * 100_000, "nested 100000 deep"),
    (["--only", "effect-study"], '{"no": "rows"}', "lacks or mangles"),
])
def test_replot_refuses_bad_arguments_and_bad_json_in_one_line(tmp_path, argv, content, words):
    root = tmp_path / "root"
    (root / "rendered" / "waypoint_opd").mkdir(parents=True)
    if content is not None:
        (root / "rendered" / "waypoint_opd" / "effect_study.json").write_text(content)
    env = {**__import__("os").environ, "LITREPRO_ROOT": str(root), "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, "-m", "litrepro.replot", *argv, "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and words in lines[0], proc.stderr[-2000:]
