"""Hand-made evaluation records that follow ``kbstudy.records.store`` exactly (written with ``RecordStore.append``), for the
scoring, notebook and study tests. Every expected value in those tests is computed by hand from these rows.

:func:`write_calibration_slice` instead copies real records: a fixture-sized slice of the committed CPU calibration,
for the audit (notebook 02) tests."""

from __future__ import annotations

from pathlib import Path

from kbstudy.records.schema import EvaluationRecord, ReferenceRecord, evaluation_key, reference_key
from kbstudy.records.store import RecordStore
from support.committed import RECORDS, committed_records

NAMES = {1: "1_Square_matrix_multiplication_.py", 2: "2_Standard_matrix_multiplication_.py", 3: "19_ReLU.py",
         4: "23_Softmax.py", 5: "36_RMSNorm_.py", 6: "40_LayerNorm.py"}


def record(model_config: str, problem_id: int, *, outcome: str = "evaluated", compiled: bool | None = None,
           kb: bool | None = None, kbs: bool | None = None, eager: float | None = None, compile: float | None = None,
           sample_id: int = 0, run: str = "fixture", hardware: str = "fixture-cpu", backend: str = "torch",
           level: int = 1, precision: str = "fp32", sig: bool | None = True,
           sig_compile: bool | None = True) -> EvaluationRecord:
    """One EvaluationRecord; ``eager``/``compile`` are the speedups (ratios), times are derived from them in ms;
    ``sig``/``sig_compile`` are ``speedup_significant``/``speedup_vs_compile_significant`` (set only where the
    speedup is given)."""
    problem_sha = f"problem-{level}-{problem_id}"
    candidate_sha = f"{model_config}-{level}-{problem_id}-{sample_id}"
    evaluated = outcome == "evaluated"
    compiled = evaluated if compiled is None else compiled
    candidate_ms = 1.0 if (eager is not None or compile is not None) else None
    return EvaluationRecord(
        key=evaluation_key(problem_sha, candidate_sha, precision, 0.0625, hardware),
        run=run, level=level, problem_id=problem_id, problem_name=NAMES.get(problem_id, f"{problem_id}_p.py"),
        problem_version="current", problem_sha256=problem_sha, category=None,
        candidate_id=f"{model_config}/L{level}/{problem_id}/s{sample_id}", candidate_sha256=candidate_sha,
        model_config=model_config, sample_id=sample_id, backend=backend, precision=precision, size_scale=0.0625,
        device="cpu", hardware=hardware, timing_method="cpu_perf_counter" if evaluated else None, outcome=outcome,
        error_message=None if evaluated else f"fixture {outcome}", compiled=compiled,
        kernelbench_correct=kb if evaluated else None, kbstudy_correct=kbs if evaluated else None,
        candidate_ms_median=candidate_ms,
        eager_ms_median=eager * candidate_ms if eager is not None else None,
        compile_ms_median=compile * candidate_ms if compile is not None else None,
        speedup_vs_eager=eager, speedup_vs_compile=compile,
        speedup_significant=sig if eager is not None else None,
        speedup_vs_compile_significant=sig_compile if compile is not None else None,
        reference_key=reference_key(problem_sha, precision, 0.0625, hardware),
        created_utc="2026-01-01T00:00:00+00:00",
    )


def config_a() -> list[EvaluationRecord]:
    """Five attempts and one skipped record. Hand-computed: n = 5; compiled 80 %, KB-correct 60 %,
    kbstudy-correct 40 %; kbstudy-correct eager speedups {2.0, 0.5}; KB-correct adds 4.0 (problem 3)."""
    return [
        record("A", 1, kb=True, kbs=True, eager=2.0, compile=1.0),
        record("A", 2, kb=True, kbs=True, eager=0.5, compile=0.25),
        record("A", 3, kb=True, kbs=False, eager=4.0, compile=3.0),
        record("A", 4, outcome="compile_error"),
        record("A", 5, kb=False, kbs=False),
        record("A", 6, outcome="skipped", backend="cuda"),
    ]


def config_b() -> list[EvaluationRecord]:
    """Three samples on each of two problems: problem 1 has one correct sample (speedup 1.5), problem 2 none."""
    return [
        record("B", 1, sample_id=0, kb=True, kbs=True, eager=1.5, compile=0.9),
        record("B", 1, sample_id=1, kb=False, kbs=False),
        record("B", 1, sample_id=2, outcome="runtime_error"),
        record("B", 2, sample_id=0, kb=False, kbs=False),
        record("B", 2, sample_id=1, outcome="timeout"),
        record("B", 2, sample_id=2, outcome="crashed", compiled=True),
    ]


def config_cuda_only() -> list[EvaluationRecord]:
    """A configuration whose every candidate was skipped (CUDA on a CPU machine): n = 0."""
    return [record("C", pid, outcome="skipped", backend="cuda") for pid in (1, 2)]


def all_records() -> list[EvaluationRecord]:
    return config_a() + config_b() + config_cuda_only()


def write_store(folder: str | Path, records: list[EvaluationRecord] | None = None) -> RecordStore:
    """Write ``records`` (default :func:`all_records`) and one ReferenceRecord per problem into ``folder``."""
    store = RecordStore(folder)
    records = all_records() if records is None else records
    for rec in records:
        store.append(rec)
    seen = set()
    for rec in records:
        if rec.reference_key in seen:
            continue
        seen.add(rec.reference_key)
        store.append(ReferenceRecord(key=rec.reference_key, run=rec.run, level=rec.level, problem_id=rec.problem_id,
                                     problem_name=rec.problem_name, problem_version=rec.problem_version,
                                     problem_sha256=rec.problem_sha256, precision=rec.precision,
                                     size_scale=rec.size_scale, device=rec.device, hardware=rec.hardware,
                                     timing_method="cpu_perf_counter", outcome="evaluated", eager_ms_median=1.0,
                                     compile_ms_median=1.0, created_utc="2026-01-01T00:00:00+00:00"))
    return store


#: The slice of ``outputs/records/kernelbench/cpu/calibration`` the audit tests read: folder -> (level, problem ids).
#: Level 1: a matrix-vector product (low spread at bf16), ReLU, softmax (zeros passes KernelBench's bf16 check) and the
#: KL divergence (one-element output, ill-conditioned at bf16); level 2: problem 9 (identically zero at 1/64) and 37
#: (GroupNorm of one-element groups at 1/64: unjudgeable).
CALIBRATION_SLICE = {"level1-fp32": (1, {4, 19, 23, 98}), "level1-bf16": (1, {4, 19, 23, 98}),
                     "level23-fp32": (2, {9, 37}), "level23-bf16": (2, {9, 37})}


#: The same slice as committed before checks v4 (schema < 3, checks-v1 verdicts): ``tests/fixtures/cpu-calibration-v1``.
CALIBRATION_SLICE_V1 = Path(__file__).resolve().parents[1] / "fixtures" / "cpu-calibration-v1"


def write_calibration_slice(dest: str | Path, source: str | Path | None = None) -> Path:
    """Copy the evaluation and reference lines of :data:`CALIBRATION_SLICE` unchanged from ``source`` (default: the
    committed ``outputs/records/kernelbench/cpu/calibration``, made under checks v4; :data:`CALIBRATION_SLICE_V1` for
    the records made before it) into ``dest/cpu-calibration/<folder>``; returns ``dest/cpu-calibration``. Fails (an
    assertion) when the committed records are absent."""
    import json

    source = Path(source) if source is not None else RECORDS / "kernelbench" / "cpu" / "calibration"
    root = Path(dest) / "cpu-calibration"
    for name, (level, ids) in CALIBRATION_SLICE.items():
        committed_records(source / name, file="evaluations.jsonl")
        out = root / name
        out.mkdir(parents=True, exist_ok=True)
        for file in ("evaluations.jsonl", "references.jsonl"):
            keep = [line for line in (source / name / file).read_text().splitlines()
                    if line.strip() and json.loads(line)["level"] == level and json.loads(line)["problem_id"] in ids]
            (out / file).write_text("\n".join(keep) + "\n")
    return root
