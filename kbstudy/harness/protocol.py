"""The messages between the orchestrator and its children, as frozen dataclasses.

Every child starts idle (:class:`Idle`) and takes one role from the first message it gets (:class:`AssignRole`):

* ``worker`` (:class:`CandidateJob`, ``child/candidate.py``): :class:`Construct`, then per trial a :class:`Run` followed
  by the inputs' packet (``kbstudy.harness.transfer``) and answered by the outputs' packet, then :class:`Release`;
  :class:`TimeCandidate` followed by the timing pool's packet, answered by a :class:`TimingReply` and the packet of the
  sampled timed outputs; :class:`Profile` (GPU), answered by a :class:`ProfileReply`; :class:`Exit`. A failure at any
  step is a :class:`Failure` (inside an error packet where a packet was expected);
* ``build`` (:class:`BuildJob`, ``child/build.py``): answered once by a :class:`BuildResult`;
* ``reference`` (:class:`ReferenceJob`, ``child/reference.py``): answered first by its report (``{"status": "ready",
  ...}``, ``ReferenceSession.describe``) or an :class:`ErrorReply`, then serves :class:`InitInputs`, :class:`Inputs`,
  :class:`Verify`, :class:`VerifyTiming`, :class:`TimeBaselines` and :class:`Close` (replies in ``child/reference.py``).

Whatever ends a role, the child's last message is its :class:`ExitReport` (processes it killed, its captured output).

On the wire every message is a plain dict (``to_wire``; requests carry their ``op``), pickled by ``multiprocessing``;
tensors never travel in these messages, only in packets (``kbstudy.harness.transfer``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Union

#: The sentinel a trial fills fresh memory with: ``"nan"`` (PyTorch's ``fill_uninitialized_memory``), or a float, the
#: second sentinel (``kbstudy.verdict.checks.FLOAT_SENTINEL``).
Sentinel = Union[str, float]


class _Wire:
    """``to_wire``/``from_wire`` for a frozen dataclass: the wire form is a dict of its fields, plus ``"op"`` for a
    request. ``from_wire`` ignores keys it does not know and leaves absent fields at their defaults."""

    OP: ClassVar[str | None] = None

    def to_wire(self) -> dict:
        wire = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {"op": self.OP, **wire} if self.OP else wire

    @classmethod
    def from_wire(cls, wire: dict):
        return cls(**{f.name: wire[f.name] for f in dataclasses.fields(cls) if f.name in wire})


# ------------------------------------------------------------------------------------------------ starting a child


@dataclasses.dataclass(frozen=True)
class Idle(_Wire):
    """A child's first message: torch is imported (and, for a spare on a GPU, the CUDA context created)."""

    status: str = "idle"  # always "idle"
    pid: int | None = None  # the child's process id (the leader of its process group)


@dataclasses.dataclass(frozen=True)
class CandidateJob(_Wire):
    """What a candidate process loads and how it runs it."""

    source: str  # the candidate's source (a ModelNew), scaled with the problem (problems.scale_candidate_source)
    device: str  # "cpu" or "cuda[:i]"
    precision: str  # "fp32", "fp16" or "bf16" (tensors.PRECISIONS)
    filename: str = "<candidate>"  # the pseudo file name of its tracebacks
    seed: int = 42  # the seed ModelNew is constructed under (the reference's Model is built under the same)


@dataclasses.dataclass(frozen=True)
class BuildJob(_Wire):
    """A CUDA candidate to load once, with no GPU work, so its extension lands in the build cache."""

    source: str  # the candidate's source
    filename: str = "<candidate>"  # the pseudo file name of its tracebacks


@dataclasses.dataclass(frozen=True)
class ReferenceJob(_Wire):
    """One problem's reference at one precision on one device."""

    source: str  # the problem's source (a Model, get_inputs, get_init_inputs), scaled (problems.scale_source)
    device: str  # "cpu" or "cuda[:i]"
    precision: str  # "fp32", "fp16" or "bf16"
    trials: int  # KernelBench's fixed-seed correctness trials (their seeds: tensors.kernelbench_trial_seeds)
    filename: str = "<problem>"  # the pseudo file name of its tracebacks
    seed: int = 42  # KernelBench's seed of the trial seeds; also the seed of init inputs and the timing pool
    inputs_on_device: bool = True  # build inputs on the device (seeded there); False: on the CPU, as KernelBench does
    cache_bytes: int = 8 << 30  # bytes of trials (inputs and expected outputs) kept; an evicted trial is recomputed
    extra_trials: tuple = ()  # kbstudy's extra trials, each verdict.trials.ExtraTrial.as_dict(): trial, seed, name
    timing_pool_bytes: int = 1 << 30  # the timing pool's cap (timing.pool_size)
    reuse_trial: int | None = None  # the storage-reuse trial: keeps some of the trial before's elements (fresh_inputs)


_JOBS = {"worker": CandidateJob, "build": BuildJob, "reference": ReferenceJob}


@dataclasses.dataclass(frozen=True)
class AssignRole:
    """The message that gives an idle child its role (or ends it: ``exit``, with no job)."""

    role: str  # "worker" (a candidate), "build", "reference" or "exit"
    env: dict = dataclasses.field(default_factory=dict)  # environment set before the job: {name: value, or None to unset}
    job: CandidateJob | BuildJob | ReferenceJob | None = None  # the role's job (None for "exit")

    def to_wire(self) -> dict:
        return {"role": self.role, "env": self.env, "job": None if self.job is None else self.job.to_wire()}

    @classmethod
    def from_wire(cls, wire: dict) -> AssignRole:
        role, job = wire["role"], wire.get("job")
        return cls(role, wire.get("env") or {}, _JOBS[role].from_wire(job) if job is not None else None)


@dataclasses.dataclass(frozen=True)
class ExitReport:
    """A child's last message, whatever ended its role (``child/bootstrap.py``): the processes left behind that it
    killed, and what it wrote to stdout and stderr (``kbstudy.harness.capture``). Read by ``Child.close``; where a
    reply was expected it means the child ended without replying. Its wire form is ``{"exit_report": {...}}``."""

    escaped_processes: int = 0  # descendants alive when the role ended, all killed (containment.kill_descendants)
    output: dict | None = None  # {"bytes": n, "head": text, "tail": text} (capture.OutputCapture.finish), None if none

    def to_wire(self) -> dict:
        return {"exit_report": {"escaped_processes": self.escaped_processes, "output": self.output}}

    @staticmethod
    def of(message: Any) -> ExitReport | None:
        """The exit report a message is, or ``None`` for any other message. What a candidate may have forged into its
        process's connection is checked: a count that is not an int counts 0, an output not of the form above is
        dropped."""
        if not isinstance(message, dict) or "exit_report" not in message:
            return None
        wire = message["exit_report"] if isinstance(message["exit_report"], dict) else {}
        escaped = wire.get("escaped_processes")
        output = wire.get("output")
        well_formed = isinstance(output, dict) and isinstance(output.get("bytes"), int) and \
            isinstance(output.get("head"), str) and isinstance(output.get("tail"), str)
        return ExitReport(escaped if isinstance(escaped, int) and not isinstance(escaped, bool) else 0,
                          {k: output[k] for k in ("bytes", "head", "tail")} if well_formed else None)


# ------------------------------------------------------------------------------------------------ candidate requests


@dataclasses.dataclass(frozen=True)
class Construct(_Wire):
    """Construct ``ModelNew(*init_inputs)`` on the device at the run's precision."""

    OP: ClassVar[str] = "construct"
    init_inputs: list  # the problem's get_init_inputs(), from the reference process (plain values, no tensors shared)
    # a structural variant's model is kept for that variant's trial; a failure is reported and the process serves on
    variant: str | None = None  # verdict.trials.STRUCTURAL_VARIANTS name; None: the candidate's model
    source: str | None = None  # a shape variant: the candidate's source at the variant's sizes (None: the same class)
    parameters: dict | None = None  # params_random: {"spec": variant_inputs.parameter_spec of Model, "seed": int}


@dataclasses.dataclass(frozen=True)
class Run(_Wire):
    """One correctness trial; the inputs' packet follows this message."""

    OP: ClassVar[str] = "run"
    trial: int  # trial index: KernelBench's trials first, then kbstudy's extra trials (verdict.trials)
    seed: int  # the seed set right before the call (the reference's expected outputs were made under the same)
    sentinel: Sentinel = "nan"  # what fresh memory holds during the call: "nan", or the second sentinel (a float)
    reuse_inputs: bool = False  # run on the previous trial's input tensors (same storage, new values): storage reuse
    output_bytes: int = 0  # bytes of the reference's outputs (sizes the poisoned allocator blocks on a GPU)
    survive: bool = False  # an extra trial: a Python exception is reported and the process serves on
    variant: str | None = None  # run the model constructed for this structural variant (Construct.variant)
    layout: str | None = None  # a layout variant: the inputs relaid (variant_inputs.relayout) before the call


@dataclasses.dataclass(frozen=True)
class Release(_Wire):
    """The outputs of the last trial (or the kept timed outputs) are judged: drop them."""

    OP: ClassVar[str] = "release"


@dataclasses.dataclass(frozen=True)
class TimeCandidate(_Wire):
    """Time the candidate over the timing pool (timing.time_pool); the pool's packet follows this message."""

    OP: ClassVar[str] = "time"
    timing: dict  # time_pool's budget: warmup_ms, budget_ms, min_reps, max_reps (EvalConfig.timing)
    host_check: bool = False  # GPU: the host-synchronised cross-check of the event timing
    device_time: bool = False  # GPU: the device time after the timed calls (timing.time_device)


@dataclasses.dataclass(frozen=True)
class Profile(_Wire):
    """One profiled call on the last timing inputs (GPU), for the share of device time in custom kernels."""

    OP: ClassVar[str] = "profile"


@dataclasses.dataclass(frozen=True)
class Exit(_Wire):
    """End the process."""

    OP: ClassVar[str] = "exit"


_CANDIDATE_REQUESTS = {cls.OP: cls for cls in (Construct, Run, Release, TimeCandidate, Profile, Exit)}


def candidate_request(wire: dict) -> Construct | Run | Release | TimeCandidate | Profile | Exit:
    """The typed form of a request to a candidate process. Raises ``KeyError`` for an unknown ``op``."""
    return _CANDIDATE_REQUESTS[wire["op"]].from_wire(wire)


# ------------------------------------------------------------------------------------------------ candidate replies


@dataclasses.dataclass(frozen=True)
class Stage(_Wire):
    """A step done: ``loaded`` (the source ran and defines ModelNew) or ``constructed``."""

    stage: str  # "loaded" or "constructed"
    not_applicable: str | None = None  # a structural variant's model: why the variant does not apply (no match)


@dataclasses.dataclass(frozen=True)
class Failure(_Wire):
    """A candidate's failure at a stage: what its record's outcome and error message become."""

    failure: str  # the outcome (records.outcomes.Outcome value), from failures.classify_exception
    error: str  # "Type: message", truncated (failures.error_text)
    stage: str  # "load", "construct" or "run"

    @staticmethod
    def of(reply: dict) -> Failure | None:
        """The failure a reply reports, or ``None`` for any other reply."""
        return Failure.from_wire(reply) if "failure" in reply else None


@dataclasses.dataclass(frozen=True)
class TimingReply(_Wire):
    """A candidate's timing (the packet of its sampled timed outputs follows)."""

    samples: list  # per-call times of the timed calls, ms (event timing on a GPU, perf_counter on a CPU)
    pool_size: int  # input sets in the timing pool
    host_ms: float | None = None  # GPU: per-call time of the fastest host-synchronised block, ms
    host_calls: int | None = None  # GPU: calls in each host-synchronised block
    device_samples: list | None = None  # GPU: device time per call, ms (timing.time_device), None when not measured
    device_host_overran: int | None = None  # device-time calls whose host work outlasted the spin
    device_spin_us: float | None = None  # the spin before each device-time call, us
    device_flush: str | None = None  # the device time's L2 flush ("read" or "write", timing.l2_flusher)
    autotuned: dict = dataclasses.field(default_factory=dict)  # Triton autotuners' choices (child/autotune.py)


@dataclasses.dataclass(frozen=True)
class ProfileReply(_Wire):
    """The kernels of one profiled call, or why there are none (the verdicts stand either way)."""

    kernels: list | None = None  # [[kernel name, device us], ...] (kernel_profile.profile_steps)
    profile_error: str | None = None  # e.g. CUPTI unavailable

    def to_wire(self) -> dict:
        return {"profile_error": self.profile_error} if self.profile_error is not None else {"kernels": self.kernels}


@dataclasses.dataclass(frozen=True)
class BuildResult(_Wire):
    """What a build process did. Never final: a failed build is loaded again by the candidate process, which records
    the real error."""

    built: bool  # the source loaded and defines ModelNew
    error: str | None = None  # why not
    seconds: float | None = None  # wall time of the load (the build), s
    category: str | None = None  # the failure's outcome where the load raised (failures.classify_exception)


# ------------------------------------------------------------------------------------------------ reference requests


@dataclasses.dataclass(frozen=True)
class InitInputs(_Wire):
    """The problem's ``get_init_inputs()`` (reply: ``{"init_inputs": [...]}``)."""

    OP: ClassVar[str] = "init_inputs"
    trial: int | None = None  # a shape variant's trial: the init inputs at its sizes


@dataclasses.dataclass(frozen=True)
class Inputs(_Wire):
    """A trial's inputs as a packet (or an error packet)."""

    OP: ClassVar[str] = "inputs"
    trial: Any  # a trial index, or "timing_pool" (the packet holds {"pool": [input sets], "seeds": [...]})


@dataclasses.dataclass(frozen=True)
class Verify(_Wire):
    """Judge a trial's outputs (their packet follows): both verdicts and the integrity checks."""

    OP: ClassVar[str] = "verify"
    trial: int  # the trial index
    sentinel: Sentinel = "nan"  # what fresh memory held during the call (the verdict looks for it in the outputs)
    kernelbench: bool = True  # also KernelBench's check (False on kbstudy's extra trials)


@dataclasses.dataclass(frozen=True)
class VerifyTiming(_Wire):
    """Judge the sampled timed outputs (their packet follows)."""

    OP: ClassVar[str] = "verify_timing"
    check: str  # "kbstudy" or "kernelbench": the check the candidate's verdict rests on


@dataclasses.dataclass(frozen=True)
class TimeBaselines(_Wire):
    """Time the reference in eager mode and under ``torch.compile`` over the timing pool."""

    OP: ClassVar[str] = "time"
    eager: bool = True  # time the eager baseline
    compile: bool = False  # time the torch.compile baseline
    timing: dict = dataclasses.field(default_factory=dict)  # time_pool's budget (EvalConfig.timing)


@dataclasses.dataclass(frozen=True)
class Close(_Wire):
    """End the reference process."""

    OP: ClassVar[str] = "close"


_REFERENCE_REQUESTS = {cls.OP: cls for cls in (InitInputs, Inputs, Verify, VerifyTiming, TimeBaselines, Close)}


def reference_request(wire: dict) -> InitInputs | Inputs | Verify | VerifyTiming | TimeBaselines | Close | None:
    """The typed form of a request to the reference process; ``None`` for an unknown ``op``."""
    cls = _REFERENCE_REQUESTS.get(wire.get("op"))
    return None if cls is None else cls.from_wire(wire)


@dataclasses.dataclass(frozen=True)
class ErrorReply(_Wire):
    """The reference process could not do what was asked (it serves on, except while setting up)."""

    error: str  # "Type: message" (failures.error_text)
    category: str | None = None  # the outcome the exception maps to (failures.classify_exception)
