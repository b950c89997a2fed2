"""Null-candidate calibration: which null candidates pass which verdict, per problem and precision.

Rule: on a problem that is not *flagged* (``ReferenceRecord.degenerate``, ``low_spread`` and ``unjudgeable`` all
false: ``docs/verifier.md``, "The replacement check", step 2), kbstudy's verdict must reject every *must-fail* null:
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

:func:`run_calibration` is what ``kbstudy calibrate`` runs; :func:`calibration_findings` turns the records into one
row per (run, problem, precision, null) with its role and whether it violates the rule.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, NamedTuple, Sequence

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
    import math

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
    import pandas as pd

    from kbstudy.verdict import checks as verify
    from kbstudy.verdict.trials import VARIANTS

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
        out.append(bool(flag) or verify.is_unjudgeable(e_ref, spread, rescue))
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
    import pandas as pd

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


class CalibrationTotals(NamedTuple):
    """What :func:`run_calibration` found over its precisions: ``violations`` of the calibration rule (must be 0), and
    ``not_evaluated`` null records (latest per null and problem) whose outcome is not ``evaluated`` (a machine
    failure, or a problem the null or the reference cannot run): no verdict, so not covered by the rule."""

    violations: int
    not_evaluated: int


def print_calibration(findings, title: str) -> None:
    """A rich table: per null kind, how many problems' KernelBench and kbstudy checks passed it, how many records were
    not evaluated, the violations; then the flagged problems, and the records not evaluated with their outcome and
    error (:data:`NOT_EVALUATED_LINES` at most). ``findings``: :func:`calibration_findings` (with ``error_message``
    among its extra columns for the errors)."""
    from rich.console import Console
    from rich.table import Table

    from kbstudy.records.schema import error_headline

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


def complete_problems(evaluations, kinds: Sequence[str], size_scale: float, hardware: str) -> set[str]:
    """The ``problem_sha256`` of problems whose latest record of every null kind in ``kinds`` (without the ``null:``
    prefix) at ``size_scale`` on ``hardware`` is ``evaluated``, whatever checks version made it (what
    ``kbstudy calibrate --skip-complete`` leaves out, so a calibration begun under an older version is completed
    rather than redone). ``evaluations``: a frame of evaluation records."""
    if not len(evaluations):
        return set()
    ev = evaluations[evaluations.model_config.isin([f"null:{k}" for k in kinds])
                     & evaluations.size_scale.eq(float(size_scale)) & evaluations.hardware.eq(hardware)]
    latest = latest_per(ev, ["problem_sha256", "model_config"])
    done = latest[latest.outcome.eq("evaluated")].groupby("problem_sha256").model_config.nunique()
    return set(done[done >= len(set(kinds))].index)


def run_calibration(problems: Sequence, out: str | Path, precisions: Iterable[str], *, nulls: Sequence[str],
                    device: str = "auto", size_scale: float = 1.0, trials: int = 5, run_timeout_s: float = 300.0,
                    cache_dir: str = ".cache/kbstudy", progress: bool = True,
                    echo: Callable[[str], None] = print, selection: list[dict] | None = None,
                    retry_outcomes: Sequence[str] = (), skip_complete: bool = False) -> CalibrationTotals:
    """Evaluate ``null:reference`` and ``nulls`` on every problem, one record folder per precision
    (``<out>-<precision>``), through :func:`kbstudy.harness.orchestrator.evaluate_batch` with no timing (calibration times
    nothing); print each precision's findings on ``problems`` (:func:`print_calibration`; the folder may hold others,
    e.g. another lane's).

    Args:
        problems: :class:`kbstudy.harness.problems.Problem` objects (KernelBench or DLRM-Bench).
        out: folder prefix; records go to ``<out.parent>/<out.name>-<precision>`` (resumed if present).
        precisions: ``fp32``, ``fp16`` and/or ``bf16``.
        nulls: null kinds (``kbstudy.harness.candidates.NULL_CANDIDATES``) to run beside ``reference``.
        device, size_scale, trials, run_timeout_s, cache_dir, progress: as :class:`kbstudy.harness.orchestrator.EvalConfig`.
        echo: where progress lines go.
        selection: the report of :func:`select_by_footprint`, if the problems were selected by it: written as
            ``selection.jsonl`` (one line per problem considered, sorted keys) into each precision's folder.
        retry_outcomes: outcomes whose records are evaluated again (``EvalConfig.retry_outcomes``), e.g.
            ``("out_of_memory", "crashed")`` after a run whose lanes shared one GPU.
        skip_complete: leave out the problems :func:`complete_problems` finds in the precision's folder (made on
            this device's hardware at this size, under any checks version).
    Returns :class:`CalibrationTotals` over the precisions: the violations (:func:`calibration_findings`; excused
    findings on flagged problems are not counted) and the null records not evaluated. Raises ``KeyError`` for an
    unknown null kind and ``RuntimeError`` from ``evaluate_batch``.
    """
    from kbstudy.harness.candidates import null_candidates
    from kbstudy.harness.orchestrator import EvalConfig, evaluate_batch
    from kbstudy.records.store import RecordStore

    out = Path(out)
    kinds = ("reference",) + tuple(k for k in nulls if k != "reference")
    cands = [c for p in problems for c in null_candidates(p, kinds)]
    failures = not_evaluated = 0
    for prec in precisions:
        folder = out.parent / f"{out.name}-{prec}"
        store = RecordStore(folder)
        if selection is not None:
            import json

            folder.mkdir(parents=True, exist_ok=True)
            (folder / "selection.jsonl").write_text("".join(json.dumps(row, sort_keys=True) + "\n"
                                                            for row in selection))
        cfg = EvalConfig(run=folder.name, precision=prec, device=device, size_scale=size_scale, trials=trials,
                         compile_baseline=False, eager_baseline=False, time_candidates=False,
                         run_timeout_s=run_timeout_s, cache_dir=str(cache_dir), progress=progress,
                         retry_outcomes=tuple(retry_outcomes))
        todo = cands
        if skip_complete:
            from kbstudy.harness.orchestrator import hardware_label, resolve_device

            done = complete_problems(store.evaluations_frame(), kinds, size_scale,
                                     hardware_label(resolve_device(device)))
            left = [p for p in problems if p.sha256 not in done]
            todo = [c for p in left for c in null_candidates(p, kinds)]
            echo(f"{folder}: {len(problems) - len(left)} problems already complete, {len(left)} to calibrate")
        summary = evaluate_batch(problems, todo, store, cfg)
        echo(f"{folder}: {summary.written} records written, {summary.already_done} already present, "
             f"{summary.seconds:.1f} s")
        findings = folder_findings(store)
        if len(findings):  # this call's problems only: lanes share a folder, and each reports (and fails) on its own
            ours = {(int(p.level), int(p.problem_id)) for p in problems}
            findings = findings[[(int(lv), int(pid)) in ours for lv, pid in zip(findings.level, findings.problem_id)]]
        print_calibration(findings, f"calibration {prec}, size scale {size_scale}")
        if len(findings):
            failures += int(findings["violation"].sum())
            not_evaluated += int((findings["outcome"] != "evaluated").sum())
    return CalibrationTotals(failures, not_evaluated)


def folder_findings(store):
    """The calibration findings of one record folder (``store``: a :class:`kbstudy.records.store.RecordStore`) as notebook 2
    reads them (:func:`kbstudy.analysis.audit.null_findings`, with ``error_message``): a record made under older checks is
    judged with the problem flags resolved the same way (recorded, or recomputed from the null candidates' metrics
    where its reference record predates them), so this report and the audit count the same violations."""
    from kbstudy.analysis.audit import load_records, null_findings

    # the audit's loader adds the ``setting`` and ``records_dir`` columns null_findings keys on
    evaluations, references = load_records([store.folder], root=store.folder.parent)
    return null_findings(evaluations, references, extra_columns=("error_message",))


# ------------------------------------------------------------------------------------------------ problem selection


def problem_footprint(problem, size_scale: float = 1.0) -> dict:
    """The size of one forward call of ``problem`` at ``size_scale``, measured on PyTorch's ``meta`` device (shapes
    only: no memory, no arithmetic, the same answer on any machine).

    The scaled source (:func:`kbstudy.harness.problems.scale_source`) is executed in a fresh namespace of this process, its
    ``Model`` built and called under ``torch.device("meta")`` with ``torch.utils.flop_counter.FlopCounterMode``
    counting (matmul, convolution and attention FLOPs, 2 per multiply-add).

    Returns ``{"output_numel": int|None (first output's elements), "input_numel": int|None (sum over tensor inputs),
    "flops": int|None (per forward call), "error": str|None}``; ``None`` values and the error text when the problem
    cannot run on the meta device (an op without a meta kernel, ``.item()``, or a size the scaling broke). Never
    raises.
    """
    import warnings

    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from kbstudy.harness.problems import scale_source

    result = {"output_numel": None, "input_numel": None, "flops": None, "error": None}
    try:
        namespace: dict = {}
        exec(compile(scale_source(problem.source, size_scale), problem.name, "exec"), namespace)  # noqa: S102
        with warnings.catch_warnings(), torch.device("meta"), torch.no_grad():
            warnings.simplefilter("ignore")
            model = namespace["Model"](*namespace["get_init_inputs"]())
            inputs = namespace["get_inputs"]()
            counter = FlopCounterMode(display=False)
            with counter:
                out = model(*inputs)
        first = out[0] if isinstance(out, (tuple, list)) else out
        result["output_numel"] = int(first.numel()) if isinstance(first, torch.Tensor) else 1
        result["input_numel"] = int(sum(x.numel() for x in inputs if isinstance(x, torch.Tensor)))
        result["flops"] = int(counter.get_total_flops())
    except Exception as exc:  # noqa: BLE001 - a problem the meta device cannot run is reported, not raised
        result["error"] = f"{type(exc).__name__}: {exc}"[:300]
    return result


#: Elements (inputs plus first output, :func:`problem_footprint`) above which a problem is calibrated in the *solo*
#: lane, alone on its GPU, rather than in a lane that shares the GPU. At full size one lane needed about 100 GB for
#: level-1 5_Matrix_scalar_multiplication (2.1e9 elements of input and output: about 50 bytes per element, for the
#: float64 references and the input sets; outputs/records/kernelbench/h200/calibration/README.md, session 3), so a shared lane
#: under this bound needs at most about 20 GB, and three of them fit an H200's 141 GB with room for their CUDA
#: contexts and the allocator's caches.
SHARED_LANE_NUMEL = 4 * 10**8
#: The lane name :func:`assign_lanes` gives the problems too large to share a GPU (or whose size is unknown).
SOLO_LANE = "solo"


def cached_footprints(problems: Sequence, size_scale: float = 1.0, cache_dir: str | Path | None = None) -> list[dict]:
    """:func:`problem_footprint` of each problem, in order, remembered in ``<cache_dir>/footprints.jsonl`` (one line
    per problem source SHA-256 and size scale; a problem whose source changes gets a new line). The cache is read once
    and only the problems it lacks are sized and appended. The meta-device run costs up to ~25 s of CPU for a level-3
    RNN (38_LSTMBidirectional), 95-130 s for levels 2-3 together on one core, which every calibration lane would
    otherwise pay again. ``cache_dir=None`` computes without caching. Never raises; an unwritable cache is skipped."""
    if cache_dir is None:
        return [problem_footprint(p, size_scale) for p in problems]
    from kbstudy.records.store import append_jsonl, iter_jsonl

    path = Path(cache_dir) / "footprints.jsonl"
    fields = ("output_numel", "input_numel", "flops", "error")
    known: dict = {}
    try:
        for row in iter_jsonl(path):
            known[(row.get("problem_sha256"), row.get("size_scale"))] = {k: row.get(k) for k in fields}
    except OSError:
        pass
    out = []
    for problem in problems:
        key = (problem.sha256, float(size_scale))
        if key not in known:
            known[key] = problem_footprint(problem, size_scale)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                append_jsonl(path, {"problem_sha256": key[0], "size_scale": key[1], "problem_name": problem.name,
                                    **known[key]})
            except OSError:
                pass
        out.append(known[key])
    return out


def assign_lanes(problems: Sequence, lanes: int, size_scale: float = 1.0, *, solo_numel: int = SHARED_LANE_NUMEL,
                 cache_dir: str | Path | None = None) -> list[dict]:
    """Split ``problems`` between ``lanes`` calibration processes that share one GPU, plus a *solo* lane that runs
    alone after them. A calibration times nothing, so lanes sharing a GPU change no recorded value; they only overlap
    the per-problem costs that leave the GPU idle (process and CUDA context start, input generation, the float64
    reference, the host side of the checks: about 13 s per level-2 problem in one lane, session 6).

    A problem goes to the solo lane when its inputs plus first output exceed ``solo_numel`` elements, or when the meta
    device cannot size it (:func:`problem_footprint`'s ``error``); the others are dealt round-robin, in their order,
    to lanes ``0 .. lanes-1``. Deterministic, and the same on any machine with the same packages (shapes from the meta
    device; a problem that imports a module the machine lacks, e.g. ``einops``, is unsizable there), so every lane
    process on one machine computes the same plan on its own.

    Returns one dict per problem, in order: ``level``, ``problem_id``, ``problem_name``, ``numel`` (int or ``None``),
    ``lane`` (int, or :data:`SOLO_LANE`), ``error``. Raises ``ValueError`` if ``lanes < 1``.
    """
    if lanes < 1:
        raise ValueError(f"lanes must be at least 1, not {lanes}")
    plan, shared = [], 0
    for problem, fp in zip(problems, cached_footprints(problems, size_scale, cache_dir)):
        numel = None if fp["error"] else int(fp["input_numel"] or 0) + int(fp["output_numel"] or 0)
        if numel is None or numel > solo_numel:
            lane: int | str = SOLO_LANE
        else:
            lane, shared = shared % lanes, shared + 1
        plan.append({"level": problem.level, "problem_id": problem.problem_id, "problem_name": problem.name,
                     "numel": numel, "lane": lane, "error": fp["error"]})
    return plan


def select_by_footprint(problems: Sequence, size_scale: float, *, max_output_numel: int, max_input_numel: int,
                        max_flops: float) -> tuple[list, list[dict]]:
    """The problems whose :func:`problem_footprint` at ``size_scale`` is within every bound: the deterministic,
    machine-independent subset rule of the CPU calibration for KernelBench levels 2 and 3 (their module-level sizes
    scale, but spatial sizes written inside ``get_inputs`` do not, so some scaled problems stay GPU-sized).

    Returns ``(kept, report)``: the kept problems in their order, and one dict per problem (``level``,
    ``problem_id``, ``problem_name``, the footprint's fields, ``kept`` bool, ``reason`` str) for the record of what
    was left out and why. Problems the meta device cannot run are left out (reason ``meta: <error>``).
    """
    kept, report = [], []
    for problem in problems:
        fp = problem_footprint(problem, size_scale)
        if fp["error"]:
            reason = f"meta: {fp['error']}"
        elif fp["output_numel"] > max_output_numel:
            reason = f"output {fp['output_numel']} > {max_output_numel} elements"
        elif fp["input_numel"] > max_input_numel:
            reason = f"inputs {fp['input_numel']} > {max_input_numel} elements"
        elif fp["flops"] > max_flops:
            reason = f"{fp['flops'] / 1e9:.3g} GFLOP > {max_flops / 1e9:.3g}"
        else:
            reason = ""
        report.append({"level": problem.level, "problem_id": problem.problem_id, "problem_name": problem.name, **fp,
                       "kept": not reason, "reason": reason})
        if not reason:
            kept.append(problem)
    return kept, report
