"""``kbstudy profile ...``: a typer app over :mod:`kbstudy.profiling.gpu_run` and the classifier.

Mount it in ``kbstudy/cli.py`` with ``app.add_typer(profile_app, name="profile")`` after
``from kbstudy.profiling.cli import app as profile_app``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Optional

import typer

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
) -> None:
    """Profile the workloads and write records (see ``python -m kbstudy.profiling.gpu_run --help``)."""
    from kbstudy.profiling.gpu_run import run

    summary = run(out, device, tiny, workloads.split(",") if workloads else None, sweep, extras, active=active,
                  trials=trials, budget_s=budget_s, overwrite=overwrite)
    typer.echo(json.dumps(summary, indent=1))
    if summary["ok"] == 0:
        raise typer.Exit(1)


@app.command("classify")
def classify_cmd(names: list[str] = typer.Argument(..., help="kernel names")) -> None:
    """Print the category of each kernel name and the rule that matched."""
    from kbstudy.profiling.classify import classify_kernel, matching_rule

    for name in names:
        rule = matching_rule(name)
        typer.echo(f"{classify_kernel(name):14s} {name}   [{rule[2] if rule else 'no rule'}]")


@app.command("fixture-from-names")
def fixture_cmd(
    bundle: Path = typer.Argument(..., help="kernel_names.json written by gpu_run"),
    fixture: Path = typer.Option(Path("tests/profiling/fixtures/kernel_names.csv"), help="CSV name,expected_category"),
) -> None:
    """Append the bundle's names that the fixture lacks, with their current category (review before committing)."""
    have = set()
    if fixture.exists():
        with fixture.open(newline="") as fh:
            have = {row["name"] for row in csv.DictReader(fh)}
    new = [d for d in json.loads(bundle.read_text())["names"] if d["name"] not in have]
    write_header = not fixture.exists()
    with fixture.open("a", newline="") as fh:
        w = csv.writer(fh)
        if write_header:
            w.writerow(["name", "expected_category"])
        for d in new:
            w.writerow([d["name"], d["category"]])
    others = [d["name"] for d in new if d["category"] == "other"]
    typer.echo(f"appended {len(new)} names to {fixture}; {len(others)} in 'other' to review")
    for name in others:
        typer.echo(f"  other: {name}")
