"""The explorers under Voila and the method notebooks in JupyterLab, driven in headless Chromium.

Playwright runs Debian's Chromium (``/usr/bin/chromium``); without it these tests skip
with one line saying how to install it.  The servers serve a copy of ``notebooks/``.
The redraw times they record (``-s`` prints them; pytest's ``record_property`` keeps
them) come from a loaded CI machine; ``benchmarks/explore.py`` gives the medians.
"""

from __future__ import annotations

import os

import pytest

import browser

pytestmark = pytest.mark.skipif(browser.chromium_missing(), reason=browser.INSTALL_HINT)


@pytest.fixture(scope="module")
def voila(tmp_path_factory):
    with browser.server("voila", tmp_path_factory.mktemp("voila") / "voila.log") as served:
        yield served


@pytest.mark.parametrize("notebook", list(browser.EXPLORERS))
def test_explorer_redraws_in_the_browser(voila, notebook, record_property):
    label, option = browser.EXPLORERS[notebook]
    with browser.browser() as b:
        page = browser.new_page(b)
        first = browser.open_explorer(page, voila[0], notebook, voila[2], log=voila[1].parent / "voila.log")
        src, numbers = page.get_attribute(browser.PICTURE_IMG, "src"), page.inner_text(browser.NUMBERS)
        assert src.startswith("data:image/png") and numbers.startswith("seed 42")
        redraw = browser.choose(page, label, option)
        assert page.get_attribute(browser.PICTURE_IMG, "src") != src              # the figure changed
        assert page.locator(browser.PICTURE_IMG).count() == 1                       # in place: one picture
        page.wait_for_function("([sel, old]) => document.querySelector(sel).innerText !== old",
                               arg=[browser.NUMBERS, numbers], timeout=30_000)
        assert not browser.errors(page)
        assert page.external == []                                                 # no request left the machine
        record_property("first_view_s", round(first, 2))
        record_property("redraw_s", round(redraw, 3))
        record_property("load_retries", page.load_retries)
        print(f"\n{notebook}: first view {first:.1f} s, redraw after '{label}' -> '{option}' {redraw:.2f} s")


def test_an_error_in_a_redraw_is_seen(voila):
    """The error check itself: an explorer whose redraw raises shows the traceback, and ``errors`` finds it."""
    browser.write_notebook(voila[1] / "explore_fault.ipynb",
                           "from litrepro.explore.rlbp import Explorer, KINDS\n"
                           "class Faulty(Explorer):\n"
                           "    def compute(self, **values):\n"
                           "        if values['kind'] != KINDS[0]:\n"
                           "            raise ZeroDivisionError('planted fault')\n"
                           "        return super().compute(**values)\n"
                           "Faulty()")
    with browser.browser() as b:
        page = browser.new_page(b)
        browser.open_explorer(page, voila[0], "explore_fault.ipynb", voila[2], log=voila[1].parent / "voila.log")
        assert not browser.errors(page)
        page.locator(".widget-dropdown", has_text="campaign kind").locator("select").select_option(label="unconstrained")
        page.wait_for_function(browser.ERROR_JS + "().length > 0", timeout=60_000)
        assert any("planted fault" in e for e in browser.errors(page))
        assert page.external == []


def test_the_explorer_server_requires_its_token_and_its_pages_request_only_localhost(voila):
    """``make explore`` serves with a token: without it no page and no kernel; the file list, like the
    explorers, makes no request to another host (Voila's own template links Font Awesome from a CDN)."""
    import urllib.error
    import urllib.request

    base, _, token = voila
    assert len(token) >= 40
    for path in ("/voila/render/explore_pinterest_rlbp.ipynb", "/voila/render/explore_pinterest_rlbp.ipynb?token=x", "/"):
        try:                                                  # rendering a page is what starts a kernel
            with urllib.request.urlopen(base + path, timeout=30) as reply:
                assert "/login" in reply.url and "litrepro-picture" not in reply.read().decode(), path   # the login form
        except urllib.error.HTTPError as err:
            assert err.code in (401, 403), (path, err.code)
    with browser.browser() as b:
        page = browser.new_page(b)
        page.goto(f"{base}/?token={token}", timeout=60_000)
        page.wait_for_selector("text=explore_pinterest_rlbp.ipynb", timeout=60_000)
        page.wait_for_load_state("load", timeout=60_000)
        assert page.external == []


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with browser.server("lab", tmp_path_factory.mktemp("lab") / "lab.log") as served:
        yield served


@pytest.mark.skipif(not os.environ.get("LITREPRO_CORPUS"), reason="waypoint_opd needs LITREPRO_CORPUS")
@pytest.mark.parametrize("notebook", ["pinterest_rlbp.ipynb", "waypoint_opd.ipynb"])
def test_method_notebook_runs_all_in_jupyterlab(lab, notebook):
    """Open the notebook in JupyterLab, Run All Cells, wait for every cell, and find no error output."""
    with browser.browser() as b:
        page = browser.new_page(b)
        browser.run_all_in_lab(page, lab[0], notebook)
        counts = browser.execution_counts(page)
        assert counts and all(c.strip() not in ("[ ]:", "[*]:") for c in counts), counts
        assert not browser.errors(page)
        assert page.external == []


def test_an_error_in_jupyterlab_is_seen(lab):
    """The error check itself: a notebook that raises leaves an error output that ``errors`` finds."""
    browser.write_notebook(lab[1] / "fault.ipynb", "raise ValueError('planted fault')")
    with browser.browser() as b:
        page = browser.new_page(b)
        browser.run_all_in_lab(page, lab[0], "fault.ipynb")
        assert any("planted fault" in e for e in browser.errors(page))


def test_explorer_runs_inside_jupyterlab(lab):
    """The same explorer notebook in JupyterLab: Run All shows the picture, and a control redraws it."""
    with browser.browser() as b:
        page = browser.new_page(b)
        browser.run_all_in_lab(page, lab[0], "explore_pinterest_rlbp.ipynb")
        page.wait_for_selector(browser.PICTURE_IMG, timeout=120_000)
        assert browser.choose(page, "campaign kind", "unconstrained") > 0
        assert not browser.errors(page)
        assert page.external == []
