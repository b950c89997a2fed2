"""``kbstudy calibrate`` (null candidates through the evaluation path, judged against the calibration rule) and
``kbstudy calibration-report`` (the same report from record folders that already exist)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from kbstudy.analysis.audit import folder_findings
from kbstudy.analysis.calibration import print_calibration
from kbstudy.cli.arguments import RAY_ADDRESS_OPTION, RAY_MISSING, RAY_OPTION, batch_evaluator, check_run_options, fail
from kbstudy.harness.candidates import CALIBRATION_NULLS, NULL_CANDIDATES
from kbstudy.harness.problems import ProblemLoadError, load_problems
from kbstudy.pipeline.calibrate import SHARED_LANE_NUMEL, SOLO_LANE, assign_lanes, run_calibration, select_by_footprint
from kbstudy.records.store import RecordStore
from kbstudy.suites.dlrm_bench import DLRM_LEVEL, load_dlrm_problems


def calibrate_command(
    out: Path = typer.Option(..., help="records folder prefix: one folder per precision, <out>-<precision>"),
    problems: Optional[Path] = typer.Option(None, help="KernelBench checkout, folder of problems, or JSONL/Parquet "
                                                       "export (or --dlrm)"),
    dlrm: bool = typer.Option(False, "--dlrm", help="calibrate DLRM-Bench's twelve problems (kbstudy.suites.dlrm_bench, "
                                                    f"level {DLRM_LEVEL}) instead of --problems"),
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
    ray: bool = RAY_OPTION,
    ray_address: Optional[str] = RAY_ADDRESS_OPTION,
) -> None:
    """Null-candidate calibration: null:reference and every calibration null on every problem,
    per precision, through the same evaluation path as `eval`; no candidate or baseline timing. Prints which nulls
    pass KernelBench's check and kbstudy's, and the problems flagged degenerate, low-spread or unjudgeable."""
    precisions = list(precision or ["fp32", "bf16"])
    check_run_options(precisions, size_scale)
    kinds = list(nulls or CALIBRATION_NULLS)
    unknown = [k for k in kinds if k not in NULL_CANDIDATES]
    if unknown:
        fail(f"unknown null kind {unknown[0]!r} (known: {', '.join(NULL_CANDIDATES)})")
    if dlrm == (problems is not None):
        fail("give either --problems or --dlrm")
    try:
        if dlrm:
            probs = load_dlrm_problems(1.0, problem_id)
        else:
            probs = load_problems(problems, levels=level, problem_ids=problem_id)
    except (FileNotFoundError, ProblemLoadError) as exc:
        fail(str(exc))
    selection = None
    if (max_output_numel, max_input_numel, max_gflop) != (None, None, None):
        probs, selection = select_by_footprint(
            probs, size_scale, max_output_numel=max_output_numel or 2**62, max_input_numel=max_input_numel or 2**62,
            max_flops=max_gflop * 1e9 if max_gflop is not None else float("inf"))
        typer.echo(f"{len(probs)} of {len(selection)} problems within the footprint bounds")
    if lanes != 1 and lane is None and not plan_lanes:
        fail("--lanes needs --lane (the share to calibrate) or --plan-lanes")
    if lane is not None or plan_lanes:
        if lanes < 1:
            fail(f"--lanes must be at least 1, not {lanes}")
        if lane is not None and lane != SOLO_LANE and lane not in {str(k) for k in range(lanes)}:
            fail(f"--lane must be one of 0..{lanes - 1} or {SOLO_LANE!r}, not {lane!r}")
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
        fail("no problems selected")
    try:
        totals = run_calibration(probs, out, precisions, nulls=kinds, device=device, size_scale=size_scale,
                                 trials=trials, run_timeout_s=run_timeout, cache_dir=str(cache_dir),
                                 progress=progress, echo=typer.echo, selection=selection,
                                 retry_outcomes=tuple(retry_outcome or ()), skip_complete=skip_complete,
                                 evaluate=batch_evaluator(ray, ray_address))
    except ModuleNotFoundError as exc:
        if exc.name != "ray":
            raise
        fail(RAY_MISSING)
    except (RuntimeError, ValueError) as exc:  # ValueError: an unknown outcome to retry
        fail(str(exc))
    typer.echo(f"{totals.violations} null candidates pass kbstudy's check on a problem not flagged degenerate, "
               "low-spread or unjudgeable, or are honest and fail it (must be 0; noise and lowprec excepted: the "
               "calibration rule of docs/reference/verifier.md)")
    _fail_on_violations(totals.violations)
    typer.echo("PASS: kbstudy's verdict rejects every must-fail null and accepts every honest one on the problems not "
               "flagged" + (f", among the records evaluated; {totals.not_evaluated} null records were not evaluated "
                            "and have no verdict (the 'not evaluated' lines above say why)" if totals.not_evaluated
                            else ""))


def calibration_report_command(
    records: list[Path] = typer.Argument(..., help="calibration record folders, e.g. "
                                                   "outputs/records/h200-calibration/level23-fp32"),
) -> None:
    """Print the calibration report of record folders that already exist, evaluating nothing (the report `calibrate`
    prints at its end, read as notebook 02 reads the records: `kbstudy.analysis.calibration.folder_findings`). Exits 1 when a
    folder breaks the calibration rule, as `calibrate` does."""
    for folder in records:  # every folder checked before any report
        if not folder.is_dir():
            fail(f"{folder} does not exist or is not a folder")
        if not (folder / "evaluations.jsonl").exists():
            fail(f"{folder} holds no evaluations.jsonl")
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
