"""``kbstudy study``: run a study file (the missing evaluations, then every notebook); what ``make study`` and
``make render`` call."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer

from kbstudy.pipeline.study import run_evaluations, run_study
from kbstudy.pipeline.study_config import StudyError, default_study_file, load_study


def study_command(
    study_file: Annotated[Optional[str], typer.Argument(help="study file, params/study/*.yaml (default: "
                                                              "the GPU study with a GPU, else cpu_default)")] = None,
    only_notebooks: Annotated[bool, typer.Option(help="render the notebooks from the records already present")] = False,
    only_evaluations: Annotated[bool, typer.Option(help="run the missing evaluations, render nothing")] = False,
    kernelbench_dir: Annotated[Optional[str], typer.Option(help="KernelBench data folder, for the evaluations and "
                                                                "every notebook that reads it (default: the one "
                                                                "`kbstudy data where` names)")] = None,
    dry_run: Annotated[bool, typer.Option(help="list what each run would evaluate, run nothing")] = False,
    progress: Annotated[bool, typer.Option(help="progress bars")] = True,
) -> None:
    """Run STUDY_FILE: missing evaluations, then every notebook, writing outputs/reports/<name>/; prints a JSON
    summary. Exit status 2 for a bad study file or a GPU study without a GPU."""
    try:
        if dry_run:
            study = load_study(study_file or default_study_file(), kernelbench_dir=kernelbench_dir)
            typer.echo(json.dumps(run_evaluations(study, dry_run=True), indent=2))
            return
        record = run_study(study_file, only_notebooks=only_notebooks, only_evaluations=only_evaluations,
                           kernelbench_dir=kernelbench_dir, progress=progress)
    except (StudyError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    typer.echo(json.dumps({k: record[k] for k in ("study", "runs", "notebooks")}, indent=2))
