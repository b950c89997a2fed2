"""The correctness audit (notebook 02): null candidates and real candidates under KernelBench's check and kbstudy's.

Everything here reads record frames (``kbstudy.records.frames.load_frames``); nothing evaluates. The inputs are
record folders of any run -- the CPU calibration (``kbstudy calibrate``), the CPU default, the H200 runs -- and every
table keeps the *setting* a record was made in (hardware and size scale) apart, since a verdict on a problem scaled
to 1/64 of its size is not a verdict on the full-size problem.

What it computes:

* :func:`null_findings` -- one row per null candidate record, with its role (honest, must fail, probe), the
  reference's degeneracy and the calibration rule's violations (:func:`kbstudy.analysis.calibration.calibration_findings`),
  plus the reference's relative spread and the problem's *precision findings* (:func:`problem_findings`);
* :func:`null_summary`, :func:`outcome_grid` -- per null kind and per (problem, null) cell: which check passed it;
* :func:`zeros_pass_counts` -- "an all-zeros output passes KernelBench's check on N of M level-1 problems", per
  setting and precision, beside the paper's 4 of 60 (:data:`PAPER_ZEROS_PASS`);
* :func:`candidate_reverification` / :func:`disagreements` -- real (non-null) candidates: how many pass KernelBench's
  check but fail kbstudy's, and why (``kbstudy_failure``);
* :func:`threshold_evidence` and :func:`proposed_verdict` -- the spread of honest implementations against the
  must-fail nulls for each metric, and kbstudy's accuracy check of checks v4 (``docs/reference/verifier.md``, adopted from the
  replacement check proposed there) applied to the recorded metrics, so records made by checks v1-v3 can be judged
  as ``kbstudy.verdict.checks`` judges today;
* :func:`folder_findings` -- the calibration report of one record folder (what ``kbstudy calibrate`` prints).

Its figures are in :mod:`kbstudy.analysis.audit_figures`.
"""

from __future__ import annotations

import math
from typing import Sequence

import pandas as pd

from kbstudy.analysis.calibration import MUST_FAIL, calibration_findings, null_role, rule_breaches
from kbstudy.records.frames import load_frames, repeated_attempts
from kbstudy.verdict import checks as verify

#: The paper's count (Agarwal, Garg, Singhal 2026, as quoted in issue #3): an all-zeros output passes KernelBench's
#: check on 4 of the 60 level-1 problems it examined.
PAPER_ZEROS_PASS = {"source": "paper (Agarwal, Garg, Singhal 2026)", "level": 1, "passing": 4, "problems": 60}

#: The accuracy metrics that decide (record field names, in the order they are checked), their thresholds ``T_m[p]``
#: and the factors ``K`` and ``S``: one definition each, in ``kbstudy.verdict.checks`` (``docs/reference/verifier.md`` gives the reasons).
METRICS = verify.ACCURACY_METRICS
THRESHOLDS = verify.ACCURACY_THRESHOLDS
REFERENCE_FACTOR = verify.REFERENCE_FACTOR
LOW_SPREAD_FACTOR = verify.LOW_SPREAD_FACTOR
#: Outcome categories of one (problem, null) cell, in legend order (:func:`outcome_grid`).
#: Display order of the null kinds in tables and figures: honest ones, the must-fail nulls, then the probes.
NULL_ORDER = ("reference", "compile", *MUST_FAIL, "noise", "lowprec")
CELL_CATEGORIES = ("both pass", "KernelBench only", "kbstudy only", "both fail", "not evaluated")


# ------------------------------------------------------------------------------------------------ records


def records_overview(evaluations):
    """Records per (records folder, setting, precision): null and other candidate records, problems, outcomes other
    than ``evaluated``. Columns: ``records_folder``, ``setting``, ``precision``, ``levels``, ``problems``,
    ``null_records``, ``candidate_records``, ``not_evaluated``."""
    cols = ["records_folder", "setting", "precision", "levels", "problems", "null_records", "candidate_records",
            "not_evaluated"]
    if not len(evaluations):
        return pd.DataFrame(columns=cols)
    ev = evaluations.assign(is_null=evaluations.model_config.astype(str).str.startswith("null:"))
    rows = []
    for (folder, setting, precision), g in ev.groupby(["records_folder", "setting", "precision"], sort=True):
        rows.append({"records_folder": folder, "setting": setting, "precision": precision,
                     "levels": ",".join(str(v) for v in sorted(g.level.unique())),
                     "problems": g[["level", "problem_id"]].drop_duplicates().shape[0],
                     "null_records": int(g.is_null.sum()), "candidate_records": int((~g.is_null).sum()),
                     "not_evaluated": int((g.outcome != "evaluated").sum())})
    return pd.DataFrame(rows, columns=cols)


# ------------------------------------------------------------------------------------------------ null candidates


def null_findings(evaluations, references, precisions: Sequence[str] | None = None,
                  extra_columns: Sequence[str] = ()):
    """:func:`kbstudy.analysis.calibration.calibration_findings` with ``setting`` and ``records_folder``, restricted to
    ``precisions``, and with the per-problem precision findings of :func:`problem_findings` joined on (setting,
    precision, level, problem_id): ``rel_spread``, ``low_spread``, ``ref_rel_l2_error``, ``ill_conditioned``,
    ``unjudgeable``, ``flags_recorded`` (the flags as recorded on the reference record, or recomputed from the null
    candidates' metrics for records made before they were recorded).

    ``violation`` and ``excused`` are the calibration rule (:func:`kbstudy.analysis.calibration.rule_breaches`) applied with
    those flags, so a record of any checks version is read by the same rule. ``violation_explained`` names the problem
    finding behind a violation or an excused finding (``"degenerate"``, ``"low spread"``, ``"ill-conditioned"``,
    ``"unjudgeable"``) or is ``""``. ``extra_columns``: more columns of ``evaluations`` to carry through (e.g.
    ``error_message``). ``evaluations`` needs ``setting`` and ``records_folder``
    (``kbstudy.records.frames.load_frames(..., settings=True)`` adds them)."""
    ev = evaluations if precisions is None else evaluations[evaluations.precision.isin(list(precisions))]
    refs = references if precisions is None else references[references.precision.isin(list(precisions))]
    findings = calibration_findings(ev, refs, extra_columns=("setting", "records_folder", "coverage_sentinels",
                                                             *extra_columns))
    if not len(findings):
        return findings.assign(rel_spread=None, ref_rel_l2_error=None, ill_conditioned=None, flags_recorded=None,
                               violation_explained=None)
    per_problem = problem_findings(findings)
    # the recorded flags are replaced by the resolved ones (recorded where present, else recomputed)
    findings = findings.drop(columns=["low_spread", "unjudgeable"]).merge(
        per_problem[["setting", "precision", "level", "problem_id", "rel_spread", "low_spread", "ref_rel_l2_error",
                     "ill_conditioned", "unjudgeable", "flags_recorded"]],
        on=["setting", "precision", "level", "problem_id"], how="left")
    findings["violation"], findings["excused"] = rule_breaches(findings)
    breach = findings.violation | findings.excused
    explained = pd.Series("", index=findings.index)
    explained[breach & findings.ill_conditioned.eq(True)] = "ill-conditioned"
    # a low-spread problem's accepted constant is named by its cause (the output barely varies), even where the
    # reference's own error also makes it unjudgeable
    explained[breach & findings.unjudgeable.eq(True)] = "unjudgeable"
    explained[breach & findings.must_fail & findings.low_spread.eq(True)] = "low spread"
    explained[breach & findings.must_fail & findings.degenerate.eq(True)] = "degenerate"
    findings["violation_explained"] = explained
    return findings


def problem_findings(findings):
    """Per (setting, precision, level, problem): what the reference record and the null candidates say about the
    *problem*.

    * ``rel_spread``: the relative L2 error of ``null:mean``, i.e. ``||r - c||_2 / ||r||_2`` for the constant ``c``
      = the output's mean: the float64 reference's relative spread ``std(r) / RMS(r)`` (up to the rounding of ``c``);
      NaN where ``RMS(r) = 0`` (undefined: the problem is degenerate), as the reference process leaves it;
    * ``ref_rel_l2_error``: the reference's own error at the run's precision against float64, as recorded on the
      reference record (``reference_rel_l2_error``, worst over KernelBench's trials), else ``null:reference``'s
      relative L2 error (records of schema < 3);
    * ``low_spread``: the reference record's flag where recorded, else recomputed: more than one output element and
      ``rel_spread <= LOW_SPREAD_FACTOR * tolerance`` (:func:`kbstudy.verdict.checks.is_low_spread`): a constant comes within
      that factor of passing any relative check;
    * ``ill_conditioned``: ``ref_rel_l2_error`` above the fixed relative-L2 threshold -- an honest implementation at
      this precision cannot meet it (checks v4's adaptive bound admits it);
    * ``unjudgeable``: the reference record's flag where recorded (under the current rule:
      :func:`kbstudy.analysis.calibration.resolve_unjudgeable`), else recomputed: ``REFERENCE_FACTOR * ref_rel_l2_error >=
      min(1, rel_spread)`` (:func:`kbstudy.verdict.checks.is_unjudgeable`) -- the honest error at this precision is as large as
      the output's own spread, so even the adaptive bound admits a constant output;
    * ``flags_recorded``: ``low_spread`` and ``unjudgeable`` come from the reference record (else recomputed);
    * ``degenerate``, ``degenerate_constant``, ``degenerate_inputs``: the reference record's degeneracy test.

    Returns a DataFrame with those columns plus ``problem_name``, ``output_numel``, ``zeros_kernelbench`` (did
    ``null:zeros`` pass KernelBench's check) and ``findings`` (a readable summary, ``""`` if none).
    """
    keys = ["setting", "precision", "level", "problem_id"]
    cols = keys + ["problem_name", "output_numel", "rel_spread", "low_spread", "ref_rel_l2_error", "ill_conditioned",
                   "unjudgeable", "flags_recorded", "degenerate", "degenerate_constant", "degenerate_inputs",
                   "zeros_kernelbench", "findings"]
    if not len(findings):
        return pd.DataFrame(columns=cols)
    recorded = ["low_spread", "unjudgeable", "reference_rel_l2_error"]
    base = findings.reindex(columns=list(dict.fromkeys([*findings.columns, *recorded]))).drop_duplicates(
        keys, keep="last")[keys + ["problem_name", "output_numel", "output_rms", "degenerate", "degenerate_constant",
                                   "degenerate_inputs", *recorded]]

    def pick(kind, column, name):
        sub = findings[(findings["null"] == kind) & findings.outcome.eq("evaluated")]
        return sub.drop_duplicates(keys, keep="last")[keys + [column]].rename(columns={column: name})

    out = base.merge(pick("mean", "rel_l2_error", "rel_spread"), on=keys, how="left")
    out = out.merge(pick("reference", "rel_l2_error", "null_reference_rel_l2"), on=keys, how="left")
    out = out.merge(pick("zeros", "kernelbench_correct", "zeros_kernelbench"), on=keys, how="left")
    tol = out.precision.map(verify.REL_L2_THRESHOLD)
    # an all-zero output has no relative spread (the mean null's "relative" error is then absolute)
    out["rel_spread"] = out.rel_spread.where(~out.output_rms.eq(0.0))
    known = out.reference_rel_l2_error.notna()
    out["ref_rel_l2_error"] = out.reference_rel_l2_error.where(known, out.null_reference_rel_l2).astype(float)
    # the reference record's flags where it has them (schema >= 3), else the same rules on the nulls' metrics
    out["flags_recorded"] = out.low_spread.notna() & out.unjudgeable.notna()
    out["low_spread"] = [bool(f) if rec else verify.is_low_spread(n, spread, prec) for rec, f, n, spread, prec in
                         zip(out.flags_recorded, out.low_spread, out.output_numel, out.rel_spread, out.precision)]
    out["unjudgeable"] = [bool(f) if rec else verify.is_unjudgeable(e, spread if n > 1 else None)
                          for rec, f, e, spread, n in zip(out.flags_recorded, out.unjudgeable, out.ref_rel_l2_error,
                                                          out.rel_spread, out.output_numel)]
    out["ill_conditioned"] = out.ref_rel_l2_error > tol

    def describe(row) -> str:
        parts = []
        if row.degenerate is True:
            if row.degenerate_constant is True:
                parts.append("constant output")
            if isinstance(row.degenerate_inputs, list) and row.degenerate_inputs:
                parts.append(f"inputs {row.degenerate_inputs} without effect")
        if row.low_spread:
            parts.append(f"low spread ({row.rel_spread:.2g})" if pd.notna(row.rel_spread) else "low spread")
        if row.unjudgeable:
            parts.append(f"unjudgeable (reference error {row.ref_rel_l2_error:.2g})")
        elif row.ill_conditioned:
            parts.append(f"ill-conditioned (reference error {row.ref_rel_l2_error:.2g})")
        return "; ".join(parts)

    out["findings"] = [describe(r) for r in out.itertuples()]
    return out[cols].sort_values(["setting", "precision", "level", "problem_id"]).reset_index(drop=True)


def null_summary(findings):
    """Per (setting, precision, null kind): ``role``, ``evaluated`` (problems), ``kernelbench_passes``,
    ``kbstudy_passes``, ``kernelbench_only`` (passes KernelBench's check, fails kbstudy's), ``kbstudy_only``,
    ``not_evaluated`` (reference errors and other outcomes), ``violations`` (of the calibration rule) and ``excused``
    (breaches of it on flagged problems: :func:`kbstudy.analysis.calibration.rule_breaches`)."""
    cols = ["setting", "precision", "null", "role", "evaluated", "kernelbench_passes", "kbstudy_passes",
            "kernelbench_only", "kbstudy_only", "not_evaluated", "violations", "excused"]
    if not len(findings):
        return pd.DataFrame(columns=cols)
    rows = []
    order = {k: i for i, k in enumerate(NULL_ORDER)}
    for (setting, precision, kind), g in findings.groupby(["setting", "precision", "null"], sort=True):
        e = g[g.outcome == "evaluated"]
        kb, ks = e.kernelbench_correct.eq(True), e.kbstudy_correct.eq(True)
        rows.append({"setting": setting, "precision": precision, "null": kind, "role": null_role(kind),
                     "evaluated": len(e), "kernelbench_passes": int(kb.sum()), "kbstudy_passes": int(ks.sum()),
                     "kernelbench_only": int((kb & ~ks).sum()), "kbstudy_only": int((~kb & ks).sum()),
                     "not_evaluated": int((g.outcome != "evaluated").sum()), "violations": int(g.violation.sum()),
                     "excused": int(g.excused.sum())})
    out = pd.DataFrame(rows, columns=cols)
    out["_order"] = out["null"].map(lambda k: order.get(k, len(order)))
    return out.sort_values(["setting", "precision", "_order"]).drop(columns="_order").reset_index(drop=True)


def cell_category(kernelbench_correct, kbstudy_correct, outcome: str) -> str:
    """One of :data:`CELL_CATEGORIES` for a record's two verdicts."""
    if outcome != "evaluated":
        return "not evaluated"
    kb, ks = kernelbench_correct is True, kbstudy_correct is True
    return {(True, True): "both pass", (True, False): "KernelBench only", (False, True): "kbstudy only",
            (False, False): "both fail"}[(kb, ks)]


def outcome_grid(findings):
    """Long table, one row per (setting, precision, level, problem, null): ``category`` (:func:`cell_category`),
    ``code`` (its index in :data:`CELL_CATEGORIES`, for a heatmap) and ``problem_label`` (``L<level>/<id>``;
    DLRM-Bench's level 5 shows as ``DLRM/<id>``)."""
    cols = ["setting", "precision", "level", "problem_id", "problem_label", "problem_name", "null", "category",
            "code"]
    if not len(findings):
        return pd.DataFrame(columns=cols)
    out = findings.copy()
    out["category"] = [cell_category(a, b, o) for a, b, o in
                       zip(out.kernelbench_correct, out.kbstudy_correct, out.outcome)]
    out["code"] = out.category.map({c: i for i, c in enumerate(CELL_CATEGORIES)})
    out["problem_label"] = [problem_label(lv, pid) for lv, pid in zip(out.level, out.problem_id)]
    return out[cols].sort_values(["setting", "precision", "level", "problem_id", "null"]).reset_index(drop=True)


def problem_label(level: int, problem_id: int) -> str:
    """``"L1/23"``, or ``"DLRM/3"`` for DLRM-Bench (level :data:`kbstudy.suites.dlrm_bench.DLRM_LEVEL`)."""
    return f"DLRM/{int(problem_id)}" if int(level) == 5 else f"L{int(level)}/{int(problem_id)}"


def zeros_pass_counts(findings, kind: str = "zeros"):
    """"An all-zeros output passes KernelBench's check on N of M problems", per (setting, precision, level).

    Returns columns ``setting``, ``precision``, ``level``, ``problems`` (M: problems where ``null:<kind>`` was
    evaluated; ``findings`` hold one row per problem and null, the latest record, even across record folders), ``kernelbench_passes`` (N), ``kbstudy_passes``, ``passing`` (the problems' names, ``", "``-joined),
    ``statement``; then one row for :data:`PAPER_ZEROS_PASS` (setting ``"paper"``).
    """
    cols = ["setting", "precision", "level", "problems", "kernelbench_passes", "kbstudy_passes", "passing",
            "statement"]
    rows = []
    sub = findings[(findings["null"] == kind) & findings.outcome.eq("evaluated")] if len(findings) else findings
    for (setting, precision, level), g in (sub.groupby(["setting", "precision", "level"], sort=True)
                                           if len(sub) else []):
        kb = g[g.kernelbench_correct.eq(True)]
        names = ", ".join(n.removesuffix(".py") for n in kb.sort_values("problem_id").problem_name)
        rows.append({"setting": setting, "precision": precision, "level": int(level), "problems": len(g),
                     "kernelbench_passes": len(kb), "kbstudy_passes": int(g.kbstudy_correct.eq(True).sum()),
                     "passing": names,
                     "statement": f"all-{kind} passes KernelBench's check on {len(kb)} of {len(g)} "
                                  f"{'DLRM-Bench' if int(level) == 5 else f'level-{int(level)}'} problems"})
    p = PAPER_ZEROS_PASS
    rows.append({"setting": "paper", "precision": "-", "level": p["level"], "problems": p["problems"],
                 "kernelbench_passes": p["passing"], "kbstudy_passes": None, "passing": "",
                 "statement": f"all-zeros passes KernelBench's check on {p['passing']} of {p['problems']} "
                              f"level-{p['level']} problems ({p['source']})"})
    return pd.DataFrame(rows, columns=cols)


def kernelbench_holes(findings):
    """Must-fail nulls that pass KernelBench's check: one row per (setting, precision, problem) with ``nulls`` (the
    kinds, ``", "``-joined), ``kbstudy_rejects_all`` and ``max_abs_ref`` (the largest ``|reference|`` at precision, from
    ``null:zeros``'s KernelBench max difference: the zeros null passes ``allclose`` exactly when this is at most
    ``atol / (1 - rtol)``)."""
    cols = ["setting", "precision", "level", "problem_id", "problem_name", "nulls", "kbstudy_rejects_all",
            "max_abs_ref", "output_rms"]
    if not len(findings):
        return pd.DataFrame(columns=cols)
    keys = ["setting", "precision", "level", "problem_id"]
    holes = findings[findings.must_fail & findings.kernelbench_correct.eq(True)]
    zeros = findings[findings["null"] == "zeros"].drop_duplicates(keys, keep="last")
    max_ref = {tuple(k): v for k, v in zip(zeros[keys].itertuples(index=False), zeros.kernelbench_max_abs_diff)}
    rows = []
    for key, g in holes.groupby(keys, sort=True):
        rows.append({"setting": key[0], "precision": key[1], "level": int(key[2]), "problem_id": int(key[3]),
                     "problem_name": g.problem_name.iloc[0], "nulls": ", ".join(sorted(g["null"])),
                     "kbstudy_rejects_all": bool(g.kbstudy_correct.ne(True).all()),
                     "max_abs_ref": max_ref.get(tuple(key)), "output_rms": g.output_rms.iloc[0]})
    return pd.DataFrame(rows, columns=cols)


def violations(findings):
    """The calibration rule's breaches (:func:`null_findings` rows with ``violation`` or ``excused``), violations
    first, with the columns a reader needs: setting, precision, problem, null, role, verdicts, failure, the three
    metrics, the problem's relative spread and reference error, ``excused`` (the breach is on a flagged problem, see
    :func:`kbstudy.analysis.calibration.rule_breaches`) and ``violation_explained``."""
    cols = ["setting", "precision", "level", "problem_id", "problem_name", "null", "role", "kernelbench_correct",
            "kbstudy_correct", "kbstudy_failure", "rel_l2_error", "max_abs_error_normalized",
            "elementwise_rel_error_max", "rel_spread", "ref_rel_l2_error", "output_numel", "excused",
            "violation_explained"]
    if not len(findings):
        return pd.DataFrame(columns=cols)
    breaches = findings[findings.violation | findings.excused]
    return breaches.sort_values("excused", kind="stable")[cols].reset_index(drop=True)


# ------------------------------------------------------------------------------------------------ real candidates


def candidate_records(evaluations, precisions: Sequence[str] | None = None):
    """The records of real candidates (every ``model_config`` not starting with ``null:``), restricted to
    ``precisions``, each attempt once; adds ``verdicts`` (:func:`cell_category`) and fills a missing
    ``problem_version`` with ``"current"``.

    An attempt is :data:`kbstudy.records.frames.ATTEMPT_IDENTITY` (configuration, candidate source, problem and its
    version, sample, precision, size, hardware). Where several folders hold it (a smoke run and the full run, or an
    earlier run of the same kernels: gemini-1.5-flash's in ``kernelbench/h200/level1-fp32`` and the leaderboard run), the record of
    the folder listed first is kept (``evaluations`` in the loader's folder order): the rule of
    ``kbstudy.records.frames.load_frames(..., first_attempts=True)`` (notebook 01, the release), through the same
    :func:`kbstudy.records.frames.repeated_attempts`. The null candidates are left as they are."""
    ev = evaluations[~evaluations.model_config.astype(str).str.startswith("null:")]
    if precisions is not None:
        ev = ev[ev.precision.isin(list(precisions))]
    ev = ev[~repeated_attempts(ev)]
    ev = ev.copy()
    ev["verdicts"] = [cell_category(a, b, o) for a, b, o in zip(ev.kernelbench_correct, ev.kbstudy_correct,
                                                                  ev.outcome)]
    # records made before problem versions were recorded are of the current problems
    ev["problem_version"] = ev["problem_version"].fillna("current") if "problem_version" in ev else "current"
    return ev


def candidate_reverification(evaluations, precisions: Sequence[str] | None = None):
    """Per (setting, precision, problem version, model configuration): ``records``, ``skipped`` (not run here, e.g.
    CUDA on a CPU), ``evaluated``, ``kernelbench_correct``, ``kbstudy_correct``, ``kernelbench_only`` (pass
    KernelBench's check, fail kbstudy's), ``kbstudy_only`` and ``failures`` (``kbstudy_failure: count`` of the
    KernelBench-only records). Problem versions stay apart: a leaderboard kernel has a record on the v0 problem it was
    written for and one on the current problem."""
    cols = ["setting", "precision", "problem_version", "model_config", "records", "skipped", "evaluated",
            "kernelbench_correct", "kbstudy_correct", "kernelbench_only", "kbstudy_only", "failures"]
    ev = candidate_records(evaluations, precisions)
    rows = []
    for (setting, precision, version, config), g in ev.groupby(["setting", "precision", "problem_version",
                                                                "model_config"], sort=True):
        only = g[g.verdicts == "KernelBench only"]
        counts = only.kbstudy_failure.fillna("none").value_counts().sort_index()
        rows.append({"setting": setting, "precision": precision, "problem_version": version, "model_config": config,
                     "records": len(g),
                     "skipped": int((g.outcome == "skipped").sum()), "evaluated": int((g.outcome == "evaluated").sum()),
                     "kernelbench_correct": int(g.kernelbench_correct.eq(True).sum()),
                     "kbstudy_correct": int(g.kbstudy_correct.eq(True).sum()),
                     "kernelbench_only": len(only), "kbstudy_only": int((g.verdicts == "kbstudy only").sum()),
                     "failures": ", ".join(f"{k}: {v}" for k, v in counts.items())})
    return pd.DataFrame(rows, columns=cols)


def disagreements(evaluations, precisions: Sequence[str] | None = None):
    """Real-candidate records on which the two checks disagree, one row each: setting, precision, configuration,
    problem, ``verdicts``, ``kbstudy_failure``, the metrics and kbstudy's detail message (record metadata)."""
    cols = ["setting", "precision", "problem_version", "model_config", "level", "problem_id", "problem_name",
            "verdicts", "kbstudy_failure", "rel_l2_error", "coverage", "kernelbench_max_abs_diff", "detail"]
    ev = candidate_records(evaluations, precisions)
    ev = ev[ev.verdicts.isin(["KernelBench only", "kbstudy only"])]
    if not len(ev):
        return pd.DataFrame(columns=cols)
    ev = ev.assign(detail=ev.metadata.map(lambda m: m.get("kbstudy_detail") if isinstance(m, dict) else None))
    return ev[cols].sort_values(["setting", "precision", "problem_version", "model_config", "level",
                                 "problem_id"]).reset_index(drop=True)


# ------------------------------------------------------------------------------------------------ thresholds


def honest_rows(findings, evaluations, precisions: Sequence[str] | None = None):
    """The records that stand for honest implementations, one row each with ``source`` and the three metrics:
    ``null:reference`` and ``null:compile`` (evaluated); ``null:lowprec`` at fp32 (fp16 arithmetic, i.e. TF32's unit
    roundoff, which kbstudy's fp32 threshold admits on purpose: the stand-in for a GPU's TF32 kernels on a CPU); and
    real candidates that both checks accept (``candidate: <configuration>``)."""
    cols = ["setting", "precision", "level", "problem_id", "problem_name", "source", "kbstudy_correct", *METRICS]
    parts = []
    if len(findings):
        f = findings[findings.outcome.eq("evaluated")]
        honest = f[f.role.eq("honest")].assign(source=lambda x: "null:" + x["null"])
        tf32 = f[(f["null"] == "lowprec") & (f.precision == "fp32")].assign(source="null:lowprec (fp32, TF32-like)")
        parts += [honest, tf32]
    cand = candidate_records(evaluations, precisions)
    cand = cand[cand.verdicts.eq("both pass")]
    if len(cand):
        parts.append(cand.assign(source="candidate: " + cand.model_config.astype(str)))
    parts = [p[cols] for p in parts if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)


def threshold_evidence(findings, evaluations, precisions: Sequence[str] | None = None):
    """For each (precision, metric): the threshold of :data:`THRESHOLDS`; the worst value of an honest
    implementation (:func:`honest_rows`: the reference, ``torch.compile``, real candidates both checks accept) and where
    it was seen; the worst value of the TF32 stand-in (``null:lowprec`` at fp32: fp16 inputs, arithmetic and output, a
    pessimistic bound on a GPU's TF32 kernels, which round only the matmul inputs) where kbstudy's relative-L2 check
    admits it (the other metrics must not reject what that check admits on purpose); and the smallest value of a
    must-fail null. Margins: ``threshold / honest_max`` (> 1: every honest implementation is within the fixed
    threshold) and ``must_fail_min / threshold`` (> 1: every must-fail null fails on this metric alone; only the
    relative L2 error is meant to reject constants, the other two metrics target few-element errors).

    Over all settings together. Problems that are degenerate or ill-conditioned at the precision (unjudgeable ones
    included; :func:`problem_findings`) are left out of the honest side -- the fixed thresholds are for
    well-conditioned problems, the adaptive bound of :func:`proposed_verdict` covers the others -- and degenerate,
    low-spread and unjudgeable problems and vacuous nulls of the must-fail side; partial writers are judged by
    coverage, not by these metrics, so they are left out of the must-fail side too. Returns a DataFrame with columns
    ``precision``, ``metric``, ``threshold``, ``honest_n``, ``honest_max``, ``honest_max_at``, ``honest_margin``,
    ``tf32_proxy_max``, ``tf32_proxy_max_at``, ``must_fail_n``, ``must_fail_min``, ``must_fail_min_at``,
    ``must_fail_margin``."""
    cols = ["precision", "metric", "threshold", "honest_n", "honest_max", "honest_max_at", "honest_margin",
            "tf32_proxy_max", "tf32_proxy_max_at", "must_fail_n", "must_fail_min", "must_fail_min_at",
            "must_fail_margin"]
    keys = ["setting", "precision", "level", "problem_id"]
    honest = honest_rows(findings, evaluations, precisions)
    if len(findings) and len(honest):
        flagged = problem_findings(findings)
        flagged = flagged[flagged.degenerate.eq(True) | flagged.ill_conditioned.eq(True)][keys].assign(_flagged=True)
        honest = honest.merge(flagged, on=keys, how="left")
        honest = honest[~honest._flagged.eq(True)].drop(columns="_flagged")
    proxy = honest[honest.source.str.startswith("null:lowprec") & honest.kbstudy_correct.eq(True)] if len(honest) \
        else honest
    honest = honest[~honest.source.str.startswith("null:lowprec")] if len(honest) else honest
    mf = findings[findings.must_fail & ~findings.vacuous & findings.outcome.eq("evaluated")
                  & ~findings.degenerate.eq(True) & ~findings.low_spread.eq(True) & ~findings.unjudgeable.eq(True)
                  & ~findings["null"].astype(str).str.startswith("partial")] if len(findings) else findings

    def extreme(frame, precision, metric, largest, name):
        sub = frame[frame.precision == precision].dropna(subset=[metric]) if len(frame) else frame
        if not len(sub):
            return 0, None, None
        values = sub[metric].astype(float)
        row = sub.loc[values.idxmax() if largest else values.idxmin()]
        return len(sub), float(row[metric]), f"{name(row)} {problem_label(row.level, row.problem_id)}"

    rows = []
    precs = sorted(set(honest.precision if len(honest) else []) | set(mf.precision if len(mf) else []))
    for precision in precs:
        for metric in METRICS:
            threshold = THRESHOLDS[metric].get(precision)
            hn, hmax, hat = extreme(honest, precision, metric, True, lambda r: r.source)
            _, pmax, pat = extreme(proxy, precision, metric, True, lambda r: "null:lowprec")
            mn, mmin, mat = extreme(mf, precision, metric, False, lambda r: f"null:{r['null']}")
            rows.append({"precision": precision, "metric": metric, "threshold": threshold, "honest_n": hn,
                         "honest_max": hmax, "honest_max_at": hat,
                         "honest_margin": (threshold / hmax if hmax else math.inf) if hmax is not None else None,
                         "tf32_proxy_max": pmax, "tf32_proxy_max_at": pat, "must_fail_n": mn, "must_fail_min": mmin,
                         "must_fail_min_at": mat, "must_fail_margin": mmin / threshold if mmin is not None else None})
    return pd.DataFrame(rows, columns=cols)


def reference_errors(findings):
    """The reference's own metrics at the run's precision per (setting, precision, level, problem_id) (columns
    ``ref_<metric>``): ``e_ref``, what the adaptive bound of :func:`proposed_verdict` scales. Taken from the reference
    record (``reference_<metric>``, worst over KernelBench's trials) where it has them (schema >= 3), else from the
    ``null:reference`` record's metrics (the same comparison, made in the candidate's process)."""
    keys = ["setting", "precision", "level", "problem_id"]
    cols = keys + [f"ref_{m}" for m in METRICS]
    if not len(findings):
        return pd.DataFrame(columns=cols)
    recorded = findings.reindex(columns=list(dict.fromkeys([*findings.columns, *(f"reference_{m}" for m in METRICS)])))
    recorded = recorded.drop_duplicates(keys, keep="last")[keys + [f"reference_{m}" for m in METRICS]]
    ref = findings[(findings["null"] == "reference") & findings.outcome.eq("evaluated")]
    null_ref = ref.drop_duplicates(keys, keep="last")[keys + list(METRICS)]
    out = recorded.merge(null_ref, on=keys, how="left")
    for m in METRICS:
        mine = pd.to_numeric(out[f"reference_{m}"], errors="coerce")
        out[f"ref_{m}"] = mine.where(mine.notna(), pd.to_numeric(out[m], errors="coerce"))
    return out[cols].reset_index(drop=True)


def proposed_verdict(frame, references_errors=None):
    """kbstudy's accuracy check as of checks v4 (``docs/reference/verifier.md``; :func:`kbstudy.verdict.checks.accuracy_failure`, the
    function the verifier itself calls) applied to recorded metrics, so records made by checks v1-v3 can be read as
    the verifier judges today.

    Per row: accepted when kbstudy's form, coverage, non-finite and integrity checks passed (``kbstudy_correct``, or
    ``kbstudy_failure`` one of ``kbstudy.verdict.checks.ACCURACY_FAILURES``: only an accuracy bound failed) and
    :func:`kbstudy.verdict.checks.accuracy_failure` finds no metric of :data:`METRICS` above ``max(T_m[precision],
    REFERENCE_FACTOR * ref_m)``, ``ref_m`` being the reference's own value at that precision (``references_errors``,
    :func:`reference_errors`; the fixed threshold alone where unknown).

    Args:
        frame: evaluation rows (records or :func:`null_findings` rows) with ``setting``, ``precision``, ``level``,
            ``problem_id``, ``outcome``, ``kbstudy_correct``, ``kbstudy_failure``, ``coverage_sentinels`` and the
            metrics.
        references_errors: :func:`reference_errors` of the same records.
    Returns a copy of ``frame`` with ``proposed_correct`` (True/False; None for a record made before the metrics were
    recorded, i.e. without ``coverage_sentinels``, unless a recorded metric already fails; a metric missing from a
    newer record is not applicable, as for integer outputs, which are compared exactly) and ``proposed_failure`` (the
    failure name of the first failing metric, ``"rel_l2"``, ``"max_abs"`` or ``"elementwise"``; the kbstudy failure
    or outcome when an earlier check failed; or None). Approximate by construction: the records keep each metric's
    worst value over trials, and the reference's over KernelBench's trials, where the verifier bounds each trial by
    its own input set's ``e_ref``.
    """
    keys = ["setting", "precision", "level", "problem_id"]
    out = frame.copy()
    refs = references_errors if references_errors is not None else pd.DataFrame(
        columns=keys + [f"ref_{m}" for m in METRICS])
    out = out.drop(columns=[c for c in refs.columns if c.startswith("ref_") and c in out.columns]).merge(
        refs, on=keys, how="left")
    accuracy_failures = set(verify.ACCURACY_FAILURES.values())
    correct, failure = [], []
    for row in out.itertuples(index=False):
        if row.outcome != "evaluated":
            correct.append(False)
            failure.append(row.outcome)
            continue
        if row.kbstudy_correct is not True and row.kbstudy_failure not in accuracy_failures:
            correct.append(False)
            failure.append(row.kbstudy_failure)
            continue
        metrics = {m: getattr(row, m) for m in METRICS}
        why = verify.accuracy_failure(metrics, {m: getattr(row, f"ref_{m}") for m in METRICS}, row.precision)
        # made by a verifier that records every metric (a missing one is then not applicable), or older: unknown
        measured = isinstance(row.coverage_sentinels, (list, tuple))
        unknown = not measured and any(v is None or (isinstance(v, float) and math.isnan(v))
                                       for v in metrics.values())
        correct.append(False if why else (None if unknown else True))
        failure.append(why)
    out["proposed_correct"] = correct
    out["proposed_failure"] = failure
    return out


def proposed_summary(findings):
    """Per (precision, null kind): how many evaluated nulls the recorded verdict (``kbstudy_passes``, of the checks
    version that made the record) and checks v4's accuracy check on the recorded metrics (:func:`proposed_verdict`)
    accept, and the latter's violations of the calibration rule (:func:`kbstudy.analysis.calibration.rule_breaches`: a
    must-fail null accepted on a problem that is not flagged degenerate, low-spread or unjudgeable, the null not
    vacuous; or an honest one rejected on a judgeable problem). Columns: ``precision``, ``null``, ``role``,
    ``evaluated``, ``kbstudy_passes``, ``proposed_passes``, ``proposed_unknown`` (a metric not recorded),
    ``proposed_violations``."""
    cols = ["precision", "null", "role", "evaluated", "kbstudy_passes", "proposed_passes", "proposed_unknown",
            "proposed_violations"]
    if not len(findings):
        return pd.DataFrame(columns=cols)
    judged = proposed_verdict(findings[findings.outcome.eq("evaluated")], reference_errors(findings))
    violation, _ = rule_breaches(judged.assign(kbstudy_correct=judged.proposed_correct))
    judged = judged.assign(bad=violation & judged.proposed_correct.notna())
    rows = []
    for (precision, kind), g in judged.groupby(["precision", "null"], sort=True):
        rows.append({"precision": precision, "null": kind, "role": null_role(kind), "evaluated": len(g),
                     "kbstudy_passes": int(g.kbstudy_correct.eq(True).sum()),
                     "proposed_passes": int(g.proposed_correct.eq(True).sum()),
                     "proposed_unknown": int(g.proposed_correct.isna().sum()),
                     "proposed_violations": int(g.bad.sum())})
    return pd.DataFrame(rows, columns=cols)


def metric_values(findings, evaluations, precisions: Sequence[str] | None = None):
    """Long table for :func:`metric_strips`: one row per (record, metric) with ``group`` (``honest``, ``TF32 proxy``,
    ``noise``, ``zeros``, ``mean``), ``precision``, ``metric`` and ``value`` (zero values are kept as 1e-12 so a log
    axis can show them). Degenerate, ill-conditioned (unjudgeable included) and low-spread problems, vacuous nulls and
    TF32-proxy records that kbstudy's relative-L2 check rejects are left out, as in :func:`threshold_evidence`."""
    keys = ["setting", "precision", "level", "problem_id"]
    honest = honest_rows(findings, evaluations, precisions)
    honest = honest.assign(group=honest.source.map(lambda s: "TF32 proxy" if s.startswith("null:lowprec") else "honest"))
    honest = honest[honest.group.eq("honest") | honest.kbstudy_correct.eq(True)]  # the proxy where L2 admits it
    nulls = findings[findings.outcome.eq("evaluated") & findings["null"].isin(["zeros", "mean", "noise"])
                     & ~findings.vacuous & ~findings.low_spread.eq(True)] if len(findings) else findings
    nulls = nulls.assign(group=nulls["null"])
    frames = [f[keys + ["group", *METRICS]] for f in (honest, nulls) if len(f)]
    if not frames:
        return pd.DataFrame(columns=keys + ["group", "metric", "value"])
    both = pd.concat(frames, ignore_index=True)
    flagged = problem_findings(findings)
    flagged = flagged[flagged.degenerate.eq(True) | flagged.ill_conditioned.eq(True)][keys].assign(_flagged=True)
    both = both.merge(flagged, on=keys, how="left")
    both = both[~both._flagged.eq(True)].drop(columns="_flagged")
    long = both.melt(id_vars=keys + ["group"], value_vars=list(METRICS), var_name="metric", value_name="value")
    long = long.dropna(subset=["value"])
    long["value"] = long["value"].astype(float).clip(lower=1e-12)
    return long.reset_index(drop=True)


def folder_findings(store):
    """The calibration findings of one record folder (``store``: a :class:`kbstudy.records.store.RecordStore`) as
    notebook 02 reads them (:func:`null_findings`, with ``error_message``): a record made under older checks is judged
    with the problem flags resolved the same way (recorded, or recomputed from the null candidates' metrics where its
    reference record predates them), so ``kbstudy calibrate``'s report and the audit count the same violations."""
    evaluations, references, _ = load_frames([store.folder], label="relative", root=store.folder.parent,
                                             settings=True)
    return null_findings(evaluations, references, extra_columns=("error_message",))
