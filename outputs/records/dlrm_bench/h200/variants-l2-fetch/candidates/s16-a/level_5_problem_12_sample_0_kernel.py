"""kbstudy-triton candidate for DLRM-Bench problem 12 (256 -> 1 head, sigmoid, BCE mean loss, forward + backward).

Variant s16-a: ``s15-d`` (shipped in session 16: one launch, one wave, warp-interleaved units of R rows, a
one-round-trip tail, the autotuner ranking configs in the judged state) with **h's bytes in flight held in shared
memory by ``cp.async`` instead of in registers**. Everything but the main loop's loads is s15-d's: the unit mapping
(warp ``w`` of program ``p`` owns, at step ``k``, the R rows ``(k P W + w P + p) R``: every SM gets 248-249 of the
32,768 units), the 128-byte-aligned dL/dh, program 0's zeroed and published head, the arrival at mid-loop, the relaxed
adds into the head, the read-flush ``_bench``, ``_launch``.

**Why.** s15-d keeps each warp's next two steps of h in registers: 2 x 2 KB per warp, 16 warps, so 32-64 KB of h in
flight per SM (8.4 MB in the GPU), which at 4.27 TB/s covers only ~2 us of loaded DRAM latency, while the register
file (64K x 4 B, half of it already holding those tiles at the 128-register cap) allows no more; its L2 bulk prefetches
were the only way further ahead. Here the loop is ``tl.range(0, n_iter, num_stages=NS)``: Triton 3.6's pipeliner
pipelines loads that feed no dot when the loop names its stages, so h's tile ``[W, R, 2, 128]`` (and y's R values per
warp) become 16-byte ``LDGSTS.E.BYPASS.128`` (``cp.async.cg``) into shared memory, ``NS - 1`` steps ahead, and the
registers hold only the step being used. Per SM (one program of 16 warps, 32 KB per step at R = 2): 96-160 KB of h in
flight (12.7-21 MB in the GPU: 3-5 us of DRAM time), 2.5x s15-d's, from the first cycle on (the prologue issues all
NS - 1 steps before any compute), so the DRAM queue does not drain while warps compute or store, and the ramp and
the last steps overlap more. A copy of the same bytes (35.4 us, ``h200-dlrm-s15``) keeps ~128 KB per SM in flight;
s15-d is 39.3-39.6 us. Expected: 1-3 us less (~37-38.5 us, 1.16-1.21x the 31.9 us floor).

**What it costs.** Per step, in the SASS (Triton 3.6, sm_90, config 16 x 2, NS 5): one ``DEPBAR.LE`` (wait for the
step's copies), two ``BAR.SYNC`` (the stage is ready for all warps; the freed stage may be overwritten), 4 ``LDS.128``
(h from shared memory) and one ``LDS.64`` (y), then s15-d's 20 ``SHFL.BFLY``, 4 ``STG.E.128`` and 5 ``LDGSTS`` for
step k + NS - 1. The 16 warps move in lockstep (one program per SM); each step is 32 KB per SM, ~1 us of the SM's share
of the DRAM, far more than its ~150 instructions per warp. The copies carry no L2 eviction hint (Triton drops
``evict_first`` on ``cp.async``; s15-d's register loads had it). No L2 bulk prefetch (the shared-memory stages replace
it). Configs (``cuobjdump -res-usage``, no spills; shared memory = stages + the tail's reductions):

| W x R, NS | warps per SM | registers (cap) | shared | h in flight per SM |
| --- | --- | --- | --- | --- |
| 16 x 2, 4 | 16 | 96 (128) | 96 KB | 96 KB |
| 16 x 2, 5 | 16 | 101 (128) | 129 KB | 128 KB |
| 16 x 2, 6 | 16 | 102 (128) | 161 KB | 160 KB |
| 16 x 1, 8 | 16 | 90 (128) | 113 KB | 112 KB |
| 16 x 1, 11 | 16 | 94 (128) | 161 KB | 160 KB |
| 16 x 4, 3 | 16 | 128 (128) | 129 KB | 128 KB |

(8-warp programs, two per SM, spill 48-56 bytes at the 128-register cap and are left out.) ``x = h w + b``,
``g = (sigmoid(x) - y) / B`` and the loss ``max(x, 0) - x y + log(1 + e)`` from one ``e = exp(-|x|)``;
``dL/dh = g w`` stored from the same registers; per-warp dL/dw sums in registers, reduced across warps once at the end.
Under ``TRITON_INTERPRET=1`` one config runs (the interpreter ignores ``num_stages``).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: W warps per program, each warp R rows per step; NS pipeline stages (NS - 1 steps of h in flight in shared memory,
#: 16 W R NS KB); PPS programs per SM (counts in the docstring: Triton 3.6, sm_90, no spills)
_CONFIGS = [
    triton.Config({"W": 16, "R": 2, "PPS": 1, "NS": 4}, num_warps=16, num_stages=4, maxnreg=128),
    triton.Config({"W": 16, "R": 2, "PPS": 1, "NS": 5}, num_warps=16, num_stages=5, maxnreg=128),
    triton.Config({"W": 16, "R": 2, "PPS": 1, "NS": 6}, num_warps=16, num_stages=6, maxnreg=128),
    triton.Config({"W": 16, "R": 1, "PPS": 1, "NS": 8}, num_warps=16, num_stages=8, maxnreg=128),
    triton.Config({"W": 16, "R": 1, "PPS": 1, "NS": 11}, num_warps=16, num_stages=11, maxnreg=128),
    triton.Config({"W": 16, "R": 4, "PPS": 1, "NS": 3}, num_warps=16, num_stages=3, maxnreg=128),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"W": 2, "R": 2, "PPS": 2, "NS": 3}, num_warps=2, num_stages=3)]


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


@triton.autotune(configs=_CONFIGS, key=["B", "F"], do_bench=_bench)
@triton.jit
def _bce_head_kernel(h_ptr, y_ptr, w_ptr, b_ptr, out_ptr, dh_ptr, count_ptr, B, inv_b,
                     F: tl.constexpr, BLOCK_F: tl.constexpr, CW: tl.constexpr, BLOCK_S: tl.constexpr,
                     W: tl.constexpr, R: tl.constexpr, PPS: tl.constexpr, NS: tl.constexpr):
    # PPS (programs per SM) only sizes the grid (ModelNew.forward); W is the config's num_warps; F is a constexpr.
    # dh_ptr = out_ptr + 2 + F, passed on its own: the forward places it on a 128-byte boundary, so Triton's
    # specialisation sees it 16-byte aligned and h's loads and dL/dh's stores are both 16-byte vectors.
    p = tl.program_id(0)
    P = tl.num_programs(0)
    # the arrival counter: program 0 adds MOD - P + 1 once it has zeroed the head, every other program adds 1, so the
    # launch adds MOD in all; the program that brings it to MOD (the last arrival) sets it back to 0
    MOD: tl.constexpr = 1 << 20
    pt = tl.arange(0, 32 * W)  # one element per thread: lane (pt % 32) of warp (pt // 32)
    zlane = pt == 32 * (W - 1)  # program 0's publishing thread: lane 0 of its last warp
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
    # the grid's units in order, a program's warps P units apart (every program has a warp on the last units, so
    # every SM gets 248-249 of the 32,768 units)
    n_units = tl.cdiv(B, R)
    n_iter = tl.cdiv(n_units - p, NWG)
    lrow = (tl.arange(0, W)[:, None] * P + p) * R + tl.arange(0, R)[None, :]  # [W, R], rows past the step's first
    lrow4 = lrow[:, :, None, None]
    col2 = tl.arange(0, NCH)[:, None] * CW + tl.arange(0, CW)[None, :]  # [NCH, CW]: lanes on CW, 4 columns each
    col4 = col2[None, None, :, :]
    offs = lrow4 * F + col4  # one offset tensor (one register layout) for h's loads and dL/dh's stores
    STEP = NWG * R  # rows per iteration, whole grid
    w4 = tl.load(w_ptr + col4, mask=col4 < F, other=0.0)
    bias = tl.load(b_ptr)
    acc = tl.zeros([W, NCH, CW], dtype=tl.float32)
    gsum = tl.zeros([W, R], dtype=tl.float32)
    lsum = tl.zeros([W, R], dtype=tl.float32)
    # programs other than 0 arrive at iteration kc (mid-loop: the acquiring add's round trip overlaps the NS - 1
    # steps of copies in flight); program 0's add (its first instructions) is long done by then
    kc = tl.where(p == 0, -1, n_iter // 2)
    wait = p < 0  # (False) whether program 0's add had not been read at kc
    # the software pipeliner (num_stages = NS on the loop, Triton >= 3.2 pipelines loads that feed no dot when the
    # loop names its stages) turns h's and y's loads into 16-byte cp.async into shared memory, NS - 1 steps ahead:
    # the bytes in flight live in shared memory (up to 160 KB per SM), not in registers (64 KB per SM in s15-d)
    for k in tl.range(0, n_iter, num_stages=NS):
        base = tl.cast(k, tl.int64) * STEP
        left = tl.minimum(B - base, STEP).to(tl.int32)
        h = tl.load(h_ptr + base * F + offs, mask=_tile_mask(lrow4, col4, left, F, BLOCK_F), other=0.0,
                    eviction_policy="evict_first")
        y = tl.load(y_ptr + base + lrow, mask=lrow < left, other=0.0)
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
    if (n_iter == 0) & (p != 0):  # (not reached by ModelNew's grids, which give every program a unit)
        old = tl.atomic_add(count_ptr, 1, sem="acquire", scope="gpu")
        wait = (old & (MOD - 1)) < MOD - P + 1
        if old == MOD - 1:
            tl.atomic_xchg(count_ptr, 0, sem="relaxed", scope="gpu")
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

        def grid(meta):
            n_units = triton.cdiv(batch, meta["R"])
            return (max(1, min(triton.cdiv(n_units, meta["W"]), (pps or meta["PPS"]) * sms)),)

        key = (batch, feat, h.dtype, h.device)
        block_f = triton.next_power_of_2(feat)
        _launch(_bce_head_kernel, key, grid, h, labels.contiguous(), w, b, out, out[2 + feat:], counter, batch,
                1.0 / batch, F=feat, BLOCK_F=block_f, CW=min(128, block_f),
                BLOCK_S=triton.next_power_of_2(feat + 2))
        return out
