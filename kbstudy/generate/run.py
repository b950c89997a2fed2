"""The generation run: ask a model configuration for ``samples_per_problem`` candidates per problem, keep every reply.

:func:`generate_candidates` renders each problem's prompt, skips the (problem, sample) pairs the store already holds a
final record for, sends the rest with at most ``concurrency`` requests in flight, appends one
:class:`~kbstudy.generate.store.GenerationRecord` per reply as soon as it arrives, and finally writes the store's
``candidates.jsonl``. An interrupted run loses nothing it has received; rerunning it asks only for what is missing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as _dt
import time
from pathlib import Path
from typing import Sequence

from tqdm.auto import tqdm

import kbstudy
from kbstudy.generate.client import ChatClient, Completion, RequestFailedError
from kbstudy.generate.config import ModelConfig, resolve_api_key
from kbstudy.generate.prompts import Prompt, extract_code, load_template, render_prompt
from kbstudy.generate.store import (
    FINAL_STATUSES,
    GenerationRecord,
    GenerationStore,
    base_record,
    code_sha256,
    generation_id,
    summarize,
)
from kbstudy.harness.problems import Problem
from kbstudy.records.provenance import git_commit


@dataclasses.dataclass
class GenerationSummary:
    """What a run did.

    Attributes:
        store: the store's folder.
        candidates_path: the written ``candidates.jsonl``, or ``None`` if the store holds no usable code yet.
        requested: (problem, sample) pairs this run asked for.
        skipped: pairs skipped because the store already held a final record.
        ok, generation_failures, request_errors: this run's outcomes by status.
        prompt_tokens, completion_tokens: this run's token usage, as the endpoint reported it.
        candidates: candidates in the store after the run (all runs).
        elapsed_s: the run's wall time in s.
        last_request_error: the ``failure_reason`` of this run's last request error (``None`` without one), so a run
            whose every request failed says why (a connection refused, a timeout) without opening the store.
    """

    store: Path
    candidates_path: Path | None
    requested: int
    skipped: int
    ok: int
    generation_failures: int
    request_errors: int
    prompt_tokens: int
    completion_tokens: int
    candidates: int
    elapsed_s: float
    last_request_error: str | None = None


def _provenance() -> dict:
    import openai  # the generate extra: present wherever a generation runs (ChatClient needs it)

    return {"git_commit": git_commit(), "kbstudy_version": kbstudy.__version__, "openai_version": openai.__version__}


def _record(base: dict, completion: Completion | None, error: RequestFailedError | None) -> GenerationRecord:
    created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    if error is not None:
        return GenerationRecord(**base, status="request_error", failure_reason=str(error), attempts=error.attempts,
                                retry_errors=list(error.errors), created_utc=created)
    assert completion is not None
    if completion.malformed:
        status, reason, code = "generation_failure", f"malformed response: {completion.malformed}", None
    else:
        extraction = extract_code(completion.reply)
        code = extraction.code
        status = "ok" if code is not None else "generation_failure"
        reason = None if code is not None else extraction.failure
        if reason and completion.finish_reason == "length":
            reason += " (finish_reason=length: the reply hit max_tokens)"
    return GenerationRecord(**base, status=status, failure_reason=reason, reply=completion.reply,
                            response=completion.response, response_id=completion.response_id,
                            response_model=completion.response_model, finish_reason=completion.finish_reason,
                            code=code, code_sha256=code_sha256(code), usage=completion.usage,
                            latency_s=completion.latency_s, total_s=completion.total_s, attempts=completion.attempts,
                            retry_errors=list(completion.retry_errors), created_utc=created)


async def _run(pending: list[tuple[Problem, int, Prompt, str]], config: ModelConfig, store: GenerationStore,
               api_key: str, progress: bool) -> list[GenerationRecord]:
    semaphore = asyncio.Semaphore(config.concurrency)
    provenance = _provenance()
    done: list[GenerationRecord] = []
    bar = tqdm(total=len(pending), desc=f"generate {config.name}", unit="reply", disable=not progress)

    async with ChatClient(config, api_key) as client:

        async def one(problem: Problem, sample_id: int, prompt: Prompt, gen_id: str) -> GenerationRecord:
            seed = None if config.seed is None else config.seed + sample_id
            base = base_record(config=config, problem=problem, sample_id=sample_id, prompt=prompt,
                               request={**client.request_body(prompt.messages, seed), "extra_body": config.extra_body},
                               gen_id=gen_id, provenance=provenance)
            async with semaphore:
                try:
                    completion, error = await client.complete(prompt.messages, seed=seed), None
                except RequestFailedError as exc:
                    completion, error = None, exc
            record = _record(base, completion, error)
            store.append(record)  # on the event loop's thread: appends never interleave
            return record

        tasks = [asyncio.create_task(one(*item)) for item in pending]
        try:
            for next_done in asyncio.as_completed(tasks):
                record = await next_done
                done.append(record)
                counts = summarize(done)
                bar.set_postfix(ok=counts["ok"], failed=counts["generation_failure"],
                                errors=counts["request_error"], refresh=False)
                bar.update(1)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            bar.close()
    return done


def generate_candidates(problems: Sequence[Problem], config: ModelConfig, out: str | Path, *,
                        progress: bool = True, api_key: str | None = None) -> GenerationSummary:
    """Generate ``config.samples_per_problem`` candidates for each problem into the store folder ``out``.

    Args:
        problems: the problems to ask for (e.g. from :func:`kbstudy.harness.problems.load_problems`).
        config: the model configuration.
        out: the store's folder (``generations.jsonl``, ``candidates.jsonl``, ``model_config.json``).
        progress: show a progress bar (tqdm, on stderr).
        api_key: the key to send; default: read from the variable ``config.api_key_env`` names.

    Returns a :class:`GenerationSummary`.

    Raises:
        kbstudy.generate.config.ModelConfigError: the key's environment variable is unset.
        kbstudy.generate.prompts.PromptTemplateError: unknown template or backend.
        kbstudy.generate.store.GenerationStoreError: ``out`` belongs to other request settings or template.
        kbstudy.generate.client.EndpointAuthError: the endpoint refused the key (401/403); replies already
            received are kept.
        kbstudy.generate.client.ModelNotFoundError: the endpoint does not serve ``config.model`` (404).
    """
    started = time.perf_counter()
    key = api_key if api_key is not None else resolve_api_key(config)
    template = load_template(config.prompt_template, config.backend)
    store = GenerationStore(out)
    store.bind(config, template.sha256)
    final = {r.generation_id for r in store.records() if r.status in FINAL_STATUSES}
    pending, skipped = [], 0
    for problem in problems:
        prompt = render_prompt(template, problem)
        for sample_id in range(config.samples_per_problem):
            gen_id = generation_id(config, template.sha256, problem.sha256, sample_id)
            if gen_id in final:
                skipped += 1
            else:
                pending.append((problem, sample_id, prompt, gen_id))
    try:
        records = asyncio.run(_run(pending, config, store, key, progress)) if pending else []
    finally:  # even when the run stops on an endpoint error, the candidates received so far are exported
        candidates, candidates_path = store.export_candidates()
    counts = summarize(records)
    errors = [r.failure_reason for r in records if r.status == "request_error" and r.failure_reason]
    return GenerationSummary(store=store.folder, candidates_path=candidates_path, requested=len(pending),
                             skipped=skipped, ok=counts["ok"], generation_failures=counts["generation_failure"],
                             request_errors=counts["request_error"], prompt_tokens=counts["prompt_tokens"],
                             completion_tokens=counts["completion_tokens"], candidates=len(candidates),
                             elapsed_s=time.perf_counter() - started,
                             last_request_error=errors[-1] if errors else None)
