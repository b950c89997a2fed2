"""``kbstudy export`` and ``kbstudy summary``: what a records folder holds, per model configuration or per problem.

The tables are computed in :mod:`kbstudy.analysis.per_problem` (and :func:`failure_reasons` here); this module only
prints them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Optional

import pandas as pd
import typer
from rich.console import Console
from rich.table import Table

from kbstudy.analysis.per_problem import CPU_TIMING_NOTE, per_problem, speedup_number, speedup_text
from kbstudy.cli.arguments import fail
from kbstudy.records.frames import withdraw_event_only_speedups
from kbstudy.records.schema import error_headline
from kbstudy.records.store import RecordStore

#: ``--csv -``: the CSV goes to stdout (Unix's convention for a file argument).
CSV_STDOUT = "-"


def _console(width: int = 160) -> Console:
    # a log or CI has no terminal width: print tables wide enough that model configurations are not cut off
    return Console(width=None if sys.stdout.isatty() else width)


def print_summary(frame, title: str) -> None:
    """A rich table per model configuration: evaluated, outcome counts, correct under both verdicts, median speedup
    (labelled :data:`~kbstudy.analysis.per_problem.CPU_TIMING_NOTE` when measured on a CPU)."""
    table = Table(title=title)
    for col in ("model configuration", "records", "evaluated", "KB-correct", "kbstudy-correct", "other outcomes",
                "median speedup (eager, kbstudy-correct)"):
        table.add_column(col)
    frame = withdraw_event_only_speedups(frame)  # no speedup the host clock contradicts
    for config, group in frame.groupby("model_config", sort=True):
        evaluated = group[group.outcome == "evaluated"]
        others = group[group.outcome != "evaluated"].outcome.value_counts().to_dict()
        good = evaluated[evaluated.kbstudy_correct == True]  # noqa: E712 - pandas object column
        speed = good.speedup_vs_eager.dropna()
        on_cpu = (good.loc[speed.index, "device"].astype(str) == "cpu").any()
        table.add_row(str(config), str(len(group)), str(len(evaluated)),
                      str(int((evaluated.kernelbench_correct == True).sum())),  # noqa: E712
                      str(len(good)), ", ".join(f"{k} {v}" for k, v in sorted(others.items())) or "-",
                      (f"{speedup_number(speed.median())}x" + (f" ({CPU_TIMING_NOTE})" if on_cpu else "")) if len(speed) else "-")
    _console().print(table)


def failure_reasons(frame, top: int = 5):
    """Per model configuration, the most frequent reasons a record is not kbstudy-correct, as a DataFrame with
    ``model_config``, ``reason`` and ``records``: ``<outcome>: <the error's headline>`` for records not evaluated
    (``kbstudy.records.schema.error_headline``, numbers and hex addresses blanked so that one error counts once),
    ``evaluated: <kbstudy_failure>`` for evaluated records that fail kbstudy's verdict; ``top`` reasons per
    configuration, most frequent first."""

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


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _verdict(value) -> str:
    return "-" if _missing(value) else ("pass" if value else "fail")


def print_per_problem(table: pd.DataFrame, title: str) -> None:
    """The per-problem table (:func:`kbstudy.analysis.per_problem.per_problem_table`) as a rich table: one row per
    problem x candidate; precision and hardware columns only when the folder holds more than one."""
    extra = [c for c in ("precision", "hardware") if table[c].nunique(dropna=True) > 1]
    errors = table["error"].notna().any()
    out = Table(title=title)
    for col in ("problem", "candidate", *extra, "outcome", "KernelBench", "kbstudy", "failing check",
                "speedup vs eager [interval]", *(["error"] if errors else [])):
        out.add_column(col)
    for row in table.to_dict("records"):
        out.add_row(row["problem"], f"{row['model_config']} (sample {row['sample_id']})",
                    *[str(row[c]) for c in extra], row["outcome"], _verdict(row["kernelbench_correct"]),
                    _verdict(row["kbstudy_correct"]), "-" if _missing(row["failing_check"]) else row["failing_check"],
                    speedup_text(row), *(["" if _missing(row["error"]) else row["error"]] if errors else []))
    _console(240).print(out)


def export_command(records: Path = typer.Argument(..., help="records folder")) -> None:
    """Write evaluations.parquet and references.parquet beside the JSONL files."""
    if not (records / "evaluations.jsonl").exists():
        fail(f"{records} holds no evaluations.jsonl")
    for path in RecordStore(records).export_parquet():
        typer.echo(str(path))


def summary_command(
    records: Path = typer.Argument(..., help="records folder"),
    per_problem_rows: bool = typer.Option(False, "--per-problem",
                                          help="one row per problem x candidate: outcome, both verdicts, the failing "
                                               "check, speedup over eager with its interval"),
    csv: Optional[str] = typer.Option(None, "--csv", metavar="PATH",
                                      help="write the per-problem table as CSV to PATH ('-': to stdout)"),
) -> None:
    """Print the per-configuration summary table of a records folder, or (--per-problem, --csv) its per-problem
    table."""
    if per_problem_rows or csv is not None:
        table = per_problem([records])
        if not len(table):
            fail(f"{records} holds no evaluation records")
        if csv == CSV_STDOUT:
            typer.echo(table.to_csv(index=False), nl=False)
            return
        if csv is not None:
            Path(csv).parent.mkdir(parents=True, exist_ok=True)
            table.to_csv(csv, index=False)
            typer.echo(f"{len(table)} rows written to {csv}", err=True)
        if per_problem_rows:
            print_per_problem(table, str(records))
        return
    frame = RecordStore(records).evaluations_frame()
    if not len(frame):
        fail(f"{records} holds no evaluation records")
    print_summary(frame, str(records))
    reasons = failure_reasons(frame)
    if len(reasons):
        typer.echo("why records are not kbstudy-correct (most frequent reasons per model configuration):")
        for row in reasons.itertuples():
            typer.echo(f"  {row.model_config}: {row.records} x {row.reason}")
