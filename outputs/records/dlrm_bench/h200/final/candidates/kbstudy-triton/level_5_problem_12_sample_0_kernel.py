"""kbstudy-triton kernel for DLRM-Bench problem 12 (256 -> 1 head, sigmoid, BCE mean loss, forward + backward).

Shipped in session 16; measured as variant ``s15-d`` in session 15 (``outputs/records/h200-dlrm-s15-p12`` and
``outputs/records/h200-dlrm-s15-repeat``: 39.6 and 39.3 us of cold device time, 1.244x and 1.234x the floor, against
40.7 and 41.1 us for session 15's shipped ``s15-a`` in the same runs: device-time ratios 0.972 [0.963, 0.978] and
0.957 [0.946, 0.967]).

It is ``s15-c`` (below) with an **autotuning benchmark timed as the project judges**: ``_bench`` flushes
the L2 by reading a 256 MiB buffer and hides the host behind a spin, as ``kbstudy.timing.time_device`` does, instead of
``triton.testing.do_bench``'s write flush, whose dirty lines' write-back (3-8 us per call, session 15) every config pays
while it is ranked. The configs differ in how many bytes they keep in flight and ask for ahead (L2 bulk prefetch 0, 2
or 4 steps ahead); which of them is fastest may differ between an L2 full of dirty lines and one of clean lines, and the
cold device time is measured in the second. Kernel, configs and launcher are s15-c's, unchanged.

s15-c: round 1's ``s15-a`` (one launch, one wave, warps streaming h two row-steps ahead, 128-byte-aligned
dL/dh, optional L2 bulk prefetch; 40.8 us against a copy of the same bytes at 35.6 us) with its **serial tail cut
from four dependent L2 round trips to one**: the programs add dL/dw, dL/db and the loss straight into the output's head,
which program 0 zeroes and publishes at its start, so no program waits for another at the end and nothing is read
back.

**Where s15-a spends its end.** After the last program's last dL/dh store its tail was: a cross-warp reduction (14
``BAR.SYNC`` in the SASS), relaxed adds into one of 8 scratch copies, ``MEMBAR.ALL.GPU`` (waits for the adds and the
last dL/dh stores to be acknowledged: one L2 round trip), the arrival counter's ``ATOMG`` (a second round trip, behind
131 others on one address), then, in the last program, the adds of zero that read the 8 copies (a third) and the
stores of loss, dL/dw, dL/db, which the grid's completion waits for (a fourth). At 0.5-0.7 us per round trip near an
idle L2, ~2-3 us of the launch is that chain, with the DRAM idle; a copy ends with its last stores.

**This tail.** Program 0 first stores zeros to ``out[0 : F + 2]`` (loss, dL/dw, dL/db), then a barrier and one release
``atomic_add`` (lane 0 of its last warp) of ``MOD - P + 1`` to an int32 counter (``MOD = 2^20``, P programs). Every
other program adds 1 with *acquire* at iteration ``n_iter // 2`` of its loop (~15 us after program 0's add, after that
iteration's loads are issued, so the round trip and the broadcast barrier overlap two row-steps of loads in flight);
the value it reads is >= ``MOD - P + 1`` once program 0 has added (at most ``P - 2`` before). After its loop a program
reduces its warps' sums (one [F] and one [2] reduction: 8 ``BAR.SYNC``) and adds them into ``out`` with relaxed
``REDG`` (258 addresses): the grid's completion waits only for those adds, one round trip. A launch adds exactly
``MOD``; the program whose add reaches it sets the counter back to 0 (calls stay independent; the autotuner's
repeated launches too). A program whose add came before program 0's (tiny grids, a grid larger than one wave) spins
after its loop on acquire reads until the counter is >= ``MOD - P + 1`` or 0 (reset, which follows program 0's add);
program 0 is the first program dispatched and never waits. Program 0's release (``MEMBAR`` waiting for its zero
stores, then its add's round trip) delays only its last warp, which has one unit fewer than its first warps
here (32768 units, 2112 warps: 15.5 units per warp; the last warp of every program takes 15). The adds into ``out``
are 132 x 258 fp32 ``REDG`` (8 warp instructions per program, two 128-byte lines each), spread over the programs'
last ~1 us; their order is the atomics' order (not bit-for-bit deterministic; far inside the fp32 tolerances), as
before.

Expected: the same main loop as s15-a (its SASS per iteration: 4 ``LDG.E.EF.128``, 4 ``STG.E.128``, 20 ``SHFL.BFLY``,
no barrier; plus one compare and branch around the arrival block), about 1.5-2 us (4-5 %) less at the end: ~39 us
against 40.8 us, at or under the 39.9 us target (1.25 x 31.9 us). Configs (Triton 3.6, sm_90, ``cuobjdump
-res-usage``, no spills, shared memory for the tail's reductions only):

| W x R, PPS, PF | warps per SM | registers (cap) | shared | h in registers per SM | ahead in L2 per SM |
| --- | --- | --- | --- | --- | --- |
| 16 x 2, 1, 0 | 16 | 109 (128) | 16 KB | 32-64 KB | 0 |
| 16 x 2, 1, 2 | 16 | 111 (128) | 16 KB | 32-64 KB | 64 KB |
| 16 x 2, 1, 4 | 16 | 111 (128) | 16 KB | 32-64 KB | 128 KB |
| 8 x 2, 2, 2 | 16 | 115 (128) | 2 x 8 KB | 32-64 KB | 64 KB |
| 8 x 2, 2, 0 | 16 | 125 (128) | 2 x 8 KB | 32-64 KB | 0 |

(s15-a's 16 x 1, 2 programs per SM config spills at its 64-register cap with the arrival block and is replaced by
8 x 2, 2, 0.) The main loop, as in s15-a: warp ``w`` of program ``p`` owns at step ``k`` the unit of ``R`` consecutive
rows ``k * NWG + w * P + p`` (``NWG = P x W``; the grid walks h in order); a step's tile is ``[W, R, NCH, CW]`` with
16-byte vectors, the loads of the step after next issued first; ``x = h w + b``, ``g = (sigmoid(x) - y) / B`` and the
loss ``max(x, 0) - x y + log(1 + e)`` from one ``e = exp(-|x|)``; ``dL/dh = g w`` stored from the same registers to
a 128-byte-aligned dL/dh (the output is a fresh buffer's view starting ``pad`` elements in). With ``PF > 0`` each warp's
first lane issues one ``cp.async.bulk.prefetch.L2`` per step for its unit ``2 + PF`` steps ahead (sm_90, 16-byte-aligned
h, F % 4 == 0; never under ``TRITON_INTERPRET=1``, where one config runs).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: W warps per program, each warp R rows per step, two steps ahead in registers; PPS programs per SM, all resident
#: (maxnreg caps the registers at 65536 / (PPS x 32 x W)); PF > 0: each row is also prefetched into the L2 PF steps
#: before its register load is issued (counts in the docstring: Triton 3.6, sm_90, no spills)
_CONFIGS = [
    triton.Config({"W": 16, "R": 2, "PPS": 1, "PF": 0}, num_warps=16, num_stages=1, maxnreg=128),
    triton.Config({"W": 16, "R": 2, "PPS": 1, "PF": 2}, num_warps=16, num_stages=1, maxnreg=128),
    triton.Config({"W": 16, "R": 2, "PPS": 1, "PF": 4}, num_warps=16, num_stages=1, maxnreg=128),
    triton.Config({"W": 8, "R": 2, "PPS": 2, "PF": 2}, num_warps=8, num_stages=1, maxnreg=128),
    triton.Config({"W": 8, "R": 2, "PPS": 2, "PF": 0}, num_warps=8, num_stages=1, maxnreg=128),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"W": 2, "R": 2, "PPS": 2, "PF": 1}, num_warps=2, num_stages=1)]


def _bench(kernel_call, quantiles):
    """Autotuning benchmark, timed as the project judges a kernel (``kbstudy.timing.time_device``): before each timed
    call the L2 is flushed by *reading* a 256 MiB buffer (it is left holding clean lines), then a spin kernel keeps the
    device busy while the host launches the call; CUDA events around the call; 5 ms of warm-up and about 25 ms of
    timed calls (10 to 200) per config. ``triton.testing.do_bench`` flushes by *writing* the buffer, which leaves the
    L2 full of dirty lines whose write-back (3-8 us, session 15) every timed call pays, so it ranks the configs under
    another memory state than the one they are judged in. Falls back to ``do_bench`` (5 / 25 ms) if this raises."""
    try:
        return _bench_read_flush(kernel_call, quantiles)
    except Exception:
        return triton.testing.do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)


def _bench_read_flush(kernel_call, quantiles, warmup_ms=5.0, rep_ms=25.0, spin_cycles=200_000):
    """:func:`_bench`'s method: the quantiles (in the order asked; a number for one) of the timed calls, in ms."""
    device = torch.cuda.current_device()
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0
    buf = torch.zeros(max(256 << 20, 2 * l2) // 8, dtype=torch.int64, device="cuda")
    sink = torch.empty((), dtype=torch.int64, device="cuda")
    kernel_call()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        kernel_call()
    end.record()
    torch.cuda.synchronize()
    estimate_ms = max(start.elapsed_time(end) / 5, 1e-3)
    for _ in range(max(1, int(warmup_ms / estimate_ms))):
        kernel_call()
    # each timed call also waits for its flush (~0.07 ms) and spin (~0.1 ms)
    n = max(10, min(200, int(rep_ms / (estimate_ms + 0.2))))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for start, end in events:
        torch.amax(buf, dim=0, out=sink)  # the read flush (kbstudy.timing.l2_flusher "read")
        torch.cuda._sleep(spin_cycles)
        start.record()
        kernel_call()
        end.record()
    torch.cuda.synchronize()
    del buf
    times = sorted(s.elapsed_time(e) for s, e in events)
    ret = [times[min(n - 1, max(0, int(round(q * (n - 1)))))] for q in (quantiles or (0.5,))]
    return ret[0] if len(ret) == 1 else ret


#: the autotuner's choice per shape key; the compiled kernel per (kernel, key, keyword arguments, specialisation)
#: (see :func:`_launch`)
_TUNED = {}
_COMPILED = {}
#: direct launches of compiled kernels (off under TRITON_INTERPRET=1, which compiles nothing, or once one has failed)
_DIRECT = [os.environ.get("TRITON_INTERPRET", "0") != "1"]


def _specialization(args):
    """What Triton compiles a launch for, per positional argument (``triton.runtime.jit``, ``specialize_impl``): a
    tensor's dtype and 16-byte alignment; an int's equality to 1, divisibility by 16 and range (int32, uint64 or
    int64); a float's type; any other value itself. Launches with equal specialisations run one compiled kernel."""
    spec = []
    for a in args:
        if isinstance(a, torch.Tensor):
            spec.append((a.dtype, a.data_ptr() % 16 == 0))
        elif isinstance(a, bool) or not isinstance(a, (int, float)):
            spec.append(a)
        elif isinstance(a, int):
            spec.append((a == 1, a % 16 == 0, -2**31 <= a < 2**31, a >= 2**63))
        else:
            spec.append(float)
    return tuple(spec)


def _launch(kernel, key, grid, *args, **kwargs):
    """``kernel[grid](*args, **kwargs)`` at the least host cost; ``kernel`` is a ``triton.jit`` function, or one
    wrapped in ``triton.autotune``; ``grid`` a tuple or a callable of the launch's meta-parameters; ``key`` names what
    the autotuner's choice depends on (shapes, dtypes, device).

    The first launch for ``key`` goes through the autotuner, which benchmarks its configs once and launches the best.
    The first launch with new keyword arguments or argument specialisation (:func:`_specialization`) goes through
    ``JITFunction.run``, which compiles or finds the kernel and returns it. Every later launch calls that compiled
    kernel's launcher directly (``CompiledKernel[grid](*args)``), skipping the JIT's argument binding and cache-key
    hashing and the autotuner's bookkeeping: each timed call pays the host time before its kernel starts (the device
    waits for it), which exceeds the device time of the launch-bound problems. Compiled kernels are kept per current
    device, as the JIT keeps them. If a direct launch raises (a Triton whose launcher takes other arguments), this and
    every later launch go through the JIT."""
    autotuned = hasattr(kernel, "configs")
    jit = kernel.fn if autotuned else kernel
    tuned = _TUNED.get(key) if autotuned else {}
    if tuned is None:
        kernel[grid](*args, **kwargs)
        best = getattr(kernel, "best_config", None)
        if best is not None:
            _TUNED[key] = best.all_kwargs()
        return
    ckey = None
    if _DIRECT[0]:
        try:
            # the JIT's own device (a compiled kernel is loaded into one device's context), then what it compiles for
            device = triton.runtime.driver.active.get_current_device()
            ckey = (device, id(jit), key, tuple(kwargs.items()), _specialization(args))
            compiled = _COMPILED.get(ckey)
            if compiled is not None:
                meta = {**kwargs, **tuned}
                g = grid(meta) if callable(grid) else grid
                g = (g[0], g[1] if len(g) > 1 else 1, g[2] if len(g) > 2 else 1)
                compiled[g](*args, *[meta[name] for name in jit.arg_names[len(args):]])
                return
        except (TypeError, KeyError, AttributeError, ValueError):
            _DIRECT[0] = False
    compiled = jit[grid](*args, **kwargs, **tuned)
    if _DIRECT[0] and ckey is not None and compiled is not None and hasattr(compiled, "function"):
        _COMPILED[ckey] = compiled


@triton.jit
def _tile_mask(lrow4, col4, left, F: tl.constexpr, BLOCK_F: tl.constexpr):
    """Rows below ``left`` (and columns below F when F is not a power of two: no column term otherwise, so the mask
    stays constant along a thread's vector)."""
    if F == BLOCK_F:
        m = lrow4 < left
    else:
        m = (lrow4 < left) & (col4 < F)
    return m


@triton.jit
def _prefetch_l2(ptr, nbytes):
    """Per element: if ``nbytes`` is not zero, ask the TMA unit to bring ``nbytes`` (a multiple of 16) from ``ptr``
    (16-byte aligned) into the L2: ``cp.async.bulk.prefetch.L2`` (sm_90), a hint with no destination, no register and
    no completion to wait for (problem 9's helper, predicated per element instead of per program)."""
    tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.u32 p, $2, 0; @p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
        "=r,l,r", [ptr, nbytes], dtype=tl.int32, is_pure=False, pack=1)


@triton.autotune(configs=_CONFIGS, key=["B", "F", "PREFETCH"], do_bench=_bench)
@triton.jit
def _bce_head_kernel(h_ptr, y_ptr, w_ptr, b_ptr, out_ptr, dh_ptr, count_ptr, B, inv_b,
                     F: tl.constexpr, BLOCK_F: tl.constexpr, CW: tl.constexpr, PREFETCH: tl.constexpr,
                     BLOCK_S: tl.constexpr, W: tl.constexpr, R: tl.constexpr, PPS: tl.constexpr, PF: tl.constexpr):
    # PPS (programs per SM) only sizes the grid (ModelNew.forward); W is the config's num_warps; F is a constexpr.
    # dh_ptr = out_ptr + 2 + F, passed on its own: the forward places it on a 128-byte boundary, so Triton's
    # specialisation sees it 16-byte aligned and h's loads and dL/dh's stores are both 16-byte vectors.
    p = tl.program_id(0)
    P = tl.num_programs(0)
    # the arrival counter: program 0 adds MOD - P + 1 once it has zeroed the head, every other program adds 1, so the
    # launch adds MOD in all; the program that brings it to MOD (the last arrival) sets it back to 0
    MOD: tl.constexpr = 1 << 20
    pt = tl.arange(0, 32 * W)  # one element per thread: lane (pt % 32) of warp (pt // 32)
    zlane = pt == 32 * (W - 1)  # program 0's publishing thread: lane 0 of its last warp (one unit fewer, see below)
    zold = pt * 0
    if p == 0:
        # program 0 zeroes out[0 : F + 2] (loss, dL/dw, dL/db) before anything else, then publishes it: every thread's
        # zeros precede the barrier, the barrier precedes the release add; every program's additions into the head
        # follow an acquire that reads this add (or a later one)
        i = tl.arange(0, BLOCK_S)
        tl.store(out_ptr + i, tl.zeros([BLOCK_S], dtype=tl.float32), mask=i < F + 2)
        tl.debug_barrier()
        zold = tl.atomic_add(count_ptr + pt * 0, tl.where(zlane, MOD - P + 1, 0), mask=zlane, sem="release",
                             scope="gpu")
        tl.atomic_xchg(count_ptr + pt * 0, pt * 0, mask=zlane & (zold == P - 1), sem="relaxed", scope="gpu")
    NCH: tl.constexpr = BLOCK_F // CW
    NWG = P * W
    # warp w of program p owns, at iteration k, the unit of R rows k * NWG + w * P + p: R contiguous rows per warp,
    # the grid's units in order, a program's warps P units apart (every program has a warp on the last units)
    n_units = tl.cdiv(B, R)
    n_iter = tl.cdiv(n_units - p, NWG)
    lrow = (tl.arange(0, W)[:, None] * P + p) * R + tl.arange(0, R)[None, :]  # [W, R], rows past the step's first
    lrow4 = lrow[:, :, None, None]
    col2 = tl.arange(0, NCH)[:, None] * CW + tl.arange(0, CW)[None, :]  # [NCH, CW]: lanes on CW, 4 columns each
    col4 = col2[None, None, :, :]
    offs = lrow4 * F + col4  # one offset tensor (one register layout) for h's loads and dL/dh's stores
    STEP = NWG * R  # rows per iteration, whole grid
    # two tiles ahead: the loads of iterations 0 and 1 before anything else
    base = tl.cast(0, tl.int64)
    left = tl.minimum(B - base, STEP).to(tl.int32)
    h_a = tl.load(h_ptr + base * F + offs, mask=_tile_mask(lrow4, col4, left, F, BLOCK_F), other=0.0,
                  eviction_policy="evict_first")
    y_a = tl.load(y_ptr + base + lrow, mask=lrow < left, other=0.0)
    left = tl.minimum(B - (base + STEP), STEP).to(tl.int32)
    h_b = tl.load(h_ptr + (base + STEP) * F + offs, mask=_tile_mask(lrow4, col4, left, F, BLOCK_F), other=0.0,
                  eviction_policy="evict_first")
    y_b = tl.load(y_ptr + (base + STEP) + lrow, mask=lrow < left, other=0.0)
    if PREFETCH and PF > 0:
        # unit u (R rows, R F 4 contiguous bytes) of the step is prefetched by one bulk request, issued by the first
        # lane of one warp: elements of a 1-D [32 W] tensor, one per thread in its layout, lane 0 of each warp active
        # (the instruction takes uniform operands, so one active lane per warp keeps it a single issue)
        prow = ((pt // 32) * P + p) * R
        plive = (pt % 32) == 0
        # the units of iterations 2 .. PF + 1 into the L2
        for j in tl.static_range(PF):
            pbase = base + (2 + j) * STEP
            pleft = tl.minimum(B - pbase, STEP).to(tl.int32)
            _prefetch_l2(h_ptr + (pbase + prow) * F,
                         tl.where(plive, tl.minimum(tl.maximum(pleft - prow, 0), R) * (F * 4), 0))
    w4 = tl.load(w_ptr + col4, mask=col4 < F, other=0.0)
    bias = tl.load(b_ptr)
    acc = tl.zeros([W, NCH, CW], dtype=tl.float32)
    gsum = tl.zeros([W, R], dtype=tl.float32)
    lsum = tl.zeros([W, R], dtype=tl.float32)
    # programs other than 0 arrive at iteration kc, after the loads of their last iteration are issued (nothing left
    # to issue, so the round trip of the acquiring add and its broadcast overlap the loads in flight); program 0's
    # add (its first instructions) is long done by then, so the check after the loop passes without waiting
    kc = tl.where(p == 0, -1, n_iter // 2)
    wait = p < 0  # (False) whether program 0's add had not been read at kc
    for k in range(n_iter):
        h = h_a
        y = y_a
        h_a = h_b
        y_a = y_b
        left = tl.minimum(B - base, STEP).to(tl.int32)
        nbase = base + 2 * STEP
        nleft = tl.minimum(B - nbase, STEP).to(tl.int32)
        h_b = tl.load(h_ptr + nbase * F + offs, mask=_tile_mask(lrow4, col4, nleft, F, BLOCK_F), other=0.0,
                      eviction_policy="evict_first")
        y_b = tl.load(y_ptr + nbase + lrow, mask=lrow < nleft, other=0.0)
        if PREFETCH and PF > 0:
            pbase = base + (2 + PF) * STEP
            pleft = tl.minimum(B - pbase, STEP).to(tl.int32)
            _prefetch_l2(h_ptr + (pbase + prow) * F,
                         tl.where(plive, tl.minimum(tl.maximum(pleft - prow, 0), R) * (F * 4), 0))
        if k == kc:
            old = tl.atomic_add(count_ptr, 1, sem="acquire", scope="gpu")
            wait = (old & (MOD - 1)) < MOD - P + 1
            if old == MOD - 1:  # the last arrival (program 0's add included): the counter back to 0
                tl.atomic_xchg(count_ptr, 0, sem="relaxed", scope="gpu")
        x = tl.sum(tl.sum(h * w4, axis=3), axis=2) + bias  # [W, R]: in-thread, then one warp's shuffles
        # one exp per row: e = exp(-|x|) gives both the loss's log(1 + e) and sigmoid(x) (no overflow for x << 0)
        e = tl.exp(-tl.abs(x))
        rmask = lrow < left
        loss = tl.maximum(x, 0.0) - x * y + tl.log(1.0 + e)
        g = (tl.where(x >= 0, 1.0, e) / (1.0 + e) - y) * inv_b
        g = tl.where(rmask, g, 0.0)
        g4 = g[:, :, None, None]
        acc += tl.sum(g4 * h, axis=1)
        tl.store(dh_ptr + base * F + offs, g4 * w4, mask=_tile_mask(lrow4, col4, left, F, BLOCK_F))
        gsum += g
        lsum += tl.where(rmask, loss, 0.0)
        base += STEP
    if (n_iter == 0) & (p != 0):  # (not reached by ModelNew's grids, which give every program a unit)
        old = tl.atomic_add(count_ptr, 1, sem="acquire", scope="gpu")
        wait = (old & (MOD - 1)) < MOD - P + 1
        if old == MOD - 1:
            tl.atomic_xchg(count_ptr, 0, sem="relaxed", scope="gpu")
    # program 0 the last arrival (every other program arrived before its add): it sets the counter back to 0
    # this program's dL/dw, and dL/db and loss as one [2] reduction (the only cross-warp steps)
    dw = tl.sum(acc, axis=0)
    two = tl.arange(0, 2)
    gl = tl.where(two[None, :] == 0, tl.sum(gsum, axis=1)[:, None], tl.sum(lsum, axis=1)[:, None] * inv_b)
    gl = tl.sum(gl, axis=0)  # [dL/db, loss] partials
    # program 0's zeros published? (the add at kc read MOD - P + 1 or more; else wait for it: only when program 0
    # started late, e.g. a grid larger than one wave or a program with one iteration)
    while wait:
        cur = tl.atomic_add(count_ptr, 0, sem="acquire", scope="gpu")
        # this program has arrived, so the counter is 1 .. MOD - 1 until program 0's add, or 0 once the last
        # arrival has reset it (after program 0's add)
        wait = (cur > 0) & (cur < MOD - P + 1)
    # add into the output's head: dL/dw at out[1 : F + 1], dL/db at out[F + 1], loss at out[0]
    tl.atomic_add(out_ptr + 1 + col2, dw, mask=col2 < F, sem="relaxed", scope="gpu")
    tl.atomic_add(out_ptr + tl.where(two == 0, F + 1, 0), gl, sem="relaxed", scope="gpu")


#: per device index: whether it has ``cp.async.bulk.prefetch.L2`` (sm_90 and later; never under the interpreter)
_BULK = {}


def _bulk_prefetch(device):
    if _INTERPRET or device.type != "cuda":
        return False
    idx = device.index if device.index is not None else torch.cuda.current_device()
    ok = _BULK.get(idx)
    if ok is None:
        ok = _BULK[idx] = torch.cuda.get_device_capability(idx)[0] >= 9
    return ok


class ModelNew(nn.Module):
    """Same parameters as the problem's ``Model`` (``head`` = ``nn.Linear(in_features, 1)``); one Triton launch."""

    #: programs per SM; None: the autotuned config's (a number here overrides it, as the edge tests do)
    PROGRAMS_PER_SM = None
    #: dL/dh (element 2 + F of the output) starts on a multiple of this many bytes
    DH_ALIGN = 128

    def __init__(self, in_features: int):
        super().__init__()
        self.head = nn.Linear(in_features, 1)
        self._scratch = {}

    def _scratch_for(self, device, width: int):
        """(counter, SMs) for ``device``: the kernel's int32 arrival counter, zero between calls (the last program to
        arrive in every call sets it back to 0); allocated once."""
        key = (str(device), width)
        entry = self._scratch.get(key)
        if entry is None:
            sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 2
            entry = (torch.zeros(1, dtype=torch.int32, device=device), sms)
            self._scratch[key] = entry
        return entry

    def forward(self, h: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        h = h.detach().contiguous()
        batch, feat = h.shape
        w = self.head.weight.detach().reshape(-1)
        b = self.head.bias.detach()
        n = 2 + feat + batch * feat
        # the output is a fresh buffer's view starting `pad` elements in, so that dL/dh (its element 2 + F) starts on
        # a 128-byte boundary: 16-byte vector stores in whole 32-byte sectors, in h's register layout
        esize = h.element_size()
        buf = torch.empty(n + self.DH_ALIGN // esize, device=h.device, dtype=h.dtype)
        pad = ((-(buf.data_ptr() + (2 + feat) * esize)) % self.DH_ALIGN) // esize
        out = buf[pad:pad + n]
        counter, sms = self._scratch_for(h.device, feat + 2)
        pps = self.PROGRAMS_PER_SM
        prefetch = (_bulk_prefetch(h.device) and feat % 4 == 0 and h.data_ptr() % 16 == 0
                    and h.dtype == torch.float32)

        def grid(meta):
            n_units = triton.cdiv(batch, meta["R"])
            return (max(1, min(triton.cdiv(n_units, meta["W"]), (pps or meta["PPS"]) * sms)),)

        key = (batch, feat, prefetch, h.dtype, h.device)
        block_f = triton.next_power_of_2(feat)
        _launch(_bce_head_kernel, key, grid, h, labels.contiguous(), w, b, out, out[2 + feat:], counter, batch,
                1.0 / batch, F=feat, BLOCK_F=block_f, CW=min(128, block_f), PREFETCH=prefetch,
                BLOCK_S=triton.next_power_of_2(feat + 2))
        return out
