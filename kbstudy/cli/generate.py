"""Command line: ``kbstudy generate`` (ask a model for candidates) and ``kbstudy replay`` (rebuild them offline).

Mount on the main typer app either as two top-level commands::

    from kbstudy.cli.generate import generate_command, replay_command
    app.command("generate")(generate_command)
    app.command("replay")(replay_command)

or use this module's own :data:`app`. Exit codes: 0 done (even with
generation failures or request errors, which are recorded), 1 the endpoint refused the key or the model, 2 invalid
input (configuration, problems, store folder), 3 replay ``--strict`` found mismatches.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from kbstudy.generate.client import EndpointAuthError, ModelNotFoundError
from kbstudy.generate.config import ModelConfigError, load_model_config
from kbstudy.generate.prompts import PromptTemplateError
from kbstudy.generate.replay import replay_generations
from kbstudy.generate.run import generate_candidates
from kbstudy.generate.store import CANDIDATES_FILE, GenerationStoreError
from kbstudy.harness.problems import ProblemLoadError, load_problems

app = typer.Typer(help="Generate candidates with any OpenAI-compatible endpoint, and replay stored generations.",
                  no_args_is_help=True, add_completion=False)


def _fail(message: str, code: int) -> typer.Exit:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    return typer.Exit(code=code)


def generate_command(
    config: Annotated[Path, typer.Option("--config", "-c", help="Model configuration (params/models/*.yaml).")],
    problems: Annotated[Path, typer.Option(help="Problems: KernelBench checkout, folder, JSONL or Parquet.")],
    out: Annotated[Path, typer.Option(help="Store folder, e.g. outputs/generations/<name>; reruns resume it.")],
    level: Annotated[Optional[list[int]], typer.Option(help="Keep only this level (repeatable).")] = None,
    problem_id: Annotated[Optional[list[int]], typer.Option(help="Keep only this problem id (repeatable).")] = None,
    limit: Annotated[Optional[int], typer.Option(help="Ask for the first N problems only (after filtering).")] = None,
    samples: Annotated[Optional[int], typer.Option(help="Override samples_per_problem.")] = None,
    concurrency: Annotated[Optional[int], typer.Option(help="Override the concurrency limit.")] = None,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")] = True,
) -> None:
    """Ask a model configuration for candidates, keeping every reply; writes <out>/candidates.jsonl for kbstudy eval."""
    try:
        model_config = load_model_config(config).with_overrides(samples_per_problem=samples, concurrency=concurrency)
        selected = load_problems(problems, levels=level or None, problem_ids=problem_id or None)
        if limit is not None:
            selected = selected[: max(limit, 0)]
        summary = generate_candidates(selected, model_config, out, progress=progress)
    except (FileNotFoundError, ModelConfigError, ProblemLoadError, PromptTemplateError, GenerationStoreError) as exc:
        raise _fail(str(exc), 2) from None
    except (EndpointAuthError, ModelNotFoundError) as exc:
        raise _fail(str(exc), 1) from None
    typer.echo(f"{model_config.name}: asked {summary.requested} (skipped {summary.skipped} already stored): "
               f"{summary.ok} ok, {summary.generation_failures} generation failures, "
               f"{summary.request_errors} request errors; {summary.prompt_tokens} prompt + "
               f"{summary.completion_tokens} completion tokens in {summary.elapsed_s:.1f} s")
    if summary.request_errors:
        typer.echo(f"last request error ({model_config.base_url}): {summary.last_request_error}")
        typer.echo(f"rerun the same command to ask again for the {summary.request_errors} request errors")
    if summary.candidates_path is not None:
        typer.echo(f"{summary.candidates} candidates in {summary.candidates_path}")
        typer.echo(f"next: kbstudy eval --problems {problems} --candidates {summary.candidates_path} ...")
    else:
        typer.echo("no candidates yet (no reply held usable code)")


def replay_command(
    generations: Annotated[Path, typer.Argument(help="A store folder or its generations.jsonl.")],
    out: Annotated[Optional[Path], typer.Option(help="Candidates JSONL to write "
                                                     "[default: candidates.jsonl beside the generations]")] = None,
    problems: Annotated[Optional[Path], typer.Option(help="Check problems and prompts against these problems.")] = None,
    strict: Annotated[bool, typer.Option(help="Exit with code 3 on any code, problem or prompt mismatch.")] = False,
) -> None:
    """Rebuild the candidates of a stored generation set from its verbatim replies, with no network."""
    try:
        source = generations if generations.is_dir() else generations.parent
        target = out or source / CANDIDATES_FILE
        loaded = load_problems(problems) if problems is not None else None
        result = replay_generations(generations, target, problems=loaded)
    except (FileNotFoundError, GenerationStoreError, ProblemLoadError) as exc:
        raise _fail(str(exc), 2) from None
    typer.echo(f"{result.records} generations: {len(result.candidates)} candidates, "
               f"{result.generation_failures} generation failures, {result.request_errors} request errors")
    if result.candidates_path is not None:
        typer.echo(f"wrote {result.candidates_path}")
    mismatches = {"code": result.code_mismatches, "problem": result.problem_mismatches,
                  "prompt": result.prompt_mismatches}
    for what, ids in mismatches.items():
        if ids:
            typer.secho(f"{len(ids)} {what} mismatches (first: {ids[:3]})", fg=typer.colors.YELLOW, err=True)
    if strict and any(mismatches.values()):
        raise typer.Exit(code=3)


app.command("generate")(generate_command)
app.command("replay")(replay_command)
