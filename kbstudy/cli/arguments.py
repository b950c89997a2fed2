"""What the command groups share: the one-line error exit, the checks of the run options (precision, size scale) and
the Ray options of the commands that evaluate batches."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Callable, List, NoReturn, Optional

import typer

from kbstudy.harness.orchestrator import evaluate_batch
from kbstudy.pipeline.data import resolve_kernelbench_dir
from kbstudy.pipeline.ray_batch import evaluate_batch_ray

#: The precisions a run may use.
PRECISIONS = ("fp32", "fp16", "bf16")


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: <message>`` in red on stderr and exit with ``code`` (2: invalid input)."""
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code=code)


#: the current KernelBench problems' file in the data folder (``kbstudy data where``)
CURRENT_PROBLEMS = "kernelbench_levels_1-3.jsonl"


def problems_or_default(problems: Optional[Path]) -> Path:
    """``--problems``, else the data folder's current problems (:func:`kbstudy.pipeline.data.resolve_kernelbench_dir`:
    ``$KBSTUDY_KERNELBENCH_DIR``, ``data/kernelbench``, ``../shared/kernelbench``); exit 2 saying how to get the data
    when there is none."""
    if problems is not None:
        return problems
    try:
        return resolve_kernelbench_dir() / CURRENT_PROBLEMS
    except FileNotFoundError as exc:
        fail(f"{exc}; or pass --problems")


def check_run_options(precisions: List[str], size_scale: float) -> None:
    """Exit 2 with a clear message for an unknown precision or a size scale outside (0, 1]."""
    bad = [p for p in precisions if p not in PRECISIONS]
    if bad:
        fail(f"unknown precision {bad[0]!r} (fp32, fp16 or bf16)")
    if not 0 < size_scale <= 1:
        fail(f"--size-scale must be in (0, 1], got {size_scale}")


#: ``--ray`` and ``--ray-address`` of ``kbstudy eval`` and ``kbstudy calibrate``
RAY_OPTION = typer.Option(False, "--ray", help="spread the evaluations over every GPU of a Ray cluster, one lane per "
                                              "GPU (a local cluster, or RAY_ADDRESS; needs the 'ray' extra)")
RAY_ADDRESS_OPTION = typer.Option(None, "--ray-address", help="the Ray cluster to join (auto, HOST:6379, "
                                                              "ray://HOST:10001); implies --ray")
#: the error when ``--ray`` is asked for and Ray is not installed
RAY_MISSING = "--ray needs Ray: pip install -e '.[ray]'"


def batch_evaluator(ray: bool, ray_address: Optional[str]) -> Callable:
    """``evaluate_batch``, or its Ray version when ``--ray`` or ``--ray-address`` asks for it (same signature)."""
    if ray or ray_address:
        return functools.partial(evaluate_batch_ray, address=ray_address, echo=typer.echo)
    return evaluate_batch
