"""The reader's edition: a static HTML book of the committed ``rendered/`` notebooks and JSON.

``python -m litrepro.book --out build/book`` (``make book``) generates a Sphinx source folder
beside the output (``build/book-src``) and runs Sphinx with MyST-NB on it.  Nothing is executed:
the notebooks are shown as committed (``nb_execution_mode = "off"``), and every generated page
is built from data:

- the front page is README.md, its generated blocks included, with its links to repository
  files made to resolve in the book (``docs/*.md`` become pages, the method notebooks their
  rendered chapter, any other file a download; a link to no file stops the build);
- one chapter per method: the rendered seed-42 notebook, with seeds 43 and 44 under it;
- the studies: each study JSON's figure, every interval it holds (a sortable, filterable table,
  never truncated) and its per-seed records;
- the cross-seed summary (``rendered/summary.ipynb``);
- reproducibility: every ``docs/*.md`` there is at build time;
- the trust report (:mod:`litrepro.trust`).

Sphinx runs with warnings as errors, so a broken cross-reference or anchor stops the build too.
The site loads nothing from another host (:func:`external_resources` checks the built HTML).
Both output folders are removed and rebuilt only when they carry the book's stamp file, so a
folder the builder did not create is never deleted.

What the builder refuses (issue 33):

- it publishes and reads only regular files inside the repository, whatever the link's form (an
  absolute path, ``..``, a symlink out of the repository, or anything under ``.git``);
- every string from JSON is escaped where it lands: HTML text and attributes (``id`` included)
  with :func:`html.escape`, a markdown heading or sentence as a code span that no backtick or
  newline in the string can end (:func:`md_code`);
- a JSON that is malformed, too large or nested too deep (:mod:`litrepro.jsonbounds`) stops the
  build with one line naming the file, exit status 2;
- the site is built into a temporary folder beside ``--out`` and swapped in with one
  ``renameat2(RENAME_EXCHANGE)``, so a failed build leaves the previous site whole.
"""

from __future__ import annotations

import argparse
import ctypes
import html
import json
import os
import posixpath
import re
import shutil
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

from litrepro import jsonbounds
from litrepro.paths import RENDERED, ROOT

HERE = Path(__file__).resolve().parent
STAMP = ".litrepro-book"
#: The method chapters, in book order; a method is shown when rendered/<method>/seed-*.ipynb exist.
METHODS = ("pinterest_rlbp", "waypoint_opd")
FRONT_SEED = 42
#: Files copied verbatim into the built site (``html_extra_path``): the sources and tests the trust report links.
EXTRA = "_extra"
#: MathJax 3 files the site needs (tex input with its autoloaded extensions, CommonHTML output and
#: its fonts, the menu and assistive MathML), copied from the django-static-mathjax wheel.
MATHJAX_PARTS = ("tex-mml-chtml.js", "input/tex/extensions", "output/chtml/fonts/woff-v2", "ui", "a11y")
LINK = re.compile(r"(!?)\[((?:[^\[\]\n]|\[[^\]\n]*\])*)\]\(([^()\s]+)((?:\s+\"[^\"]*\")?)\)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


class BookError(Exception):
    """Bad input to the builder: one line, exit status 2."""


# --- Reading the repository: regular files inside it, JSON bounded ---------------------------------------

def inside_repository(path: Path, root: Path | None = None) -> Path:
    """``path`` resolved (links followed), refused unless it is a regular file inside ``root`` and not under ``.git``."""
    root = (root or ROOT).resolve()
    real = Path(path).resolve()
    try:
        rel = real.relative_to(root)
    except ValueError:
        raise BookError(f"{path}: leads outside the repository ({real}); refused") from None
    if ".git" in rel.parts:
        raise BookError(f"{path}: inside .git; refused")
    try:
        info = os.stat(real)
    except OSError as err:
        raise BookError(f"{path}: cannot be read ({err.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise BookError(f"{path}: not a regular file; refused")
    return real


def repo_text(path: Path) -> str:
    """The text of a repository file (see :func:`inside_repository`)."""
    real = inside_repository(path)
    try:
        return jsonbounds.read_bytes(real, str(path)).decode("utf-8")
    except (jsonbounds.JSONBoundsError, UnicodeDecodeError) as err:
        raise BookError(str(err).splitlines()[0]) from None


def repo_json(path: Path) -> Any:
    """The JSON in a repository file, bounded in size and depth; one line naming the file when it is bad."""
    real = inside_repository(path)
    try:
        return jsonbounds.read(real, _shown(path))
    except jsonbounds.JSONBoundsError as err:
        raise BookError(str(err)) from None


def repo_copy(path: Path, dest: Path) -> None:
    """Copy a repository file (see :func:`inside_repository`) to ``dest``."""
    shutil.copyfile(inside_repository(path), dest)


def _shown(path: Path) -> str:
    try:
        return Path(path).relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def md_code(text: str) -> str:
    """``text`` as one markdown code span that nothing inside it can end: newlines become spaces and the
    fence is one backtick longer than the longest run of backticks in it (CommonMark's rule), so no
    HTML, role or directive in the string is interpreted."""
    text = " ".join(str(text).splitlines())
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or (text.startswith(" ") and text.endswith(" ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


# --- Folders the builder owns ---------------------------------------------------------------------

def fresh_folder(path: Path) -> None:
    """Empty ``path`` for a new build; refuse one that exists without the book's stamp."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise BookError(f"{path} exists and is not a folder: refusing to replace it")
    if path.exists():
        if any(path.iterdir()) and not (path / STAMP).is_file():
            raise BookError(f"{path} is not empty and was not made by `python -m litrepro.book` "
                            f"(no {STAMP} in it): refusing to delete it")
        shutil.rmtree(path)
    path.mkdir(parents=True)
    (path / STAMP).write_text("made by python -m litrepro.book; removed and rebuilt by the next build\n")


# --- Links ------------------------------------------------------------------------------------------

class Linker:
    """Maps a repository-relative link target to the book page or file that shows it."""

    def __init__(self, src: Path, root: Path = ROOT):
        self.src, self.root = src, root
        self.warnings: list[str] = []
        self.pages: dict[str, str] = {"README.md": "index.md", "notebooks/summary.ipynb": "summary.ipynb",
                                      "rendered/summary.ipynb": "summary.ipynb"}
        for method in METHODS:
            self.pages[f"notebooks/{method}.ipynb"] = f"methods/{method}/seed-{FRONT_SEED}.ipynb"
            for nb in (RENDERED / method).glob("seed-*.ipynb"):
                self.pages[f"rendered/{method}/{nb.name}"] = f"methods/{method}/{nb.name}"
        for doc in (root / "docs").glob("*.md"):
            self.pages[f"docs/{doc.name}"] = f"docs/{doc.name}"

    def target(self, repo_target: str) -> str | None:
        """The book path showing ``repo_target`` (a file is copied under ``files/``), or None."""
        if repo_target in self.pages:
            return self.pages[repo_target]
        if posixpath.isabs(repo_target) or repo_target == ".." or repo_target.startswith("../"):
            return None
        try:                                     # links followed: the file itself must be inside the repository
            real = inside_repository(self.root / repo_target, self.root)
        except BookError:
            return None
        book = f"files/{repo_target}"
        dest = self.src / book
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(real, dest)
        return book

    def extra(self, repo_target: str) -> str | None:
        """A repository file copied as-is to ``files/<path>`` of the built site (through ``html_extra_path``), for
        raw-HTML links such as the trust report's; its site path, or None when it is not a file of the repository."""
        try:
            real = inside_repository(self.root / repo_target, self.root)
        except BookError:
            return None
        if not real.is_file():
            return None
        dest = self.src / EXTRA / "files" / repo_target
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(real, dest)
        return f"files/{repo_target}"

    def rewrite(self, text: str, repo_doc: str, book_doc: str) -> str:
        """Rewrite every relative markdown link of a document at ``repo_doc`` shown at ``book_doc``."""
        def sub(m: re.Match) -> str:
            bang, label, target, title = m.groups()
            if SCHEME.match(target) or target.startswith("#"):
                return m.group(0)
            path, _, anchor = target.partition("#")
            repo_target = posixpath.normpath(posixpath.join(posixpath.dirname(repo_doc), path))
            book = self.target(repo_target)
            if book is None:
                self.warnings.append(f"{repo_doc}: [{label}]({target}) leads to no file ({repo_target})")
                return label if not bang else f"`{label or path}`"
            rel = posixpath.relpath(book, posixpath.dirname(book_doc) or ".")
            return f"{bang}[{label}]({rel}{'#' + anchor if anchor else ''}{title})"
        return LINK.sub(sub, text)


# --- Pages ------------------------------------------------------------------------------------------

def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _seed_notebooks(method: str) -> list[tuple[int, Path]]:
    found = [(int(p.stem.removeprefix("seed-")), p) for p in (RENDERED / method).glob("seed-*.ipynb")
             if p.stem.removeprefix("seed-").isdigit()]
    return sorted(found, key=lambda x: (x[0] != FRONT_SEED, x[0]))


def _md_cell(text: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": text}


#: An inline code span (one backtick each side), not inside a markdown link's label.
_CODE_SPAN = re.compile(r"(?<![`\[])`([A-Za-z_][A-Za-z0-9_.]*)`(?![`\]])")


def link_checks(markdown: str, checks: set[str], trust_href: str) -> str:
    """Each inline-code check name of ``markdown`` (outside fenced code) as a link to its trust-report row."""
    parts = re.split(r"(^```.*?^```[ \t]*$)", markdown, flags=re.M | re.S)    # odd parts: fenced code, kept
    for i in range(0, len(parts), 2):
        parts[i] = _CODE_SPAN.sub(
            lambda m: (f'<a class="litrepro-check" href="{trust_href}#check-{m.group(1)}"><code>{m.group(1)}</code></a>'
                       if m.group(1) in checks else m.group(0)), parts[i])
    return "".join(parts)


def _plain(markdown: str) -> str:
    """Markdown as plain words for an alt text: no heading marks, code ticks, emphasis, math or link targets."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$", "", text, flags=re.S)
    text = re.sub(r"[#*`>]|(?<!\w)_|_(?!\w)", "", text)
    return " ".join(text.split())


def _first_sentence(markdown: str, limit: int = 220) -> str:
    text = _plain(re.sub(r"^```.*?^```[ \t]*$", "", markdown, flags=re.M | re.S))
    m = re.match(r"(.+?[.:!?])(?:\s|$)", text)
    sentence = m.group(1) if m else text
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"


def describe_figures(cells: list[dict]) -> None:
    """Give every code cell that shows a picture an alt text (``mystnb.image.alt``): the section it is in and the
    first sentence of the prose right above it, which says what the picture shows."""
    heading, prose = "", ""
    for cell in cells:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "markdown":
            heads = [l for l in source.splitlines() if l.startswith("#")]
            if heads:
                heading = _plain(heads[-1])
            body = "\n".join(l for l in source.splitlines() if not l.startswith("#")).strip()
            prose = _first_sentence(body) if body else ""
            continue
        if cell["cell_type"] != "code" or not any(
                "image/png" in (o.get("data") or {}) for o in cell.get("outputs", [])):
            continue
        pictures = sum("image/png" in (o.get("data") or {}) for o in cell.get("outputs", []))
        alt = f"Figure in '{heading}'" + (f": {prose}" if prose else "") if heading else (prose or "Figure")
        if pictures > 1:
            alt += f" ({pictures} pictures)"
        cell.setdefault("metadata", {}).setdefault("mystnb", {}).setdefault("image", {})["alt"] = alt


def notebook_page(nb_path: Path, dest: Path, *, repo_doc: str, book_doc: str, linker: Linker, title_suffix: str,
                  preface: str, checks: set[str] | frozenset[str] = frozenset()) -> None:
    """Copy a rendered notebook into the book: its title tagged, a preface cell after it, links rewritten, and
    every check name in its prose linked to its row of the trust report."""
    nb = repo_json(nb_path)
    trust_href = posixpath.relpath("trust.html", posixpath.dirname(book_doc) or ".")
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            cell["source"] = link_checks(linker.rewrite(source, repo_doc, book_doc), set(checks), trust_href)
    describe_figures(nb["cells"])
    first = nb["cells"][0] if nb["cells"] else None
    if first is not None and first["cell_type"] == "markdown" and first["source"].startswith("# "):
        head, _, rest = first["source"].partition("\n")
        first["source"] = f"{head}{title_suffix}\n{rest}"
        nb["cells"].insert(1, _md_cell(preface))
    else:
        nb["cells"].insert(0, _md_cell(f"# {nb_path.stem}{title_suffix}\n\n{preface}"))
    _write(dest, json.dumps(nb))


def method_chapters(src: Path, linker: Linker) -> list[str]:
    """methods/<method>/seed-<N>.ipynb for every rendered seed; returns the chapters' docnames."""
    from litrepro import trust

    checks = trust.check_names()
    chapters = []
    for method in METHODS:
        seeds = _seed_notebooks(method)
        if not seeds:
            continue
        folder = src / "methods" / method
        folder.mkdir(parents=True, exist_ok=True)
        for seed, nb in seeds:
            others = [s for s, _ in seeds if s != seed]
            json_name = f"seed-{seed}.json"
            repo_copy(RENDERED / method / json_name, folder / json_name)
            lines = [f"> **Seed {seed}** of `{method}`, as rendered by papermill into `rendered/{method}/seed-{seed}.ipynb` "
                     "and committed; the book shows it as it is, without running it.",
                     f"> Its metrics, checks and curves: [`{json_name}`]({json_name}).",
                     "> Other seeds: " + ", ".join(f"[seed {s}](seed-{s}.ipynb)" for s in others) + "."]
            if seed == seeds[0][0] and others:
                lines += ["", "```{toctree}", ":hidden:", "", *[f"seed-{s}" for s in others], "```"]
            notebook_page(nb, folder / nb.name, repo_doc=f"notebooks/{method}.ipynb",
                          book_doc=f"methods/{method}/{nb.name}", linker=linker, title_suffix=f" (seed {seed})",
                          preface="\n".join(lines), checks=checks)
        chapters.append(f"methods/{method}/seed-{seeds[0][0]}")
    return chapters


def front_page(src: Path, linker: Linker, chapters: list[str], extra: list[str]) -> None:
    readme = repo_text(ROOT / "README.md")
    text = linker.rewrite(readme, "README.md", "index.md")
    toc = ["", "```{toctree}", ":hidden:", ":caption: Methods", "", *chapters, "```", "",
           "```{toctree}", ":hidden:", ":caption: Results and trust", "", *extra, "```", ""]
    _write(src / "index.md", text.rstrip() + "\n" + "\n".join(toc))


# --- Study pages: every interval and every per-seed record, as tables -----------------------------------

def _fmt(x: Any) -> str:
    if isinstance(x, bool) or x is None:
        return json.dumps(x)
    if isinstance(x, float):
        return f"{x:.4g}"
    if isinstance(x, (list, dict)):
        return json.dumps(x)
    return str(x)


def _sort_key(x: Any) -> str:
    """A cell's sort key: a number as its float (the table sorts numerically when every key is one), nothing as ''."""
    if x is None or x == "":
        return ""
    if isinstance(x, bool):
        return str(int(x))
    if isinstance(x, (int, float)):
        return repr(float(x))
    return _fmt(x)


#: The keys of a list element that tell it apart from its siblings, named first and in this order.
LABEL_KEYS = ("backup", "arm", "algo", "comparison", "metric", "teacher", "student_start", "teacher_rl_rollouts",
              "condition", "factor", "against", "logged_days", "critic_steps", "steps", "budget", "lambda", "lr", "seed")


def _is_interval(data: dict, where: str) -> bool:
    """A 95% interval: ``ci95_low`` and ``ci95_high``, or (outside the per-seed records, whose estimators'
    intervals are inputs, not results) ``low`` and ``high``, as the Holm-adjusted rows write them."""
    if "ci95_low" in data and "ci95_high" in data:
        return True
    return ("low" in data and "high" in data and not where.startswith("per_seed")
            and all(isinstance(data[k], (int, float)) and not isinstance(data[k], bool) for k in ("low", "high")))


def _element_labels(items: list) -> list[str]:
    """A label per list element: its :data:`LABEL_KEYS`, and, where those leave two siblings alike, every other
    text or integer field whose value differs between siblings; an element with none is named by its index."""
    def scalar(v):
        return isinstance(v, (str, int)) and not isinstance(v, bool)

    def label(value, keys):
        return ",".join(f"{k}={value[k]}" for k in keys if isinstance(value, dict) and k in value and scalar(value[k]))

    named = [label(v, LABEL_KEYS) for v in items]
    if len(set(named)) < len(named):
        extra = sorted({k for v in items if isinstance(v, dict) for k, x in v.items()
                        if k not in LABEL_KEYS and scalar(x)})
        varying = [k for k in extra if len({str(v.get(k)) for v in items if isinstance(v, dict)}) > 1]
        named = [label(v, (*LABEL_KEYS, *varying)) for v in items]
    return [n or str(i) for i, n in enumerate(named)]


def interval_rows(data: Any, where: str = "") -> Iterator[tuple[str, dict]]:
    """Every interval (:func:`_is_interval`) in a study JSON, with where it sits; an interval nested inside
    another (``by_budget.600.minus_recorded``) is a row of its own. A list element is named by its identifying
    keys (:func:`_element_labels`: ``backup=max_min,logged_days=16``)."""
    if isinstance(data, dict):
        if _is_interval(data, where):
            yield where, data
        for key, value in data.items():
            if isinstance(value, (dict, list)):
                yield from interval_rows(value, f"{where}.{key}" if where else str(key))
    elif isinstance(data, list):
        for label, value in zip(_element_labels(data), data):
            yield from interval_rows(value, f"{where}[{label}]")


def labelled_interval_rows(data: Any) -> list[tuple[str, dict]]:
    """:func:`interval_rows` with every label distinct: a label that repeats gets its occurrence, ``#2``, ``#3``."""
    out, seen = [], {}
    for where, row in interval_rows(data):
        seen[where] = seen.get(where, 0) + 1
        out.append((where if seen[where] == 1 else f"{where} #{seen[where]}", row))
    return out


STUDY_NAME = re.compile(r"[A-Za-z0-9_.-]+\.json")
INTERVAL_COLUMNS = ("comparison", "metric", "n", "mean_difference", "ci95_low", "ci95_high", "verdict")
#: The point estimate an interval is around: a mean difference, a mean, a share of headroom, a ratio's estimate.
ESTIMATE_KEYS = ("mean_difference", "mean", "estimate", "share", "ratio")


def table_html(headers: list[str], rows: list[list[tuple[str, str]]], table_id: str) -> str:
    """A sortable, filterable table (``litrepro-book.js``); a cell is (html, sort key)."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f'<td data-sort="{html.escape(k, quote=True)}">{c}</td>' for c, k in row) + "</tr>"
                   for row in rows)
    table = (f'<table class="litrepro-table" id="{html.escape(table_id, quote=True)}"><thead><tr>{head}</tr></thead>'
             f'<tbody>{body}</tbody></table>')
    return one_line(table)


def one_line(raw_html: str) -> str:
    """Raw HTML for a ``{raw} html`` block as one line: a line break from the data (character references
    instead) could otherwise end the block and start markdown, a directive or a role."""
    return raw_html.replace("\r", "&#13;").replace("\n", "&#10;")


def interval_cells(where: str, row: dict) -> tuple[Any, float, float, str]:
    """(estimate or None, low, high, verdict) of one interval row; the verdict is read from the interval."""
    from litrepro import stats

    mean = next((row[k] for k in ESTIMATE_KEYS if isinstance(row.get(k), (int, float))), None)
    low, high = (row["ci95_low"], row["ci95_high"]) if "ci95_low" in row else (row["low"], row["high"])
    return mean, low, high, stats.verdict({"ci95_low": low, "ci95_high": high})


def intervals_text(data: Any) -> list[str]:
    """Every interval again as a markdown list, one line per row, so that the book's search (which skips raw
    HTML) finds a study's rows by their labels."""
    from litrepro import stats

    lines = []
    for where, row in labelled_interval_rows(data):
        mean, low, high, verdict = interval_cells(where, row)
        estimate = f"{mean:+.3g}, " if isinstance(mean, (int, float)) else ""
        lines.append(f"- {md_code(where)}: {estimate}{stats.fmt_ci(low, high, sig=2)}, {md_code(verdict)}")
    return lines


def intervals_table(data: Any, table_id: str) -> tuple[str, int]:
    """Every interval of a study JSON as a row: the mean, the interval and the verdict first (so they are on screen),
    then where it sits in the JSON and its other scalar fields; each sorts numerically where it is a number."""
    from litrepro import stats

    found = labelled_interval_rows(data)
    extra: list[str] = []
    for _, row in found:
        for k in row:
            if k not in INTERVAL_COLUMNS and k not in extra and not isinstance(row[k], (dict, list)):
                extra.append(k)
    rows = []
    for where, row in found:
        mean, low, high, verdict = interval_cells(where, row)
        cells = [(html.escape(f"{mean:+.3g}" if isinstance(mean, (int, float)) else ""), _sort_key(mean)),
                 (html.escape(stats.fmt_ci(low, high, sig=2)), _sort_key(low)),
                 (html.escape(verdict), verdict),
                 (html.escape(where), where),
                 (html.escape(_fmt(row.get("comparison", ""))), _fmt(row.get("comparison", ""))),
                 (html.escape(_fmt(row.get("metric", ""))), _fmt(row.get("metric", ""))),
                 (html.escape(_fmt(row.get("n", ""))), _sort_key(row.get("n", "")))]
        cells += [(html.escape(_fmt(row.get(k, ""))), _sort_key(row.get(k, ""))) for k in extra]
        rows.append(cells)
    headers = ["estimate", "95% CI (bounds rounded outward)", "verdict", "where in the JSON", "comparison",
               "metric", "n", *extra]
    return table_html(headers, rows, table_id), len(rows)


def _flatten(record: Any, prefix: str = "", depth: int = 0) -> dict[str, Any]:
    """One table row from a record: nested dicts become dotted columns; a record that is not a dict
    (a list of failed checks in `refused_arms`, say) becomes the single column "value"."""
    if not isinstance(record, dict):
        return {"value": record}
    out: dict[str, Any] = {}
    for k, v in record.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and depth < 2:
            out.update(_flatten(v, key + ".", depth + 1))
        else:
            out[key] = v
    return out


def record_tables(data: dict) -> Iterator[tuple[str, list[dict]]]:
    """Collections of records in a study JSON: lists of dicts without intervals, and per-seed dicts."""
    for key, value in data.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            if not any(True for _ in interval_rows(value)):
                yield key, [_flatten(v) for v in value]
        elif isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            if all(str(k).isdigit() for k in value):
                yield key, [{"seed": int(k), **_flatten(v)} for k, v in value.items()]
            elif all(isinstance(v, dict) and v and all(str(s).isdigit() for s in v) for v in value.values()):
                yield key, [{"arm": arm, "seed": int(s), **_flatten(r)} for arm, seeds in value.items()
                            for s, r in seeds.items()]


def records_table(records: list[dict], table_id: str) -> str:
    columns: list[str] = []
    for r in records:
        columns += [k for k in r if k not in columns]
    rows = [[(html.escape(_fmt(r.get(c, ""))), _sort_key(r.get(c, ""))) for c in columns] for r in records]
    return table_html(columns, rows, table_id)


def study_pages(src: Path) -> list[str]:
    """studies/<method>-<study>.md per study JSON, and studies/index.md; returns ["studies/index"]."""
    from litrepro.studyrunner import registry

    pages, figures_used = [], set()
    declared = {rel: study for study in registry().values() for rel in study.outputs}
    for method in METHODS:
        for path in sorted((RENDERED / method).glob("*.json")):
            if path.name == "summary.json" or path.name.startswith("seed-"):
                continue
            if not STUDY_NAME.fullmatch(path.name):
                raise BookError(f"{_shown(path)}: a study file name must be letters, digits, '_', '-' and '.'")
            data = repo_json(path)
            name = f"{method}-{path.stem}"
            folder = src / "studies"
            folder.mkdir(parents=True, exist_ok=True)
            repo_copy(path, folder / f"{name}.json")
            study = declared.get(f"{method}/{path.name}")
            title = study.title if study else path.stem.replace("_", " ")
            lines = [f"# `{method}`: {title}", "",
                     f"Everything below is generated from [`rendered/{method}/{path.name}`]({name}.json) "
                     "when the book is built.", ""]
            if study is not None:                        # what the study's declaration says of it
                lines += [f"{study.summary} Written by the study `{study.name}` (`make {study.make_target}`, "
                          f"`python -m litrepro study {study.name}`); its code is `{study.module}` and its "
                          "declaration is in `litrepro.studies` (see docs/running.md, \"The many-seed studies\"). "
                          "The study is our reconstruction: the seed files record component-level runs only, so its "
                          "design (its arms, baselines, budgets and markets) is ours, not the paper's.",
                          ""]
            figure = path.with_suffix(".png")
            if figure.is_file():
                repo_copy(figure, folder / f"{name}.png")
                figures_used.add(figure)
                lines += [f"![{path.stem}]({name}.png)", ""]
            table, n = intervals_table(data, f"intervals-{name}")
            if n:
                lines += ["## Every interval", "",
                          f"All {n} 95% intervals the JSON holds (paired differences, shares and ratios, nested ones "
                          "included), each with its estimate; click a column to sort it, type to filter. The verdict is read from the interval: "
                          "`>0` or `<0` when it excludes 0.", "", "```{raw} html", table, "```", ""]
            if isinstance(data, dict):
                for key, records in record_tables(data):
                    lines += [f"## {md_code(key)}", "", "```{raw} html",
                              f"<details><summary>{len(records)} records: show the table</summary>",
                              records_table(records, f"{name}-{key}"), "</details>", "```", ""]
            if n:
                lines += ["## Every interval, as text", "",
                          "The intervals above again, one line each, so that the book's search finds a row by its "
                          "label.", "", *intervals_text(data), ""]
            _write(folder / f"{name}.md", "\n".join(lines))
            pages.append(name)
    others = [p for m in METHODS for p in sorted((RENDERED / m).glob("*.png")) if p not in figures_used]
    lines = ["# Studies", "",
             "Each study pairs its arms by seed and writes a 95% interval per paired difference. Its page shows "
             "its figure, every interval and every per-seed record of its JSON.", "",
             "```{toctree}", ":maxdepth: 1", "", *pages, "```", ""]
    if others:
        lines += ["## The rendered seeds' figures", "",
                  "The cross-seed figures that `python -m litrepro run` writes beside the seeds.", ""]
        for p in others:
            rel = f"{p.parent.name}-{p.name}"
            repo_copy(p, src / "studies" / rel)
            lines += [f"### `rendered/{p.parent.name}/{p.name}`", "", f"![{p.stem}]({rel})", ""]
    _write(src / "studies" / "index.md", "\n".join(lines))
    return ["studies/index"]


def summary_page(src: Path, linker: Linker) -> list[str]:
    from litrepro import trust

    nb = RENDERED / "summary.ipynb"
    if not nb.is_file():
        return []
    notebook_page(nb, src / "summary.ipynb", repo_doc="notebooks/summary.ipynb", book_doc="summary.ipynb",
                  linker=linker, title_suffix="",
                  preface="> `rendered/summary.ipynb`, as `python -m litrepro run` executed it over every rendered "
                          "seed; shown as committed.", checks=trust.check_names())
    return ["summary"]


def reproducibility_page(src: Path, linker: Linker) -> list[str]:
    docs = sorted((ROOT / "docs").glob("*.md"))
    for doc in docs:
        _write(src / "docs" / doc.name, linker.rewrite(repo_text(doc), f"docs/{doc.name}", f"docs/{doc.name}"))
    lines = ["# Reproducibility", "",
             "How the results are made, how to rerun them and how far they reproduce: the project's `docs/` pages.", ""]
    if docs:
        lines += ["```{toctree}", ":glob:", ":maxdepth: 1", "", "docs/*", "```", ""]
    else:
        lines += ["There is no page under `docs/` yet; the front page holds these sections.", ""]
    timing = RENDERED / "book_build.json"
    if timing.is_file():
        t = repo_json(timing)
        try:
            m = t["machine"]
            lines += [f"This book builds from scratch in {float(t['median_s']):.1f} s (median of {len(t['repeats_s'])} "
                      f"builds, {md_code(t['command'])}, on {int(m['cores'])} cores of {md_code(m['cpu_model'])}, load "
                      f"average {float(m['load_average_at_start'][0]):.1f} at the start; goal at most "
                      f"{float(t['goal_s']):.0f} s; [`rendered/book_build.json`](book_build.json)).", ""]
        except (KeyError, IndexError, TypeError, ValueError) as err:
            raise BookError(f"{_shown(timing)}: lacks or mangles a field the book reads ({err!s:.100})") from None
        repo_copy(timing, src / "book_build.json")
    bench = RENDERED / "benchmarks.json"
    if bench.is_file():
        repo_copy(bench, src / "benchmarks.json")
        lines += ["The speed benchmarks' medians are in [`rendered/benchmarks.json`](benchmarks.json).", ""]
    _write(src / "reproducibility.md", "\n".join(lines))
    return ["reproducibility"]


def trust_page(src: Path, registry_path: Path, linker: Linker | None = None) -> list[str]:
    from litrepro import trust

    try:
        registry = jsonbounds.read(registry_path)
    except jsonbounds.JSONBoundsError as err:
        raise BookError(str(err)) from None
    try:
        rows, others = trust.build_rows(registry)
    except (jsonbounds.JSONBoundsError, ValueError, RecursionError) as err:
        raise BookError(f"the trust report cannot be built: {' '.join(str(err).split())[:300]}") from None
    links = None
    if linker is not None:
        front = {m: f"methods/{m}/seed-{FRONT_SEED}.html" for m in METHODS
                 if (RENDERED / m / f"seed-{FRONT_SEED}.ipynb").is_file()}
        links = trust.Links(file=linker.extra, chapter=front.get)
    _write(src / "trust.md", trust.report_markdown(
        rows, others, collected_with="pytest tests --collect-only --guards-registry PATH", links=links))
    return ["trust"]


def copy_static(src: Path) -> None:
    static = src / "_static"
    static.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(HERE / "conf.py", src / "conf.py")
    for f in (HERE / "static").iterdir():
        shutil.copyfile(f, static / f.name)
    try:
        import mathjax  # the django-static-mathjax wheel: MathJax 3 under static/mathjax/es5
    except ImportError as exc:
        raise BookError("MathJax is missing: install the book's packages (pip install -e '.[book]')") from exc
    es5 = Path(mathjax.__file__).resolve().parent / "static" / "mathjax" / "es5"
    for part in MATHJAX_PARTS:
        source, dest = es5 / part, static / "mathjax" / part
        dest.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, dest)
        else:
            shutil.copyfile(source, dest)


# --- Checks on the built site -------------------------------------------------------------------------

TAG_URL = re.compile(r"<(script|link|img|iframe|source|video|audio|embed|object)\b[^>]*?\b(src|href|data)=\"(https?:)?//",
                     re.I)
CSS_URL = re.compile(r"url\(\s*['\"]?(https?:)?//", re.I)


def external_resources(site: Path) -> list[str]:
    """Every resource the site's HTML or CSS would load from another host (links a reader clicks are fine)."""
    found = []
    for path in sorted(site.rglob("*")):
        if path.suffix == ".html":
            for m in TAG_URL.finditer(path.read_text(errors="replace")):
                found.append(f"{path.relative_to(site)}: {m.group(0)}")
        elif path.suffix == ".css":
            for m in CSS_URL.finditer(path.read_text(errors="replace")):
                found.append(f"{path.relative_to(site)}: {m.group(0)}")
    return found


# --- The build ------------------------------------------------------------------------------------------

def generate(src: Path, registry_path: Path) -> list[str]:
    """Write the Sphinx source folder; returns the links (README, docs, notebooks) that lead to no file."""
    copy_static(src)
    (src / EXTRA).mkdir(parents=True, exist_ok=True)
    linker = Linker(src)
    chapters = method_chapters(src, linker)
    extra = (study_pages(src) + summary_page(src, linker) + reproducibility_page(src, linker)
             + trust_page(src, registry_path, linker))
    front_page(src, linker, chapters, extra)
    return linker.warnings


def run_sphinx(src: Path, out: Path, jobs: int) -> None:
    """Sphinx (HTML, warnings as errors) from ``src`` into ``out``."""
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going", "-j", str(jobs),
           "-d", str(src / ".doctrees"), str(src), str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if proc.returncode != 0:
        raise BookError("sphinx-build failed:\n" + (proc.stdout + proc.stderr).strip()[-4000:])


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def exchange(a: Path, b: Path) -> bool:
    """Swap the folders ``a`` and ``b`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False when unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):                          # EINVAL, ENOSYS, EOPNOTSUPP: this file system cannot
        return False
    raise BookError(f"{b}: cannot swap the new site in ({os.strerror(err)})")


def publish(new: Path, out: Path) -> None:
    """Put the finished site ``new`` at ``out`` and remove the previous one; ``out`` is never missing or half."""
    if out.exists():
        if not exchange(new, out):                   # fallback: two renames (the old site is kept until the second)
            old = out.with_name(f".{out.name}.{uuid.uuid4().hex[:12]}.old")
            os.rename(out, old)
            os.rename(new, out)
            new = old
        shutil.rmtree(new)
    else:
        os.rename(new, out)


def build(out: Path, *, src: Path | None = None, registry: Path | None = None, jobs: int = 1) -> dict[str, float]:
    """Build the book into ``out``; returns the seconds each step took.

    The site is built into a temporary folder beside ``out`` and swapped in only when the whole build
    succeeded: a failure at any step leaves the previous site as it was.
    """
    from litrepro import trust

    out = out.resolve()
    src = (src or out.with_name(out.name + "-src")).resolve()
    if src == out or src in out.parents or out in src.parents:
        raise BookError(f"the source folder {src} and the output folder {out} must not contain each other")
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise BookError(f"{out} exists and is not a folder: refusing to replace it")
    if out.exists() and any(out.iterdir()) and not (out / STAMP).is_file():
        raise BookError(f"{out} is not empty and was not made by `python -m litrepro.book` "
                        f"(no {STAMP} in it): refusing to delete it")
    times: dict[str, float] = {}
    start = time.perf_counter()
    fresh_folder(src)
    out.parent.mkdir(parents=True, exist_ok=True)
    new = out.with_name(f".{out.name}.{uuid.uuid4().hex[:12]}.new")
    new.mkdir()
    try:
        if registry is None:
            registry = src / "_guards_registry.json"
            trust.collect_fault_registry(registry)
            times["collect_fault_tests_s"] = time.perf_counter() - start
        t = time.perf_counter()
        broken = generate(src, registry)
        if broken:                                   # a README or docs link to no file: a broken link in the book
            raise BookError("links to no repository file:\n" + "\n".join(broken))
        times["generate_s"] = time.perf_counter() - t
        t = time.perf_counter()
        run_sphinx(src, new, jobs)
        times["sphinx_s"] = time.perf_counter() - t
        (new / STAMP).write_text("made by python -m litrepro.book; removed and rebuilt by the next build\n")
        external = external_resources(new)
        if external:
            raise BookError("the site would load resources from another host:\n" + "\n".join(external[:20]))
        publish(new, out)
    finally:
        if new.exists():
            shutil.rmtree(new, ignore_errors=True)
    times["total_s"] = time.perf_counter() - start
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m litrepro.book", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "book", help="output folder (default build/book)")
    parser.add_argument("--src", type=Path, default=None, help="generated Sphinx source folder (default OUT-src)")
    parser.add_argument("--guards-registry", type=Path, default=None,
                        help="use this fault-test registry instead of collecting the test suite")
    parser.add_argument("--jobs", type=int, default=1, help="Sphinx processes (default 1)")
    args = parser.parse_args(argv)
    try:
        if args.guards_registry is not None and not args.guards_registry.is_file():
            raise BookError(f"--guards-registry {args.guards_registry}: no such file")
        times = build(args.out, src=args.src, registry=args.guards_registry, jobs=max(1, args.jobs))
    except BookError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:                       # a folder that cannot be made or written: one line
        print(f"ERROR: {' '.join(str(exc).split())[:500]}", file=sys.stderr)
        return 2
    print(f"book built in {times['total_s']:.1f} s: {args.out.resolve() / 'index.html'} "
          + "(" + ", ".join(f"{k} {v:.1f}" for k, v in times.items() if k != "total_s") + ")")
    return 0
