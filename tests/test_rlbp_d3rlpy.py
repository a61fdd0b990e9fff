"""The logged-transition export and the d3rlpy cross-check (``litrepro.studies.rlbp_d3rlpy``, ``make rlbp-d3rlpy``).

The export format is tested without d3rlpy: it round-trips, its docstring documents every field, and
``check_export`` catches faulty exports.  The d3rlpy tests run a tiny world for a few gradient steps; they
skip without the ``d3rlpy`` extra.  The committed study is checked for freshness by source hashes (it is
never re-run here), for intervals that recompute, and for pairing with ``diagnosis.json``: same seeds, same
fixed gain and best constant to the last bit, and the same evaluation days.
"""

from __future__ import annotations

import dataclasses
import json
import random

import numpy as np
import pytest
import torch

from litrepro import figcheck
from litrepro.rlbp import experiment as ex
from litrepro.rlbp.config import RLBPConfig
from litrepro.rlbp.streams import Streams
from litrepro.seeding import seed_everything
from litrepro.studies import rlbp_d3rlpy as d3

#: A tiny world; epsilon 0.5 makes the propensities differ between action 4 and the others.
TINY = dict(n_campaigns=24, opportunities_per_step=8, logged_days=2, steps_per_day=12, segments_per_day=3,
            eval_days=1, behaviour_epsilon=0.5)
TINY_SETTINGS = d3.D3Settings(checkpoints=(4, 8), steps_per_epoch=4, batch_size=16)


@pytest.fixture(scope="module")
def tiny():
    cfg = RLBPConfig(seed=5, **TINY)
    seed_everything(cfg.seed)
    streams = Streams(cfg.seed)
    world = ex.build_world(cfg, streams, torch.device("cpu"))
    data = ex.collect_logged_data(world, streams)
    return world, data, d3.export_logged(world, data)


# --- The export format ---------------------------------------------------------------------------

def test_the_export_matches_the_pipeline_and_is_in_episode_order(tiny):
    world, data, export = tiny
    report = d3.check_export(export, world, data)
    assert report["export_matches_pipeline"] is True, report
    assert report["copy_gap"] == 0.0 and report["integer_mismatches"] == 0 and report["extra_rows"] == 0
    assert len(export) == len(data["train"]) + len(data["heldout"])
    k = world.cfg.segments_per_day
    episodes = np.stack([export.day, export.campaign]).T.reshape(-1, k, 2)             # (episodes, K, 2)
    assert (episodes == episodes[:, :1]).all()                                          # one campaign's day each
    assert (export.segment.reshape(-1, k) == np.arange(k)).all()
    assert (export.end_of_day == (export.segment == k - 1)).all()
    assert not export.heldout[: len(data["train"])].any() and export.heldout[len(data["train"]):].all()
    assert set(np.unique(export.propensity).round(12)) == {round(0.5 / 9, 12), round(0.5 / 9 + 0.5, 12)}


def test_the_export_round_trips_every_field(tiny, tmp_path):
    _, _, export = tiny
    path = tmp_path / "seed-5.npz"
    export.save(path)
    back = d3.LoggedExport.load(path)
    for name, (dtype, _) in d3.FIELDS.items():
        got, want = getattr(back, name), getattr(export, name)
        assert str(got.dtype) == dtype and got.shape == want.shape and np.array_equal(got, want), name
    assert back.meta == export.meta and back.meta["format_version"] == d3.FORMAT_VERSION


def test_load_refuses_another_version_or_field_set(tiny, tmp_path):
    _, _, export = tiny
    with pytest.raises(ValueError, match="format_version"):
        dataclasses.replace(export, meta={**export.meta, "format_version": 99}).save(tmp_path / "a.npz")
    arrays = export.arrays()
    arrays.pop("propensity")
    np.savez(tmp_path / "b.npz", **arrays, meta=np.array(json.dumps(export.meta)))
    with pytest.raises(ValueError, match="fields"):
        d3.LoggedExport.load(tmp_path / "b.npz")
    with pytest.raises(ValueError, match="end_of_day"):
        dataclasses.replace(export, end_of_day=export.end_of_day.astype(np.float64)).validate()


def test_the_module_docstring_documents_every_field_with_its_dtype():
    lines = d3.__doc__.splitlines()
    for name, (dtype, shape) in d3.FIELDS.items():
        assert any(line.split()[:2] == [name, dtype] and shape in line for line in lines), name
    for word in ("End of day", "Propensity", "episode order", "terminal"):
        assert word.lower() in " ".join(d3.__doc__.split()).lower()


def _shift_next_state(e, cfg):
    return dataclasses.replace(e, next_state=np.roll(e.next_state, 1, axis=0))


def _propensity_of_another_action(e, cfg):
    other = (e.action + 1) % 9                                                           # mu(a'|s) for a' != a
    eps = cfg.behaviour_epsilon
    return dataclasses.replace(e, propensity=eps / 9 + (1 - eps) * (other == 4).astype(np.float64))


def _end_of_day_one_segment_early(e, cfg):
    return dataclasses.replace(e, end_of_day=e.segment == cfg.segments_per_day - 2)


def _cpc_sign_flipped(e, cfg):
    return dataclasses.replace(e, reward=e.value_reward + cfg.lambda_cpc * e.cpc_cost)


def _campaigns_swapped(e, cfg):
    k = cfg.segments_per_day
    order = np.arange(len(e))
    order[:k], order[k:2 * k] = order[k:2 * k].copy(), order[:k].copy()               # two episodes' states
    return dataclasses.replace(e, state=e.state[order])


def _row_dropped(e, cfg):
    return dataclasses.replace(e, **{k: v[:-1] for k, v in e.arrays().items()})


@pytest.mark.guards("export_matches_pipeline")
@pytest.mark.parametrize("fault", [_shift_next_state, _propensity_of_another_action, _end_of_day_one_segment_early,
                                   _cpc_sign_flipped, _campaigns_swapped, _row_dropped],
                         ids=lambda f: f.__name__.strip("_"))
def test_a_faulty_export_is_caught(tiny, fault):
    """export_matches_pipeline turns false, and the gap it reports is not zero."""
    world, data, export = tiny
    report = d3.check_export(fault(export, world.cfg), world, data)
    assert report["export_matches_pipeline"] is False
    gaps = [v for k, v in report.items() if k != "export_matches_pipeline"]
    assert any(g for g in gaps if not isinstance(g, bool)) or report.get("rows_missing")


# --- Hand-made rows: the summary, its refusals and the words -------------------------------------

SETTINGS = d3.D3Settings(algos=("double_dqn", "discrete_cql"), checkpoints=(600, 3000), steps_per_epoch=600)


def _rows(effects: dict[str, float], seeds=range(42, 62), noise: float = 0.004) -> list[dict]:
    rows = []
    for seed in seeds:
        rng = random.Random(seed)
        fixed = 1.7 + rng.gauss(0, 0.01)
        algos = {a: {"checkpoints": {str(s): {"true_value": fixed + effects[a] + rng.gauss(0, noise),
                                              "action_shares": [1 / 9] * 9} for s in SETTINGS.checkpoints}}
                 for a in SETTINGS.algos}
        rows.append({"seed": seed, "fixed_gain": fixed, "best_constant": fixed + 0.05 + rng.gauss(0, 0.002),
                     "eval_day_hashes": [f"{seed}-{i}" for i in range(4)], "algos": algos,
                     "checks": dict.fromkeys(("export_matches_pipeline", "d3rlpy_dataset_matches_export"), True)})
    return rows


def test_the_summary_pairs_by_seed_and_its_words_follow_the_interval():
    rows = _rows({"double_dqn": 0.02, "discrete_cql": 0.0})
    summary = d3.summarise(rows, SETTINGS)
    by = {(r["algo"], r["steps"]): r for r in summary["rows"]}
    assert by[("double_dqn", 3000)]["minus_fixed_gain"]["verdict"] == ">0"
    assert by[("double_dqn", 3000)]["minus_best_constant"]["verdict"] == "<0"
    assert summary["headroom"]["verdict"] == ">0"
    data = {"summary": summary, "n_seeds": 20, "settings": dataclasses.asdict(SETTINGS), "d3rlpy_version": "x",
            "gamma": 0.9}
    lines = d3.findings(data)
    dqn = next(x for x in lines if x.startswith("d3rlpy DoubleDQN at 3000 steps has"))
    assert "higher true value than the fixed gain" in dqn and "lower true value than the best constant" in dqn
    cql = next(x for x in lines if x.startswith("d3rlpy DiscreteCQL at 3000 steps"))
    verdict = by[("discrete_cql", 3000)]["minus_fixed_gain"]["verdict"]
    first = cql.split("; ")[0]
    assert ("no detectable difference" in first) == (verdict == "no detectable difference")
    word = d3.table(data).loc[("discrete_cql", 3000), "reads"]
    assert word == {"<0": "lower", ">0": "higher"}.get(by[("discrete_cql", 3000)]["minus_fixed_gain"]["verdict"],
                                                     "no detectable difference")
    assert figcheck.outside_canvas(d3.plot(data)) == []


def test_the_summary_refuses_failed_checks_shared_days_and_tampered_intervals():
    rows = _rows({"double_dqn": 0.0, "discrete_cql": 0.0})
    bad = [dict(r) for r in rows]
    bad[3] = {**bad[3], "checks": {**bad[3]["checks"], "export_matches_pipeline": False}}
    with pytest.raises(d3.StudyRefused, match="export_matches_pipeline"):
        d3.summarise(bad, SETTINGS)
    shared = [dict(r) for r in rows]
    shared[1] = {**shared[1], "eval_day_hashes": shared[0]["eval_day_hashes"]}
    with pytest.raises(d3.StudyRefused, match="share an evaluation day"):
        d3.summarise(shared, SETTINGS)
    summary = d3.summarise(rows, SETTINGS)
    summary["rows"][2]["minus_fixed_gain"]["ci95_high"] += 1e-3
    with pytest.raises(d3.StudyRefused, match="plain-loop"):
        d3.check_intervals(rows, summary)
    summary = d3.summarise(rows, SETTINGS)
    summary["rows"][0]["minus_best_constant"]["verdict"] = ">0"
    with pytest.raises(d3.StudyRefused, match="plain-loop"):
        d3.check_intervals(rows, summary)


# --- d3rlpy on a tiny world ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    pytest.importorskip("d3rlpy")
    import os

    here = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("cwd"))                # d3rlpy must leave no log folder behind
    try:
        out = d3.run_seed(5, settings=TINY_SETTINGS, overrides=TINY)
        again = d3.run_seed(5, settings=TINY_SETTINGS, overrides=TINY)
        left = os.listdir(".")
    finally:
        os.chdir(here)
    return out, again, left


def test_the_tiny_cross_check_holds_every_check_and_is_deterministic(tiny_run):
    out, again, left = tiny_run
    assert d3.failed(out) == [] and out["checks"]["d3rlpy_dataset_matches_export"] is True
    assert out == again                                       # seeded: the same numbers, to the last bit
    assert left == []
    assert set(out["algos"]) == set(TINY_SETTINGS.algos)
    from importlib.metadata import version
    assert version("d3rlpy") == d3.D3RLPY_VERSION                  # the release the extra pins
    for algo in out["algos"].values():
        assert set(algo["checkpoints"]) == {"4", "8"}
        for c in algo["checkpoints"].values():
            assert abs(sum(c["action_shares"]) - 1) < 1e-12 and math_finite(c["true_value"])


def math_finite(x: float) -> bool:
    return x == x and abs(x) != float("inf")


def test_the_seeds_streams_are_the_pipelines(tiny_run, tiny):
    """The cross-check's world and evaluation days are the pipeline's for the seed (same named streams)."""
    out, _, _ = tiny_run
    world, _, _ = tiny
    days = ex.draw_eval_days(world, Streams(5))
    assert out["eval_day_hashes"] == [ex.day_hash(d) for d in days]
    assert out["fixed_gain"] == ex.headroom(world, days, Streams(5))["fixed_gain"]


@pytest.mark.guards("d3rlpy_dataset_matches_export")
def test_a_d3rlpy_dataset_that_is_not_the_export_is_caught(tiny):
    pytest.importorskip("d3rlpy")
    _, _, export = tiny
    train = export.part(heldout=False)
    assert d3.d3rlpy_dataset_gap(d3.to_d3rlpy(train), train)["d3rlpy_dataset_matches_export"] is True
    k = int(export.meta["segments_per_day"])
    # rows in the pipeline's (day, segment, campaign) layout instead of episode order: d3rlpy would read the
    # next campaign's state as s'
    order = np.lexsort((train.campaign, train.segment, train.day))
    wrong = dataclasses.replace(train, **{name: v[order] for name, v in train.arrays().items()})
    report = d3.d3rlpy_dataset_gap(d3.to_d3rlpy(wrong), train)
    assert report["d3rlpy_dataset_matches_export"] is False and report["d3rlpy_transition_gap"] > 0
    late = dataclasses.replace(train, end_of_day=train.segment == k - 2)                # terminals a segment early
    report = d3.d3rlpy_dataset_gap(d3.to_d3rlpy(late), train)
    assert report["d3rlpy_dataset_matches_export"] is False and report["d3rlpy_mismatches"] > 0


@pytest.mark.guards("served_actions_are_d3rlpys")
def test_a_policy_that_is_not_the_learners_is_caught(tiny):
    """served_actions_are_d3rlpys: the evaluation days' actions recomputed with predict; a constant policy differs."""
    pytest.importorskip("d3rlpy")
    world, _, export = tiny
    train = export.part(heldout=False)
    algo = d3.make_algo("double_dqn", TINY_SETTINGS, world.cfg.gamma)
    algo.fit(d3.to_d3rlpy(train), n_steps=4, n_steps_per_epoch=4, show_progress=False, with_timestamp=False,
             logger_adapter=__import__("d3rlpy").logging.NoopAdapterFactory())
    days = ex.draw_eval_days(world, Streams(5))
    served = ex.simulate_truth(world, days, d3.greedy_policy(algo), torch.Generator().manual_seed(0), 1.0)["raw"]
    assert d3.served_action_mismatches(algo, served) == 0
    other = int(np.bincount(served["actions"].reshape(-1).numpy(), minlength=9).argmin())
    constant = ex.simulate_truth(world, days, ex.constant_policy(other), torch.Generator().manual_seed(0), 1.0)["raw"]
    assert d3.served_action_mismatches(algo, constant) > 0


def test_the_study_writes_the_json_and_figure_and_prints_its_cost(tmp_path, monkeypatch, capsys):
    """The rlbp-d3rlpy study end to end through the runner on two tiny seeds, into tmp_path (rendered/ is not
    touched); each seed's export is also saved, and reads back."""
    pytest.importorskip("d3rlpy")
    from litrepro import studyrunner

    real = d3.run_seed
    (tmp_path / "exports").mkdir()
    monkeypatch.setattr(d3, "run_seed", lambda seed, settings: real(seed, settings=TINY_SETTINGS, overrides=TINY,
                                                                    export_dir=tmp_path / "exports"))
    monkeypatch.setattr(d3, "D3Settings", lambda: TINY_SETTINGS)
    out = tmp_path / "out"
    assert studyrunner.run(studyrunner.get("rlbp-d3rlpy"), seeds=[5, 6], jobs=1, out=out,
                           state_root=tmp_path / "state", progress=False) == 0
    written = json.loads((out / "pinterest_rlbp" / "d3rlpy_crosscheck.json").read_text())
    assert written["seeds"] == [5, 6] and written["d3rlpy_version"] == d3.D3RLPY_VERSION
    d3.check_intervals(written["per_seed"], written["summary"])
    assert (out / "pinterest_rlbp" / "d3rlpy_crosscheck.png").stat().st_size > 1000
    assert sorted(p.name for p in (tmp_path / "exports").iterdir()) == ["seed-5.npz", "seed-6.npz"]
    assert len(d3.LoggedExport.load(tmp_path / "exports" / "seed-5.npz")) == written["per_seed"][0]["export_rows"]
    assert "CPU-s" in capsys.readouterr().err


# --- The committed study -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def data():
    if not d3.PATH.exists():
        pytest.fail(f"{d3.PATH} is missing: run `make rlbp-d3rlpy`")
    return json.loads(d3.PATH.read_text())


def test_the_crosscheck_records_its_settings_and_versions(data):
    """Its freshness (sources and settings) is tests/test_studies.py's, from the declaration."""
    assert data["provenance"]["parameters"] == {k: v for k, v in dataclasses.asdict(RLBPConfig()).items() if k != "seed"}
    assert data["settings"] == json.loads(json.dumps(dataclasses.asdict(d3.D3Settings())))
    assert data["d3rlpy_version"] == d3.D3RLPY_VERSION and data["format_version"] == d3.FORMAT_VERSION


def test_the_crosscheck_is_complete_checked_and_recomputes(data):
    settings = d3.D3Settings()
    assert data["n_seeds"] >= 20 and [r["seed"] for r in data["per_seed"]] == data["seeds"]
    assert not {r["seed"]: d3.failed(r) for r in data["per_seed"] if d3.failed(r)}
    d3.check_intervals(data["per_seed"], data["summary"])                     # every interval, by a plain loop
    assert d3.summarise(data["per_seed"], settings) == data["summary"]
    assert len(data["summary"]["rows"]) == len(settings.algos) * len(settings.checkpoints)
    assert 0 < data["wall_seconds"] < 30 * 60
    assert d3.PLOT.stat().st_size > 1000
    assert figcheck.outside_canvas(d3.plot(data)) == []
    lines = d3.findings(data)
    assert lines and all(isinstance(x, str) and x for x in lines) and lines[0].startswith("Our reconstruction")


def test_the_crosscheck_pairs_with_the_diagnosis_on_world_and_days(data):
    """Same seeds, the same fixed gain and best constant to the last bit, and the same evaluation days as
    diagnosis.json: so the d3rlpy rows pair by seed with every committed rlbp study."""
    from litrepro.rlbp import diagnosis

    other = json.loads(diagnosis.PATH.read_text())
    theirs = {r["seed"]: r for r in other["per_seed"]}
    assert set(data["seeds"]) <= set(theirs)
    for row in data["per_seed"]:
        ref = theirs[row["seed"]]
        assert row["eval_day_hashes"] == ref["eval_day_hashes"]
        assert row["fixed_gain"] == ref["arms"]["max_min"]["fixed_gain"]
        assert row["best_constant"] == ref["arms"]["max_min"]["best_constant"]
