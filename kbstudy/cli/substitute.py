"""``kbstudy substitute``: put verified kernels into the real workloads, check them end to end, time the steps
(:mod:`kbstudy.substitution.gpu_run`, which the GPU machine runs as ``python -m``)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from kbstudy.substitution import gpu_run
from kbstudy.substitution.measure import CONFIGS


def substitute_command(
    out: Path = typer.Option(..., help="folder for substitutions.jsonl"),
    device: str = typer.Option("cuda", help="cuda, or cpu for a dry run"),
    tiny: bool = typer.Option(False, "--tiny", help="the tiny workload configurations (CPU dry run)"),
    workloads: Optional[str] = typer.Option(None, help="comma-separated subset of the seven workloads"),
    config: str = typer.Option("eager,production", help=f"comma-separated configurations: {', '.join(CONFIGS)}"),
    sources: str = typer.Option("llm,expert", help="kernel sources: llm (leaderboard), expert (DLRM-Bench)"),
    records: Path = typer.Option(Path(gpu_run.DEFAULT_RECORDS), help="leaderboard evaluation records"),
    kb_dir: Optional[Path] = typer.Option(None, help="KernelBench data folder (default $KBSTUDY_KERNELBENCH_DIR)"),
    reps: int = typer.Option(4, help="interleaved blocks per side"),
    steps: int = typer.Option(5, help="timed steps per block"),
    warmup: int = typer.Option(3, help="untimed steps before the first block"),
    budget_s: float = typer.Option(470.0, help="start no case after this many seconds"),
    purpose: str = typer.Option("first", help="the records' purpose label"),
    shape_variants: Optional[str] = typer.Option(None, help="comma-separated verifier variants whose passing makes a "
                                                             "leaderboard kernel shape-generic"),
    assume_shape_generic: bool = typer.Option(False, help="treat every kernel as shape-generic (exploration)"),
) -> None:
    """Substitute kernels into the workloads and measure step time with and without them (one record per case)."""
    argv = ["--out", str(out), "--device", device, "--configs", *config.split(","), "--sources", *sources.split(","),
            "--records", str(records), "--reps", str(reps), "--steps", str(steps), "--warmup", str(warmup),
            "--budget-s", str(budget_s), "--purpose", purpose]
    if workloads:
        argv += ["--workloads", *workloads.split(",")]
    if tiny:
        argv.append("--tiny")
    if kb_dir:
        argv += ["--kb-dir", str(kb_dir)]
    if shape_variants:
        argv += ["--shape-variants", *shape_variants.split(",")]
    if assume_shape_generic:
        argv.append("--assume-shape-generic")
    raise typer.Exit(gpu_run.main(argv))
