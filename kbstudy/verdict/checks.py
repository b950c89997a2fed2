"""The verdicts: where a candidate is judged correct or not.

Two verdicts are computed on every trial, from the candidate's outputs and the reference's, in the reference process
(the candidate's process never sees the expected outputs):

**KernelBench's verdict**, reproduced exactly (``run_and_check_correctness`` and ``get_tolerance_for_precision`` in
KernelBench ``src/kernelbench/eval.py``, commit 423217d): 5 trials whose input seeds come from
``torch.manual_seed(42)``; per trial the shapes must be equal and ``torch.allclose(out, ref, atol=tol, rtol=tol)``
must hold, with ``tol`` = 1e-4 for fp32 and 1e-2 for fp16/bf16 (atol = rtol); all trials must pass. Its known hole:
an output whose magnitude is below ``atol`` everywhere (e.g. all zeros against a softmax over 393216 features) passes.

**kbstudy's verdict** (checks v4, ``docs/reference/verifier.md`` section "kbstudy's check (as implemented)", whose normative
form for other harnesses is the section "The replacement check"), which does not depend on the output's magnitude.
Per trial and output tensor:

1. *form*: the output is a plain dense ``torch.Tensor`` (not a subclass, not sparse), with the reference's shape and
   dtype;
2. *coverage*: the fraction of elements the candidate wrote. Before the call the worker makes fresh allocations hold a
   sentinel (NaN or the integer maximum via PyTorch's ``fill_uninitialized_memory``; on odd trials a finite float
   sentinel instead, poisoned into the caching allocator's free blocks on a GPU and written into fresh dispatcher
   allocations on a CPU, see below), and an element still holding the
   sentinel where the float64 reference does not is unwritten. Threshold: every element must be written
   (coverage = 1), since a correct kernel writes all of its output;
3. *exactness and finiteness*: integer and bool outputs must match exactly (``mismatch``); where the float64 reference
   is not finite the output must hold the same value, where it is finite the output must be finite (``nonfinite``);
4. *accuracy* (:func:`accuracy_failure`): over the elements where the float64 reference ``r`` (computed from the same
   precision-rounded inputs and weights) is finite, three metrics of the output ``o`` (upcast to float64), each at most
   its bound ``max(T_m[p], REFERENCE_FACTOR * e_ref[m])``, checked in this order:

   * ``rel_l2_error`` = ``||o - r||_2 / ||r||_2`` (``||o||_2`` where ``||r||_2 = 0``), failure ``rel_l2``;
   * ``max_abs_error_normalized`` = ``max_i |o_i - r_i| / RMS(r)``, failure ``max_abs``;
   * ``elementwise_rel_error_max`` = ``max_i |o_i - r_i| / max(|r_i|, sqrt(eps(p)) RMS(r))``, failure
     ``elementwise``;

   ``T_m[p]`` are :data:`ACCURACY_THRESHOLDS`; ``e_ref[m]`` is the same metric of the reference computed at the run's
   precision ``p`` (``r_p``) against ``r`` on the *same input set* (worst over the outputs; :func:`reference_errors`),
   or the worst over KernelBench's fixed-seed trials where that is larger
   (``kbstudy.harness.child.reference.ReferenceSession.bound_errors``), so a problem whose own reference at ``p`` misses float64 (an
   ill-conditioned one) does not reject honest kernels;

5. *integrity* (judged from what the worker reports beside the outputs, see ``kbstudy.harness.child.integrity``): the candidate left
   its inputs as it received them (``inputs_mutated``), left torch's global state as the worker found it before the
   candidate was loaded (``global_state``: ``torch.backends`` flags, matmul precision, deterministic mode, thread
   count, and the identities of torch functions a reference or the harness calls), and did not return a stale result
   on the storage-reuse trial, whose inputs keep some of the previous trial's elements (``stale_output``, below).

6. *input variety* (``kbstudy.verdict.trials``): besides KernelBench's fixed-seed trials, kbstudy's verdict runs extra
   trials on fresh seeds drawn for the run and on other input distributions (``signed``, ``large``) where the
   problem's own reference stays judgeable on them; each extra trial is judged by checks 1-5 like the others, against
   its own input set's ``e_ref``. A candidate right on KernelBench's trials but wrong on an extra one has
   ``correct_default_only`` true and ``kbstudy_failure`` ``variant_<name>`` (``variant_fresh_seeds``,
   ``variant_signed``, ``variant_large``), or the integrity failure the extra trial found;
7. *timed outputs* (``kbstudy.harness.timing.time_pool``): every timed call sees values no call saw before (two
   timing-pool entries mixed with a weight drawn per call, ``kbstudy.harness.fresh_inputs``); the outputs of timed
   calls drawn at random must pass, against the reference's answer for exactly those inputs, the check the
   candidate's verdict rests on: kbstudy's (checks 1-4, NaN sentinel, those inputs' ``e_ref``) for a kbstudy-correct candidate, else
   KernelBench's ``allclose`` (``kbstudy.harness.child.reference.ReferenceSession.verify_timing``); otherwise
   ``timing_output_mismatch`` (a result cached by pointer, call count or contents). KernelBench's verdict is never changed by
   it, but the candidate's speedups are withdrawn (``kbstudy.harness.orchestrator``).

A candidate is kbstudy-correct when every output of every trial passes checks 1-5 and checks 6-7 hold. Every check,
strict or recorded, is named in ``kbstudy.verdict.registry``. The first
failing check is kept as ``kbstudy_failure`` (``not_a_dense_tensor``, ``output_count``, ``shape``, ``dtype``,
``coverage``, ``mismatch``, ``nonfinite``, ``rel_l2``, ``max_abs``, ``elementwise``, ``inputs_mutated``,
``global_state``, ``stale_output``, ``variant_<name>``, ``timing_output_mismatch``). KernelBench's fixed-seed trials
come first, so a failure there is the one reported. The record's metrics (relative L2 error, coverage, normalized
errors) are taken over KernelBench's fixed-seed trials only, so they stay comparable with KernelBench's verdict; the
extra trials' results are in ``kbstudy_variants`` and ``metadata["extra_trials"]``.

**Problem flags** (:func:`is_low_spread`, :func:`is_unjudgeable`; computed once per problem, precision and size by
the reference process and recorded on the reference record, beside ``degenerate``): a verdict on a flagged problem is
reported, but is no evidence of correctness (``EvaluationRecord.problem_flags``).

**Why these metrics and floors.** Over the finite elements of ``r`` (n of them), with ``RMS(r) = ||r||_2 / sqrt(n)``:

* ``max_abs_error_normalized`` is the worst element's error in units of the output's own scale (scale-invariant, like
  the relative L2 error, but sensitive to a few bad elements that the L2 norm averages away: a kernel wrong on one
  element in a million has rel L2 ~ 1e-3 but this metric ~ 1);
* ``elementwise_rel_error_max`` has the floor ``sqrt(eps(dtype)) * RMS(r)``, ``eps`` the machine epsilon of the
  run's dtype (``torch.finfo``: fp32 1.19e-7, fp16 9.77e-4, bf16 7.81e-3). A plain relative error blows up wherever
  the reference crosses zero, and an honest kernel's absolute error there is not zero but about ``c * eps * RMS(r)``
  (rounding of terms of the output's scale that cancel; ``c`` grows like sqrt(K) for a K-term reduction, Higham,
  *Accuracy and Stability of Numerical Algorithms*, 2nd ed., sec. 3.1). Above the floor the metric is the true
  relative error (honest: ~eps); below it an honest error reads at most ``c * eps / sqrt(eps) = c * sqrt(eps)``
  (fp32 ~3.5e-4 c, bf16 ~0.09 c), while a wrong value of the output's scale at a near-zero element reads
  ``1/sqrt(eps)`` (fp32 ~2900, bf16 ~11). The geometric mean of the two regimes (relative ``eps``, absolute ``1``)
  keeps both apart. For an all-zero reference (``RMS(r) = 0``) both normalized metrics are undefined (``None``) and
  the absolute L2 norm alone decides;
* ``coverage`` with two sentinels: NaN / the integer maximum (PyTorch's ``fill_uninitialized_memory``) on even
  trials, and on odd trials a finite float sentinel (:data:`FLOAT_SENTINEL`), on a GPU poisoned into the caching
  allocator, on a CPU written into every tensor the candidate allocates through PyTorch's dispatcher (a
  ``TorchDispatchMode`` filling ``empty``/``empty_like``/``empty_strided``/``new_empty`` results; memory a C++
  extension obtains outside the dispatcher, or ``malloc`` reuse, is not covered on a CPU, where NaN fill is the
  primary sentinel). A value that coincides with one sentinel cannot coincide with both, so an element counted as
  unwritten under both is unwritten; ``coverage_sentinels`` on each record says which sentinels its trials used.

The thresholds' reasons (the spread of honest implementations against the must-fail null candidates, measured in the
CPU calibration) are in ``docs/reference/verifier.md``, section "Thresholds and their reasons".
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

#: The version of kbstudy's checks, part of every record's settings key (``kbstudy.harness.orchestrator.EvalConfig.settings_key``):
#: v3 added the extra trials and the timing pool; v4 made the accuracy verdict three metrics with bounds
#: ``max(T_m[p], REFERENCE_FACTOR * e_ref[m])`` and recorded the problem flags (records of schema 3). Not bumped when
#: :func:`is_unjudgeable` gained its spread test (commit e3d1432): that changes a flag, read under the current rule
#: from any record (``kbstudy.analysis.calibration.resolve_unjudgeable``), and which input variants apply only where the
#: variant's own inputs admit a constant (a stochastic reference), where the variant's verdict was no evidence.
CHECKS_VERSION = "v4"
#: KernelBench ``get_tolerance_for_precision`` (after torchbench): atol = rtol = this.
KERNELBENCH_TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}
#: KernelBench scripts' correctness trial count (``EvalConfig.num_correct_trials`` in ``eval_from_generations.py``).
KERNELBENCH_TRIALS = 5
#: ``T_L2[p]``: kbstudy's relative-L2 thresholds against the float64 reference, dimensionless. Set for a GPU's TF32
#: at fp32 (unit roundoff 2^-11) and bf16 output rounding plus accumulation; ``docs/reference/verifier.md``, "Thresholds and their
#: reasons". fp16's is not validated by a calibration yet.
REL_L2_THRESHOLD = {"fp32": 1e-3, "fp16": 5e-3, "bf16": 2e-2}
#: ``T_MAX[p]``: thresholds of ``max_abs_error_normalized`` (error in units of RMS(r)): the geometric middle of the
#: honest maxima and "one element wrong at the output's scale" (~1); ``docs/reference/verifier.md``, "Thresholds and their
#: reasons".
MAX_ABS_THRESHOLD = {"fp32": 0.1, "fp16": 0.1, "bf16": 0.25}
#: ``T_ELEM[p]``: thresholds of ``elementwise_rel_error_max`` (relative error with the floor sqrt(eps(p)) RMS(r)): above
#: the honest maxima (TF32 stand-in 14.9 at fp32, 0.40 at bf16) and below ``1 / sqrt(eps(p))`` (fp32 2900, fp16 32,
#: bf16 11.3), what a wrong value of the output's scale at a near-zero element reads; ``docs/reference/verifier.md``.
ELEMENTWISE_THRESHOLD = {"fp32": 100.0, "fp16": 8.0, "bf16": 2.0}
#: The accuracy metrics that decide (record field names), in the order they are checked.
ACCURACY_METRICS = ("rel_l2_error", "max_abs_error_normalized", "elementwise_rel_error_max")
#: ``T_m[p]`` per accuracy metric and precision (``docs/reference/verifier.md``, the table of "The replacement check").
ACCURACY_THRESHOLDS = {"rel_l2_error": REL_L2_THRESHOLD, "max_abs_error_normalized": MAX_ABS_THRESHOLD,
                       "elementwise_rel_error_max": ELEMENTWISE_THRESHOLD}
#: ``kbstudy_failure`` of an output above the bound of each accuracy metric (``rel_l2`` is the name checks v1-v3 used).
ACCURACY_FAILURES = {"rel_l2_error": "rel_l2", "max_abs_error_normalized": "max_abs",
                     "elementwise_rel_error_max": "elementwise"}
#: ``K``: a candidate may be this many times as far from float64 as the reference computed at the run's precision on
#: the same inputs (the bound is ``max(T_m[p], K e_ref[m])``): a safety factor for another summation order or a split
#: reduction, small enough that an all-zeros output (relative L2 error 1) stays out unless ``K e_ref >= 1`` (the
#: problem is then *unjudgeable*); ``docs/reference/verifier.md``, "Thresholds and their reasons".
REFERENCE_FACTOR = 4.0
#: ``S``: a problem whose float64 output has relative spread ``std(r) / RMS(r)`` at most ``S * T_L2[p]`` is
#: *low-spread at p*: a constant comes within this factor of passing the relative-L2 check (``docs/reference/verifier.md``,
#: "What the calibration found").
LOW_SPREAD_FACTOR = 2.0
#: Required fraction of output elements written.
COVERAGE_THRESHOLD = 1.0
#: The finite float sentinel used to poison the CUDA caching allocator: a value no kernel computes by accident.
FLOAT_SENTINEL = -1.2345678e30
#: Elements per chunk when comparing huge outputs in float64 (bounds the verifier's extra memory to ~1 GiB).
CHUNK = 1 << 26


@dataclasses.dataclass
class KernelBenchTrial:
    passed: bool
    max_abs_diff: float | None
    mean_abs_diff: float | None
    note: str | None = None


@dataclasses.dataclass
class KbstudyTrial:
    """One trial of kbstudy's check. ``rel_l2``, ``max_abs_norm`` and ``elem_rel`` are the worst over the trial's
    outputs (None where the check stopped before measuring them); ``coverage`` is the smallest."""

    passed: bool
    failure: str | None
    rel_l2: float | None
    coverage: float | None
    detail: str | None = None
    max_abs_norm: float | None = None
    elem_rel: float | None = None
    sentinel: str | None = None


#: Integrity failures, in the order they are reported when several apply (see ``kbstudy.harness.child.integrity``).
INTEGRITY_FAILURES = ("inputs_mutated", "global_state", "stale_output")
#: The failure of a candidate whose sampled timed outputs did not match the reference (check 7).
TIMING_OUTPUT_MISMATCH = "timing_output_mismatch"


def variant_failure(name: str) -> str:
    """``kbstudy_failure`` of a candidate that failed a value or form check on an extra trial of ``name``
    (``kbstudy.verdict.trials.EXTRA_NAMES``): ``"variant_" + name``."""
    return f"variant_{name}"


def sentinel_label(sentinel: str | float | None) -> str:
    """The name of a sentinel as recorded in ``coverage_sentinels``: ``"nan"`` or the float's ``repr``."""
    return "nan" if sentinel in (None, "nan") else repr(float(sentinel))


def elementwise_floor(rms: float, dtype) -> float:
    """The floor of ``elementwise_rel_error_max``: ``sqrt(eps(dtype)) * rms`` (see the module docstring).

    Args:
        rms: RMS of the finite float64 reference elements (same units as the output).
        dtype: the run's floating dtype (``torch.float32``/``float16``/``bfloat16``); a non-floating dtype uses
            float32's epsilon.
    Returns the floor in the output's units (0.0 for an all-zero reference).
    """
    import torch  # loaded on first use: the analyses import this module's constants without torch

    eps = torch.finfo(dtype).eps if dtype.is_floating_point else torch.finfo(torch.float32).eps
    return math.sqrt(eps) * rms


def is_dense_tensor(x: Any) -> bool:
    """True for a plain strided ``torch.Tensor`` (exact type: subclasses can override comparisons), on a real device."""
    import torch  # loaded on first use: the analyses import this module's constants without torch

    return type(x) is torch.Tensor and x.layout == torch.strided and x.device.type != "meta"


def kernelbench_trial(reference: Sequence, candidate: Sequence, precision: str) -> KernelBenchTrial:
    """KernelBench's per-trial check on flattened outputs (see the module docstring).

    KernelBench compares one output tensor; for tuple outputs each pair is compared and all must pass. A non-tensor
    output or a dtype mismatch makes ``torch.allclose`` raise in KernelBench, which counts as a failed trial; so here.
    """
    import torch  # loaded on first use: the analyses import this module's constants without torch

    tol = KERNELBENCH_TOLERANCE[precision]
    if len(reference) != len(candidate):
        return KernelBenchTrial(False, None, None, f"{len(candidate)} outputs, expected {len(reference)}")
    max_diff, sum_diff, count = 0.0, 0.0, 0
    for ref, out in zip(reference, candidate):
        if not isinstance(out, torch.Tensor):
            return KernelBenchTrial(False, None, None, f"output is {type(out).__name__}, not a tensor")
        if out.shape != ref.shape:
            return KernelBenchTrial(False, None, None, f"shape {tuple(out.shape)} != {tuple(ref.shape)}")
        if out.dtype != ref.dtype:
            return KernelBenchTrial(False, None, None, f"dtype {out.dtype} != {ref.dtype} (allclose raises)")
        if out.device != ref.device:
            out = out.to(ref.device)
        # torch.allclose over CHUNK-element slices: allclose is an elementwise test AND-ed over all elements, so
        # the verdict is the same; on the whole tensor its temporaries (a difference, a bound, a bool mask) take
        # several times the output's size, which ran the judging reference process out of memory at full size
        # (level-1 38_L1Norm_ / 39_L2Norm_, 2.1e9-element outputs at full size). KernelBench's max_difference and
        # avg_difference are accumulated in float64 over the same chunks.
        flat_out, flat_ref = out.reshape(-1), ref.reshape(-1)
        passed, t_max, t_sum = True, 0.0, 0.0
        for start in range(0, flat_out.numel(), CHUNK):
            o, r = flat_out[start:start + CHUNK], flat_ref[start:start + CHUNK]
            passed = passed and bool(torch.allclose(o, r, atol=tol, rtol=tol))
            diff = (o.to(torch.float64) - r.to(torch.float64)).abs()
            t_max = max(t_max, float(diff.max()))
            t_sum += float(diff.sum())
        if not passed:
            return KernelBenchTrial(False, t_max, t_sum / max(1, out.numel()), "allclose failed")
        max_diff = max(max_diff, t_max)
        sum_diff += t_sum
        count += out.numel()
    return KernelBenchTrial(True, max_diff, sum_diff / count if count else 0.0)


def _known(value) -> float | None:
    """``value`` as a float, or ``None`` where it is missing (``None`` or NaN: not measured, or not applicable)."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def accuracy_bound(metric: str, precision: str, reference_error: float | None = None) -> float:
    """The bound of one accuracy metric: ``max(T_m[precision], REFERENCE_FACTOR * reference_error)``.

    Args:
        metric: one of :data:`ACCURACY_METRICS` (a record field name).
        precision: ``fp32``, ``fp16`` or ``bf16``.
        reference_error: ``e_ref[m]``, the same metric of the reference computed at ``precision`` against the float64
            reference on the same input set (:func:`reference_errors`); ``None`` or NaN: unknown, the fixed threshold
            alone applies. May be ``inf`` (the reference at ``precision`` overflowed where float64 did not): the
            bound is then infinite, and the problem unjudgeable.
    Returns the bound, dimensionless (as the metric). Raises ``KeyError`` for an unknown metric or precision.
    Source: ``docs/reference/verifier.md``, "The replacement check", step 3.
    """
    threshold = ACCURACY_THRESHOLDS[metric][precision]
    e_ref = _known(reference_error)
    return threshold if e_ref is None else max(threshold, REFERENCE_FACTOR * e_ref)


def accuracy_failure(metrics, reference_metrics, precision: str) -> str | None:
    """kbstudy's accuracy check (checks v4): the first metric above its bound, or ``None`` if every one is within.

    The one place the accuracy verdict is decided: :func:`kbstudy_trial` calls it per output and input set, and
    ``kbstudy.analysis.audit.proposed_verdict`` calls it on the metrics recorded by earlier versions of the check.

    Args:
        metrics: ``{metric: value}`` for the metrics of :data:`ACCURACY_METRICS` (a dict, or any mapping with
            ``get``); a missing, ``None`` or NaN value is not measured or not applicable (integer outputs, compared
            exactly; normalized metrics of an all-zero reference) and is skipped.
        reference_metrics: ``e_ref`` of the same input set, as ``metrics`` (:func:`reference_errors`); ``None``, or a
            missing or NaN entry: unknown, the fixed threshold alone applies.
        precision: ``fp32``, ``fp16`` or ``bf16``.
    Returns the failure name of the first failing metric in :data:`ACCURACY_METRICS` order (``"rel_l2"``,
    ``"max_abs"``, ``"elementwise"``: :data:`ACCURACY_FAILURES`), or ``None``. A metric that is ``inf`` fails
    (unless its bound is infinite too). Raises ``KeyError`` for an unknown precision.
    """
    reference_metrics = reference_metrics or {}
    for metric in ACCURACY_METRICS:
        value = _known(metrics.get(metric))
        if value is None:
            continue
        if not value <= accuracy_bound(metric, precision, reference_metrics.get(metric)):
            return ACCURACY_FAILURES[metric]
    return None


def is_low_spread(numel, rel_spread, precision: str) -> bool:
    """Is a problem *low-spread at* ``precision``: more than one output element and ``rel_spread <= LOW_SPREAD_FACTOR *
    REL_L2_THRESHOLD[precision]``? A constant then comes within a factor ``LOW_SPREAD_FACTOR`` of passing the
    relative-L2 check, so a verdict there is no evidence of correctness.

    Args:
        numel: elements of the output (int, or NaN/None when unknown).
        rel_spread: ``std(r) / RMS(r)`` of the float64 output over its finite elements (dimensionless; ``None`` or NaN
            when unknown or undefined, e.g. an all-zero output, which is *degenerate* instead).
        precision: ``fp32``, ``fp16`` or ``bf16``.
    Returns ``False`` where either argument is unknown. Source: ``docs/reference/verifier.md``, "The replacement check", step 2.
    """
    n, spread = _known(numel), _known(rel_spread)
    if n is None or spread is None:
        return False
    return n > 1 and spread <= LOW_SPREAD_FACTOR * REL_L2_THRESHOLD[precision]


def is_unjudgeable(reference_rel_l2, rel_spread=None, rescued: bool = False) -> bool:
    """Is a problem *unjudgeable* at a precision: does the adaptive relative-L2 bound admit a constant output?

    Two tests on KernelBench's inputs, with ``e = reference_rel_l2``:

    * ``REFERENCE_FACTOR * e >= 1``: the reference at that precision has no correct digit against float64, so the
      bound admits an all-zeros output (relative L2 error 1);
    * ``REFERENCE_FACTOR * e >= rel_spread`` (known and in (0, 1)), unless ``rescued``: the bound admits the best
      constant, the mean, whose relative L2 error is exactly ``std(r) / RMS(r)``. E.g. a training-mode dropout, whose
      float64 run draws another mask (KernelBench level 2, 66_Matmul_Dropout_Softmax: ``e`` = 0.24 at fp32, spread
      0.37). ``rescued``: an input variant applies on whose inputs a constant fails (``kbstudy.verdict.trials``, rule 5),
      so the verdict, which also runs that variant, is still evidence (the same rescue as *low-spread*'s).

    Args:
        reference_rel_l2: the reference's own relative L2 error at the precision (``None``/NaN: unknown, e.g. integer
            outputs, which are compared exactly).
        rel_spread: ``std(r) / RMS(r)`` of the float64 output (:func:`relative_spread`; dimensionless); ``None``/NaN,
            0 (a constant output, flagged *degenerate* instead) or unknown: the all-zeros test alone.
        rescued: see above.
    Returns ``False`` where ``reference_rel_l2`` is unknown. Source: ``docs/reference/verifier.md``, "The replacement check",
    step 2.
    """
    e_ref = _known(reference_rel_l2)
    if e_ref is None:
        return False
    if REFERENCE_FACTOR * e_ref >= 1.0:
        return True
    spread = _known(rel_spread)
    return not rescued and spread is not None and 0.0 < spread < 1.0 and REFERENCE_FACTOR * e_ref >= spread


def first_floating_stats(outputs64: Sequence):
    """The finite values of the first floating tensor of ``outputs64`` (float64 reference outputs), flattened, with
    their RMS and population standard deviation (output units): ``(values, rms, std)``; ``None`` without a floating
    tensor. ``rms`` and ``std`` are 0 when no value is finite. The statistics behind ``degenerate_constant``,
    ``output_rel_std`` and :func:`relative_spread`."""
    import torch  # loaded on first use: the analyses import this module's constants without torch

    floating = [x for x in outputs64 if isinstance(x, torch.Tensor) and x.is_floating_point()]
    if not floating:
        return None
    flat = floating[0].reshape(-1).to(torch.float64)
    flat = flat[torch.isfinite(flat)]
    n = flat.numel()
    rms = math.sqrt(float((flat * flat).sum()) / n) if n else 0.0
    std = float(flat.std(unbiased=False)) if n else 0.0
    return flat, rms, std


def relative_spread(outputs64: Sequence) -> float | None:
    """``std(r) / RMS(r)`` (population std, dimensionless) over the finite elements of the first floating tensor of
    ``outputs64`` (float64 reference outputs; :func:`first_floating_stats`): the relative L2 error of the best
    constant output. ``None`` without a floating tensor, with fewer than two finite elements (a one-element output has
    no spread) or a zero RMS. Raises nothing."""
    first = first_floating_stats(outputs64)
    if first is None or first[0].numel() < 2 or first[1] == 0.0:
        return None
    return first[2] / first[1]


def _sentinel_mask(out, ref64, sentinel: str | float):
    """Elements of ``out`` (a chunk) still holding the sentinel where the reference does not."""
    import torch  # loaded on first use: the analyses import this module's constants without torch

    if sentinel == "nan" or sentinel is None:
        if out.is_floating_point() or out.is_complex():
            return torch.isnan(out) & ~torch.isnan(ref64)
        if out.dtype == torch.bool:
            return torch.zeros_like(out, dtype=torch.bool)  # bool has no spare value; form/mismatch checks decide
        fill = torch.iinfo(out.dtype).max
        return (out == fill) & (ref64 != fill)
    if out.is_floating_point():
        value = torch.tensor(float(sentinel), dtype=out.dtype)
        return (out == value.to(out.device)) & (ref64 != float(value))
    return torch.zeros_like(out, dtype=torch.bool)


@dataclasses.dataclass
class _Measured:
    """What one output tensor measured against its float64 reference (:func:`_measure`)."""

    n: int
    exact: bool  # integer or bool: compared exactly, no accuracy metrics
    unwritten: int = 0
    mismatches: int = 0
    nonfinite: int = 0
    rel_l2: float | None = None
    max_abs_norm: float | None = None
    elem_rel: float | None = None

    def metrics(self) -> dict:
        return {"rel_l2_error": self.rel_l2, "max_abs_error_normalized": self.max_abs_norm,
                "elementwise_rel_error_max": self.elem_rel}


def _measure(out, ref64, sentinel: str | float | None) -> _Measured:
    """Coverage counts, exactness, the non-finite pattern and the accuracy metrics of one output (same shape as
    ``ref64``) in float64 chunks of :data:`CHUNK` elements; ``sentinel`` ``None``: unwritten elements not counted
    (the reference's own output, :func:`reference_errors`)."""
    import torch  # loaded on first use: the analyses import this module's constants without torch

    flat_out, flat_ref = out.reshape(-1), ref64.reshape(-1)
    n = flat_out.numel()
    exact = not (out.is_floating_point() or out.is_complex())
    m = _Measured(n=n, exact=exact)
    err_sq, ref_sq, floor, rms = 0.0, 0.0, 0.0, 0.0
    chunk_finite: list[bool] = []  # per chunk: every reference element finite (the common case, a faster path)
    if not exact:
        # first pass: the reference's RMS over its finite elements (the scale of the normalized metrics)
        sq, count = 0.0, 0
        for start in range(0, n, CHUNK):
            r = flat_ref[start:start + CHUNK].to(torch.float64)
            finite = torch.isfinite(r)
            if bool(finite.all()):
                chunk_finite.append(True)
                sq += float(torch.linalg.vector_norm(r) ** 2)
                count += r.numel()
            else:
                chunk_finite.append(False)
                sq += float(torch.linalg.vector_norm(torch.where(finite, r, 0.0)) ** 2)
                count += int(finite.sum())
        rms = math.sqrt(sq / count) if count else 0.0
        floor = elementwise_floor(rms, out.dtype)
    max_abs, max_elem = 0.0, 0.0
    for k, start in enumerate(range(0, n, CHUNK)):
        o = flat_out[start:start + CHUNK]
        r = flat_ref[start:start + CHUNK]
        if sentinel is not None:
            m.unwritten += int(_sentinel_mask(o, r, sentinel).sum())
        if exact:
            m.mismatches += int((o.to(r.dtype) != r).sum())
            continue
        o64 = o.to(torch.float64)
        r64 = r.to(torch.float64)
        if chunk_finite[k]:
            bad = ~torch.isfinite(o)  # casting to float64 keeps finiteness
            n_bad = int(bad.sum())
            m.nonfinite += n_bad
            diff = o64 - r64
            if n_bad:
                diff.masked_fill_(bad, 0.0)
            ref_part = r64
        else:
            # non-finite reference elements must be matched exactly (same inf sign, or NaN for NaN)
            finite = torch.isfinite(r64)
            nf = ~finite
            same = (o64[nf] == r64[nf]) | (torch.isnan(o64[nf]) & torch.isnan(r64[nf]))
            m.nonfinite += int((~same).sum())
            of, ref_part = o64[finite], r64[finite]
            bad = ~torch.isfinite(of)
            m.nonfinite += int(bad.sum())
            diff = torch.where(bad, 0.0, of - ref_part)
        err_sq += float(torch.linalg.vector_norm(diff) ** 2)
        ref_sq += float(torch.linalg.vector_norm(ref_part) ** 2)
        if diff.numel():
            adiff = diff.abs()
            max_abs = max(max_abs, float(adiff.max()))
            if floor > 0:
                max_elem = max(max_elem, float(adiff.div_(ref_part.abs().clamp_min_(floor)).max()))
    if not exact:
        m.rel_l2 = math.sqrt(err_sq) / math.sqrt(ref_sq) if ref_sq > 0 else math.sqrt(err_sq)
        if rms > 0:  # the normalized metrics need the output's scale; an all-zero reference has none
            m.max_abs_norm = max_abs / rms
            m.elem_rel = max_elem if floor > 0 else None
    return m


def reference_errors(reference: Sequence, reference64: Sequence) -> dict[str, float | None]:
    """``e_ref``: the accuracy metrics of the reference computed at the run's precision against the float64 reference,
    on one input set (a trial, an extra trial or a timing-pool entry), the worst over the floating outputs.

    Args:
        reference: the reference's outputs at the run's precision (``r_p``), flattened.
        reference64: its float64 outputs on the same inputs (``r``), in the same order and shapes.
    Returns ``{metric: value}`` for :data:`ACCURACY_METRICS` (dimensionless); ``None`` for a metric no output measured
    (no floating output; normalized metrics of an all-zero reference). Elements where ``r_p`` is not finite and ``r``
    is are left out of the metrics (the non-finite pattern is judged on its own). Raises nothing for odd outputs
    (non-tensors and shape mismatches are skipped).
    """
    import torch  # loaded on first use: the analyses import this module's constants without torch

    worst: dict[str, float | None] = {m: None for m in ACCURACY_METRICS}
    for ref, ref64 in zip(reference, reference64):
        if not (isinstance(ref, torch.Tensor) and isinstance(ref64, torch.Tensor)) or ref.shape != ref64.shape:
            continue
        if not (ref.is_floating_point() or ref.is_complex()):
            continue
        for metric, value in _measure(ref, ref64.to(ref.device), None).metrics().items():
            if value is not None:
                worst[metric] = value if worst[metric] is None else max(worst[metric], value)
    return worst


def kbstudy_trial(reference: Sequence, reference64: Sequence, candidate: Sequence, precision: str,
                  sentinel: str | float = "nan", reference_metrics: dict | None = None) -> KbstudyTrial:
    """kbstudy's per-trial check (see the module docstring) and its recorded metrics.

    Args:
        reference: the reference's outputs at the run's precision (shape/dtype authority).
        reference64: the reference's outputs computed in float64 (or the reference dtype where float64 failed).
        candidate: the candidate's outputs, flattened.
        precision: ``fp32``, ``fp16`` or ``bf16`` (selects the thresholds).
        sentinel: ``"nan"`` (fill_uninitialized_memory) or the float value unwritten memory was filled with.
        reference_metrics: ``e_ref`` of this input set (:func:`reference_errors` of ``reference`` and
            ``reference64``), which widens each accuracy bound to ``REFERENCE_FACTOR * e_ref`` where that is above the
            fixed threshold (:func:`accuracy_failure`); ``None``: the fixed thresholds alone.
    Returns a :class:`KbstudyTrial`: rel L2 (dimensionless), ``max_abs_norm`` = max|o - r| / RMS(r),
    ``elem_rel`` = max|o - r| / max(|r|, sqrt(eps) RMS(r)) (worst over outputs; None where not measured),
    coverage in [0, 1]. Memory: float64 chunks of :data:`CHUNK` elements. Raises nothing for bad outputs (they are
    failures); raises ``KeyError`` for an unknown precision.
    """
    label = sentinel_label(sentinel)
    if len(candidate) != len(reference):
        return KbstudyTrial(False, "output_count", None, None, f"{len(candidate)} outputs, expected {len(reference)}",
                            sentinel=label)
    worst_rel, min_cov, worst_abs, worst_elem = 0.0, 1.0, None, None

    def fail(failure, rel, cov, detail):
        return KbstudyTrial(False, failure, rel, cov, detail, worst_abs, worst_elem, label)

    for ref, ref64, out in zip(reference, reference64, candidate):
        if not is_dense_tensor(out):
            return fail("not_a_dense_tensor", None, None, f"got {type(out).__name__}")
        if out.shape != ref.shape:
            return fail("shape", None, None, f"{tuple(out.shape)} != {tuple(ref.shape)}")
        if out.dtype != ref.dtype:
            return fail("dtype", None, None, f"{out.dtype} != {ref.dtype}")
        if out.device != ref64.device:
            out = out.to(ref64.device)
        m = _measure(out, ref64, sentinel)
        if m.max_abs_norm is not None:
            worst_abs = m.max_abs_norm if worst_abs is None else max(worst_abs, m.max_abs_norm)
        if m.elem_rel is not None:
            worst_elem = m.elem_rel if worst_elem is None else max(worst_elem, m.elem_rel)
        coverage = 1.0 - m.unwritten / m.n if m.n else 1.0
        min_cov = min(min_cov, coverage)
        if coverage < COVERAGE_THRESHOLD:
            return fail("coverage", None, min_cov, f"{m.unwritten} of {m.n} elements unwritten")
        if m.exact:
            if m.mismatches:
                return fail("mismatch", None, min_cov, f"{m.mismatches} of {m.n} elements differ")
            continue
        if m.nonfinite:
            return fail("nonfinite", None, min_cov, f"{m.nonfinite} non-finite elements differ")
        worst_rel = max(worst_rel, m.rel_l2)
        failure = accuracy_failure(m.metrics(), reference_metrics, precision)
        if failure is not None:
            return fail(failure, worst_rel, min_cov, _accuracy_detail(failure, m.metrics(), reference_metrics,
                                                                      precision))
    return KbstudyTrial(True, None, worst_rel, min_cov, None, worst_abs, worst_elem, label)


def _accuracy_detail(failure: str, metrics: dict, reference_metrics: dict | None, precision: str) -> str:
    """``"<metric> <value> > <bound>"``, and where the bound adapted, the reference's own error that set it."""
    metric = next(m for m, name in ACCURACY_FAILURES.items() if name == failure)
    e_ref = _known((reference_metrics or {}).get(metric))
    bound = accuracy_bound(metric, precision, e_ref)
    why = f" ({REFERENCE_FACTOR:g} x the reference's own {e_ref:.3g} at {precision})" \
        if e_ref is not None and bound > ACCURACY_THRESHOLDS[metric][precision] else ""
    label = {"rel_l2_error": "relative L2 error"}.get(metric, metric)
    return f"{label} {metrics[metric]:.3g} > {bound:.3g}{why}"


def integrity_failure(trial: KbstudyTrial, failure: str, detail: str) -> KbstudyTrial:
    """``trial`` failed with an integrity failure (one of :data:`INTEGRITY_FAILURES`), its measured metrics kept.

    An integrity failure outranks the value checks: a candidate that mutated its inputs or the global state may have
    produced right-looking values by doing so."""
    return dataclasses.replace(trial, passed=False, failure=failure, detail=detail)
