"""Timing: CUDA events with the L2 cache cleared between calls on a GPU, a monotonic clock on a CPU, and statistics.

GPU method (after KernelBench ``src/kernelbench/timing.py`` ``time_execution_with_cuda_event``, with its known gaps
closed): warm-up calls until ``warmup_ms`` of work (at least ``min_warmup`` calls); then each timed call is preceded by
a device synchronisation and a write of a buffer twice the size of the L2 cache (at least 256 MiB, KernelBench's size)
so no call finds its operands in L2; CUDA events are recorded on the current stream around the call alone; the device
is synchronised before the elapsed time is read. The number of timed calls adapts to the call's duration: as many as
fit in ``budget_ms`` of work, clamped to [``min_reps``, ``max_reps``].

CPU method: the same loop with ``time.perf_counter_ns`` around the call; no cache clearing (records say so through
``timing_method = "cpu_perf_counter"``).

Statistics: median with its distribution-free 95% confidence interval (order statistics of the binomial(n, 1/2)
distribution, e.g. Conover, *Practical Nonparametric Statistics*, 3rd ed., §3.2), first and third quartiles, mean,
standard deviation, min and max, all in milliseconds.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from typing import Callable

#: KernelBench's L2 flush size (``clear_l2_cache`` fills a 256 MiB int64 tensor); we use max(this, 2 x L2 size).
MIN_FLUSH_BYTES = 256 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class TimingStats:
    """Summary of timed calls, in milliseconds; ``n`` is the number of timed calls."""

    median: float
    q1: float
    q3: float
    mean: float
    std: float
    min: float
    max: float
    ci_low: float
    ci_high: float
    n: int

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    def as_fields(self, prefix: str) -> dict[str, float | int]:
        """The stats as record fields ``{prefix}_ms_median`` ... and ``{prefix}_timing_trials``."""
        fields = {f"{prefix}_ms_{k}": getattr(self, k) for k in
                  ("median", "q1", "q3", "mean", "std", "min", "max", "ci_low", "ci_high")}
        fields[f"{prefix}_timing_trials"] = self.n
        return fields


def median_ci_indices(n: int, confidence: float = 0.95) -> tuple[int, int]:
    """0-based order-statistic indices (lo, hi) bracketing the median with at least ``confidence`` coverage.

    Uses the binomial(n, 1/2) distribution of the number of samples below the median. For n < 6 no pair reaches 95%;
    the full range (0, n-1) is returned. Raises ``ValueError`` for n < 1.
    """
    if n < 1:
        raise ValueError("need at least one sample")
    alpha = 1 - confidence
    # largest k with P(Binom(n, .5) <= k-1) <= alpha/2; the interval is [x_(k), x_(n-k+1)] (1-based)
    cdf = 0.0
    k = 0
    for j in range(n + 1):
        p = math.comb(n, j) / 2**n
        if cdf + p > alpha / 2:
            break
        cdf += p
        k = j + 1
    if k == 0:
        return 0, n - 1
    return k - 1, n - k


def summarize(samples_ms: list[float]) -> TimingStats:
    """Statistics of timed calls (ms). Raises ``ValueError`` on an empty list."""
    if not samples_ms:
        raise ValueError("no timing samples")
    xs = sorted(float(x) for x in samples_ms)
    n = len(xs)
    if n >= 2:
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    else:
        q1 = q3 = xs[0]
    lo, hi = median_ci_indices(n)
    return TimingStats(median=statistics.median(xs), q1=q1, q3=q3, mean=statistics.fmean(xs),
                       std=statistics.stdev(xs) if n >= 2 else 0.0, min=xs[0], max=xs[-1], ci_low=xs[lo],
                       ci_high=xs[hi], n=n)


def _flush_buffer(device):
    import torch

    props = torch.cuda.get_device_properties(device)
    l2 = getattr(props, "L2_cache_size", 0) or 0
    nbytes = max(MIN_FLUSH_BYTES, 2 * l2)
    return torch.empty(nbytes // 8, dtype=torch.int64, device=device)


def time_callable(fn: Callable[[], object], *, device: str, warmup_ms: float = 25.0, min_warmup: int = 3,
                  budget_ms: float = 1000.0, min_reps: int = 10, max_reps: int = 100,
                  clear_l2: bool = True) -> list[float]:
    """Time ``fn()`` repeatedly; returns the per-call times in ms (see the module docstring for the method).

    Args:
        fn: the call to time, with its inputs already bound; its result is discarded.
        device: ``"cuda"``/``"cuda:N"`` for CUDA-event timing, ``"cpu"`` for the monotonic clock.
        warmup_ms, min_warmup: warm up for at least this much work and this many calls.
        budget_ms, min_reps, max_reps: the timed calls to aim for (work budget) and their bounds.
        clear_l2: on a GPU, write a 2 x L2 buffer before each timed call.

    Raises whatever ``fn`` raises (the caller classifies it).
    """
    if device.startswith("cuda"):
        return _time_cuda(fn, device=device, warmup_ms=warmup_ms, min_warmup=min_warmup, budget_ms=budget_ms,
                          min_reps=min_reps, max_reps=max_reps, clear_l2=clear_l2)
    return _time_cpu(fn, warmup_ms=warmup_ms, min_warmup=min_warmup, budget_ms=budget_ms, min_reps=min_reps,
                     max_reps=max_reps)


def _reps_for(per_call_ms: float, budget_ms: float, min_reps: int, max_reps: int) -> int:
    if per_call_ms <= 0:
        return max_reps
    return int(min(max_reps, max(min_reps, budget_ms // per_call_ms)))


def _time_cpu(fn, *, warmup_ms, min_warmup, budget_ms, min_reps, max_reps) -> list[float]:
    start = time.perf_counter_ns()
    calls, last = 0, 0.0
    while calls < min_warmup or (time.perf_counter_ns() - start) / 1e6 < warmup_ms:
        t0 = time.perf_counter_ns()
        fn()
        last = (time.perf_counter_ns() - t0) / 1e6
        calls += 1
    per_call = last  # the first calls include one-time work
    samples = []
    for _ in range(_reps_for(per_call, budget_ms, min_reps, max_reps)):
        t0 = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - t0) / 1e6)
    return samples


def _time_cuda(fn, *, device, warmup_ms, min_warmup, budget_ms, min_reps, max_reps, clear_l2) -> list[float]:
    import torch

    flush = _flush_buffer(device) if clear_l2 else None
    stream = torch.cuda.current_stream(device)
    torch.cuda.synchronize(device)
    # warm-up, measured coarsely to size the timed loop
    start_evt, end_evt = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    calls, spent, last = 0, 0.0, 0.0
    while calls < min_warmup or spent < warmup_ms:
        start_evt.record(stream)
        fn()
        end_evt.record(stream)
        torch.cuda.synchronize(device)
        last = start_evt.elapsed_time(end_evt)
        spent += last
        calls += 1
    # size the loop from the last warm-up call: the first ones include one-time work (torch.compile, autotuning)
    reps = _reps_for(last, budget_ms, min_reps, max_reps)
    samples = []
    for _ in range(reps):
        if flush is not None:
            flush.zero_()
        torch.cuda.synchronize(device)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(stream)
        fn()
        e.record(stream)
        torch.cuda.synchronize(device)
        samples.append(s.elapsed_time(e))
    del flush
    return samples
