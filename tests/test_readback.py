"""litrepro.readback: every printed interval and its word, read back against the JSON by code of its own.

Each test plants one fault a reader would see (a bound rounded inward, a word from the wrong interval, a figure
no study wrote) into a copy of a generated text and asserts that the check names it.
"""

import json
import re
import shutil
from pathlib import Path

import pytest

from litrepro import readback
from litrepro.paths import ROOT

POOL = [(-0.031, -0.014, [-0.023], "a"), (-0.0050, 0.0058, [0.00042], "b"), (0.0481, 0.0523, [0.0502], "c"),
        (-0.62, -0.32, [-0.45], "share")]


@pytest.mark.parametrize("text, ok", [
    ("| `max_min` | -0.023 [-0.031, -0.014] | lower |", True),
    ("| `max_min` | -0.023 [-0.031, -0.014] | higher |", False),                 # the word of another interval
    ("| `max_min` | -0.023 [-0.030, -0.014] | lower |", False),                 # low bound rounded inward
    ("| `max_min` | -0.023 [-0.05, -0.014] | lower |", False),                  # a wider interval than the JSON's
    ("| `max_min` | -0.024 [-0.031, -0.014] | lower |", False),                 # estimate off at its precision
    ("| x | +0.00042 [-0.0050, +0.0058] | no detectable difference |", True),
    ("| x | +0.00042 [-0.0050, +0.0058] | higher |", False),
    ("sync_1 is below the fixed gain ([-0.031, -0.014]) and above max_min ([+0.048, +0.053]).", True),
    ("sync_1 is below the fixed gain ([-0.0050, +0.0058]) and above max_min ([+0.048, +0.053]).", False),   # spans 0
    ("sync_1 is below the fixed gain ([-0.031, -0.014]) and below max_min ([+0.048, +0.053]).", False),
    ("A share of -45 % [-62 %, -32 %] of the headroom.", True),
    ("A share of -45 % [-61 %, -32 %] of the headroom.", False),                # inward, in percent
    ("it reads +0.050 [+0.048, +0.053] here.", True),
    ("it reads +0.051 [+0.048, +0.053] here.", False),
    ("a figure no study wrote: +0.7 [+0.6, +0.8].", False),
])
def test_printed_intervals_and_words(text, ok):
    problems = readback.check_text(text, "t", POOL)
    assert (problems == []) == ok, problems


def test_the_committed_text_reads_back():
    """Every generated block and every printed finding of the rendered notebooks reads back from the JSON."""
    assert readback.check(ROOT) == []


def test_a_changed_study_figure_fails_the_readback(tmp_path):
    """The committed README and docs against a copy of rendered/ whose low bounds all moved: the blocks no longer
    read back (claims' own block comparison would also fail; this is the second computation, reading the JSON)."""
    for rel in ("README.md", "docs", "rendered"):
        (shutil.copytree if (ROOT / rel).is_dir() else shutil.copy2)(ROOT / rel, tmp_path / rel)
    for p in (tmp_path / "rendered").rglob("*.ipynb"):
        p.unlink()                                   # the notebooks' outputs are read too; the pages suffice here
    for path in (tmp_path / "rendered").rglob("*.json"):            # every low bound in every JSON a little lower:
        text = path.read_text()                                         # no printed interval is any JSON's now
        path.write_text(re.sub(r'"ci95_low": (-?[0-9.]+(?:e-?[0-9]+)?)',
                               lambda m: f'"ci95_low": {float(m.group(1)) - 0.01 * abs(float(m.group(1))) - 1e-3!r}', text))
    problems = readback.check(tmp_path)
    assert any("block 'headline-rlbp-study'" in p for p in problems), problems
    assert any("block 'headline-budget'" in p for p in problems), problems
