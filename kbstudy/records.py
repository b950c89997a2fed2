"""The record schema and its store: one JSON line per evaluation, appended atomically, resumable, exportable to Parquet.

Every number the study reports comes from an :class:`EvaluationRecord` (one candidate on one problem at one precision
and size scale) or a :class:`ReferenceRecord` (the reference's eager and ``torch.compile`` timings, measured once per
problem in a process where no candidate was ever loaded). ``docs/record_schema.md`` documents every field; a test keeps
the two in step.

Store layout (one *run* folder, e.g. ``outputs/records/h200-level1-fp32``)::

    evaluations.jsonl   one EvaluationRecord a line
    references.jsonl    one ReferenceRecord a line
    evaluations.parquet Parquet export (``kbstudy export``)

Atomicity: each record is serialised to one line and written with a single ``os.write`` on a descriptor opened with
``O_APPEND``, then ``fsync``-ed; a process killed mid-write can leave at most one torn final line, which the reader
skips with a warning. Resume: a record's :attr:`EvaluationRecord.key` identifies the evaluation; a batch skips keys
already in the store, so an interrupted run loses nothing and duplicates nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import warnings
from pathlib import Path
from typing import Any, Iterable, Iterator

#: 2: extra trials (``kbstudy_variants``, ``correct_default_only``), timing pool and timed-output check, host
#: cross-check, raw timing samples, speedup intervals and significance, custom-kernel share. Scoring applies the
#: significance rule to records of version 2 and later only (``kbstudy.scoring``).
#: 3: kbstudy's verdict is checks v4 (``kbstudy.verify``: three accuracy metrics, bounds adapting to the reference's
#: own error); ``ReferenceRecord`` gains the reference's own metrics and the ``low_spread`` / ``unjudgeable`` flags,
#: ``EvaluationRecord`` gains ``problem_flags``. Older records load with those fields ``None`` (NaN in frames).
SCHEMA_VERSION = 3

#: Outcome categories, in the order a candidate meets them. Only ``evaluated`` carries verdicts and timings.
OUTCOMES = (
    "evaluated",  # built, ran on every trial; verdicts (and timings, if it was correct) recorded
    "skipped",  # not run, with the reason (e.g. a CUDA candidate on a machine without a GPU)
    "compile_error",  # the source did not build: syntax error, nvcc/ninja failure, missing ModelNew
    "runtime_error",  # a Python exception while constructing or calling ModelNew
    "cuda_error",  # a CUDA error: illegal address, launch failure, misaligned access, device-side assert
    "out_of_memory",  # torch.OutOfMemoryError (device or host)
    "timeout",  # exceeded the compile or run timeout (a hang); the worker was killed
    "crashed",  # the worker died without reporting: segfault, abort, killed by a signal
    "reference_error",  # the reference itself failed on this problem; no candidate verdict is possible
)


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
    # kbstudy's verdict (scale-invariant, kbstudy.verify): form, coverage, and three accuracy metrics against float64
    # with bounds max(T, 4 e_ref) (checks v4; v1-v3 judged the relative L2 error alone)
    kbstudy_correct: bool | None = None
    kbstudy_failure: str | None = None
    # the flags of the problem's reference record that are set ("degenerate", "low_spread", "unjudgeable"): a verdict
    # on a flagged problem is no evidence of correctness; [] for none; None without a reference record (schema < 3)
    problem_flags: list | None = None
    # kbstudy's extra trials (kbstudy.variants): fresh seeds and other input distributions
    kbstudy_variants: dict | None = None
    correct_default_only: bool | None = None
    rel_l2_error: float | None = None
    rel_l2_threshold: float | None = None
    coverage: float | None = None
    coverage_threshold: float | None = None
    coverage_sentinels: list | None = None
    # the other two accuracy metrics (kbstudy.verify's docstring has their formulas; they decide from checks v4 on)
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
    # anti-caching and cross-checks of the timing (kbstudy.timing)
    timing_pool_size: int | None = None
    timing_output_ok: bool | None = None
    candidate_host_ms: float | None = None
    timing_discrepancy: bool | None = None
    # device time (GPU; kbstudy.timing.time_device): cold L2, the host's enqueueing hidden, ms
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
    # 95% percentile-bootstrap intervals of the speedups and their significance (kbstudy.timing.speedup_interval)
    speedup_vs_eager_ci_low: float | None = None
    speedup_vs_eager_ci_high: float | None = None
    speedup_significant: bool | None = None
    speedup_vs_compile_ci_low: float | None = None
    speedup_vs_compile_ci_high: float | None = None
    speedup_vs_compile_significant: bool | None = None
    # share of device time in the candidate's own kernels (GPU; kbstudy.kernel_share)
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
    # is the problem degenerate? (kbstudy.reference.ReferenceSession.degeneracy: a finding about the problem)
    output_rms: float | None = None
    degenerate: bool | None = None
    degenerate_constant: bool | None = None
    degenerate_inputs: list | None = None
    # the reference at the run's precision against float64: worst over KernelBench's fixed-seed trials of each accuracy
    # metric (kbstudy.reference.ReferenceSession.problem_flags; dimensionless); None before schema 3
    reference_rel_l2_error: float | None = None
    reference_max_abs_error_normalized: float | None = None
    reference_elementwise_rel_error_max: float | None = None
    # problem flags at this precision (kbstudy.verify.is_low_spread / is_unjudgeable; findings about the problem, as
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


# ----------------------------------------------------------------------------------------------------------- JSONL


def append_jsonl(path: str | os.PathLike, line: str | dict) -> None:
    """Append one JSON object as one line, atomically (single ``O_APPEND`` write, then ``fsync``).

    Raises ``ValueError`` if the serialised line contains a newline (it would not be one record).
    """
    text = line if isinstance(line, str) else json.dumps(line)
    if "\n" in text:
        raise ValueError("a record must serialise to a single line")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        data = (text + "\n").encode()
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data  # the last line was torn by a killed writer: start this record on a line of its own
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def error_headline(text, limit: int = 120) -> str:
    """The line of a record's ``error_message`` that says most: the exception line of a Python traceback, else the
    first non-empty line; cut to ``limit`` characters (ending ``...``). ``""`` for no text (``None``, NaN, empty)."""
    if not isinstance(text, str) or not text:
        return ""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    # a Python traceback ends with the exception: that line says most
    line = lines[-1] if lines and lines[0].startswith("Traceback") else (lines[0] if lines else "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def iter_jsonl(path: str | os.PathLike) -> Iterator[dict]:
    """Yield the JSON objects of a JSONL file. A torn (unparseable) line is skipped with a warning, not raised."""
    path = Path(path)
    if not path.exists():
        return
    with path.open() as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                warnings.warn(f"{path}:{lineno}: skipping a torn or malformed line", stacklevel=2)


#: Columns written to Parquet as JSON strings besides ``metadata`` (nested or ragged values; ``null`` for None); the
#: release (``kbstudy.release``) encodes the same ones.
JSON_COLUMNS = ("output_shape", "kbstudy_variants", "top_kernels", "problem_flags")
#: The flags of a reference record that a verdict on its problem carries in ``EvaluationRecord.problem_flags``.
PROBLEM_FLAGS = ("degenerate", "low_spread", "unjudgeable")


def problem_flags(reference_row: dict | None) -> list | None:
    """``EvaluationRecord.problem_flags`` from a reference row: the names of :data:`PROBLEM_FLAGS` that are true
    there, in that order; ``None`` without an evaluated reference row."""
    if not reference_row or reference_row.get("outcome") != "evaluated":
        return None
    return [name for name in PROBLEM_FLAGS if reference_row.get(name) is True]


class RecordStore:
    """A run folder of records: ``evaluations.jsonl`` and ``references.jsonl`` (see the module docstring)."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.evaluations_path = self.folder / "evaluations.jsonl"
        self.references_path = self.folder / "references.jsonl"

    def append(self, record: EvaluationRecord | ReferenceRecord) -> None:
        path = self.references_path if isinstance(record, ReferenceRecord) else self.evaluations_path
        append_jsonl(path, record.to_json())

    def evaluation_keys(self) -> set[str]:
        """The measurement keys present (:func:`evaluation_key`: same problem, code, precision, scale, hardware and
        settings). Several records can share one: the same code submitted as several samples or configurations."""
        return {row["key"] for row in iter_jsonl(self.evaluations_path) if "key" in row}

    def evaluations_by_identity(self) -> dict[tuple, dict]:
        """The latest evaluation row per :func:`record_identity` (measurement key, model configuration, sample id)."""
        return {record_identity(row): row for row in iter_jsonl(self.evaluations_path) if "key" in row}

    def references(self) -> dict[str, dict]:
        """The latest reference row for each reference key."""
        return {row["key"]: row for row in iter_jsonl(self.references_path) if "key" in row}

    def evaluations(self) -> list[dict]:
        """All evaluation rows, one per :func:`record_identity`; if an identity appears twice (a record rewritten by
        hand), the last one wins."""
        latest: dict[tuple, dict] = {}
        for row in iter_jsonl(self.evaluations_path):
            latest[record_identity(row) if "key" in row else (str(len(latest)),)] = row
        return list(latest.values())

    def evaluations_frame(self):
        """The evaluations as a pandas DataFrame, with one column per schema field."""
        import pandas as pd

        columns = [f.name for f in dataclasses.fields(EvaluationRecord)]
        return pd.DataFrame(self.evaluations(), columns=columns)

    def references_frame(self):
        import pandas as pd

        columns = [f.name for f in dataclasses.fields(ReferenceRecord)]
        return pd.DataFrame(list(self.references().values()), columns=columns)

    def export_parquet(self) -> list[Path]:
        """Write ``evaluations.parquet`` and ``references.parquet`` beside the JSONL files; returns their paths.
        ``metadata`` and the columns of ``JSON_COLUMNS`` are stored as JSON strings."""
        written = []
        for frame, name in ((self.evaluations_frame(), "evaluations"), (self.references_frame(), "references")):
            frame = frame.copy()
            frame["metadata"] = frame["metadata"].map(lambda m: json.dumps(m or {}, sort_keys=True))
            for column in JSON_COLUMNS:
                if column in frame:
                    # a field older records lack is NaN in the frame: stored as JSON null, not as "NaN"
                    frame[column] = frame[column].map(lambda v: json.dumps(_finite_or_none(v)))
            path = self.folder / f"{name}.parquet"
            frame.to_parquet(path, index=False)
            written.append(path)
        return written


def load_frames(folders: Iterable[str | os.PathLike]):
    """The evaluations and references of several run folders, concatenated in the order given, each row tagged with
    its folder (``records_folder``: the path as given). Returns ``(evaluations, references)``, DataFrames with one
    column per schema field plus ``records_folder``; empty (with those columns) when no folder holds records."""
    import pandas as pd

    evals, refs = [], []
    for folder in folders:
        store = RecordStore(folder)
        for frame, out in ((store.evaluations_frame(), evals), (store.references_frame(), refs)):
            if len(frame):
                out.append(frame.assign(records_folder=str(folder)))
    empty = RecordStore(Path("/nonexistent"))  # a folder without records: frames with the schema's columns
    return tuple(pd.concat(parts, ignore_index=True) if parts else blank.assign(records_folder=pd.Series(dtype=str))
                 for parts, blank in ((evals, empty.evaluations_frame()), (refs, empty.references_frame())))


def load_evaluations(folders: Iterable[str | os.PathLike]):
    """Concatenate the evaluations of several run folders into one DataFrame (what the notebooks read)."""
    return load_frames(folders)[0].drop(columns="records_folder")
