"""``kbstudy profile ...``: a typer app over :mod:`kbstudy.profiling.profile_run` and the kernel classifier, mounted
by :mod:`kbstudy.cli.app` as ``kbstudy profile``."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Optional

import pandas as pd
import typer

from kbstudy.analysis import profiles as report
from kbstudy.harness.kernel_classes import classify_kernel, matching_rule
from kbstudy.profiling.profile_run import run
from kbstudy.records.store import iter_jsonl

app = typer.Typer(help="Profile real workloads: kernel tables, categories, addressable fraction.", no_args_is_help=True)


@app.command("run")
def run_cmd(
    out: Path = typer.Option(..., help="output folder for kernels.jsonl, workloads.jsonl, kernel_names.json"),
    device: Optional[str] = typer.Option(None, help="cuda (default when available) or cpu"),
    tiny: Optional[bool] = typer.Option(None, "--tiny/--full", help="tiny configurations (default on CPU)"),
    workloads: Optional[str] = typer.Option(None, help="comma-separated subset; default: the seven + extras"),
    sweep: bool = typer.Option(True, help="run the transformer size sweep"),
    extras: bool = typer.Option(True, help="run the extra workloads (ViT-B/16 inference)"),
    active: int = typer.Option(3, help="profiled (active) steps"),
    trials: int = typer.Option(10, help="timed steps without the profiler"),
    budget_s: float = typer.Option(330.0, help="skip runs not started after this many seconds"),
    overwrite: bool = typer.Option(False, help="replace records already in OUT"),
    config: str = typer.Option("eager", help="eager (as built) or production (torch.compile, default mode)"),
) -> None:
    """Profile the workloads and write records (see ``python -m kbstudy.profiling.profile_run --help``)."""
    summary = run(out, device, tiny, workloads.split(",") if workloads else None, sweep, extras, active=active,
                  trials=trials, budget_s=budget_s, overwrite=overwrite, setup=config)
    typer.echo(json.dumps(summary, indent=1))
    if summary["ok"] == 0:
        raise typer.Exit(1)


@app.command("classify")
def classify_cmd(names: list[str] = typer.Argument(..., help="kernel names")) -> None:
    """Print the category of each kernel name and the rule that matched."""
    for name in names:
        rule = matching_rule(name)
        typer.echo(f"{classify_kernel(name):14s} {name}   [{rule[2] if rule else 'no rule'}]")


def _names_from(source: Path) -> list[dict]:
    """Distinct names of a ``kernel_names.json`` bundle or a ``kernels.jsonl`` file (kernel rows only), each with
    the operators that launched it (``top_ops``), in first-seen order."""
    if source.suffix == ".jsonl":
        seen: dict[str, dict] = {}
        for row in iter_jsonl(source):
            if row.get("level", "kernel") != "kernel":
                continue
            d = seen.setdefault(row["name"], {"name": row["name"], "top_ops": []})
            if row.get("top_op") and row["top_op"] not in d["top_ops"]:
                d["top_ops"].append(row["top_op"])
        return list(seen.values())
    return [{"name": d["name"], "top_ops": [d["top_op"]] if d.get("top_op") else []}
            for d in json.loads(source.read_text())["names"]]


@app.command("fixture-from-names")
def fixture_cmd(
    sources: list[Path] = typer.Argument(..., help="kernel_names.json files written by profile_run, or kernels.jsonl files"),
    fixture: Path = typer.Option(Path("tests/profiling/fixtures/kernel_names.csv"),
                                 help="CSV name,expected_category[,top_ops,review_note]"),
    prune: bool = typer.Option(False, help="drop the fixture rows whose name none of SOURCES holds (the fixture then "
                                           "mirrors exactly the names of SOURCES)"),
) -> None:
    """Append the names of SOURCES the fixture lacks with the category the **name rules alone** give them (no
    operator fallback, so what no rule matches shows as "other"); review every appended row before committing.
    ``top_ops`` of the rows kept gain the launching operators SOURCES add. With ``--prune``, names no source holds
    are removed (rewrites the file; categories and review notes of the rows kept are left as they are)."""
    header, rows = ["name", "expected_category"], {}
    if fixture.exists():
        with fixture.open(newline="") as fh:
            reader = csv.DictReader(fh)
            header = list(reader.fieldnames or header)
            rows = {row["name"]: row for row in reader}
    seen: dict[str, dict] = {}
    for source in sources:
        for d in _names_from(source):
            s = seen.setdefault(d["name"], {"name": d["name"], "top_ops": []})
            s["top_ops"] += [op for op in d["top_ops"] if op not in s["top_ops"]]
    new = [d for d in seen.values() if d["name"] not in rows]
    dropped = [n for n in rows if n not in seen] if prune else []
    for n in dropped:
        del rows[n]
    if "top_ops" in header:
        for n, row in rows.items():
            ops = [op for op in (row.get("top_ops") or "").split(";") if op]
            row["top_ops"] = ";".join(ops + [op for op in seen.get(n, {}).get("top_ops", []) if op not in ops])
    for d in new:
        rows[d["name"]] = {"name": d["name"], "expected_category": classify_kernel(d["name"]),
                           "top_ops": ";".join(d["top_ops"]), "review_note": ""}
    with fixture.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=header, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows.values())
    others = [d for d in new if classify_kernel(d["name"]) == "other"]
    typer.echo(f"{fixture}: appended {len(new)} names, dropped {len(dropped)}; {len(others)} new names no name rule "
               f"matches (review every appended row)")
    for d in others:
        typer.echo(f"  other: {d['name'][:160]}   [launched by {', '.join(d['top_ops']) or '?'}]")


@app.command("coverage")
def coverage_cmd(
    records: Path = typer.Argument(..., help="profile_run output folder (kernels.jsonl, workloads.jsonl)"),
    supplementary: Optional[list[Path]] = typer.Option(
        None, help="folder whose kernels.jsonl fills the runs RECORDS lacks or skipped (repeatable)"),
) -> None:
    """Per workload: share of time sorted by a kernel-name rule, by the launching-operator fallback, by an operator
    rule (CPU rows), left in "other", and ``other_by_name_rules`` (fallback + other) against the 2% goal."""
    kernels, workloads = report.load_profile_records(records, supplementary=supplementary or None)
    ok = workloads.loc[workloads["status"] == "ok", "workload_key"].tolist()
    table = report.classification_table(kernels, ok)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        typer.echo(table.round(5).to_string())
    unmatched = report.unmatched_names(kernels)
    typer.echo(f"{unmatched['name'].nunique()} distinct names no name rule matches; "
               f"max other_by_name_rules {table['other_by_name_rules'].max():.5f} "
               f"(goal < {report.OTHER_SHARE_TARGET:.0%})")
    if len(unmatched):
        with pd.option_context("display.width", 200):
            typer.echo(unmatched.head(30).round(5).to_string(index=False))
