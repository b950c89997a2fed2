"""The settings of an evaluation batch (:class:`EvalConfig`), the device it runs on (:func:`resolve_device`, the one
device resolution of the project) and the hardware label its records carry (:func:`hardware_label`)."""

from __future__ import annotations

import dataclasses
import subprocess

import torch

from kbstudy.records import provenance
from kbstudy.verdict.checks import CHECKS_VERSION, KERNELBENCH_TRIALS
from kbstudy.verdict.trials import STRUCTURAL_VARIANTS, VARIANTS


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
    # the structural variants (kbstudy.verdict.trials.STRUCTURAL_VARIANTS: other sizes, layouts and parameter values),
    # one trial each after the value variants, where they apply
    structural_variants: tuple = STRUCTURAL_VARIANTS
    # verdicts only: no candidate timing and no eager or torch.compile baselines (records carry no times, so no
    # speedup); keyed apart from timed records (settings_key)
    correctness_only: bool = False
    # seeds of the extra trials, in order (fresh ones, then one per variant, then one per structural variant); None: drawn per batch (secrets). Every
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
    # (kbstudy.verdict.static_scan.scan_dtype_support) as skipped, reason float32_only, instead of running it to a dtype error
    skip_float32_only: bool = False
    # outcomes whose records are evaluated again instead of counting as done (e.g. ("out_of_memory", "crashed") after
    # a run that shared its GPU with other work); the new record is appended, the old one stays in the JSONL history
    # and the latest record per identity is the one read (kbstudy.records.store.RecordStore.evaluations)
    retry_outcomes: tuple = ()
    # problems in flight at once (kbstudy.harness.gpu_lock): their untimed work (reference set-up, candidates' loads
    # and correctness trials) overlaps, timing and the baselines hold the device alone; 1: one problem at a time.
    # Not part of settings_key(): it changes no measured number (tests/integration/test_concurrency.py)
    concurrency: int = 1

    def __post_init__(self):
        if self.correctness_only:
            self.time_candidates = self.eager_baseline = self.compile_baseline = False

    def settings_key(self) -> str:
        """The settings that change what a record means (part of its key): trials, seed, input placement, and the
        verifier's checks (a record made without the second sentinel, the storage-reuse trial, the extra trials or
        the timing pool is a different evaluation, so a rerun with them on evaluates again rather than reusing it).
        ``checks=v3``: extra trials, timing pool with checked outputs, host cross-check, significance of speedups.
        ``checks=v4``: kbstudy's accuracy verdict of ``docs/reference/verifier.md`` (three metrics, each bound
        ``max(T, REFERENCE_FACTOR * e_ref)`` with the reference's own error on the same input set; problem flags on
        the reference record). The extra trials' seeds are not part of it (they are drawn per run; records list
        them). The structural variants and ``correctness_only`` are appended only where set, so the keys of records
        made without them keep their strings."""
        return (f"trials={self.trials};seed={self.seed};inputs_on_device={self.inputs_on_device};"
                f"checks={CHECKS_VERSION};second_sentinel={self.second_sentinel};storage_reuse_trial={self.storage_reuse_trial};"
                f"fresh_trials={self.fresh_trials};variants={','.join(self.variants)};"
                f"timing_pool_bytes={self.timing_pool_bytes}"
                + (f";structural={','.join(self.structural_variants)}" if self.structural_variants else "")
                + (";correctness_only" if self.correctness_only else "")
                + (";skip_float32_only" if self.skip_float32_only else ""))  # keys made without it stay valid


class NoGPUError(RuntimeError):
    """A CUDA device was asked for on a machine where torch sees no GPU."""


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when a GPU is visible, else ``cpu``; ``cuda[:i]`` without a GPU raises
    :class:`NoGPUError`; any other device is returned as given."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise NoGPUError(f"device {device!r} requested, but torch sees no GPU")
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
        return torch.cuda.get_device_name(0)
    return provenance.cpu_name()
