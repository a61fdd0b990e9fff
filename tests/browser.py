"""Helpers for driving the explorers and notebooks in headless Chromium (tests and ``benchmarks/explore.py``).

Playwright drives the system Chromium (Debian's package, ``/usr/bin/chromium``); its own
browser download cannot be reached here.  Servers are started on a free localhost port,
as processes of our own, and stopped by their pid.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from litrepro.explore import serve

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("LITREPRO_CHROMIUM", "/usr/bin/chromium")
INSTALL_HINT = f"Chromium not found at {CHROMIUM}: install it with `apt-get install -y chromium` (.ci/run does)"
BIN = Path(sys.executable).parent
#: Explorer notebook -> (label of a dropdown that only redraws, the option to choose).
EXPLORERS = {"explore_pinterest_rlbp.ipynb": ("campaign kind", "budget_constrained"),
             "explore_waypoint_opd.ipynb": ("gate", "final only")}


def chromium_missing() -> bool:
    return not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, timeout: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with status {proc.returncode} before answering {url}")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"no answer from {url} within {timeout:.0f} s")


LAB_SETTINGS = {  # every cell in the DOM (no windowing), and nothing saved back
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": '{"windowingMode": "none"}',
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": '{"autosave": false}',
}


@contextmanager
def server(kind: str, log: Path):
    """``voila`` or ``lab`` on a copy of ``notebooks/``, localhost only; yields (base URL, the copy, token).

    The copy keeps the repository's notebooks untouched whatever the browser does.
    Voila is started exactly as ``make explore`` starts it (:mod:`litrepro.explore.serve`:
    its template and a token); a page's address needs ``?token=`` (see :func:`open_explorer`).
    """
    port = free_port()
    root = log.parent / "notebooks"
    # Kernels on Unix sockets beside the log, not on TCP ports: other Jupyter processes on the
    # machine cannot race this server's kernels for a port (the runner does the same).
    ipc = ["--KernelManager.transport=ipc", f"--KernelManager.ip={log.parent / 'kernel'}"]
    shutil.copytree(ROOT / "notebooks", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    settings = log.parent / "lab-settings"
    for name, text in LAB_SETTINGS.items():
        (settings / name).parent.mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(text)
    token = ""
    env = {**os.environ, "MPLBACKEND": "Agg", "JUPYTER_CONFIG_DIR": str(log.parent / "jupyter-config")}
    if kind == "voila":
        token = serve.new_token()
        cmd = serve.voila_command(root, port, "--show_tracebacks=True", *ipc)
        env = serve.voila_environment(token, env)
        probe = f"http://127.0.0.1:{port}/?token={token}"
    else:
        cmd = [str(BIN / "jupyter"), "lab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
               "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={root}", f"--LabApp.user_settings_dir={settings}",
               "--ServerApp.disable_check_xsrf=True", "--allow-root", "--LabApp.news_url=", "--LabServerApp.workspaces_dir="
               + str(log.parent / "workspaces"), *ipc]
        probe = f"http://127.0.0.1:{port}/api/status"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=root, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        _wait_http(probe, 60, proc)
        yield f"http://127.0.0.1:{port}", root, token
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


#: Hosts a page may request: this machine only.
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


def new_page(b):
    """A page whose requests to any host but this machine are recorded in ``page.external`` and refused.

    Refusing them keeps a test from waiting on DNS offline; recording them lets the test fail on them.
    """
    page = b.new_page()
    page.external = []

    def route(r) -> None:
        parts = urlsplit(r.request.url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.hostname not in LOCAL_HOSTS:
            page.external.append(r.request.url)
            r.abort()
        else:
            r.continue_()

    page.route("**/*", route)
    return page


PICTURE_IMG = ".litrepro-picture img"
NUMBERS = ".litrepro-numbers"
ERROR_JS = """(() => Array.from(document.querySelectorAll(
    '[data-mime-type="application/vnd.jupyter.stderr"], .jp-OutputArea-output.jp-mod-error'))
    .map(e => e.innerText).filter(t => t.trim().length > 0))"""


def log_tail(log: Path, chars: int = 4000) -> str:
    """The end of a server's log, for a failure message."""
    try:
        return log.read_text(errors="replace")[-chars:]
    except OSError as err:
        return f"(no log: {err})"


def open_explorer(page, base: str, notebook: str, token: str = "", timeout_s: float = 60,
                  log: Path | None = None, tries: int = 3) -> float:
    """Load an explorer under Voila (with the server's ``token``); returns seconds until its first picture is shown.

    A first view takes 8-16 s here.  About one render in ten never finishes under Voila 0.5: the kernel has
    run the notebook and sits idle, while the page stays at "Ok, voila is still executing..." (measured on
    a fresh clone on a 2-core machine: 3 of 34 loads, with TCP and with IPC kernels alike, while the server
    rendered every one of 6 loads requested without a browser; Voila's issue 1446 reports the same).  So a load that times out is tried again in a fresh page view, which starts a
    new kernel, up to ``tries`` times; ``page.load_retries`` counts such retries and the tests record it.  The
    last timeout fails with the server's log attached.  What is asserted afterwards (a picture, a redraw, no
    error, no request to another host) is unchanged.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.load_retries = 0
    url = f"{base}/voila/render/{notebook}" + (f"?token={token}" if token else "")
    for attempt in range(1, tries + 1):
        start = time.perf_counter()
        try:
            page.goto(url, timeout=timeout_s * 1000, wait_until="domcontentloaded")   # the picture is what counts
            page.wait_for_selector(PICTURE_IMG, timeout=timeout_s * 1000)
            return time.perf_counter() - start
        except PlaywrightTimeout as err:
            if attempt == tries:
                tail = log_tail(log) if log is not None else "(no log given)"
                raise AssertionError(f"{notebook}: no picture within {timeout_s:.0f} s on each of {tries} tries ({err})\n"
                                     f"--- server log tail ---\n{tail}") from err
            page.load_retries += 1
            print(f"\n{notebook}: no picture within {timeout_s:.0f} s (try {attempt} of {tries}); trying again")
    raise AssertionError("unreachable")


def choose(page, label: str, option: str, timeout_s: float = 60) -> float:
    """Select ``option`` in the dropdown labelled ``label``; seconds until the picture's image changes."""
    before = page.get_attribute(PICTURE_IMG, "src")
    select = page.locator(".widget-dropdown", has_text=label).locator("select")
    start = time.perf_counter()
    select.select_option(label=option)
    page.wait_for_function("""([sel, before]) => { const img = document.querySelector(sel);
                                  return img !== null && img.getAttribute('src') !== before; }""",
                           arg=[PICTURE_IMG, before], timeout=timeout_s * 1000, polling=20)
    return time.perf_counter() - start


def write_notebook(path: Path, *sources: str) -> None:
    """A notebook of code cells, for the tests that plant an error."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in sources]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def errors(page) -> list[str]:
    return page.evaluate(ERROR_JS)


def run_all_in_lab(page, base: str, notebook: str, timeout_s: float = 600) -> None:
    """Open ``notebook`` in JupyterLab, Run > Run All Cells, and wait until no cell is queued or running."""
    workspace = f"w{time.monotonic_ns()}"                      # a fresh workspace: no notebook restored from an earlier page
    page.goto(f"{base}/lab/workspaces/{workspace}/tree/{notebook}?reset", timeout=120_000)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
    page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=120_000)          # the kernel is ready
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    # Started: a cell is running or queued, or one already shows an execution count.  A cell that
    # runs in milliseconds can go from [*] to [1] between two polls, so '*' alone is not enough.
    page.wait_for_function("""() => Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputPrompt'))
                                   .some(p => p.innerText.includes('*') || /\\[\\d+\\]/.test(p.innerText))""",
                           timeout=60_000)
    page.wait_for_function("""() => { const prompts = Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputPrompt'));
                                      return prompts.length > 0 && !prompts.some(p => p.innerText.includes('*')); }""",
                           timeout=timeout_s * 1000, polling=500)              # nothing queued or running: done or stopped


def execution_counts(page) -> list[str]:
    return page.evaluate("() => Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')).map(p => p.innerText)")
