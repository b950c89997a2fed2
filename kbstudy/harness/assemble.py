"""Record assembly: from a problem, a candidate and the fields a run produced to the
:class:`~kbstudy.records.schema.EvaluationRecord` appended to the store, and the reference's record fields.

Speedups are ratios of medians; each gets a 95% percentile-bootstrap interval from the raw samples of both sides
(``kbstudy.harness.timing_stats.speedup_interval``), and ``speedup_significant`` says whether it excludes 1. A speedup
is withdrawn (``None``) when the sampled timed outputs did not match (``timing_output_ok`` false) or when the event
timing disagrees with the host-synchronised time (``timing_discrepancy`` true; its significance is then false):
no table or median may use an event time the host clock contradicts.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

from kbstudy.harness.candidates import Candidate
from kbstudy.harness.config import EvalConfig
from kbstudy.harness.problems import Problem
from kbstudy.harness.timing_stats import speedup_interval, speedup_significant, summarize
from kbstudy.records import provenance
from kbstudy.records.schema import EvaluationRecord, evaluation_key, problem_flags
from kbstudy.records.store import RecordStore
from kbstudy.verdict.checks import ACCURACY_METRICS

#: The provenance fields every record of a batch shares (``kbstudy.records.provenance.collect``).
PROVENANCE_FIELDS = ("git_commit", "kbstudy_version", "python_version", "torch_version", "triton_version",
                     "cuda_version", "hostname")


@dataclasses.dataclass
class BatchSummary:
    """What a batch did: records written, keys skipped as already present, candidates with no matching problem."""

    written: int = 0
    already_done: int = 0
    unmatched: list = dataclasses.field(default_factory=list)
    outcomes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    seconds: float = 0.0


def common_fields(problem: Problem, cfg: EvalConfig, device: str, hardware: str, prov: dict) -> dict:
    """The fields every record of ``problem`` in this batch shares: run, problem, precision, size, device, hardware,
    timing method and provenance."""
    return {
        "run": cfg.run, "level": problem.level, "problem_id": problem.problem_id, "problem_name": problem.name,
        "problem_version": problem.version, "problem_sha256": problem.sha256, "precision": cfg.precision,
        "size_scale": cfg.size_scale, "device": device.split(":")[0], "hardware": hardware,
        "timing_method": "cuda_event" if device.startswith("cuda") else "cpu_perf_counter",
        **{k: prov.get(k) for k in PROVENANCE_FIELDS},
    }


def write_record(store: RecordStore, summary: BatchSummary, problem: Problem, cand: Candidate, cfg: EvalConfig,
                 hardware: str, settings: str, common: dict, fields: dict, ref_row: dict | None) -> None:
    """Append the record of ``cand``: its identity, the problem's ``common`` fields and the run's ``fields``
    (``timing_samples`` become the candidate's timing fields); where the problem's reference record ``ref_row`` was
    evaluated, its baseline medians, the problem flags and the speedups. Counts it in ``summary``."""
    fields = dict(fields)
    samples = fields.pop("timing_samples", None)
    metadata = {**cand.metadata, **fields.pop("metadata", {})}
    if cfg.correctness_only:
        metadata["correctness_only"] = True  # verdicts only: not timed, no speedup (settings_key says so too)
    record = EvaluationRecord(
        key=evaluation_key(problem.sha256, cand.sha256, cfg.precision, cfg.size_scale, hardware, settings),
        category=problem.category if problem.version != "dlrm" else "dlrm",
        candidate_id=cand.candidate_id, candidate_sha256=cand.sha256, model_config=cand.model_config,
        sample_id=cand.sample_id, backend=cand.backend, created_utc=provenance.collect("cpu")["created_utc"],
        metadata=metadata, **common, **fields)
    if samples:
        for name, value in timing_fields(samples, "candidate").items():
            setattr(record, name, value)
        record.candidate_ms_samples = [float(x) for x in samples]
    if ref_row and ref_row.get("outcome") == "evaluated":
        record.reference_key = ref_row["key"]
        for base in ("eager", "compile"):
            for stat in ("median", "q1", "q3"):
                setattr(record, f"{base}_ms_{stat}", ref_row.get(f"{base}_ms_{stat}"))
        record.reference_dtype = ref_row.get("reference_dtype")
        if record.outcome == "evaluated":
            record.problem_flags = problem_flags(ref_row)  # so counts can exclude verdicts on flagged problems
        if record.candidate_ms_median and record.timing_output_ok is not False:
            _speedups(record, ref_row, samples)
    store.append(record)
    summary.written += 1
    summary.outcomes[record.outcome] += 1


def _speedups(record: EvaluationRecord, ref_row: dict, samples: list[float]) -> None:
    """Speedups (ratio of medians), their bootstrap intervals and significance (``kbstudy.harness.timing_stats``): a speedup is
    significant when its 95% interval excludes 1 on the side of the point estimate. None while ``timing_discrepancy``
    is true (the event timing missed work the host clock saw): the ratio stays missing, the significance false."""
    for base, ratio_field, sig_field in (("eager", "speedup_vs_eager", "speedup_significant"),
                                         ("compile", "speedup_vs_compile", "speedup_vs_compile_significant")):
        median = getattr(record, f"{base}_ms_median")
        if not median:
            continue
        if record.timing_discrepancy:
            # the events missed work the host clock saw: no speedup from event time (withdraw_event_only_speedups)
            setattr(record, sig_field, False)
            continue
        speedup = median / record.candidate_ms_median
        setattr(record, ratio_field, speedup)
        interval = speedup_interval(ref_row.get(f"{base}_ms_samples"), samples)
        if interval is not None:
            setattr(record, f"{ratio_field}_ci_low", interval[0])
            setattr(record, f"{ratio_field}_ci_high", interval[1])
        significant = False if record.timing_discrepancy else speedup_significant(interval, speedup)
        setattr(record, sig_field, significant)


def device_time_fields(samples: list[float]) -> dict:
    """The record fields of a device-time measurement (``kbstudy.harness.timing.time_device``; samples in ms):
    ``candidate_device_ms_median``, ``_q1``, ``_q3`` and ``candidate_device_ms_samples``. Raises ``ValueError`` on an
    empty list."""
    stats = summarize(samples)
    return {"candidate_device_ms_median": stats.median, "candidate_device_ms_q1": stats.q1,
            "candidate_device_ms_q3": stats.q3, "candidate_device_ms_samples": [float(x) for x in samples]}


def timing_fields(samples: list[float] | None, prefix: str) -> dict:
    """``summarize(samples).as_fields(prefix)``: the record's ``<prefix>_ms_*`` fields; ``{}`` without samples."""
    if not samples:
        return {}
    return summarize(samples).as_fields(prefix)


def note_integrity(metadata: dict, trial: int, integrity: dict) -> None:
    """Record a trial's integrity findings in the record's metadata: ``inputs_mutated`` (``[[trial, [input
    indices]], ...]``), ``global_state_changes`` (the changes first seen, with their trial), ``stale_output_trials``,
    ``storage_reuse_trial`` (the trial that ran on the previous trial's input storage) and ``pristine_on_host``
    (``[[trial, [input indices]], ...]``: inputs whose pristine copy for the inputs-mutated check had to go to host
    memory, ``kbstudy.harness.child.integrity.pristine_on_host``; each costs a host round trip in that trial's stage time)."""
    if integrity.get("inputs_mutated"):
        metadata.setdefault("inputs_mutated", []).append([trial, list(integrity["inputs_mutated"])])
    if integrity.get("global_state") and "global_state_changes" not in metadata:
        metadata["global_state_changes"] = {"trial": trial, "changes": list(integrity["global_state"])[:50]}
    if integrity.get("stale_output"):
        metadata.setdefault("stale_output_trials", []).append(trial)
    if integrity.get("reused_inputs"):
        metadata["storage_reuse_trial"] = trial
    if integrity.get("pristine_on_host"):
        metadata.setdefault("pristine_on_host", []).append([trial, list(integrity["pristine_on_host"])])


def record_same_code(store: RecordStore, summary: BatchSummary, same_code: dict[str, list[Candidate]]) -> None:
    """One record per candidate whose code was already measured under the same key (another sample or model
    configuration wrote the identical source): the measurement is copied, the candidate's identity is its own, and
    ``metadata.measurement_of`` names the candidate that was run."""
    if not same_code:
        return
    measured: dict[str, dict] = {}
    for row in store.evaluations():
        measured.setdefault(row["key"], row)  # the first record of a key is the one that was run
    for key, cands in same_code.items():
        source = measured.get(key)
        if source is None:  # the run was interrupted before the measured candidate's record was written
            continue
        for cand in cands:
            row = {**source, "candidate_id": cand.candidate_id, "model_config": cand.model_config,
                   "sample_id": cand.sample_id, "created_utc": provenance.collect("cpu")["created_utc"],
                   "metadata": {**(source.get("metadata") or {}), **cand.metadata,
                                "measurement_of": {"candidate_id": source.get("candidate_id"),
                                                   "model_config": source.get("model_config"),
                                                   "sample_id": source.get("sample_id")}}}
            store.append(EvaluationRecord(**{f.name: row.get(f.name) for f in dataclasses.fields(EvaluationRecord)
                                             if f.name in row}))
            summary.written += 1
            summary.outcomes[row.get("outcome")] += 1


# ------------------------------------------------------------------------------------------------ reference records


#: The fields of :func:`common_fields` that a reference record has too.
REFERENCE_COMMON_FIELDS = ("run", "level", "problem_id", "problem_name", "problem_version", "problem_sha256",
                           "precision", "size_scale", "device", "hardware", "timing_method", *PROVENANCE_FIELDS)


def reference_row(key: str, common: dict) -> dict:
    """The start of a problem's reference record: its key, the shared fields and the time it is made."""
    row: dict[str, Any] = {"key": key, **{k: common[k] for k in REFERENCE_COMMON_FIELDS}}
    row["created_utc"] = provenance.collect("cpu")["created_utc"]
    return row


def reference_report_fields(info: dict) -> dict:
    """The reference record's fields from the reference process's report (``ReferenceSession.describe``): output
    shape and dtype, the dtype judged against, degeneracy, the problem flags, the reference's own error per metric,
    and in ``metadata`` the TF32 flags and whether each input variant applies."""
    variant_report = {str(t): ("applies" if reason is None else reason)
                      for t, reason in sorted((info.get("variants") or {}).items())}
    structural = {str(t): ("applies" if reason is None else reason)
                  for t, reason in sorted((info.get("structural_variants") or {}).items())}
    return {"output_shape": info.get("output_shape"), "output_dtype": info.get("output_dtype"),
            "reference_dtype": info.get("reference_dtype"),
            **{k: info.get(k) for k in ("output_rms", "degenerate", "degenerate_constant", "degenerate_inputs",
                                        "low_spread", "low_spread_default", "unjudgeable")},
            **{f"reference_{m}": info.get(f"reference_{m}") for m in ACCURACY_METRICS},
            "metadata": {"tf32_matmul": info.get("tf32_matmul"), "tf32_cudnn": info.get("tf32_cudnn"),
                         **({"variants": variant_report} if variant_report else {}),
                         # the shape, layout and parameter variants, and the sizes each shape variant used
                         **({"structural_variants": structural,
                             "shape_edits": {str(t): e for t, e in (info.get("shape_edits") or {}).items()}}
                            if structural else {}),
                         **{k: info[k] for k in ("output_rel_std", "degeneracy_error", "flags_error")
                            if info.get(k) is not None}}}


def baseline_timing_fields(result: dict) -> dict:
    """The reference record's timing fields from the reference process's baseline timings (eager and
    ``torch.compile``: summaries without the median intervals, raw samples, pool size, compile error)."""
    fields = {**timing_fields(result.get("eager"), "eager"), **timing_fields(result.get("compile"), "compile")}
    for name in ("eager_ms_ci_low", "eager_ms_ci_high", "compile_ms_ci_low", "compile_ms_ci_high"):
        fields.pop(name, None)
    fields.update({"eager_ms_samples": result.get("eager"), "compile_ms_samples": result.get("compile"),
                   "timing_pool_size": result.get("pool_size"), "compile_error": result.get("compile_error")})
    return fields
