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


# --- labels name rows; tallies recount ----------------------------------------------------------

LABELLED = [(-0.031, -0.014, [-0.023], "a", frozenset({"max_min", "learned - fixed_gain"})),
            (0.0481, 0.0523, [0.0502], "c", frozenset({"fused_greedy", "learned - fixed_gain"}))]


@pytest.mark.parametrize("text, ok", [
    ("| `max_min` | learned − fixed_gain | -0.023 [-0.031, -0.014] | lower |", True),
    ("| `fused_greedy` | learned − fixed_gain | +0.050 [+0.048, +0.053] | higher |", True),
    ("| `fused_greedy` | learned − fixed_gain | -0.023 [-0.031, -0.014] | lower |", False),   # the other row's
    ("| a label no JSON has | -0.023 [-0.031, -0.014] | lower |", True),                      # unlabelled: any row
])
def test_a_table_rows_labels_name_the_row_its_interval_comes_from(text, ok):
    problems = readback.check_text(text, "t", LABELLED)
    assert (problems == []) == ok, problems


GROUPS = [[(frozenset({"waypoint - final_only", "nll", "c1"}), -0.3, -0.1, 0.05),
           (frozenset({"waypoint - final_only", "nll", "c2"}), -0.2, 0.1, 0.05),
           (frozenset({"waypoint - final_only", "nll", "c3"}), 0.01, 0.02, 0.05),
           (frozenset({"shuffled - final_only", "nll", "c1"}), -0.5, -0.4, 0.05)]]
TABLE = "| difference | metric | conditions | interval beyond one seed SD |\n|---|---|---|---|\n| {row} |\n"


@pytest.mark.parametrize("row, ok", [
    ("waypoint − final_only | `nll` | higher in 1 of 3 conditions, lower in 1, no detectable difference in 1 | 1 of 3 levels", True),
    ("waypoint − final_only | `nll` | lower in 2 of 3 conditions, higher in 1 | 1 of 3 levels", False),
    ("waypoint − final_only | `nll` | lower in 1 of 2 conditions, higher in 1 | 1 of 3 levels", False),   # wrong n
    ("waypoint − final_only | `nll` | higher in 1 of 3 conditions, lower in 1, no detectable difference in 1 | 2 of 3 levels", False),
    ("shuffled − final_only | `nll` | lower in 1 of 1 conditions | 1 of 1 levels", True),
    ("shuffled − final_only | `nll` | lower in 1 of 1 conditions | 0 of 1 levels", False),   # every detectable one
    ("someone − else | `x` | lower in 1 of 1 conditions | 0 of 1 levels", False),           # names no rows
])
def test_a_tally_cell_recounts_the_labelled_rows(row, ok):
    problems = readback.check_tallies(TABLE.format(row=row), "t", GROUPS)
    assert (problems == []) == ok, problems


def test_a_tally_of_the_committed_effect_table_that_is_off_by_one_fails():
    page = (ROOT / "docs" / "findings.md").read_text()
    block = dict(readback.blocks(page))["headline-effect-study"]
    groups = readback.tally_groups(ROOT)
    assert readback.check_tallies(block, "t", groups) == []
    line = next(l for l in block.splitlines() if "| higher in 5 of 8 conditions, no detectable difference in 3 |" in l)
    bad = block.replace(line, line.replace("higher in 5 of 8 conditions, no detectable difference in 3",
                                           "higher in 6 of 8 conditions, no detectable difference in 2"))
    assert readback.check_tallies(bad, "t", groups)


def test_swapped_rows_of_a_committed_table_fail():
    """Two rows of the effect-rows table trade their intervals: each still prints some JSON interval."""
    page = (ROOT / "docs" / "waypoint_opd.md").read_text()
    block = dict(readback.blocks(page))["opd-effect-rows"]
    pool = readback.intervals(ROOT)
    assert readback.check_text(block, "t", pool) == []
    rows = [l for l in block.splitlines() if l.startswith("|") and readback.INTERVAL.search(l)]
    a, b = rows[0], rows[-1]
    ia, ib = readback.INTERVAL.search(a).group(0), readback.INTERVAL.search(b).group(0)
    swapped = block.replace(a, a.replace(ia, ib)).replace(b, b.replace(ib, ia))
    assert any("is the interval of another row" in p for p in readback.check_text(swapped, "t", pool))


# --- "k of n" inside sentences ------------------------------------------------------------------

SENTENCE_GROUPS = [[(frozenset({"waypoint - final_only", "nll", "c1"}), -0.3, -0.1, 0.05, (-0.4, 0.1), [-0.2]),
                    (frozenset({"waypoint - final_only", "nll", "c2"}), -0.2, 0.1, 0.05, (-0.3, 0.2), [-0.05]),
                    (frozenset({"waypoint - final_only", "nll", "c3"}), 0.01, 0.02, 0.005, (0.005, 0.03), [0.015]),
                    (frozenset({"shuffled - final_only", "nll", "c1"}), -0.5, -0.4, 0.05, None, [-0.45])]]


@pytest.mark.parametrize("text, ok", [
    ("- waypoint − final_only, `nll`: higher in 1 of 3 conditions, lower in 1, no detectable difference in 1.", True),
    ("- waypoint − final_only, `nll`: higher in 2 of 3 conditions, no detectable difference in 1.", False),
    ("- waypoint − final_only, `nll`: detectable at 2 of 3 levels.", True),
    ("- waypoint − final_only, `nll`: detectable at 3 of 3 levels.", False),
    ("- waypoint − final_only, `nll`: detectable after Holm in 1 of 3 conditions.", True),     # Holm's bounds
    ("- waypoint − final_only, `nll`: detectable after Holm in 2 of 3 conditions.", False),    # the raw count
    ("- waypoint − final_only, `nll`: beyond the seed spread at 2 of 3 levels.", True),
    ("- waypoint − final_only, `nll`: beyond the seed spread at 3 of 3 levels.", False),
    ("- Gate vs final-only: detectable at 2 of 3 levels: lower by [-0.3, -0.1]; higher by [+0.01, +0.02].", True),
    ("- Gate vs final-only: detectable at 3 of 3 levels: lower by [-0.3, -0.1]; higher by [+0.01, +0.02].", False),
    ("- Gate vs the world: higher in 1 of 3 conditions.", False),                                 # names no rows
])
def test_a_tally_in_a_sentence_recounts_the_rows_it_names(text, ok):
    problems = readback.check_sentence_tallies(text, "t", SENTENCE_GROUPS)
    assert (problems == []) == ok, problems


@pytest.mark.parametrize("page, block, old, new", [
    ("docs/waypoint_opd.md", "opd-effect-holm", "detectable after Holm in 3 of 8", "detectable after Holm in 4 of 8"),
    ("docs/waypoint_opd.md", "opd-dose-response", "detectable at 3 of 5 levels", "detectable at 4 of 5 levels"),
    ("docs/waypoint_opd.md", "opd-dose-response", "beyond the seed spread at 5 of 5", "beyond the seed spread at 4 of 5"),
    ("docs/pinterest_rlbp.md", "rlbp-d3rlpy", "higher in 1 of 3 budgets, lower in 1", "higher in 2 of 3 budgets, lower in 0"),
    ("docs/findings.md", "headline-rlbp-study", "lower in 2 of 3 backups, no detectable difference in 1",
     "lower in 3 of 3 backups"),
])
def test_an_off_tally_in_a_committed_sentence_fails(page, block, old, new):
    text = dict(readback.blocks((ROOT / page).read_text()))[block]
    groups = readback.tally_groups(ROOT)
    assert old in text and readback.check_sentence_tallies(text, "t", groups) == []
    assert readback.check_sentence_tallies(text.replace(old, new, 1), "t", groups)


def test_an_off_tally_in_a_notebooks_printed_finding_fails():
    texts = [t for c, t in readback.printed_outputs(ROOT / "rendered" / "waypoint_opd" / "seed-42.ipynb")
             if c == "opd-effect-findings"]
    groups = readback.tally_groups(ROOT)
    assert texts and readback.check_sentence_tallies(texts[0], "t", groups) == []
    line = next(l for l in texts[0].splitlines() if "higher in 4 of 4 conditions" in l)
    assert readback.check_sentence_tallies(line.replace("higher in 4 of 4", "higher in 3 of 4") + ", lower in 1",
                                           "t", groups)


# --- counts of checks and named budgets (the fifth unseen audit's prose misses P06 and P18) -------------

def test_the_check_count_table_recounts_from_the_seed_json():
    block = dict(readback.blocks((ROOT / "README.md").read_text()))["headline-methods"]
    assert readback.check_check_counts(block, "t", ROOT) == []
    k, n, false = readback.seed_check_counts("waypoint_opd", "checks", ROOT)
    assert false and f"{k} of {n} checks" in block
    assert readback.check_check_counts(block.replace(f"{k} of {n} checks", f"{k} of {n + 1} checks"), "t", ROOT)
    assert readback.check_check_counts(block.replace(f"`{false[0]}`", "`another_check`"), "t", ROOT)


def test_a_count_of_checks_that_includes_a_non_boolean_check_fails(tmp_path):
    (tmp_path / "rendered" / "m").mkdir(parents=True)
    for seed, v in ((42, True), (43, "not_applicable")):
        (tmp_path / "rendered" / "m" / f"seed-{seed}.json").write_text(json.dumps({"checks": {"a": True, "b": v}}))
    assert readback.seed_check_counts("m", "checks", tmp_path) == (1, 1, [])


def test_a_critic_budget_read_from_another_key_fails():
    page = (ROOT / "docs" / "findings.md").read_text()
    block = dict(readback.blocks(page))["headline-rlbp-study"]
    steps = re.search(r"(\d+) critic steps", block)
    assert steps and readback.check_critic_steps(block, "t", ROOT) == []
    actor = json.loads((ROOT / "rendered/pinterest_rlbp/backup_study.json").read_text())["provenance"]["parameters"]["actor_steps"]
    bad = block.replace(steps.group(0), f"{actor} critic steps")
    assert readback.check_critic_steps(bad, "t", ROOT)


def test_a_ratio_word_that_contradicts_its_interval_fails():
    """The fifth unseen audit's P13: the spread sentence said 'smaller than' for an F interval above 1."""
    text = next(inner for page in ("docs/pinterest_rlbp.md", "docs/findings.md")
                for name, inner in readback.blocks((ROOT / page).read_text()) if re.search(r"ratio \[", inner)
                and "larger than ours" in inner)
    assert readback.check_ratio_words(text, "t") == []
    assert readback.check_ratio_words(text.replace("larger than ours", "smaller than ours"), "t")
    assert readback.check_ratio_words("It is smaller than ours (ratio [0.41, 0.93]).", "t") == []
    assert readback.check_ratio_words("It is not shown different from ours (ratio [0.41, 1.3]).", "t") == []
    assert readback.check_ratio_words("It is larger than ours (ratio [0.41, 1.3]).", "t")
