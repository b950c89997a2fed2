"""Orchestration of a batch: problems x candidates -> records. The orchestrator runs no problem or candidate code.

For each problem with candidates not yet in the store:

1. CUDA candidates are built first, in parallel across CPU cores, into a build cache keyed by the source's SHA-256
   (``<cache_dir>/torch_extensions/<sha>``), each build in a process of its own with a timeout;
2. a *reference process* loads the problem, builds its inputs and expected outputs, and times the reference in eager
   and under ``torch.compile`` (once per problem, precision, size scale and hardware: reused from ``references.jsonl``
   on later runs);
3. each candidate gets a fresh *worker process* (``kbstudy.harness.child.worker``): load -> construct -> one call per correctness
   trial (KernelBench's fixed-seed trials, then kbstudy's extra trials: fresh seeds and the input variants that apply
   to the problem, ``kbstudy.verdict.trials``), its outputs judged in the reference process (``kbstudy.verdict.checks``) -> timing,
   if either verdict passed, over a pool of distinct input sets, with a sample of the timed outputs judged too and,
   on a GPU, a host-synchronised cross-check of the event timing (``kbstudy.harness.timing``) -> on a GPU, one profiled call
   for the share of device time in custom kernels (``kbstudy.harness.kernel_share``);
4. whatever happens -- an exception, a compile error, a hang past the timeout, a segfault, a CUDA error, an OOM --
   becomes one :class:`~kbstudy.records.schema.EvaluationRecord`, appended to the store before the next candidate starts.

Speedups are ratios of medians; each gets a 95% percentile-bootstrap interval from the raw samples of both sides
(``kbstudy.harness.timing.speedup_interval``), and ``speedup_significant`` says whether it excludes 1. A speedup is withdrawn
(``None``) when the sampled timed outputs did not match (``timing_output_ok`` false), and never significant when the
event timing disagrees with the host-synchronised time (``timing_discrepancy`` true).

CUDA candidates on a machine without a GPU are recorded as ``skipped``; Triton candidates run on a CPU under Triton's
interpreter (``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import multiprocessing
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Iterable

from kbstudy.records import provenance
from kbstudy.harness.execution import unpack
from kbstudy.harness.candidates import Candidate
from kbstudy.harness.problems import Problem, scale_candidate_source, scale_source
from kbstudy.records.schema import OUTCOMES, EvaluationRecord, ReferenceRecord, evaluation_key, problem_flags, reference_key
from kbstudy.records.store import RecordStore
from kbstudy.verdict.trials import FRESH, VARIANTS, ExtraTrial, plan_extra_trials
from kbstudy.verdict.checks import (ACCURACY_METRICS, CHECKS_VERSION, FLOAT_SENTINEL, KERNELBENCH_TRIALS,
                            TIMING_OUTPUT_MISMATCH, KbstudyTrial, KernelBenchTrial, sentinel_label)
from kbstudy.verdict.combine import combine, combine_extra

# Children fork from a server that has already imported torch and Inductor (no CUDA initialised there), so a fresh
# process per candidate costs milliseconds, not the ~2 s of `import torch` plus the ~3 s of `torch._inductor` that
# `use_deterministic_algorithms` pulls in. As with any multiprocessing start method but fork, a child re-imports the
# caller's main script: scripts that call evaluate_batch need the `if __name__ == "__main__":` guard.
_CTX = multiprocessing.get_context("forkserver")
_PRELOAD = ["torch", "torch.multiprocessing", "torch.utils.deterministic", "torch._inductor", "kbstudy.harness.execution",
            "kbstudy.harness.child.worker", "kbstudy.harness.child.reference", "kbstudy.verdict.checks", "kbstudy.harness.timing"]
_forkserver_device: str | None = None


def _start_forkserver(device_type: str) -> None:
    """Start the fork server once per process, for CPU or CUDA children.

    Triton decides at import whether it interprets (``TRITON_INTERPRET=1``, the only way it runs on a CPU), and
    Inductor imports Triton, so a CPU server is started with the variable set; the orchestrator's own environment is
    restored right after. One process serves one device type: mixing raises ``RuntimeError``.
    """
    global _forkserver_device
    if _forkserver_device == device_type:
        return
    if _forkserver_device is not None:
        raise RuntimeError(f"this process already evaluates on {_forkserver_device}; start a new process for "
                           f"{device_type} (Triton's interpreter mode is fixed per process)")
    from multiprocessing import forkserver

    saved = os.environ.get("TRITON_INTERPRET")
    if device_type == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        _CTX.set_forkserver_preload(_PRELOAD)
        forkserver.ensure_running()
    finally:
        if saved is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved
    _forkserver_device = device_type


@dataclasses.dataclass
class EvalConfig:
    """Settings of one evaluation batch. Times in seconds unless the name says ms."""

    run: str = "default"
    precision: str = "fp32"
    device: str = "auto"  # "auto": cuda if a GPU is visible, else cpu
    size_scale: float = 1.0
    trials: int = KERNELBENCH_TRIALS
    seed: int = 42
    eager_baseline: bool = True
    compile_baseline: bool = True
    time_candidates: bool = True
    timing: dict = dataclasses.field(default_factory=lambda: {"warmup_ms": 25.0, "budget_ms": 1000.0,
                                                              "min_reps": 10, "max_reps": 100})
    load_timeout_s: float = 900.0  # nvcc on a large candidate can take minutes
    run_timeout_s: float = 300.0
    build_jobs: int = 0  # parallel CUDA builds; 0: one per CPU core
    cache_dir: str = ".cache/kbstudy"
    inputs_on_device: bool = True  # build inputs on the GPU (seeded); False: on the CPU as KernelBench does
    reference_cache_bytes: int = 16 << 30
    progress: bool = True
    # keep one idle child ahead: on a GPU it creates its CUDA context (seconds) while the previous candidate runs;
    # None: on for CUDA, off for CPU (where it would compete for the cores being timed)
    spare_process: bool | None = None
    # coverage's second sentinel on odd trials (kbstudy.verdict.checks); on a CPU through a dispatch mode
    second_sentinel: bool = True
    # trial 1 reuses trial 0's input storage with new values (catches results cached by shape or pointer)
    storage_reuse_trial: bool = True
    # kbstudy's extra trials (kbstudy.verdict.trials): fresh-seed trials, and the input distributions tried where they apply
    fresh_trials: int = 2
    variants: tuple = VARIANTS
    # seeds of the extra trials, in order (fresh ones, then one per variant); None: drawn per batch (secrets). Every
    # record lists them in metadata["extra_trials"]: pass them here to replay a run
    extra_seeds: list | None = None
    # the timing pool's cap (kbstudy.harness.timing.pool_size: at least 2, at most 4 input sets)
    timing_pool_bytes: int = 1 << 30
    # GPU only: profile one call of each timed candidate for custom_kernel_share (kbstudy.harness.kernel_share)
    profile_candidates: bool = True
    # GPU only: after the timed calls, each timed candidate's device time (kbstudy.harness.timing.time_device: cold L2, the
    # host's enqueueing hidden behind a spin), the measure a kernel is compared with its floor by
    device_time: bool = True
    # at a precision other than fp32, record a CUDA candidate whose static dtype scan finds it hard-coded to float32
    # (kbstudy.harness.candidates.scan_dtype_support) as skipped, reason float32_only, instead of running it to a dtype error
    skip_float32_only: bool = False
    # outcomes whose records are evaluated again instead of counting as done (e.g. ("out_of_memory", "crashed") after
    # a run that shared its GPU with other work); the new record is appended, the old one stays in the JSONL history
    # and the latest record per identity is the one read (kbstudy.records.store.RecordStore.evaluations)
    retry_outcomes: tuple = ()

    def settings_key(self) -> str:
        """The settings that change what a record means (part of its key): trials, seed, input placement, and the
        verifier's checks (a record made without the second sentinel, the storage-reuse trial, the extra trials or
        the timing pool is a different evaluation, so a rerun with them on evaluates again rather than reusing it).
        ``checks=v3``: extra trials, timing pool with checked outputs, host cross-check, significance of speedups.
        ``checks=v4``: kbstudy's accuracy verdict of ``docs/verifier.md`` (three metrics, each bound
        ``max(T, REFERENCE_FACTOR * e_ref)`` with the reference's own error on the same input set; problem flags on
        the reference record). The extra trials' seeds are not part of it (they are drawn per run; records list
        them)."""
        return (f"trials={self.trials};seed={self.seed};inputs_on_device={self.inputs_on_device};"
                f"checks={CHECKS_VERSION};second_sentinel={self.second_sentinel};storage_reuse_trial={self.storage_reuse_trial};"
                f"fresh_trials={self.fresh_trials};variants={','.join(self.variants)};"
                f"timing_pool_bytes={self.timing_pool_bytes}"
                + (";skip_float32_only" if self.skip_float32_only else ""))  # keys made without it stay valid


@dataclasses.dataclass
class BatchSummary:
    """What a batch did: records written, keys skipped as already present, candidates with no matching problem."""

    written: int = 0
    already_done: int = 0
    unmatched: list = dataclasses.field(default_factory=list)
    outcomes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    seconds: float = 0.0


# ------------------------------------------------------------------------------------------------ child processes


class ChildDied(RuntimeError):
    """The child process exited without replying; ``exitcode`` < 0 is the signal that killed it."""

    def __init__(self, exitcode: int | None):
        self.exitcode = exitcode
        if exitcode is not None and exitcode < 0:
            try:
                name = signal.Signals(-exitcode).name
            except ValueError:
                name = f"signal {-exitcode}"
            text = f"worker killed by {name}"
        else:
            text = f"worker exited with status {exitcode} without reporting"
        super().__init__(text)


class WorkerStartError(RuntimeError):
    """Worker processes keep dying before they can take a job: the machine, not a candidate, is failing (the batch
    stops; its records so far are kept and a rerun resumes)."""


class ChildTimeout(RuntimeError):
    """The child process did not reply within the timeout (it is killed by the caller)."""


class Child:
    """A spawned ``kbstudy.harness.child.worker.process_main`` process and its connection."""

    def __init__(self, warm_device: str | None = None):
        from kbstudy.harness.child import worker

        self.conn, child_conn = _CTX.Pipe()
        self.process = _CTX.Process(target=worker.process_main, args=(child_conn, warm_device), daemon=False)
        self.process.start()
        child_conn.close()
        self.started = time.perf_counter()
        self._idle = False
        self._kill_lock = threading.Lock()

    def wait_idle(self, timeout: float = 300.0) -> None:
        if not self._idle:
            reply = self.recv(timeout)
            if reply.get("status") != "idle":
                raise RuntimeError(f"unexpected first message from a child: {reply}")
            self._idle = True

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.conn.poll(0.2):
            if not self.process.is_alive():
                if self.conn.poll(0):
                    return
                raise ChildDied(self.process.exitcode)
            if time.monotonic() > deadline:
                raise ChildTimeout(f"no reply within {timeout:.0f} s")

    def _io(self, operation, *args):
        """Run a connection operation; a closed or broken pipe means the child is gone: ``ChildDied``."""
        try:
            return operation(*args)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            self.process.join(5)
            raise ChildDied(self.process.exitcode) from None

    def recv(self, timeout: float) -> Any:
        self._wait(timeout)
        return self._io(self.conn.recv)

    def recv_bytes(self, timeout: float) -> bytes:
        self._wait(timeout)
        return self._io(self.conn.recv_bytes)

    def send(self, message: Any) -> None:
        self._io(self.conn.send, message)

    def send_bytes(self, data: bytes) -> None:
        self._io(self.conn.send_bytes, data)

    def close(self, grace_s: float = 10.0) -> None:
        """Ask the child to finish, then kill its whole process group if it has not."""
        if self.process.is_alive():
            try:
                self.conn.send({"op": "exit", "role": "exit"})
            except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
                pass
            self.process.join(grace_s)
        self.kill()

    def kill(self) -> None:
        """Kill the child's process group and close the connection. Safe to call again and from several threads at
        once: a build queue's ``close()`` and the build's own thread can both kill one build process, and two
        unguarded ``Connection.close()`` calls close one file descriptor twice (EBADF, or worse, a descriptor number
        reused meanwhile by another pipe)."""
        with self._kill_lock:
            if self.process.pid is not None:
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError, OSError):
                    pass
            if self.process.is_alive():
                self.process.kill()
            self.process.join(10)
            if not self.conn.closed:
                self.conn.close()


class ChildPool:
    """Hands out idle children, keeping one spare started ahead so the next candidate skips torch's import."""

    def __init__(self, spare: bool = True, warm_device: str | None = None):
        self.spare = spare
        self.warm_device = warm_device
        self._next: Child | None = None
        self._all: list[Child] = []

    #: attempts to start a child that dies before reporting idle (e.g. CUDA out of memory while creating its context,
    #: when other processes fill the GPU), with these pauses (s) between them
    START_RETRY_PAUSES_S = (2.0, 10.0)

    def get(self) -> Child:
        """An idle child. A child that dies while starting is replaced (:data:`START_RETRY_PAUSES_S`); raises
        :class:`WorkerStartError` when every attempt died, naming the last exit status."""
        child = self._next or Child(self.warm_device)
        self._next = None
        for pause in (*self.START_RETRY_PAUSES_S, None):
            try:
                child.wait_idle()
                if not child.process.is_alive():
                    # it died after saying idle (a spare killed while its message waited in the pipe)
                    raise ChildDied(child.process.exitcode)
                break
            except ChildDied as exc:
                child.kill()
                if pause is None:
                    raise WorkerStartError(
                        f"{len(self.START_RETRY_PAUSES_S) + 1} worker processes in a row died while starting "
                        f"({exc}; warm device {self.warm_device or 'none'}); the device may be out of memory or "
                        f"unavailable. Records written so far are kept: rerun to resume.") from exc
                time.sleep(pause)
                child = Child(self.warm_device)
        if self.spare:
            self._next = Child(self.warm_device)
            self._all.append(self._next)
        self._all.append(child)
        return child

    def shutdown(self) -> None:
        for child in self._all:
            if child.process.is_alive() or child.process.exitcode is None:
                child.kill()
        self._all.clear()
        self._next = None


# ------------------------------------------------------------------------------------------------ helpers


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when a GPU is visible, else ``cpu``; ``cuda`` without a GPU raises ``RuntimeError``."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' requested, but no GPU is visible to torch")
    return device


def hardware_label(device: str) -> str:
    """The GPU's name from ``nvidia-smi`` (so the orchestrator opens no CUDA context), else the CPU model."""
    if device.startswith("cuda"):
        index = device.split(":")[1] if ":" in device else "0"
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", f"--id={index}"],
                                 capture_output=True, text=True, timeout=30)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError):
            pass
        import torch

        return torch.cuda.get_device_name(0)
    return provenance.cpu_name()


def _common_fields(problem: Problem, cfg: EvalConfig, device: str, hardware: str, prov: dict) -> dict:
    return {
        "run": cfg.run, "level": problem.level, "problem_id": problem.problem_id, "problem_name": problem.name,
        "problem_version": problem.version, "problem_sha256": problem.sha256, "precision": cfg.precision,
        "size_scale": cfg.size_scale, "device": device.split(":")[0], "hardware": hardware,
        "timing_method": "cuda_event" if device.startswith("cuda") else "cpu_perf_counter",
        **{k: prov.get(k) for k in ("git_commit", "kbstudy_version", "python_version", "torch_version",
                                    "triton_version", "cuda_version", "hostname")},
    }


def _label(identifier: str) -> str:
    """An id usable inside a pseudo file name: Python's messages keep only what follows the last ``/``."""
    return identifier.replace("/", ":")


def _child_env(candidate: Candidate | None, cfg: EvalConfig, device: str, max_jobs: int | None = None) -> dict:
    env: dict[str, str | None] = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
    cache = Path(cfg.cache_dir).resolve()
    if candidate is not None:
        env["TORCH_EXTENSIONS_DIR"] = str(cache / "torch_extensions" / candidate.sha256[:20])
        env["TRITON_CACHE_DIR"] = str(cache / "triton")
        if candidate.backend == "triton" and not device.startswith("cuda"):
            env["TRITON_INTERPRET"] = "1"
    if max_jobs:
        env["MAX_JOBS"] = str(max_jobs)
    return env


# ------------------------------------------------------------------------------------------------ builds


class BuildQueue:
    """CUDA candidates' extensions built in the background, one process each, ``build_jobs`` at a time.

    Builds are submitted in the order given (the batch's problem order), so the first problems' candidates are built
    first and evaluated while later ones still compile: nvcc on a hundred candidates takes minutes of CPU that would
    otherwise leave the GPU idle (7 minutes for 100 level-1 leaderboard kernels on the H200 machine's 32 cores).
    Build processes run at ``os.nice(BUILD_NICENESS)`` so the reference and candidate processes being timed keep the
    CPUs first. :meth:`wait` blocks until the given candidates' builds are done. A failed, timed-out or unstartable
    build is not final (it is a result, never an exception): the worker loads the source again and records the real
    error.
    """

    def __init__(self, candidates: list[Candidate], cfg: EvalConfig, device: str):
        unique = {c.sha256: c for c in candidates if c.backend == "cuda"}
        jobs = max(1, min(cfg.build_jobs or os.cpu_count() or 1, len(unique) or 1))
        self._max_jobs = max(1, (os.cpu_count() or 1) // jobs)  # ninja's parallelism inside one build
        self._cfg, self._device = cfg, device
        self._lock = threading.Lock()
        self._children: set[Child] = set()
        self._closed = False
        self.results: dict[str, dict] = {}
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="kbstudy-build")
        self._futures = {sha: self._pool.submit(self._build_one, cand) for sha, cand in unique.items()}

    def _build_one(self, candidate: Candidate) -> dict:
        with self._lock:
            if self._closed:
                return {"built": False, "error": "build queue closed"}
            try:
                child = Child()
            except Exception as exc:  # noqa: BLE001 - no process (e.g. out of PIDs): the worker builds it later
                result = {"built": False, "error": f"build process did not start: {type(exc).__name__}: {exc}"}
                self.results[candidate.sha256] = result
                return result
            self._children.add(child)
        try:
            child.wait_idle()
            child.send({"role": "build", "env": _child_env(candidate, self._cfg, self._device, self._max_jobs),
                        "job": {"source": candidate.source, "filename": f"<candidate {_label(candidate.candidate_id)}>"}})
            result = child.recv(self._cfg.load_timeout_s)
        except (ChildDied, ChildTimeout) as exc:
            result = {"built": False, "error": str(exc)}
        except Exception as exc:  # noqa: BLE001 - e.g. OSError from the pipe: the worker retries the build itself
            result = {"built": False, "error": f"build process: {type(exc).__name__}: {exc}"}
        finally:
            child.kill()
            with self._lock:
                self._children.discard(child)
        self.results[candidate.sha256] = result
        return result

    def wait(self, candidates: Iterable[Candidate]) -> None:
        """Block until every given CUDA candidate's build has finished (successfully or not)."""
        for cand in candidates:
            future = self._futures.get(cand.sha256)
            if future is not None:
                future.result()

    def close(self) -> None:
        """Cancel the builds not started and kill the running ones (an interrupted batch leaves no nvcc behind)."""
        with self._lock:
            self._closed = True
            children = list(self._children)
        self._pool.shutdown(wait=False, cancel_futures=True)
        for child in children:
            child.kill()


# ------------------------------------------------------------------------------------------------ the batch


class _Reference:
    """The orchestrator's handle on one problem's reference process."""

    def __init__(self, pool: ChildPool, problem: Problem, cfg: EvalConfig, device: str,
                 extra: list[ExtraTrial] | None = None):
        started = time.perf_counter()
        self.child = pool.get()
        self.problem_source = problem.source  # unscaled: scale_candidate_source matches candidates against it
        source = scale_source(problem.source, cfg.size_scale)
        self.child.send({"role": "reference", "env": _child_env(None, cfg, device), "job": {
            "source": source, "filename": f"<problem {_label(problem.key)}>", "device": device, "precision": cfg.precision,
            "trials": cfg.trials, "seed": cfg.seed, "inputs_on_device": cfg.inputs_on_device,
            "cache_bytes": cfg.reference_cache_bytes, "extra_trials": [e.as_dict() for e in extra or []],
            "timing_pool_bytes": cfg.timing_pool_bytes}})
        self.info = self.child.recv(cfg.load_timeout_s)
        self.ok = "error" not in self.info
        self.cfg = cfg
        #: seconds from asking for a process to the reference's report (inputs, expected outputs, problem flags)
        self.setup_s = time.perf_counter() - started

    def not_applicable(self, extra: list[ExtraTrial]) -> dict[str, str]:
        """``{variant name: reason}`` of the variants that do not apply to this problem (from the reference's
        ``variants`` report; a variant trial the report does not mention counts as not applicable)."""
        report = self.info.get("variants") or {}
        out = {}
        for spec in extra:
            if spec.name == FRESH:
                continue
            if spec.trial not in report:
                out[spec.name] = "not assessed by the reference"
            elif report[spec.trial] is not None:
                out[spec.name] = report[spec.trial]
        return out

    def request(self, message: dict, timeout: float) -> Any:
        self.child.send(message)
        return self.child.recv(timeout)

    def close(self) -> None:
        try:
            if self.child.process.is_alive():
                self.child.send({"op": "close"})
        except ChildDied:
            pass
        self.child.close()


def _trial_seeds(cfg: EvalConfig) -> list[int]:
    import torch  # noqa: F401 - kernelbench_trial_seeds draws with torch's generator

    from kbstudy.harness.execution import kernelbench_trial_seeds

    return kernelbench_trial_seeds(cfg.trials, cfg.seed)


def _extra_trials(cfg: EvalConfig) -> list[ExtraTrial]:
    """The batch's extra trials (``kbstudy.verdict.trials.plan_extra_trials``), numbered after KernelBench's trials."""
    return plan_extra_trials(cfg.trials, cfg.fresh_trials, tuple(cfg.variants), cfg.extra_seeds)


def _run_candidate(pool: ChildPool, ref: _Reference, candidate: Candidate, cfg: EvalConfig, device: str,
                   seeds: list[int], extra: list[ExtraTrial] | None = None) -> dict:
    """One candidate through a fresh worker. Returns record fields (outcome, verdicts, timing samples).

    ``seeds``: KernelBench's trial seeds; ``extra``: the batch's extra trials (run only where they apply)."""
    extra = list(extra or [])
    started = time.perf_counter()
    child = pool.get()
    fields: dict[str, Any] = {"compiled": False, "metadata": {}}
    clock = _StageClock()
    fields["metadata"]["stage_seconds"] = clock.totals
    stage = "load"
    try:
        clock.start("load")
        child.send({"role": "worker", "env": _child_env(candidate, cfg, device), "job": {
            # the candidate's copies of the problem's size constants shrink with the problem's (size_scale < 1)
            "source": scale_candidate_source(candidate.source, ref.problem_source, cfg.size_scale),
            "filename": f"<candidate {_label(candidate.candidate_id)}>", "device": device,
            "precision": cfg.precision, "seed": cfg.seed}})
        reply = child.recv(cfg.load_timeout_s)
        clock.stop()
        if "failure" in reply:
            return _finish(fields, {"outcome": reply["failure"], "error_message": reply["error"]})
        fields["compiled"] = True
        stage = "construct"
        clock.start("construct")
        init = ref.request({"op": "init_inputs"}, cfg.run_timeout_s)
        child.send({"op": "construct", "init_inputs": init["init_inputs"]})
        reply = child.recv(cfg.run_timeout_s)
        clock.stop()
        if "failure" in reply:
            return _finish(fields, {"outcome": reply["failure"], "error_message": reply["error"]})
        stage = "run"
        kb_trials: list[KernelBenchTrial] = []
        kbs_trials: list[KbstudyTrial] = []
        extra_results: list[tuple[ExtraTrial, KbstudyTrial]] = []
        form_ok: list[tuple[bool, bool]] = []  # (shape, dtype) agreement per trial
        not_applicable = ref.not_applicable(extra)
        plan = [(t, seed, None) for t, seed in enumerate(seeds)]
        plan += [(spec.trial, spec.seed, spec) for spec in extra if spec.name not in not_applicable]
        if extra:
            fields["metadata"]["extra_trials"] = [spec.as_dict() for spec in extra]
            if not_applicable:
                fields["metadata"]["variant_notes"] = dict(not_applicable)
        for t, seed, spec in plan:
            with clock("inputs"):
                inputs = _reference_inputs(ref, t, cfg)
            # the second sentinel on odd trials (GPU: poisoned allocator; CPU: a dispatch mode filling fresh tensors)
            sentinel = FLOAT_SENTINEL if (cfg.second_sentinel and t % 2 == 1) else "nan"
            # trial 1 runs on trial 0's input storage with its own values: a result cached by shape, pointer or
            # object identity comes back stale (kbstudy.harness.child.worker, "storage reuse")
            reuse = cfg.storage_reuse_trial and t == 1
            with clock("run_first" if t == 0 else ("run" if spec is None else "run_extra")):
                child.send({"op": "run", "trial": t, "seed": seed, "sentinel": sentinel, "reuse_inputs": reuse,
                            "output_bytes": ref.info.get("output_bytes", 0), "survive": spec is not None})
                child.send_bytes(inputs)
                del inputs
                failure, outputs = unpack(child.recv_bytes(cfg.run_timeout_s))
            if failure is not None:
                if spec is None:
                    return _finish(fields, {"outcome": failure["failure"], "error_message": failure["error"]})
                # a crash on an extra trial is that trial's failure; KernelBench's verdict and the timing survive
                extra_results.append((spec, KbstudyTrial(False, failure["failure"], None, None,
                                                         f"the call raised: {failure['error'][:1000]}",
                                                         sentinel=sentinel_label(sentinel))))
                continue
            with clock("verify"):
                ref.child.send({"op": "verify", "trial": t, "sentinel": sentinel, "kernelbench": spec is None})
                ref.child.send_bytes(outputs)
                del outputs
                try:
                    verdict = ref.child.recv(cfg.run_timeout_s)
                except ChildTimeout as exc:
                    raise ReferenceFailure(f"no verdict within the timeout: {exc}") from None
                child.send({"op": "release"})
            if "error" in verdict:
                # the reference process ran out of memory judging: the machine's failure, retryable like any other
                # out_of_memory record (--retry-outcome); any other error is the outputs' (not judgeable)
                oom = verdict.get("category") == "out_of_memory"
                return _finish(fields, {"outcome": "out_of_memory" if oom else "runtime_error", "error_message":
                                        "the candidate's outputs could not be judged: " + verdict["error"]})
            if spec is None:
                kb_trials.append(verdict["kernelbench"])
                kbs_trials.append(verdict["kbstudy"])
            else:
                extra_results.append((spec, verdict["kbstudy"]))
            form_ok.append((verdict["shape_ok"], verdict["dtype_ok"]))
            _note_integrity(fields["metadata"], t, verdict.get("integrity") or {})
        combined = combine(kb_trials, kbs_trials, cfg.precision)
        combined = combine_extra(combined, extra_results, [spec.name for spec in extra], not_applicable)
        verdict_meta = combined.pop("metadata_verdict")
        fields.update(combined)
        fields["outcome"] = "evaluated"
        fields["shape_ok"] = all(shape for shape, _ in form_ok)
        fields["dtype_ok"] = all(dtype for _, dtype in form_ok)
        fields["metadata"].update({k: v for k, v in verdict_meta.items() if v})
        if extra_results:
            fields["metadata"]["extra_trial_results"] = [
                {"trial": spec.trial, "name": spec.name, "passed": r.passed, "failure": r.failure,
                 "rel_l2": r.rel_l2} for spec, r in extra_results]
        if cfg.time_candidates and (fields["kernelbench_correct"] or fields["kbstudy_correct"]):
            stage = "time"
            with clock("time"):
                _time_candidate(child, ref, cfg, device, fields)
            if fields.get("timing_output_ok") and device.startswith("cuda") and cfg.profile_candidates:
                with clock("profile"):
                    _profile_candidate(child, cfg, fields)
        return fields
    except ReferenceFailure as exc:
        return _finish(fields, {"outcome": "reference_error", "error_message": f"{stage}: reference: {exc}"})
    except ChildTimeout as exc:
        if not ref.child.process.is_alive():
            return _finish(fields, {"outcome": "reference_error", "error_message": f"{stage}: reference process died"})
        return _finish(fields, {"outcome": "timeout", "error_message": f"{stage}: {exc}"})
    except ChildDied as exc:
        if not child.process.is_alive() and ref.child.process.is_alive():
            return _finish(fields, {"outcome": "crashed", "error_message": f"{stage}: {exc}"})
        return _finish(fields, {"outcome": "reference_error", "error_message": f"{stage}: reference process: {exc}"})
    finally:
        clock.stop()
        fields["worker_wall_s"] = time.perf_counter() - started
        if fields.get("outcome") in ("timeout", "crashed"):
            child.kill()  # known hung or dead: no grace period
        else:
            child.close(grace_s=5)


def _time_candidate(child: Child, ref: _Reference, cfg: EvalConfig, device: str, fields: dict) -> None:
    """Time a candidate over the reference's timing pool, have its sampled timed outputs judged, and fill
    ``fields``: ``timing_samples`` (popped by :func:`_write`), ``timing_pool_size``, ``timing_output_ok``,
    ``candidate_host_ms``, ``timing_discrepancy`` and the ``candidate_device_ms_*`` fields (GPU), and the
    ``timing_output_mismatch`` verdict. A failure
    while timing keeps the verdicts and records the outcome (as before the pool existed)."""
    import statistics

    from kbstudy.harness import timing

    pool = _reference_inputs(ref, "timing_pool", cfg)
    on_gpu = device.startswith("cuda")
    child.send({"op": "time", "timing": cfg.timing, "host_check": on_gpu, "device_time": on_gpu and cfg.device_time})
    child.send_bytes(pool)
    del pool
    reply = child.recv(cfg.run_timeout_s)
    if "failure" in reply:
        # the candidate passed its trials but failed while being timed: keep the verdicts, record why
        fields["metadata"]["timing_failure"] = reply["error"]
        fields["outcome"] = reply["failure"]
        fields["error_message"] = "failed while timing: " + reply["error"]
        return
    error, checked = unpack(child.recv_bytes(cfg.run_timeout_s))  # forwarded unopened, tag stripped
    if error is not None:
        raise ChildDied(None)  # the worker only ever sends a payload here
    fields["timing_samples"] = reply["samples"]
    fields["timing_pool_size"] = reply["pool_size"]
    if on_gpu:
        fields["candidate_host_ms"] = reply["host_ms"]
        fields["timing_discrepancy"] = timing.timing_discrepancy(statistics.median(reply["samples"]),
                                                                 reply["host_ms"])
        fields["metadata"]["host_check_calls"] = reply["host_calls"]
    if reply.get("autotuned"):
        fields["metadata"]["autotuned"] = reply["autotuned"]
    if reply.get("device_samples"):
        fields.update(device_time_fields(reply["device_samples"]))
        fields["metadata"]["device_time"] = {"calls": len(reply["device_samples"]),
                                             "host_overran": reply["device_host_overran"],
                                             "spin_us": reply["device_spin_us"],
                                             "flush": reply.get("device_flush")}
    try:
        # the check the candidate's verdict rests on: kbstudy's if it passed kbstudy's verdict, else KernelBench's
        check_name = "kbstudy" if fields.get("kbstudy_correct") else "kernelbench"
        ref.child.send({"op": "verify_timing", "check": check_name})
        ref.child.send_bytes(checked)
        del checked
        try:
            check = ref.child.recv(cfg.run_timeout_s)
        except ChildTimeout as exc:
            raise ReferenceFailure(f"no timing-output verdict within the timeout: {exc}") from None
    finally:
        child.send({"op": "release"})
    if "error" in check:
        raise ReferenceFailure("judging the timed outputs: " + check["error"])
    fields["timing_output_ok"] = bool(check["ok"])
    fields["metadata"]["timing_output_check"] = {"check": check_name, "checked": check["checked"],
                                                 "mismatches": check["mismatches"]}
    if not check["ok"] and fields.get("kbstudy_correct"):
        fields["kbstudy_correct"] = False
        fields["kbstudy_failure"] = TIMING_OUTPUT_MISMATCH
        first = check["mismatches"][0] if check["mismatches"] else {}
        call = first.get("call")
        what = "device-time call" if isinstance(call, int) and call >= len(reply["samples"]) else "timed call"
        fields["metadata"]["kbstudy_detail"] = f"{what} {call} on timing input set {first.get('entry')}: " \
                                               f"{first.get('detail')}"


def _profile_candidate(child: Child, cfg: EvalConfig, fields: dict) -> None:
    """One profiled call (GPU): ``custom_kernel_share``, ``top_kernels`` and ``metadata["kernel_time_us_by_origin"]``
    (``kbstudy.harness.kernel_share``), or ``metadata["profile_error"]``."""
    from kbstudy.harness.kernel_share import custom_kernel_share

    child.send({"op": "profile"})
    reply = child.recv(cfg.run_timeout_s)
    if "profile_error" in reply:
        fields["metadata"]["profile_error"] = reply["profile_error"]
        return
    share = custom_kernel_share(reply["kernels"])
    fields["custom_kernel_share"] = share["custom_kernel_share"]
    fields["top_kernels"] = share["top_kernels"]
    fields["metadata"]["kernel_time_us_by_origin"] = share["time_us_by_origin"]


def _note_integrity(metadata: dict, trial: int, integrity: dict) -> None:
    """Record a trial's integrity findings in the record's metadata: ``inputs_mutated`` (``[[trial, [input
    indices]], ...]``), ``global_state_changes`` (the changes first seen, with their trial), ``stale_output_trials``,
    ``storage_reuse_trial`` (the trial that ran on the previous trial's input storage) and ``pristine_on_host``
    (``[[trial, [input indices]], ...]``: inputs whose pristine copy for the inputs-mutated check had to go to host
    memory, ``kbstudy.harness.child.worker.pristine_on_host``; each costs a host round trip in that trial's stage time)."""
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


def _finish(fields: dict, result: dict) -> dict:
    """``fields`` updated with a failure's outcome and message, the same dict (so the wall time that
    :func:`_run_candidate` stores in ``fields`` in its ``finally`` reaches the record on every path)."""
    fields.update(result)
    return fields


class _StageClock:
    """Wall time (s) spent per stage of a candidate's evaluation, summed over trials (harness-overhead accounting)."""

    def __init__(self):
        self.totals: dict[str, float] = {}
        self._open: tuple[str, float] | None = None

    def start(self, stage: str) -> None:
        self._open = (stage, time.perf_counter())

    def stop(self) -> None:
        if self._open is not None:
            stage, t0 = self._open
            self.totals[stage] = round(self.totals.get(stage, 0.0) + time.perf_counter() - t0, 4)
            self._open = None

    def __call__(self, stage: str):
        import contextlib

        @contextlib.contextmanager
        def timed():
            t0 = time.perf_counter()
            try:
                yield
            finally:
                self.totals[stage] = round(self.totals.get(stage, 0.0) + time.perf_counter() - t0, 4)

        return timed()


class ReferenceFailure(RuntimeError):
    """The reference process could not produce what was asked (its message says why)."""


def _reference_inputs(ref: _Reference, trial, cfg: EvalConfig) -> bytes:
    """The shared inputs of a trial from the reference process, still unopened (the orchestrator never opens them)."""
    ref.child.send({"op": "inputs", "trial": trial})
    try:
        packet = ref.child.recv_bytes(cfg.run_timeout_s)
    except ChildTimeout as exc:  # the reference, not the candidate, is stuck
        raise ReferenceFailure(f"no inputs within the timeout: {exc}") from None
    error, payload = unpack(packet)
    if error is not None:
        raise ReferenceFailure(error["error"])
    return payload


def device_time_fields(samples: list[float]) -> dict:
    """The record fields of a device-time measurement (``kbstudy.harness.timing.time_device``; samples in ms):
    ``candidate_device_ms_median``, ``_q1``, ``_q3`` and ``candidate_device_ms_samples``. Raises ``ValueError`` on an
    empty list."""
    from kbstudy.harness.timing import summarize

    stats = summarize(samples)
    return {"candidate_device_ms_median": stats.median, "candidate_device_ms_q1": stats.q1,
            "candidate_device_ms_q3": stats.q3, "candidate_device_ms_samples": [float(x) for x in samples]}


def _timing_fields(samples: list[float] | None, prefix: str) -> dict:
    from kbstudy.harness.timing import summarize

    if not samples:
        return {}
    return summarize(samples).as_fields(prefix)


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
    _start_forkserver("cuda" if device.startswith("cuda") else "cpu")
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
        from tqdm.auto import tqdm

        bar = tqdm(total=len(pending), desc=f"evaluate {cfg.run}", unit="candidate", dynamic_ncols=True)
    try:
        for (level, problem_id), cands in sorted(by_problem.items()):
            problem = problem_index[(level, problem_id)]
            common = _common_fields(problem, cfg, device, hardware, prov)
            runnable = []
            for cand in cands:
                scan = cand.metadata.get("dtype_scan") or {}
                if _skipped_float32_only(cand, cfg):
                    _write(store, summary, problem, cand, cfg, hardware, settings, common,
                           {"outcome": "skipped", "metadata": {"skip_reason": "float32_only"},
                            "error_message": "float32_only: " + "; ".join(scan.get("evidence") or [])}, None)
                    _tick(bar, cand)
                elif cand.backend == "cuda" and not device.startswith("cuda"):
                    _write(store, summary, problem, cand, cfg, hardware, settings, common,
                           {"outcome": "skipped", "error_message": "CUDA candidate: no GPU on this machine"}, None)
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
                ref = _Reference(pool, problem, cfg, device, extra)
            except (ChildDied, ChildTimeout) as exc:
                ref = None
                ref_error = f"reference process: {exc}"
            else:
                ref_error = None if ref.ok else ref.info["error"]
            try:
                if ref_row is None or (ref_row.get("outcome") == "evaluated" and ref_error):
                    ref_row = _time_reference(ref, ref_error, ref_key, problem, cfg, common, build_wait_s)
                    store.append(ReferenceRecord(**ref_row))
                    references[ref_key] = ref_row
                for cand in runnable:
                    if ref is None or not ref.ok or not ref.child.process.is_alive():
                        fields = {"outcome": "reference_error", "error_message": ref_error or "reference process died"}
                    else:
                        fields = _run_candidate(pool, ref, cand, cfg, device, seeds, extra)
                        if fields["outcome"] == "reference_error":
                            # a fresh reference for the next candidate; if even that fails, the rest are recorded
                            ref.close()
                            try:
                                ref = _Reference(pool, problem, cfg, device, extra)
                                ref_error = None if ref.ok else ref.info["error"]
                            except (ChildDied, ChildTimeout) as exc:
                                ref, ref_error = None, f"reference process: {exc}"
                    _write(store, summary, problem, cand, cfg, hardware, settings, common, fields, ref_row)
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
    _record_same_code(store, summary, same_code)
    summary.seconds = time.perf_counter() - t0
    return summary


def _skipped_float32_only(cand: Candidate, cfg: EvalConfig) -> bool:
    """Whether the batch records ``cand`` as skipped (a kernel hard-coded to float32, in a run at another precision)."""
    scan = cand.metadata.get("dtype_scan") or {}
    return bool(cfg.skip_float32_only and cfg.precision != "fp32" and scan.get("float32_only"))


def _record_same_code(store: RecordStore, summary: BatchSummary, same_code: dict[str, list[Candidate]]) -> None:
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


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _tick(bar, cand: Candidate) -> None:
    if bar is not None:
        bar.set_postfix_str(cand.candidate_id[-40:], refresh=False)
        bar.update(1)


def _time_reference(ref: _Reference | None, ref_error: str | None, key: str, problem: Problem, cfg: EvalConfig,
                    common: dict, build_wait_s: float = 0.0) -> dict:
    """The reference record of ``problem``: the reference process's report and its eager and ``torch.compile``
    timings. ``metadata.stage_seconds`` says where the problem's wall time went before its first candidate:
    ``build_wait`` (waiting for its CUDA candidates' builds), ``setup`` (the reference process's inputs, expected
    outputs and flags) and ``time`` (compiling and timing the baselines), in seconds."""
    row: dict[str, Any] = {"key": key, **{k: common[k] for k in (
        "run", "level", "problem_id", "problem_name", "problem_version", "problem_sha256", "precision", "size_scale",
        "device", "hardware", "timing_method", "git_commit", "kbstudy_version", "python_version", "torch_version",
        "triton_version", "cuda_version", "hostname")}}
    row["created_utc"] = provenance.collect("cpu")["created_utc"]
    if ref is None or not ref.ok:
        return {**row, "outcome": "reference_error", "error_message": ref_error}
    variant_report = {str(t): ("applies" if reason is None else reason)
                      for t, reason in sorted((ref.info.get("variants") or {}).items())}
    row.update({"output_shape": ref.info.get("output_shape"), "output_dtype": ref.info.get("output_dtype"),
                "reference_dtype": ref.info.get("reference_dtype"),
                **{k: ref.info.get(k) for k in ("output_rms", "degenerate", "degenerate_constant", "degenerate_inputs",
                                                "low_spread", "low_spread_default", "unjudgeable")},
                **{f"reference_{m}": ref.info.get(f"reference_{m}") for m in ACCURACY_METRICS},
                "metadata": {"tf32_matmul": ref.info.get("tf32_matmul"), "tf32_cudnn": ref.info.get("tf32_cudnn"),
                             **({"variants": variant_report} if variant_report else {}),
                             **{k: ref.info[k] for k in ("output_rel_std", "degeneracy_error", "flags_error")
                                if ref.info.get(k) is not None}}})
    stages = {"build_wait": round(build_wait_s, 4), "setup": round(ref.setup_s, 4)}
    row["metadata"]["stage_seconds"] = stages
    started = time.perf_counter()
    try:
        result = ref.request({"op": "time", "eager": cfg.eager_baseline, "compile": cfg.compile_baseline,
                              "timing": cfg.timing}, timeout=max(cfg.run_timeout_s, cfg.load_timeout_s))
    except (ChildDied, ChildTimeout) as exc:
        return {**row, "outcome": "reference_error", "error_message": f"timing the reference: {exc}"}
    finally:
        stages["time"] = round(time.perf_counter() - started, 4)
    if "error" in result:
        return {**row, "outcome": "reference_error", "error_message": result["error"]}
    row.update(_timing_fields(result.get("eager"), "eager"))
    row.update(_timing_fields(result.get("compile"), "compile"))
    row.pop("eager_ms_ci_low", None), row.pop("eager_ms_ci_high", None)
    row.pop("compile_ms_ci_low", None), row.pop("compile_ms_ci_high", None)
    row["eager_ms_samples"] = result.get("eager")
    row["compile_ms_samples"] = result.get("compile")
    row["timing_pool_size"] = result.get("pool_size")
    row["compile_error"] = result.get("compile_error")
    row["outcome"] = "evaluated"
    return row


def _write(store: RecordStore, summary: BatchSummary, problem: Problem, cand: Candidate, cfg: EvalConfig,
           hardware: str, settings: str, common: dict, fields: dict, ref_row: dict | None) -> None:
    fields = dict(fields)
    samples = fields.pop("timing_samples", None)
    metadata = {**cand.metadata, **fields.pop("metadata", {})}
    record = EvaluationRecord(
        key=evaluation_key(problem.sha256, cand.sha256, cfg.precision, cfg.size_scale, hardware, settings),
        category=problem.category if problem.version != "dlrm" else "dlrm",
        candidate_id=cand.candidate_id, candidate_sha256=cand.sha256, model_config=cand.model_config,
        sample_id=cand.sample_id, backend=cand.backend, created_utc=provenance.collect("cpu")["created_utc"],
        metadata=metadata, **common, **fields)
    if samples:
        for name, value in _timing_fields(samples, "candidate").items():
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
    """Speedups (ratio of medians), their bootstrap intervals and significance (``kbstudy.harness.timing``): a speedup is
    significant when its 95% interval excludes 1 on the side of the point estimate, and never while
    ``timing_discrepancy`` is true (the event timing missed work the host clock saw)."""
    from kbstudy.harness.timing import speedup_interval, speedup_significant

    for base, ratio_field, sig_field in (("eager", "speedup_vs_eager", "speedup_significant"),
                                         ("compile", "speedup_vs_compile", "speedup_vs_compile_significant")):
        median = getattr(record, f"{base}_ms_median")
        if not median:
            continue
        speedup = median / record.candidate_ms_median
        setattr(record, ratio_field, speedup)
        interval = speedup_interval(ref_row.get(f"{base}_ms_samples"), samples)
        if interval is not None:
            setattr(record, f"{ratio_field}_ci_low", interval[0])
            setattr(record, f"{ratio_field}_ci_high", interval[1])
        significant = False if record.timing_discrepancy else speedup_significant(interval, speedup)
        setattr(record, sig_field, significant)


def clear_build_cache(cfg: EvalConfig) -> None:
    """Remove the build cache (``<cache_dir>/torch_extensions``)."""
    shutil.rmtree(Path(cfg.cache_dir) / "torch_extensions", ignore_errors=True)
