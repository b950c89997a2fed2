"""The record schema: one :class:`EvaluationRecord` per evaluation (one candidate on one problem at one precision and
size scale) and one :class:`ReferenceRecord` per problem (the reference's eager and ``torch.compile`` timings, measured
once per problem in a process where no candidate was ever loaded); their keys, outcome categories and flags.

Every number the study reports comes from these records. ``docs/reference/record_schema.md`` documents every field; a test keeps
the two in step. :mod:`kbstudy.records.store` writes and reads them; :mod:`kbstudy.records.frames` loads them as frames.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from typing import Any

from kbstudy.records.outcomes import OUTCOMES, Outcome  # noqa: F401 - the schema's outcome strings, named here too

#: 2: extra trials (``kbstudy_variants``, ``correct_default_only``), timing pool and timed-output check, host
#: cross-check, raw timing samples, speedup intervals and significance, custom-kernel share. Scoring applies the
#: significance rule to records of version 2 and later only (``kbstudy.analysis.scoring``).
#: 3: kbstudy's verdict is checks v4 (``kbstudy.verdict.checks``: three accuracy metrics, bounds adapting to the reference's
#: own error); ``ReferenceRecord`` gains the reference's own metrics and the ``low_spread`` / ``unjudgeable`` flags,
#: ``EvaluationRecord`` gains ``problem_flags``. Older records load with those fields ``None`` (NaN in frames).
SCHEMA_VERSION = 3


def _finite_or_none(value: Any) -> Any:
    """JSON has no NaN/Infinity: map non-finite floats to ``None`` so every line stays valid JSON (also inside
    ``metadata`` and other nested dicts and lists)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_none(v) for v in value]
    return value


@dataclasses.dataclass
class EvaluationRecord:
    """One candidate evaluated on one problem. Times in ms; ``None`` where a stage did not run."""

    # identity of the evaluation
    key: str
    run: str
    # the problem
    level: int
    problem_id: int
    problem_name: str
    problem_version: str
    problem_sha256: str
    category: str | None
    # the candidate
    candidate_id: str
    candidate_sha256: str
    model_config: str
    sample_id: int
    backend: str
    # how it was run
    precision: str
    size_scale: float
    device: str
    hardware: str
    timing_method: str | None
    # outcome
    outcome: str
    error_message: str | None = None
    compiled: bool = False
    # KernelBench's verdict (torch.allclose, atol = rtol = tolerance of the precision, 5 fixed-seed trials)
    kernelbench_correct: bool | None = None
    kernelbench_trials_passed: int | None = None
    kernelbench_trials: int | None = None
    kernelbench_tolerance: float | None = None
    kernelbench_max_abs_diff: float | None = None
    kernelbench_mean_abs_diff: float | None = None
    # kbstudy's verdict (scale-invariant, kbstudy.verdict.checks): form, coverage, and three accuracy metrics against float64
    # with bounds max(T, 4 e_ref) (checks v4; v1-v3 judged the relative L2 error alone)
    kbstudy_correct: bool | None = None
    kbstudy_failure: str | None = None
    # the flags of the problem's reference record that are set ("degenerate", "low_spread", "unjudgeable"): a verdict
    # on a flagged problem is no evidence of correctness; [] for none; None without a reference record (schema < 3)
    problem_flags: list | None = None
    # kbstudy's extra trials (kbstudy.verdict.trials): fresh seeds and other input distributions
    kbstudy_variants: dict | None = None
    correct_default_only: bool | None = None
    rel_l2_error: float | None = None
    rel_l2_threshold: float | None = None
    coverage: float | None = None
    coverage_threshold: float | None = None
    coverage_sentinels: list | None = None
    # the other two accuracy metrics (kbstudy.verdict.checks's docstring has their formulas; they decide from checks v4 on)
    max_abs_error_normalized: float | None = None
    elementwise_rel_error_max: float | None = None
    shape_ok: bool | None = None
    dtype_ok: bool | None = None
    reference_dtype: str | None = None
    # candidate timing (ms)
    candidate_ms_median: float | None = None
    candidate_ms_q1: float | None = None
    candidate_ms_q3: float | None = None
    candidate_ms_mean: float | None = None
    candidate_ms_std: float | None = None
    candidate_ms_min: float | None = None
    candidate_ms_max: float | None = None
    candidate_ms_ci_low: float | None = None
    candidate_ms_ci_high: float | None = None
    candidate_timing_trials: int | None = None
    candidate_ms_samples: list | None = None
    # anti-caching and cross-checks of the timing (kbstudy.harness.timing)
    timing_pool_size: int | None = None
    timing_output_ok: bool | None = None
    candidate_host_ms: float | None = None
    timing_discrepancy: bool | None = None
    # device time (GPU; kbstudy.harness.timing.time_device): cold L2, the host's enqueueing hidden, ms
    candidate_device_ms_median: float | None = None
    candidate_device_ms_q1: float | None = None
    candidate_device_ms_q3: float | None = None
    candidate_device_ms_samples: list | None = None
    # reference timings (ms), copied from the ReferenceRecord they were measured in
    eager_ms_median: float | None = None
    eager_ms_q1: float | None = None
    eager_ms_q3: float | None = None
    compile_ms_median: float | None = None
    compile_ms_q1: float | None = None
    compile_ms_q3: float | None = None
    reference_key: str | None = None
    # speedups (ratio of medians; > 1 means the candidate is faster)
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    # 95% percentile-bootstrap intervals of the speedups and their significance (kbstudy.harness.timing_stats.speedup_interval)
    speedup_vs_eager_ci_low: float | None = None
    speedup_vs_eager_ci_high: float | None = None
    speedup_significant: bool | None = None
    speedup_vs_compile_ci_low: float | None = None
    speedup_vs_compile_ci_high: float | None = None
    speedup_vs_compile_significant: bool | None = None
    # share of device time in the candidate's own kernels (GPU; kbstudy.harness.kernel_share)
    custom_kernel_share: float | None = None
    top_kernels: list | None = None
    # harness cost (s): wall time of the worker process, from spawn to its last message
    worker_wall_s: float | None = None
    # provenance
    schema_version: int = SCHEMA_VERSION
    git_commit: str | None = None
    kbstudy_version: str | None = None
    python_version: str | None = None
    torch_version: str | None = None
    triton_version: str | None = None
    cuda_version: str | None = None
    hostname: str | None = None
    created_utc: str | None = None
    metadata: dict = dataclasses.field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({k: _finite_or_none(v) for k, v in dataclasses.asdict(self).items()}, sort_keys=False)


@dataclasses.dataclass
class ReferenceRecord:
    """The reference of one problem, timed in eager and under ``torch.compile`` (Inductor, default mode). Times in ms."""

    key: str
    run: str
    level: int
    problem_id: int
    problem_name: str
    problem_version: str
    problem_sha256: str
    precision: str
    size_scale: float
    device: str
    hardware: str
    timing_method: str | None
    outcome: str  # "evaluated" or "reference_error"
    error_message: str | None = None
    eager_ms_median: float | None = None
    eager_ms_q1: float | None = None
    eager_ms_q3: float | None = None
    eager_ms_mean: float | None = None
    eager_ms_std: float | None = None
    eager_ms_min: float | None = None
    eager_ms_max: float | None = None
    eager_timing_trials: int | None = None
    compile_ms_median: float | None = None
    compile_ms_q1: float | None = None
    compile_ms_q3: float | None = None
    compile_ms_mean: float | None = None
    compile_ms_std: float | None = None
    compile_ms_min: float | None = None
    compile_ms_max: float | None = None
    compile_timing_trials: int | None = None
    eager_ms_samples: list | None = None
    compile_ms_samples: list | None = None
    timing_pool_size: int | None = None
    compile_error: str | None = None
    output_shape: list | None = None
    output_dtype: str | None = None
    reference_dtype: str | None = None
    # is the problem degenerate? (kbstudy.harness.child.reference.ReferenceSession.degeneracy: a finding about the problem)
    output_rms: float | None = None
    degenerate: bool | None = None
    degenerate_constant: bool | None = None
    degenerate_inputs: list | None = None
    # the reference at the run's precision against float64: worst over KernelBench's fixed-seed trials of each accuracy
    # metric (kbstudy.harness.child.reference.ReferenceSession.problem_flags; dimensionless); None before schema 3
    reference_rel_l2_error: float | None = None
    reference_max_abs_error_normalized: float | None = None
    reference_elementwise_rel_error_max: float | None = None
    # problem flags at this precision (kbstudy.verdict.checks.is_low_spread / is_unjudgeable; findings about the problem, as
    # ``degenerate``): a constant comes within LOW_SPREAD_FACTOR of passing; the reference has no correct digit
    low_spread: bool | None = None
    unjudgeable: bool | None = None
    # low_spread on KernelBench's default inputs alone (low_spread also asks every input variant that applies: a
    # verdict judged on signed inputs that spread is evidence); the finding about KernelBench's own check
    low_spread_default: bool | None = None
    schema_version: int = SCHEMA_VERSION
    git_commit: str | None = None
    kbstudy_version: str | None = None
    python_version: str | None = None
    torch_version: str | None = None
    triton_version: str | None = None
    cuda_version: str | None = None
    hostname: str | None = None
    created_utc: str | None = None
    metadata: dict = dataclasses.field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({k: _finite_or_none(v) for k, v in dataclasses.asdict(self).items()}, sort_keys=False)


def evaluation_key(problem_sha256: str, candidate_sha256: str, precision: str, size_scale: float, hardware: str,
                   settings: str = "") -> str:
    """The identity of an evaluation: same problem source, candidate source, precision, scale, hardware and settings.

    Returns the first 24 hex digits of the SHA-256 of those fields joined by ``|``.
    """
    raw = "|".join([problem_sha256, candidate_sha256, precision, repr(float(size_scale)), hardware, settings])
    return hashlib.sha256(raw.encode()).hexdigest()[:24]


def record_identity(row: dict) -> tuple:
    """What one evaluation record stands for: ``(key, model_config, sample_id)``.

    The measurement key leaves out who wrote the code, so two samples (or two model configurations) that produced the
    same source share it; each still gets a record of its own, or pass@k and per-configuration rates would lose them.
    """
    return row.get("key"), row.get("model_config"), row.get("sample_id")


def reference_key(problem_sha256: str, precision: str, size_scale: float, hardware: str, settings: str = "") -> str:
    """The identity of a reference timing (see :func:`evaluation_key`)."""
    return evaluation_key(problem_sha256, "reference-timing", precision, size_scale, hardware, settings)


def error_headline(text, limit: int = 120) -> str:
    """The line of a record's ``error_message`` that says most: the exception line of a Python traceback, else the
    first non-empty line; cut to ``limit`` characters (ending ``...``). ``""`` for no text (``None``, NaN, empty)."""
    if not isinstance(text, str) or not text:
        return ""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    # a Python traceback ends with the exception: that line says most
    line = lines[-1] if lines and lines[0].startswith("Traceback") else (lines[0] if lines else "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


#: Columns written to Parquet as JSON strings besides ``metadata`` (nested or ragged values; ``null`` for None); the
#: release (``kbstudy.pipeline.release``) encodes the same ones.
JSON_COLUMNS = ("output_shape", "kbstudy_variants", "top_kernels", "problem_flags")
#: The flags of a reference record that a verdict on its problem carries in ``EvaluationRecord.problem_flags``.
PROBLEM_FLAGS = ("degenerate", "low_spread", "unjudgeable")


def problem_flags(reference_row: dict | None) -> list | None:
    """``EvaluationRecord.problem_flags`` from a reference row: the names of :data:`PROBLEM_FLAGS` that are true
    there, in that order; ``None`` without an evaluated reference row."""
    if not reference_row or reference_row.get("outcome") != "evaluated":
        return None
    return [name for name in PROBLEM_FLAGS if reference_row.get(name) is True]
