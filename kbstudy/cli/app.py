"""``kbstudy`` command line: ``eval``, ``export``, ``summary`` here; ``study``, ``release``, ``throughput``,
``profile``, ``generate`` and ``dlrm`` are mounted from their modules when those import (each imports only what it needs)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from kbstudy.pipeline.calibrate import SHARED_LANE_NUMEL  # a constant; the module loads pandas, not torch
from kbstudy.cli.data import app as data_app

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Compile, verify and time LLM-generated GPU kernels; profile real workloads.")
app.add_typer(data_app, name="data")


def _fail(message: str) -> None:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code=2)


def _check_run_options(precisions: List[str], size_scale: float) -> None:
    """Exit 2 with a clear message for an unknown precision or a size scale outside (0, 1]."""
    bad = [p for p in precisions if p not in ("fp32", "fp16", "bf16")]
    if bad:
        _fail(f"unknown precision {bad[0]!r} (fp32, fp16 or bf16)")
    if not 0 < size_scale <= 1:
        _fail(f"--size-scale must be in (0, 1], got {size_scale}")


def load_candidate_specs(specs: List[str], problems, levels=None, model_configs=None):
    """Candidates from a list of specs: a folder or JSONL path, or ``null:<kind>`` (``null:all`` for every null
    candidate) generated for each problem. Raises FileNotFoundError / CandidateLoadError / KeyError."""
    from kbstudy.harness.candidates import NULL_CANDIDATES, load_candidates, null_candidates

    out = []
    for spec in specs:
        if spec.startswith("null:"):
            kind = spec.split(":", 1)[1]
            kinds = NULL_CANDIDATES if kind == "all" else (kind,)
            for problem in problems:
                out.extend(null_candidates(problem, kinds))
        else:
            out.extend(load_candidates(spec, levels=levels, model_configs=model_configs))
    return out


def print_summary(frame, title: str) -> None:
    """A rich table per model configuration: evaluated, outcome counts, correct under both verdicts, median speedup."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col in ("model configuration", "records", "evaluated", "KB-correct", "kbstudy-correct", "other outcomes",
                "median speedup (eager, kbstudy-correct)"):
        table.add_column(col)
    for config, group in frame.groupby("model_config", sort=True):
        evaluated = group[group.outcome == "evaluated"]
        others = group[group.outcome != "evaluated"].outcome.value_counts().to_dict()
        good = evaluated[evaluated.kbstudy_correct == True]  # noqa: E712 - pandas object column
        speed = good.speedup_vs_eager.dropna()
        table.add_row(str(config), str(len(group)), str(len(evaluated)),
                      str(int((evaluated.kernelbench_correct == True).sum())),  # noqa: E712
                      str(len(good)), ", ".join(f"{k} {v}" for k, v in sorted(others.items())) or "-",
                      f"{speed.median():.3f}x" if len(speed) else "-")
    import sys

    # a log or CI has no terminal width: print the table wide enough that model configurations are not cut off
    Console(width=None if sys.stdout.isatty() else 160).print(table)


def failure_reasons(frame, top: int = 5):
    """Per model configuration, the most frequent reasons a record is not kbstudy-correct, as a DataFrame with
    ``model_config``, ``reason`` and ``records``: ``<outcome>: <the error's headline>`` for records not evaluated
    (``kbstudy.records.schema.error_headline``, numbers and hex addresses blanked so that one error counts once),
    ``evaluated: <kbstudy_failure>`` for evaluated records that fail kbstudy's verdict; ``top`` reasons per
    configuration, most frequent first."""
    import re

    import pandas as pd

    from kbstudy.records.schema import error_headline

    def reason(row) -> str | None:
        if row.outcome == "evaluated":
            return None if row.kbstudy_correct == True else f"evaluated: {row.kbstudy_failure}"  # noqa: E712
        if row.outcome == "skipped":
            return None
        text = re.sub(r"0x[0-9a-f]+|\d+(\.\d+)?", "N", error_headline(row.error_message))
        return f"{row.outcome}: {text}" if text else str(row.outcome)

    reasons = frame.assign(reason=frame.apply(reason, axis=1)).dropna(subset=["reason"])
    if not len(reasons):
        return pd.DataFrame(columns=["model_config", "reason", "records"])
    counts = reasons.groupby(["model_config", "reason"]).size().rename("records").reset_index()
    counts = counts.sort_values(["model_config", "records", "reason"], ascending=[True, False, True])
    return counts.groupby("model_config").head(top).reset_index(drop=True)


@app.command("eval")
def eval_command(
    problems: Path = typer.Option(..., help="KernelBench checkout, folder of problems, or JSONL/Parquet export"),
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
    skip_float32_only: bool = typer.Option(False, "--skip-float32-only",
                                           help="at bf16/fp16, record CUDA candidates hard-coded to float32 (static "
                                                "dtype scan) as skipped, reason float32_only, without running them"),
) -> None:
    """Evaluate candidates against problems; append one record per candidate to OUT (resumes)."""
    from kbstudy.harness.candidates import CandidateLoadError
    from kbstudy.harness.orchestrator import EvalConfig, evaluate_batch
    from kbstudy.harness.problems import ProblemLoadError, load_problems
    from kbstudy.records.store import RecordStore

    _check_run_options([precision], size_scale)
    try:
        seeds = [int(x) for x in extra_seeds.split(",") if x.strip()] if extra_seeds else None
    except ValueError:
        _fail(f"--extra-seeds must be comma-separated integers, got {extra_seeds!r}")
    try:
        probs = load_problems(problems, levels=level, problem_ids=problem_id, version=problem_version)
        cands = load_candidate_specs(candidates, probs, levels=level, model_configs=model_config)
    except (FileNotFoundError, ProblemLoadError, CandidateLoadError, KeyError) as exc:
        _fail(str(exc))
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
                     skip_float32_only=skip_float32_only, retry_outcomes=tuple(retry_outcome or ()))
    cfg.timing = {**cfg.timing, "budget_ms": timing_budget_ms}
    try:
        summary = evaluate_batch(probs, cands, store, cfg)
    except (RuntimeError, ValueError) as exc:  # ValueError: extra seeds that do not match the extra trials
        _fail(str(exc))
    typer.echo(f"{summary.written} records written, {summary.already_done} already present, "
               f"{len(summary.unmatched)} candidates without a problem, {summary.seconds:.1f} s")
    frame = store.evaluations_frame()
    if len(frame):
        print_summary(frame[frame.run == cfg.run], f"{cfg.run}: {precision}, size scale {size_scale}")


@app.command("calibrate")
def calibrate_command(
    out: Path = typer.Option(..., help="records folder prefix: one folder per precision, <out>-<precision>"),
    problems: Optional[Path] = typer.Option(None, help="KernelBench checkout, folder of problems, or JSONL/Parquet "
                                                       "export (or --dlrm)"),
    dlrm: bool = typer.Option(False, "--dlrm", help="calibrate DLRM-Bench's twelve problems (kbstudy.suites.dlrm_bench, "
                                                    "level 5) instead of --problems"),
    level: Optional[List[int]] = typer.Option(None, help="keep these levels"),
    problem_id: Optional[List[int]] = typer.Option(None, "--problem-id", help="keep these problem ids"),
    precision: Optional[List[str]] = typer.Option(None, help="fp32, fp16, bf16; repeat for several (default fp32 "
                                                             "and bf16)"),
    nulls: Optional[List[str]] = typer.Option(None, "--nulls", help="null kinds beside null:reference; repeat for "
                                                                    "several (default: kbstudy.harness.candidates."
                                                                    "CALIBRATION_NULLS; 'compile' on request)"),
    device: str = typer.Option("auto", help="auto, cpu, cuda or cuda:N"),
    size_scale: float = typer.Option(1.0, help="shrink problem sizes by this factor (0 < s <= 1)"),
    max_output_numel: Optional[int] = typer.Option(None, help="keep problems whose scaled first output has at most "
                                                              "this many elements (meta device; see "
                                                              "kbstudy.analysis.calibration.select_by_footprint)"),
    max_input_numel: Optional[int] = typer.Option(None, help="... and whose scaled inputs have at most this many"),
    max_gflop: Optional[float] = typer.Option(None, help="... and whose scaled forward costs at most this many GFLOP"),
    trials: int = typer.Option(5, help="correctness trials (KernelBench: 5)"),
    run_timeout: float = typer.Option(300.0, help="s allowed per call stage of one candidate"),
    cache_dir: Path = typer.Option(Path(".cache/kbstudy"), help="build cache, and the lane plan's footprint cache"),
    progress: bool = typer.Option(True, help="show a progress bar"),
    retry_outcome: Optional[List[str]] = typer.Option(None, "--retry-outcome",
                                                      help="evaluate again the records with this outcome (repeat; "
                                                           "e.g. out_of_memory, crashed after a shared-GPU run)"),
    lanes: int = typer.Option(1, help="processes sharing this GPU: with --lane, calibrate only one lane's share of "
                                      "the problems (kbstudy.analysis.calibration.assign_lanes)"),
    lane: Optional[str] = typer.Option(None, help="0 .. LANES-1 (the shared lanes, run at the same time), or 'solo' "
                                                  "(the problems too large to share the GPU, run after them)"),
    solo_numel: int = typer.Option(SHARED_LANE_NUMEL, help="input plus output elements above which a problem goes "
                                                           "to the solo lane"),
    plan_lanes: bool = typer.Option(False, "--plan-lanes", help="print the lane of every selected problem and exit "
                                                                "(fills the footprint cache the lanes read)"),
    skip_complete: bool = typer.Option(False, "--skip-complete",
                                       help="leave out problems whose every null already has an evaluated record in "
                                            "OUT (any checks version, this hardware and size): completes a "
                                            "calibration begun under older checks instead of redoing it"),
) -> None:
    """Null-candidate calibration: null:reference and every calibration null on every problem,
    per precision, through the same evaluation path as `eval`; no candidate or baseline timing. Prints which nulls
    pass KernelBench's check and kbstudy's, and the problems flagged degenerate, low-spread or unjudgeable."""
    from kbstudy.pipeline.calibrate import run_calibration
    from kbstudy.harness.candidates import CALIBRATION_NULLS, NULL_CANDIDATES
    from kbstudy.harness.problems import ProblemLoadError, load_problems

    precisions = list(precision or ["fp32", "bf16"])
    _check_run_options(precisions, size_scale)
    kinds = list(nulls or CALIBRATION_NULLS)
    unknown = [k for k in kinds if k not in NULL_CANDIDATES]
    if unknown:
        _fail(f"unknown null kind {unknown[0]!r} (known: {', '.join(NULL_CANDIDATES)})")
    if dlrm == (problems is not None):
        _fail("give either --problems or --dlrm")
    try:
        if dlrm:
            from kbstudy.suites.dlrm_bench import load_dlrm_problems

            probs = load_dlrm_problems(1.0, problem_id)
        else:
            probs = load_problems(problems, levels=level, problem_ids=problem_id)
    except (FileNotFoundError, ProblemLoadError) as exc:
        _fail(str(exc))
    selection = None
    if (max_output_numel, max_input_numel, max_gflop) != (None, None, None):
        from kbstudy.pipeline.calibrate import select_by_footprint

        probs, selection = select_by_footprint(
            probs, size_scale, max_output_numel=max_output_numel or 2**62, max_input_numel=max_input_numel or 2**62,
            max_flops=max_gflop * 1e9 if max_gflop is not None else float("inf"))
        typer.echo(f"{len(probs)} of {len(selection)} problems within the footprint bounds")
    if lanes != 1 and lane is None and not plan_lanes:
        _fail("--lanes needs --lane (the share to calibrate) or --plan-lanes")
    if lane is not None or plan_lanes:
        from kbstudy.pipeline.calibrate import SOLO_LANE, assign_lanes

        if lanes < 1:
            _fail(f"--lanes must be at least 1, not {lanes}")
        if lane is not None and lane != SOLO_LANE and lane not in {str(k) for k in range(lanes)}:
            _fail(f"--lane must be one of 0..{lanes - 1} or {SOLO_LANE!r}, not {lane!r}")
        plan = assign_lanes(probs, lanes, size_scale, solo_numel=solo_numel, cache_dir=cache_dir)
        if plan_lanes:
            for row in plan:
                size = f"{row['numel']:.3g} elements" if row["numel"] is not None else f"size unknown ({row['error']})"
                typer.echo(f"lane {row['lane']}: level {row['level']} {row['problem_name']}, {size}")
            counts = {k: sum(1 for r in plan if str(r["lane"]) == k) for k in [*map(str, range(lanes)), SOLO_LANE]}
            typer.echo("problems per lane: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
            return
        probs = [p for p, row in zip(probs, plan) if str(row["lane"]) == lane]
        typer.echo(f"lane {lane} of {lanes} (+ {SOLO_LANE}): {len(probs)} of {len(plan)} problems")
        if not probs:
            typer.echo("nothing to calibrate in this lane")
            return
    if not probs:
        _fail("no problems selected")
    try:
        totals = run_calibration(probs, out, precisions, nulls=kinds, device=device, size_scale=size_scale,
                                 trials=trials, run_timeout_s=run_timeout, cache_dir=str(cache_dir),
                                 progress=progress, echo=typer.echo, selection=selection,
                                 retry_outcomes=tuple(retry_outcome or ()), skip_complete=skip_complete)
    except (RuntimeError, ValueError) as exc:  # ValueError: an unknown outcome to retry
        _fail(str(exc))
    typer.echo(f"{totals.violations} null candidates pass kbstudy's check on a problem not flagged degenerate, "
               "low-spread or unjudgeable, or are honest and fail it (must be 0; noise and lowprec excepted: the "
               "calibration rule of docs/verifier.md)")
    _fail_on_violations(totals.violations)
    typer.echo("PASS: kbstudy's verdict rejects every must-fail null and accepts every honest one on the problems not "
               "flagged" + (f", among the records evaluated; {totals.not_evaluated} null records were not evaluated "
                            "and have no verdict (the 'not evaluated' lines above say why)" if totals.not_evaluated
                            else ""))


@app.command("calibration-report")
def calibration_report_command(
    records: list[Path] = typer.Argument(..., help="calibration record folders, e.g. "
                                                   "outputs/records/kernelbench/h200/calibration/level23-fp32"),
) -> None:
    """Print the calibration report of record folders that already exist, evaluating nothing (the report `calibrate`
    prints at its end, read as notebook 02 reads the records: `kbstudy.analysis.calibration.folder_findings`). Exits 1 when a
    folder breaks the calibration rule, as `calibrate` does."""
    from kbstudy.analysis.audit import folder_findings
    from kbstudy.analysis.calibration import print_calibration
    from kbstudy.records.store import RecordStore

    for folder in records:  # every folder checked before any report
        if not folder.is_dir():
            _fail(f"{folder} does not exist or is not a folder")
        if not (folder / "evaluations.jsonl").exists():
            _fail(f"{folder} holds no evaluations.jsonl")
    violations = 0
    for folder in records:
        findings = folder_findings(RecordStore(folder))
        if not len(findings):
            typer.echo(f"{folder}: no null-candidate records (a calibration folder holds null:<kind> records)")
            continue
        print_calibration(findings, str(folder))
        folder_violations = int(findings["violation"].sum())
        violations += folder_violations
        typer.echo(f"{folder}: {folder_violations} violations, {int(findings['excused'].sum())} "
                   f"excused, {int((findings['outcome'] != 'evaluated').sum())} null records not evaluated")
    _fail_on_violations(violations)
    typer.echo("PASS: no violation of the calibration rule")


def _fail_on_violations(violations: int) -> None:
    """Exit 1 with the FAIL line when a calibration broke its rule: usable as a gate in scripts and CI (the verdict
    was fooled, or rejected an honest one)."""
    if violations:
        typer.echo("FAIL: kbstudy's verdict breaks the calibration rule (see the VIOLATION lines above)")
        raise typer.Exit(code=1)


@app.command("export")
def export_command(records: Path = typer.Argument(..., help="records folder")) -> None:
    """Write evaluations.parquet and references.parquet beside the JSONL files."""
    from kbstudy.records.store import RecordStore

    if not (records / "evaluations.jsonl").exists():
        _fail(f"{records} holds no evaluations.jsonl")
    for path in RecordStore(records).export_parquet():
        typer.echo(str(path))


@app.command("summary")
def summary_command(records: Path = typer.Argument(..., help="records folder")) -> None:
    """Print the per-configuration summary table of a records folder."""
    from kbstudy.records.store import RecordStore

    frame = RecordStore(records).evaluations_frame()
    if not len(frame):
        _fail(f"{records} holds no evaluation records")
    print_summary(frame, str(records))
    reasons = failure_reasons(frame)
    if len(reasons):
        typer.echo("why records are not kbstudy-correct (most frequent reasons per model configuration):")
        for row in reasons.itertuples():
            typer.echo(f"  {row.model_config}: {row.records} x {row.reason}")


def _mount_optional() -> None:
    """Mount the sub-commands of the other stages. Each module imports its heavy dependencies (papermill, openai) only
    when its command runs, so the GPU image, which lacks them, still gets ``eval``."""
    from kbstudy.pipeline import release
    from kbstudy.pipeline import study
    from kbstudy.cli.generate import generate_command, replay_command
    from kbstudy.cli.profile import app as profile_app

    study.register(app)
    release.register(app)
    app.command("generate")(generate_command)
    app.command("replay")(replay_command)
    app.add_typer(profile_app, name="profile")
    try:
        from kbstudy.suites.dlrm_bench.cli import app as dlrm_app
    except ImportError:
        return
    app.add_typer(dlrm_app, name="dlrm")


_mount_optional()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
