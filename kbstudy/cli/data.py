"""Command line: ``kbstudy data fetch`` (the study's public inputs, from their pinned public sources) and
``kbstudy data where`` (which data folder the study reads, and whether it holds the pinned files).

Exit codes: 0 done, 1 the data folder is missing or differs from the pinned files (``where``), 2 a fetch that could not
complete (download, checksum) or an invalid option."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from kbstudy.pipeline.data import (
    BASE_URL_ENV,
    FETCH_COMMAND,
    KERNELBENCH_DIR_ENV,
    SOURCES,
    DataError,
    check_folder,
    fetch,
    locate_kernelbench_dir,
)

app = typer.Typer(help="The study's public input data: KernelBench problems, the leaderboard's kernels, "
                       "KernelBench's baseline timings.", no_args_is_help=True, add_completion=False)


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    return typer.Exit(code=code)


@app.command("fetch")
def fetch_command(
        dir: Annotated[Optional[Path], typer.Option(
            "--dir", help="folder to write (default: data/kernelbench under the project root)")] = None,
        source_base_url: Annotated[Optional[List[str]], typer.Option(
            "--source-base-url", help=f"base URL of a mirror: URL for every source, or SOURCE=URL for one "
                                      f"({', '.join(SOURCES)}); default ${BASE_URL_ENV}[_SOURCE], else "
                                      f"https://raw.githubusercontent.com")] = None,
        workers: Annotated[int, typer.Option(help="parallel downloads")] = 8,
) -> None:
    """Fetch the data folder from its public sources at pinned commits.

    Every file is checked against its pinned SHA-256 before it is written; files already there and verified are
    kept, and an interrupted fetch resumes."""
    for name, source in SOURCES.items():
        typer.echo(f"{name}: https://github.com/{source.repo} at {source.commit}")
    try:
        result = fetch(dir.resolve() if dir is not None else None, sources=source_base_url or None, workers=workers,
                       echo=typer.echo)
    except (DataError, ValueError, OSError) as exc:
        raise _fail(str(exc))
    typer.echo(f"data folder: {result.folder}")


@app.command("where")
def where_command(
        kernelbench_dir: Annotated[Optional[Path], typer.Option(
            "--kernelbench-dir", help="a folder to check instead of the resolution")] = None,
        path_only: Annotated[bool, typer.Option(
            "--path-only", help="print only the folder, without checking its files (for scripts)")] = False,
) -> None:
    """Print the data folder the study reads and check its files.

    The folder is the first of: --kernelbench-dir, $KBSTUDY_KERNELBENCH_DIR, data/kernelbench (fetched) when it holds
    the files, ../shared/kernelbench. Each file is compared with its pinned SHA-256."""
    folder, label, places = locate_kernelbench_dir(kernelbench_dir.resolve() if kernelbench_dir else None)
    if folder is None:
        looked = ", ".join(f"{path} ({lbl})" for lbl, path in (places[:1] if label else places))
        raise _fail(f"no KernelBench data folder ({looked}); run `{FETCH_COMMAND}`, or set "
                    f"${KERNELBENCH_DIR_ENV}", code=1)
    if path_only:
        typer.echo(str(folder))
        return
    typer.echo(f"{folder}  ({label})")
    states = check_folder(folder)
    for name, state in states.items():
        typer.echo(f"  {state:8} {name}")
    if any(state != "ok" for state in states.values()):
        raise _fail(f"{folder} does not hold the pinned files; `{FETCH_COMMAND} --dir {folder}` rewrites those that "
                    f"are missing or differ", code=1)
