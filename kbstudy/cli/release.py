"""``kbstudy release`` (every evaluation of record folders as one dataset, :mod:`kbstudy.pipeline.release`) and
``kbstudy throughput`` (kernels evaluated per GPU-minute, :func:`kbstudy.analysis.headline.throughput`)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from kbstudy.analysis.headline import throughput
from kbstudy.cli.arguments import fail
from kbstudy.pipeline.release import write_release
from kbstudy.records.frames import load_frames


def release_command(
    records: List[Path] = typer.Option(..., "--records", help="record folder (repeat; first wins on repeats)"),
    out: Path = typer.Option(..., help="release folder, e.g. outputs/release/h200-level1"),
    name: Optional[str] = typer.Option(None, help="dataset name in the README (default: the folder's name)"),
) -> None:
    """Write every evaluation of RECORDS as one dataset: JSONL, Parquet, schema.json, README.md with counts."""
    try:
        paths = write_release(records, out, name=name)
    except ValueError as exc:
        fail(str(exc))
    for path in paths.values():
        typer.echo(str(path))


def throughput_command(
    records: List[Path] = typer.Argument(..., help="record folders"),
    gap_s: float = typer.Option(300.0, help="a gap longer than this (s) between records starts a new burst"),
    per_call: bool = typer.Option(False, "--per-call", help="one row per device call (run, hardware and the "
                                                             "records' git_commit), with its start time"),
) -> None:
    """Kernels evaluated per GPU-minute, per run and hardware, from the records' timestamps."""
    frame, _, _ = load_frames(records, label="name", first_attempts=True)
    if frame.empty:
        fail("no evaluation records")
    by = ["run", "hardware", "git_commit"] if per_call else ["run", "hardware"]
    table = throughput(frame, by=by, gap_s=gap_s)
    if per_call:
        table = table.sort_values(["start_utc", *by], kind="stable")
        table["git_commit"] = table["git_commit"].astype(str).str[:7]
    cols = [*by, *(["start_utc"] if per_call else []), "records", "bursts", "gpu_minutes",
            "kernels_per_gpu_minute", "worker_minutes", "median_s_per_kernel"]
    typer.echo(table[cols].round(3).to_string(index=False))
    if len(table) > 1:  # the figure a README quotes: records over GPU-minutes of all rows' bursts
        records_n, minutes = int(table["records"].sum()), float(table["gpu_minutes"].sum())
        typer.echo(f"all rows: {records_n} records in {minutes:.1f} GPU-minutes of bursts, "
                   f"{records_n / minutes:.1f} kernels per GPU-minute" if minutes > 0 else
                   f"all rows: {records_n} records")
