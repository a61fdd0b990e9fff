"""The reader's edition (``python -m litrepro.book``) and its trust report, tested as a reader uses them.

The book is built once per session into a temporary folder (never ``build/``).  The browser tests
serve it from a localhost port that the test binds itself (port 0), open every page in headless
Chromium (Debian's, through Playwright) and assert that every image loads, no request leaves
localhost and no internal link is broken; the front page is also opened from disk (file://).
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import shutil
import threading
import urllib.parse
from pathlib import Path

import pytest

import browser
from patching import patched
from litrepro import book, trust
from litrepro.paths import RENDERED, ROOT

pytest.importorskip("myst_nb", reason="the book's packages are not installed (pip install -e '.[book]')")


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """(site folder, generated source folder): the book built from this checkout."""
    base = tmp_path_factory.mktemp("book")
    times = book.build(base / "site", src=base / "src")
    print(f"\nbook built in {times['total_s']:.1f} s")
    return base / "site", base / "src"


def rendered_check_names() -> dict[str, set[str]]:
    """Per method, every check the rendered seed JSON records (dict fields whose key ends in 'checks')."""
    names: dict[str, set[str]] = {}
    for method in trust.AUDIT_MODULES:
        for path in (RENDERED / method).glob("seed-*.json"):
            for key, value in json.loads(path.read_text()).items():
                if key.endswith("checks") and isinstance(value, dict):
                    names.setdefault(method, set()).update(value)
    return names


def pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("*.html") if "_static" not in p.parts)


# --- The built site, read as files -------------------------------------------------------------------

#: What no book page may show: a committed study reported missing (the summary's old "<study>.json not found
#: under rendered/...: run its make target") or a crash.  "not found" alone is a word prose may use.
MISSING_OR_CRASHED = re.compile(r"\.json</code> not found|\.json not found|run its make target|"
                                r"Traceback \(most recent call last\)")


def test_check_names_link_both_ways_between_chapters_trust_rows_and_tests(built):
    """A chapter's check names lead to their trust rows; a trust row leads back to its chapter, to its registry's
    source and to its fault tests' files, all present in the site."""
    site, _ = built
    trust_html = (site / "trust.html").read_text()
    ids = set(re.findall(r'id="check-([^"]+)"', trust_html))
    for method in ("pinterest_rlbp", "waypoint_opd"):
        chapter = (site / "methods" / method / "seed-42.html").read_text()
        linked = set(re.findall(r'href="../../trust.html#check-([^"]+)"', chapter))
        assert len(linked) >= 10, (method, linked)
        assert linked <= ids, linked - ids
        assert f'href="methods/{method}/seed-42.html"' in trust_html
    hrefs = set(re.findall(r'href="(files/[^"#]+)"', trust_html))
    assert any(h.startswith("files/tests/test_") for h in hrefs)
    assert "files/src/litrepro/rlbp/audit.py" in hrefs and "files/src/litrepro/waypoint/registry.py" in hrefs
    assert all((site / h).is_file() for h in hrefs), [h for h in hrefs if not (site / h).is_file()]


def test_every_figure_has_an_alt_text_that_describes_it_not_a_file_name(built):
    site, _ = built
    alts = []
    for page in pages(site):
        for alt in re.findall(r'<img [^>]*alt="([^"]*)"', page.read_text(encoding="utf-8")):
            alts.append((page.relative_to(site).as_posix(), alt))
    assert len(alts) >= 20
    bad = [(p, a) for p, a in alts if not a.strip() or a.endswith((".png", ".svg")) or "_images/" in a]
    assert not bad, bad[:5]


def test_describe_figures_names_the_section_and_the_prose_above():
    cells = [{"cell_type": "markdown", "source": "## 4. The critic\n\nThe `value` head regresses on $r$. More."},
             {"cell_type": "code", "source": "plot()", "outputs": [{"data": {"image/png": "x"}}]},
             {"cell_type": "code", "source": "print()", "outputs": [{"text": "y"}]}]
    book.describe_figures(cells)
    assert cells[1]["metadata"]["mystnb"]["image"]["alt"] == "Figure in '4. The critic': The value head regresses on ."
    assert "metadata" not in cells[2]


def test_link_checks_links_only_known_names_outside_code_and_links():
    text = ("`a_check` and `other` and [`a_check`](x.md)\n```python\nprint(`a_check`)\n```\n``a_check``")
    out = book.link_checks(text, {"a_check"}, "../trust.html")
    assert out.count('href="../trust.html#check-a_check"') == 1
    assert "`other`" in out and "[`a_check`](x.md)" in out and "print(`a_check`)" in out and "``a_check``" in out


def test_no_book_page_says_a_committed_study_is_missing_or_crashed(built):
    site, _ = built
    shown = {p.relative_to(site).as_posix(): m.group(0) for p in pages(site)
             if (m := MISSING_OR_CRASHED.search(re.sub(r"<[^>]+>", "", p.read_text(encoding="utf-8"))))}
    assert not shown, shown


def test_the_missing_study_pattern_can_fail():
    assert MISSING_OR_CRASHED.search("diagnosis.json not found under rendered/pinterest_rlbp: run its make target")
    assert MISSING_OR_CRASHED.search("Traceback (most recent call last):")
    assert not MISSING_OR_CRASHED.search("most of the headroom that exists is not found")

def test_the_book_has_every_chapter(built):
    site, _ = built
    have = {str(p.relative_to(site)) for p in pages(site)}
    for method in ("pinterest_rlbp", "waypoint_opd"):
        for seed in (42, 43, 44):
            assert f"methods/{method}/seed-{seed}.html" in have
    assert {"index.html", "summary.html", "trust.html", "reproducibility.html", "studies/index.html"} <= have
    front = re.sub(r"<[^>]+>", "", (site / "index.html").read_text())                # code is highlighted per token
    assert "make reproduce" in front and "make test" in front                       # the two commands


def test_the_book_loads_nothing_from_another_host(built):
    site, _ = built
    assert book.external_resources(site) == []
    assert (site / "_static" / "mathjax" / "tex-mml-chtml.js").is_file()


def test_the_external_resource_scan_finds_a_planted_one(tmp_path):
    (tmp_path / "a.html").write_text('<p><a href="https://example.org/">a link a reader clicks is fine</a></p>'
                                     '<script src="https://cdn.example.org/x.js"></script>')
    (tmp_path / "b.css").write_text("@font-face { src: url('//fonts.example.org/f.woff2'); }")
    found = book.external_resources(tmp_path)
    assert len(found) == 2 and found[0].startswith("a.html") and found[1].startswith("b.css")


def count_intervals(data, top: str = "") -> int:
    """Every interval anywhere in a study JSON (nested ones included), by a walk of our own, not the builder's:
    a dict with both 95% bounds (``ci95_low``/``ci95_high``), or with numeric ``low``/``high`` (the Holm rows)
    outside the ``per_seed`` records (whose per-seed estimator intervals are inputs)."""
    if isinstance(data, dict):
        here = "ci95_low" in data and "ci95_high" in data
        if not here and top != "per_seed" and "low" in data and "high" in data:
            here = all(type(data[k]) in (int, float) for k in ("low", "high"))
        return here + sum(count_intervals(v, top or str(k)) for k, v in data.items())
    if isinstance(data, list):
        return sum(count_intervals(v, top) for v in data)
    return 0


def study_jsons():
    return sorted(p for method in ("pinterest_rlbp", "waypoint_opd") for p in RENDERED.joinpath(method).glob("*.json")
                  if p.name != "summary.json" and not p.name.startswith("seed-"))


@pytest.mark.parametrize("path", study_jsons(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_interval_is_a_distinct_numerically_sortable_row(path):
    """Issue 32: every interval in a study JSON is one row with a label no other row has; the estimate,
    interval and verdict come first, and the estimate and the interval sort as numbers."""
    data = json.loads(path.read_text())
    table, n = book.intervals_table(data, "t")
    assert n == count_intervals(data)
    rows = re.findall(r"<tr>(.*?)</tr>", table)[1:]
    assert len(rows) == n
    heads = re.findall(r"<th>(.*?)</th>", table)
    assert heads[:4] == ["estimate", "95% CI (bounds rounded outward)", "verdict", "where in the JSON"]
    cells = [re.findall(r'<td data-sort="([^"]*)">(.*?)</td>', r) for r in rows]
    labels = [c[3][1] for c in cells]
    assert len(set(labels)) == n, [x for x in labels if labels.count(x) > 1][:3]
    # told apart by what they are, not by position: no occurrence number, no bare list index
    assert not [x for x in labels if " #" in x or re.search(r"\[\d+\]", x)][:3]
    for c in cells:
        for key, _shown in c[:2]:
            float(key)                                   # the estimate and the low bound sort as numbers


def test_nested_intervals_and_list_labels():
    """An interval inside an interval is its own row; list elements are told apart by every identifying key."""
    data = {"by_budget": {"600": {"mean_difference": 0.1, "ci95_low": 0.0, "ci95_high": 0.2,
                                  "minus_recorded": {"mean_difference": 0.3, "ci95_low": 0.2, "ci95_high": 0.4}}},
            "rows": [{"backup": "max_min", "logged_days": 4, "d": {"ci95_low": 1.0, "ci95_high": 2.0}},
                     {"backup": "max_min", "logged_days": 16, "d": {"ci95_low": 1.0, "ci95_high": 2.0}}]}
    labels = [w for w, _ in book.labelled_interval_rows(data)]
    assert labels == ["by_budget.600", "by_budget.600.minus_recorded", "rows[backup=max_min,logged_days=4].d",
                      "rows[backup=max_min,logged_days=16].d"]


def test_every_study_interval_is_shown(built):
    site, _ = built
    for method in ("pinterest_rlbp", "waypoint_opd"):
        for path in RENDERED.joinpath(method).glob("*.json"):
            if path.name == "summary.json" or path.name.startswith("seed-"):
                continue
            n = count_intervals(json.loads(path.read_text()))
            page = (site / "studies" / f"{method}-{path.stem}.html").read_text()
            table = re.search(rf'<table class="litrepro-table" id="intervals-{method}-{path.stem}">(.*?)</table>',
                              page, re.S)
            assert (table is not None) == (n > 0), path
            if table:
                assert table.group(1).count("<tr>") == n + 1, path                  # header + every row


from sphinx.search.en import SearchEnglish  # noqa: E402  (after the importorskip of the book's packages)


def search_index(site: Path) -> tuple[list[str], dict[str, set[int]]]:
    """(docnames, term -> the pages it is on) from Sphinx's ``searchindex.js``."""
    text = (site / "searchindex.js").read_text(encoding="utf-8")
    index = json.loads(text[text.index("(") + 1:text.rindex(")")])
    terms: dict[str, set[int]] = {}
    for table in ("terms", "titleterms"):                     # a word in a heading is indexed as a title term
        for t, d in index[table].items():
            terms.setdefault(t, set()).update(d if isinstance(d, list) else [d])
    return index["docnames"], terms


def unsearchable(words: set[str], doc: int, terms: dict[str, set[int]]) -> list[str]:
    """The words the search cannot find on page ``doc``: the word's stem, as Sphinx's English search stems it
    ('recorded' as 'record'), is no indexed term of that page."""
    stem = SearchEnglish({}).stem
    return sorted(w for w in words if doc not in terms.get(stem(w.lower()), set()))


def test_search_finds_every_study_row_and_trust_row(built):
    """The study tables and the trust report's tables are raw HTML, which Sphinx's search skips; every word of
    every interval row's label and every check name must still be found on its page."""
    site, _ = built
    docnames, terms = search_index(site)
    for path in study_jsons():
        data = json.loads(path.read_text())
        labels = [where for where, _ in book.labelled_interval_rows(data)]
        if not labels:
            continue
        words = {w for label in labels for w in SearchEnglish({}).split(label) 
                 if len(w) > 3 and not w.isdigit() and w.lower() not in SearchEnglish.stopwords}
        doc = docnames.index(f"studies/{path.parent.name}-{path.stem}")
        assert not unsearchable(words, doc, terms)[:5], path
    names = {n for method in rendered_check_names().values() for n in method}
    assert not unsearchable(names, docnames.index("trust"), terms)[:5]


def test_the_search_test_sees_a_word_missing_from_a_page():
    terms = {"record": {0}, "minus_record": {1}, "gamma_0": {0}}
    assert unsearchable({"minus_recorded", "gamma_0"}, 0, terms) == ["minus_recorded"]
    assert unsearchable({"minus_recorded"}, 1, terms) == []


def test_per_arm_per_seed_records_become_rows_whatever_their_shape():
    """A study's arm -> seed -> record mapping is a table even when a record is not a dict, as in
    backup_study.json's ``refused_arms`` (arm -> seed -> the checks that failed)."""
    data = {"refused_arms": {"policy": {"53": ["fusion_changes_preference"]}},
            "per_seed": {"max_min": {"42": {"gain": 0.5, "checks": {"a": True}}}}}
    tables = dict(book.record_tables(data))
    assert tables["refused_arms"] == [{"arm": "policy", "seed": 53, "value": ["fusion_changes_preference"]}]
    assert tables["per_seed"] == [{"arm": "max_min", "seed": 42, "gain": 0.5, "checks.a": True}]


def test_the_trust_report_lists_every_rendered_check(built):
    site, _ = built
    text = (site / "trust.html").read_text()
    for method, names in rendered_check_names().items():
        for name in names:
            assert f'id="check-{name}"' in text, (method, name)


def test_the_trust_report_shows_each_fault_tests_committed_outcome(built):
    """The summary counts the committed outcomes; every fault test's own line says how it did."""
    import html
    import re

    from litrepro import trust

    site, _ = built
    text = (site / "trust.html").read_text()
    results = trust.load_fault_results()
    n = len(results["tests"])
    assert n > 100 and f"Their {n} fault tests in the full" in text and f"{n} passed." in text
    assert results["commit"] in text
    lines = re.findall(r"<li>(?:<a href=\"[^\"]+\">)?<code>([^<]+)</code>(?:</a>)?: <span class=\"(\w+)\">([^<]+)</span></li>",
                       text)
    lines = [(html.unescape(t), c, o) for t, c, o in lines]
    assert {t for t, _, _ in lines} == set(results["tests"])
    assert all(o == results["tests"][t] and c == trust.OUTCOME_CLASS[o] for t, c, o in lines)


def test_readme_links_resolve_in_the_book(tmp_path, monkeypatch):
    linker = book.Linker(tmp_path)
    text = ("[nb](notebooks/waypoint_opd.ipynb) [d](docs/x.md#y) [f](src/litrepro/stats.py) [gone](no/such.md) "
            "[web](https://example.org) [a](#here)")
    monkeypatch.setitem(linker.pages, "docs/x.md", "docs/x.md")
    out = linker.rewrite(text, "README.md", "index.md")
    assert "[nb](methods/waypoint_opd/seed-42.ipynb)" in out and "[d](docs/x.md#y)" in out
    assert "[f](files/src/litrepro/stats.py)" in out and (tmp_path / "files/src/litrepro/stats.py").is_file()
    assert " gone " in out and linker.warnings and "(no/such.md) leads to no file" in linker.warnings[0]
    assert "[web](https://example.org)" in out and "[a](#here)" in out
    assert linker.rewrite("[r](../README.md)", "docs/x.md", "docs/x.md") == "[r](../index.md)"


def test_the_builder_never_deletes_a_folder_it_did_not_make(tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    assert book.main(["--out", str(mine), "--guards-registry", str(tmp_path / "none.json")]) == 2
    assert book.main(["--out", str(mine)]) == 2
    err = capsys.readouterr().err
    assert "refusing to delete it" in err and err.count("ERROR:") == 2
    assert (mine / "notes.txt").read_text() == "keep me"


# --- The trust report's data ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def registry(built):
    return json.loads((built[1] / "_guards_registry.json").read_text())


def test_waypoint_registry_covers_exactly_its_checks():
    from litrepro.waypoint.registry import ARM_CHECKS, GUARDS

    recorded = rendered_check_names()["waypoint_opd"]
    studied = set(trust.study_tallies("waypoint_opd", ARM_CHECKS))
    # the curriculum study is built but its output is not committed (it refused: docs/waypoint_opd.md, "A teacher
    # that forgets"); its checks are registered and recorded nowhere until it is
    unreported = {k for k, (stage, _) in GUARDS.items() if stage == "curriculum RL"}
    assert not (RENDERED / "waypoint_opd" / "curriculum_study.json").exists() or unreported <= studied
    assert recorded | studied | unreported == set(GUARDS)
    assert set(ARM_CHECKS.values()) <= set(GUARDS)
    assert all(stage and line for stage, line in GUARDS.values())


def test_every_guards_mark_names_a_check_or_metric_its_test_asserts(registry):
    """A mark names something the project records, and the marked test's own body names it (so a mark
    cannot drift from what its test asserts); a parametrized test's module names it (its fault table)."""
    known = set()
    for method in trust.AUDIT_MODULES:
        guards, arms = trust.registry(method)
        known |= set(guards or {}) | set(arms) | set(trust.study_tallies(method, arms))
        for path in (RENDERED / method).glob("seed-*.json"):
            data = json.loads(path.read_text())
            known |= {k for key, v in data.items() if isinstance(v, dict) for k in v}
    assert registry, "no test is marked guards"
    for name, node_ids in registry.items():
        assert name in known, f"guards({name!r}) names no recorded check or metric: {node_ids}"
        for node_id in node_ids:
            path, _, rest = node_id.partition("::")
            func = rest.split("[")[0]
            source = (ROOT / path).read_text()
            if "[" in rest:              # parametrized: the name sits in its table of faults, in the module
                assert name in source, (name, node_id)
                continue
            match = re.search(rf"\ndef {re.escape(func)}\(.*?(?=\n(?:@|def |class |# ---)|\Z)", source, re.S)
            assert match and name in match.group(0).split("\n", 2)[-1], (name, node_id)


def test_the_waypoint_fault_tests_are_all_in_the_registry(registry):
    marked = {i for ids in registry.values() for i in ids}
    for node in ("tests/test_waypoint_faults.py::test_gradient_ascent",
                 "tests/test_waypoint_checks.py::test_heldout_read_fails"):
        assert node in marked


def test_collection_runs_no_test(tmp_path):
    """The collector is collection only: it writes the registry and runs nothing (a planted test would fail)."""
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (tests / "test_planted.py").write_text(
        "import pytest\n\n@pytest.mark.guards('some_check')\ndef test_x():\n    raise SystemExit('ran')\n")
    reg = trust.collect_fault_registry(tmp_path / "reg.json", root=tmp_path)
    assert reg == {"some_check": ["tests/test_planted.py::test_x"]}


def test_trust_rows_flag_missing_fault_tests_and_unregistered_methods(tmp_path, monkeypatch):
    for method, checks in (("pinterest_rlbp", {"a_check": True}), ("waypoint_opd", {"b_check": True, "c": False})):
        (tmp_path / method).mkdir()
        for seed in (42, 43):
            (tmp_path / method / f"seed-{seed}.json").write_text(json.dumps({"extra_checks": checks, "metrics": {}}))
    (tmp_path / "waypoint_opd" / "study.json").write_text(json.dumps(
        {"per_seed": [{"checks": {"b_check": True}}, {"checks": {"b_check": False}}]}))
    monkeypatch.setitem(trust.AUDIT_MODULES, "pinterest_rlbp", "litrepro.no_such_audit_module")
    rows, others = trust.build_rows({"b_check": ["tests/t.py::test_b"], "some_metric": ["tests/t.py::test_m"]},
                                    rendered=tmp_path)
    by = {r.name: r for r in rows}
    assert by["a_check"].stage == trust.NOT_REGISTERED and not by["a_check"].fault_tests
    assert by["b_check"].fault_tests == ["tests/t.py::test_b"] and by["b_check"].held_on_seeds
    assert not by["b_check"].held_in_studies and by["b_check"].studies[0].records == 2
    assert not by["c"].held_on_seeds and others == {"some_metric": ["tests/t.py::test_m"]}
    page = trust.report_markdown(rows, others, collected_with="x")
    assert "no fault test" in page and "not registered" in page and "some_metric" in page


# --- In the browser --------------------------------------------------------------------------------------

needs_chromium = pytest.mark.skipif(browser.chromium_missing(), reason=browser.INSTALL_HINT)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def served(built):
    """The site over HTTP on 127.0.0.1, on a port the server binds itself (port 0)."""
    handler = functools.partial(_Quiet, directory=str(built[0]))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", built[0]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


IMAGES_JS = """async () => {
    const imgs = Array.from(document.images);
    imgs.forEach(i => { i.loading = 'eager'; });
    await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; })));
    return imgs.map(i => [i.currentSrc || i.src, i.naturalWidth]);
}"""
LINKS_JS = "() => Array.from(document.querySelectorAll('a[href]')).map(a => a.href)"


def _ids(path: Path, cache: dict) -> set[str]:
    if path not in cache:
        cache[path] = set(re.findall(r'\b(?:id|name)="([^"]+)"', path.read_text(errors="replace")))
    return cache[path]


def _broken(url: str, base: str, site: Path, cache: dict) -> str | None:
    """Why an internal link is broken, or None."""
    parts = urllib.parse.urlsplit(url)
    rel = urllib.parse.unquote(parts.path)[len(urllib.parse.urlsplit(base).path):].lstrip("/") if base else ""
    target = site / rel
    if target.is_dir():
        target = target / "index.html"
    if not target.is_file():
        return f"{url}: no such file"
    if parts.fragment and target.suffix == ".html" and urllib.parse.unquote(parts.fragment) not in _ids(target, cache):
        return f"{url}: no anchor #{parts.fragment}"
    return None


def _open(page, url: str, requests: list[str]) -> tuple[list, list[str]]:
    page.goto(url, wait_until="load")
    page.wait_for_load_state("networkidle")
    return page.evaluate(IMAGES_JS), page.evaluate(LINKS_JS)


@needs_chromium
def test_every_page_loads_offline_with_its_images_and_links(served):
    base, site = served
    outside, broken, missing_images, failed, cache = [], [], [], [], {}
    with browser.browser() as b:
        context = b.new_context()

        def route(r):
            host = urllib.parse.urlsplit(r.request.url).hostname
            if r.request.url.startswith(("data:", "blob:")) or host in ("127.0.0.1", "localhost"):
                r.continue_()
            else:
                outside.append(r.request.url)
                r.abort()
        context.route("**/*", route)
        context.on("response", lambda r: r.status >= 400 and not r.url.endswith("/favicon.ico")
                   and failed.append(f"{r.status} {r.url}"))
        page = context.new_page()
        opened, n_images, n_links = 0, 0, 0
        for path in pages(site):
            url = f"{base}/{path.relative_to(site).as_posix()}"
            images, links = _open(page, url, outside)
            opened, n_images, n_links = opened + 1, n_images + len(images), n_links + len(links)
            missing_images += [f"{url}: {src}" for src, width in images if not width > 0]
            for link in links:
                if link.startswith(base):
                    why = _broken(link, base, site, cache)
                    if why:
                        broken.append(f"{url} -> {why}")
        context.close()
    assert opened >= 15 and n_images >= 20 and n_links >= 100          # the checks below saw something
    assert not outside, outside[:10]
    assert not failed, failed[:10]                                   # MathJax's fonts and extensions included
    assert not missing_images, missing_images[:10]
    assert not broken, broken[:10]


@needs_chromium
def test_trust_report_in_the_browser_lists_every_check(served):
    base, _ = served
    with browser.browser() as b:
        page = b.new_page()
        page.goto(f"{base}/trust.html", wait_until="load")
        text = page.inner_text("main")
        for names in rendered_check_names().values():
            assert not [n for n in names if n not in text]
        # the tables sort: clicking "check" twice puts the last name first
        header = page.locator("#checks-waypoint_opd th", has_text="check").first
        header.click()
        header.click()
        first = page.locator("#checks-waypoint_opd tbody tr td").first.inner_text()
        from litrepro.waypoint.registry import GUARDS
        assert first == max(rendered_check_names()["waypoint_opd"] | set(GUARDS))


@needs_chromium
def test_the_front_page_opens_from_disk(built):
    site, _ = built
    requests: list[str] = []
    with browser.browser() as b:
        page = b.new_page()
        page.on("request", lambda r: requests.append(r.url))
        images, links = _open(page, (site / "index.html").as_uri(), requests)
        assert "litrepro" in page.title()
    assert not [u for u in requests if not u.startswith(("file://", "data:", "blob:"))]
    assert all(width > 0 for _, width in images)
    local = [u for u in links if u.startswith("file://")]
    assert local
    for u in local:
        path = Path(urllib.parse.unquote(urllib.parse.urlsplit(u).path))
        assert path.is_file() or (path / "index.html").is_file(), u


def test_audit_figures_are_recounted_from_the_committed_per_bug_report(tmp_path, monkeypatch):
    """Issue 32 item 3: an audit whose source is a committed report is recounted from its rows (our own count
    here, not trust's), and flipping one bug's verdict moves the figure shown; an audit without one shows no figure."""
    src = ROOT / "benchmarks" / "fault_audits" / "rlbp_unseen_4.json"
    bugs = json.loads(src.read_text())["bugs"]
    moving = [b for b in bugs if b["moved"]]
    caught = sum(b["verdict"] == "caught" for b in moving)
    table = trust.audits_table()
    assert f"{caught} of {len(moving)}" in table and "recounted from" in table
    assert "no per-bug report committed, so no figure is shown" in table     # the audits that cite an issue number
    typed = next(a for a in json.loads(trust.FAULT_AUDITS.read_text())["audits"] if trust._report_of(a) is None)
    assert trust._report_of(typed) is None
    for part in typed["parts"]:                                   # their hand-typed tallies are not quoted
        assert f"{part['caught']} of {part['number_moving']}" not in table
    reports = tmp_path / "benchmarks" / "fault_audits"
    reports.mkdir(parents=True)
    data = json.loads(src.read_text())
    flip = next(b for b in data["bugs"] if b["moved"] and b["verdict"] == "caught")
    flip["verdict"] = "missed"
    (reports / src.name).write_text(json.dumps(data))
    monkeypatch.setattr(trust, "ROOT", tmp_path)
    monkeypatch.setattr(trust, "AUDIT_REPORTS", reports)
    assert f"{caught - 1} of {len(moving)}" in trust.audits_table()
    assert any(flip["id"] in line for line in trust.audit_report_sections())


def test_an_audit_report_with_parts_is_recounted_per_part(tmp_path, monkeypatch):
    reports = tmp_path / "benchmarks" / "fault_audits"
    reports.mkdir(parents=True)
    bugs = [{"id": f"B{i}", "part": part, "file": "src/litrepro/x.py", "verdict": verdict, "moved": moved}
            for i, (part, verdict, moved) in enumerate([("studies", "caught", ["a"]), ("studies", "missed", ["b"]),
                                                        ("studies", "caught", []), ("prose", "caught", ["c"])])]
    (reports / "x.json").write_text(json.dumps({"bugs": bugs}))
    audits = tmp_path / "fault_audits.json"
    audits.write_text(json.dumps({"about": "", "audits": [{"name": "fifth", "source": "benchmarks/fault_audits/x.json"}]}))
    monkeypatch.setattr(trust, "ROOT", tmp_path)
    monkeypatch.setattr(trust, "AUDIT_REPORTS", reports)
    table = trust.audits_table(audits)
    assert "2 of 3" in table                              # all parts: B0, B1, B3 moved a figure; B0 and B3 caught
    assert ">studies<" in table and "1 of 2" in table     # the bug that moved nothing (B2) is not counted
    assert ">prose<" in table and "1 of 1" in table


# --- The trust report read back by code of its own (litrepro.trust_readback) ------------------------

def _trust_inputs(built):
    from litrepro import trust_readback

    _, src = built
    markdown = (src / "trust.md").read_text(encoding="utf-8")
    registry = json.loads((src / "_guards_registry.json").read_text(encoding="utf-8"))
    arm_maps = {m: trust.registry(m)[1] for m in trust.AUDIT_MODULES}
    return trust_readback, markdown, registry, arm_maps


def test_every_trust_cell_recomputes_from_the_json(built):
    reader, markdown, registry, arm_maps = _trust_inputs(built)
    assert reader.check(markdown, registry, arm_maps) == []
    assert len(reader.table_rows(markdown, "checks-pinterest_rlbp")) > 50


@pytest.mark.parametrize("old, new", [
    (": 640 of 640 (seed x condition x arm)", ": 639 of 640 (seed x condition x arm)"),   # a study tally off by one
    ("true on 42, 43, 44", "true on 42, 43"),                                            # a seed dropped
    (" tests, ", " tests, 1"),                                                           # a fault-test count
])
def test_a_changed_trust_cell_fails_the_readback(built, old, new):
    reader, markdown, registry, arm_maps = _trust_inputs(built)
    assert old in markdown
    assert reader.check(markdown.replace(old, new), registry, arm_maps)          # in the sort key and the text


def test_a_study_record_that_failed_but_shows_held_fails_the_readback(built, tmp_path):
    """The audit's miss: the page says 'k of k held' for a study whatever its records say. Here the records say
    one seed failed, and the committed page (made from the real records) no longer reads back."""
    reader, markdown, registry, arm_maps = _trust_inputs(built)
    shutil.copytree(RENDERED, tmp_path / "rendered", ignore=shutil.ignore_patterns("*.ipynb", "*.png", "*.html"))
    path = tmp_path / "rendered" / "waypoint_opd" / "effect_study.json"
    data = json.loads(path.read_text())
    name = next(iter(data["per_seed"][0]["checks"]))
    data["per_seed"][0]["checks"][name] = False
    path.write_text(json.dumps(data))
    problems = reader.check(markdown, registry, arm_maps, root=tmp_path)
    assert any(f"trust: {name}, studies:" in p for p in problems), problems
    assert any("did not hold somewhere" in p for p in problems), problems


@pytest.mark.parametrize("name, old, new, words", [
    # the seventh unseen audit's P14: per-seed study rows tallied under the unit 'seed'
    ("study_tallies", '_add(tallies, name, study, "seed x condition", 1, int(value is True))',
     '_add(tallies, name, study, "seed", 1, int(value is True))', "studies:"),
    # its P15: the mark of a seed value that the seed file records with a note swapped with one that has none
    ("seeds_cell", 'return (text + (f" ({row.note})" if row.note else ""), "neutral" if row.note else "bad")',
     'return (text + (f" ({row.note})" if row.note else ""), "bad" if row.note else "neutral")', "marked 'bad'"),
    # the eighth unseen audit's P21: every bug of a report counted as number-moving (the wrong denominator)
    ("audit_report_tally", 'moving = [b for b in bugs if b.get("moved")]', "moving = [b for b in bugs]",
     "its rows give"),
    # and its per-part twin: a part's caught bugs counted over every verdict
    ("audit_report_parts", 't["caught"] += b.get("verdict") == "caught"', 't["caught"] += 1', "its rows give"),
    # the ninth unseen audit's P20: "1 tests" (the plural's threshold off by one)
    ("faults_cell", 'test{"s" if len(row.fault_tests) > 1 else ""}', 'test{"s" if len(row.fault_tests) > 0 else ""}',
     "fault tests: '1 tests"),
])
def test_a_trust_page_from_a_faulty_writer_fails_the_readback(built, monkeypatch, name, old, new, words):
    reader, markdown, registry, arm_maps = _trust_inputs(built)
    monkeypatch.setattr(trust, name, patched(trust, name, old, new))
    rows, others = trust.build_rows(registry)
    page = trust.report_markdown(rows, others, collected_with="pytest tests --collect-only --guards-registry PATH")
    problems = reader.check(page, registry, arm_maps)
    assert any(words in p for p in problems), problems
