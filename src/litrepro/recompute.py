"""A second, independent computation of the committed study JSON files' summary figures.

Each study writes its summary beside the per-seed values it was computed from.  This module
reads only those files (and, for the TD calibration, the recorded seed file when it is present)
and recomputes every summary figure that the per-seed values determine, by plain loops, numpy
and ``scipy.stats`` quantiles.  It imports none of the study, statistics or wording modules, so
a slip in one of them does not repeat itself here.

Definitions (the project's, restated):

* paired 95% t interval of per-seed differences d_1 .. d_n (paired by seed):
  mean(d) -+ t_{0.975, n-1} s / sqrt(n), s^2 = sum (d - mean)^2 / (n - 1); collapsed to the mean
  when s = 0; ``se`` = s / sqrt(n); verdict ">0" when low > 0, "<0" when high < 0, else
  "no detectable difference";
* an SD (``seed_sd``, ``sd``, the SD inside a CV) is the sample SD (n - 1 divisor); the recorded
  seed file's ``std`` is the sample SD too (checked against its per-seed values when present);
* a headroom share is mean(learned - fixed) / mean(oracle - fixed), with a paired bootstrap
  interval (the studies document scipy.stats.bootstrap, BCa, 9999 resamples, numpy
  ``default_rng(0)``, seeds resampled with their pair).  The interval is reproduced with that
  procedure, checked to contain the share, and compared, with a generous tolerance, with a plain
  percentile bootstrap of our own that resamples seeds jointly;
* Holm's step-down adjustment of the diagnosis' ablation family (when the file has one).

``check(root)`` gives one line per problem ("<file>: <field path>: recomputed X, JSON has Y");
``coverage(root)`` how many figures per file were compared.  A missing study file is skipped.
"""

from __future__ import annotations

import json
import math
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
from scipy import stats as sps

from litrepro.paths import ROOT

REL_TOL = 1e-9
DIAGNOSIS = "rendered/pinterest_rlbp/diagnosis.json"
TD_CALIBRATION = "rendered/pinterest_rlbp/td_calibration.json"
DOSE_RESPONSE = "rendered/waypoint_opd/dose_response.json"
BACKUP_STUDY = "rendered/pinterest_rlbp/backup_study.json"
#: The documented bootstrap of the headroom shares (reproduced exactly) and our own (compared loosely).
BOOT_RESAMPLES, BOOT_SEED = 9999, 0
OWN_RESAMPLES, OWN_SEED = 20000, 20240601
#: How far (in widths of our own percentile interval) a JSON bootstrap bound may sit from ours.
BOOT_WIDTH_TOL = 0.25
NO_DIFFERENCE = "no detectable difference"

__all__ = ["check", "coverage", "check_diagnosis", "check_td_calibration", "check_dose_response",
           "check_backup_study", "t_interval", "REL_TOL"]


# --- plain statistics ----------------------------------------------------------------------------

def _mean(xs: Sequence[float]) -> float:
    return math.fsum(xs) / len(xs)


def _sample_sd(xs: Sequence[float]) -> float:
    n = len(xs)
    if n < 2:
        return 0.0
    m = _mean(xs)
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / (n - 1))


def t_interval(values: Sequence[float]) -> dict[str, float]:
    """``{n, mean, se, low, high}``: the Student-t 95% interval of the mean of ``values`` (plain loops)."""
    xs = [float(v) for v in values]
    n = len(xs)
    if n == 0:
        raise ValueError("t_interval of no values")
    m = _mean(xs)
    sd = _sample_sd(xs)
    se = sd / math.sqrt(n)
    if n < 2 or sd == 0.0:
        return {"n": n, "mean": m, "se": se, "low": m, "high": m}
    half = float(sps.t.ppf(0.975, n - 1)) * se
    return {"n": n, "mean": m, "se": se, "low": m - half, "high": m + half}


def _verdict(low: float, high: float) -> str:
    return ">0" if low > 0 else "<0" if high < 0 else NO_DIFFERENCE


def _share_boot(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """The documented BCa interval of mean(x) / mean(y), seeds resampled in pairs."""
    res = sps.bootstrap((x, y), lambda a, b, axis=-1: a.mean(axis) / b.mean(axis), paired=True, vectorized=True,
                        n_resamples=BOOT_RESAMPLES, confidence_level=0.95, method="BCa",
                        random_state=np.random.default_rng(BOOT_SEED))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _own_paired_percentile(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Our own paired bootstrap: resample seed indices once for both series, 2.5/97.5 percentiles."""
    rng = np.random.default_rng(OWN_SEED)
    idx = rng.integers(0, len(x), size=(OWN_RESAMPLES, len(x)))
    ratios = x[idx].mean(axis=1) / y[idx].mean(axis=1)
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return float(lo), float(hi)


# --- the ledger: counts the figures compared, collects the problems ------------------------------

def _show(x: Any) -> str:
    if isinstance(x, float):
        return repr(x)
    s = json.dumps(x, sort_keys=True, default=str) if not isinstance(x, str) else repr(x)
    return s if len(s) <= 200 else s[:197] + "..."


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


class _Ledger:
    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[str] = []
        self.count = 0

    def problem(self, path: str, recomputed: Any, got: Any) -> None:
        self.problems.append(f"{self.file}: {path}: recomputed {_show(recomputed)}, JSON has {_show(got)}")

    def note(self, path: str, message: str) -> None:
        self.problems.append(f"{self.file}: {path}: {message}")

    @contextmanager
    def section(self, path: str) -> Iterator[None]:
        """Run one block; a missing key or a malformed value becomes a problem, not a crash."""
        try:
            yield
        except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError, AttributeError) as err:
            self.note(path, f"cannot recompute ({type(err).__name__}: {err})")

    def num(self, path: str, got: Any, want: float, scale: float | None = None) -> None:
        """``got`` equals ``want`` within REL_TOL of max(|want|, scale)."""
        self.count += 1
        if want is None or (isinstance(want, float) and math.isnan(want)):
            if got is not None:
                self.problem(path, want, got)
            return
        if not _is_number(got) or not math.isfinite(float(got)):
            self.problem(path, want, got)
            return
        tol = REL_TOL * max(abs(want), abs(scale or 0.0))
        if not (got == want or abs(got - want) <= tol):
            self.problem(path, want, got)

    def same(self, path: str, got: Any, want: Any) -> None:
        self.count += 1
        if got != want:
            self.problem(path, want, got)

    def members(self, path: str, got: Sequence[Any], want: Sequence[Any]) -> None:
        """The same items, each once; the problem names what is missing, extra or repeated."""
        self.count += 1
        got_l, want_l = [tuple(x) if isinstance(x, list) else x for x in got], list(want)
        missing = [x for x in want_l if x not in got_l]
        extra = [x for x in got_l if x not in want_l]
        repeated = sorted({x for x in got_l if got_l.count(x) > 1}, key=str)
        if missing or extra or repeated:
            self.note(path, f"missing {_show([list(x) if isinstance(x, tuple) else x for x in missing])}, "
                            f"unexpected {_show([list(x) if isinstance(x, tuple) else x for x in extra])}, "
                            f"repeated {_show([list(x) if isinstance(x, tuple) else x for x in repeated])}")

    def vector(self, path: str, got: Sequence[Any], want: Sequence[float]) -> None:
        if not isinstance(got, list) or len(got) != len(want):
            self.count += 1
            self.problem(path, list(want), got)
            return
        scale = max([abs(w) for w in want] + [0.0])
        for i, (g, w) in enumerate(zip(got, want)):
            self.num(f"{path}[{i}]", g, w, scale)

    def interval(self, path: str, row: Mapping[str, Any], values: Sequence[float], *, verdict: bool | None = None,
                 mean_key: str | None = None) -> dict[str, float]:
        """Compare a row ``{n, mean|mean_difference, ci95_low, ci95_high[, se][, verdict]}`` with t_interval(values)."""
        want = t_interval(values)
        key = mean_key or ("mean_difference" if "mean_difference" in row else "mean")
        scale = max(abs(want["mean"]), abs(want["low"]), abs(want["high"]))
        self.same(f"{path}.n", row.get("n"), want["n"])
        self.num(f"{path}.{key}", row.get(key), want["mean"], scale)
        self.num(f"{path}.ci95_low", row.get("ci95_low"), want["low"], scale)
        self.num(f"{path}.ci95_high", row.get("ci95_high"), want["high"], scale)
        if "se" in row:
            self.num(f"{path}.se", row["se"], want["se"])
        if verdict or (verdict is None and "verdict" in row):
            self.same(f"{path}.verdict", row.get("verdict"), _verdict(want["low"], want["high"]))
        return want

    def holm(self, path: str, row: Mapping[str, Any], h: Mapping[str, Any]) -> None:
        """Compare a row's Holm fields (raw and adjusted p, rank, level, interval, words) with :func:`_holm`'s ``h``."""
        self.num(f"{path}.p_raw", row.get("p_raw"), h["p_raw"])
        self.num(f"{path}.p_holm", row.get("p_holm"), h["p_holm"])
        self.same(f"{path}.rank", row.get("rank"), h["rank"])
        self.num(f"{path}.holm_level", row.get("holm_level"), h["level"])
        scale = max(abs(h["low"]), abs(h["high"]))
        self.num(f"{path}.holm_low", row.get("holm_low"), h["low"], scale)
        self.num(f"{path}.holm_high", row.get("holm_high"), h["high"], scale)
        self.same(f"{path}.holm_reads", row.get("holm_reads"), h["reads"])

    def share(self, path: str, row: Mapping[str, Any], gain: Sequence[float], room: Sequence[float]) -> None:
        """A headroom share: the ratio exactly, the documented bootstrap exactly, and our own loosely."""
        x, y = np.asarray(gain, dtype=float), np.asarray(room, dtype=float)
        share = _mean(list(x)) / _mean(list(y))
        self.num(f"{path}.share", row.get("share"), share)
        low, high = row.get("ci95_low"), row.get("ci95_high")
        scale = max(abs(share), abs(low or 0.0), abs(high or 0.0))
        b_low, b_high = _share_boot(x, y)
        self.num(f"{path}.ci95_low", low, b_low, scale)
        self.num(f"{path}.ci95_high", high, b_high, scale)
        self.count += 1
        if not (_is_number(low) and _is_number(high) and low <= row.get("share", share) <= high):
            self.note(f"{path}.ci95_low/ci95_high", f"interval [{low}, {high}] does not contain the share "
                                                    f"{row.get('share')}")
        o_low, o_high = _own_paired_percentile(x, y)
        width = o_high - o_low
        for name, got, want in (("ci95_low", low, o_low), ("ci95_high", high, o_high)):
            self.count += 1
            if not _is_number(got) or abs(got - want) > BOOT_WIDTH_TOL * width:
                self.problem(f"{path}.{name} (own paired percentile bootstrap, tolerance "
                             f"{BOOT_WIDTH_TOL} x width {width:.3g})", want, got)


# --- rlbp diagnosis -------------------------------------------------------------------------------

def _holm(family: Mapping[str, Sequence[float]], alpha: float = 0.05) -> dict[str, dict[str, Any]]:
    """Holm's step-down adjustment of two-sided one-sample t-tests of per-seed differences."""
    tested = {}
    for label, d in family.items():
        t = t_interval(d)
        n, m, se = t["n"], t["mean"], t["se"]
        p = 1.0 if se == 0.0 else float(2.0 * sps.t.sf(abs(m) / se, n - 1))
        tested[label] = (n, m, se, p)
    order = sorted(tested, key=lambda k: (tested[k][3], k))
    m_family = len(order)
    out, running = {}, 0.0
    for i, label in enumerate(order):
        n, mean, se, p = tested[label]
        running = max(running, min(1.0, (m_family - i) * p))
        level = 1.0 - alpha / (m_family - i)
        half = float(sps.t.ppf(1.0 - (1.0 - level) / 2.0, n - 1)) * se if se > 0 else 0.0
        reads = ("higher" if mean > 0 else "lower") if running < alpha else NO_DIFFERENCE
        out[label] = {"n": n, "mean_difference": mean, "p_raw": p, "p_holm": running, "rank": i + 1,
                      "level": level, "low": mean - half, "high": mean + half, "reads": reads}
    return out


def _check_diagnosis(d: Mapping[str, Any], L: _Ledger) -> None:
    rows = sorted(d["per_seed"], key=lambda r: r["seed"])
    seeds = [r["seed"] for r in rows]
    with L.section("seeds"):
        L.same("seeds", d["seeds"], seeds)
        L.same("n_seeds", d["n_seeds"], len(rows))
        if len(set(seeds)) != len(seeds):
            L.note("per_seed", f"a seed appears twice: {seeds}")
    s = d["summary"]
    arm_of = lambda r, a: r["arms"][a]  # noqa: E731
    fixed = [arm_of(r, "max_min")["fixed_gain"] for r in rows]
    best = [arm_of(r, "max_min")["best_constant"] for r in rows]
    base = [arm_of(r, "max_min")["learned_true_value"] for r in rows]
    with L.section("per_seed[*].arms[*] pairing"):
        for r in rows:
            for a, x in r["arms"].items():
                for key in ("fixed_gain", "best_constant", "best_constant_action"):
                    if key in x:
                        L.same(f"per_seed[seed={r['seed']}].arms.{a}.{key} (max_min's, shared draws)", x[key],
                               arm_of(r, "max_min")[key])
    with L.section("summary.arms"):
        common = sorted(a for a in rows[0]["arms"] if all(a in r["arms"] for r in rows))
        L.same("summary.arms[*].arm (the arms on every seed)", sorted(e["arm"] for e in s["arms"]), common)
    for entry in s["arms"]:
        a = entry.get("arm")
        p = f"summary.arms[{a}]"
        with L.section(p):
            learned = [arm_of(r, a)["learned_true_value"] for r in rows]
            L.same(f"{p}.n", entry["n"], len(rows))
            if isinstance(d.get("arms"), Mapping) and a in d["arms"] and "changes" in entry:
                L.same(f"{p}.changes", entry["changes"], d["arms"][a]["changes"])
            L.interval(f"{p}.minus_fixed_gain", entry["minus_fixed_gain"], [x - f for x, f in zip(learned, fixed)],
                       verdict=True)
            L.interval(f"{p}.minus_max_min", entry["minus_max_min"], [x - b for x, b in zip(learned, base)],
                       verdict=True)
            L.share(f"{p}.share_of_headroom", entry["share_of_headroom"], [x - f for x, f in zip(learned, fixed)],
                    [b - f for b, f in zip(best, fixed)])
            if "mean_action_shares" in entry:
                shares = np.array([arm_of(r, a)["action_shares"] for r in rows], dtype=float)
                L.vector(f"{p}.mean_action_shares", entry["mean_action_shares"],
                         [_mean(list(col)) for col in shares.T])
            failing = {str(r["seed"]): sorted(k for k, v in arm_of(r, a).get("checks", {}).items() if v is not True)
                       for r in rows}
            failing = {k: v for k, v in failing.items() if v}
            if "flagged_seeds" in entry or failing:
                got = {str(k): sorted(v) for k, v in (entry.get("flagged_seeds") or {}).items()}
                L.same(f"{p}.flagged_seeds", got, failing)
            if failing:
                keep = [i for i, r in enumerate(rows) if str(r["seed"]) not in failing]
                wf = entry.get("without_flagged", {})
                L.same(f"{p}.without_flagged.n", wf.get("n"), len(keep))
                if keep:
                    L.interval(f"{p}.without_flagged.minus_fixed_gain", wf["minus_fixed_gain"],
                               [learned[i] - fixed[i] for i in keep], verdict=True)
                    L.interval(f"{p}.without_flagged.minus_max_min", wf["minus_max_min"],
                               [learned[i] - base[i] for i in keep], verdict=True)
            if "critic" in entry:
                for key in ("rank_correlation", "greedy_agreement"):
                    if key in entry["critic"]:
                        L.interval(f"{p}.critic.{key}", entry["critic"][key],
                                   [arm_of(r, a)["critic"][key] for r in rows])
                if "action_bias" in entry["critic"]:
                    bias = np.array([arm_of(r, a)["critic"]["action_bias"] for r in rows], dtype=float)
                    L.vector(f"{p}.critic.action_bias", entry["critic"]["action_bias"],
                             [_mean(list(col)) for col in bias.T])
    if s.get("ablation"):
        with L.section("summary.ablation"):
            family = {}
            for row in s["ablation"]:
                x, y = row["arm"], row["against"]
                dd = [arm_of(r, x)["learned_true_value"] - arm_of(r, y)["learned_true_value"] for r in rows]
                family[row["factor"]] = dd
                L.interval(f"summary.ablation[{row['factor']}].raw", row["raw"], dd, verdict=True)
            adjusted = _holm(family)
            for row in s["ablation"]:
                want, got = adjusted[row["factor"]], row["holm"]
                hp = f"summary.ablation[{row['factor']}].holm"
                scale = max(abs(want["mean_difference"]), abs(want["low"]), abs(want["high"]))
                for key in ("n", "rank", "reads"):
                    L.same(f"{hp}.{key}", got.get(key), want[key])
                for key in ("p_raw", "p_holm", "level"):
                    L.num(f"{hp}.{key}", got.get(key), want[key])
                for key in ("mean_difference", "low", "high"):
                    L.num(f"{hp}.{key}", got.get(key), want[key], scale)
    for key, row in (s.get("alignment") or {}).items():
        with L.section(f"summary.alignment.{key}"):
            values = [r["alignment"][key] for r in rows]
            if "values" in row:
                L.same(f"summary.alignment.{key}.values", row["values"], values)
            L.interval(f"summary.alignment.{key}", row, values)
    with L.section("summary.headroom"):
        L.interval("summary.headroom", s["headroom"], [b - f for b, f in zip(best, fixed)], verdict=True)


# --- rlbp TD calibration --------------------------------------------------------------------------

def _recorded_seed_values(path: Path | None, metric: str) -> tuple[list[int], list[float]] | None:
    if path is None or not Path(path).is_file():
        return None
    data = json.loads(Path(path).read_text())
    rows = [r for r in data.get("per_seed", []) if metric in r.get("metrics", {})]
    return [r["seed"] for r in rows], [float(r["metrics"][metric]) for r in rows]


def _check_td_calibration(d: Mapping[str, Any], L: _Ledger, recorded_file: Path | None) -> None:
    per = d["per_seed"]
    rows = sorted(per.values(), key=lambda r: int(r["seed"]))
    seeds = [int(r["seed"]) for r in rows]
    with L.section("seeds"):
        L.same("seeds", d["seeds"], seeds)
        L.same("n_seeds", d["n_seeds"], len(rows))
        L.same("per_seed keys", sorted(per, key=int), [str(x) for x in seeds])
    rec_b, rec_a = d["recorded"]["td_loss_before"], d["recorded"]["td_loss_after"]
    ju = d["scale"]["joint_unit"]
    fit = list(ju["fit_seeds"])
    test = [x for x in seeds if x not in set(fit)]
    with L.section("recorded"):
        for metric, rec in (("td_loss_before", rec_b), ("td_loss_after", rec_a)):
            got = _recorded_seed_values(recorded_file, metric)
            if got is not None:
                rseeds, values = got
                L.num(f"recorded.{metric}.mean", rec["mean"], _mean(values))
                L.num(f"recorded.{metric}.std (sample SD of the seed file's values)", rec["std"], _sample_sd(values))
                L.same(f"recorded.{metric}.n", rec["n"], len(values))
                L.same("scale.joint_unit.fit_seeds (the recorded seeds)", sorted(fit), sorted(rseeds))
    col = lambda key: [r[key] for r in rows]  # noqa: E731
    before, after = col("td_loss_before"), col("td_loss_after")
    alpha = d["ratio"]["alpha"]
    recorded_ratio = (1.0 - alpha) ** 2
    # the unit k and the fit/test split
    with L.section("scale.joint_unit"):
        if not set(fit) <= set(seeds):
            L.note("scale.joint_unit.fit_seeds", f"fit seeds {fit} are not all among the seeds {seeds}")
        by_seed = {int(r["seed"]): r for r in rows}
        k = math.sqrt(rec_b["mean"] / _mean([by_seed[x]["td_loss_before"] for x in fit]))
        L.num("scale.joint_unit.k", ju["k"], k)
        L.same("scale.joint_unit.test_seeds (every seed not in fit_seeds)", ju["test_seeds"], test)
        overlap = sorted(set(ju["test_seeds"]) & set(fit))
        L.count += 1
        if overlap:
            L.note("scale.joint_unit.test_seeds", f"test seeds overlap the fit seeds: {overlap}")
        trows = [by_seed[x] for x in test]
        tb = L.interval("scale.joint_unit.test_td_loss_before", ju["test_td_loss_before"],
                        [k * k * r["td_loss_before"] for r in trows])
        ta = L.interval("scale.joint_unit.test_td_loss_after_expressed", ju["test_td_loss_after_expressed"],
                        [k * k * r["td_loss_after"] for r in trows])
        u = [r["unit"] for r in rows]
        L.interval("scale.joint_unit.td_loss_after_trained", ju["td_loss_after_trained"],
                   [x["td_loss_after_trained"] for x in u])
        L.interval("scale.joint_unit.ratio_trained_minus_ratio", ju["ratio_trained_minus_ratio"],
                   [x["ratio_trained"] - r["ratio"] for x, r in zip(u, rows)])
        for key in ("served_agreement_unit", "served_agreement_reorder", "greedy_agreement_unit",
                    "greedy_agreement_reorder"):
            L.interval(f"scale.joint_unit.{key}", ju[key], [x[key] for x in u])
        L.interval("scale.joint_unit.served_agreement_unit_minus_reorder", ju["served_agreement_unit_minus_reorder"],
                   [x["served_agreement_unit"] - x["served_agreement_reorder"] for x in u], verdict=True)
    # per-seed derived figures
    with L.section("per_seed"):
        for r in rows:
            p = f"per_seed.{r['seed']}"
            h = r["heads"]
            L.num(f"{p}.ratio", r["ratio"], r["td_loss_after"] / r["td_loss_before"])
            L.num(f"{p}.td_loss_before (value + cpc)", r["td_loss_before"],
                  r["td_loss_value_before"] + r["td_loss_cpc_before"])
            L.num(f"{p}.heads.value.loss", h["value"]["loss"], r["td_loss_value_before"])
            L.num(f"{p}.heads.cpc.loss", h["cpc"]["loss"], r["td_loss_cpc_before"])
            for key in ("A", "B", "C"):
                L.num(f"{p}.{key}", r[key], h["value"][key] + h["cpc"][key])
            for name, t in h.items():
                L.num(f"{p}.heads.{name}.target_second_moment", t["target_second_moment"],
                      t["target_variance"] + t["target_mean"] ** 2)
            a_, b_, c_ = r["A"], r["B"], r["C"]
            L.num(f"{p}.reward_only_floor", r["reward_only_floor"], c_ - b_ * b_ / a_ if b_ > 0 else c_)
            L.num(f"{p}.reward_only_exponent_at_1", r["reward_only_exponent_at_1"],
                  2.0 * (a_ - b_) / (a_ - 2.0 * b_ + c_))
            rx = r["relaxation"]
            L.num(f"{p}.relaxation.ratio", rx["ratio"], rx["after"] / rx["before"])
            L.num(f"{p}.relaxation.before", rx["before"], r["td_loss_before"])
            if "unit" in r:
                un = r["unit"]
                L.num(f"{p}.unit.k", un["k"], ju["k"])
                L.num(f"{p}.unit.td_loss_after_expressed", un["td_loss_after_expressed"],
                      un["k"] ** 2 * r["td_loss_after"])
                L.num(f"{p}.unit.td_loss_before (k^2 td_loss_before)", un["td_loss_before"],
                      un["k"] ** 2 * r["td_loss_before"])
                L.num(f"{p}.unit.ratio_trained", un["ratio_trained"],
                      un["td_loss_after_trained"] / un["td_loss_before"])
            budgets = _budget_values(r)
            if str(d.get("critic_steps")) in budgets:
                L.num(f"{p}.ratio_at_budget.{d['critic_steps']} (= ratio)", budgets[str(d["critic_steps"])], r["ratio"])
            c = r["crossing_step"]
            for t, v in budgets.items():
                if c is None or int(t) < c:
                    L.count += 1
                    if not v > recorded_ratio:
                        L.note(f"{p}.crossing_step", f"is {c}, but the ratio at budget {t} is {v} <= {recorded_ratio}")
                elif int(t) == c:
                    L.count += 1
                    if not v <= recorded_ratio:
                        L.note(f"{p}.crossing_step", f"is {c}, but the ratio there is {v} > {recorded_ratio}")
    # decomposition
    dec = d["scale"]["decomposition"]
    with L.section("scale.decomposition"):
        L.interval("scale.decomposition.td_loss_before", dec["td_loss_before"], before)
        L.interval("scale.decomposition.value_head_share", dec["value_head_share"],
                   [r["heads"]["value"]["loss"] / r["td_loss_before"] for r in rows])
        L.interval("scale.decomposition.target_second_moment_share", dec["target_second_moment_share"],
                   [sum(r["heads"][h]["target_second_moment"] for h in ("value", "cpc")) / r["td_loss_before"]
                    for r in rows])
        L.interval("scale.decomposition.target_mean_squared_share", dec["target_mean_squared_share"],
                   [sum(r["heads"][h]["target_mean"] ** 2 for h in ("value", "cpc")) / r["td_loss_before"]
                    for r in rows])
        L.interval("scale.decomposition.initial_critic_floor_C", dec["initial_critic_floor_C"], col("C"))
    ro = d["scale"]["reward_only"]
    with L.section("scale.reward_only"):
        L.interval("scale.reward_only.exponent_at_1", ro["exponent_at_1"], col("reward_only_exponent_at_1"))
        L.interval("scale.reward_only.floor_minus_recorded_mean", ro["floor_minus_recorded_mean"],
                   [x - rec_b["mean"] for x in col("reward_only_floor")], verdict=True)
        L.interval("scale.reward_only.floor_z", ro["floor_z"],
                   [(x - rec_b["mean"]) / rec_b["std"] for x in col("reward_only_floor")])
        pairs = [tuple(float(v) for v in key.split("-")) for key in ro["measured_slopes"]]
        scales = sorted({v for pr in pairs for v in pr})
        for i, (lo, hi) in enumerate(zip(scales, scales[1:])):
            key = next(kk for kk, pr in zip(ro["measured_slopes"], pairs) if pr == (lo, hi))
            L.interval(f"scale.reward_only.measured_slopes.{key}", ro["measured_slopes"][key],
                       [math.log(r["direct_reward_only"][i + 1] / r["direct_reward_only"][i]) / math.log(hi / lo)
                        for r in rows])
        for r in rows:
            for i, c in enumerate(scales):
                L.num(f"per_seed.{r['seed']}.direct_reward_only[{i}] (A c^2 - 2 B c + C)", r["direct_reward_only"][i],
                      r["A"] * c * c - 2.0 * r["B"] * c + r["C"])
                L.num(f"per_seed.{r['seed']}.direct_joint[{i}] (c^2 td_loss_before)", r["direct_joint"][i],
                      c * c * r["td_loss_before"])
        joint = [math.log(r["direct_joint"][i + 1] / r["direct_joint"][i]) / math.log(hi / lo)
                 for r in rows for i, (lo, hi) in enumerate(zip(scales, scales[1:]))]
        L.num("scale.joint_unit.measured_slope_min", ju["measured_slope_min"], min(joint))
        L.num("scale.joint_unit.measured_slope_max", ju["measured_slope_max"], max(joint))
    # the ratio
    ra = d["ratio"]
    with L.section("ratio"):
        L.num("ratio.recorded_ratio", ra["recorded_ratio"], recorded_ratio)
        relax = [r["relaxation"]["ratio"] for r in rows]
        L.num("ratio.relaxation_max_abs_error", ra["relaxation_max_abs_error"],
              max(abs(x - recorded_ratio) for x in relax))
        # the relaxation ratios agree to rounding, so their SD is rounding noise: compared at 1e-6 of their level
        L.num("ratio.relaxation_ratio_sd", ra["relaxation_ratio_sd"], _sample_sd(relax), 1e-6 * abs(_mean(relax)))
        L.interval("ratio.trained", ra["trained"], col("ratio"))
        L.interval("ratio.trained_minus_recorded", ra["trained_minus_recorded"],
                   [x - recorded_ratio for x in col("ratio")], verdict=True)
        budget_rows = [_budget_values(r) for r in rows]
        L.same("ratio.by_budget keys", sorted(ra["by_budget"], key=int), sorted(budget_rows[0], key=int))
        means = {}
        for t, row in ra["by_budget"].items():
            v = [b[t] for b in budget_rows]
            means[t] = L.interval(f"ratio.by_budget.{t}", row, v)["mean"]
            L.num(f"ratio.by_budget.{t}.sd (sample SD)", row["sd"], _sample_sd(v))
            L.interval(f"ratio.by_budget.{t}.minus_recorded", row["minus_recorded"],
                       [x - recorded_ratio for x in v], verdict=True)
        L.same("ratio.closest_budget", ra["closest_budget"],
               int(min(means, key=lambda t: abs(means[t] - recorded_ratio))))
        crossing = [r["crossing_step"] for r in rows]
        hit = [c for c in crossing if c is not None]
        cs = ra["crossing_step"]
        L.same("ratio.crossing_step.never", cs["never"], sum(c is None for c in crossing))
        L.same("ratio.crossing_step.min", cs["min"], min(hit))
        L.same("ratio.crossing_step.max", cs["max"], max(hit))
        L.interval("ratio.crossing_step", cs, hit)
    # the calibration table
    with L.section("calibration_table"):
        table = {row["figure"]: (i, row) for i, row in enumerate(d["calibration_table"])}
        z = lambda x, rec: (x - rec["mean"]) / rec["std"]  # noqa: E731
        ours_b, ours_a = _mean(before), _mean(after)
        want = {
            "td_loss_before": (rec_b, ours_b, tb["mean"]),
            "td_loss_after": (rec_a, ours_a, recorded_ratio * tb["mean"]),
            "td_loss_after (our Adam training, expressed in unit k)": (rec_a, ours_a, ta["mean"]),
        }
        for figure, (rec, ours, explained) in want.items():
            i, row = table[figure]
            p = f"calibration_table[{i}]({figure})"
            L.num(f"{p}.recorded_mean", row["recorded_mean"], rec["mean"])
            L.num(f"{p}.recorded_std", row["recorded_std"], rec["std"])
            L.num(f"{p}.ours", row["ours"], ours)
            L.num(f"{p}.z_as_is", row["z_as_is"], z(ours, rec))
            L.num(f"{p}.ours_explained", row["ours_explained"], explained)
            L.num(f"{p}.z_explained", row["z_explained"], z(explained, rec))
        for i, row in enumerate(d["calibration_table"]):
            text = str(row.get("explaining_arm", ""))
            for pattern, want_seeds in ((r"fitted on seeds (\d+)-(\d+)", fit), (r", seeds (\d+)-(\d+)$", test)):
                found = re.search(pattern, text)
                if found:
                    L.same(f"calibration_table[{i}].explaining_arm (seed range)",
                           list(range(int(found.group(1)), int(found.group(2)) + 1)), sorted(want_seeds))
        i, row = table["td_loss_after / td_loss_before"]
        p = f"calibration_table[{i}](td_loss_after / td_loss_before)"
        L.num(f"{p}.recorded_mean", row["recorded_mean"], recorded_ratio)
        L.num(f"{p}.ours", row["ours"], _mean(col("ratio")))
        L.num(f"{p}.ours_explained", row["ours_explained"], _mean(relax))
        for key in ("recorded_std", "z_as_is", "z_explained"):
            L.same(f"{p}.{key}", row[key], None)
        L.same("calibration_table rows", len(d["calibration_table"]), 4)
    # the spread: CVs with the sample SD, and their F interval
    with L.section("spread"):
        sp = d["spread"]
        rec_cv = rec_b["std"] / rec_b["mean"]
        ours_cv = _sample_sd(before) / _mean(before)
        L.num("spread.recorded_cv", sp["recorded_cv"], rec_cv)
        L.num("spread.ours_cv (sample SD / mean)", sp["ours_cv"], ours_cv)
        cv = sp["cv_ratio"]
        df = [int(rec_b["n"]) - 1, len(before) - 1]
        r_ = rec_cv / ours_cv
        L.same("spread.cv_ratio.df", cv["df"], df)
        L.num("spread.cv_ratio.estimate", cv["estimate"], r_)
        L.num("spread.cv_ratio.ci95_low", cv["ci95_low"], r_ / math.sqrt(float(sps.f.ppf(0.975, *df))))
        L.num("spread.cv_ratio.ci95_high", cv["ci95_high"], r_ / math.sqrt(float(sps.f.ppf(0.025, *df))))
    with L.section("check_pass_rates"):
        for key, rate in d["check_pass_rates"].items():
            L.num(f"check_pass_rates.{key}", rate, sum(r["checks"][key] is True for r in rows) / len(rows))


def _budget_values(r: Mapping[str, Any]) -> dict[str, float]:
    """{budget: ratio} of one seed: ``ratio_at_budget`` as written (the full curve is trimmed before writing)."""
    return {str(t): float(v) for t, v in r["ratio_at_budget"].items()}


# --- waypoint dose-response ----------------------------------------------------------------------

_NOT_MEANS = ("seed", "level", "teacher_rl_lr", "checks", "arm_checks")


def _check_dose_response(d: Mapping[str, Any], L: _Ledger) -> None:
    rows = d["per_seed"]
    levels = list(dict.fromkeys(r["level"] for r in rows))
    by_level = {lv: sorted((r for r in rows if r["level"] == lv), key=lambda r: r["seed"]) for lv in levels}
    with L.section("seeds"):
        L.same("n_seeds", d["n_seeds"], len(d["seeds"]))
        for lv, cond in by_level.items():
            L.same(f"per_seed[level={lv}] seeds", [r["seed"] for r in cond], sorted(d["seeds"]))
    with L.section("levels_teacher_rl_lr"):
        lr = d["levels_teacher_rl_lr"]
        L.same("levels_teacher_rl_lr keys", sorted(lr), sorted(levels))
        for r in rows:
            if r["teacher_rl_lr"] != lr.get(r["level"]):
                L.count += 1
                L.problem(f"per_seed[seed={r['seed']},level={r['level']}].teacher_rl_lr", lr.get(r["level"]),
                          r["teacher_rl_lr"])
    with L.section("differences"):
        diffs = d["differences"]
        keys = [(r["level"], r["comparison"], r["metric"]) for r in diffs]
        comparisons = list(dict.fromkeys(r["comparison"] for r in diffs))
        metrics = list(dict.fromkeys(r["metric"] for r in diffs))
        L.members("differences (one row per level x comparison x metric)", keys,
                  [(lv, c, m) for lv in levels for c in comparisons for m in metrics])
        for r in diffs:
            p = f"differences[{r['level']}|{r['comparison']}|{r['metric']}]"
            with L.section(p):
                a, b = r["comparison"].split(" - ")
                cond = by_level[r["level"]]
                metric = r["metric"]
                dd = [x[f"{a}.{metric}"] - x[f"{b}.{metric}"] for x in cond]
                want = L.interval(p, r, dd)
                ref = [x[f"{b}.{metric}"] for x in cond]
                sd = _sample_sd(ref)
                L.num(f"{p}.seed_sd (sample SD of {b})", r["seed_sd"], sd)
                L.same(f"{p}.teacher_rl_lr", r["teacher_rl_lr"], cond[0]["teacher_rl_lr"])
                if "standing" in r:
                    lo, hi = want["low"], want["high"]
                    if lo > sd or hi < -sd:
                        standing = "beyond_spread"
                    elif lo > 0 or hi < 0:
                        standing = "within_spread" if -sd < lo and hi < sd else "straddles_spread"
                    else:
                        standing = "none"
                    L.same(f"{p}.standing", r["standing"], standing)
    with L.section("level_means"):
        L.same("level_means levels", [r["level"] for r in d["level_means"]], levels)
        for row in d["level_means"]:
            lv = row["level"]
            p = f"level_means[{lv}]"
            cond = by_level[lv]
            L.same(f"{p}.n", row["n"], len(cond))
            L.same(f"{p}.teacher_rl_lr", row["teacher_rl_lr"], cond[0]["teacher_rl_lr"])
            moves = [r["delta_p_even"] for r in cond]
            L.num(f"{p}.delta_p_even_min", row["delta_p_even_min"], min(moves))
            L.num(f"{p}.delta_p_even_max", row["delta_p_even_max"], max(moves))
            mean_keys = [k for k in cond[0] if k not in _NOT_MEANS]
            L.same(f"{p} keys", sorted(k for k in row if k not in ("level", "teacher_rl_lr", "n", "delta_p_even_min",
                                                                     "delta_p_even_max")), sorted(mean_keys))
            for k in mean_keys:
                L.num(f"{p}.{k}", row.get(k), _mean([r[k] for r in cond]))
    for key in [k for k in d if k.endswith("_count") or k.startswith("beyond")]:
        L.note(key, "a derived count this recomputation does not know; add it to recompute.py")


# --- rlbp backup study ---------------------------------------------------------------------------

def _check_backup_study(d: Mapping[str, Any], L: _Ledger) -> None:
    per = d["per_seed"]
    seeds = list(d["seeds"])
    oracles = ("best_constant", "best_per_kind", "best_per_campaign")
    with L.section("seeds"):
        L.same("n_seeds", d["n_seeds"], len(seeds))
        for b, ps in per.items():
            L.same(f"per_seed.{b} seeds", sorted(int(s) for s in ps), sorted(seeds))
    col = lambda b, f: [f(per[b][str(s)]) for s in sorted(seeds)]  # noqa: E731
    with L.section("per_seed headroom"):
        multipliers = d["provenance"]["parameters"]["gain_multipliers"]
        m1 = multipliers.index(1.0)
        fixed_action = m1 * len(multipliers) + m1
        for b, ps in per.items():
            for s, r in ps.items():
                h = r["headroom"]
                p = f"per_seed.{b}.{s}.headroom"
                L.num(f"{p}.best_constant (max of constant)", h["best_constant"], max(h["constant"]))
                L.same(f"{p}.best_constant_action (argmax of constant)", h["best_constant_action"],
                       int(np.argmax(h["constant"])))
                L.num(f"{p}.fixed_gain (constant[{fixed_action}], both multipliers 1.0)", h["fixed_gain"],
                      h["constant"][fixed_action])
                L.same(f"{p} (max_min's: shared draws)", h, per["max_min"][s]["headroom"])
    with L.section("backups"):
        L.same("backups[*].backup", sorted(r["backup"] for r in d["backups"]), sorted(per))
        for row in d["backups"]:
            b = row["backup"]
            p = f"backups[{b}]"
            with L.section(p):
                learned = col(b, lambda r: r["learned_true_value"])
                fixed = col(b, lambda r: r["headroom"]["fixed_gain"])
                L.same(f"{p}.n", row["n"], len(learned))
                L.interval(f"{p}.learned_minus_fixed", row["learned_minus_fixed"],
                           [x - f for x, f in zip(learned, fixed)], verdict=True)
                for o in oracles:
                    oracle = col(b, lambda r, o=o: r["headroom"][o])
                    L.interval(f"{p}.learned_minus_{o}", row[f"learned_minus_{o}"],
                               [x - y for x, y in zip(learned, oracle)], verdict=True)
                    L.share(f"{p}.share_of_{o}_headroom", row[f"share_of_{o}_headroom"],
                            [x - f for x, f in zip(learned, fixed)], [y - f for y, f in zip(oracle, fixed)])
                # no per-seed CPC overshoot is written: only the row's own consistency can be checked
                cpc = row["cpc_overshoot_minus_fixed"]
                L.count += 1
                if not cpc["ci95_low"] <= cpc["mean_difference"] <= cpc["ci95_high"]:
                    L.note(f"{p}.cpc_overshoot_minus_fixed", "the mean lies outside its interval")
                L.same(f"{p}.cpc_overshoot_minus_fixed.verdict", cpc["verdict"],
                       _verdict(cpc["ci95_low"], cpc["ci95_high"]))
        means = {}
        for r in d["backups"]:
            if r["backup"] != "max_min":
                gain = zip(col(r["backup"], lambda q: q["learned_true_value"]),
                           col(r["backup"], lambda q: q["headroom"]["fixed_gain"]))
                means[r["backup"]] = _mean([x - f for x, f in gain])
        if means:
            L.same("best_other_backup", d["best_other_backup"], max(means, key=means.get))
    with L.section("headroom"):
        hd = d["headroom"]
        fixed = col("max_min", lambda r: r["headroom"]["fixed_gain"])
        constant = np.array(col("max_min", lambda r: r["headroom"]["constant"]), dtype=float)
        L.vector("headroom.constant_actions_mean", hd["constant_actions_mean"], [_mean(list(c)) for c in constant.T])
        actions = col("max_min", lambda r: r["headroom"]["best_constant_action"])
        L.same("headroom.best_constant_action_counts", hd["best_constant_action_counts"],
               {str(a): actions.count(a) for a in range(constant.shape[1])})
        L.num("headroom.fixed_gain_mean", hd["fixed_gain_mean"], _mean(fixed))
        for o in oracles:
            L.num(f"headroom.{o}_mean", hd[f"{o}_mean"], _mean(col("max_min", lambda r, o=o: r["headroom"][o])))
        L.same("headroom.oracle_minus_fixed[*].comparison", sorted(r["comparison"] for r in hd["oracle_minus_fixed"]),
               sorted(f"{o} - fixed_gain" for o in oracles))
        for row in hd["oracle_minus_fixed"]:
            o = row["comparison"].split(" - ")[0]
            L.interval(f"headroom.oracle_minus_fixed[{o}]", row,
                       [x - f for x, f in zip(col("max_min", lambda r, o=o: r["headroom"][o]), fixed)], verdict=True)
    with L.section("scaling"):
        days = d["provenance"]["parameters"]["logged_days"]
        for row in d["scaling"]:
            if row["logged_days"] != days:
                continue                       # other day counts: no per-seed values are written
            b = row["backup"]
            p = f"scaling[{days} days|{b}]"
            learned = col(b, lambda r: r["learned_true_value"])
            for key, other in (("learned_minus_fixed", "fixed_gain"), ("learned_minus_best_per_kind", "best_per_kind")):
                L.interval(f"{p}.{key}", row[key],
                           [x - y for x, y in zip(learned, col(b, lambda r, k=other: r["headroom"][k]))], verdict=True)
    with L.section("check_pass_rates"):
        refused = d.get("refused_arms") or {}
        L.same("check_pass_rates arms (written backups + refused arms)", sorted(d["check_pass_rates"]),
               sorted(set(per) | set(refused)))
        for b, rates in d["check_pass_rates"].items():
            failed = refused.get(b, {})
            for key, rate in rates.items():
                want = 1.0 - sum(key in v for v in failed.values()) / len(seeds)
                L.num(f"check_pass_rates.{b}.{key}", rate, want)


# --- the public interface ------------------------------------------------------------------------

def _run(file: str, fn: Callable[[Mapping[str, Any], _Ledger], None], data: Mapping[str, Any]) -> _Ledger:
    ledger = _Ledger(file)
    with ledger.section("(structure)"):
        fn(data, ledger)
    return ledger


def check_diagnosis(data: Mapping[str, Any]) -> list[str]:
    """Problems in ``diagnosis.json``'s summary against its per-seed values (empty: all recomputed)."""
    return _run(DIAGNOSIS, _check_diagnosis, data).problems


def check_td_calibration(data: Mapping[str, Any], recorded_file: Path | None = None) -> list[str]:
    """Problems in ``td_calibration.json``; ``recorded_file``: the seed file, to check the recorded mean and SD."""
    return _run(TD_CALIBRATION, lambda d, L: _check_td_calibration(d, L, recorded_file), data).problems


def check_dose_response(data: Mapping[str, Any]) -> list[str]:
    """Problems in ``dose_response.json``'s differences and level means against its per-seed rows."""
    return _run(DOSE_RESPONSE, _check_dose_response, data).problems


def check_backup_study(data: Mapping[str, Any]) -> list[str]:
    """Problems in ``backup_study.json``'s rows, shares and headroom against its per-seed values."""
    return _run(BACKUP_STUDY, _check_backup_study, data).problems


def _recorded_file(root: Path, data: Mapping[str, Any]) -> Path | None:
    from litrepro.paths import seeds_dir

    name = (data.get("provenance") or {}).get("recorded_file")
    if not name or not re.fullmatch(r"[\w.\-]+", str(name)):
        return None
    for folder in (seeds_dir(), Path(root).parent / "shared" / "seeds"):
        if (folder / name).is_file():
            return folder / name
    return None


BENCHMARKS = "rendered/benchmarks.json"


def _check_benchmarks(d: Mapping[str, Any], L: _Ledger) -> None:
    """The reproduction benchmark's medians from its runs, and its ratios from the medians (letters a-d name the
    runs: ``ratio_b_over_a`` is median b / median a)."""
    r = d.get("reproduction")
    if not isinstance(r, dict):
        return
    med, runs = r["median_s"], r["all_s"]
    keys = {k.split("_", 1)[0]: k for k in med}                         # "a" -> "a_warm_run"
    for k, xs in runs.items():
        with L.section(f"reproduction.median_s.{k}"):
            ys = sorted(xs)
            n = len(ys)
            L.num(f"reproduction.median_s.{k}", med[k], ys[n // 2] if n % 2 else (ys[n // 2 - 1] + ys[n // 2]) / 2)
    for name, got in r.items():
        m = re.fullmatch(r"ratio_([a-z])_over_([a-z])", name)
        if m:
            with L.section(f"reproduction.{name}"):
                L.num(f"reproduction.{name}", got, med[keys[m.group(1)]] / med[keys[m.group(2)]])


def _ledgers(root: Path) -> list[_Ledger]:
    from litrepro import (recompute_calibration, recompute_contextual, recompute_d3rlpy, recompute_rlbp,
                          recompute_transfer, recompute_waypoint)

    def load(file: str) -> Any:
        try:
            return json.loads((Path(root) / file).read_text())
        except (OSError, ValueError):
            return None

    out = []
    plan = [(DIAGNOSIS, _check_diagnosis), (TD_CALIBRATION, None), (DOSE_RESPONSE, _check_dose_response),
            (BACKUP_STUDY, _check_backup_study), *recompute_contextual.plan(load),
            *recompute_waypoint.plan(load), *recompute_d3rlpy.plan(load), *recompute_rlbp.plan(load),
            *recompute_transfer.plan(load), *recompute_calibration.plan(load), (BENCHMARKS, _check_benchmarks)]
    for file, fn in plan:
        path = Path(root) / file
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            ledger = _Ledger(file)
            ledger.note("(file)", f"cannot be read ({err})")
            out.append(ledger)
            continue
        if fn is None:
            rec = _recorded_file(Path(root), data)
            fn = lambda d, L, rec=rec: _check_td_calibration(d, L, rec)  # noqa: E731
        out.append(_run(file, fn, data))
    return out


def check(root: Path = ROOT) -> list[str]:
    """One line per summary figure that does not recompute, over every study file present under ``root``."""
    return [p for ledger in _ledgers(root) for p in ledger.problems]


def coverage(root: Path = ROOT) -> dict[str, int]:
    """How many figures of each study file present under ``root`` were compared."""
    return {ledger.file: ledger.count for ledger in _ledgers(root)}


def main() -> int:
    problems = check()
    for file, n in coverage().items():
        print(f"{file}: {n} figures recomputed")
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
