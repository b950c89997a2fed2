"""The orchestrator's side of a problem's reference process: starting it (:class:`ReferenceHandle`), fetching a
trial's inputs as an unopened packet (:func:`reference_inputs`), and timing the baselines into the problem's reference
record (:func:`time_reference`). No problem or candidate code runs here."""

from __future__ import annotations

import time
from typing import Any

from kbstudy.harness.assemble import baseline_timing_fields, reference_report_fields, reference_row
from kbstudy.harness.config import EvalConfig
from kbstudy.harness.gpu_lock import DeviceLock
from kbstudy.harness.pool import ChildDied, ChildPool, ChildTimeout, child_env, label
from kbstudy.harness.problems import Problem, scale_source
from kbstudy.harness.protocol import AssignRole, Close, Inputs, ReferenceJob, TimeBaselines
from kbstudy.harness.transfer import unpack
from kbstudy.records.outcomes import Outcome
from kbstudy.verdict.trials import FRESH, ExtraTrial


class ReferenceFailure(RuntimeError):
    """The reference process could not produce what was asked (its message says why)."""


class ReferenceHandle:
    """The orchestrator's handle on one problem's reference process."""

    def __init__(self, pool: ChildPool, problem: Problem, cfg: EvalConfig, device: str,
                 extra: list[ExtraTrial] | None = None, gpu: DeviceLock | None = None):
        started = time.perf_counter()
        self.gpu, self.device = gpu or DeviceLock(), device  # a lock of its own: nothing to wait for
        with self.gpu.process_change(device):
            self.child = pool.get()
        self.problem_source = problem.source  # unscaled: scale_candidate_source matches candidates against it
        source = scale_source(problem.source, cfg.size_scale)
        job = ReferenceJob(source=source, filename=f"<problem {label(problem.key)}>", device=device,
                           precision=cfg.precision, trials=cfg.trials, seed=cfg.seed,
                           inputs_on_device=cfg.inputs_on_device, cache_bytes=cfg.reference_cache_bytes,
                           extra_trials=[e.as_dict() for e in extra or []], timing_pool_bytes=cfg.timing_pool_bytes,
                           # the trial candidate_run runs on the previous trial's input storage
                           reuse_trial=1 if cfg.storage_reuse_trial and cfg.trials > 1 else None)
        with self.gpu.shared():  # untimed: overlaps other problems
            self.child.send(AssignRole("reference", child_env(None, cfg, device), job).to_wire())
            self.info = self.child.recv(cfg.load_timeout_s)
        self.ok = "error" not in self.info
        self.cfg = cfg
        #: seconds from asking for a process to the reference's report (inputs, expected outputs, problem flags),
        #: waiting for the device lock included
        self.setup_s = time.perf_counter() - started

    def not_applicable(self, extra: list[ExtraTrial]) -> dict[str, str]:
        """``{variant name: reason}`` of the variants that do not apply to this problem (from the reference's
        ``variants`` report; a variant trial the report does not mention counts as not applicable)."""
        report = {**(self.info.get("variants") or {}), **(self.info.get("structural_variants") or {})}
        out = {}
        for spec in extra:
            if spec.name == FRESH:
                continue
            if spec.trial not in report:
                out[spec.name] = "not assessed by the reference"
            elif report[spec.trial] is not None:
                out[spec.name] = report[spec.trial]
        return out

    def request(self, message, timeout: float) -> Any:
        """Send a request (a ``kbstudy.harness.protocol`` message) and wait for its reply."""
        self.child.send(message.to_wire())
        return self.child.recv(timeout)

    def close(self) -> None:
        with self.gpu.process_change(self.device):  # its teardown, like its start, is work on a CPU device
            try:
                if self.child.process.is_alive():
                    self.child.send(Close().to_wire())
            except ChildDied:
                pass
            self.child.close()


def reference_inputs(ref: ReferenceHandle, trial, cfg: EvalConfig) -> bytes:
    """The shared inputs of a trial from the reference process, still unopened (the orchestrator never opens them)."""
    ref.child.send(Inputs(trial).to_wire())
    try:
        packet = ref.child.recv_bytes(cfg.run_timeout_s)
    except ChildTimeout as exc:  # the reference, not the candidate, is stuck
        raise ReferenceFailure(f"no inputs within the timeout: {exc}") from None
    error, payload = unpack(packet)
    if error is not None:
        raise ReferenceFailure(error["error"])
    return payload


def time_reference(ref: ReferenceHandle | None, ref_error: str | None, key: str, problem: Problem, cfg: EvalConfig,
                    common: dict, build_wait_s: float = 0.0, gpu: DeviceLock | None = None) -> dict:
    """The reference record of ``problem``: the reference process's report and its eager and ``torch.compile``
    timings, taken with the device lock held exclusively (``gpu``, :mod:`kbstudy.harness.gpu_lock`).
    ``metadata.stage_seconds`` says where the problem's wall time went before its first candidate:
    ``build_wait`` (waiting for its CUDA candidates' builds), ``setup`` (the reference process's inputs, expected
    outputs and flags), ``gpu_wait`` (waiting for the device lock to time) and ``time`` (compiling and timing the
    baselines), in seconds; ``metadata.timed_unix`` the ``[start, end]`` of the timed region (``time.time()``)."""
    row = reference_row(key, common)
    if ref is None or not ref.ok:
        return {**row, "outcome": Outcome.REFERENCE_ERROR.value, "error_message": ref_error}
    row.update(reference_report_fields(ref.info))
    stages = {"build_wait": round(build_wait_s, 4), "setup": round(ref.setup_s, 4)}
    row["metadata"]["stage_seconds"] = stages
    if cfg.correctness_only:
        row["metadata"]["correctness_only"] = True  # no baseline was timed
    gpu = gpu or DeviceLock()
    waited = time.perf_counter()
    with gpu.exclusive():
        stages["gpu_wait"] = round(time.perf_counter() - waited, 4)
        started, started_unix = time.perf_counter(), time.time()
        try:
            if not (cfg.eager_baseline or cfg.compile_baseline):  # e.g. correctness_only: no timing pool is built
                result = {"eager": None, "compile": None, "compile_error": None, "pool_size": None}
            else:
                result = ref.request(TimeBaselines(eager=cfg.eager_baseline, compile=cfg.compile_baseline,
                                                   timing=cfg.timing), timeout=max(cfg.run_timeout_s, cfg.load_timeout_s))
        except (ChildDied, ChildTimeout) as exc:
            return {**row, "outcome": Outcome.REFERENCE_ERROR.value, "error_message": f"timing the reference: {exc}"}
        finally:
            stages["time"] = round(time.perf_counter() - started, 4)
            row["metadata"]["timed_unix"] = [[round(started_unix, 4), round(time.time(), 4)]]
    if "error" in result:
        return {**row, "outcome": Outcome.REFERENCE_ERROR.value, "error_message": result["error"]}
    row.update(baseline_timing_fields(result))
    row["outcome"] = Outcome.EVALUATED.value
    return row
