"""litrepro.readback_fields: generated tables and sentences read back field by field.

Each test applies one of the fifth unseen audit's prose faults that printed a well-formed number from the wrong
key, column or formula (``benchmarks/fault_audits/unseen_5.md``: P04, P10, P12, P14, P19, P20) to the writer or
to its input, regenerates the text, and asserts that the field-aware read-back names it.
"""

import copy
import json
import math
import re

import pytest

from litrepro import claims, prose, readback, readback_fields as rf
from patching import patched
from litrepro.paths import ROOT


def _block(name: str) -> str:
    return claims.blocks()[name][1](ROOT)


def _loading(monkeypatch, rel: str, change) -> None:
    """Make ``claims.load`` hand the block ``change(copy of rel's JSON)`` for ``rel``."""
    real = claims.load

    def load(root, path):
        data = real(root, path)
        if path == rel:
            data = copy.deepcopy(data)
            change(data)
        return data
    monkeypatch.setattr(claims, "load", load)


FIELD_BLOCKS = ("rlbp-recorded", "opd-recorded", "rlbp-td-calibration", "rlbp-lambda", "rlbp-market",
                "opd-effect-holm", "opd-step-calibration")


@pytest.mark.parametrize("name", FIELD_BLOCKS)
def test_the_committed_blocks_read_back_field_by_field(name):
    text = _block(name)
    assert rf.check(text, name, ROOT) == []


def test_every_field_form_is_read_somewhere():
    """Each reader finds its form in the committed text (a renamed header or reworded sentence would make it vacuous)."""
    text = "\n\n".join(_block(n) for n in FIELD_BLOCKS)
    headers = [[c.lower() for c in h] for _, h, _ in rf.tables(text)]
    assert headers.count(["figure", "this run", "recorded", "z"]) == 2
    assert any("z as is" in h for h in headers) and ["λ", "cpc overshoot", "value reward"] in headers
    assert len(rf.SEED_MEAN.findall(text)) == 1
    assert len(rf.HOLM_LARGEST.findall(text)) == 4 and len(rf.OPD_ARM.findall(text)) == 7


@pytest.mark.parametrize("shown, x, ok", [("0.039", 0.0388, True), ("0.039", 0.0396, False), ("9.6e-05", 9.64e-5, True),
                                          ("9.6e-05", 9.7e-5, False), ("+422", 421.8, True), ("-0.1", 421.8, False)])
def test_a_number_agrees_at_its_printed_precision(shown, x, ok):
    assert rf.agrees(shown, x) == ok


def test_p04_a_mean_sd_one_digit_short_fails(monkeypatch):
    short = patched(prose, "mean_sd", "decimals = max(0, 1 - math.floor(math.log10(sd)))",
                     "decimals = max(0, -math.floor(math.log10(sd)))")              # the SD at one significant digit
    monkeypatch.setattr(prose, "mean_sd", short)
    problems = rf.check(_block("rlbp-recorded"), "t", ROOT)
    assert any("actor_gradient_norm" in p and "two significant digits" in p for p in problems), problems


def test_a_recorded_tables_z_from_another_figure_fails(monkeypatch):
    def other(data):
        c = data["comparison_with_recorded"]
        c["td_loss_after"]["this_run"] = dict(c["td_loss_before"]["this_run"])
    _loading(monkeypatch, "rendered/pinterest_rlbp/summary.json", other)
    problems = rf.check(_block("rlbp-recorded"), "t", ROOT)
    assert any("`td_loss_after` this run" in p for p in problems), problems


def test_p10_the_z_as_is_column_from_z_explained_fails(monkeypatch):
    def stale(data):
        for r in data["calibration_table"]:
            if r["z_as_is"] is not None:
                r["z_as_is"] = r["z_explained"]
    _loading(monkeypatch, claims.TD_CALIBRATION, stale)
    problems = rf.check(_block("rlbp-td-calibration"), "t", ROOT)
    assert any("'z as is'" in p for p in problems), problems


def test_p19_the_market_share_printed_as_mean_plus_sd_fails(monkeypatch):
    def plus_sd(data):
        f = data["beyond_seed_metrics"]["segments_over_target_fraction"]
        f["mean"] += f["std"]
    _loading(monkeypatch, "rendered/pinterest_rlbp/summary.json", plus_sd)
    problems = rf.check(_block("rlbp-market"), "t", ROOT)
    assert any("segments_over_target_fraction" in p for p in problems), problems


def test_p20_the_lambda_tables_columns_swapped_fails(monkeypatch):
    def swap(data):
        for p in data["points"]:
            p["cpc_overshoot"], p["value"] = p["value"], p["cpc_overshoot"]
    _loading(monkeypatch, "rendered/pinterest_rlbp/lambda_frontier.json", swap)
    problems = rf.check(_block("rlbp-lambda"), "t", ROOT)
    assert any("'cpc overshoot'" in p for p in problems) and any("'value reward'" in p for p in problems), problems


def test_p14_the_per_step_and_per_seed_z_swapped_fails(monkeypatch):
    def swap(data):
        for a in data["arms"]:
            g = a["figures"]["opd_history.gradient_norm"]
            g["z"], g["z_per_seed"] = g["z_per_seed"], g["z"]
    _loading(monkeypatch, "rendered/waypoint_opd/opd_calibration.json", swap)
    problems = rf.check(_block("opd-step-calibration"), "t", ROOT)
    assert any("`as_is` zs" in p for p in problems) and any("`as_is` zp" in p for p in problems), problems


def _outward(low: float, high: float) -> tuple[str, str]:
    def at(x, up):
        e = math.floor(math.log10(abs(x))) - 1
        q = (math.ceil if up else math.floor)(x / 10 ** e) * 10 ** e
        return f"{q:+.2g}"
    return at(low, False), at(high, True)


def test_p12_the_largest_holm_effect_picked_by_d_z_fails():
    """The sentence rewritten about the row of largest |d_z| (the audit's fault), every number that row's own."""
    text = _block("opd-effect-holm")
    rows = json.loads((ROOT / "rendered/waypoint_opd/effect_holm.json").read_text())["rows"]
    m = next(m for m in rf.HOLM_LARGEST.finditer(text) if m.group("metric") == "validation_nll")
    kept = [r for r in rows if r["comparison"] == m.group("comp") and r["metric"] == m.group("metric")
            and r["holm_reads"] != "no detectable difference"]
    by_dz = max(kept, key=lambda r: abs(r["effect_size_dz"]))
    assert by_dz is not max(kept, key=lambda r: abs(r["in_comparator_sds"]))
    lo, hi = _outward(by_dz["holm_low"], by_dz["holm_high"])
    cond = f"{by_dz['teacher']}, {by_dz['student_start']}, {by_dz['teacher_rl_rollouts']} rollouts"
    wrong = (f"{m.group('comp')}, {m.group('metric')}: detectable after Holm in {m.group('k')} of {m.group('n')} conditions; "
             f"the largest, {by_dz['holm_reads']} by Holm [{lo}, {hi}] ({cond}), is d_z {by_dz['effect_size_dz']:+.2g} but "
             f"{by_dz['in_comparator_sds']:+.2g} between-seed SDs of the comparator")
    assert rf.check(wrong, "t", ROOT) and rf.check(text.replace(m.group(0), wrong), "t", ROOT)
    assert rf.check(m.group(0), "t", ROOT) == []


@pytest.mark.parametrize("z, ok", [("+422", True), ("+417", False), ("-0.1", False)])
def test_a_z_column_must_follow_from_the_rows_printed_figures(z, ok):
    table = ("| figure | recorded | ours | z as is | explaining arm | ours under it | z under it |\n|---|---|---|---|---|---|---|\n"
             f"| `td_loss_before` | 0.0231 ± 0.0136 | 5.76 | {z} | unit k | 0.0222 | -0.1 |")
    assert (rf.check_z_columns(table, "t") == []) == ok


def test_a_table_figure_from_another_arms_row_fails():
    """The budget table's held-out TD loss of `max_min` printed from the `none` row: each is a figure of the JSON,
    but not of the row the label names."""
    text = _block("rlbp-budget")
    rows = rf.value_rows(ROOT)
    lines = text.split("\n")
    i = next(k for k, line in enumerate(lines) if line.startswith("| `max_min` | 600 |"))
    j = next(k for k, line in enumerate(lines) if line.startswith("| `none` | 600 |"))
    a, b = rf.cells(lines[i]), rf.cells(lines[j])
    assert rf.check_labelled_figures(text, "t", rows) == []
    lines[i] = lines[i].replace(f"| {a[2]} |", f"| {b[2]} |", 1)
    problems = rf.check_labelled_figures("\n".join(lines), "t", rows)
    assert any("['max_min'], 'held-out TD loss'" in p for p in problems), problems


def test_a_contextual_td_loss_printed_as_mean_plus_sd_fails(monkeypatch):
    def plus_sd(data):
        for v in data["summary"]["heldout_td_loss"].values():
            v["mean"] += v["se"] * math.sqrt(v["n"])
    _loading(monkeypatch, "rendered/pinterest_rlbp/contextual_budget.json", plus_sd)
    problems = rf.check_labelled_figures(_block("rlbp-contextual-budget"), "t", rf.value_rows(ROOT))
    assert sum("'held-out TD loss'" in p for p in problems) >= 15, problems


def test_a_diagnosis_share_off_its_row_fails(monkeypatch):
    from litrepro.rlbp.diagnosis import BEST_CONSTANT

    def halved(data):
        for a in data["summary"]["arms"]:
            a["mean_action_shares"][BEST_CONSTANT] *= 0.5
    _loading(monkeypatch, claims.DIAGNOSIS, halved)
    problems = rf.check_labelled_figures(_block("rlbp-diagnosis"), "t", rf.value_rows(ROOT))
    assert any("'share of decisions on action 8'" in p for p in problems), problems


def test_a_seed_scale_z_off_its_figure_fails():
    """A per-seed-scale z changed beside its figure is named; the committed sentence reads back."""
    text = _block("opd-seed-scale")
    m = re.search(r"opd_history\.mean_gate \(z = (?P<z>[+-]\d+\.\d)\)", text)
    rows = rf.value_rows(ROOT)
    assert m and rf.check_labelled_sentences(text, "t", rows) == []
    wrong = f"{float(m.group('z')) + 0.4:+.1f}"
    problems = rf.check_labelled_sentences(text.replace(m.group(0), m.group(0).replace(m.group("z"), wrong)), "t", rows)
    assert any("opd_history.mean_gate (z = " in p for p in problems), problems


def test_a8_p02_bounds_at_three_significant_digits_fail(monkeypatch):
    """The eighth unseen audit's P02: fmt_ci's default precision raised to 3 digits; the bounds still hold the
    interval, but print a precision the house rule does not give them."""
    from litrepro import stats

    assert rf.check_bound_precision(_block("opd-transfer"), "t") == []
    monkeypatch.setattr(stats, "fmt_ci", patched(stats, "fmt_ci", "sig: int = 2) -> str:", "sig: int = 3) -> str:"))
    problems = rf.check_bound_precision(_block("opd-transfer"), "t")
    assert any("significant digits, not 2" in p for p in problems), problems


def test_the_named_contexts_may_print_more_digits():
    assert rf.check_bound_precision("exponent [+1.86, +1.90] and then", "t")
    assert rf.check_bound_precision("td_loss_before with exponent [+1.86, +1.90] at c = 1", "t") == []
    assert rf.check_bound_precision("reaches it after [77, 113] updates", "t") == []


# --- the sixth unseen audit's prose misses (benchmarks/fault_audits/unseen_6.md), each applied and named ---------

def test_a6_p02_bounds_without_their_trailing_zeros_fail(monkeypatch):
    from litrepro import stats

    fmt_ci = patched(stats, "fmt_ci", 'f"{x:+#.{sig}g}"', 'f"{x:+.{sig}g}"')     # the '#' flag dropped
    assert rf.check_bound_precision(_block("rlbp-budget"), "t") == []
    monkeypatch.setattr(stats, "fmt_ci", fmt_ci)
    problems = rf.check_bound_precision(_block("rlbp-budget"), "t")
    assert any("significant digits, not 2" in p for p in problems), problems


def test_a6_p17_beyond_the_frontier_beside_an_interval_spanning_0_fails(monkeypatch):
    from litrepro.waypoint import transfer_study

    words = patched(transfer_study, "frontier_words", 'if row["holm_high"] < 0:', 'if row["holm_low"] < 0:')
    assert rf.check_frontier_words(_block("opd-transfer"), "t", ROOT) == []
    monkeypatch.setattr(transfer_study, "frontier_words", words)
    problems = rf.check_frontier_words(_block("opd-transfer"), "t", ROOT)
    assert any("'beyond the best final-only learning rate'" in p for p in problems), problems


@pytest.mark.parametrize("old, new, words", [
    # the words judged from the raw interval, not the Holm one (the fourth claims review's multiplicity item)
    ('if row["holm_high"] < 0:', 'if row["nll_gap_to_frontier"]["ci95_high"] < 0:', "'beyond the best final-only"),
])
def test_frontier_words_from_the_raw_interval_fail(monkeypatch, old, new, words):
    from litrepro.waypoint import transfer_study

    monkeypatch.setattr(transfer_study, "frontier_words", patched(transfer_study, "frontier_words", old, new))
    problems = rf.check_frontier_words(_block("opd-transfer"), "t", ROOT)
    assert any(words in p for p in problems), problems


@pytest.mark.parametrize("old, new, words", [
    ("fmt_ci(row['holm_low'], row['holm_high'])", "fmt_ci(gap['ci95_low'], gap['ci95_high'])", "no row's pair"),
    ("{len(data['frontier'])} arms placed on the frontier (unadjusted", "{len(data['differences'])} arms placed on the frontier (unadjusted", "a Holm family of"),
    ('side = ("lower" if gap["ci95_high"] < 0', 'side = ("higher" if gap["ci95_high"] < 0', "beside the raw gap"),
])
def test_a_frontier_sentence_from_the_wrong_field_fails(monkeypatch, old, new, words):
    from litrepro.waypoint import transfer_study

    monkeypatch.setattr(transfer_study, "findings", patched(transfer_study, "findings", old, new))
    text = "\n".join(transfer_study.findings(transfer_study.load()))
    problems = rf.check_frontier_words(text, "t", ROOT)
    assert any(words in p for p in problems), problems


def test_a6_p20_a_pass_rate_threshold_that_hides_a_failed_check_fails(monkeypatch):
    pass_rates = patched(claims, "_pass_rates", "if r < 1.0]", "if r < 0.5]")
    assert rf.check_pass_rate_sentence(_block("headline-rlbp-study"), "t", ROOT) == []
    monkeypatch.setattr(claims, "_pass_rates", pass_rates)
    problems = rf.check_pass_rate_sentence(_block("headline-rlbp-study"), "t", ROOT)
    assert any("fell short on some seed" in p for p in problems), problems


def test_a6_p21_the_cpc_overshoot_column_printing_the_value_interval_fails(monkeypatch):
    def value_interval(data):
        for x in data["backups"]:
            x["cpc_overshoot_minus_fixed"] = dict(x["learned_minus_fixed"])
    pool = readback.intervals(ROOT)
    assert rf.check_interval_columns(_block("rlbp-backups"), "t", pool) == []
    _loading(monkeypatch, "rendered/pinterest_rlbp/backup_study.json", value_interval)
    problems = rf.check_interval_columns(_block("rlbp-backups"), "t", pool)
    assert any("column 'CPC overshoot, learned − fixed gain'" in p for p in problems), problems


@pytest.mark.parametrize("old, new, reader", [
    ("], below 0.9025", "], above 0.9025", "against"),          # P22: above / below a reference value swapped
    ("(SD/mean 0.59, n = 3)", "(SD/mean 0.59, n = 20)", "spread"),   # P23: the record's n from the wrong df
])
def test_a6_p22_p23_td_calibration_words_and_counts(old, new, reader):
    text = _block("rlbp-td-calibration")
    check = {"against": lambda t: rf.check_against_reference(t, "t"),
             "spread": lambda t: rf.check_spread_sentence(t, "t", ROOT)}[reader]
    assert old in text and check(text) == []
    assert check(text.replace(old, new))


def test_a6_p25_the_holm_count_from_the_raw_verdicts_fails(monkeypatch):
    def raw(data):
        for r in data["rows"]:
            r["holm_reads"] = r["raw_reads"]
    assert rf.check_holm_counts(_block("opd-effect-holm"), "t", ROOT) == []
    from litrepro.waypoint import effect_holm
    _loading(monkeypatch, effect_holm.PATH, raw)
    problems = rf.check_holm_counts(_block("opd-effect-holm"), "t", ROOT)
    assert any("after Holm" in p for p in problems), problems


def test_a6_p26_a_cause_verdict_against_the_wrong_baseline_fails(monkeypatch):
    from litrepro.rlbp import diagnosis

    verdict = patched(diagnosis, "cause_verdict", 'above_base = [f for f in fixes if f["minus_max_min"]["ci95_low"] > 0]',
                       'above_base = [f for f in fixes if f["minus_fixed_gain"]["ci95_low"] > 0]')
    assert rf.check_cause_verdicts(_block("rlbp-diagnosis"), "t") == []
    monkeypatch.setattr(diagnosis, "cause_verdict", verdict)
    problems = rf.check_cause_verdicts(_block("rlbp-diagnosis"), "t")
    assert any("does not settle it" in p for p in problems), problems


def test_a_lift_within_the_placebo_called_a_lift_fails(monkeypatch):
    """The fifth claims review's O1: sync_1 and sync_100 rise above max_min only by intervals whose lower ends lie
    within the placebo's, and the sentence still led with "lifts the policy above max_min"."""
    from litrepro.rlbp import diagnosis

    text = "\n".join(diagnosis.findings(diagnosis.load()))
    assert "within the placebo's" in text and rf.check_cause_verdicts(text, "t") == []
    monkeypatch.setattr(diagnosis, "findings", patched(diagnosis, "findings", "and above and set(above) <= set(within):",
                                                       "and above and False:"))
    problems = rf.check_cause_verdicts("\n".join(diagnosis.findings(diagnosis.load())), "t")
    assert any("lifts the policy above max_min; against the fixed gain' , its" in p or "within the placebo's" in p
               for p in problems), problems


# --- the seventh unseen audit's prose misses (benchmarks/fault_audits/unseen_7.md), each applied and named --------

@pytest.mark.parametrize("old, new", [
    ('extra.append(f"d_z {dz:+.2g}")', 'extra.append(f"d_z {sds:+.2g}")'),                          # P13
    ('extra.append(f"{sds:+.2g} between-seed SDs")', 'extra.append(f"{sds:+.1g} between-seed SDs")'),  # P18
])
def test_a7_p13_p18_a_transfer_effect_size_from_the_wrong_field_or_one_digit_short_fails(monkeypatch, old, new):
    from litrepro.waypoint import transfer_study

    effects = rf.effect_rows(ROOT)
    assert rf.check_effect_sizes(_block("opd-transfer"), "t", effects) == []
    monkeypatch.setattr(transfer_study, "_reads", patched(transfer_study, "_reads", old, new))
    problems = rf.check_effect_sizes(_block("opd-transfer"), "t", effects)
    assert any("between-seed SDs" in p for p in problems), problems


def test_a7_p19_the_dose_range_ending_at_the_second_largest_level_fails(monkeypatch):
    from litrepro.waypoint import dose_response

    assert rf.check_dose_range(_block("opd-dose-response"), "t", ROOT) == []
    monkeypatch.setattr(dose_response, "_range_words",
                        patched(dose_response, "_range_words", 'f"{v[0]:.2g} to {v[-1]:.2g}"', 'f"{v[0]:.2g} to {v[-2]:.2g}"'))
    problems = rf.check_dose_range(_block("opd-dose-response"), "t", ROOT)
    assert any("level means run from" in p for p in problems), problems
