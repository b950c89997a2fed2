"""Timing statistics against hand computations, and the CPU timing loop."""

from __future__ import annotations

import math
import random
import statistics
import time

import pytest
import torch

from kbstudy.harness.timing import (
    HOST_BLOCK_CALLS,
    HOST_BLOCKS,
    SLOW_CALL_MS,
    SLOW_CALL_REPS,
    host_block_calls,
    host_time,
    time_callable,
)
from kbstudy.harness.timing_stats import TimingStats, median_ci_indices, summarize


def _binomial_ci_indices(n: int) -> tuple[int, int]:
    """Independent computation: the largest k with P(Binom(n, 1/2) < k) <= 2.5%; interval [x_(k), x_(n+1-k)]
    (1-based order statistics), returned 0-based."""
    k = 0
    while sum(math.comb(n, j) for j in range(k + 1)) / 2**n <= 0.025:
        k += 1
    return (k - 1, n - k) if k else (0, n - 1)


def test_median_ci_indices_by_hand():
    # n = 10: P(X <= 1) = 11/1024 = 0.0107 <= 0.025 < P(X <= 2) = 56/1024, so [x_(2), x_(9)]
    assert median_ci_indices(10) == (1, 8)
    # n = 100: the textbook interval [x_(40), x_(61)]
    assert median_ci_indices(100) == (39, 60)
    for n in (6, 7, 8, 9, 17, 20, 33, 50, 99, 250):
        assert median_ci_indices(n) == _binomial_ci_indices(n), n
    # below 6 samples no interval reaches 95%: the whole range
    for n in range(1, 6):
        assert median_ci_indices(n) == (0, n - 1)
    assert median_ci_indices(6) == (0, 5)
    with pytest.raises(ValueError):
        median_ci_indices(0)


def test_median_ci_coverage_at_least_95_percent():
    for n in (10, 30, 100):
        lo, hi = median_ci_indices(n)
        # coverage of [x_(lo+1), x_(hi+1)] = P(lo + 1 <= X <= hi) for X ~ Binom(n, 1/2)
        coverage = sum(math.comb(n, j) for j in range(lo + 1, hi + 1)) / 2**n
        assert coverage >= 0.95
        # and it is the tightest such symmetric interval
        tighter = sum(math.comb(n, j) for j in range(lo + 2, hi)) / 2**n
        assert tighter < 0.95


def test_summarize_ten_samples():
    samples = [float(x) for x in range(1, 11)]
    random.Random(0).shuffle(samples)
    stats = summarize(samples)
    assert stats.n == 10
    assert stats.median == 5.5
    # inclusive quartiles: position (n - 1) p = 2.25 and 6.75 in the sorted samples
    assert stats.q1 == pytest.approx(3.25) and stats.q3 == pytest.approx(7.75)
    assert stats.iqr == pytest.approx(4.5)
    assert stats.mean == 5.5
    assert stats.std == pytest.approx(math.sqrt(sum((x - 5.5) ** 2 for x in range(1, 11)) / 9))
    assert (stats.min, stats.max) == (1.0, 10.0)
    assert (stats.ci_low, stats.ci_high) == (2.0, 9.0)  # 0-based order statistics 1 and 8


def test_summarize_hundred_samples():
    samples = [0.5 + 0.01 * i for i in range(100)]
    shuffled = samples[:]
    random.Random(1).shuffle(shuffled)
    stats = summarize(shuffled)
    assert stats.n == 100
    assert stats.median == pytest.approx((samples[49] + samples[50]) / 2)
    assert (stats.ci_low, stats.ci_high) == (samples[39], samples[60])
    assert stats.q1 == pytest.approx(samples[24] + 0.75 * (samples[25] - samples[24]))
    assert stats.std == pytest.approx(statistics.stdev(samples))


def test_summarize_edge_cases():
    one = summarize([2.5])
    assert (one.median, one.q1, one.q3, one.min, one.max, one.ci_low, one.ci_high, one.std, one.n) == \
        (2.5, 2.5, 2.5, 2.5, 2.5, 2.5, 2.5, 0.0, 1)
    with pytest.raises(ValueError):
        summarize([])
    fields = summarize([1.0, 2.0, 3.0]).as_fields("candidate")
    assert fields["candidate_ms_median"] == 2.0 and fields["candidate_timing_trials"] == 3
    assert set(fields) == {f"candidate_ms_{k}" for k in
                           ("median", "q1", "q3", "mean", "std", "min", "max", "ci_low", "ci_high")} | \
        {"candidate_timing_trials"}
    assert isinstance(summarize([1.0, 2.0]), TimingStats)


def test_time_callable_cpu_reps_within_bounds():
    calls = []

    def work():
        calls.append(1)
        time.sleep(0.001)

    samples = time_callable(work, device="cpu", warmup_ms=2, min_warmup=3, budget_ms=20, min_reps=3, max_reps=7)
    assert 3 <= len(samples) <= 7
    assert all(s > 0 for s in samples)
    assert all(s >= 0.9 for s in samples)  # each call sleeps 1 ms
    assert len(calls) >= len(samples) + 3  # warm-up calls happen first


def test_time_callable_cpu_clamps():
    slow = time_callable(lambda: time.sleep(0.01), device="cpu", warmup_ms=0, min_warmup=1, budget_ms=5,
                         min_reps=3, max_reps=50)
    assert len(slow) == 3  # the budget buys < 1 call: min_reps
    fast = time_callable(lambda: sum(range(100)), device="cpu", warmup_ms=1, min_warmup=3, budget_ms=1000, min_reps=3,
                         max_reps=9)
    assert len(fast) == 9  # the budget buys millions of calls: max_reps
    assert all(s > 0 for s in fast)


def test_a_call_slower_than_slow_call_ms_gets_two_warmup_calls_and_few_timed_calls():
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.01)

    samples = time_callable(slow, device="cpu", warmup_ms=100, min_warmup=3, budget_ms=1000, min_reps=10,
                            max_reps=100, slow_call_ms=5)
    assert len(samples) == SLOW_CALL_REPS == 5 and len(calls) == 2 + SLOW_CALL_REPS
    # a slow first call only (torch.compile compiling in it) is warm-up as usual: the calls after it are fast
    calls.clear()

    def compiles_first():
        calls.append(1)
        time.sleep(0.02 if len(calls) == 1 else 0.0005)

    samples = time_callable(compiles_first, device="cpu", warmup_ms=0, min_warmup=3, budget_ms=1000, min_reps=10,
                            max_reps=20, slow_call_ms=5)
    assert len(samples) == 20 and len(calls) == 3 + 20
    # the same call under the default bound (1 s) is timed as before: warm-up to 100 ms, then budget / per-call
    calls.clear()
    samples = time_callable(slow, device="cpu", warmup_ms=100, min_warmup=3, budget_ms=200, min_reps=10,
                            max_reps=100)
    assert 10 <= len(samples) <= 20 and len(calls) >= len(samples) + 9


def test_time_callable_propagates_errors():
    def boom():
        raise RuntimeError("kbstudy test")

    with pytest.raises(RuntimeError, match="kbstudy test"):
        time_callable(boom, device="cpu", warmup_ms=1, budget_ms=5, min_reps=3, max_reps=5)


def test_host_check_blocks_are_one_call_long_for_a_slow_call():
    """The GPU host cross-check's block length: what the timed loop made per block, clamped to [2, HOST_BLOCK_CALLS];
    one call when the median timed call exceeds SLOW_CALL_MS (claude-3.5-sonnet's 4.2 s scan on current 91, five
    samples: 3 blocks of one call, 12.7 s, where blocks of two would take 25 s)."""
    assert host_block_calls([0.05] * 100) == HOST_BLOCK_CALLS
    assert host_block_calls([0.05] * 12) == 12 // HOST_BLOCKS == 4
    assert host_block_calls([0.05] * 3) == 2
    assert host_block_calls([4233.3] * SLOW_CALL_REPS) == 1
    assert host_block_calls([SLOW_CALL_MS] * 10) == 10 // HOST_BLOCKS  # at the bound, not over it
    assert host_block_calls([20.0] * 10, slow_call_ms=5) == 1
    assert host_block_calls([]) == 2


def test_time_device_refuses_a_cpu():
    """Device time needs a CUDA device (a spin kernel and a device clock): a CPU gets a clear error, not a CPU clock
    under the device-time name, and ``time_pool(device_time=True)`` on a CPU measures no device time."""
    import torch

    from kbstudy.harness import timing

    with pytest.raises(ValueError, match="CUDA"):
        timing.time_device(lambda: None, device="cpu")
    result = timing.time_pool(lambda x: x + 1, [[torch.ones(8)], [torch.zeros(8)]], device="cpu", device_time=True,
                              warmup_ms=0.0, min_warmup=1, budget_ms=1.0, min_reps=2, max_reps=2)
    assert result.device is None and len(result.samples) == 2


def test_l2_flush_modes_are_checked_before_any_device_work():
    """The two L2 flushes are ``"write"`` (the per-call timing's, KernelBench's) and ``"read"`` (the device time's, a
    clean L2); an unknown mode is a clear error from both entry points, before anything touches a GPU."""
    from kbstudy.harness import timing

    assert timing.FLUSH_MODES == ("write", "read") and timing.DEVICE_FLUSH_MODE == "read"
    with pytest.raises(ValueError, match="unknown L2 flush mode 'clean'"):
        timing.l2_flusher("cuda", "clean")
    with pytest.raises(ValueError, match="unknown L2 flush mode"):
        timing.time_device(lambda: None, device="cuda", flush_mode="zero")
    assert timing.DeviceTiming(samples=[0.1], host_overran=0, spin_us=2000.0).flush is None  # no claim of a flush


def test_call_sample_draws_uniformly_without_replacement():
    """``CallSample`` (reservoir sampling): the first ``size`` calls fill the slots; afterwards every call of a
    sequence of any length ends up drawn with probability ``size / length`` (checked over 20,000 seeded sequences of
    20 calls: each call's frequency within 0.02 of 3/20), the slots always hold distinct calls, and a size below 1
    is an error."""
    import random

    from kbstudy.harness.timing import CallSample

    rng = random.Random(0)
    counts = [0] * 20
    for _ in range(20_000):
        pick = CallSample(3, rng=rng)
        for j in range(20):
            slot = pick.offer(j)
            if slot is not None:
                pick.kept[slot] = j
        assert len(pick.kept) == 3 and len(set(pick.kept.values())) == 3
        for j in pick.kept.values():
            counts[j] += 1
    assert all(abs(c / 20_000 - 3 / 20) < 0.02 for c in counts), counts
    short = CallSample(3, rng=rng)
    assert [short.offer(j) for j in range(2)] == [0, 1]  # fewer calls than slots: all of them, in order
    assert CallSample().size == 1
    with pytest.raises(ValueError):
        CallSample(0)


def test_device_time_fields_are_the_samples_statistics():
    """The record fields of a device-time measurement: median and quartiles of the samples (ms), the samples as
    floats in call order; an empty measurement is an error, not a record of zeros."""
    from kbstudy.harness.assemble import device_time_fields

    samples = [0.05, 0.01, 0.03, 0.02, 0.04]
    fields = device_time_fields(samples)
    assert fields["candidate_device_ms_median"] == pytest.approx(0.03)
    assert fields["candidate_device_ms_q1"] == pytest.approx(0.02)
    assert fields["candidate_device_ms_q3"] == pytest.approx(0.04)
    assert fields["candidate_device_ms_samples"] == samples
    with pytest.raises(ValueError):
        device_time_fields([])


def test_host_time_is_the_calls_own_time_on_fresh_values(monkeypatch):
    """``host_time`` (the host-synchronised cross-check, GPU): every call gets its own preparation (a new global
    call index: fresh values), and the preparation's time is taken out. Run on the host with the device
    synchronisation made a no-op: a 6 ms call after a 3 ms preparation measures about 6 ms."""
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    prepared, called = [], []

    def prepare(g):
        prepared.append(g)
        time.sleep(0.003)
        return [g]

    def fn(g):
        called.append(g)
        time.sleep(0.006)

    ms = host_time(fn, prepare, 40, device="cuda", calls=2)
    assert prepared == list(range(40, 40 + 2 * 2 * HOST_BLOCKS))  # blocks with and without the calls
    assert len(called) == 2 * HOST_BLOCKS == len(set(called))  # each call on values of its own
    assert 5.0 < ms < 12.0, ms
