"""``litrepro claims`` on malformed or hostile input: one line and exit 2, never a traceback or a hang
(issue 33, cases 5 and 10)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from litrepro import claims
from litrepro.cli import main as cli_main


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "rendered").mkdir()
    (root / "README.md").write_text("# a page\n")
    return root


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_a_readme_that_is_a_folder_is_one_line(tmp_path, capsys):
    root = _root(tmp_path)
    (root / "README.md").unlink()
    (root / "README.md").mkdir()
    assert cli_main(["claims", "--check", "--root", str(root)]) == 2
    assert "README.md" in _one_error_line(capsys)


def test_a_fifo_under_docs_does_not_hang_the_check(tmp_path, capsys):
    root = _root(tmp_path)
    os.mkfifo(root / "docs" / "pipe.md")
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault(
        "rc", cli_main(["claims", "--check", "--root", str(root)])), daemon=True)
    worker.start()
    worker.join(120)
    assert not worker.is_alive(), "claims --check hangs on a FIFO"
    assert result["rc"] == 2
    assert "pipe.md" in _one_error_line(capsys)


def test_a_fifo_among_the_parameter_files_does_not_hang_the_check(tmp_path, capsys):
    root = _root(tmp_path)
    (root / "parameters").mkdir()
    os.mkfifo(root / "parameters" / "x.yaml")
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault(
        "rc", cli_main(["claims", "--check", "--root", str(root)])), daemon=True)
    worker.start()
    worker.join(120)
    assert not worker.is_alive(), "claims --check hangs on a FIFO"
    assert result["rc"] == 2 and "x.yaml" in _one_error_line(capsys)


def test_a_symlinked_page_is_refused_not_replaced(tmp_path, capsys):
    root = _root(tmp_path)
    (tmp_path / "elsewhere.md").write_text("# elsewhere\n")
    (root / "docs" / "linked.md").symlink_to(tmp_path / "elsewhere.md")
    assert cli_main(["claims", "--write", "--root", str(root)]) == 2
    assert "linked.md" in _one_error_line(capsys)
    assert (root / "docs" / "linked.md").is_symlink()


def test_write_keeps_a_page_mode(tmp_path, monkeypatch):
    root = _root(tmp_path)
    page = root / "docs" / "x.md"
    page.write_text("<!-- BEGIN litrepro:tiny -->\nold\n<!-- END litrepro:tiny -->\n")
    page.chmod(0o640)
    monkeypatch.setitem(claims._BLOCKS, "tiny", ("docs/x.md", lambda r: "new"))
    assert "docs/x.md" in claims.write(root)
    assert "new" in page.read_text() and (page.stat().st_mode & 0o777) == 0o640


def test_a_deeply_nested_json_is_one_line(tmp_path):
    root = _root(tmp_path)
    (root / "rendered" / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(claims.ClaimsError, match=r"rendered/deep.json: nested 100000 deep"):
        claims.load(root, "rendered/deep.json")


@pytest.mark.parametrize("bad", ["<img src=x onerror=alert(1)>", "a\n```{include} /etc/passwd\n```",
                                 "{download}`/etc/passwd`", "[x](/etc/passwd)", "[x]: /etc/passwd", "<!-- c -->", "<http://example.org>", "$\\href{javascript:x}{a}$"])
def test_markup_in_a_data_string_is_refused(tmp_path, bad):
    root = _root(tmp_path)
    (root / "rendered" / "s.json").write_text(json.dumps({"arms": [{"name": bad}], "ok": "<= 1.5 and >= 4"}))
    with pytest.raises(claims.ClaimsError, match=r"rendered/s.json: .*markup"):
        claims.load(root, "rendered/s.json")
    (root / "rendered" / "k.json").write_text(json.dumps({bad: 1}))
    with pytest.raises(claims.ClaimsError, match="markup"):
        claims.load(root, "rendered/k.json")


def test_plain_comparison_signs_in_data_strings_are_fine(tmp_path):
    root = _root(tmp_path)
    (root / "rendered" / "s.json").write_text(json.dumps({"note": "|z| <= 3 and n >= 4", "x": 1.5,
                                                          "ci": "[+0.031, +0.040]", "set": "gamma in {0, 0.5}"}))
    assert claims.load(root, "rendered/s.json")["x"] == 1.5
