"""The generation store: every reply kept, one JSON line per (problem, sample), resumable, exportable as candidates.

Store layout (one folder per model configuration and prompt template, e.g. ``outputs/generations/qwen-triton``)::

    model_config.json   the model configuration (no key), its fingerprint and the template's SHA-256
    generations.jsonl   one GenerationRecord a line, appended atomically (kbstudy.records.store.append_jsonl)
    candidates.jsonl    the candidates with usable code, in the format kbstudy.harness.candidates.load_candidates reads

A :class:`GenerationRecord` holds the prompt (chat messages), the request's settings, the reply verbatim (the
message text and the whole response body), the code taken from it, token usage, latency, tries and the template's
SHA-256. Its ``status`` is

* ``"ok"``: the reply holds a fenced block defining ``ModelNew``; the block is the candidate's source;
* ``"generation_failure"``: a reply came but holds no usable code (or is malformed); kept, never asked again;
* ``"request_error"``: no reply after every retry, or a rejected request; recorded, and asked again by a rerun.

Resume: a (problem, sample) whose latest record is ``ok`` or ``generation_failure`` is never requested again. The
generation id hashes the model configuration's request settings, the template's SHA-256, the problem's SHA-256 and
the sample id; a folder is tied to one configuration's request settings and one template version (a mismatch raises
:class:`GenerationStoreError`), so a set never mixes replies sampled differently.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, Iterable

from kbstudy.generate.config import ModelConfig
from kbstudy.harness.candidates import Candidate, make_candidate, write_candidates_jsonl
from kbstudy.harness.problems import Problem, sha256_text
from kbstudy.records.store import append_jsonl, iter_jsonl

GENERATION_SCHEMA_VERSION = 1
#: Record statuses; the first two are final (never requested again), the third is retried by a rerun.
STATUSES = ("ok", "generation_failure", "request_error")
FINAL_STATUSES = ("ok", "generation_failure")
GENERATIONS_FILE = "generations.jsonl"
CANDIDATES_FILE = "candidates.jsonl"
CONFIG_FILE = "model_config.json"


class GenerationStoreError(ValueError):
    """A store folder that belongs to another model configuration or template, or an unreadable generation file."""


def generation_id(config: ModelConfig, template_sha256: str, problem_sha256: str, sample_id: int) -> str:
    """The identity of one (problem, sample) request: first 24 hex digits of the SHA-256 of the configuration's
    fingerprint, the template's SHA-256, the problem's SHA-256 and the sample id, joined by ``|``."""
    raw = "|".join([config.fingerprint, template_sha256, problem_sha256, str(int(sample_id))])
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


@dataclasses.dataclass
class GenerationRecord:
    """One request for one (problem, sample) and what came back. Times in s; ``None`` where nothing came back."""

    generation_id: str
    status: str
    failure_reason: str | None
    # the model configuration
    model_config: str
    model: str
    target_backend: str
    # the problem and sample
    level: int
    problem_id: int
    problem_name: str
    problem_version: str
    problem_sha256: str
    sample_id: int
    # the prompt
    prompt_template: str
    template_sha256: str
    prompt_sha256: str
    messages: list
    request: dict
    # the reply, verbatim, and what was taken from it
    reply: str | None = None
    response: Any = None
    response_id: str | None = None
    response_model: str | None = None
    finish_reason: str | None = None
    code: str | None = None
    code_sha256: str | None = None
    usage: dict | None = None
    # cost
    latency_s: float | None = None
    total_s: float | None = None
    attempts: int = 0
    retry_errors: list = dataclasses.field(default_factory=list)
    # provenance
    model_configuration: dict = dataclasses.field(default_factory=dict)
    schema_version: int = GENERATION_SCHEMA_VERSION
    created_utc: str | None = None
    git_commit: str | None = None
    kbstudy_version: str | None = None
    openai_version: str | None = None

    def to_json(self) -> str:
        """One line of JSON (non-ASCII kept as is)."""
        return json.dumps(dataclasses.asdict(self), ensure_ascii=False)

    @classmethod
    def from_dict(cls, row: dict) -> "GenerationRecord":
        """Rebuild a record from a stored line; fields unknown to this schema version are ignored.

        Raises ``TypeError`` if a required field is missing.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in row.items() if k in names})


def candidate_from_record(record: GenerationRecord, code: str, *, origin: str = "",
                          samples_per_problem: int | None = None) -> Candidate:
    """The candidate of an ``ok`` generation: ``code`` as its source, the configuration's name as ``model_config``,
    the sample index as ``sample_id``, the backend detected from the code (the target backend is in ``metadata``
    with the template's and prompt's SHA-256, the generation id, finish reason, usage and latency)."""
    metadata = {
        "generation_id": record.generation_id,
        "generation_status": record.status,
        "prompt_template": record.prompt_template,
        "template_sha256": record.template_sha256,
        "prompt_sha256": record.prompt_sha256,
        "problem_sha256": record.problem_sha256,
        "target_backend": record.target_backend,
        "model": record.model,
        "response_model": record.response_model,
        "finish_reason": record.finish_reason,
        "usage": record.usage,
        "latency_s": record.latency_s,
        "attempts": record.attempts,
        "temperature": record.request.get("temperature"),
    }
    if samples_per_problem is not None:
        metadata["samples_per_problem"] = samples_per_problem
    return make_candidate(code, level=record.level, problem_id=record.problem_id, model_config=record.model_config,
                          sample_id=record.sample_id, origin=origin or record.generation_id, metadata=metadata)


class GenerationStore:
    """A folder of generations for one model configuration (see the module docstring).

    Args:
        folder: the store's folder (created on :meth:`bind`).
    """

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.generations_path = self.folder / GENERATIONS_FILE
        self.candidates_path = self.folder / CANDIDATES_FILE
        self.config_path = self.folder / CONFIG_FILE

    def bind(self, config: ModelConfig, template_sha256: str) -> None:
        """Tie the folder to ``config``'s request settings and the template version, writing ``model_config.json``
        the first time (and refreshing its non-identity fields, such as concurrency, later).

        Raises:
            GenerationStoreError: the folder holds generations of other request settings or another template.
        """
        header = {"fingerprint": config.fingerprint, "template_sha256": template_sha256,
                  "model_configuration": config.to_dict()}
        if self.config_path.exists():
            try:
                old = json.loads(self.config_path.read_text())
            except json.JSONDecodeError as exc:
                raise GenerationStoreError(f"{self.config_path}: not valid JSON ({exc.msg})") from exc
            if old.get("fingerprint") != config.fingerprint:
                old_settings = {k: (old.get("model_configuration") or {}).get(k) for k in config.request_settings()}
                changed = sorted(k for k, v in config.request_settings().items() if old_settings.get(k) != v)
                raise GenerationStoreError(
                    f"{self.folder} holds generations of other request settings (changed: {changed}); "
                    f"write to a new folder, or restore the configuration")
            if old.get("template_sha256") != template_sha256:
                raise GenerationStoreError(
                    f"{self.folder} holds generations from another version of prompt template "
                    f"{config.prompt_template!r} (SHA-256 {old.get('template_sha256')}, now {template_sha256}); "
                    f"released templates must not change: add a new template folder instead")
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.config_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(header, indent=2) + "\n")
        tmp.replace(self.config_path)

    def header(self) -> dict:
        """The content of ``model_config.json`` (``{}`` if absent)."""
        return json.loads(self.config_path.read_text()) if self.config_path.exists() else {}

    def append(self, record: GenerationRecord) -> None:
        """Append one record atomically. Raises ``ValueError`` for an unknown status."""
        if record.status not in STATUSES:
            raise ValueError(f"unknown generation status {record.status!r} (expected one of {STATUSES})")
        append_jsonl(self.generations_path, record.to_json())

    def records(self) -> list[GenerationRecord]:
        """The latest record of each generation id, in order of first appearance.

        Raises :class:`GenerationStoreError` for a line that is not a generation record.
        """
        latest: dict[str, GenerationRecord] = {}
        for i, row in enumerate(iter_jsonl(self.generations_path)):
            try:
                record = GenerationRecord.from_dict(row)
            except TypeError as exc:
                raise GenerationStoreError(f"{self.generations_path}: record {i} is not a generation ({exc})") from exc
            latest[record.generation_id] = record
        return list(latest.values())

    def done_ids(self) -> set[str]:
        """Generation ids whose latest record is final (``ok`` or ``generation_failure``)."""
        return {r.generation_id for r in self.records() if r.status in FINAL_STATUSES}

    def candidates(self) -> list[Candidate]:
        """The candidates of the ``ok`` records, sorted by (level, problem_id, sample_id)."""
        samples = (self.header().get("model_configuration") or {}).get("samples_per_problem")
        out = [candidate_from_record(r, r.code, origin=f"{self.generations_path}#{r.generation_id}",
                                     samples_per_problem=samples)
               for r in self.records() if r.status == "ok" and r.code]
        return sorted(out, key=lambda c: (c.level, c.problem_id, c.sample_id))

    def export_candidates(self, path: str | Path | None = None) -> tuple[list[Candidate], Path | None]:
        """Write :meth:`candidates` as JSONL (default ``candidates.jsonl`` in the folder); returns them and the
        path, or ``None`` for the path when there is no candidate (no file is written then)."""
        candidates = self.candidates()
        if not candidates:
            return candidates, None
        return candidates, write_candidates_jsonl(candidates, path or self.candidates_path)


def base_record(*, config: ModelConfig, problem: Problem, sample_id: int, prompt, request: dict,
                gen_id: str, provenance: dict) -> dict[str, Any]:
    """The fields a :class:`GenerationRecord` takes from its request, before any reply (``prompt`` is a
    :class:`kbstudy.generate.prompts.Prompt`)."""
    return dict(generation_id=gen_id, model_config=config.name, model=config.model, target_backend=config.backend,
                level=problem.level, problem_id=problem.problem_id, problem_name=problem.name,
                problem_version=problem.version, problem_sha256=problem.sha256, sample_id=int(sample_id),
                prompt_template=prompt.template, template_sha256=prompt.template_sha256, prompt_sha256=prompt.sha256,
                messages=prompt.messages, request=request, model_configuration=config.to_dict(), **provenance)


def code_sha256(code: str | None) -> str | None:
    """SHA-256 of extracted code (the candidate's ``sha256``), or ``None``."""
    return None if code is None else sha256_text(code)


def summarize(records: Iterable[GenerationRecord]) -> dict[str, int]:
    """Counts by status, and token totals (``prompt_tokens``, ``completion_tokens``) over the records."""
    out = {s: 0 for s in STATUSES}
    out.update(prompt_tokens=0, completion_tokens=0)
    for r in records:
        out[r.status] += 1
        usage = r.usage or {}
        for k in ("prompt_tokens", "completion_tokens"):
            if isinstance(usage.get(k), int):
                out[k] += usage[k]
    return out
