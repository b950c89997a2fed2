"""``kbstudy release`` (every evaluation of record folders as one dataset, :mod:`kbstudy.pipeline.release`) and
``kbstudy throughput`` (kernels evaluated per GPU-minute, :func:`kbstudy.analysis.headline.throughput`, and where the
time went, :mod:`kbstudy.analysis.stage_time`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from kbstudy.analysis.headline import throughput
from kbstudy.analysis.stage_time import batch_walls, stage_breakdown
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
    stages: bool = typer.Option(True, help="also print where the time went: builds, reference, candidate stages, "
                                           "waiting (metadata.stage_seconds)"),
) -> None:
    """Kernels evaluated per GPU-minute, per run and hardware, from the records' timestamps, and where the time
    went."""
    frame, references, _ = load_frames(records, label="name", first_attempts=True)
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
    if stages:
        print_stage_breakdown(frame, references)


def print_stage_breakdown(evaluations, references) -> None:
    """Per run and hardware, a table of seconds per stage (:func:`kbstudy.analysis.stage_time.stage_breakdown`), and
    per batch its wall time (:func:`~kbstudy.analysis.stage_time.batch_walls`)."""
    console = Console(width=None if sys.stdout.isatty() else 120)
    walls = batch_walls(evaluations, references)
    if len(walls):
        table = Table(title="batches (records with metadata.batch)")
        for column in ("run", "hardware", "concurrency", "records", "wall s", "first record s", "last build s",
                       "kernels/min"):
            table.add_column(column, justify="left" if column in ("run", "hardware") else "right")
        for row in walls.itertuples():
            table.add_row(str(row.run), str(row.hardware), str(row.concurrency), str(row.records),
                          f"{row.wall_s:.1f}", f"{row.first_record_s:.1f}", _num(row.last_build_s),
                          f"{row.kernels_per_minute:.1f}")
        console.print(table)
    breakdown = stage_breakdown(evaluations, references)
    for keys, g in breakdown.groupby(["run", "hardware"], sort=True, dropna=False):
        wall = walls[(walls["run"] == keys[0]) & (walls["hardware"] == keys[1])]["wall_s"].sum() if len(walls) else 0
        table = Table(title=f"where the time went: {keys[0]} on {keys[1]} ({int(g['records'].iloc[0])} records)")
        for column in ("category", "stage", "seconds", "s per kernel", "% of wall" if wall else "% of stages"):
            table.add_column(column, justify="left" if column in ("category", "stage") else "right")
        total = wall or g["seconds"].sum()
        for row in g.itertuples():
            table.add_row(row.category, row.stage, f"{row.seconds:.1f}", f"{row.per_kernel_s:.3f}",
                          f"{100 * row.seconds / total:.0f}" if total else "")
        console.print(table)


def _num(value) -> str:
    return "" if value is None or value != value else f"{value:.1f}"
