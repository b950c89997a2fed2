"""The candidate process: loads one candidate, constructs it, runs its correctness trials, times it and profiles one
call, serving the orchestrator's requests (``kbstudy.harness.protocol``: :class:`~kbstudy.harness.protocol.Construct`,
:class:`~kbstudy.harness.protocol.Run`, :class:`~kbstudy.harness.protocol.Release`,
:class:`~kbstudy.harness.protocol.TimeCandidate`, :class:`~kbstudy.harness.protocol.Profile`,
:class:`~kbstudy.harness.protocol.Exit`).

A trial's inputs come from the reference process as a packet forwarded unopened by the orchestrator; private copies
are made here (the candidate may write its inputs). Its outputs go back as a packet with the integrity report
(``child/integrity.py``) beside them; the verdicts are drawn in the reference process, which never loads a candidate.
With ``survive`` (kbstudy's extra trials, ``kbstudy.verdict.trials``) a Python exception in the call is reported and
the process serves on, so the candidate's other verdicts and its timing survive a crash on unusual inputs. After a
trial is judged, :class:`~kbstudy.harness.protocol.Release` drops its outputs and hands idle cached GPU blocks above
1 GiB back (the reference process shares the GPU).

Structural variants (``kbstudy.verdict.trials``): a :class:`~kbstudy.harness.protocol.Construct` naming a variant
builds a second ``ModelNew`` for that variant's trial (at a shape variant's sizes, from the candidate's source with
its size constants edited; for ``params_random``, with the parameter values the reference's ``Model`` got,
``kbstudy.harness.variant_inputs``); a failure there is reported and the process serves on. A layout variant's
:class:`~kbstudy.harness.protocol.Run` relays the private input copies out before the call.
"""

from __future__ import annotations

import contextlib
import dataclasses

import torch
import torch.utils.deterministic

from kbstudy.harness import timing, transfer, variant_inputs
from kbstudy.harness.child.autotune import autotuned_configs
from kbstudy.harness.child.build import load_candidate
from kbstudy.harness.child.integrity import (
    PRISTINE_HOST_BYTES,
    FillFreshMode,
    global_state_diff,
    global_state_snapshot,
    inputs_equal,
    pristine_copy,
)
from kbstudy.harness.failures import classify_exception, error_text
from kbstudy.harness.kernel_profile import profile_steps
from kbstudy.harness.protocol import (
    CandidateJob,
    Construct,
    Exit,
    Failure,
    Profile,
    ProfileReply,
    Release,
    Run,
    Stage,
    TimeCandidate,
    TimingReply,
    candidate_request,
)
from kbstudy.harness.tensors import flatten_outputs, set_seed, torch_dtype
from kbstudy.records.outcomes import Outcome


class CandidateWorker:
    """Runs one candidate (lives inside its worker process)."""

    def __init__(self, conn, job: CandidateJob):
        self.conn = conn
        self.job = job
        self.device = job.device
        self.model = None
        self.variant_models: dict = {}  # structural variant -> its ModelNew, for that variant's one trial

    def fail(self, exc: BaseException, stage: str, packed: bool = False) -> None:
        """Report a failure: a plain message, or (``packed``) an error packet where shared bytes were expected."""
        failure = Failure(classify_exception(exc, stage), error_text(exc), stage).to_wire()
        if packed:
            self.conn.send_bytes(transfer.pack_error(failure))
        else:
            self.conn.send(failure)

    def serve(self) -> None:
        """Load the candidate, then serve the orchestrator's requests until :class:`~kbstudy.harness.protocol.Exit`
        or a failure that ends the process."""
        torch.set_grad_enabled(False)
        self.dtype = torch_dtype(self.job.precision)
        self.state_before = global_state_snapshot()  # before any candidate code runs
        self.last_inputs = None
        self.timing_inputs = None
        self.timed_outputs = None
        try:
            module, _ = load_candidate(self.job)
            if not hasattr(module, "ModelNew"):
                raise AttributeError("the candidate source defines no ModelNew")
            self.model_cls = module.ModelNew
            self.module = module
        except BaseException as exc:  # noqa: BLE001
            self.fail(exc, "load")
            return
        self.conn.send(Stage("loaded").to_wire())
        while True:
            request = candidate_request(self.conn.recv())
            if isinstance(request, Exit):
                return
            if isinstance(request, Construct):
                if not self._construct(request) and request.variant is None:
                    return
            elif isinstance(request, Run):
                if not self._run(request) and not request.survive:
                    return
            elif isinstance(request, Release):
                self.outputs = None
                self.timed_outputs = None
                self._release_cached_memory()
            elif isinstance(request, TimeCandidate):
                if not self._time(request):
                    return
            elif isinstance(request, Profile):
                self._profile()

    def _inputs_failed(self, exc: BaseException, packed: bool = False) -> None:
        """Report inputs that could not be opened as the reference's failure (``reference_error``), not the
        candidate's: e.g. the reference process's shared-memory manager refusing connections after an earlier
        candidate wrote into its socket. The orchestrator then starts a fresh reference process."""
        failure = Failure(Outcome.REFERENCE_ERROR.value, "opening the reference's inputs: " + error_text(exc),
                          "run").to_wire()
        if packed:
            self.conn.send_bytes(transfer.pack_error(failure))
        else:
            self.conn.send(failure)

    def _release_cached_memory(self) -> None:
        """Hand the caching allocator's idle blocks back to the driver once a trial is judged, when they exceed
        ``PRISTINE_HOST_BYTES``: the reference process shares the GPU and builds the next trial's inputs (and their
        float64 copies) while this process waits, and the pristine copies and poisoned blocks of the last trial would
        otherwise stay reserved here (45_Average_Pooling_2D at fp32, a 16 GiB input: out of memory on the H200). Small problems keep their blocks: releasing them every trial would only add allocation time."""
        if not self.device.startswith("cuda"):
            return
        if torch.cuda.memory_reserved(self.device) - torch.cuda.memory_allocated(self.device) > PRISTINE_HOST_BYTES:
            torch.cuda.empty_cache()

    def _construct(self, request: Construct) -> bool:
        """Construct ``ModelNew`` under the run's seed: the candidate's model, or a structural variant's (from the
        edited source where one is given; with the reference's parameter values for ``params_random``)."""
        not_applicable = None
        try:
            cls = self.model_cls
            if request.source is not None:
                module, _ = load_candidate(dataclasses.replace(self.job, source=request.source))
                cls = module.ModelNew
            set_seed(self.job.seed)
            model = cls(*request.init_inputs)
            if isinstance(model, torch.nn.Module):
                model = model.to(device=self.device, dtype=self.dtype)
            if request.parameters is not None:
                not_applicable = variant_inputs.replace_parameters(model, request.parameters["spec"],
                                                                   int(request.parameters["seed"]), self.dtype)
            if request.variant is None:
                self.model = model
            elif not_applicable is None:
                self.variant_models[request.variant] = model
        except BaseException as exc:  # noqa: BLE001
            self.fail(exc, "construct")
            return False
        self.conn.send(Stage("constructed", not_applicable).to_wire())
        return True

    def _receive_inputs(self) -> list:
        shared = transfer.unshare(self.conn.recv_bytes())  # forwarded payload, tag already stripped
        # private copies: the shared ones belong to the reference process, and the candidate may write its inputs
        inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in shared]
        del shared
        if self.device.startswith("cuda"):
            torch.cuda.synchronize(self.device)
            torch.cuda.ipc_collect()
        return inputs

    def _poison_allocator(self, nbytes: int, value: float) -> None:
        """Fill free blocks of the CUDA caching allocator with ``value`` so unwritten output keeps it."""
        free, _ = torch.cuda.mem_get_info(self.device)
        big = min(max(4 * nbytes, 64 << 20), int(0.5 * free))
        blocks = [torch.full((big // 4,), value, dtype=torch.float32, device=self.device)]
        # the small pool (allocations under 1 MiB) lives in separate 2 MiB segments
        blocks += [torch.full(((512 << 10) // 4,), value, dtype=torch.float32, device=self.device) for _ in range(64)]
        torch.cuda.synchronize(self.device)
        del blocks

    def _run(self, request: Run) -> bool:
        """One correctness trial: inputs received (or copied into the previous trial's storage), the call made with
        the sentinel controls set, the integrity report drawn, the outputs' packet sent. ``False`` on a failure."""
        try:
            if not request.reuse_inputs:
                self.last_inputs = None  # only a storage-reuse trial needs them; a full-size input set is GBs
            inputs = self._receive_inputs()
        except BaseException as exc:  # noqa: BLE001 - before any candidate call: the reference's side failed
            self._inputs_failed(exc, packed=True)
            return False
        model = self.variant_models.pop(request.variant, None) if request.variant else self.model
        try:
            if model is None:
                raise RuntimeError(f"no model was constructed for variant {request.variant!r}")
            if request.layout is not None:
                inputs = variant_inputs.relayout(inputs, request.layout)
            if request.reuse_inputs and self._same_layout(self.last_inputs, inputs):
                # same tensor objects and storage as the previous trial, new values (see the module docstring)
                for old, new in zip(self.last_inputs, inputs):
                    if isinstance(old, torch.Tensor):
                        old.copy_(new)
                inputs = self.last_inputs
                reused = True
            else:
                reused = False
            pristine = [pristine_copy(x) for x in inputs]
        except BaseException as exc:  # noqa: BLE001
            self.fail(exc, "run", packed=True)
            return False
        sentinel = request.sentinel
        deterministic = torch.are_deterministic_algorithms_enabled()
        fill = torch.utils.deterministic.fill_uninitialized_memory
        tampered: list[str] = []
        mode = contextlib.nullcontext()
        try:
            if sentinel == "nan":
                # PyTorch fills fresh allocations (at::empty and friends, also from C++ extensions) with NaN, or the
                # integer maximum, while deterministic algorithms are on; warn_only keeps ops without a
                # deterministic implementation running
                torch.use_deterministic_algorithms(True, warn_only=True)
                torch.utils.deterministic.fill_uninitialized_memory = True
            elif self.device.startswith("cuda"):
                self._poison_allocator(int(request.output_bytes), float(sentinel))
            else:
                mode = FillFreshMode(float(sentinel))
            set_seed(int(request.seed))
            with mode:
                out = model(*inputs)
            if self.device.startswith("cuda"):
                torch.cuda.synchronize(self.device)
            if sentinel == "nan":
                if not torch.are_deterministic_algorithms_enabled():
                    tampered.append("torch.are_deterministic_algorithms_enabled() switched off during the call")
                if not torch.utils.deterministic.fill_uninitialized_memory:
                    tampered.append("torch.utils.deterministic.fill_uninitialized_memory switched off during the call")
            outputs = flatten_outputs(out)
        except BaseException as exc:  # noqa: BLE001
            self.fail(exc, "run", packed=True)
            return False
        finally:
            torch.use_deterministic_algorithms(deterministic, warn_only=True)
            torch.utils.deterministic.fill_uninitialized_memory = fill
        integrity = {
            "inputs_mutated": [i for i, (x, y) in enumerate(zip(pristine, inputs)) if not inputs_equal(x, y)],
            "global_state": tampered + global_state_diff(self.state_before, global_state_snapshot()),
            "reused_inputs": reused,
            # where the pristine copies were kept (host memory costs a round trip per call: pristine_on_host)
            "pristine_on_host": [i for i, x in enumerate(pristine)
                                 if hasattr(x, "device") and x.device.type == "cpu" and self.device != "cpu"],
        }
        del pristine
        self.last_inputs = inputs
        self.outputs = outputs
        # the verdicts need the output's real type (a tensor subclass can override comparisons); a subclass defined
        # by the candidate cannot be unpickled elsewhere, so send plain tensors and the type names beside them
        forms = [f"{type(o).__module__}.{type(o).__qualname__}" for o in outputs]
        outputs = [o.as_subclass(torch.Tensor) if isinstance(o, torch.Tensor) and type(o) is not torch.Tensor else o
                   for o in outputs]
        try:
            payload = transfer.pack_shared({"outputs": outputs, "forms": forms, "integrity": integrity})
        except BaseException as exc:  # noqa: BLE001 - e.g. an output object that cannot be pickled
            self.fail(exc, "run", packed=True)
            return False
        self.conn.send_bytes(payload)
        return True

    @staticmethod
    def _same_layout(old, new) -> bool:
        """True if ``old`` (the previous trial's inputs) can take ``new``'s values in place: same count, and each
        tensor pair has the same shape, dtype and device (non-tensors equal)."""
        if old is None or len(old) != len(new):
            return False
        for a, b in zip(old, new):
            if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
                return False
            if isinstance(a, torch.Tensor):
                if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
                    return False
            elif not inputs_equal(a, b):
                return False
        return True

    def _time(self, request: TimeCandidate) -> bool:
        """Time the candidate over the timing pool (protocol step 4): fresh values in the same buffers for every call,
        seeded per pool entry, the outputs of timed calls drawn at random kept for the reference to check,
        and on a GPU the host-synchronised cross-check and, if asked, the device time."""
        try:
            shared = transfer.unshare(self.conn.recv_bytes())  # read-only: copied into private buffers per call
        except BaseException as exc:  # noqa: BLE001 - before any candidate call: the reference's side failed
            self._inputs_failed(exc)
            return False
        try:
            model = self.model
            result = timing.time_pool(lambda *args: model(*args), shared["pool"], seeds=shared["seeds"],
                                      device=self.device, keep_outputs=True,
                                      host_check=bool(request.host_check), device_time=bool(request.device_time),
                                      **(request.timing or {}))
            self.timing_inputs = result.inputs
            del shared
            # plain tensors (a subclass defined by the candidate cannot be unpickled in the reference process)
            checked = [(entry, call, [o.as_subclass(torch.Tensor) if isinstance(o, torch.Tensor) else o
                                      for o in outputs], mix) for entry, call, outputs, mix in result.checked]
            payload = transfer.pack_shared({"checked": checked})
        except BaseException as exc:  # noqa: BLE001
            self.fail(exc, "run")
            return False
        self.timed_outputs = checked
        dev = result.device
        self.conn.send(TimingReply(samples=result.samples, pool_size=result.pool_size, host_ms=result.host_ms,
                                   host_calls=result.host_calls, device_samples=dev.samples if dev else None,
                                   device_host_overran=dev.host_overran if dev else None,
                                   device_spin_us=dev.spin_us if dev else None,
                                   device_flush=dev.flush if dev else None,
                                   autotuned=autotuned_configs(self.module)).to_wire())
        self.conn.send_bytes(payload)
        return True

    def _profile(self) -> None:
        """One profiled call on the last timing inputs (protocol step 5); any failure is reported, not fatal."""
        try:
            model, inputs = self.model, self.timing_inputs
            if inputs is None:
                raise RuntimeError("profile requested before timing")
            result = profile_steps(lambda: model(*inputs), self.device, wait=0, warmup=1, active=1)
            kernels = [[str(name), float(us)] for name, us in zip(result.table["name"], result.table["time_us"])]
            self.conn.send(ProfileReply(kernels=kernels).to_wire())
        except BaseException as exc:  # noqa: BLE001 - e.g. CUPTI unavailable: recorded, the verdicts stand
            self.conn.send(ProfileReply(profile_error=error_text(exc, 1000)).to_wire())
