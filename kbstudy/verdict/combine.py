"""The combination of per-trial results into a candidate's record fields: KernelBench's verdict and kbstudy's over
KernelBench's fixed-seed trials (:func:`combine`), then kbstudy's extra trials folded in (:func:`combine_extra`).

The per-trial checks are in :mod:`kbstudy.verdict.checks`, the extra trials in :mod:`kbstudy.verdict.trials`; this
module sits above both (pure functions: no processes, no I/O).
"""

from __future__ import annotations

from typing import Sequence

from kbstudy.verdict.checks import (
    COVERAGE_THRESHOLD,
    INTEGRITY_FAILURES,
    KERNELBENCH_TOLERANCE,
    REL_L2_THRESHOLD,
    KbstudyTrial,
    KernelBenchTrial,
    variant_failure,
)
from kbstudy.verdict.trials import FAMILIES, summarize_extra, variant_classes


def combine(kb_trials: list[KernelBenchTrial], kbs_trials: list[KbstudyTrial], precision: str) -> dict:
    """Record fields from the per-trial results: a verdict passes only if every trial passed. Metrics are the worst
    over trials (max relative L2 error, max normalized/elementwise errors, min coverage, max of KernelBench's max abs
    diff); ``coverage_sentinels`` lists the sentinels the trials used (see :func:`sentinel_label`). The key
    ``metadata_verdict`` holds details for the record's metadata."""
    kb_pass = [t.passed for t in kb_trials]
    maxes = [t.max_abs_diff for t in kb_trials if t.max_abs_diff is not None]
    means = [t.mean_abs_diff for t in kb_trials if t.mean_abs_diff is not None]
    rels = [t.rel_l2 for t in kbs_trials if t.rel_l2 is not None]
    covs = [t.coverage for t in kbs_trials if t.coverage is not None]
    abs_norm = [t.max_abs_norm for t in kbs_trials if t.max_abs_norm is not None]
    elem = [t.elem_rel for t in kbs_trials if t.elem_rel is not None]
    sentinels = sorted({t.sentinel for t in kbs_trials if t.sentinel is not None})
    first_fail = next((t for t in kbs_trials if not t.passed), None)
    first_kb_fail = next((t for t in kb_trials if not t.passed), None)
    return {
        "kernelbench_correct": bool(kb_trials) and all(kb_pass),
        "kernelbench_trials_passed": sum(kb_pass),
        "kernelbench_trials": len(kb_trials),
        "kernelbench_tolerance": KERNELBENCH_TOLERANCE[precision],
        "kernelbench_max_abs_diff": max(maxes) if maxes else None,
        "kernelbench_mean_abs_diff": max(means) if means else None,
        "kbstudy_correct": bool(kbs_trials) and all(t.passed for t in kbs_trials),
        "kbstudy_failure": first_fail.failure if first_fail else None,
        "rel_l2_error": max(rels) if rels else None,
        "rel_l2_threshold": REL_L2_THRESHOLD[precision],
        "coverage": min(covs) if covs else None,
        "coverage_threshold": COVERAGE_THRESHOLD,
        "coverage_sentinels": sentinels or None,
        "max_abs_error_normalized": max(abs_norm) if abs_norm else None,
        "elementwise_rel_error_max": max(elem) if elem else None,
        "metadata_verdict": {
            "kbstudy_detail": first_fail.detail if first_fail else None,
            "kernelbench_note": first_kb_fail.note if first_kb_fail else None,
        },
    }


def combine_extra(fields: dict, results: list, names: Sequence[str], not_applicable: dict[str, str]) -> dict:
    """Fold the extra trials (check 6, input variety) into the fields :func:`combine` made from KernelBench's trials.

    Args:
        fields: :func:`combine`'s result (its ``kbstudy_correct`` covers KernelBench's fixed-seed trials); updated in
            place and returned.
        results: ``[(kbstudy.verdict.trials.ExtraTrial, KbstudyTrial), ...]`` in trial order, for the extra trials that
            ran (a trial whose call raised is a failed ``KbstudyTrial`` too).
        names: the run's extra-trial names (``kbstudy.verdict.trials.EXTRA_NAMES`` order).
        not_applicable: ``{name: reason}`` of variants that do not apply to the problem (their trials did not run).
    Sets ``kbstudy_variants`` (``{name: "passed" | "failed" | "n.a."}``, ``None`` without extra trials),
    ``correct_default_only`` (kbstudy-correct on KernelBench's trials and failed on an extra one; ``None`` when no
    extra trial ran), and, for such a candidate, ``kbstudy_correct = False`` and ``kbstudy_failure`` = the first
    failing extra trial's integrity failure, or ``variant_<name>`` for a value or form failure (its detail, with the
    trial's seed, goes to ``metadata_verdict["kbstudy_detail"]``). ``metadata_verdict["variant_classes"]``: the
    candidate's classes (``kbstudy.verdict.trials.variant_classes``, e.g. ``correct_at_benchmark_shape_only``): it
    passed every trial at the benchmark's shape, layout and parameters and failed a structural family's.
    """
    fields["kbstudy_variants"] = summarize_extra(names, results, not_applicable) if names else None
    if not results:
        fields["correct_default_only"] = None
        return fields
    default_ok = bool(fields.get("kbstudy_correct"))
    base_ok = default_ok and all(r.passed for spec, r in results if spec.name not in FAMILIES)
    classes = variant_classes(fields["kbstudy_variants"], base_ok)
    if classes:
        fields.setdefault("metadata_verdict", {})["variant_classes"] = classes
    first = next(((spec, r) for spec, r in results if not r.passed), None)
    fields["correct_default_only"] = bool(default_ok and first is not None)
    if default_ok and first is not None:
        spec, trial = first
        failure = trial.failure if trial.failure in INTEGRITY_FAILURES else variant_failure(spec.name)
        fields["kbstudy_correct"] = False
        fields["kbstudy_failure"] = failure
        fields.setdefault("metadata_verdict", {})["kbstudy_detail"] = (
            f"{spec.name} inputs (trial {spec.trial}, seed {spec.seed}): {trial.failure}: {trial.detail}")
    return fields
