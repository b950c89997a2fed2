"""Timing: CUDA events with the L2 cache cleared between calls on a GPU, a monotonic clock on a CPU (statistics and
the decisions drawn from the samples: ``kbstudy.harness.timing_stats``).

GPU method (after KernelBench ``src/kernelbench/timing.py`` ``time_execution_with_cuda_event``, with its known gaps
closed): warm-up calls until ``warmup_ms`` of work (at least ``min_warmup`` calls); then each timed call is preceded by
a device synchronisation and a write of a buffer twice the size of the L2 cache (at least 256 MiB, KernelBench's size)
so no call finds its operands in L2; CUDA events are recorded on the current stream around the call alone; the device
is synchronised before the elapsed time is read. The number of timed calls adapts to the call's duration: as many as
fit in ``budget_ms`` of work, clamped to [``min_reps``, ``max_reps``]; a call slower than ``SLOW_CALL_MS`` (1 s, no
speedup candidate on any KernelBench level-1 problem) in its second warm-up call gets no more warm-up and
``SLOW_CALL_REPS`` timed calls, so a correct but very slow candidate is timed within its stage timeout instead of
losing its timing (a slow *first* call, such as a compilation, changes nothing).

CPU method: the same loop with ``time.perf_counter_ns`` around the call; no cache clearing (records say so through
``timing_method = "cpu_perf_counter"``).

**Fresh inputs for every timed call** (:func:`time_pool`, anti-caching). KernelBench times every call on one input
set and never looks at the timed outputs, so a candidate that caches its answer (keyed on ``data_ptr``, ``id``, the
shape, a call counter, or the input values themselves) is timed at the cost of a dictionary lookup. Here the caller
supplies a *pool* of distinct input sets (different seeds, see :func:`pool_size` for its memory cap); before every
call -- warm-up and timed alike, so the timed phase cannot be told from the warm-up -- the call's own values are
written into one set of private input buffers (outside the timed region): two pool entries mixed with a weight drawn
for that call (``kbstudy.harness.fresh_inputs``: ``a + t (b - a)``, exact to recompute), and the RNG is seeded with the
entry's seed (so stochastic problems stay checkable). The buffers keep their pointers while their values change, so
a result cached by pointer, object or call count comes back stale, and no call sees values an earlier call saw, so a
memo keyed on the inputs' contents (a hash, or a sample of values) never hits. The outputs of
:data:`TIMED_CHECKED_CALLS` timed calls drawn at random are kept (cloned after the timed region) with their entry and
weight, for the caller to check against the reference's answer for exactly those inputs. The same pool and the same
loop time the reference baselines (``kbstudy.harness.child.reference``), so both sides pay the same per-call
preparation (none of it timed). What this cannot catch: a candidate that skips work in calls not drawn (it escapes
with the probability given at :data:`TIMED_CHECKED_CALLS`).

**Host-synchronised cross-check** (GPU only; ``timing_stats.timing_discrepancy``). CUDA events recorded on the current stream
do not see work a candidate leaves running on another stream when the call returns (KernelBench's
``non_default_stream_kernel``, helion PR #2994). After the event-timed calls, :func:`host_time` times ``HOST_BLOCKS``
blocks of calls with ``time.perf_counter``, each call after a ``torch.cuda.synchronize()`` (which waits for every
stream) and on fresh values, less the same blocks without the calls; the per-call time is compared with the event
median. Fresh values there too: on repeated inputs a memo of contents would make these calls fast while a side
stream hid the timed calls' work from the events.

**Device time** (GPU only; :func:`time_device`). A timed call above holds the host's work until the kernels are enqueued
(Python, argument handling, every launch), because its start event is recorded on an idle GPU; that is the study's
per-call measure, as in KernelBench, and what a speedup compares. A floor (``kbstudy.suites.dlrm_bench.roofline``) bounds the
*device's* work, so a kernel is compared with its floor by its device time: the L2 is flushed by *reading* the flush
buffer (:data:`DEVICE_FLUSH_MODE`, below), then a spin kernel (``torch.cuda._sleep``, PyTorch's own test helper) is
enqueued *before* the start event, so the host enqueues the call's launches while the GPU is still spinning, and the
events see the call's kernels with a cold L2 and none of the host's time. What it keeps: each launch's GPU-side
start-up, idle time between the call's kernels, and any host synchronisation inside the call (the GPU idles until the
host sends the rest). This is the method of ``triton.testing.do_bench`` (L2 flushed, the host's enqueueing overlapped
with the flush) made strict: a spin sized to outlast the host, checked per call (``host_overran`` counts calls whose
host work outlasted it; their samples include host time). Nsight Compute's default ``--cache-control all`` also flushes
caches before each measured kernel. Medians and quartiles over up to :data:`DEVICE_TIME_REPS` calls (fewer, at least
:data:`DEVICE_TIME_MIN_REPS`, for a call over ``DEVICE_TIME_BUDGET_MS / DEVICE_TIME_REPS``); in :func:`time_pool` each
call gets fresh values in the same buffers first (outside the timed region), as the timed calls do, so a
result cached by pointer or version is not timed as a kernel, and the outputs of :data:`DEVICE_TIME_CHECKED_CALLS`
device-time calls drawn at random (:class:`CallSample`) join the checked timed outputs (a candidate that skips work in
these calls is caught unless none of its skipped calls is drawn); a call slower than :data:`SLOW_CALL_MS` gets no device
time. What it cannot see: a candidate that detects the spin (e.g. by querying the stream) and is slower or faster under
it without a wrong answer; the device time feeds no speedup.

**How a flush leaves the L2** (:func:`l2_flusher`). Writing the flush buffer (KernelBench's ``clear_l2_cache``,
``triton.testing.do_bench``'s ``cache.zero_()``) evicts every earlier line but leaves the L2 full of the buffer's
*dirty* lines, and their write-back to DRAM happens while the next, timed call evicts them: the timed call pays for
bytes it never touched, up to an L2's worth whatever it writes itself. Reading the buffer instead (a max-reduction into
one element) writes the previous call's dirty lines back during the flush and leaves only clean lines; the timed call
then pays for no earlier writes, while its own output lines still dirty in the L2 when it ends (at most the smaller of
its output and the L2) are written back after its end event. Neither is a pipeline's steady state; the reading flush
errs low by at most that remainder of the call's own writes, the writing flush high by the foreign write-back. On the
H200 (L2 60 MB) the write-flush added 2.5-8.4 us to the device time of ten of our twelve DLRM-Bench kernels (1.6 and 0.2
us to the compute-bound 10 and 11, nothing to kernel 5, whose host wait hides it) and 2.4-4.4 us to copies of the ten
memory-bound problems' compulsory bytes (31-2059 MB), against the reading flush (``outputs/records/dlrm_bench/h200/flush-states``,
``scripts/bench_l2_flush.py``). The per-call timing keeps the write-flush: it is KernelBench's, a speedup compares two
times that both pay it, and the study's records stay comparable with one another. The device time, which a floor bounds,
uses the reading flush (:data:`DEVICE_FLUSH_MODE`); records say which (``metadata.device_time.flush``; records made
before the key existed lack it and used the write-flush).
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import time
from typing import Callable

import torch

from kbstudy.harness import fresh_inputs
from kbstudy.harness.tensors import flatten_outputs, set_seed
from kbstudy.harness.timing_stats import SPEEDUP_MIN_SAMPLES

#: KernelBench's L2 flush size (``clear_l2_cache`` fills a 256 MiB int64 tensor); we use max(this, 2 x L2 size).
MIN_FLUSH_BYTES = 256 * 1024 * 1024

#: Timing pool: distinct input sets cycled through the timed calls. The pool's inputs may take at most
#: ``TIMING_POOL_BYTES`` (1 GiB: the largest level-1 input set at full size is a few GiB, so such problems get the
#: minimum), but there are always at least ``TIMING_POOL_MIN_SETS`` (2: the fewest that make a stale answer visible)
#: and at most ``TIMING_POOL_MAX_SETS`` (4: each set's outputs are checked twice, and its reference answer computed
#: once, so more sets cost verification time without catching more). See :func:`pool_size`.
TIMING_POOL_BYTES = 1 << 30
TIMING_POOL_MIN_SETS = 2
TIMING_POOL_MAX_SETS = 4
#: Bytes of timed outputs kept for checking (clones): :data:`TIMED_CHECKED_CALLS` calls, fewer (at least one) where
#: their outputs would take more.
CHECK_OUTPUT_BYTES = 2 << 30
#: Timed calls whose outputs :func:`time_pool` keeps for the reference to check, drawn at random (:class:`CallSample`),
#: each on inputs of its own (``kbstudy.harness.fresh_inputs``), so each costs the reference one answer (at the run's
#: precision and in float64). A candidate that skips work in half of its timed calls escapes with probability
#: C(n/2, 3) / C(n, 3) < 1/8.
TIMED_CHECKED_CALLS = 3

#: Host-synchronised cross-check (GPU, :func:`host_time`): blocks of calls, each ``HOST_BLOCK_CALLS`` long at most.
HOST_BLOCKS = 3
HOST_BLOCK_CALLS = 10

#: Device time (:func:`time_device`): timed calls (fewer for a slow call: as many as fit ``DEVICE_TIME_BUDGET_MS``
#: of work, at least ``DEVICE_TIME_MIN_REPS``) and the spin before each, in us. 2 ms outlasts every forward's host
#: time measured on the H200 (at most ~450 us, DLRM-Bench kernel 5 with its host synchronisation:
#: ``outputs/records/dlrm_bench/h200/host-gap/gap``), and costs 20 x 2 ms = 40 ms of GPU time per candidate.
DEVICE_TIME_REPS = 20
DEVICE_TIME_MIN_REPS = 5
DEVICE_TIME_BUDGET_MS = 500.0
DEVICE_SPIN_US = 2000.0
#: Device-time calls whose outputs :func:`time_pool` checks, drawn at random (:class:`CallSample`): to move the
#: median device time a candidate must skip work in more than half of its 20 calls, and with 3 of 20 checked it
#: escapes with probability C(9, 3) / C(20, 3) = 7 % at most (with 1 of 20 checked: 9 / 20 = 45 %).
DEVICE_TIME_CHECKED_CALLS = 3
#: The L2 flush of the device time (:func:`l2_flusher`): ``"read"`` leaves clean lines, so the call pays for no
#: earlier writes (module docstring, "How a flush leaves the L2"). The per-call timing's flush is ``"write"``.
DEVICE_FLUSH_MODE = "read"
FLUSH_MODES = ("write", "read")


#: A call slower than this (ms) is timed with fewer calls: two warm-up calls (a candidate has already run in every
#: correctness trial; the first call of a ``torch.compile`` baseline compiles, so only a slow *second* call counts),
#: ``SLOW_CALL_REPS`` timed calls and host blocks of one call. 1 s is 25x the
#: slowest eager baseline of KernelBench level 1 on the H200 (66_conv_standard_3D v0, 41 ms;
#: outputs/records/kernelbench/h200/leaderboard), so such a call is no speedup candidate; at 10 timed calls, 3 warm-up
#: calls and 9 host-check calls, a 4 s candidate (current 91_cumsum_reverse, claude-3.5-sonnet) ran past the 60 s
#: stage timeout and lost its timing. ``SLOW_CALL_REPS`` keeps the speedup test possible.
SLOW_CALL_MS = 1000.0
SLOW_CALL_REPS = SPEEDUP_MIN_SAMPLES


def flush_buffer(device):
    """A CUDA int64 tensor of max(:data:`MIN_FLUSH_BYTES`, 2 x the device's L2 size) bytes, filled with zeros: writing
    or reading all of it evicts the L2 (:func:`l2_flusher`)."""
    props = torch.cuda.get_device_properties(device)
    l2 = getattr(props, "L2_cache_size", 0) or 0
    nbytes = max(MIN_FLUSH_BYTES, 2 * l2)
    return torch.zeros(nbytes // 8, dtype=torch.int64, device=device)


def l2_flusher(device, mode: str = "write") -> Callable[[], None]:
    """A zero-argument callable that evicts the L2 of CUDA ``device`` by going through a :func:`flush_buffer`
    (enqueued on the current stream; the caller synchronises).

    ``mode``: ``"write"`` zeroes the buffer (KernelBench's ``clear_l2_cache``; the L2 is left full of dirty lines whose
    write-back the next call pays); ``"read"`` reduces it to one preallocated element (``torch.amax``), so the L2 is
    left holding clean lines (module docstring, "How a flush leaves the L2"). Raises ``ValueError`` for another mode.
    """
    if mode not in FLUSH_MODES:
        raise ValueError(f"unknown L2 flush mode {mode!r}; expected one of {FLUSH_MODES}")
    buf = flush_buffer(device)
    if mode == "write":
        return buf.zero_
    sink = torch.empty((), dtype=buf.dtype, device=buf.device)
    return lambda: torch.amax(buf, dim=0, out=sink)


def time_callable(fn: Callable[[], object], *, device: str, warmup_ms: float = 25.0, min_warmup: int = 3,
                  budget_ms: float = 1000.0, min_reps: int = 10, max_reps: int = 100,
                  clear_l2: bool = True, slow_call_ms: float = SLOW_CALL_MS) -> list[float]:
    """Time ``fn()`` repeatedly; returns the per-call times in ms (see the module docstring for the method).

    Args:
        fn: the call to time, with its inputs already bound; its result is discarded.
        device: ``"cuda"``/``"cuda:N"`` for CUDA-event timing, ``"cpu"`` for the monotonic clock.
        warmup_ms, min_warmup: warm up for at least this much work and this many calls.
        budget_ms, min_reps, max_reps: the timed calls to aim for (work budget) and their bounds.
        clear_l2: on a GPU, write a 2 x L2 buffer before each timed call (:func:`l2_flusher`, ``"write"``).
        slow_call_ms: a second warm-up call slower than this ends the warm-up, and at most :data:`SLOW_CALL_REPS`
            timed calls follow.

    Every call gets the same inputs: for candidates and baselines use :func:`time_pool`. Raises whatever ``fn``
    raises (the caller classifies it).
    """
    return _loop(lambda: fn(), device=device, warmup_ms=warmup_ms, min_warmup=min_warmup, budget_ms=budget_ms,
                 min_reps=min_reps, max_reps=max_reps, clear_l2=clear_l2, slow_call_ms=slow_call_ms)


def pool_size(set_bytes: int, cap_bytes: int = TIMING_POOL_BYTES, min_sets: int = TIMING_POOL_MIN_SETS,
              max_sets: int = TIMING_POOL_MAX_SETS) -> int:
    """How many distinct input sets the timing pool holds: ``cap_bytes // set_bytes`` clamped to
    [``min_sets``, ``max_sets``] (``max_sets`` for inputs of no bytes, e.g. scalars only).

    ``set_bytes``: bytes of one input set's tensors. The minimum wins over the cap, so a problem whose input set
    alone exceeds the cap still gets two sets (memory: two input sets in the reference process, whose tensors the
    worker reads through shared handles, plus one set of private buffers in each timing process).
    """
    if min_sets < 1 or max_sets < min_sets:
        raise ValueError("need 1 <= min_sets <= max_sets")
    if set_bytes <= 0:
        return max_sets
    return int(max(min_sets, min(max_sets, cap_bytes // set_bytes)))


@dataclasses.dataclass
class PoolTiming:
    """What :func:`time_pool` measured.

    ``samples``: per timed call, ms. ``pool_size``: input sets cycled. ``host_ms``: per-call time of the fastest
    host-synchronised block, ms (GPU with ``host_check``; else ``None``), over ``host_calls`` calls in all.
    ``checked``: ``(entry, timed call index, outputs, mix)`` for :data:`TIMED_CHECKED_CALLS` timed calls and, with a
    device time, :data:`DEVICE_TIME_CHECKED_CALLS` device-time calls, drawn at random (:class:`CallSample`; index
    ``len(samples) + j`` for the ``j``-th device-time call); the call's inputs were
    ``fresh_inputs.mixed(pool[entry], pool[(entry + 1) % n], mix)`` (outputs as a flat list, tensors cloned after the
    timed region; empty unless ``keep_outputs``). ``inputs``: the input buffers as the
    last call saw them (for a later profiled call). ``device``: the :func:`time_device` measurement, each call on
    fresh values (GPU with ``device_time``; else ``None``).
    """

    samples: list[float]
    pool_size: int
    host_ms: float | None = None
    host_calls: int = 0
    checked: list = dataclasses.field(default_factory=list)
    inputs: list | None = None
    device: "DeviceTiming | None" = None


def time_pool(fn: Callable[..., object], pool: list[list], *, device: str, seeds: list[int] | None = None,
              keep_outputs: bool = False, host_check: bool = False, device_time: bool = False,
              warmup_ms: float = 25.0, min_warmup: int = 3,
              budget_ms: float = 1000.0, min_reps: int = 10, max_reps: int = 100,
              clear_l2: bool = True, slow_call_ms: float = SLOW_CALL_MS, mix_rng=None, pick_rng=None) -> PoolTiming:
    """Time ``fn(*inputs)``, the inputs of call g mixed from ``pool[g % n]`` and ``pool[(g + 1) % n]`` with a weight
    drawn for the call (``kbstudy.harness.fresh_inputs.mix_into``; module docstring).

    Args:
        fn: the model call; it gets the private input buffers as positional arguments.
        pool: input sets (lists of tensors and other values), all on ``device`` where they are tensors; they are only
            read (mixed into the buffers), never passed to ``fn``. Tensors at one position should agree in shape and
            dtype across sets (if not, that position gets a fresh clone per call instead of a copy, unmixed). With
            one entry the values repeat (no second draw to mix with).
        device: as :func:`time_callable`.
        seeds: one per pool entry: ``kbstudy.harness.tensors.set_seed(seeds[e])`` before each call on entry ``e`` (outside
            the timed region), so a stochastic model's outputs are reproducible; ``None``: no seeding.
        keep_outputs: keep clones of the outputs of :data:`TIMED_CHECKED_CALLS` timed calls drawn at random (fewer
            where their bytes would pass :data:`CHECK_OUTPUT_BYTES`) with their entries and mixing weights.
        host_check: on a GPU, also measure the host-synchronised time per call (:func:`host_time`, fresh values per
            call; ignored on a CPU, where every call is synchronous).
        device_time: on a GPU, then measure the call's device time (:func:`time_device`, each call on the next pool
            entry's values, its reading L2 flush if ``clear_l2``; with ``keep_outputs`` random calls' outputs join
            ``checked``; ignored on a CPU, which has no device time apart from the call's). A call whose median is
            above ``slow_call_ms`` gets none: it is no speedup candidate, and its stage's time goes to its timing
            (:data:`SLOW_CALL_MS`).
        warmup_ms, min_warmup, budget_ms, min_reps, max_reps, clear_l2, slow_call_ms: as :func:`time_callable`
            (a slow call's host check uses blocks of one call).
        mix_rng, pick_rng: ``random.Random`` instances for the mixing weights and the checked calls (tests); ``None``:
            the operating system's generator, which a candidate cannot predict.

    Returns a :class:`PoolTiming`. Raises ``ValueError`` for an empty pool or a seed list of the wrong length;
    otherwise whatever ``fn`` raises.
    """
    if not pool:
        raise ValueError("the timing pool is empty")
    if seeds is not None and len(seeds) != len(pool):
        raise ValueError(f"{len(seeds)} seeds for {len(pool)} pool entries")
    n = len(pool)
    buffers = [x.clone() if isinstance(x, torch.Tensor) else x for x in pool[0]]
    modes = [fresh_inputs.mix_modes(pool[e], pool[(e + 1) % n]) for e in range(n)]
    mixes: dict[int, float] = {}  # global call index -> its mixing weight (kbstudy.harness.fresh_inputs)

    def prepare(g: int) -> list:
        # fresh values for every call: pool entries g and g + 1 mixed with a weight drawn for this call
        entry = g % n
        mixes[g] = fresh_inputs.draw_mix(mix_rng)
        fresh_inputs.mix_into(buffers, pool[entry], pool[(entry + 1) % n], mixes[g], modes[entry])
        if seeds is not None:
            set_seed(int(seeds[entry]))
        return buffers

    checked: list = []
    plan_state = {"first_g": 0}
    timed_pick: list = []  # the CallSample of the timed calls, sized at the first output (CHECK_OUTPUT_BYTES)

    def plan(first_g: int, reps: int) -> None:
        plan_state["first_g"] = first_g

    def observe(j: int, out) -> None:
        if not keep_outputs:
            return
        if not timed_pick:
            outputs = flatten_outputs(out)
            nbytes = sum(o.numel() * o.element_size() for o in outputs if isinstance(o, torch.Tensor))
            size = max(1, min(TIMED_CHECKED_CALLS, CHECK_OUTPUT_BYTES // max(1, nbytes)))
            timed_pick.append(CallSample(size, rng=pick_rng))
        slot = timed_pick[0].offer(j)
        if slot is not None:
            g = plan_state["first_g"] + j
            timed_pick[0].kept[slot] = (g % n, j, _detached_clones(flatten_outputs(out)), mixes[g])

    samples = _loop(fn, device=device, prepare=prepare, plan=plan, observe=observe, warmup_ms=warmup_ms,
                    min_warmup=min_warmup, budget_ms=budget_ms, min_reps=min_reps, max_reps=max_reps,
                    clear_l2=clear_l2, slow_call_ms=slow_call_ms)
    if timed_pick:
        checked.extend(sorted(timed_pick[0].kept.values(), key=lambda kept: kept[1]))
    result = PoolTiming(samples=samples, pool_size=n, checked=checked, inputs=buffers)
    next_g = plan_state["first_g"] + len(samples)  # the calls after the last timed one, in turn
    if host_check and device.startswith("cuda"):
        calls = host_block_calls(samples, slow_call_ms)
        result.host_ms = host_time(fn, prepare, next_g, device=device, calls=calls)
        result.host_calls = calls * HOST_BLOCKS
        next_g += 2 * calls * HOST_BLOCKS
    if device_time and device.startswith("cuda") and statistics.median(samples) <= slow_call_ms:
        # fresh values per call, as in the timed calls
        pick = CallSample(DEVICE_TIME_CHECKED_CALLS, rng=pick_rng)

        def keep_drawn(j: int, out) -> None:  # after the call's end event: cloned only when drawn
            slot = pick.offer(j)
            if slot is not None:
                pick.kept[slot] = (j, _detached_clones(flatten_outputs(out)))

        result.device = time_device(lambda: fn(*buffers), device=device, clear_l2=clear_l2, warmup=0,
                                    per_call_ms=statistics.median(samples),
                                    before_call=lambda j: prepare(next_g + j),
                                    observe=keep_drawn if keep_outputs else None)
        # checked like a timed call's outputs: call index len(samples) + j, after the timed calls
        for j, outputs in sorted(pick.kept.values(), key=lambda kept: kept[0]):
            checked.append(((next_g + j) % n, len(samples) + j, outputs, mixes[next_g + j]))
    return result


def host_time(fn: Callable[..., object], prepare: Callable[[int], list], first_g: int, *, device: str,
              calls: int) -> float:
    """The host-synchronised time per call (ms) of the module docstring's cross-check: in each of :data:`HOST_BLOCKS`
    blocks, ``calls`` calls, each after a device-wide synchronisation (which waits for every stream, so work a call
    left on another stream is paid by the next) and on fresh values (``prepare(g)``, global call ``g`` from
    ``first_g``: a memo keyed on the inputs cannot make these calls faster than the timed ones); then the same
    synchronisations and preparations without the calls. The fastest block of each kind is kept and their
    difference divided by ``calls`` (at least 0): the calls' own time, host launch and hidden work included."""
    best = {True: math.inf, False: math.inf}  # fastest block with the calls, and without
    g = first_g
    for _ in range(HOST_BLOCKS):
        for with_calls in (True, False):
            torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            for _ in range(calls):
                torch.cuda.synchronize(device)
                args = prepare(g)
                g += 1
                if with_calls:
                    fn(*args)
            torch.cuda.synchronize(device)
            best[with_calls] = min(best[with_calls], time.perf_counter() - t0)
    return max(0.0, best[True] - best[False]) * 1e3 / calls


def _detached_clones(outputs: list) -> list:
    """A flat output list (``kbstudy.harness.tensors.flatten_outputs``) with every tensor detached and cloned, so a later
    call that reuses the candidate's buffers cannot change what is checked."""
    return [o.detach().clone() if isinstance(o, torch.Tensor) else o for o in outputs]


class CallSample:
    """``size`` calls drawn uniformly at random, without replacement, from a sequence of calls whose length is not
    known in advance (reservoir sampling: Vitter, *Random sampling with a reservoir*, ACM TOMS 11(1), 1985, algorithm
    R). :func:`time_pool` checks the outputs of the drawn device-time calls, so a candidate cannot know which of its
    device-time calls are checked: the draws come from ``random.SystemRandom`` (the operating system's generator)
    unless ``rng`` is given. ``kept``: ``{slot: what the caller stored}`` for the calls drawn so far (at most
    ``size``). Raises ``ValueError`` for ``size`` < 1."""

    def __init__(self, size: int = 1, rng=None):
        if size < 1:
            raise ValueError(f"size must be at least 1, not {size}")
        self.size = size
        self._rng = rng if rng is not None else random.SystemRandom()
        self.kept: dict = {}
        self._seen = 0

    def offer(self, j: int) -> int | None:
        """Offer call ``j``: the slot it takes (replacing that slot's call) or ``None`` if it is not drawn. The first
        ``size`` calls fill the slots; the ``s``-th call after them is drawn with probability ``size / s``."""
        self._seen += 1
        if self._seen <= self.size:
            return self._seen - 1
        slot = self._rng.randrange(self._seen)
        return slot if slot < self.size else None


@dataclasses.dataclass
class DeviceTiming:
    """What :func:`time_device` measured: ``samples`` (ms, one per call, in call order), ``host_overran`` (calls whose
    host work, from before the spin to after the end event's record, outlasted the spin: their samples include host
    time), ``spin_us`` (the spin's intended length), ``flush`` (the L2 flush's mode, :func:`l2_flusher`; ``None``
    for a warm device time, and by default)."""

    samples: list[float]
    host_overran: int
    spin_us: float
    flush: str | None = None


def spin_cycles_per_us(device: str) -> float:
    """``torch.cuda._sleep`` cycles per microsecond on ``device`` (CUDA), measured: a 10^6-cycle spin timed with CUDA
    events, fastest of three, so a spin's length does not rest on a clock rate the driver may change (the events
    include the spin's launch, ~1-2 % of it, so a spin comes out slightly shorter than asked)."""
    best = math.inf
    with torch.cuda.device(device):
        for _ in range(3):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            torch.cuda._sleep(1_000_000)
            e.record()
            torch.cuda.synchronize(device)
            best = min(best, s.elapsed_time(e) * 1e3)
    return 1_000_000 / best


def device_timed_call(fn: Callable[[], object], *, device: str, stream, flush: Callable[[], object] | None,
                      spin_cycles: int, observe: Callable[[object], None] | None = None
                      ) -> tuple[float, float, float]:
    """One call of ``fn`` between two CUDA events on ``stream``: the L2 flushed first if ``flush`` (an
    :func:`l2_flusher`) is given, then, if ``spin_cycles``, a spin kernel enqueued before the start event. Returns
    ``(event ms, the call's own host ms, host ms from before the spin to after the end event's record)``; a host time
    above the spin's length means the events saw host time. ``observe(out)``, if given, sees the call's output after
    the device is synchronised. ``device`` must be the current CUDA device (the spin runs there; :func:`time_device`
    makes it so)."""
    if flush is not None:
        flush()
    torch.cuda.synchronize(device)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    if spin_cycles:
        torch.cuda._sleep(spin_cycles)
    s.record(stream)
    t1 = time.perf_counter()
    out = fn()
    t2 = time.perf_counter()
    e.record(stream)
    t3 = time.perf_counter()
    torch.cuda.synchronize(device)
    if observe is not None:
        observe(out)
    del out
    return s.elapsed_time(e), (t2 - t1) * 1e3, (t3 - t0) * 1e3


def time_device(fn: Callable[[], object], *, device: str, reps: int = DEVICE_TIME_REPS,
                spin_us: float = DEVICE_SPIN_US, clear_l2: bool = True, warmup: int = 2,
                per_call_ms: float | None = None, budget_ms: float = DEVICE_TIME_BUDGET_MS,
                before_call: Callable[[int], object] | None = None,
                observe: Callable[[int, object], None] | None = None,
                flush_mode: str = DEVICE_FLUSH_MODE) -> DeviceTiming:
    """The device time of ``fn()`` (module docstring, "Device time"): per call, the L2 flushed (``clear_l2``), a spin
    of ``spin_us`` enqueued, then the call between CUDA events. Returns a :class:`DeviceTiming` (ms).

    Args:
        fn: the call, inputs bound; its result is discarded once ``observe`` (if given) has seen it.
        device: a CUDA device (``"cuda"``, ``"cuda:N"``).
        reps: timed calls, at most; fewer (at least :data:`DEVICE_TIME_MIN_REPS`) when ``per_call_ms`` says a call
            takes longer than ``budget_ms / reps``.
        spin_us: the spin before each call, us; it must outlast the host's enqueueing (``host_overran`` counts the
            calls where it did not).
        clear_l2: flush the L2 before each call (cold device time); False: warm.
        warmup: untimed calls first (0 when the caller has just timed ``fn``).
        per_call_ms: the caller's per-call estimate, to size ``reps``; ``None``: the first timed call's.
        before_call: ``before_call(j)`` runs before timed call ``j``, before the flush (outside the timed region):
            e.g. fresh values in the call's input buffers (:func:`time_pool` passes its pool's next entry).
        observe: ``observe(j, out)`` sees timed call ``j``'s output once the device is synchronised (outside the
            timed region; :func:`time_pool` keeps the last one for the timed-output check).
        flush_mode: how the flush leaves the L2 (:func:`l2_flusher`; default :data:`DEVICE_FLUSH_MODE`, clean).

    Raises ``ValueError`` on a CPU device (no spin kernel, no device clock apart from the call's), for ``reps`` < 1 or
    an unknown ``flush_mode``; otherwise whatever ``fn`` raises."""
    if not device.startswith("cuda"):
        raise ValueError(f"device time needs a CUDA device, not {device!r}")
    if reps < 1:
        raise ValueError(f"reps must be at least 1, not {reps}")
    if flush_mode not in FLUSH_MODES:
        raise ValueError(f"unknown L2 flush mode {flush_mode!r}; expected one of {FLUSH_MODES}")

    samples: list[float] = []
    overran = 0
    with torch.cuda.device(device):  # the spin and the events on the device measured, whichever is current
        stream = torch.cuda.current_stream(device)
        flush = l2_flusher(device, flush_mode) if clear_l2 else None
        cycles = int(spin_us * spin_cycles_per_us(device))
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize(device)
        while len(samples) < reps:
            if before_call is not None:
                before_call(len(samples))
            j = len(samples)
            ms, _, host_ms = device_timed_call(fn, device=device, stream=stream, flush=flush, spin_cycles=cycles,
                                               observe=None if observe is None else lambda out: observe(j, out))
            samples.append(ms)
            overran += host_ms * 1e3 > spin_us
            if len(samples) == 1:
                reps = _reps_for(per_call_ms if per_call_ms is not None else ms, budget_ms,
                                 min(DEVICE_TIME_MIN_REPS, reps), reps)
        del flush
    return DeviceTiming(samples=samples, host_overran=int(overran), spin_us=float(spin_us),
                        flush=flush_mode if clear_l2 else None)


def host_block_calls(samples: list[float], slow_call_ms: float = SLOW_CALL_MS) -> int:
    """Calls per host-check block after timed ``samples`` (ms): as many as the timed loop made per block of
    :data:`HOST_BLOCKS`, between 2 and :data:`HOST_BLOCK_CALLS`; 1 when the median call is slower than
    ``slow_call_ms``: a 4 s call takes 24 s in three blocks of two and 12 s in blocks of one, within the 60 s
    stage that slow scans (91_cumsum_reverse) overran."""
    if samples and statistics.median(samples) > slow_call_ms:
        return 1
    return max(2, min(HOST_BLOCK_CALLS, len(samples) // HOST_BLOCKS))


def _reps_for(per_call_ms: float, budget_ms: float, min_reps: int, max_reps: int) -> int:
    if per_call_ms <= 0:
        return max_reps
    return int(min(max_reps, max(min_reps, budget_ms // per_call_ms)))


def _loop(fn, *, device, prepare=None, plan=None, observe=None, warmup_ms, min_warmup, budget_ms, min_reps,
          max_reps, clear_l2=True, slow_call_ms=SLOW_CALL_MS) -> list[float]:
    """The timing loop of :func:`time_callable` and :func:`time_pool`: warm-up calls, then the timed calls.

    ``prepare(g)`` (untimed) returns the positional arguments of global call ``g`` (warm-up calls count);
    ``plan(g0, reps)`` learns the global index of the first timed call and how many follow; ``observe(j, out)``
    sees the output of timed call ``j`` after its clock stopped. CUDA: events on the current stream around the call,
    a device synchronisation before and after, the L2 flush before each timed call. CPU: ``perf_counter_ns``.
    A warm-up call after the first slower than ``slow_call_ms`` ends the warm-up and caps the timed calls at
    :data:`SLOW_CALL_REPS` (see :data:`SLOW_CALL_MS`).
    """
    cuda = device.startswith("cuda")
    if cuda:
        flush = l2_flusher(device, "write") if clear_l2 else None
        stream = torch.cuda.current_stream(device)
        torch.cuda.synchronize(device)
        start_evt, end_evt = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    g = 0
    # warm-up, measured coarsely to size the timed loop
    calls, spent, last = 0, 0.0, 0.0
    while calls < min_warmup or spent < warmup_ms:
        args = prepare(g) if prepare is not None else ()
        if cuda:
            start_evt.record(stream)
            out = fn(*args)
            end_evt.record(stream)
            torch.cuda.synchronize(device)
            last = start_evt.elapsed_time(end_evt)
        else:
            t0 = time.perf_counter_ns()
            out = fn(*args)
            last = (time.perf_counter_ns() - t0) / 1e6
        del out
        spent += last
        calls += 1
        g += 1
        if calls >= 2 and last > slow_call_ms:  # not the first call: it may carry torch.compile's compilation
            break
    # size the loop from the last warm-up call: the first ones include one-time work (torch.compile, autotuning)
    reps = _reps_for(last, budget_ms, min_reps, max_reps)
    if calls >= 2 and last > slow_call_ms:
        reps = min(reps, SLOW_CALL_REPS)
    if plan is not None:
        plan(g, reps)
    samples = []
    for j in range(reps):
        args = prepare(g) if prepare is not None else ()
        if cuda:
            if flush is not None:
                flush()
            torch.cuda.synchronize(device)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(stream)
            out = fn(*args)
            e.record(stream)
            torch.cuda.synchronize(device)
            samples.append(s.elapsed_time(e))
        else:
            t0 = time.perf_counter_ns()
            out = fn(*args)
            samples.append((time.perf_counter_ns() - t0) / 1e6)
        if observe is not None:
            observe(j, out)
        del out
        g += 1
    if cuda:
        del flush
    return samples


# ------------------------------------------------------------------------------------------------ decisions


