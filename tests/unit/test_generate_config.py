"""Model configurations: the example files, validation, and the key kept out of every file."""

from __future__ import annotations

import json

import pytest
from support.chat_server import REPO

from kbstudy.generate.config import (
    NO_KEY_PLACEHOLDER,
    ModelConfigError,
    load_model_config,
    model_config_from_dict,
    resolve_api_key,
)

BASE = {"model": "m", "base_url": "http://localhost:8000/v1", "api_key_env": "K", "temperature": 0.5,
        "max_tokens": 100, "samples_per_problem": 1, "prompt_template": "kernelbench_v1", "backend": "triton",
        "concurrency": 2, "request_timeout_s": 30}


@pytest.mark.parametrize("name", ["vllm-local.yaml", "openai-hosted.yaml"])
def test_example_configurations_load(name):
    config = load_model_config(REPO / "params" / "models" / name)
    assert config.backend in ("triton", "cuda") and config.samples_per_problem >= 1
    assert "api_key" not in json.dumps(config.to_dict()).replace("api_key_env", "")


def test_vllm_example_points_at_local_server():
    config = load_model_config(REPO / "params" / "models" / "vllm-local.yaml")
    assert config.base_url == "http://localhost:8000/v1"
    assert resolve_api_key(config, environ={}) == NO_KEY_PLACEHOLDER


def test_name_defaults_to_file_stem_and_yaml_json_agree(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(BASE))
    import yaml

    (tmp_path / "a.yaml").write_text(yaml.safe_dump(BASE))
    a, b = load_model_config(tmp_path / "a.json"), load_model_config(tmp_path / "a.yaml")
    assert a.name == b.name == "a" and a.fingerprint == b.fingerprint


@pytest.mark.parametrize("change, message", [
    ({"api_key": "sk-123"}, "secret"),
    ({"temprature": 0.1}, "unknown field"),
    ({"backend": "cute"}, "backend"),
    ({"temperature": -1}, "temperature"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"samples_per_problem": 1.5}, "integer"),
    ({"concurrency": True}, "number"),
    ({"base_url": "localhost:8000"}, "http"),
    ({"api_key_env": "sk-live key"}, "environment variable"),
    ({"extra_body": {"api_key": "x"}}, "secret"),
])
def test_invalid_fields_are_rejected(change, message):
    with pytest.raises(ModelConfigError, match=message):
        model_config_from_dict({**BASE, **change}, default_name="x")


def test_missing_field_is_named():
    data = dict(BASE)
    del data["max_tokens"]
    with pytest.raises(ModelConfigError, match="max_tokens"):
        model_config_from_dict(data, default_name="x")


def test_key_comes_from_the_named_variable_only():
    config = model_config_from_dict(BASE, default_name="x")
    assert resolve_api_key(config, environ={"K": " sk-abc "}) == "sk-abc"
    with pytest.raises(ModelConfigError, match="K is not set"):
        resolve_api_key(config, environ={})


def test_fingerprint_covers_sampling_not_endpoint():
    config = model_config_from_dict(BASE, default_name="x")
    assert config.with_overrides(concurrency=9, base_url="http://other:1/v1").fingerprint == config.fingerprint
    assert config.with_overrides(temperature=0.0).fingerprint != config.fingerprint
    assert config.with_overrides(max_tokens=200).fingerprint != config.fingerprint
    with pytest.raises(ModelConfigError):
        config.with_overrides(concurrency=0)
