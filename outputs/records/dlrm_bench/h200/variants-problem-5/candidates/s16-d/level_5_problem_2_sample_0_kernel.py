"""kbstudy-triton variant s16-d for DLRM-Bench problem 2 (variable-length EmbeddingBag with per-sample weights).

Variant s16-d: s16-c's kernel (docstring below; same kernel, configs and launcher) with round 1's ``s16-b`` autotuning
benchmark, which ranks the configs as the project judges a kernel (L2 flushed by *reading* a 256 MiB buffer, host
hidden behind a spin kernel, CUDA events) instead of under ``triton.testing.do_bench``'s write flush. Alone on s15-c it
tied (0.993 [0.985, 1.010]); here the configs differ in more than rows in flight: [16 rows] at 168 and [32] at 255
overlap the whole start search with the first rows, [16] at 128, [32] at 184 and [8] at 96 hold more programs but spill
some first-tile row registers in the search's last step, and which trade wins is a cold-start question, ranked here
in the cold state it is judged in.

s16-c's docstring:

**The shipped kernel (s15-c) with problem 1's start and problem 1's balance: exact lookup ranges, the first tile's rows
requested before the start search.** A persistent one-wave grid of ``P = PROGS x SMs`` one-warp programs, s15-c's
two-bag tiles and weighted in-thread sums (one warp per 512-byte row, a tile's ``BLOCK_L`` row gathers issued at once,
the next tile's indices / weights / lengths requested before the sums). What changes is who owns what and when the
first rows leave:

* **Exact ranges.** Range r covers lookups [s, e) = [r T / P, (r + 1) T / P) exactly (T / P or T / P + 1 lookups, not
  s15-c's T / P +- one bag: 105 +- ~20, at most ~155, whose longest programs form the tail). It owns the bags that
  *start* in [s, e). The bag holding lookup s when it began before s (the split bag) belongs to an earlier range:
  range r sums its part of it into a scratch row ``part[r]`` and publishes it (``flag[r] = 1``, release, after a
  barrier). A bag that runs past e is finished by its owner, which adds the parts of the ranges that begin inside it
  (acquire, each flag set back to 0: every flag is 0 after a call). The part of range r + 1 is taken while the owner's
  last tile is in flight (that range published it in its first tiles, ~25 us earlier), so the end of a range waits on
  no extra round trip. Ranges run in reverse program order: a waiting range waits only on lower program ids
  (dispatched first on the GPU; already done under the interpreter, which runs programs in order), and a range
  publishes before it ever waits, so there is no cycle. Extra traffic: one 512-byte part written and read per range
  (~2 MB through the L2 in all).
* **No serial start.** s15-c could not know its first row before its search: SASS ([16 rows], Triton 3.6) chains
  the lengths' first chunk (32 loads per lane, cold), 0-4 dependent 1024-length steps (~170 instructions each), a
  490-instruction ``tl.cumsum``, the loads of l0..l3, then the first indices, then the first rows: five or more
  dependent memory round trips, ~3-5 us in which the DRAM idles for the whole grid (every program is in that phase
  at once). Problem 1's kernel, at 1.10x its copy where 2 is at 1.18x, issues its first rows after one round trip
  (indices). Here the first tile [s, s + BLOCK_L) needs no search: its indices and weights and the search's first
  chunk are requested together, its rows are gathered at once, and the search runs while they are in flight (its
  rows past the first tile's cut, known after the search, are weighted 0 here and summed again from the L2 in the
  next tile). The tile loop is rotated (a tile's rows are gathered at the end of the previous iteration) so that
  the first tile needs no copy of the loop body.

**Registers / occupancy** (sm_90, Triton 3.6 ptxas, ``cuobjdump -res-usage``): [16 rows] 128 under ``maxnreg`` 128
-> 16 programs per SM (256 rows, 128 KB in flight per SM); [16] at 168: 168 -> 12 (192 rows); [32] at 184: 184 -> 11
(352 rows); [8] at 96: 96 -> 21 (168 rows); [32] at 255: 248 -> 8 (256 rows). No spill in any tile loop; every
loop issues the next tile's index loads before its first FFMA and all its row gathers together. [16] at 168 and [32]
at 255 spill nothing at all; [16] at 128, [32] at 184 and [8] at 96 spill 24-28 of the first tile's row registers in
the search's final cumsum (104-112 bytes of stack), so that step waits for the first rows: there the search is
overlapped only up to its last step. The tile loop is 474 instructions per 16 rows on its common path (s15-c 359:
the range end, the split bag's scratch store and the rotated gather), ~30 per row, ~7 M warp instructions in all,
~13k issue cycles per SM sub-partition against ~60k cycles of the kernel: still far from issue-bound.

**Expected**: the first rows ~1 us after the launch instead of ~3-5 us (s15-c), the programs equal to one lookup,
the same ~30 us of gather: ~34-35 us cold device time against s15-c's 36.4 us. ``triton.autotune`` picks the tile
and programs per SM on the GPU (one config under ``TRITON_INTERPRET=1``, which never prefetches).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: BLOCK_L lookups per tile, PROGS one-warp programs per SM (all resident: maxnreg x 32 x PROGS <= 65536, at most 32
#: per SM); maxnreg also keeps ptxas issuing a tile's row loads before the first FFMA. Registers: see the docstring.
_CONFIGS = [
    triton.Config({"BLOCK_L": 16, "PROGS": 16}, num_warps=1, num_stages=1, maxnreg=128),
    triton.Config({"BLOCK_L": 32, "PROGS": 11}, num_warps=1, num_stages=1, maxnreg=184),
    triton.Config({"BLOCK_L": 8, "PROGS": 21}, num_warps=1, num_stages=1, maxnreg=96),
    triton.Config({"BLOCK_L": 16, "PROGS": 12}, num_warps=1, num_stages=1, maxnreg=168),
    triton.Config({"BLOCK_L": 32, "PROGS": 8}, num_warps=1, num_stages=1, maxnreg=255),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"BLOCK_L": 8, "PROGS": 2}, num_warps=1, num_stages=1)]


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
def _prefetch_l2(ptr, nbytes):
    """One thread of the program asks the TMA unit to bring ``nbytes`` (a multiple of 16) from ``ptr`` (16-byte
    aligned) into the L2: ``cp.async.bulk.prefetch.L2`` (sm_90), a hint with no destination, no register and no
    completion to wait for (problem 9's helper)."""
    tl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .u32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; "
        "@p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
        "=r,l,r", [ptr, nbytes], dtype=tl.int32, is_pure=False, pack=1)




@triton.jit
def _first_bag_front(len_ptr, B, s, ln, BLOCK_S: tl.constexpr):
    """(bf, S): the number of bags starting before lookup ``s`` and their lookups, summing the lengths from bag 0 up,
    whole BLOCK_S chunks until the one holding the answer, one cumsum there. ``ln``: the first chunk (lengths 0 ..
    BLOCK_S - 1 as int32, 0 past B), loaded by the caller."""
    i_s = tl.arange(0, BLOCK_S)
    lo = s * 0
    base = s * 0
    cs = tl.sum(ln, axis=0)
    while (base + cs < s) & (lo + BLOCK_S < B):  # every bag of this chunk, and the next one, starts before s
        lo += BLOCK_S
        base += cs
        i = lo + i_s
        ln = tl.load(len_ptr + i, mask=i < B, other=0).to(tl.int32)
        cs = tl.sum(ln, axis=0)
    sel = (tl.cumsum(ln, axis=0) - ln) < s - base  # (lanes past B: their start is the chunk's end, >= s)
    return lo + tl.sum(sel.to(tl.int32), axis=0), base + tl.sum(tl.where(sel, ln, 0), axis=0)


@triton.jit
def _first_bag_back(len_ptr, B, T, s, ln, BLOCK_S: tl.constexpr):
    """As :func:`_first_bag_front`, from bag B - 1 down: bag b starts at or after s iff the lengths from b on sum to
    at most r = T - s. ``ln``: the first chunk (lengths B - BLOCK_S .. B - 1 as int32, 0 below 0)."""
    i_s = tl.arange(0, BLOCK_S)
    r = T - s
    hi = s * 0 + B
    tail = s * 0
    i = hi - BLOCK_S + i_s
    cs = tl.sum(ln, axis=0)
    while (tail + cs <= r) & (hi - BLOCK_S > 0):  # every bag of this chunk starts at or after s
        hi -= BLOCK_S
        tail += cs
        i = hi - BLOCK_S + i_s
        ln = tl.load(len_ptr + i, mask=i >= 0, other=0).to(tl.int32)
        cs = tl.sum(ln, axis=0)
    sel = ((tl.cumsum(ln, axis=0) - ln) >= tail + cs - r) & (i >= 0)
    return hi - tl.sum(sel.to(tl.int32), axis=0), T - tail - tl.sum(tl.where(sel, ln, 0), axis=0)


@triton.autotune(configs=_CONFIGS, key=["B", "D"], do_bench=_bench)
@triton.jit(do_not_specialize=["T"])
def _weighted_bags_kernel(idx_ptr, psw_ptr, len_ptr, w_ptr, out_ptr, part_ptr, flag_ptr, B, T, D,
                          BLOCK_D: tl.constexpr, EVEN_D: tl.constexpr, ROW32: tl.constexpr, BLOCK_S: tl.constexpr,
                          PREFETCH: tl.constexpr, BLOCK_L: tl.constexpr, PROGS: tl.constexpr):
    """Range r = P - 1 - program id covers lookups [s, e) = [r T / P, (r + 1) T / P) exactly: it gathers and weighs
    those rows and no others. It owns the bags that start in [s, e) (range P - 1 also those starting at T). The bag
    holding lookup s when it began before s (the *split* bag, marked ``oa = -1``) is another range's: this range sums
    its part [s, min(bag end, e)) into ``part[r]`` and publishes it (``flag[r] = 1``, release). A bag it owns that runs
    past e: it sums [start, e), then takes the parts of the ranges r + 1, ... that begin inside the bag (acquire,
    resetting each flag to 0, so every flag is 0 again after the call), adds them and stores the bag. Ranges are
    walked in reverse program order so that a waiting range only waits on lower program ids (dispatched earlier on
    the GPU; already finished under the interpreter, which runs programs in order).

    The first tile [s, s + BLOCK_L) needs no search: its indices are loaded and its rows gathered before the first
    bag is searched, so the search (a few dependent length loads and one cumsum) runs while those rows are in flight.
    Loop state per tile as in s15-c: bag ``a`` (holding the tile's first lookup, or empty and starting there), its
    start ``oa`` (-1: the split bag), its end ``ea``, the end ``eb`` of bag a + 1, the lengths ``l2``, ``l3`` of bags
    a + 2 and a + 3, the tile [q, te) (cut at eb, or at ea when bag a + 1 is not this range's, and at e), its weights
    and its rows (gathered at the end of the previous iteration, one tile ahead of the sums). Positions are int32
    (T < 2**31, checked on the host)."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    r = nprog - 1 - pid
    s = (r.to(tl.int64) * T // nprog).to(tl.int32)
    e = ((r + 1).to(tl.int64) * T // nprog).to(tl.int32)
    e_own = tl.where(r == nprog - 1, e + 1, e)
    d = tl.arange(0, BLOCK_D)
    if EVEN_D:
        dmask = d < BLOCK_D
    else:
        dmask = d < D
    zero_d = d * 0  # (masks as vectors: the interpreter mis-types scalar-bool & vector-bool masks)
    t = tl.arange(0, BLOCK_L)
    if PREFETCH:
        # the lengths into the L2 at once, 512 bytes per program, so that the search's later chunks hit the L2; this
        # range's later indices and weights, so that the next tiles' index loads hit the L2
        lb = B * 8 - pid * 512
        if lb >= 16:  # (no zero-byte request)
            _prefetch_l2(len_ptr + pid * 64, tl.minimum(lb, 512) // 16 * 16)
        i0 = (s + BLOCK_L) // 4 * 4
        if e >= i0 + 4:
            _prefetch_l2(idx_ptr + i0, (e - i0) * 8 // 16 * 16)
            _prefetch_l2(psw_ptr + i0, (e - i0) * 4 // 16 * 16)
    # -- the first tile's indices and weights (cold) and the search's first chunk of lengths, requested together
    j = s + t
    rows = tl.load(idx_ptr + j, mask=j < e, other=0)
    if ROW32:
        rows = rows.to(tl.int32)
    psw = tl.load(psw_ptr + j, mask=j < e, other=0.0).to(tl.float32)
    front = s <= T - s
    i_s = tl.arange(0, BLOCK_S)
    li = tl.where(front, i_s, B - BLOCK_S + i_s)
    ln0 = tl.load(len_ptr + li, mask=(li < B) & (li >= 0), other=0).to(tl.int32)
    # -- the first tile's rows, gathered before the search (16-byte vectors, one warp per 512-byte row)
    if EVEN_D:
        vals = tl.load(w_ptr + rows[:, None] * D + d[None, :], mask=(j < e)[:, None], other=0.0)
    else:
        vals = tl.load(w_ptr + rows[:, None] * D + d[None, :], mask=(j < e)[:, None] & dmask[None, :], other=0.0)
    # -- the first bag bf starting at or after s and its start S, from the shorter end of the lengths
    if front:
        bf, S = _first_bag_front(len_ptr, B, s, ln0, BLOCK_S)
    else:
        bf, S = _first_bag_back(len_ptr, B, T, s, ln0, BLOCK_S)
    lb0 = tl.load(len_ptr + bf, mask=bf < B, other=0).to(tl.int32)
    lb1 = tl.load(len_ptr + bf + 1, mask=bf + 1 < B, other=0).to(tl.int32)
    lb2 = tl.load(len_ptr + bf + 2, mask=bf + 2 < B, other=0).to(tl.int32)
    lb3 = tl.load(len_ptr + bf + 3, mask=bf + 3 < B, other=0).to(tl.int32)
    sp = S > s  # bag bf - 1 holds lookup s and began before it: the split bag
    a = tl.where(sp, bf - 1, bf)
    oa = tl.where(sp, -1, S)
    ea = tl.where(sp, S, S + lb0)
    eb = tl.where(sp, S + lb0, S + lb0 + lb1)
    l2 = tl.where(sp, lb1, lb2)
    l3 = tl.where(sp, lb2, lb3)
    own_b = (a + 1 < B) & (ea < e_own)
    q = s
    te = tl.minimum(tl.minimum(s + BLOCK_L, tl.where(own_b, eb, ea)), e)
    psw = tl.where(j < te, psw, 0.0)  # (the first tile's rows past its cut: summed in the next tile)
    carry = tl.zeros([BLOCK_D], dtype=tl.float32)
    pre = tl.zeros([BLOCK_D], dtype=tl.float32)  # range r + 1's part of this range's last bag, taken early
    kp = r + 1  # the first range whose part is still to be taken
    go = (a < B) & (oa < e_own) & (tl.minimum(q, ea - 1) < e)  # bag a is this range's, not left open past e
    while go:
        # the next tile (scalars only), its indices and weights, and the lengths it will need, requested now
        done_a = te >= ea
        done_b = own_b & (te >= eb)
        a_n = a + done_a.to(tl.int32) + done_b.to(tl.int32)
        ea_n = tl.where(done_b, eb + l2, tl.where(done_a, eb, ea))
        eb_n = tl.where(done_b, ea_n + l3, tl.where(done_a, ea_n + l2, eb))
        oa_n = tl.where(done_b, eb, tl.where(done_a, ea, oa))
        own_b_n = (a_n + 1 < B) & (ea_n < e_own)
        te_n = tl.minimum(tl.minimum(te + BLOCK_L, tl.where(own_b_n, eb_n, ea_n)), e)
        jn = te + t
        rows_n = tl.load(idx_ptr + jn, mask=jn < te_n, other=0)
        if ROW32:
            rows_n = rows_n.to(tl.int32)
        psw_n = tl.load(psw_ptr + jn, mask=jn < te_n, other=0.0).to(tl.float32)
        l2 = tl.load(len_ptr + a_n + 2, mask=a_n + 2 < B, other=0).to(tl.int32)
        l3 = tl.load(len_ptr + a_n + 3, mask=a_n + 3 < B, other=0).to(tl.int32)
        # this tile: rows of bag a (j < ea), then rows of bag a + 1; weights applied in registers (FFMA)
        v = vals.to(tl.float32)
        wa = tl.where(j < ea, psw, 0.0)
        wb = psw - wa
        sa = tl.sum(v * wa[:, None], axis=0) + carry
        sb = tl.sum(v * wb[:, None], axis=0)
        split_a = oa < 0
        tl.store(out_ptr + a.to(tl.int64) * D + d, sa.to(out_ptr.dtype.element_ty),
                 mask=dmask & ((zero_d + (done_a & (oa >= 0)).to(tl.int32)) != 0))
        tl.store(part_ptr + r.to(tl.int64) * D + d, sa, mask=dmask & ((zero_d + (done_a & split_a).to(tl.int32)) != 0))
        tl.store(out_ptr + (a + 1).to(tl.int64) * D + d, sb.to(out_ptr.dtype.element_ty),
                 mask=dmask & ((zero_d + done_b.to(tl.int32)) != 0))
        if done_a & split_a:  # the split bag's part: published (every lane's stores before the release)
            tl.debug_barrier()
            tl.atomic_xchg(flag_ptr + r, 1, sem="release", scope="gpu")
        carry = tl.where(done_a, tl.where(done_b, 0.0, sb), sa)
        a = a_n
        ea = ea_n
        eb = eb_n
        oa = oa_n
        own_b = own_b_n
        q = te
        j = jn
        te = te_n
        psw = psw_n
        go = (a < B) & (oa < e_own) & (tl.minimum(q, ea - 1) < e)
        # the next tile's rows: all BLOCK_L gathers issued at once, one tile ahead of their sums
        if EVEN_D:
            vals = tl.load(w_ptr + rows_n[:, None] * D + d[None, :], mask=(jn < te_n)[:, None], other=0.0)
        else:
            vals = tl.load(w_ptr + rows_n[:, None] * D + d[None, :], mask=(jn < te_n)[:, None] & dmask[None, :],
                           other=0.0)
        # the tile just requested ends at e inside a bag of this range that runs past e (bag a, or bag a + 1): range
        # r + 1 began inside it and has published its part long ago; taken now, while the rows are in flight, so
        # that the end of this range waits on no further round trip
        if (te == e) & (kp == r + 1) & (a < B):
            if ((ea > e) & (oa >= 0) & (oa < e_own)) | (own_b & (ea <= e) & (eb > e)):
                got = tl.atomic_xchg(flag_ptr + kp, 0, sem="acquire", scope="gpu")
                while got == 0:
                    got = tl.atomic_xchg(flag_ptr + kp, 0, sem="acquire", scope="gpu")
                pre = tl.load(part_ptr + kp.to(tl.int64) * D + d, mask=dmask, other=0.0, cache_modifier=".cg")
                kp = r + 2
    # -- bag a left open past e (its lookups [.., e) summed in carry)
    if (a < B) & (oa < e_own) & (ea > e):
        if oa < 0:  # the split bag covers the rest of this range: its part published
            tl.store(part_ptr + r.to(tl.int64) * D + d, carry, mask=dmask)
            tl.debug_barrier()
            tl.atomic_xchg(flag_ptr + r, 1, sem="release", scope="gpu")
        else:  # this range's bag: the parts of the ranges that begin inside it added, then stored
            carry += pre
            k = kp
            sk = (k.to(tl.int64) * T // nprog).to(tl.int32)
            while (k < nprog) & (sk < ea):
                got = tl.atomic_xchg(flag_ptr + k, 0, sem="acquire", scope="gpu")
                while got == 0:
                    got = tl.atomic_xchg(flag_ptr + k, 0, sem="acquire", scope="gpu")
                carry += tl.load(part_ptr + k.to(tl.int64) * D + d, mask=dmask, other=0.0, cache_modifier=".cg")
                k += 1
                sk = (k.to(tl.int64) * T // nprog).to(tl.int32)
            tl.store(out_ptr + a.to(tl.int64) * D + d, carry.to(out_ptr.dtype.element_ty), mask=dmask)


#: SMs per device index (the persistent grid's size)
_SMS = {}


def _num_sms(device):
    """Streaming multiprocessors of ``device`` (2 on a CPU, where the interpreter runs the grid in order)."""
    if device.type != "cuda":
        return 2
    idx = device.index if device.index is not None else torch.cuda.current_device()
    n = _SMS.get(idx)
    if n is None:
        n = _SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return n


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
    """Same parameters as the problem's ``Model``; forward is one Triton launch."""

    #: lengths per step of the start search (smaller only in tests)
    BLOCK_S = 1024

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.bag = nn.EmbeddingBag(num_embeddings, embedding_dim, mode="sum", include_last_offset=True)
        self._scratch = {}

    def _scratch_for(self, device, dim: int, programs: int):
        """(part, flag) for ``device``: fp32 [programs, dim] split-bag parts (written before they are read in every
        call) and int32 [programs] flags, zero between calls (each call's waiting ranges set back to 0 every flag that
        its publishing ranges set); allocated once per device and dimension, larger when more programs need it."""
        key = (str(device), dim)
        entry = self._scratch.get(key)
        if entry is None or entry[1].numel() < programs:
            entry = (torch.empty(programs, dim, device=device, dtype=torch.float32),
                     torch.zeros(programs, device=device, dtype=torch.int32))
            self._scratch[key] = entry
        return entry

    def forward(self, indices, lengths, per_sample_weights):
        weight = self.bag.weight
        batch = lengths.shape[0]
        dim = weight.shape[1]
        total = indices.shape[0]
        out = torch.empty(batch, dim, device=weight.device, dtype=weight.dtype)
        if batch == 0:
            return out
        if total >= 2**31 - 1 or batch >= 2**31 - 1:
            raise ValueError("positions are int32 in this kernel")
        block_d = triton.next_power_of_2(dim)
        sms = _num_sms(weight.device)
        part, flag = self._scratch_for(weight.device, dim, max(c.kwargs["PROGS"] for c in _CONFIGS) * sms)
        idx, psw, lens = indices.contiguous(), per_sample_weights.contiguous(), lengths.contiguous()
        prefetch = _bulk_prefetch(weight.device) and all(x.data_ptr() % 16 == 0 for x in (idx, psw, lens))
        key = (batch, dim, indices.dtype, lengths.dtype, per_sample_weights.dtype, weight.dtype, weight.device)
        _launch(_weighted_bags_kernel, key, lambda meta: (meta["PROGS"] * sms,),
                idx, psw, lens, weight, out, part, flag, batch,
                total, dim, BLOCK_D=block_d, EVEN_D=block_d == dim, ROW32=weight.numel() < 2**31,
                BLOCK_S=self.BLOCK_S, PREFETCH=prefetch)
        return out
