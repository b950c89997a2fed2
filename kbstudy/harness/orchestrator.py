"""Orchestration of a batch: problems x candidates -> records. The orchestrator runs no problem or candidate code.

For each problem with candidates not yet in the store:

1. CUDA candidates' builds all start at once, in parallel across CPU cores, into a build cache kept between batches
   (``<cache_dir>/torch_extensions/<key>``, keyed by source, torch, CUDA and build environment:
   ``kbstudy.harness.build_cache``), each build in a process of its own with a timeout; a problem is evaluated as
   soon as its candidates are built;
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

With ``EvalConfig.concurrency`` > 1, several problems are in flight at once, each in a thread: one's reference process
is set up and its candidates load and run their correctness trials while another's are timed. Every request to a
child takes the device lock (``kbstudy.harness.gpu_lock``): shared for untimed work, exclusive for timing (the
candidate's timing and profiled call, the eager and ``torch.compile`` baselines), so a timed region has the device to
itself as in a serial batch. Each process still serves one candidate or one problem's reference.

Where each piece lives: settings and device (``config``), processes (``pool``, ``child/``), builds (``builds``), the
message protocol (``protocol``), the reference's and a candidate's parent side (``reference_run``, ``candidate_run``),
record assembly and speedups (``assemble``); this module is the batch loop.

CUDA candidates on a machine without a GPU are recorded as ``skipped``; Triton candidates run on a CPU under Triton's
interpreter (``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import collections
import concurrent.futures
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
from kbstudy.harness.gpu_lock import DeviceLock
from kbstudy.harness.pool import ChildDied, ChildPool, ChildTimeout, start_forkserver
from kbstudy.harness.problems import Problem
from kbstudy.harness.reference_run import ReferenceHandle, time_reference
from kbstudy.harness.tensors import kernelbench_trial_seeds
from kbstudy.records import provenance
from kbstudy.records.outcomes import OUTCOMES, Outcome
from kbstudy.records.schema import ReferenceRecord, evaluation_key, reference_key
from kbstudy.records.store import RecordStore
from kbstudy.verdict.trials import ExtraTrial, plan_extra_trials


def candidate_identity(problem: Problem, candidate: Candidate, cfg: EvalConfig, hardware: str,
                       settings: str | None = None) -> tuple[str, tuple]:
    """The measurement key of ``candidate`` on ``problem`` under ``cfg`` on ``hardware``
    (:func:`kbstudy.records.schema.evaluation_key`) and its record identity (key, model configuration, sample id):
    a records folder that holds the identity needs no evaluation of it."""
    key = evaluation_key(problem.sha256, candidate.sha256, cfg.precision, cfg.size_scale, hardware,
                         cfg.settings_key() if settings is None else settings)
    return key, (key, candidate.model_config, candidate.sample_id)


def done_identities(latest: dict[tuple, dict], cfg: EvalConfig) -> set[tuple]:
    """The identities of ``latest`` (:meth:`RecordStore.evaluations_by_identity`) that count as done: every one but
    those whose outcome ``cfg.retry_outcomes`` asks to evaluate again."""
    return {identity for identity, row in latest.items() if row.get("outcome") not in cfg.retry_outcomes}


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
    done = done_identities(store.evaluations_by_identity(), cfg)
    measured = {key for key, _, _ in done}
    references = {key: row for key, row in store.references().items()
                  if row.get("outcome") not in cfg.retry_outcomes}  # a failed reference is measured again too
    # identical code under another model configuration or sample id: measured once, recorded once per candidate
    same_code: dict[str, list[Candidate]] = collections.defaultdict(list)
    for cand in candidates:
        problem = problem_index.get((cand.level, cand.problem_id))
        if problem is None:
            summary.unmatched.append(cand.candidate_id)
            continue
        key, identity = candidate_identity(problem, cand, cfg, hardware, settings)
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
    # CUDA builds start now, all at once (one process per core), and overlap the evaluation of the problems built
    builds = BuildQueue([c for c in pending if not _skipped_float32_only(c, cfg)], cfg, device) \
        if device.startswith("cuda") else None
    on_gpu = device.startswith("cuda")
    # one spare process per problem in flight (each problem takes two: its reference's and its candidate's)
    spare = on_gpu if cfg.spare_process is None else cfg.spare_process
    pool = ChildPool(spare=max(1, cfg.concurrency) if spare else 0, warm_device=device if on_gpu else None)
    # children live in process groups of their own, so a signal to this process alone would orphan them: turn
    # SIGTERM (timeout, batch schedulers) into an exception that reaches the cleanup below
    previous = signal.signal(signal.SIGTERM, _raise_interrupt) if _in_main_thread() else None
    bar = None
    if cfg.progress and pending:
        bar = tqdm(total=len(pending), desc=f"evaluate {cfg.run}", unit="candidate", dynamic_ncols=True)
    batch = _Batch(store, summary, cfg, device, hardware, settings, prov, pool, builds, _trial_seeds(cfg),
                   _extra_trials(cfg), references, bar, t0)
    work = [(problem_index[key], cands) for key, cands in sorted(by_problem.items())]
    threads = None
    try:
        if cfg.concurrency <= 1:
            for problem, cands in work:
                batch.evaluate_problem(problem, cands)
        else:
            # problems in flight at once, each in a thread of its own: one's reference process is set up and its
            # candidates load and run their trials while another's are timed (timed regions hold the device alone,
            # kbstudy.harness.gpu_lock)
            threads = concurrent.futures.ThreadPoolExecutor(cfg.concurrency, thread_name_prefix="kbstudy-problem")
            futures = _submit_as_built(threads, batch, work, builds)
            for future in futures:
                future.result()
    finally:
        batch.stop.set()  # threads still running write no record from here on (their processes are killed)
        if builds is not None:
            builds.close()
        pool.shutdown()  # no process is handed out after this: a thread still running gets ChildDied and ends
        if threads is not None:
            threads.shutdown(wait=True, cancel_futures=True)
            pool.shutdown()
        if bar is not None:
            bar.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    record_same_code(store, summary, same_code)
    summary.seconds = time.perf_counter() - t0
    return summary


class _Batch:
    """What the problems of one batch share, and the evaluation of one problem (:meth:`evaluate_problem`), safe to run
    for several problems at once from threads: records, the reference rows and the progress bar under one lock, the
    child pool under its own, the device under :class:`~kbstudy.harness.gpu_lock.DeviceLock`."""

    def __init__(self, store: RecordStore, summary: BatchSummary, cfg: EvalConfig, device: str, hardware: str,
                 settings: str, prov: dict, pool: ChildPool, builds: BuildQueue | None, seeds: list[int],
                 extra: list[ExtraTrial], references: dict, bar, t0: float):
        self.store, self.summary, self.cfg, self.device, self.hardware = store, summary, cfg, device, hardware
        self.settings, self.prov, self.pool, self.builds, self.seeds = settings, prov, pool, builds, seeds
        self.extra, self.references, self.bar, self.t0 = extra, references, bar, t0
        self.gpu = DeviceLock()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        #: on every record of the batch: when it started (``time.time()``) and how many problems were in flight
        self.meta = {"started_unix": round(time.time() - (time.perf_counter() - t0), 4),
                     "concurrency": max(1, cfg.concurrency)}

    def write(self, problem: Problem, cand: Candidate, common: dict, fields: dict, ref_row: dict | None) -> None:
        """Append a candidate's record (none once the batch is stopping: its processes were killed under it)."""
        fields = {**fields, "metadata": {**fields.get("metadata", {}), "batch": self.meta,
                                         **self._build_meta(cand)}}
        with self.lock:
            if self.stop.is_set():
                return
            write_record(self.store, self.summary, problem, cand, self.cfg, self.hardware, self.settings, common,
                         fields, ref_row)
            _tick(self.bar, cand)

    def _build_meta(self, cand: Candidate) -> dict:
        """``build_seconds`` (the build process's wall time) and ``build_done_s`` (when it ended, s after the batch
        started) of a CUDA candidate built by the queue."""
        if self.builds is None or cand.sha256 not in self.builds.results:
            return {}
        out = {"build_seconds": self.builds.results[cand.sha256].get("seconds")}
        done = self.builds.finished.get(cand.sha256)
        if done is not None:
            out["build_done_s"] = round(done - self.t0, 4)
        return out

    def evaluate_problem(self, problem: Problem, cands: list[Candidate]) -> None:
        """One problem: its skipped candidates recorded, its builds waited for, its reference process (and record),
        then each runnable candidate in a fresh process, one after the other."""
        cfg, device, hardware, settings = self.cfg, self.device, self.hardware, self.settings
        if self.stop.is_set():
            return
        common = common_fields(problem, cfg, device, hardware, self.prov)
        runnable = []
        for cand in cands:
            scan = cand.metadata.get("dtype_scan") or {}
            if _skipped_float32_only(cand, cfg):
                self.write(problem, cand, common,
                           {"outcome": Outcome.SKIPPED.value, "metadata": {"skip_reason": "float32_only"},
                            "error_message": "float32_only: " + "; ".join(scan.get("evidence") or [])}, None)
            elif cand.backend == "cuda" and not device.startswith("cuda"):
                self.write(problem, cand, common, {"outcome": Outcome.SKIPPED.value,
                                                   "error_message": "CUDA candidate: no GPU on this machine"}, None)
            else:
                runnable.append(cand)
        if not runnable:
            return
        waited = time.perf_counter()
        if self.builds is not None:
            self.builds.wait(runnable)
        build_wait_s = time.perf_counter() - waited
        ref_key = reference_key(problem.sha256, cfg.precision, cfg.size_scale, hardware, settings)
        with self.lock:
            ref_row = self.references.get(ref_key)
        try:
            ref = ReferenceHandle(self.pool, problem, cfg, device, self.extra, self.gpu)
        except (ChildDied, ChildTimeout) as exc:
            ref = None
            ref_error = f"reference process: {exc}"
        else:
            ref_error = None if ref.ok else ref.info["error"]
        try:
            if ref_row is None or (ref_row.get("outcome") == Outcome.EVALUATED and ref_error):
                ref_row = time_reference(ref, ref_error, ref_key, problem, cfg, common, build_wait_s, self.gpu)
                ref_row.setdefault("metadata", {})["batch"] = self.meta
                with self.lock:
                    if self.stop.is_set():
                        return
                    self.store.append(ReferenceRecord(**ref_row))
                    self.references[ref_key] = ref_row
            for cand in runnable:
                if self.stop.is_set():
                    return
                if ref is None or not ref.ok or not ref.child.process.is_alive():
                    fields = {"outcome": Outcome.REFERENCE_ERROR.value,
                              "error_message": ref_error or "reference process died"}
                else:
                    build = self.builds.results.get(cand.sha256) if self.builds is not None else None
                    fields = run_candidate(self.pool, ref, cand, cfg, device, self.seeds, self.extra, self.gpu,
                                           build)
                    # a candidate that broke the protocol may have written into the reference's channels too
                    fresh = fields.pop("fresh_reference", False)
                    if fields["outcome"] == Outcome.REFERENCE_ERROR or fresh:
                        # a fresh reference for the next candidate; if even that fails, the rest are recorded
                        ref.close()
                        try:
                            ref = ReferenceHandle(self.pool, problem, cfg, device, self.extra, self.gpu)
                            ref_error = None if ref.ok else ref.info["error"]
                        except (ChildDied, ChildTimeout) as exc:
                            ref, ref_error = None, f"reference process: {exc}"
                self.write(problem, cand, common, fields, ref_row)
        finally:
            if ref is not None:
                ref.close()


def _submit_as_built(threads: concurrent.futures.ThreadPoolExecutor, batch: _Batch,
                     work: list[tuple[Problem, list[Candidate]]], builds: BuildQueue | None) -> list:
    """Hand the problems to the threads in the order their builds end (problem order among those built), so that no
    thread waits on a slow build while others' candidates are ready; returns the futures. A problem whose thread
    failed (a worker that cannot start) stops the handing out: its exception is raised by its future."""
    futures, waiting = [], list(work)
    while waiting:
        ready = [w for w in waiting if builds is None or builds.done(w[1])]
        for item in ready:
            futures.append(threads.submit(batch.evaluate_problem, *item))
            waiting.remove(item)
        if any(f.done() and f.exception() is not None for f in futures):
            break
        if waiting:
            time.sleep(0.1)
    return futures


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
