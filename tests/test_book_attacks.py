"""The book cannot leak a file from outside the repository, inject markup from the data, or lose the
previous site (issue 33, cases 4-6).  These tests never run Sphinx on the whole project: they build a
tiny repository in ``tmp_path`` or call the builder's pieces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from litrepro import book


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "src" / "ok.py").write_text("x = 1\n")
    return root


# --- case 4: only files inside the repository are published ------------------------------------------

def test_an_absolute_link_to_a_private_file_is_not_published(tmp_path):
    root = _repo(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("private")
    secret.chmod(0o600)
    src = tmp_path / "src"
    linker = book.Linker(src, root=root)
    out = linker.rewrite(f"[s]({secret}) [ok](src/ok.py)", "README.md", "index.md")
    assert not any(p.read_text() == "private" for p in src.rglob("*") if p.is_file())
    assert "[ok](files/src/ok.py)" in out
    assert linker.warnings and str(secret) in linker.warnings[0]


def test_a_symlink_in_the_repository_to_an_outside_file_is_not_published(tmp_path):
    root = _repo(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("private")
    (root / "src" / "link.txt").symlink_to(secret)
    (root / "src" / "dirlink").symlink_to(tmp_path)
    src = tmp_path / "src"
    linker = book.Linker(src, root=root)
    linker.rewrite("[a](src/link.txt) [b](src/dirlink/secret.txt) [c](.git/config)", "README.md", "index.md")
    assert not any(p.read_text() == "private" for p in src.rglob("*") if p.is_file())
    assert len(linker.warnings) == 3


def test_a_repository_file_is_read_only_when_inside(tmp_path, monkeypatch):
    root = _repo(tmp_path)
    (tmp_path / "secret.md").write_text("private")
    (root / "docs" / "leak.md").symlink_to(tmp_path / "secret.md")
    monkeypatch.setattr(book, "ROOT", root)
    with pytest.raises(book.BookError, match="outside the repository"):
        book.repo_text(root / "docs" / "leak.md")


# --- case 5: every string from JSON is escaped, in every HTML and markdown context --------------------

EVIL = '"><img src=x onerror=alert(1)>'


def test_a_study_key_cannot_inject_into_a_table_id():
    text = book.table_html(["a"], [[("1", "1")]], f"t-{EVIL}")
    assert "<img" not in text and 'id="t-&quot;&gt;&lt;img' in text


def test_a_study_key_cannot_escape_its_markdown_heading():
    for key in ["a`b", "x`\n```{raw} html\n<script>alert(1)</script>\n```", "``{download}`/etc/passwd`"]:
        shown = book.md_code(key)
        assert "\n" not in shown
        fence = shown.split(" ", 1)[0]
        assert shown.startswith(fence) and shown.endswith(fence)
        assert "`" * len(fence) not in shown[len(fence):-len(fence)]         # no run as long as the fence inside


def test_study_pages_escape_keys_in_headings_and_ids(tmp_path, monkeypatch):
    rendered = tmp_path / "rendered"
    (rendered / "pinterest_rlbp").mkdir(parents=True)
    data = {f"x`\n```{{raw}} html\n<b id=pwn>{EVIL}</b>\n```": {"42": {"v": EVIL}}}
    (rendered / "pinterest_rlbp" / "evil_study.json").write_text(json.dumps(data))
    monkeypatch.setattr(book, "RENDERED", rendered)
    monkeypatch.setattr(book, "ROOT", tmp_path)
    book.study_pages(tmp_path / "src")
    page = (tmp_path / "src" / "studies" / "pinterest_rlbp-evil_study.md").read_text()
    fences = [line for line in page.splitlines() if line.startswith("```")]
    assert fences == ["```{raw} html", "```"]                  # only the builder's own table block
    raw = page.split("```{raw} html\n", 1)[1].split("\n```", 1)[0]
    assert "<img" not in raw and "<b id=pwn>" not in raw
    markdown_it = pytest.importorskip("markdown_it")
    outside = page.replace(raw, "")
    tokens = [t for block in markdown_it.MarkdownIt("commonmark").parse(outside) for t in (block.children or [block])]
    assert not [t for t in tokens if t.type in ("html_inline", "html_block")]


# --- case 6: a bad JSON is one line and exit 2, and the previous site stays whole ---------------------

def _fake_build(monkeypatch, fail: bool):
    def generate(src, registry):
        if fail:
            raise book.BookError("rendered/x/y.json: not valid JSON (Expecting value)")
        (src / "index.md").write_text("# hi\n")
        return []

    def sphinx(src, out, jobs):
        (out / "index.html").write_text("<p>new</p>")

    monkeypatch.setattr(book, "generate", generate)
    monkeypatch.setattr(book, "run_sphinx", sphinx)


def test_a_failed_build_leaves_the_previous_site_whole(tmp_path, monkeypatch, capsys):
    out = tmp_path / "site"
    reg = tmp_path / "reg.json"
    reg.write_text("{}")
    _fake_build(monkeypatch, fail=False)
    assert book.main(["--out", str(out), "--guards-registry", str(reg)]) == 0
    before = sorted(p.name for p in out.iterdir())
    assert "index.html" in before
    _fake_build(monkeypatch, fail=True)
    assert book.main(["--out", str(out), "--guards-registry", str(reg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "y.json" in err[0]
    assert sorted(p.name for p in out.iterdir()) == before
    assert (out / "index.html").read_text() == "<p>new</p>"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []   # no temporary folder left


def test_a_truncated_study_json_is_one_line_naming_it(tmp_path, monkeypatch):
    rendered = tmp_path / "rendered"
    (rendered / "pinterest_rlbp").mkdir(parents=True)
    (rendered / "pinterest_rlbp" / "backup_study.json").write_text('{"rows": [1, 2')
    monkeypatch.setattr(book, "RENDERED", rendered)
    monkeypatch.setattr(book, "ROOT", tmp_path)
    with pytest.raises(book.BookError) as err:
        book.study_pages(tmp_path / "src")
    assert "backup_study.json" in str(err.value) and "\n" not in str(err.value)


def test_a_deeply_nested_study_json_is_refused_without_recursion(tmp_path, monkeypatch):
    rendered = tmp_path / "rendered"
    (rendered / "pinterest_rlbp").mkdir(parents=True)
    (rendered / "pinterest_rlbp" / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    monkeypatch.setattr(book, "RENDERED", rendered)
    monkeypatch.setattr(book, "ROOT", tmp_path)
    with pytest.raises(book.BookError, match="deep.json: nested 100000 deep"):
        book.study_pages(tmp_path / "src")


def test_an_output_folder_that_cannot_be_made_is_one_line(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    reg = tmp_path / "reg.json"
    reg.write_text("{}")
    assert book.main(["--out", str(tmp_path / "file" / "site"), "--guards-registry", str(reg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ERROR:")
