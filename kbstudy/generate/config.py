"""Model configurations: which model, at which endpoint, sampled how, prompted with which template, for which backend.

A model configuration is a YAML or JSON parameter file (``params/models/*.yaml``)::

    name: qwen2.5-coder-32b-vllm        # becomes every candidate's model_config (default: the file's stem)
    model: Qwen/Qwen2.5-Coder-32B-Instruct
    base_url: http://localhost:8000/v1  # any OpenAI-compatible chat-completions endpoint
    api_key_env: VLLM_API_KEY           # the NAME of the environment variable holding the key; null: no key needed
    temperature: 0.7
    max_tokens: 8192
    samples_per_problem: 4
    prompt_template: kernelbench_v1     # a folder under kbstudy/generate/templates/
    backend: triton                     # triton | cuda
    concurrency: 8                      # requests in flight at most
    request_timeout_s: 600

Optional: ``top_p``, ``seed`` (sample ``s`` is requested with ``seed + s``), ``max_retries`` (default 6),
``backoff_initial_s`` (default 1.0), ``backoff_max_s`` (default 60.0), ``extra_body`` (a mapping sent as extra
request fields, e.g. vLLM's ``top_k``).

The API key itself is never part of a model configuration: a file holding ``api_key`` (or any key-like field) is
rejected, and the key is read from the environment only when a client is made (:func:`resolve_api_key`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import yaml

#: Target backends a model may be asked to write for (a subset of :data:`kbstudy.harness.candidates.BACKENDS`).
TARGET_BACKENDS = ("triton", "cuda")
#: Sent as the key to endpoints that need none (vLLM, SGLang and Ollama ignore it; the openai package needs one).
NO_KEY_PLACEHOLDER = "EMPTY"
#: Fields that would hold a secret; refused so that a key never ends up in a committed parameter file.
_SECRET_FIELDS = re.compile(r"^(api[_-]?key|key|token|secret|password|authorization)$", re.IGNORECASE)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ModelConfigError(ValueError):
    """A model-configuration file or value that is invalid (the message names the file and the field)."""


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """One model configuration (see the module docstring for the file format).

    Attributes:
        name: the configuration's name; every generated candidate's ``model_config``.
        model: the model name the endpoint serves (``model`` in the request).
        base_url: the endpoint's base URL, up to and including ``/v1``.
        api_key_env: name of the environment variable holding the API key; ``None`` for endpoints without keys.
        temperature: sampling temperature (>= 0).
        max_tokens: the most completion tokens per reply (> 0).
        samples_per_problem: replies requested per problem (> 0); sample ids are ``0 .. samples_per_problem - 1``.
        prompt_template: the prompt template's name (a folder in ``kbstudy/generate/templates``).
        backend: the backend the kernel must be written for, ``"triton"`` or ``"cuda"``.
        concurrency: the most requests in flight at once (> 0).
        request_timeout_s: seconds one HTTP request may take before it counts as failed (and is retried).
        top_p: nucleus-sampling parameter, or ``None`` to leave the endpoint's default.
        seed: base seed, or ``None``; sample ``s`` is requested with ``seed + s``.
        max_retries: retries of one request after a rate limit (429), server error (5xx), timeout or lost
            connection; the request is tried at most ``max_retries + 1`` times.
        backoff_initial_s: the first retry's delay (s); it doubles with each retry, up to ``backoff_max_s``.
        backoff_max_s: the longest delay between two tries (s); also caps a server's ``Retry-After``.
        extra_body: extra request fields, sent as given (endpoint-specific settings).
        source: the file the configuration was read from (not part of its identity).
    """

    name: str
    model: str
    base_url: str
    api_key_env: str | None
    temperature: float
    max_tokens: int
    samples_per_problem: int
    prompt_template: str
    backend: str
    concurrency: int
    request_timeout_s: float
    top_p: float | None = None
    seed: int | None = None
    max_retries: int = 6
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 60.0
    extra_body: dict = dataclasses.field(default_factory=dict, hash=False)
    source: str = dataclasses.field(default="", compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The configuration as a JSON-ready dict (what every generation record carries). It holds no key."""
        out = dataclasses.asdict(self)
        out.pop("source")
        return out

    def request_settings(self) -> dict[str, Any]:
        """The fields that decide what a reply can be: model, sampling settings, template and backend.

        Two configurations with equal request settings sample from the same distribution, so their generations may
        share a store; endpoint, concurrency, timeouts and retries may differ freely.
        """
        return {k: getattr(self, k) for k in ("name", "model", "temperature", "top_p", "max_tokens", "seed",
                                               "prompt_template", "backend", "extra_body")}

    @property
    def fingerprint(self) -> str:
        """SHA-256 (first 16 hex digits) of :meth:`request_settings`, canonical JSON."""
        raw = json.dumps(self.request_settings(), sort_keys=True)
        return hashlib.sha256(raw.encode()).hexdigest()[:16]

    def with_overrides(self, **changes: Any) -> "ModelConfig":
        """A copy with some fields replaced (``None`` values are ignored), validated again.

        Raises :class:`ModelConfigError` for an invalid value.
        """
        changes = {k: v for k, v in changes.items() if v is not None}
        data = {**self.to_dict(), **changes}
        return model_config_from_dict(data, source=self.source)


_REQUIRED = ("model", "base_url", "temperature", "max_tokens", "samples_per_problem", "prompt_template", "backend",
             "concurrency", "request_timeout_s")
_FIELDS = {f.name for f in dataclasses.fields(ModelConfig)} - {"source"}


def _number(data: dict, key: str, where: str, kind: type, *, minimum: float | None = None,
            exclusive: bool = False, maximum: float | None = None):
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ModelConfigError(f"{where}: {key} must be a number, got {value!r}")
    if kind is int and (not float(value).is_integer()):
        raise ModelConfigError(f"{where}: {key} must be an integer, got {value!r}")
    value = kind(value)
    if not math.isfinite(value):
        raise ModelConfigError(f"{where}: {key} must be finite, got {value!r}")
    if minimum is not None and (value <= minimum if exclusive else value < minimum):
        raise ModelConfigError(f"{where}: {key} must be {'>' if exclusive else '>='} {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ModelConfigError(f"{where}: {key} must be <= {maximum}, got {value!r}")
    return value


def model_config_from_dict(data: dict, *, source: str = "", default_name: str | None = None) -> ModelConfig:
    """Validate a mapping and build a :class:`ModelConfig`.

    Args:
        data: the parsed parameter file.
        source: where it came from (used in error messages).
        default_name: the name when ``data`` has none (the file's stem).

    Raises:
        ModelConfigError: a missing, unknown, secret-looking or invalid field.
    """
    where = source or "model configuration"
    if not isinstance(data, dict):
        raise ModelConfigError(f"{where}: expected a mapping of fields, got {type(data).__name__}")
    secret = sorted(k for k in data if _SECRET_FIELDS.match(str(k)))
    if secret:
        raise ModelConfigError(f"{where}: field {secret[0]!r} would put a secret in the file; name the environment "
                               f"variable that holds the key in api_key_env instead")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise ModelConfigError(f"{where}: unknown field(s) {unknown} (known: {sorted(_FIELDS)})")
    missing = [k for k in _REQUIRED if data.get(k) is None]
    if missing:
        raise ModelConfigError(f"{where}: missing required field(s) {missing}")
    name = data.get("name") or default_name
    if not name or not isinstance(name, str):
        raise ModelConfigError(f"{where}: needs a name (the field 'name', or a file stem)")
    for key in ("model", "base_url", "prompt_template", "backend"):
        if not isinstance(data[key], str) or not data[key].strip():
            raise ModelConfigError(f"{where}: {key} must be a non-empty string, got {data[key]!r}")
    if not re.match(r"^https?://", data["base_url"]):
        raise ModelConfigError(f"{where}: base_url must start with http:// or https://, got {data['base_url']!r}")
    if data["backend"] not in TARGET_BACKENDS:
        raise ModelConfigError(f"{where}: backend must be one of {TARGET_BACKENDS}, got {data['backend']!r}")
    api_key_env = data.get("api_key_env")
    if api_key_env is not None and (not isinstance(api_key_env, str) or not _ENV_NAME.match(api_key_env)):
        raise ModelConfigError(f"{where}: api_key_env must be an environment variable's name (letters, digits, _), "
                               f"got {api_key_env!r}")
    extra_body = data.get("extra_body") or {}
    if not isinstance(extra_body, dict):
        raise ModelConfigError(f"{where}: extra_body must be a mapping, got {extra_body!r}")
    secret_extra = sorted(k for k in extra_body if _SECRET_FIELDS.match(str(k)))
    if secret_extra:
        raise ModelConfigError(f"{where}: extra_body field {secret_extra[0]!r} would put a secret in the file")
    top_p = data.get("top_p")
    seed = data.get("seed")
    return ModelConfig(
        name=name,
        model=data["model"],
        base_url=data["base_url"].rstrip("/"),
        api_key_env=api_key_env,
        temperature=_number(data, "temperature", where, float, minimum=0.0),
        max_tokens=_number(data, "max_tokens", where, int, minimum=0, exclusive=True),
        samples_per_problem=_number(data, "samples_per_problem", where, int, minimum=0, exclusive=True),
        prompt_template=data["prompt_template"],
        backend=data["backend"],
        concurrency=_number(data, "concurrency", where, int, minimum=0, exclusive=True),
        request_timeout_s=_number(data, "request_timeout_s", where, float, minimum=0, exclusive=True),
        top_p=None if top_p is None else _number(data, "top_p", where, float, minimum=0, exclusive=True, maximum=1),
        seed=None if seed is None else _number(data, "seed", where, int),
        max_retries=_number({"max_retries": data.get("max_retries", 6)}, "max_retries", where, int, minimum=0),
        backoff_initial_s=_number({"backoff_initial_s": data.get("backoff_initial_s", 1.0)}, "backoff_initial_s",
                                  where, float, minimum=0),
        backoff_max_s=_number({"backoff_max_s": data.get("backoff_max_s", 60.0)}, "backoff_max_s", where, float,
                              minimum=0),
        extra_body=dict(extra_body),
        source=source,
    )


def load_model_config(path: str | Path) -> ModelConfig:
    """Read a model configuration from a ``.yaml``/``.yml`` or ``.json`` file; its name defaults to the file's stem.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ModelConfigError: unparseable file, or an invalid field (see :func:`model_config_from_dict`).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"model configuration not found: {path}")
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ModelConfigError(f"{path}: not valid YAML ({exc})") from exc
    elif path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ModelConfigError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from exc
    else:
        raise ModelConfigError(f"{path}: expected a .yaml, .yml or .json file")
    return model_config_from_dict(data, source=str(path), default_name=path.stem)


def resolve_api_key(config: ModelConfig, environ: dict[str, str] | None = None) -> str:
    """The API key for ``config``, read from the environment variable it names.

    Returns :data:`NO_KEY_PLACEHOLDER` when ``config.api_key_env`` is ``None`` (an endpoint without keys).

    Raises:
        ModelConfigError: the named variable is unset or empty (the message names the variable, never a value).
    """
    if config.api_key_env is None:
        return NO_KEY_PLACEHOLDER
    env = os.environ if environ is None else environ
    key = env.get(config.api_key_env, "")
    if not key.strip():
        raise ModelConfigError(f"{config.source or config.name}: the API key variable {config.api_key_env} is not set; "
                               f"export it (e.g. `export {config.api_key_env}=...`) before generating")
    return key.strip()
