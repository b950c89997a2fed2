"""Null-candidate calibration: which null candidates pass which verdict, per problem and precision.

Rule: on a problem that is not *flagged* (``ReferenceRecord.degenerate``, ``low_spread`` and ``unjudgeable`` all
false: ``docs/reference/verifier.md``, "The replacement check", step 2), kbstudy's verdict must reject every *must-fail* null:
``zeros``, ``mean`` and the partial writers, and must accept every *honest* one: ``reference`` and, where it was run,
``compile`` (the reference under ``torch.compile``). Two nulls are *probes*, reported but not required to fail,
because they can be accurate answers:

* ``noise`` adds at most KernelBench's atol to each element; on an output whose RMS is well above atol it is within
  any sensible tolerance (kbstudy rejects it only where atol exceeds the output's scale, which is the finding);
* ``lowprec`` at fp32 computes in fp16, whose unit roundoff (2^-11) equals TF32's, which kbstudy's fp32 threshold
  admits on purpose; at bf16 it keeps 3 mantissa bits and is expected to fail.

A must-fail null that passes kbstudy's check on a flagged problem is no violation but an *excused* finding: the
problem is the finding (degenerate: the null may be the answer; low-spread: a constant is within a factor
``kbstudy.verdict.checks.LOW_SPREAD_FACTOR`` of any relative check; unjudgeable: the reference at the precision has no correct
digit, so the adaptive bound admits anything of the output's size), and the verdict is no evidence either way. So is
an honest null rejected on an unjudgeable problem. Nor is ``mean`` on an output of a single element (a loss, a norm)
any finding: the mean of one value is that value, so there the "null" is the reference itself (``vacuous`` below),
which no verdict can or should reject.

:func:`calibration_findings` turns the records into one row per (run, problem, precision, null) with its role and
whether it violates the rule; :func:`print_calibration` prints them. What ``kbstudy calibrate`` runs (evaluating the
nulls, planning lanes, selecting problems by footprint) is :mod:`kbstudy.pipeline.calibrate`.
"""

from __future__ import annotations

import math
from typing import Sequence

import pandas as pd
from rich.console import Console
from rich.table import Table

from kbstudy.records.schema import error_headline
from kbstudy.verdict.checks import is_unjudgeable
from kbstudy.verdict.trials import VARIANTS

#: Null candidates kbstudy must reject on every non-degenerate problem.
MUST_FAIL = ("zeros", "mean", "partial0.3", "partial10", "partial50", "partial90")
#: Null candidates reported but not required to fail (see the module docstring).
PROBES = ("noise", "lowprec")
#: Honest implementations: kbstudy must accept them (``compile`` is run on request, see ``kbstudy.harness.candidates``).
HONEST = ("reference", "compile")
#: Must-fail nulls that coincide with the reference when the output has a single element (see the module docstring).
VACUOUS_ON_SCALAR = ("mean",)

#: Columns of :func:`calibration_findings`, in order.
FINDING_COLUMNS = ["run", "hardware", "size_scale", "level", "problem_id", "problem_name", "precision", "null",
                   "role", "outcome", "kernelbench_correct", "kbstudy_correct", "kbstudy_failure", "rel_l2_error",
                   "max_abs_error_normalized", "elementwise_rel_error_max", "coverage", "kernelbench_max_abs_diff",
                   "output_rms", "output_numel", "degenerate", "degenerate_constant", "degenerate_inputs", "low_spread",
                   "unjudgeable", "reference_rel_l2_error", "reference_max_abs_error_normalized",
                   "reference_elementwise_rel_error_max", "vacuous", "must_fail", "violation", "excused"]
#: The reference record's fields joined onto each null record (its problem's degeneracy, flags and own errors).
REFERENCE_COLUMNS = ["degenerate", "degenerate_constant", "degenerate_inputs", "low_spread", "unjudgeable",
                     "reference_rel_l2_error", "reference_max_abs_error_normalized",
                     "reference_elementwise_rel_error_max", "output_rms", "output_shape"]


def null_role(kind: str) -> str:
    """``"honest"``, ``"must fail"``, ``"probe"`` or ``"other"`` for a null kind (without the ``null:`` prefix)."""
    if kind in HONEST:
        return "honest"
    if kind in MUST_FAIL:
        return "must fail"
    return "probe" if kind in PROBES else "other"


def _numel(shape) -> float:
    """Elements of a recorded ``output_shape`` (a list of ints); NaN when unknown."""
    if not isinstance(shape, (list, tuple)):
        return math.nan
    n = 1
    for d in shape:
        n *= int(d)
    return float(n)


def rule_breaches(frame):
    """The calibration rule (module docstring) on rows that carry ``must_fail``, ``vacuous``, ``role``, ``outcome``,
    ``kbstudy_correct`` and the problem flags ``degenerate``, ``low_spread``, ``unjudgeable`` (``True``, ``False``, or
    ``None``/NaN where unknown: not flagged).

    Returns ``(violation, excused)``, boolean Series aligned with ``frame``: a *breach* is a must-fail null, not
    vacuous, that kbstudy accepted, or an honest null that was evaluated and rejected; it is *excused* when the
    problem is flagged (any flag for a must-fail null, ``unjudgeable`` for an honest one), else a *violation*.
    """
    accepted = frame.kbstudy_correct.eq(True)
    must_fail_accepted = frame.must_fail.astype(bool) & ~frame.vacuous.astype(bool) & accepted
    honest_rejected = frame.role.eq("honest") & frame.outcome.eq("evaluated") & ~accepted
    unjudgeable = frame.unjudgeable.eq(True)
    flagged = frame.degenerate.eq(True) | frame.low_spread.eq(True) | unjudgeable
    excused = (must_fail_accepted & flagged) | (honest_rejected & unjudgeable)
    return (must_fail_accepted | honest_rejected) & ~excused, excused


#: The columns that name one problem's calibration at one setting (its null records share them).
PROBLEM_KEYS = ["hardware", "size_scale", "precision", "level", "problem_id", "problem_sha256"]


def resolve_unjudgeable(frame):
    """The ``unjudgeable`` flag of each row of ``frame`` (null records joined with their reference record) under the
    current rule, :func:`kbstudy.verdict.checks.is_unjudgeable`: the recorded flag, or the rule applied to what the records
    hold. ``rel_spread`` is the relative L2 error of the problem's evaluated ``null:mean`` record (the constant mean(r):
    ``std(r) / RMS(r)``; unknown on a one-element output, where the mean is the reference itself), and the problem is
    ``rescued`` where that record failed an input variant (``kbstudy_variants``: a constant fails there).

    Why: records made before the rule looked at the output's spread (checks v4 records up to commit a92aa82) carry a
    flag that only asked whether an all-zeros output passes; a constant can pass a bound below 1 (KernelBench level 2,
    66_Matmul_Dropout_Softmax at fp32: training-mode dropout, whose float64 run draws another mask, gives the reference
    an own error of 0.24, a bound of 0.96, and the mean null 0.37, on the default and the signed inputs alike). Rows
    whose flag is unrecorded (``None``/NaN, reference records of schema < 3) stay unrecorded:
    ``kbstudy.analysis.audit.problem_findings`` recomputes them. Needs ``null``, ``outcome``, ``rel_l2_error``,
    ``kbstudy_variants``, ``output_numel``, ``unjudgeable``, ``reference_rel_l2_error`` and :data:`PROBLEM_KEYS`.
    Returns a Series aligned with ``frame`` (object dtype: ``True``/``False``/``None``).
    """
    keys = [k for k in PROBLEM_KEYS if k in frame.columns]
    means = frame[(frame["null"] == "mean") & frame.outcome.eq("evaluated") & frame["output_numel"].gt(1)]
    means = means.drop_duplicates(keys, keep="last")
    variants = means["kbstudy_variants"] if "kbstudy_variants" in means else pd.Series(None, index=means.index)
    rescued = [isinstance(v, dict) and any(v.get(name) == "failed" for name in VARIANTS) for v in variants]
    per_problem = {tuple(k): (s, r) for k, s, r in zip(means[keys].itertuples(index=False), means.rel_l2_error,
                                                       rescued)}
    out = []
    for row, flag, e_ref in zip(frame[keys].itertuples(index=False), frame["unjudgeable"],
                                frame["reference_rel_l2_error"]):
        if flag is None or (isinstance(flag, float) and flag != flag):
            out.append(None)
            continue
        spread, rescue = per_problem.get(tuple(row), (None, False))
        out.append(bool(flag) or is_unjudgeable(e_ref, spread, rescue))
    return pd.Series(out, index=frame.index, dtype=object)


def latest_per(records, columns: Sequence[str]):
    """The latest row of ``records`` (a frame with ``created_utc``; file order among equal times) per value of
    ``columns``: the calibration's rule that a retried attempt, or a rerun under newer checks (another record key),
    replaces the earlier record of the same null on the same problem."""
    return records.sort_values("created_utc", kind="stable").drop_duplicates(list(columns), keep="last")


def calibration_findings(evaluations, references, extra_columns: Sequence[str] = ()):
    """One row per (problem, precision, null kind, size scale, hardware) of calibration records: the latest record
    (``created_utc``) where there are several, e.g. a retried machine failure or a rerun under newer checks.

    Args:
        evaluations: a frame of :class:`kbstudy.records.schema.EvaluationRecord` rows (``RecordStore.evaluations_frame()`` or
            ``kbstudy.records.frames.load_evaluations``); only null candidates (``model_config`` ``null:<kind>``) are used.
        references: the matching :class:`kbstudy.records.schema.ReferenceRecord` rows (:data:`REFERENCE_COLUMNS`:
            degeneracy, flags, the reference's own errors, output shape and RMS), joined on the evaluation's
            ``reference_key`` (falling back to problem hash and precision for rows without one).
        extra_columns: columns of ``evaluations`` to carry through after :data:`FINDING_COLUMNS` (e.g. ``setting``).
    Returns a pandas DataFrame with :data:`FINDING_COLUMNS`: the record's identity and verdict fields, ``null`` (the
    kind), ``role`` (:func:`null_role`), ``output_rms`` (float64 reference RMS, output units) and ``output_numel``
    (from the reference record; NaN when unknown), the degeneracy flags, the ``low_spread`` and ``unjudgeable`` flags
    and the reference's own errors as recorded (``None``/NaN on reference records of schema < 3, which lack them;
    ``kbstudy.analysis.audit.null_findings`` recomputes the flags there), ``vacuous`` (a :data:`VACUOUS_ON_SCALAR` null on a
    one-element output), ``must_fail``, and ``violation`` / ``excused`` (:func:`rule_breaches`). Sorted by precision,
    level, problem id, null.
    """
    columns = FINDING_COLUMNS + [c for c in extra_columns if c not in FINDING_COLUMNS]
    if not len(evaluations):
        return pd.DataFrame(columns=columns)
    ev = evaluations[evaluations.model_config.astype(str).str.startswith("null:")].copy()
    ev["null"] = ev.model_config.str.slice(5)
    # one finding per null, problem and setting: the latest record (a retry after a machine failure, or the same
    # problem measured again under a newer checks version, replaces the earlier attempt)
    ev = latest_per(ev, ["hardware", "size_scale", "precision", "level", "problem_id", "problem_sha256", "null"])
    ref_cols = REFERENCE_COLUMNS
    refs = references if len(references) else pd.DataFrame(columns=["key", "problem_sha256", "precision", *ref_cols])
    refs = refs.reindex(columns=list(dict.fromkeys([*refs.columns, *ref_cols])))  # frames made without newer fields
    by_key = refs.drop_duplicates("key", keep="last")[["key", *ref_cols]].rename(columns={"key": "reference_key"})
    found = ev["reference_key"].isin(by_key["reference_key"])
    by_problem = refs.drop_duplicates(["problem_sha256", "precision"], keep="last")[
        ["problem_sha256", "precision", *ref_cols]]
    parts = [ev[found].merge(by_key, on="reference_key", how="left"),
             ev[~found].merge(by_problem, on=["problem_sha256", "precision"], how="left")]
    ev = pd.concat([part for part in parts if len(part)] or parts[:1], ignore_index=True)
    ev["output_numel"] = ev["output_shape"].map(_numel)
    ev["role"] = ev["null"].map(null_role)
    ev["must_fail"] = ev["null"].isin(MUST_FAIL)
    ev["vacuous"] = ev["null"].isin(VACUOUS_ON_SCALAR) & ev["output_numel"].eq(1.0)
    ev["unjudgeable"] = resolve_unjudgeable(ev)
    ev["violation"], ev["excused"] = rule_breaches(ev)
    out = ev[columns].sort_values(["precision", "level", "problem_id", "null", "size_scale", "hardware"])
    return out.reset_index(drop=True)


#: At most this many "not evaluated" lines are printed per precision (then a count of the rest).
NOT_EVALUATED_LINES = 20


def print_calibration(findings, title: str) -> None:
    """A rich table: per null kind, how many problems' KernelBench and kbstudy checks passed it, how many records were
    not evaluated, the violations; then the flagged problems, and the records not evaluated with their outcome and
    error (:data:`NOT_EVALUATED_LINES` at most). ``findings``: :func:`calibration_findings` (with ``error_message``
    among its extra columns for the errors)."""
    console = Console()
    if not console.is_terminal:
        console = Console(width=120)  # logs and pipes: wide enough for the column names
    table = Table(title=title)
    for col in ("null", "role", "evaluated", "not evaluated", "KB passes", "kbstudy passes", "violations", "excused"):
        table.add_column(col)
    for kind, group in findings.groupby("null", sort=True):
        evaluated = group[group.outcome == "evaluated"]
        table.add_row(kind, null_role(kind), str(len(evaluated)), str(len(group) - len(evaluated)),
                      str(int(evaluated.kernelbench_correct.eq(True).sum())),
                      str(int(evaluated.kbstudy_correct.eq(True).sum())), str(int(group.violation.sum())),
                      str(int(group.excused.sum())))
    console.print(table)
    failed = findings[findings.outcome != "evaluated"]
    for _, row in failed.head(NOT_EVALUATED_LINES).iterrows():
        error = error_headline(row.get("error_message"), 160)
        console.print(f"not evaluated: null:{row['null']} on {row.problem_name}: {row.outcome}"
                      + (f" ({error})" if error else ""))
    if len(failed) > NOT_EVALUATED_LINES:
        console.print(f"not evaluated: {len(failed) - NOT_EVALUATED_LINES} more records (see the records' error_message)")
    for flag in ("low_spread", "unjudgeable"):
        for _, row in findings[findings[flag].eq(True)].drop_duplicates("problem_name").iterrows():
            error = row.reference_rel_l2_error  # unknown (None/NaN) on reference records older than schema 3
            console.print(f"{flag.replace('_', '-')} problem: {row.problem_name} (reference's own relative L2 error "
                          f"{'unknown' if error is None or error != error else format(float(error), '.3g')})")
    degenerate = findings[findings.degenerate.eq(True)].drop_duplicates("problem_name")
    for _, row in degenerate.iterrows():
        console.print(f"degenerate reference: {row.problem_name} (constant={row.degenerate_constant}, "
                      f"inputs without effect={row.degenerate_inputs})")
    for _, row in findings[findings.vacuous & findings.kbstudy_correct.eq(True)].iterrows():
        console.print(f"vacuous null: null:{row['null']} on {row.problem_name} (one-element output: it is the reference)")

    def verdict(row) -> str:  # the failure only where there is one (NaN where the null passed)
        failure = row.kbstudy_failure if isinstance(row.kbstudy_failure, str) else None
        return f"kbstudy_correct={row.kbstudy_correct}" + (f" ({failure})" if failure else "")

    for _, row in findings[findings.excused].iterrows():
        console.print(f"excused: null:{row['null']} on {row.problem_name}, a flagged problem: {verdict(row)}")
    for _, row in findings[findings.violation].iterrows():
        console.print(f"VIOLATION: null:{row['null']} on {row.problem_name}: {verdict(row)}")
