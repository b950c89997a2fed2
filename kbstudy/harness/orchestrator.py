"""Orchestration of a batch: problems x candidates -> records. The orchestrator runs no problem or candidate code.

For each problem with candidates not yet in the store:

1. CUDA candidates are built first, in parallel across CPU cores, into a build cache keyed by the source's SHA-256
   (``<cache_dir>/torch_extensions/<sha>``), each build in a process of its own with a timeout;
2. a *reference process* loads the problem, builds its inputs and expected outputs, and times the reference in eager
   and under ``torch.compile`` (once per problem, precision, size scale and hardware: reused from ``references.jsonl``
   on later runs);
3. each candidate gets a fresh *candidate process* (``kbstudy.harness.child.candidate``; the parent side:
   ``kbstudy.harness.candidate_run``): load -> construct -> one call per correctness
   trial (KernelBench's fixed-seed trials, then kbstudy's extra trials: fresh seeds and the input variants that apply
   to the problem, ``kbstudy.verdict.trials``), its outputs judged in the reference process (``kbstudy.verdict.checks``) -> timing,
   if either verdict passed, over a pool of distinct input sets, with a sample of the timed outputs judged too and,
   on a GPU, a host-synchronised cross-check of the event timing (``kbstudy.harness.timing``) -> on a GPU, one profiled call
   for the share of device time in custom kernels (``kbstudy.harness.kernel_share``);
4. whatever happens -- an exception, a compile error, a hang past the timeout, a segfault, a CUDA error, an OOM --
   becomes one :class:`~kbstudy.records.schema.EvaluationRecord`, appended to the store before the next candidate starts.

Where each piece lives: settings and device (``config``), processes (``pool``, ``child/``), builds (``builds``), the
message protocol (``protocol``), the reference's and a candidate's parent side (``reference_run``, ``candidate_run``),
record assembly and speedups (``assemble``); this module is the batch loop.

CUDA candidates on a machine without a GPU are recorded as ``skipped``; Triton candidates run on a CPU under Triton's
interpreter (``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import collections
import os
import signal
import threading
import time

from tqdm.auto import tqdm

from kbstudy.harness.assemble import BatchSummary, common_fields, record_same_code, write_record
from kbstudy.harness.builds import BuildQueue
from kbstudy.harness.candidate_run import run_candidate
from kbstudy.harness.candidates import Candidate
from kbstudy.harness.config import EvalConfig, hardware_label, resolve_device
from kbstudy.harness.pool import ChildDied, ChildPool, ChildTimeout, start_forkserver
from kbstudy.harness.problems import Problem
from kbstudy.harness.reference_run import ReferenceHandle, time_reference
from kbstudy.harness.tensors import kernelbench_trial_seeds
from kbstudy.records import provenance
from kbstudy.records.outcomes import OUTCOMES, Outcome
from kbstudy.records.schema import ReferenceRecord, evaluation_key, reference_key
from kbstudy.records.store import RecordStore
from kbstudy.verdict.trials import ExtraTrial, plan_extra_trials


def evaluate_batch(problems: list[Problem], candidates: list[Candidate], store: RecordStore,
                   cfg: EvalConfig) -> BatchSummary:
    """Evaluate every (problem, candidate) pair not already in ``store``; append one record per candidate.

    Candidates are matched to problems by (level, problem_id). Raises ``RuntimeError`` if ``cfg.device`` asks for a
    GPU that is not there; never raises for a candidate's failure (that is a record). A script calling this needs the
    ``if __name__ == "__main__":`` guard (worker processes re-import the main script, as with ``spawn``).
    """
    t0 = time.perf_counter()
    device = resolve_device(cfg.device)
    if not device.startswith("cuda"):
        # OpenMP threads that spin after a parallel region steal the 2nd core from the process being timed; the
        # forkserver reads this when torch loads libgomp
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    start_forkserver("cuda" if device.startswith("cuda") else "cpu")
    hardware = hardware_label(device)
    prov = provenance.collect("cpu")
    prov["hardware"] = hardware
    settings = cfg.settings_key()
    summary = BatchSummary()
    by_problem: dict[tuple[int, int], list[Candidate]] = collections.defaultdict(list)
    problem_index = {(p.level, p.problem_id): p for p in problems}
    unknown = set(cfg.retry_outcomes) - set(OUTCOMES)
    if unknown:
        raise ValueError(f"unknown outcome(s) to retry: {sorted(unknown)}; known: {', '.join(OUTCOMES)}")
    latest = store.evaluations_by_identity()
    done = {identity for identity, row in latest.items() if row.get("outcome") not in cfg.retry_outcomes}
    measured = {row["key"] for row in latest.values() if row.get("outcome") not in cfg.retry_outcomes}
    references = {key: row for key, row in store.references().items()
                  if row.get("outcome") not in cfg.retry_outcomes}  # a failed reference is measured again too
    # identical code under another model configuration or sample id: measured once, recorded once per candidate
    same_code: dict[str, list[Candidate]] = collections.defaultdict(list)
    for cand in candidates:
        problem = problem_index.get((cand.level, cand.problem_id))
        if problem is None:
            summary.unmatched.append(cand.candidate_id)
            continue
        key = evaluation_key(problem.sha256, cand.sha256, cfg.precision, cfg.size_scale, hardware, settings)
        identity = (key, cand.model_config, cand.sample_id)
        if identity in done:
            summary.already_done += 1
            continue
        done.add(identity)  # the same candidate listed twice is evaluated once
        if key in measured:
            same_code[key].append(cand)
            continue
        measured.add(key)
        by_problem[(problem.level, problem.problem_id)].append(cand)
    pending = [c for _, cs in sorted(by_problem.items()) for c in cs]
    # CUDA builds start now, in problem order, and overlap the evaluation of the problems already built
    builds = BuildQueue([c for c in pending if not _skipped_float32_only(c, cfg)], cfg, device) \
        if device.startswith("cuda") else None
    seeds = _trial_seeds(cfg)
    extra = _extra_trials(cfg)
    on_gpu = device.startswith("cuda")
    pool = ChildPool(spare=on_gpu if cfg.spare_process is None else cfg.spare_process,
                     warm_device=device if on_gpu else None)
    # children live in process groups of their own, so a signal to this process alone would orphan them: turn
    # SIGTERM (timeout, batch schedulers) into an exception that reaches the cleanup below
    previous = signal.signal(signal.SIGTERM, _raise_interrupt) if _in_main_thread() else None
    bar = None
    if cfg.progress and pending:
        bar = tqdm(total=len(pending), desc=f"evaluate {cfg.run}", unit="candidate", dynamic_ncols=True)
    try:
        for (level, problem_id), cands in sorted(by_problem.items()):
            problem = problem_index[(level, problem_id)]
            common = common_fields(problem, cfg, device, hardware, prov)
            runnable = []
            for cand in cands:
                scan = cand.metadata.get("dtype_scan") or {}
                if _skipped_float32_only(cand, cfg):
                    write_record(store, summary, problem, cand, cfg, hardware, settings, common,
                                 {"outcome": Outcome.SKIPPED.value, "metadata": {"skip_reason": "float32_only"},
                                  "error_message": "float32_only: " + "; ".join(scan.get("evidence") or [])}, None)
                    _tick(bar, cand)
                elif cand.backend == "cuda" and not device.startswith("cuda"):
                    write_record(store, summary, problem, cand, cfg, hardware, settings, common,
                                 {"outcome": Outcome.SKIPPED.value,
                                  "error_message": "CUDA candidate: no GPU on this machine"}, None)
                    _tick(bar, cand)
                else:
                    runnable.append(cand)
            if not runnable:
                continue
            waited = time.perf_counter()
            if builds is not None:
                builds.wait(runnable)
            build_wait_s = time.perf_counter() - waited
            ref_key = reference_key(problem.sha256, cfg.precision, cfg.size_scale, hardware, settings)
            ref_row = references.get(ref_key)
            try:
                ref = ReferenceHandle(pool, problem, cfg, device, extra)
            except (ChildDied, ChildTimeout) as exc:
                ref = None
                ref_error = f"reference process: {exc}"
            else:
                ref_error = None if ref.ok else ref.info["error"]
            try:
                if ref_row is None or (ref_row.get("outcome") == Outcome.EVALUATED and ref_error):
                    ref_row = time_reference(ref, ref_error, ref_key, problem, cfg, common, build_wait_s)
                    store.append(ReferenceRecord(**ref_row))
                    references[ref_key] = ref_row
                for cand in runnable:
                    if ref is None or not ref.ok or not ref.child.process.is_alive():
                        fields = {"outcome": Outcome.REFERENCE_ERROR.value,
                                  "error_message": ref_error or "reference process died"}
                    else:
                        fields = run_candidate(pool, ref, cand, cfg, device, seeds, extra)
                        # a candidate that broke the protocol may have written into the reference's channels too
                        fresh = fields.pop("fresh_reference", False)
                        if fields["outcome"] == Outcome.REFERENCE_ERROR or fresh:
                            # a fresh reference for the next candidate; if even that fails, the rest are recorded
                            ref.close()
                            try:
                                ref = ReferenceHandle(pool, problem, cfg, device, extra)
                                ref_error = None if ref.ok else ref.info["error"]
                            except (ChildDied, ChildTimeout) as exc:
                                ref, ref_error = None, f"reference process: {exc}"
                    write_record(store, summary, problem, cand, cfg, hardware, settings, common, fields, ref_row)
                    _tick(bar, cand)
            finally:
                if ref is not None:
                    ref.close()
    finally:
        if builds is not None:
            builds.close()
        pool.shutdown()
        if bar is not None:
            bar.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    record_same_code(store, summary, same_code)
    summary.seconds = time.perf_counter() - t0
    return summary


def _skipped_float32_only(cand: Candidate, cfg: EvalConfig) -> bool:
    """Whether the batch records ``cand`` as skipped (a kernel hard-coded to float32, in a run at another precision)."""
    scan = cand.metadata.get("dtype_scan") or {}
    return bool(cfg.skip_float32_only and cfg.precision != "fp32" and scan.get("float32_only"))


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _tick(bar, cand: Candidate) -> None:
    if bar is not None:
        bar.set_postfix_str(cand.candidate_id[-40:], refresh=False)
        bar.update(1)


def _trial_seeds(cfg: EvalConfig) -> list[int]:
    """KernelBench's trial seeds of the batch (drawn with torch's generator, as KernelBench draws them)."""
    return kernelbench_trial_seeds(cfg.trials, cfg.seed)


def _extra_trials(cfg: EvalConfig) -> list[ExtraTrial]:
    """The batch's extra trials (``kbstudy.verdict.trials.plan_extra_trials``), numbered after KernelBench's trials."""
    return plan_extra_trials(cfg.trials, cfg.fresh_trials, tuple(cfg.variants), cfg.extra_seeds,
                             tuple(cfg.structural_variants))
