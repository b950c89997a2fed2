"""The orchestrator's side of one candidate: a fresh candidate process loads, constructs and runs it on every trial,
its outputs forwarded unopened to the reference process to be judged (``kbstudy.verdict.checks``), then, if either
verdict passed, it is timed over the reference's timing pool with a sample of the timed outputs judged too, and on a
GPU one call is profiled (``kbstudy.harness.kernel_share``). Whatever happens becomes record fields
(:func:`run_candidate`); the orchestrator itself runs no candidate code and opens no tensor.
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time
from typing import Any

from kbstudy.harness import containment, timing_stats
from kbstudy.harness.assemble import device_time_fields, note_integrity
from kbstudy.harness.candidates import Candidate
from kbstudy.harness.config import EvalConfig
from kbstudy.harness.gpu_lock import DeviceLock
from kbstudy.harness.kernel_share import custom_kernel_share
from kbstudy.harness.pool import Child, ChildDied, ChildPool, ChildProtocolError, ChildTimeout, child_env, label
from kbstudy.harness.problems import edit_candidate_sizes, scale_candidate_source, scale_source
from kbstudy.harness.protocol import (
    AssignRole,
    CandidateJob,
    Construct,
    Failure,
    InitInputs,
    Profile,
    ProfileReply,
    Release,
    Run,
    TimeCandidate,
    TimingReply,
    Verify,
    VerifyTiming,
)
from kbstudy.harness.reference_run import ReferenceFailure, ReferenceHandle, reference_inputs
from kbstudy.harness.transfer import unpack
from kbstudy.records.outcomes import Outcome
from kbstudy.verdict.checks import (
    FLOAT_SENTINEL,
    TIMING_OUTPUT_MISMATCH,
    KbstudyTrial,
    KernelBenchTrial,
    sentinel_label,
)
from kbstudy.verdict.combine import combine, combine_extra
from kbstudy.verdict.trials import FAMILIES, ExtraTrial


def run_candidate(pool: ChildPool, ref: ReferenceHandle, candidate: Candidate, cfg: EvalConfig, device: str,
                   seeds: list[int], extra: list[ExtraTrial] | None = None, gpu: DeviceLock | None = None,
                   build: dict | None = None) -> dict:
    """One candidate through a fresh worker. Returns record fields (outcome, verdicts, timing samples).

    ``seeds``: KernelBench's trial seeds; ``extra``: the batch's extra trials (run only where they apply); ``gpu``:
    the batch's :class:`~kbstudy.harness.gpu_lock.DeviceLock` (untimed requests shared, timing and the profiled call
    exclusive; default: a lock of its own); ``build``: the build queue's result for a CUDA candidate (a failed build
    is loaded outside the lock: it compiles again on the CPU, to record the real error, and runs nothing on the
    device). The metadata says what containment found (``containment.candidate_notes``: processes left behind,
    captured output), ``stage_seconds`` where the wall time went (``start``: getting a process; ``gpu_wait``: waiting
    for the device lock; then the stages), ``span_unix`` and ``timed_unix`` the evaluation's and its exclusive
    regions' ``[start, end]`` (``time.time()``); ``fresh_reference`` (popped by the batch loop) asks for a new
    reference process after a protocol break."""
    extra = list(extra or [])
    gpu = gpu or DeviceLock()
    gpu.take_wait()
    started, started_unix = time.perf_counter(), time.time()
    fields: dict[str, Any] = {"compiled": False, "metadata": {}}
    clock = _StageClock()
    fields["metadata"]["stage_seconds"] = clock.totals
    timed: list[list[float]] = []
    # on a CPU the device is the processor: a process starting (importing torch) would slow another problem's timing
    with gpu.process_change(device), clock("start"):
        starting = time.time()
        child = pool.get()
    fields["metadata"]["process_start_unix"] = [round(starting, 4), round(time.time(), 4)]
    stage = "load"
    failed_build = build is not None and not build.get("built", True)
    try:
        job = CandidateJob(
            # the candidate's copies of the problem's size constants shrink with the problem's (size_scale < 1)
            source=scale_candidate_source(candidate.source, ref.problem_source, cfg.size_scale),
            filename=f"<candidate {label(candidate.candidate_id)}>", device=device, precision=cfg.precision,
            seed=cfg.seed)
        with contextlib.nullcontext() if failed_build else gpu.shared(), clock("load"):
            child.send(AssignRole("worker", child_env(candidate, cfg, device), job).to_wire())
            failure = Failure.of(child.recv(cfg.load_timeout_s))
        if failure is not None:
            return _finish(fields, {"outcome": failure.failure, "error_message": failure.error})
        fields["compiled"] = True
        stage = "construct"
        with gpu.shared(), clock("construct"):
            init = ref.request(InitInputs(), cfg.run_timeout_s)
            child.send(Construct(init["init_inputs"]).to_wire())
            failure = Failure.of(child.recv(cfg.run_timeout_s))
        if failure is not None:
            return _finish(fields, {"outcome": failure.failure, "error_message": failure.error})
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
        for t, seed, spec in plan:
            family = FAMILIES.get(spec.name) if spec is not None else None
            if family in ("shape", "params"):
                # ModelNew rebuilt at the variant's sizes, or with the reference's replaced parameters
                with gpu.shared(), clock("construct"):
                    built = _construct_variant(child, ref, spec, job.source, cfg)
                if isinstance(built, str):
                    not_applicable[spec.name] = built
                if built is not None:
                    if not isinstance(built, str):
                        extra_results.append((spec, built))
                    continue
            # the second sentinel on odd trials (GPU: poisoned allocator; CPU: a dispatch mode filling fresh tensors)
            sentinel = FLOAT_SENTINEL if (cfg.second_sentinel and t % 2 == 1) else "nan"
            with gpu.shared():  # one trial's inputs, call and verdict: untimed, may overlap other problems' work
                failure, outputs = _run_trial(child, ref, cfg, clock, t, seed, spec, sentinel, family)
                verdict = None if failure is not None else \
                    _judge_trial(child, ref, cfg, clock, Verify(trial=t, sentinel=sentinel, kernelbench=spec is None),
                                 outputs)
                del outputs
            if failure is not None:
                if spec is None:
                    return _finish(fields, {"outcome": failure["failure"], "error_message": failure["error"]})
                # a crash on an extra trial is that trial's failure; KernelBench's verdict and the timing survive
                extra_results.append((spec, KbstudyTrial(False, failure["failure"], None, None,
                                                         f"the call raised: {failure['error'][:1000]}",
                                                         sentinel=sentinel_label(sentinel))))
                continue
            if "error" in verdict:
                # the reference process ran out of memory judging: the machine's failure, retryable like any other
                # out_of_memory record (--retry-outcome); any other error is the outputs' (not judgeable)
                oom = verdict.get("category") == Outcome.OUT_OF_MEMORY
                outcome = Outcome.OUT_OF_MEMORY if oom else Outcome.RUNTIME_ERROR
                return _finish(fields, {"outcome": outcome.value, "error_message":
                                        "the candidate's outputs could not be judged: " + verdict["error"]})
            if spec is None:
                kb_trials.append(verdict["kernelbench"])
                kbs_trials.append(verdict["kbstudy"])
            else:
                extra_results.append((spec, verdict["kbstudy"]))
            form_ok.append((verdict["shape_ok"], verdict["dtype_ok"]))
            note_integrity(fields["metadata"], t, verdict.get("integrity") or {})
        if not_applicable:
            fields["metadata"]["variant_notes"] = dict(not_applicable)
        combined = combine(kb_trials, kbs_trials, cfg.precision)
        combined = combine_extra(combined, extra_results, [spec.name for spec in extra], not_applicable)
        verdict_meta = combined.pop("metadata_verdict")
        fields.update(combined)
        fields["outcome"] = Outcome.EVALUATED.value
        fields["shape_ok"] = all(shape for shape, _ in form_ok)
        fields["dtype_ok"] = all(dtype for _, dtype in form_ok)
        fields["metadata"].update({k: v for k, v in verdict_meta.items() if v})
        if extra_results:
            fields["metadata"]["extra_trial_results"] = [
                {"trial": spec.trial, "name": spec.name, "passed": r.passed, "failure": r.failure,
                 "rel_l2": r.rel_l2} for spec, r in extra_results]
        if cfg.time_candidates and (fields["kernelbench_correct"] or fields["kbstudy_correct"]):
            stage = "time"
            with gpu.exclusive(), clock("time"):
                timed.append([time.time()])
                try:
                    _time_candidate(child, ref, cfg, device, fields)
                finally:
                    timed[-1].append(time.time())
            if fields.get("timing_output_ok") and device.startswith("cuda") and cfg.profile_candidates:
                with gpu.exclusive(), clock("profile"):
                    timed.append([time.time()])
                    try:
                        _profile_candidate(child, cfg, fields)
                    finally:
                        timed[-1].append(time.time())
        return fields
    except ReferenceFailure as exc:
        return _finish(fields, {"outcome": Outcome.REFERENCE_ERROR.value, "error_message": f"{stage}: reference: {exc}"})
    except ChildTimeout as exc:
        if not ref.child.process.is_alive():
            return _finish(fields, {"outcome": Outcome.REFERENCE_ERROR.value,
                                    "error_message": f"{stage}: reference process died"})
        return _finish(fields, {"outcome": Outcome.TIMEOUT.value, "error_message": f"{stage}: {exc}"})
    except ChildDied as exc:
        if isinstance(exc, ChildProtocolError):
            # what it wrote into its connection, it may have written into the reference's shared-memory manager
            fields["fresh_reference"] = True
        if not child.process.is_alive() and ref.child.process.is_alive():
            return _finish(fields, {"outcome": Outcome.CRASHED.value, "error_message": f"{stage}: {exc}"})
        return _finish(fields, {"outcome": Outcome.REFERENCE_ERROR.value,
                                "error_message": f"{stage}: reference process: {exc}"})
    finally:
        clock.stop()
        clock.totals["gpu_wait"] = round(gpu.take_wait(), 4)
        fields["worker_wall_s"] = time.perf_counter() - started
        fields["metadata"]["span_unix"] = [round(started_unix, 4), round(time.time(), 4)]
        if timed:
            fields["metadata"]["timed_unix"] = [[round(x, 4) for x in w] for w in timed]
        if fields.get("outcome") in (Outcome.TIMEOUT, Outcome.CRASHED):
            ending = time.time()
            child.kill()  # known hung or dead: no grace period, and no wait for the lock while it may spin
        else:
            with gpu.process_change(device):  # its teardown, like its start, is work on a CPU device
                ending = time.time()
                child.close(grace_s=5)
        fields["metadata"]["process_end_unix"] = [round(ending, 4), round(time.time(), 4)]
        report = dataclasses.asdict(child.exit_report) if child.exit_report is not None else None
        fields["metadata"].update(containment.candidate_notes(child.escaped_processes, report))


def _run_trial(child: Child, ref: ReferenceHandle, cfg: EvalConfig, clock: _StageClock, t, seed: int,
               spec: ExtraTrial | None, sentinel, family: str | None) -> tuple[dict | None, Any]:
    """One correctness trial: its inputs from the reference process, forwarded unopened to the candidate, and the
    call (a structural variant's name tells the candidate process which model or layout to use); returns
    ``(failure, outputs packet)`` as ``transfer.unpack`` gives them."""
    with clock("inputs"):
        inputs = reference_inputs(ref, t, cfg)
    # trial 1 runs on trial 0's input storage with its own values: a result cached by shape, pointer or object
    # identity comes back stale (kbstudy.harness.child.integrity, "storage reuse")
    reuse = cfg.storage_reuse_trial and t == 1
    with clock("run_first" if t == 0 else ("run" if spec is None else "run_extra")):
        child.send(Run(trial=t, seed=seed, sentinel=sentinel, reuse_inputs=reuse,
                       output_bytes=ref.info.get("output_bytes", 0), survive=spec is not None,
                       variant=spec.name if family in ("shape", "params") else None,
                       layout=spec.name if family == "layout" else None).to_wire())
        child.send_bytes(inputs)
        del inputs
        return unpack(child.recv_bytes(cfg.run_timeout_s))


def _judge_trial(child: Child, ref: ReferenceHandle, cfg: EvalConfig, clock: _StageClock, request: Verify,
                 outputs) -> dict:
    """The reference process's verdict on a trial's outputs (forwarded unopened); the candidate then drops them."""
    with clock("verify"):
        ref.child.send(request.to_wire())
        ref.child.send_bytes(outputs)
        try:
            verdict = ref.child.recv(cfg.run_timeout_s)
        except ChildTimeout as exc:
            raise ReferenceFailure(f"no verdict within the timeout: {exc}") from None
        child.send(Release().to_wire())
    return verdict


def _construct_variant(child: Child, ref: ReferenceHandle, spec: ExtraTrial, candidate_source: str,
                       cfg: EvalConfig) -> KbstudyTrial | str | None:
    """Have the candidate process build ``ModelNew`` for a shape variant (init inputs at the variant's sizes, the
    candidate's copies of the problem's size constants edited as the reference's were) or for ``params_random``
    (the reference's parameter specification and seed). Returns ``None`` when built, the reason the variant does
    not apply (no parameters to match), or the trial's failure when ``ModelNew`` could not be built."""
    if FAMILIES[spec.name] == "shape":
        init = ref.request(InitInputs(trial=spec.trial), cfg.run_timeout_s)
        edits = (ref.info.get("shape_edits") or {}).get(spec.trial) or {}
        source = edit_candidate_sizes(candidate_source, scale_source(ref.problem_source, cfg.size_scale), edits,
                                      spec.name)
        message = Construct(init.get("init_inputs"), variant=spec.name,
                            source=None if source == candidate_source else source)
    else:
        init = ref.request(InitInputs(), cfg.run_timeout_s)
        message = Construct(init.get("init_inputs"), variant=spec.name,
                            parameters={"spec": ref.info.get("parameter_spec") or [], "seed": spec.seed})
    if "error" in init:
        raise ReferenceFailure(f"init inputs of {spec.name}: {init['error']}")
    child.send(message.to_wire())
    reply = child.recv(cfg.load_timeout_s)
    failure = Failure.of(reply)
    if failure is not None:
        what = "at the variant's sizes" if FAMILIES[spec.name] == "shape" else "for the parameter variant"
        return KbstudyTrial(False, failure.failure, None, None,
                            f"ModelNew could not be built {what}: {failure.error[:1000]}")
    return reply.get("not_applicable")


def _time_candidate(child: Child, ref: ReferenceHandle, cfg: EvalConfig, device: str, fields: dict) -> None:
    """Time a candidate over the reference's timing pool, have its sampled timed outputs judged, and fill
    ``fields``: ``timing_samples`` (popped by ``assemble.write_record``), ``timing_pool_size``, ``timing_output_ok``,
    ``candidate_host_ms``, ``timing_discrepancy`` and the ``candidate_device_ms_*`` fields (GPU), and the
    ``timing_output_mismatch`` verdict. A failure
    while timing keeps the verdicts and records the outcome (as before the pool existed)."""
    pool = reference_inputs(ref, "timing_pool", cfg)
    on_gpu = device.startswith("cuda")
    child.send(TimeCandidate(timing=cfg.timing, host_check=on_gpu, device_time=on_gpu and cfg.device_time).to_wire())
    child.send_bytes(pool)
    del pool
    wire = child.recv(cfg.run_timeout_s)
    failure = Failure.of(wire)
    if failure is not None:
        # the candidate passed its trials but failed while being timed: keep the verdicts, record why
        fields["metadata"]["timing_failure"] = failure.error
        fields["outcome"] = failure.failure
        fields["error_message"] = "failed while timing: " + failure.error
        return
    reply = TimingReply.from_wire(wire)
    error, checked = unpack(child.recv_bytes(cfg.run_timeout_s))  # forwarded unopened, tag stripped
    if error is not None:
        raise ChildDied(None)  # the worker only ever sends a payload here
    fields["timing_samples"] = reply.samples
    fields["timing_pool_size"] = reply.pool_size
    if on_gpu:
        fields["candidate_host_ms"] = reply.host_ms
        fields["timing_discrepancy"] = timing_stats.timing_discrepancy(statistics.median(reply.samples), reply.host_ms)
        fields["metadata"]["host_check_calls"] = reply.host_calls
    if reply.autotuned:
        fields["metadata"]["autotuned"] = reply.autotuned
    if reply.device_samples:
        fields.update(device_time_fields(reply.device_samples))
        fields["metadata"]["device_time"] = {"calls": len(reply.device_samples),
                                             "host_overran": reply.device_host_overran,
                                             "spin_us": reply.device_spin_us, "flush": reply.device_flush}
    try:
        # the check the candidate's verdict rests on: kbstudy's if it passed kbstudy's verdict, else KernelBench's
        check_name = "kbstudy" if fields.get("kbstudy_correct") else "kernelbench"
        ref.child.send(VerifyTiming(check_name).to_wire())
        ref.child.send_bytes(checked)
        del checked
        try:
            check = ref.child.recv(cfg.run_timeout_s)
        except ChildTimeout as exc:
            raise ReferenceFailure(f"no timing-output verdict within the timeout: {exc}") from None
    finally:
        child.send(Release().to_wire())
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
        what = "device-time call" if isinstance(call, int) and call >= len(reply.samples) else "timed call"
        fields["metadata"]["kbstudy_detail"] = f"{what} {call} on timing input set {first.get('entry')}: " \
                                               f"{first.get('detail')}"


def _profile_candidate(child: Child, cfg: EvalConfig, fields: dict) -> None:
    """One profiled call (GPU): ``custom_kernel_share``, ``top_kernels`` and ``metadata["kernel_time_us_by_origin"]``
    (``kbstudy.harness.kernel_share``), or ``metadata["profile_error"]``."""
    child.send(Profile().to_wire())
    reply = ProfileReply.from_wire(child.recv(cfg.run_timeout_s))
    if reply.profile_error is not None:
        fields["metadata"]["profile_error"] = reply.profile_error
        return
    share = custom_kernel_share(reply.kernels)
    fields["custom_kernel_share"] = share["custom_kernel_share"]
    fields["top_kernels"] = share["top_kernels"]
    fields["metadata"]["kernel_time_us_by_origin"] = share["time_us_by_origin"]


def _finish(fields: dict, result: dict) -> dict:
    """``fields`` updated with a failure's outcome and message, the same dict (so the wall time that
    :func:`run_candidate` stores in ``fields`` in its ``finally`` reaches the record on every path)."""
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
        @contextlib.contextmanager
        def timed():
            t0 = time.perf_counter()
            try:
                yield
            finally:
                self.totals[stage] = round(self.totals.get(stage, 0.0) + time.perf_counter() - t0, 4)

        return timed()
