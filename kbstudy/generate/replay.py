"""Replay: rebuild a generation set's candidates from its stored replies, with no network.

Anyone holding a released ``generations.jsonl`` can rerun the study: :func:`replay_generations` reads every record,
takes the code out of each verbatim reply again (:func:`kbstudy.generate.prompts.extract_code`, the same rule the run
used) and writes the candidates in the format :func:`kbstudy.harness.candidates.load_candidates` reads. Nothing is imported
that could reach an endpoint. Given the problems, it also checks that each record's problem is the one loaded (same
SHA-256) and that the template of this kbstudy version renders the very prompt that was sent.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

from kbstudy.generate.prompts import PromptTemplateError, extract_code, load_template, render_prompt
from kbstudy.generate.store import GENERATIONS_FILE, GenerationRecord, GenerationStore, candidate_from_record
from kbstudy.harness.candidates import Candidate, write_candidates_jsonl
from kbstudy.harness.problems import Problem


@dataclasses.dataclass
class ReplayResult:
    """What a replay rebuilt and found.

    Attributes:
        candidates: the rebuilt candidates, sorted by (model_config, level, problem_id, sample_id).
        candidates_path: where they were written, or ``None``.
        records: generation records read (latest per generation id).
        generation_failures: records with a reply but no usable code.
        request_errors: records without a reply (nothing to rebuild).
        code_mismatches: generation ids whose re-extracted code differs from the stored ``code`` (the extraction
            rule changed since the run; the re-extracted code is used).
        problem_mismatches: generation ids whose problem is absent from, or differs from, the given problems.
        prompt_mismatches: generation ids whose prompt this kbstudy version would render differently.
    """

    candidates: list[Candidate]
    candidates_path: Path | None
    records: int
    generation_failures: int
    request_errors: int
    code_mismatches: list[str]
    problem_mismatches: list[str]
    prompt_mismatches: list[str]


def _generations_file(source: str | Path) -> Path:
    source = Path(source)
    path = source / GENERATIONS_FILE if source.is_dir() else source
    if not path.is_file():
        raise FileNotFoundError(f"no generation set at {source} (expected a folder holding {GENERATIONS_FILE}, "
                                f"or the file itself)")
    return path


def replay_generations(source: str | Path, out: str | Path | None = None, *,
                       problems: Sequence[Problem] | None = None) -> ReplayResult:
    """Rebuild the candidates of a stored generation set.

    Args:
        source: a store folder or its ``generations.jsonl`` (any name).
        out: where to write the candidates' JSONL; ``None`` writes nothing.
        problems: if given, check each record's problem and prompt against them (see :class:`ReplayResult`).

    Returns a :class:`ReplayResult`.

    Raises:
        FileNotFoundError: ``source`` holds no generation file.
        GenerationStoreError: a line is not a generation record.
    """
    path = _generations_file(source)
    store = GenerationStore(path.parent)
    store.generations_path = path
    records: list[GenerationRecord] = store.records()
    samples = (store.header().get("model_configuration") or {}).get("samples_per_problem")
    by_problem = {(p.level, p.problem_id): p for p in problems} if problems is not None else None
    templates: dict[tuple[str, str], object] = {}
    candidates, code_mismatches, problem_mismatches, prompt_mismatches = [], [], [], []
    failures = errors = 0
    for record in records:
        if by_problem is not None:
            problem = by_problem.get((record.level, record.problem_id))
            if problem is None or problem.sha256 != record.problem_sha256:
                problem_mismatches.append(record.generation_id)
            else:
                key = (record.prompt_template, record.target_backend)
                if key not in templates:
                    try:
                        templates[key] = load_template(*key)
                    except PromptTemplateError:
                        templates[key] = None
                template = templates[key]
                if template is None or render_prompt(template, problem).sha256 != record.prompt_sha256:
                    prompt_mismatches.append(record.generation_id)
        if record.status == "request_error":
            errors += 1
            continue
        malformed = record.status == "generation_failure" and (record.failure_reason or "").startswith("malformed")
        code = None if malformed else extract_code(record.reply).code
        if code != record.code:
            code_mismatches.append(record.generation_id)
        if code is None:
            failures += 1
            continue
        rebuilt = dataclasses.replace(record, status="ok")
        candidates.append(candidate_from_record(rebuilt, code, origin=f"{path}#{record.generation_id}",
                                                samples_per_problem=samples))
    candidates.sort(key=lambda c: (c.model_config, c.level, c.problem_id, c.sample_id))
    written = write_candidates_jsonl(candidates, out) if out is not None and candidates else None
    return ReplayResult(candidates=candidates, candidates_path=written, records=len(records),
                        generation_failures=failures, request_errors=errors, code_mismatches=code_mismatches,
                        problem_mismatches=problem_mismatches, prompt_mismatches=prompt_mismatches)

