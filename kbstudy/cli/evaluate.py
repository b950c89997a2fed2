"""``kbstudy eval``: evaluate candidates against problems, one record per candidate, resuming a records folder."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from kbstudy.cli.arguments import (
    RAY_ADDRESS_OPTION,
    RAY_MISSING,
    RAY_OPTION,
    batch_evaluator,
    check_run_options,
    fail,
    problems_or_default,
)
from kbstudy.cli.records import print_summary
from kbstudy.harness.candidates import NULL_CANDIDATES, CandidateLoadError, null_candidates
from kbstudy.harness.config import EvalConfig
from kbstudy.harness.problems import ProblemLoadError, load_problems
from kbstudy.pipeline.study import load_candidate_source
from kbstudy.records.store import RecordStore
from kbstudy.verdict.trials import STRUCTURAL_VARIANTS

#: Printed when a batch is interrupted: every record written so far is kept and a rerun skips it.
INTERRUPTED_HINT = "interrupted: the records written so far are kept; rerun the same command to resume"
#: The exit status of an interrupted ``kbstudy eval`` (128 + SIGINT, as a shell reports Ctrl-C).
INTERRUPTED_EXIT_CODE = 130


def load_candidate_specs(specs: List[str], problems, levels=None, model_configs=None):
    """Candidates from a list of specs: a folder or JSONL path, or ``null:<kind>`` (``null:all`` for every null
    candidate) generated for each problem. Raises FileNotFoundError / CandidateLoadError (saying so when a path
    holds problems instead, :func:`kbstudy.pipeline.study.candidate_source_mistake`) / KeyError."""
    out = []
    for spec in specs:
        if spec.startswith("null:"):
            kind = spec.split(":", 1)[1]
            kinds = NULL_CANDIDATES if kind == "all" else (kind,)
            for problem in problems:
                out.extend(null_candidates(problem, kinds))
        else:
            out.extend(load_candidate_source(spec, levels=levels, model_configs=model_configs))
    return out


def eval_command(
    problems: Optional[Path] = typer.Option(None, help="KernelBench checkout, folder of problems, or JSONL/Parquet "
                                                       "export (default: kernelbench_levels_1-3.jsonl in the data "
                                                       "folder `kbstudy data where` names)"),
    candidates: List[str] = typer.Option(..., "--candidates", "-c",
                                         help="candidate folder or JSONL; or null:reference|zeros|mean|all"),
    out: Path = typer.Option(..., help="records folder (evaluations.jsonl, references.jsonl); resumed if present"),
    level: Optional[List[int]] = typer.Option(None, help="keep these levels"),
    problem_id: Optional[List[int]] = typer.Option(None, "--problem-id", help="keep these problem ids"),
    model_config: Optional[List[str]] = typer.Option(None, "--model-config", help="keep these model configurations"),
    problem_version: Optional[str] = typer.Option(None, help="problem-set label (default: v0 for *v0* files, else current)"),
    precision: str = typer.Option("fp32", help="fp32, fp16 or bf16"),
    device: str = typer.Option("auto", help="auto, cpu, cuda or cuda:N"),
    size_scale: float = typer.Option(1.0, help="shrink problem sizes by this factor (0 < s <= 1)"),
    run: Optional[str] = typer.Option(None, help="run name stored on records (default: the out folder's name)"),
    compile_baseline: bool = typer.Option(True, help="also time the reference under torch.compile (Inductor)"),
    trials: int = typer.Option(5, help="correctness trials (KernelBench: 5)"),
    timing_budget_ms: float = typer.Option(1000.0, help="work per timing, ms (reps clamped to [10, 100])"),
    load_timeout: float = typer.Option(900.0, help="s allowed to load/compile one candidate"),
    run_timeout: float = typer.Option(300.0, help="s allowed per call stage of one candidate"),
    build_jobs: int = typer.Option(0, help="parallel CUDA builds (0: one per CPU core)"),
    cache_dir: Path = typer.Option(Path(".cache/kbstudy"), help="build cache"),
    inputs_on_device: bool = typer.Option(True, help="generate inputs on the GPU (seeded) rather than on the CPU"),
    fresh_trials: int = typer.Option(2, help="kbstudy's extra trials on fresh seeds (besides signed and large inputs)"),
    extra_seeds: Optional[str] = typer.Option(None, help="comma-separated seeds of the extra trials, to replay a run "
                                                          "(a record's metadata.extra_trials); default: drawn"),
    progress: bool = typer.Option(True, help="show a progress bar"),
    retry_outcome: Optional[List[str]] = typer.Option(None, "--retry-outcome",
                                                      help="evaluate again the records with this outcome (repeat; "
                                                           "e.g. out_of_memory, crashed after a shared-GPU run)"),
    concurrency: int = typer.Option(1, help="problems in flight at once: untimed work overlaps, every timed region "
                                            "holds the device alone (docs/reference/throughput.md)"),
    correctness_only: bool = typer.Option(False, "--correctness-only",
                                          help="verdicts only (every trial and variant): no candidate timing and no "
                                               "eager or torch.compile baselines; records are keyed apart and carry "
                                               "no speedup"),
    structural_variants: bool = typer.Option(True, help="kbstudy's shape, layout and parameter variants"),
    skip_float32_only: bool = typer.Option(False, "--skip-float32-only",
                                           help="at bf16/fp16, record CUDA candidates hard-coded to float32 (static "
                                                "dtype scan) as skipped, reason float32_only, without running them"),
    ray: bool = RAY_OPTION,
    ray_address: Optional[str] = RAY_ADDRESS_OPTION,
) -> None:
    """Evaluate candidates against problems; append one record per candidate to OUT (resumes)."""
    check_run_options([precision], size_scale)
    try:
        seeds = [int(x) for x in extra_seeds.split(",") if x.strip()] if extra_seeds else None
    except ValueError:
        fail(f"--extra-seeds must be comma-separated integers, got {extra_seeds!r}")
    try:
        probs = load_problems(problems_or_default(problems), levels=level, problem_ids=problem_id,
                              version=problem_version)
        cands = load_candidate_specs(candidates, probs, levels=level, model_configs=model_config)
    except (FileNotFoundError, ProblemLoadError, CandidateLoadError, KeyError) as exc:
        fail(str(exc))
    if problem_id:
        cands = [c for c in cands if c.problem_id in set(problem_id)]
    if not cands:  # not an error (a script's chunk may hold no kernel of a configuration), but never silent
        typer.echo(f"no candidate matches this selection (problems {len(probs)}, levels {level or 'all'}, problem ids "
                   f"{problem_id or 'all'}, model configurations {model_config or 'all'}): nothing to evaluate",
                   err=True)
        return
    store = RecordStore(out)
    cfg = EvalConfig(run=run or out.name, precision=precision, device=device, size_scale=size_scale, trials=trials,
                     compile_baseline=compile_baseline, load_timeout_s=load_timeout, run_timeout_s=run_timeout,
                     build_jobs=build_jobs, cache_dir=str(cache_dir), inputs_on_device=inputs_on_device,
                     progress=progress, fresh_trials=fresh_trials, extra_seeds=seeds,
                     skip_float32_only=skip_float32_only, retry_outcomes=tuple(retry_outcome or ()),
                     concurrency=concurrency, correctness_only=correctness_only,
                     structural_variants=STRUCTURAL_VARIANTS if structural_variants else ())
    cfg.timing = {**cfg.timing, "budget_ms": timing_budget_ms}
    try:
        summary = batch_evaluator(ray, ray_address)(probs, cands, store, cfg)
    except ModuleNotFoundError as exc:
        if exc.name != "ray":
            raise
        fail(RAY_MISSING)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (evaluate_batch turns it into KeyboardInterrupt)
        typer.secho(INTERRUPTED_HINT, fg=typer.colors.YELLOW, err=True)
        raise typer.Exit(code=INTERRUPTED_EXIT_CODE) from None
    except (RuntimeError, ValueError) as exc:  # ValueError: extra seeds that do not match the extra trials
        fail(str(exc))
    typer.echo(f"{summary.written} records written, {summary.already_done} already present, "
               f"{len(summary.unmatched)} candidates without a problem, {summary.seconds:.1f} s")
    frame = store.evaluations_frame()
    if len(frame):
        print_summary(frame[frame.run == cfg.run], f"{cfg.run}: {precision}, size scale {size_scale}")
