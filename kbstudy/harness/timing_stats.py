"""Statistics and decisions over timed samples (ms): summaries of a timing run, the host cross-check's discrepancy, and
the significance of a speedup. Pure functions of the samples (numpy for the bootstrap), so the analyses can use them
without torch.

Summaries (:func:`summarize`): median with its distribution-free 95% confidence interval (order statistics of the
binomial(n, 1/2) distribution, e.g. Conover, *Practical Nonparametric Statistics*, 3rd ed., §3.2), first and third
quartiles, mean, standard deviation, min and max, all in milliseconds.

**Significance of a speedup** (:func:`speedup_interval`): a two-sample percentile bootstrap of the ratio of medians
(Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13 (percentile intervals) and ch. 8 (two-sample
problems)): each sample set is resampled with replacement, independently, ``SPEEDUP_BOOTSTRAP_RESAMPLES`` times;
the 95% interval of baseline median / candidate median is the 2.5th to 97.5th percentile of the resampled ratios.
A speedup is *statistically distinguishable from 1* when that interval excludes 1. numpy only (the GPU image has no
scipy); the generator is seeded, so a record's interval is reproducible from its samples. The interval covers the
sampling noise within the two timing runs, not drift between them (they run at different times, in different
processes).
"""

from __future__ import annotations

import dataclasses
import math
import statistics

import numpy as np

#: ``timing_discrepancy`` threshold: host per-call time > RATIO x event median + ABS_MS. Why these values: for an
#: honest call the host time (``kbstudy.harness.timing.host_time``: each call from an idle device, less the same
#: synchronisations and input preparation without the call) is at most the event median (nothing flushes the L2
#: before it, and everything the call does on the host already lies inside its event window, since the GPU waits
#: for it), so its ratio sits at or below ~1.1 (clock and thermal jitter). ``ABS_MS`` = 20 us covers what the host
#: time has and the events lack: the difference of two synchronisation latencies and the Python loop and
#: ``perf_counter`` calls, which matter only when the event median is a few microseconds. Work left on
#: another stream is paid in the host time alone, so the ratio is (visible + hidden) / visible: the check flags hidden
#: work of more than half the measured time (a speedup inflated by more than 1.5x), and any hidden work above 20 us
#: when the visible part is nearly nothing.
DISCREPANCY_RATIO = 1.5

DISCREPANCY_ABS_MS = 0.02

#: Significance of a speedup (:func:`speedup_interval`): confidence, resamples, generator seed, and the fewest timed
#: calls per side for the test to be made (below it the percentile interval of a median is meaningless).
SPEEDUP_CONFIDENCE = 0.95

SPEEDUP_BOOTSTRAP_RESAMPLES = 2000

SPEEDUP_BOOTSTRAP_SEED = 0

SPEEDUP_MIN_SAMPLES = 5


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


def timing_discrepancy(event_median_ms: float | None, host_ms: float | None, *, ratio: float = DISCREPANCY_RATIO,
                       abs_ms: float = DISCREPANCY_ABS_MS) -> bool | None:
    """Is the event timing implausibly fast next to the host-synchronised time (work hidden on another stream)?

    ``True`` iff ``host_ms > ratio * event_median_ms + abs_ms`` (both per call, ms; thresholds and their reasons at
    :data:`DISCREPANCY_RATIO`). ``None`` when either time is missing or not finite (e.g. on a CPU, where the check
    does not apply). Raises ``ValueError`` for a negative time.
    """
    if event_median_ms is None or host_ms is None:
        return None
    if not (math.isfinite(event_median_ms) and math.isfinite(host_ms)):
        return None
    if event_median_ms < 0 or host_ms < 0:
        raise ValueError("times must be non-negative")
    return bool(host_ms > ratio * event_median_ms + abs_ms)


def speedup_interval(baseline_ms, candidate_ms, *, confidence: float = SPEEDUP_CONFIDENCE,
                     resamples: int = SPEEDUP_BOOTSTRAP_RESAMPLES, seed: int = SPEEDUP_BOOTSTRAP_SEED,
                     min_samples: int = SPEEDUP_MIN_SAMPLES) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of the speedup median(baseline) / median(candidate) (module docstring).

    Args:
        baseline_ms, candidate_ms: per-call times (ms) of the baseline and the candidate; non-finite or non-positive
            values are dropped.
        confidence: two-sided coverage of the interval (0.95).
        resamples: bootstrap resamples per side.
        seed: seed of numpy's generator (the interval is a function of the samples).
        min_samples: fewest samples per side; fewer gives ``None``.
    Returns ``(low, high)`` (dimensionless) or ``None`` when either side has too few samples. Raises ``ValueError``
    for a confidence outside (0, 1) or fewer than 100 resamples.
    """
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    if resamples < 100:
        raise ValueError("need at least 100 resamples")
    b = np.asarray([x for x in (baseline_ms or []) if x is not None], dtype=float)
    c = np.asarray([x for x in (candidate_ms or []) if x is not None], dtype=float)
    b = b[np.isfinite(b) & (b > 0)]
    c = c[np.isfinite(c) & (c > 0)]
    if len(b) < min_samples or len(c) < min_samples:
        return None
    rng = np.random.default_rng(seed)
    b_med = np.median(b[rng.integers(0, len(b), size=(resamples, len(b)))], axis=1)
    c_med = np.median(c[rng.integers(0, len(c), size=(resamples, len(c)))], axis=1)
    alpha = 1.0 - confidence
    low, high = np.quantile(b_med / c_med, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def speedup_significant(interval: tuple[float, float] | None, speedup: float | None = None) -> bool | None:
    """The speedup is statistically distinguishable from 1: its interval (:func:`speedup_interval`) excludes 1, on the
    side of the point estimate ``speedup`` if one is given. ``None`` when there is no interval."""
    if interval is None:
        return None
    low, high = interval
    if speedup is not None and math.isfinite(speedup):
        return bool(low > 1.0) if speedup > 1.0 else bool(high < 1.0)
    return bool(low > 1.0 or high < 1.0)
