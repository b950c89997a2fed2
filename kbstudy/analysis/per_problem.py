"""One row per problem x candidate: what happened to each kernel, read from a records folder's evaluation frame.

Columns (:data:`COLUMNS`): the problem (``L<level>/<id> <name>``, with ``level``, ``problem_id``, ``problem_name``),
the candidate (``model_config``, ``sample_id``), ``precision``, ``hardware``, ``device``, the ``outcome``, both
verdicts (``kernelbench_correct``: KernelBench's ``allclose`` over its five trials; ``kbstudy_correct``: kbstudy's
check), ``failing_check`` (:func:`failing_check`), the speedup over eager PyTorch with its interval
(``speedup_vs_eager``, ``speedup_ci_low``, ``speedup_ci_high``, ``speedup_significant``), ``timing_note``
(:data:`CPU_TIMING_NOTE` for a speedup measured on a CPU) and ``error`` (the headline of the error of a record that
was not evaluated).

A speedup measured on a CPU (CPU timings, or Triton kernels under its interpreter) says nothing about a kernel's speed
on a GPU: every such speedup carries :data:`CPU_TIMING_NOTE`, in the table and wherever it is printed.
"""

from __future__ import annotations

import os
from typing import Iterable

import pandas as pd

from kbstudy.records.frames import load_frames, withdraw_event_only_speedups
from kbstudy.records.schema import error_headline

#: The label of a speedup measured on a CPU.
CPU_TIMING_NOTE = "CPU, not a GPU result"

COLUMNS = ["problem", "level", "problem_id", "problem_name", "model_config", "sample_id", "precision", "hardware",
           "device", "outcome", "kernelbench_correct", "kbstudy_correct", "failing_check", "speedup_vs_eager",
           "speedup_ci_low", "speedup_ci_high", "speedup_significant", "timing_note", "error"]


def _false(value) -> bool:
    """A recorded verdict that rejects (``False``, also numpy's); not a missing one."""
    return pd.notna(value) and not bool(value)


def failing_check(row) -> str | None:
    """The check that failed first, from an evaluation record's fields: kbstudy's first failing check
    (``kbstudy_failure``: ``shape``, ``coverage``, ``rel_l2``, ``variant_fresh_seeds``, ``timing_output_mismatch``, ...,
    see :mod:`kbstudy.verdict.checks`), else, for a candidate only KernelBench's check rejects, ``allclose`` with the
    trials it passed. ``None`` for a candidate both verdicts accept and for a record that was not evaluated (its
    ``outcome`` and ``error`` say what happened)."""
    if row.get("outcome") != "evaluated":
        return None
    if pd.notna(row.get("kbstudy_failure")):
        return str(row["kbstudy_failure"])
    if _false(row.get("kernelbench_correct")):
        passed, trials = row.get("kernelbench_trials_passed"), row.get("kernelbench_trials")
        if pd.notna(passed) and pd.notna(trials):
            return f"allclose ({int(passed)}/{int(trials)} trials)"
        return "allclose"
    if _false(row.get("kbstudy_correct")):
        return "kbstudy (check not recorded)"
    return None


def per_problem_table(evaluations: pd.DataFrame) -> pd.DataFrame:
    """The per-problem table (:data:`COLUMNS`) of an evaluation frame (:func:`kbstudy.records.frames.load_frames`),
    sorted by level, problem id, model configuration, sample and precision."""
    if not len(evaluations):
        return pd.DataFrame(columns=COLUMNS)
    frame = withdraw_event_only_speedups(evaluations).copy()  # no speedup the host clock contradicts
    for col in ("kernelbench_trials_passed", "kernelbench_trials", "speedup_vs_eager_ci_low",
                "speedup_vs_eager_ci_high", "speedup_significant", "kbstudy_failure", "error_message"):
        if col not in frame.columns:  # records older than the field
            frame[col] = None
    rows = []
    for rec in frame.to_dict("records"):
        speedup = rec.get("speedup_vs_eager")
        speedup = float(speedup) if pd.notna(speedup) else None
        evaluated = rec.get("outcome") == "evaluated"
        rows.append({
            "problem": f"L{int(rec['level'])}/{int(rec['problem_id'])} {rec['problem_name']}",
            "level": int(rec["level"]), "problem_id": int(rec["problem_id"]), "problem_name": rec["problem_name"],
            "model_config": rec["model_config"], "sample_id": int(rec["sample_id"]),
            "precision": rec.get("precision"), "hardware": rec.get("hardware"), "device": rec.get("device"),
            "outcome": rec["outcome"],
            "kernelbench_correct": bool(rec["kernelbench_correct"]) if evaluated and pd.notna(
                rec.get("kernelbench_correct")) else None,
            "kbstudy_correct": bool(rec["kbstudy_correct"]) if evaluated and pd.notna(
                rec.get("kbstudy_correct")) else None,
            "failing_check": failing_check(rec),
            "speedup_vs_eager": speedup,
            "speedup_ci_low": float(rec["speedup_vs_eager_ci_low"]) if pd.notna(
                rec.get("speedup_vs_eager_ci_low")) else None,
            "speedup_ci_high": float(rec["speedup_vs_eager_ci_high"]) if pd.notna(
                rec.get("speedup_vs_eager_ci_high")) else None,
            "speedup_significant": bool(rec["speedup_significant"]) if pd.notna(
                rec.get("speedup_significant")) else None,
            "timing_note": CPU_TIMING_NOTE if speedup is not None and str(rec.get("device")) == "cpu" else None,
            "error": None if evaluated else (error_headline(rec.get("error_message")) or None),
        })
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table.sort_values(["level", "problem_id", "model_config", "sample_id", "precision"],
                             kind="stable").reset_index(drop=True)


def per_problem(folders: Iterable[str | os.PathLike]) -> pd.DataFrame:
    """The per-problem table of the evaluation records of ``folders`` (:func:`per_problem_table`)."""
    return per_problem_table(load_frames(folders)[0])


def speedup_number(value: float) -> str:
    """A speedup to three decimals, or to two significant digits below 0.01 (the Triton interpreter on a CPU runs
    thousands of times slower than eager PyTorch: ``0.00043``, not ``0.000``)."""
    return f"{value:.3f}" if abs(value) >= 0.01 or value == 0 else f"{value:.2g}"


def speedup_text(row) -> str:
    """A speedup cell: ``1.234x [1.100, 1.380]`` (the interval where recorded), then ``(CPU, not a GPU result)`` for
    a CPU timing; ``-`` without a speedup."""
    if not pd.notna(row.get("speedup_vs_eager")):
        return "-"
    text = f"{speedup_number(row['speedup_vs_eager'])}x"
    if pd.notna(row.get("speedup_ci_low")) and pd.notna(row.get("speedup_ci_high")):
        text += f" [{speedup_number(row['speedup_ci_low'])}, {speedup_number(row['speedup_ci_high'])}]"
    if pd.notna(row.get("timing_note")):
        text += f" ({row['timing_note']})"
    return text
