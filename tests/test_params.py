"""Parameter files, notebook parameters and their validation."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from litrepro import methods
from litrepro.params import ParameterError, as_dict, from_namespace, load_file, parse_override, validate
from litrepro.rlbp.config import RLBPConfig
from litrepro.waypoint.config import WaypointConfig


@pytest.mark.parametrize("name", sorted(methods.METHODS))
def test_yaml_notebook_and_config_defaults_agree(name):
    method = methods.get(name)
    cls = method.config_class()
    defaults = as_dict(cls())
    assert yaml.safe_load(method.parameters.read_text()) == defaults
    assert methods.notebook_defaults(method.notebook) == defaults


@pytest.mark.parametrize("name", sorted(methods.METHODS))
def test_every_knob_has_help(name):
    for f in dataclasses.fields(methods.get(name).config_class()):
        assert f.metadata["help"], f.name


def test_unknown_key_names_key_and_file(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("seed: 1\nlamda_cpc: 2.0\n")
    with pytest.raises(ParameterError, match=r"p\.yaml: unknown parameter 'lamda_cpc'"):
        load_file(RLBPConfig, path)


@pytest.mark.parametrize("values, pattern", [
    ({"n_campaigns": "many"}, "'n_campaigns' = 'many' has type str, expected int"),
    ({"n_campaigns": True}, "'n_campaigns' = True has type bool, expected int"),
    ({"n_campaigns": 1}, "'n_campaigns' = 1 is out of range: must be >= 2"),
    ({"top_k": 10}, "'top_k' = 10 is out of range: must be <= 9"),
    ({"critic_lr": 0.0}, "'critic_lr' = 0.0 is out of range: must be > 0.0"),
    ({"device": "tpu"}, "'device' = 'tpu' is not one of"),
    ({"gain_multipliers": [1.0, 2.0]}, "'gain_multipliers' must have 3 values"),
    ({"segments_per_day": 5}, "'segments_per_day' = 5 must divide 'steps_per_day' = 24"),
])
def test_bad_values_are_refused_with_the_key(values, pattern):
    with pytest.raises(ParameterError, match=pattern.replace("(", r"\(").replace(")", r"\)")):
        validate(RLBPConfig, values, "test")


def test_int_is_accepted_for_float_and_converted():
    assert validate(RLBPConfig, {"lambda_cpc": 2}, "t").lambda_cpc == 2.0
    assert isinstance(validate(RLBPConfig, {"lambda_cpc": 2}, "t").lambda_cpc, float)


def test_waypoint_cross_field_checks():
    with pytest.raises(ParameterError, match="waypoint_steps"):
        validate(WaypointConfig, {"waypoint_steps": [0, 8, 4]}, "t")
    with pytest.raises(ParameterError, match="train_end"):
        validate(WaypointConfig, {"train_end": 190000}, "t")


def test_malformed_yaml_and_non_mapping(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: [1,\n")
    with pytest.raises(ParameterError, match="bad.yaml: not valid YAML") as err:
        load_file(RLBPConfig, bad)
    assert "\n" not in str(err.value) and "line 2" in str(err.value)      # one line, with where
    bad.write_text("seed: 1\n  gamma: : 2\n\tx: 3\n")
    with pytest.raises(ParameterError, match="bad.yaml: not valid YAML") as err:
        load_file(RLBPConfig, bad)
    assert "\n" not in str(err.value)
    bad.write_text("seed: " + "9" * 5000 + "\n")
    with pytest.raises(ParameterError, match="bad.yaml: a value is not usable"):
        load_file(RLBPConfig, bad)
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ParameterError, match="bad.yaml: expected a mapping"):
        load_file(RLBPConfig, bad)


def test_yaml_is_loaded_safely(tmp_path):
    evil = tmp_path / "evil.yaml"
    evil.write_text("seed: !!python/object/apply:os.system ['true']\n")
    with pytest.raises(ParameterError, match="not valid YAML"):
        load_file(RLBPConfig, evil)


def test_from_namespace_refuses_a_name_papermill_would_only_warn_about():
    namespace = {**as_dict(RLBPConfig()), "lambda": 2.0, "In": [], "_": None, "pd": dataclasses}
    with pytest.raises(ParameterError, match="unknown parameter 'lambda'"):
        from_namespace(RLBPConfig, namespace)
    del namespace["lambda"]
    assert from_namespace(RLBPConfig, namespace) == RLBPConfig()


@pytest.mark.parametrize("text, expected", [
    ("lambda_cpc=0.5", ("lambda_cpc", [0.5])),
    ("lambda_cpc=0.5,1,2", ("lambda_cpc", [0.5, 1, 2])),
    ("gate=final_only", ("gate", ["final_only"])),
    ("gain_multipliers=[0.5, 1.0, 3.0]", ("gain_multipliers", [[0.5, 1.0, 3.0]])),
])
def test_parse_override(text, expected):
    assert parse_override(text) == expected


@pytest.mark.parametrize("text", ["lambda_cpc", "=1", "lambda_cpc=", "lambda_cpc=1,,2"])
def test_parse_override_refuses_malformed(text):
    with pytest.raises(ParameterError):
        parse_override(text)


@pytest.mark.parametrize("text", ["gamma=.nan", "gamma=.inf", "gamma=-.inf", "critic_lr=.nan"])
def test_nan_and_inf_are_refused_for_float_knobs(text):
    key, (value,) = parse_override(text)
    with pytest.raises(ParameterError, match=f"'{key}' = .* is not a finite number"):
        validate(RLBPConfig, {key: value}, "--set")


@pytest.mark.parametrize("cls", [RLBPConfig, WaypointConfig])
def test_seed_is_bounded_to_32_bits(cls):
    assert validate(cls, {"seed": 2**32 - 1}, "test").seed == 2**32 - 1
    for bad in (2**32, 2**64, -1):
        with pytest.raises(ParameterError, match="'seed'"):
            validate(cls, {"seed": bad}, "test")


def test_max_corpus_bytes_has_an_upper_bound():
    with pytest.raises(ParameterError, match="'max_corpus_bytes' = 1000000000000 is out of range"):
        validate(WaypointConfig, {"max_corpus_bytes": 10**12}, "test")


def test_fetch_corpus_reads_at_most_its_limit(tmp_path):
    from litrepro.errors import CorpusError
    from litrepro.waypoint import corpus

    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 5000)
    dest = tmp_path / "dest.txt"
    with pytest.raises(CorpusError, match="larger than 4096 bytes"):
        corpus.fetch_corpus(dest, url=big.as_uri(), max_bytes=4096, expected_sha256="0" * 64)
    assert not dest.exists()
