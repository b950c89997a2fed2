"""What the command groups share: the one-line error exit and the checks of the run options (precision, size scale)."""

from __future__ import annotations

from typing import List, NoReturn

import typer

#: The precisions a run may use.
PRECISIONS = ("fp32", "fp16", "bf16")


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: <message>`` in red on stderr and exit with ``code`` (2: invalid input)."""
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code=code)


def check_run_options(precisions: List[str], size_scale: float) -> None:
    """Exit 2 with a clear message for an unknown precision or a size scale outside (0, 1]."""
    bad = [p for p in precisions if p not in PRECISIONS]
    if bad:
        fail(f"unknown precision {bad[0]!r} (fp32, fp16 or bf16)")
    if not 0 < size_scale <= 1:
        fail(f"--size-scale must be in (0, 1], got {size_scale}")
