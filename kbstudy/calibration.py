"""Null-candidate calibration: which null candidates pass which verdict, per problem and precision.

Rule: on a problem whose reference is not degenerate (``ReferenceRecord.degenerate`` false), kbstudy's verdict must
reject every *must-fail* null: ``zeros``, ``mean`` and the partial writers. Two nulls are *probes*, reported but not
required to fail, because they can be accurate answers:

* ``noise`` adds at most KernelBench's atol to each element; on an output whose RMS is well above atol it is within
  any sensible tolerance (kbstudy rejects it only where atol exceeds the output's scale, which is the finding);
* ``lowprec`` at fp32 computes in fp16, whose unit roundoff (2^-11) equals TF32's, which kbstudy's fp32 threshold
  admits on purpose; at bf16 it keeps 3 mantissa bits and is expected to fail.

A null that passes kbstudy's check on a degenerate problem is no violation: the problem is the finding.
"""

from __future__ import annotations

#: Null candidates kbstudy must reject on every non-degenerate problem.
MUST_FAIL = ("zeros", "mean", "partial0.3", "partial10", "partial50", "partial90")
#: Null candidates reported but not required to fail (see the module docstring).
PROBES = ("noise", "lowprec")


def calibration_findings(evaluations, references):
    """One row per (problem, precision, null kind) of a calibration run.

    Args:
        evaluations: ``RecordStore.evaluations_frame()`` of a calibration folder (null candidates only are used).
        references: ``RecordStore.references_frame()`` of the same folder (degeneracy fields).
    Returns a pandas DataFrame with columns ``problem_name``, ``precision``, ``null`` (kind), ``outcome``,
    ``kernelbench_correct``, ``kbstudy_correct``, ``kbstudy_failure``, ``rel_l2_error``, ``coverage``,
    ``degenerate``, ``degenerate_constant``, ``degenerate_inputs``, ``must_fail`` (bool) and ``violation`` (a
    must-fail null that kbstudy accepted on a non-degenerate problem, or ``null:reference`` that it rejected).
    """
    import pandas as pd

    columns = ["problem_name", "precision", "null", "outcome", "kernelbench_correct", "kbstudy_correct",
               "kbstudy_failure", "rel_l2_error", "coverage", "degenerate", "degenerate_constant",
               "degenerate_inputs", "must_fail", "violation"]
    if not len(evaluations):
        return pd.DataFrame(columns=columns)
    ev = evaluations[evaluations.model_config.astype(str).str.startswith("null:")].copy()
    ev["null"] = ev.model_config.str.slice(5)
    refs = references[["problem_sha256", "precision", "degenerate", "degenerate_constant", "degenerate_inputs"]] \
        if len(references) else pd.DataFrame(columns=["problem_sha256", "precision", "degenerate",
                                                      "degenerate_constant", "degenerate_inputs"])
    refs = refs.drop_duplicates(["problem_sha256", "precision"], keep="last")
    ev = ev.merge(refs, on=["problem_sha256", "precision"], how="left")
    ev["must_fail"] = ev["null"].isin(MUST_FAIL)
    accepted = ev.kbstudy_correct.eq(True)
    not_degenerate = ~ev.degenerate.eq(True)
    ev["violation"] = (ev.must_fail & accepted & not_degenerate) | (
        ev["null"].eq("reference") & ev.outcome.eq("evaluated") & ~accepted)
    return ev[columns].sort_values(["precision", "problem_name", "null"]).reset_index(drop=True)


def print_calibration(findings, title: str) -> None:
    """A rich table: per null kind, how many problems' KernelBench and kbstudy checks passed it, the violations, and
    the degenerate problems."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=title)
    for col in ("null", "role", "evaluated", "KB passes", "kbstudy passes", "violations"):
        table.add_column(col)
    for kind, group in findings.groupby("null", sort=True):
        evaluated = group[group.outcome == "evaluated"]
        role = "reference" if kind == "reference" else ("must fail" if kind in MUST_FAIL else "probe")
        table.add_row(kind, role, str(len(evaluated)), str(int(evaluated.kernelbench_correct.eq(True).sum())),
                      str(int(evaluated.kbstudy_correct.eq(True).sum())), str(int(group.violation.sum())))
    console.print(table)
    degenerate = findings[findings.degenerate.eq(True)].drop_duplicates("problem_name")
    for _, row in degenerate.iterrows():
        console.print(f"degenerate reference: {row.problem_name} (constant={row.degenerate_constant}, "
                      f"inputs without effect={row.degenerate_inputs})")
    for _, row in findings[findings.violation].iterrows():
        console.print(f"VIOLATION: null:{row['null']} on {row.problem_name}: kbstudy_correct={row.kbstudy_correct}")
