"""kbstudy-triton candidate for DLRM-Bench problem 6 (int8 row-wise quantized EmbeddingBag, dequantize + sum).
Session 15's variant ``s15-d`` (round 2): ``s15-c``'s kernel plus an L2 prefetch of the rows K tiles ahead.

**The kernel** is ``s15-c``'s (see its docstring): one warp per program walks its bags' lookups as one stream of
4-row tiles, 8 lanes per row (16 codes per lane, ~16 warp instructions per row), K tile slots in registers, each
slot issuing tile c + j + K's row loads before summing tile c + j. **What this variant adds (``PF``):** each slot
also asks the TMA unit to bring tile c + j + 2K's rows into the L2 (``cp.async.bulk.prefetch.L2``, sm_90: no
destination register, nothing to wait for; 144 bytes from the row's start rounded down to 16 bytes, exactly the
row's five 32-byte sectors), so a row is requested from DRAM K tiles before its register load, which then hits the
L2. Rows in flight at the DRAM are no longer bounded by registers: per warp 4K in registers plus 4K prefetched; ids
are loaded 3K tiles ahead (one more register per slot). [K 8, cap 128] 127 registers, 16 programs per SM (2048 of 4
bags): 64 rows per warp at the DRAM, ~990 per SM (~160 KB, 21 MB on 132 SMs, within the 60 MB L2); [K 6, cap 96]
95 -> 21 per SM (2731 of 3 bags), 48 per warp, ~990 per SM; [K 3, cap 64] 64 -> 32 per SM (4096 of 2 bags), 24 per
warp, ~740 per SM. The last config is ``s15-c``'s best guess without the prefetch ([K 11, cap 128], 682 per SM), so
the autotuner can fall back to it.

**The cost (Triton 3.6 SASS):** the prefetch's address must be warp-uniform, so ptxas wraps it in a loop over the
tile's 4 distinct rows (VOTEU / R2UR / UBLKPF, 8 instructions an iteration) plus ~14 to form the addresses: ~46 more
per tile, ~27.5 warp instructions per row instead of ~16 -> ~43k issue cycles per scheduler (~23 us at 1.9 GHz),
still below the ~33 us of DRAM time for the moved bytes. The table's last row is not prefetched (its rounded span
may pass the buffer's end), nor is anything if the table is not 16-byte aligned (``PF_BYTES`` 0). Under
``TRITON_INTERPRET=1`` the prefetch's id bookkeeping runs (no inline assembly there).

**Bytes** as ``s15-c``: ~142 MB moved (every lookup's five sectors, ids, output), 33 us at the copy rate against the
26.2 us floor. Expected: below ``s15-c`` if the DRAM's random-sector rate still has room at ~680 rows in flight per
SM; if it does not, the extra instructions cost ~1-2 us and the autotuner's [K 11] config is the fallback.
"""
import math
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: K tile slots of T = 4 rows in registers per warp, PF: the next K tiles' rows prefetched into the L2; PROGS one-warp
#: programs per SM, all resident (65536 / (maxnreg x 32)); Triton 3.6 ptxas, sm_90
_CONFIGS = [
    triton.Config({"K": 8, "PF": True, "PROGS": 16}, num_warps=1, num_stages=1, maxnreg=128),
    triton.Config({"K": 6, "PF": True, "PROGS": 21}, num_warps=1, num_stages=1, maxnreg=96),
    triton.Config({"K": 3, "PF": True, "PROGS": 32}, num_warps=1, num_stages=1, maxnreg=64),
    triton.Config({"K": 11, "PF": False, "PROGS": 16}, num_warps=1, num_stages=1, maxnreg=128),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"K": 3, "PF": True, "PROGS": 2}, num_warps=1, num_stages=1)]


def _bench(kernel_call, quantiles):
    """Autotuning benchmark: ``triton.testing.do_bench`` with 5 ms of warm-up and 25 ms of timed calls (instead of
    25 / 100) per config, to keep the first call's tuning short."""
    return triton.testing.do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)


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
def _code_minus_128(words, k: tl.constexpr, PRMT: tl.constexpr):
    """Byte k of each int32 word (a code c), as the fp32 c - 128, exactly: the bits ``0x4B0000cc`` are the fp32
    2^23 + c (one ``prmt`` on the GPU: bytes [c, 0, 0, 0x4B]); subtracting 2^23 + 128 leaves c - 128."""
    if PRMT:
        if k == 0:
            bits = tl.inline_asm_elementwise("prmt.b32 $0, $1, 0x4B000000, 0x7540;", "=r,r", [words],
                                             dtype=tl.int32, is_pure=True, pack=1)
        elif k == 1:
            bits = tl.inline_asm_elementwise("prmt.b32 $0, $1, 0x4B000000, 0x7541;", "=r,r", [words],
                                             dtype=tl.int32, is_pure=True, pack=1)
        elif k == 2:
            bits = tl.inline_asm_elementwise("prmt.b32 $0, $1, 0x4B000000, 0x7542;", "=r,r", [words],
                                             dtype=tl.int32, is_pure=True, pack=1)
        else:
            bits = tl.inline_asm_elementwise("prmt.b32 $0, $1, 0x4B000000, 0x7543;", "=r,r", [words],
                                             dtype=tl.int32, is_pure=True, pack=1)
    else:
        bits = ((words >> (8 * k)) & 0xFF) | 0x4B000000
    return bits.to(tl.float32, bitcast=True) - 8388736.0


@triton.jit
def _tile_idx(idx_ptr, c, n_t, b0, t, L: tl.constexpr, T: tl.constexpr, S: tl.constexpr, ISTRIDE: tl.constexpr,
              EVEN: tl.constexpr, SMALL: tl.constexpr):
    """Row ids of tile ``c`` of the program's stream: bag b0 + c // S, lookups T (c % S) + t. EVEN (L a multiple
    of T): a tile past the end is the last tile again; otherwise a lookup past its bag's end or the stream's is -1.
    ISTRIDE 2: ``idx_ptr`` is the int64 ids as int32 words, the low word read (SMALL: ids below 2^31)."""
    if EVEN:
        cc = tl.minimum(c, n_t - 1)
        if SMALL:
            pos = b0 * L + cc * T + t
        else:
            pos = b0.to(tl.int64) * L + cc * T + t
        r = tl.load(idx_ptr + ISTRIDE * pos)
    else:
        g = c // S
        k = c - g * S
        if SMALL:
            pos = (b0 + g) * L + k * T + t
        else:
            pos = (b0 + g).to(tl.int64) * L + k * T + t
        valid = (k * T + t < L) & (t * 0 + c < n_t)
        r = tl.load(idx_ptr + ISTRIDE * pos, mask=valid, other=-1)
    return r


@triton.jit
def _tile_rows(qw_lane, qw_sb, r, wlo, whi, ROW_WORDS: tl.constexpr, HALF: tl.constexpr, WFULL: tl.constexpr,
               EVEN: tl.constexpr, SMALL: tl.constexpr):
    """The tile's rows ``r`` ([T]) as [T, HALF] words: ``lo`` words 0 .. HALF - 1, ``hi`` words HALF .. 2 HALF - 1,
    and in the same layout their (scale, bias) pairs (even w: scale, odd w: bias). ``qw_lane`` / ``qw_sb``: the
    table's pointer plus each lane's word offset (w, or D/4 + w % 2), so a row costs one wide multiply-add per
    pointer (``hi`` is ``lo``'s address plus a constant). A row id -1 (no lookup) reads row 0's codes and a zero
    (scale, bias): it adds nothing."""
    if not EVEN:
        ok = (r >= 0)[:, None] & (wlo | True)
        r = tl.maximum(r, 0)
    if SMALL:  # row < 2^31: a zero-extended 32-bit row times the row's size
        off = (r.to(tl.uint32).to(tl.int64) * ROW_WORDS)[:, None]
    else:
        off = (r.to(tl.int64) * ROW_WORDS)[:, None]
    p = qw_lane + off
    if WFULL:
        lo = tl.load(p)
        hi = tl.load(p + HALF)
    else:
        lo = tl.load(p, mask=wlo, other=0)
        hi = tl.load(p + HALF, mask=whi, other=0)
    if EVEN:
        sb = tl.load(qw_sb + off)
    else:
        sb = tl.load(qw_sb + off, mask=ok, other=0)
    return lo, hi, sb


@triton.jit
def _prefetch_rows(qw_ptr, r, lead, n_rows, ROW_WORDS: tl.constexpr, PF_BYTES: tl.constexpr, SMALL: tl.constexpr):
    """One lane per row (``lead``, [1, Q]: 1 on a row's first lane) asks the TMA unit to bring the row into the L2:
    ``cp.async.bulk.prefetch.L2`` (sm_90) of PF_BYTES from the row's start rounded down to 16 bytes (for D = 128:
    144 bytes, exactly the row's five 32-byte sectors), a hint with no destination register and nothing to wait for.
    The table's last row is not prefetched (its rounded span may pass the buffer's end); nor is a row id -1."""
    if SMALL:
        wo = (r.to(tl.uint32).to(tl.int64) * ROW_WORDS) & -4  # words, 16-byte aligned
    else:
        wo = (r.to(tl.int64) * ROW_WORDS) & -4
    go = lead * ((r >= 0) & (r < n_rows - 1)).to(tl.int32)[:, None]  # [T, Q]
    p = (qw_ptr + wo)[:, None] + go * 0
    tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.s32 p, $2, 0; @p cp.async.bulk.prefetch.L2.global [$1], $3; mov.u32 $0, 0; }",
        "=r,l,r,r", [p, go, go * 0 + PF_BYTES], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _acc_tile(lo, hi, sb, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, T: tl.constexpr, Q: tl.constexpr,
              PRMT: tl.constexpr):
    """Adds one tile (T rows): c s + b = (c - 128) s + (b + 128 s). a{k} / h{k} [T, Q]: byte k of the even words
    (k 0-3) and of the odd words (4-7) of each lane's pair in ``lo`` / ``hi``; ``ab`` the rows' b + 128 s."""
    sc, bi = tl.split(tl.reshape(sb.to(tl.float32, bitcast=True), [T, Q, 2]))
    l0, l1 = tl.split(tl.reshape(lo, [T, Q, 2]))
    u0, u1 = tl.split(tl.reshape(hi, [T, Q, 2]))
    ab += bi + 128.0 * sc
    a0 += _code_minus_128(l0, 0, PRMT) * sc
    a1 += _code_minus_128(l0, 1, PRMT) * sc
    a2 += _code_minus_128(l0, 2, PRMT) * sc
    a3 += _code_minus_128(l0, 3, PRMT) * sc
    a4 += _code_minus_128(l1, 0, PRMT) * sc
    a5 += _code_minus_128(l1, 1, PRMT) * sc
    a6 += _code_minus_128(l1, 2, PRMT) * sc
    a7 += _code_minus_128(l1, 3, PRMT) * sc
    h0 += _code_minus_128(u0, 0, PRMT) * sc
    h1 += _code_minus_128(u0, 1, PRMT) * sc
    h2 += _code_minus_128(u0, 2, PRMT) * sc
    h3 += _code_minus_128(u0, 3, PRMT) * sc
    h4 += _code_minus_128(u1, 0, PRMT) * sc
    h5 += _code_minus_128(u1, 1, PRMT) * sc
    h6 += _code_minus_128(u1, 2, PRMT) * sc
    h7 += _code_minus_128(u1, 3, PRMT) * sc
    return a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab


@triton.jit
def _store_bag(out_ptr, bag, b_end, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, D: tl.constexpr,
               HALF: tl.constexpr, Q: tl.constexpr):
    """out[bag, c] (if bag < b_end): the sums over the T row slots of the accumulators (+ the bias sums); lane pair
    q of ``lo`` holds columns 8 q .. 8 q + 7, of ``hi`` columns 4 HALF + 8 q .. 4 HALF + 8 q + 7."""
    N_WORDS: tl.constexpr = D // 4
    q = tl.arange(0, Q)
    o = out_ptr + bag.to(tl.int64) * D + 8 * q
    ok = (q * 0 + bag) < b_end
    m0 = ok & (2 * q < N_WORDS)
    m1 = ok & (2 * q + 1 < N_WORDS)
    m2 = ok & (HALF + 2 * q < N_WORDS)
    m3 = ok & (HALF + 2 * q + 1 < N_WORDS)
    bsum = tl.sum(ab, axis=0)
    tl.store(o, tl.sum(a0, axis=0) + bsum, mask=m0)
    tl.store(o + 1, tl.sum(a1, axis=0) + bsum, mask=m0)
    tl.store(o + 2, tl.sum(a2, axis=0) + bsum, mask=m0)
    tl.store(o + 3, tl.sum(a3, axis=0) + bsum, mask=m0)
    tl.store(o + 4, tl.sum(a4, axis=0) + bsum, mask=m1)
    tl.store(o + 5, tl.sum(a5, axis=0) + bsum, mask=m1)
    tl.store(o + 6, tl.sum(a6, axis=0) + bsum, mask=m1)
    tl.store(o + 7, tl.sum(a7, axis=0) + bsum, mask=m1)
    oh = o + 4 * HALF
    tl.store(oh, tl.sum(h0, axis=0) + bsum, mask=m2)
    tl.store(oh + 1, tl.sum(h1, axis=0) + bsum, mask=m2)
    tl.store(oh + 2, tl.sum(h2, axis=0) + bsum, mask=m2)
    tl.store(oh + 3, tl.sum(h3, axis=0) + bsum, mask=m2)
    tl.store(oh + 4, tl.sum(h4, axis=0) + bsum, mask=m3)
    tl.store(oh + 5, tl.sum(h5, axis=0) + bsum, mask=m3)
    tl.store(oh + 6, tl.sum(h6, axis=0) + bsum, mask=m3)
    tl.store(oh + 7, tl.sum(h7, axis=0) + bsum, mask=m3)


@triton.autotune(configs=_CONFIGS, key=["L", "D"], do_bench=_bench)
@triton.jit
def _int8_bag_kernel(idx_ptr, qw_ptr, out_ptr, B, n_rows, L: tl.constexpr, D: tl.constexpr, HALF: tl.constexpr,
                     T: tl.constexpr, ISTRIDE: tl.constexpr, SMALL: tl.constexpr, PRMT: tl.constexpr,
                     PF_BYTES: tl.constexpr, K: tl.constexpr, PF: tl.constexpr, PROGS: tl.constexpr):
    """qw_ptr: the quantized table as int32 words, [N, D/4 + 2]; word w of a row holds codes 4w .. 4w+3
    (little-endian), words D/4 and D/4 + 1 the fp32 scale and bias. A program owns ``gpp`` consecutive bags and
    walks their lookups as one stream of tiles of T lookups of one bag ([T, HALF] words each half row: Q = HALF / 2
    lanes per row, T rows side by side per warp). K slots: slot j holds tile c + j's rows (being summed) and tile
    c + j + K's row ids; each step issues tile c + j + K's row loads and tile c + j + 2K's id load before summing
    tile c + j, so K tiles of rows are always in flight. A bag's last tile stores it."""
    N_WORDS: tl.constexpr = D // 4
    ROW_WORDS: tl.constexpr = D // 4 + 2
    Q: tl.constexpr = HALF // 2
    WFULL: tl.constexpr = N_WORDS == 2 * HALF
    EVEN: tl.constexpr = L % T == 0
    S: tl.constexpr = (L + T - 1) // T  # tiles per bag
    tl.static_assert((K >= 2) and (K <= 12), "K slots: 2 .. the slots written out")
    gpp = tl.cdiv(B, tl.num_programs(0))
    b0 = tl.program_id(0) * gpp
    nb = tl.minimum(gpp, B - b0)
    b_end = b0 + nb
    if L > 0:
        n_t = nb * S
        if n_t > 0:
            t = tl.arange(0, T)
            w = tl.arange(0, HALF)[None, :]
            wlo = w < N_WORDS
            whi = HALF + w < N_WORDS
            qw_lane = qw_ptr + w  # each lane's words of row 0
            qw_sb = qw_ptr + (N_WORDS + w % 2)  # each lane's (scale, bias) pair of row 0
            if PF:
                lead = (tl.arange(0, Q) == 0).to(tl.int32)[None, :]
            lo0, hi0, sb0 = _tile_rows(qw_lane, qw_sb, _tile_idx(idx_ptr, 0, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL), wlo,
                                           whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
            r0 = _tile_idx(idx_ptr, K + 0, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
            if PF:
                p0 = _tile_idx(idx_ptr, 2 * K + 0, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                if PRMT and PF_BYTES > 0:
                    _prefetch_rows(qw_ptr, r0, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
            lo1, hi1, sb1 = _tile_rows(qw_lane, qw_sb, _tile_idx(idx_ptr, 1, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL), wlo,
                                           whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
            r1 = _tile_idx(idx_ptr, K + 1, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
            if PF:
                p1 = _tile_idx(idx_ptr, 2 * K + 1, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                if PRMT and PF_BYTES > 0:
                    _prefetch_rows(qw_ptr, r1, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
            if K > 2:
                lo2, hi2, sb2 = _tile_rows(qw_lane, qw_sb, _tile_idx(idx_ptr, 2, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL), wlo,
                                               whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                r2 = _tile_idx(idx_ptr, K + 2, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                if PF:
                    p2 = _tile_idx(idx_ptr, 2 * K + 2, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    if PRMT and PF_BYTES > 0:
                        _prefetch_rows(qw_ptr, r2, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
            if K > 3:
                lo3, hi3, sb3 = _tile_rows(qw_lane, qw_sb, _tile_idx(idx_ptr, 3, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL), wlo,
                                               whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                r3 = _tile_idx(idx_ptr, K + 3, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                if PF:
                    p3 = _tile_idx(idx_ptr, 2 * K + 3, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    if PRMT and PF_BYTES > 0:
                        _prefetch_rows(qw_ptr, r3, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
            if K > 4:
                lo4, hi4, sb4 = _tile_rows(qw_lane, qw_sb, _tile_idx(idx_ptr, 4, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL), wlo,
                                               whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                r4 = _tile_idx(idx_ptr, K + 4, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                if PF:
                    p4 = _tile_idx(idx_ptr, 2 * K + 4, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    if PRMT and PF_BYTES > 0:
                        _prefetch_rows(qw_ptr, r4, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
            if K > 5:
                lo5, hi5, sb5 = _tile_rows(qw_lane, qw_sb, _tile_idx(idx_ptr, 5, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL), wlo,
                                               whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                r5 = _tile_idx(idx_ptr, K + 5, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                if PF:
                    p5 = _tile_idx(idx_ptr, 2 * K + 5, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    if PRMT and PF_BYTES > 0:
                        _prefetch_rows(qw_ptr, r5, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
            if K > 6:
                lo6, hi6, sb6 = _tile_rows(qw_lane, qw_sb, _tile_idx(idx_ptr, 6, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL), wlo,
                                               whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                r6 = _tile_idx(idx_ptr, K + 6, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                if PF:
                    p6 = _tile_idx(idx_ptr, 2 * K + 6, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    if PRMT and PF_BYTES > 0:
                        _prefetch_rows(qw_ptr, r6, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
            if K > 7:
                lo7, hi7, sb7 = _tile_rows(qw_lane, qw_sb, _tile_idx(idx_ptr, 7, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL), wlo,
                                               whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                r7 = _tile_idx(idx_ptr, K + 7, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                if PF:
                    p7 = _tile_idx(idx_ptr, 2 * K + 7, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    if PRMT and PF_BYTES > 0:
                        _prefetch_rows(qw_ptr, r7, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
            if K > 8:
                lo8, hi8, sb8 = _tile_rows(qw_lane, qw_sb, _tile_idx(idx_ptr, 8, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL), wlo,
                                               whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                r8 = _tile_idx(idx_ptr, K + 8, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                if PF:
                    p8 = _tile_idx(idx_ptr, 2 * K + 8, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    if PRMT and PF_BYTES > 0:
                        _prefetch_rows(qw_ptr, r8, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
            if K > 9:
                lo9, hi9, sb9 = _tile_rows(qw_lane, qw_sb, _tile_idx(idx_ptr, 9, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL), wlo,
                                               whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                r9 = _tile_idx(idx_ptr, K + 9, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                if PF:
                    p9 = _tile_idx(idx_ptr, 2 * K + 9, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    if PRMT and PF_BYTES > 0:
                        _prefetch_rows(qw_ptr, r9, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
            if K > 10:
                lo10, hi10, sb10 = _tile_rows(qw_lane, qw_sb, _tile_idx(idx_ptr, 10, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL), wlo,
                                               whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                r10 = _tile_idx(idx_ptr, K + 10, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                if PF:
                    p10 = _tile_idx(idx_ptr, 2 * K + 10, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    if PRMT and PF_BYTES > 0:
                        _prefetch_rows(qw_ptr, r10, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
            if K > 11:
                lo11, hi11, sb11 = _tile_rows(qw_lane, qw_sb, _tile_idx(idx_ptr, 11, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL), wlo,
                                               whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                r11 = _tile_idx(idx_ptr, K + 11, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                if PF:
                    p11 = _tile_idx(idx_ptr, 2 * K + 11, n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    if PRMT and PF_BYTES > 0:
                        _prefetch_rows(qw_ptr, r11, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
            a0 = tl.zeros([T, Q], dtype=tl.float32)
            a1 = tl.zeros([T, Q], dtype=tl.float32)
            a2 = tl.zeros([T, Q], dtype=tl.float32)
            a3 = tl.zeros([T, Q], dtype=tl.float32)
            a4 = tl.zeros([T, Q], dtype=tl.float32)
            a5 = tl.zeros([T, Q], dtype=tl.float32)
            a6 = tl.zeros([T, Q], dtype=tl.float32)
            a7 = tl.zeros([T, Q], dtype=tl.float32)
            h0 = tl.zeros([T, Q], dtype=tl.float32)
            h1 = tl.zeros([T, Q], dtype=tl.float32)
            h2 = tl.zeros([T, Q], dtype=tl.float32)
            h3 = tl.zeros([T, Q], dtype=tl.float32)
            h4 = tl.zeros([T, Q], dtype=tl.float32)
            h5 = tl.zeros([T, Q], dtype=tl.float32)
            h6 = tl.zeros([T, Q], dtype=tl.float32)
            h7 = tl.zeros([T, Q], dtype=tl.float32)
            ab = tl.zeros([T, Q], dtype=tl.float32)
            kc = 0  # tiles of the current bag summed
            bag = b0
            for c in range(0, n_t, K):
                nlo, nhi, nsb = _tile_rows(qw_lane, qw_sb, r0, wlo, whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                if PF:
                    if PRMT and PF_BYTES > 0:
                        _prefetch_rows(qw_ptr, p0, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
                    r0 = p0
                    p0 = _tile_idx(idx_ptr, c + (3 * K + 0), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                else:
                    r0 = _tile_idx(idx_ptr, c + (2 * K + 0), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab = _acc_tile(
                    lo0, hi0, sb0, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, T, Q, PRMT)
                lo0 = nlo
                hi0 = nhi
                sb0 = nsb
                kc += 1
                if kc == S:
                    _store_bag(out_ptr, bag, b_end, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, D, HALF, Q)
                    a0 = tl.zeros([T, Q], dtype=tl.float32)
                    a1 = tl.zeros([T, Q], dtype=tl.float32)
                    a2 = tl.zeros([T, Q], dtype=tl.float32)
                    a3 = tl.zeros([T, Q], dtype=tl.float32)
                    a4 = tl.zeros([T, Q], dtype=tl.float32)
                    a5 = tl.zeros([T, Q], dtype=tl.float32)
                    a6 = tl.zeros([T, Q], dtype=tl.float32)
                    a7 = tl.zeros([T, Q], dtype=tl.float32)
                    h0 = tl.zeros([T, Q], dtype=tl.float32)
                    h1 = tl.zeros([T, Q], dtype=tl.float32)
                    h2 = tl.zeros([T, Q], dtype=tl.float32)
                    h3 = tl.zeros([T, Q], dtype=tl.float32)
                    h4 = tl.zeros([T, Q], dtype=tl.float32)
                    h5 = tl.zeros([T, Q], dtype=tl.float32)
                    h6 = tl.zeros([T, Q], dtype=tl.float32)
                    h7 = tl.zeros([T, Q], dtype=tl.float32)
                    ab = tl.zeros([T, Q], dtype=tl.float32)
                    kc -= S
                    bag += 1
                nlo, nhi, nsb = _tile_rows(qw_lane, qw_sb, r1, wlo, whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                if PF:
                    if PRMT and PF_BYTES > 0:
                        _prefetch_rows(qw_ptr, p1, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
                    r1 = p1
                    p1 = _tile_idx(idx_ptr, c + (3 * K + 1), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                else:
                    r1 = _tile_idx(idx_ptr, c + (2 * K + 1), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab = _acc_tile(
                    lo1, hi1, sb1, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, T, Q, PRMT)
                lo1 = nlo
                hi1 = nhi
                sb1 = nsb
                kc += 1
                if kc == S:
                    _store_bag(out_ptr, bag, b_end, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, D, HALF, Q)
                    a0 = tl.zeros([T, Q], dtype=tl.float32)
                    a1 = tl.zeros([T, Q], dtype=tl.float32)
                    a2 = tl.zeros([T, Q], dtype=tl.float32)
                    a3 = tl.zeros([T, Q], dtype=tl.float32)
                    a4 = tl.zeros([T, Q], dtype=tl.float32)
                    a5 = tl.zeros([T, Q], dtype=tl.float32)
                    a6 = tl.zeros([T, Q], dtype=tl.float32)
                    a7 = tl.zeros([T, Q], dtype=tl.float32)
                    h0 = tl.zeros([T, Q], dtype=tl.float32)
                    h1 = tl.zeros([T, Q], dtype=tl.float32)
                    h2 = tl.zeros([T, Q], dtype=tl.float32)
                    h3 = tl.zeros([T, Q], dtype=tl.float32)
                    h4 = tl.zeros([T, Q], dtype=tl.float32)
                    h5 = tl.zeros([T, Q], dtype=tl.float32)
                    h6 = tl.zeros([T, Q], dtype=tl.float32)
                    h7 = tl.zeros([T, Q], dtype=tl.float32)
                    ab = tl.zeros([T, Q], dtype=tl.float32)
                    kc -= S
                    bag += 1
                if K > 2:
                    nlo, nhi, nsb = _tile_rows(qw_lane, qw_sb, r2, wlo, whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                    if PF:
                        if PRMT and PF_BYTES > 0:
                            _prefetch_rows(qw_ptr, p2, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
                        r2 = p2
                        p2 = _tile_idx(idx_ptr, c + (3 * K + 2), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    else:
                        r2 = _tile_idx(idx_ptr, c + (2 * K + 2), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab = _acc_tile(
                        lo2, hi2, sb2, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, T, Q, PRMT)
                    lo2 = nlo
                    hi2 = nhi
                    sb2 = nsb
                    kc += 1
                    if kc == S:
                        _store_bag(out_ptr, bag, b_end, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, D, HALF, Q)
                        a0 = tl.zeros([T, Q], dtype=tl.float32)
                        a1 = tl.zeros([T, Q], dtype=tl.float32)
                        a2 = tl.zeros([T, Q], dtype=tl.float32)
                        a3 = tl.zeros([T, Q], dtype=tl.float32)
                        a4 = tl.zeros([T, Q], dtype=tl.float32)
                        a5 = tl.zeros([T, Q], dtype=tl.float32)
                        a6 = tl.zeros([T, Q], dtype=tl.float32)
                        a7 = tl.zeros([T, Q], dtype=tl.float32)
                        h0 = tl.zeros([T, Q], dtype=tl.float32)
                        h1 = tl.zeros([T, Q], dtype=tl.float32)
                        h2 = tl.zeros([T, Q], dtype=tl.float32)
                        h3 = tl.zeros([T, Q], dtype=tl.float32)
                        h4 = tl.zeros([T, Q], dtype=tl.float32)
                        h5 = tl.zeros([T, Q], dtype=tl.float32)
                        h6 = tl.zeros([T, Q], dtype=tl.float32)
                        h7 = tl.zeros([T, Q], dtype=tl.float32)
                        ab = tl.zeros([T, Q], dtype=tl.float32)
                        kc -= S
                        bag += 1
                if K > 3:
                    nlo, nhi, nsb = _tile_rows(qw_lane, qw_sb, r3, wlo, whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                    if PF:
                        if PRMT and PF_BYTES > 0:
                            _prefetch_rows(qw_ptr, p3, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
                        r3 = p3
                        p3 = _tile_idx(idx_ptr, c + (3 * K + 3), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    else:
                        r3 = _tile_idx(idx_ptr, c + (2 * K + 3), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab = _acc_tile(
                        lo3, hi3, sb3, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, T, Q, PRMT)
                    lo3 = nlo
                    hi3 = nhi
                    sb3 = nsb
                    kc += 1
                    if kc == S:
                        _store_bag(out_ptr, bag, b_end, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, D, HALF, Q)
                        a0 = tl.zeros([T, Q], dtype=tl.float32)
                        a1 = tl.zeros([T, Q], dtype=tl.float32)
                        a2 = tl.zeros([T, Q], dtype=tl.float32)
                        a3 = tl.zeros([T, Q], dtype=tl.float32)
                        a4 = tl.zeros([T, Q], dtype=tl.float32)
                        a5 = tl.zeros([T, Q], dtype=tl.float32)
                        a6 = tl.zeros([T, Q], dtype=tl.float32)
                        a7 = tl.zeros([T, Q], dtype=tl.float32)
                        h0 = tl.zeros([T, Q], dtype=tl.float32)
                        h1 = tl.zeros([T, Q], dtype=tl.float32)
                        h2 = tl.zeros([T, Q], dtype=tl.float32)
                        h3 = tl.zeros([T, Q], dtype=tl.float32)
                        h4 = tl.zeros([T, Q], dtype=tl.float32)
                        h5 = tl.zeros([T, Q], dtype=tl.float32)
                        h6 = tl.zeros([T, Q], dtype=tl.float32)
                        h7 = tl.zeros([T, Q], dtype=tl.float32)
                        ab = tl.zeros([T, Q], dtype=tl.float32)
                        kc -= S
                        bag += 1
                if K > 4:
                    nlo, nhi, nsb = _tile_rows(qw_lane, qw_sb, r4, wlo, whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                    if PF:
                        if PRMT and PF_BYTES > 0:
                            _prefetch_rows(qw_ptr, p4, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
                        r4 = p4
                        p4 = _tile_idx(idx_ptr, c + (3 * K + 4), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    else:
                        r4 = _tile_idx(idx_ptr, c + (2 * K + 4), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab = _acc_tile(
                        lo4, hi4, sb4, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, T, Q, PRMT)
                    lo4 = nlo
                    hi4 = nhi
                    sb4 = nsb
                    kc += 1
                    if kc == S:
                        _store_bag(out_ptr, bag, b_end, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, D, HALF, Q)
                        a0 = tl.zeros([T, Q], dtype=tl.float32)
                        a1 = tl.zeros([T, Q], dtype=tl.float32)
                        a2 = tl.zeros([T, Q], dtype=tl.float32)
                        a3 = tl.zeros([T, Q], dtype=tl.float32)
                        a4 = tl.zeros([T, Q], dtype=tl.float32)
                        a5 = tl.zeros([T, Q], dtype=tl.float32)
                        a6 = tl.zeros([T, Q], dtype=tl.float32)
                        a7 = tl.zeros([T, Q], dtype=tl.float32)
                        h0 = tl.zeros([T, Q], dtype=tl.float32)
                        h1 = tl.zeros([T, Q], dtype=tl.float32)
                        h2 = tl.zeros([T, Q], dtype=tl.float32)
                        h3 = tl.zeros([T, Q], dtype=tl.float32)
                        h4 = tl.zeros([T, Q], dtype=tl.float32)
                        h5 = tl.zeros([T, Q], dtype=tl.float32)
                        h6 = tl.zeros([T, Q], dtype=tl.float32)
                        h7 = tl.zeros([T, Q], dtype=tl.float32)
                        ab = tl.zeros([T, Q], dtype=tl.float32)
                        kc -= S
                        bag += 1
                if K > 5:
                    nlo, nhi, nsb = _tile_rows(qw_lane, qw_sb, r5, wlo, whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                    if PF:
                        if PRMT and PF_BYTES > 0:
                            _prefetch_rows(qw_ptr, p5, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
                        r5 = p5
                        p5 = _tile_idx(idx_ptr, c + (3 * K + 5), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    else:
                        r5 = _tile_idx(idx_ptr, c + (2 * K + 5), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab = _acc_tile(
                        lo5, hi5, sb5, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, T, Q, PRMT)
                    lo5 = nlo
                    hi5 = nhi
                    sb5 = nsb
                    kc += 1
                    if kc == S:
                        _store_bag(out_ptr, bag, b_end, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, D, HALF, Q)
                        a0 = tl.zeros([T, Q], dtype=tl.float32)
                        a1 = tl.zeros([T, Q], dtype=tl.float32)
                        a2 = tl.zeros([T, Q], dtype=tl.float32)
                        a3 = tl.zeros([T, Q], dtype=tl.float32)
                        a4 = tl.zeros([T, Q], dtype=tl.float32)
                        a5 = tl.zeros([T, Q], dtype=tl.float32)
                        a6 = tl.zeros([T, Q], dtype=tl.float32)
                        a7 = tl.zeros([T, Q], dtype=tl.float32)
                        h0 = tl.zeros([T, Q], dtype=tl.float32)
                        h1 = tl.zeros([T, Q], dtype=tl.float32)
                        h2 = tl.zeros([T, Q], dtype=tl.float32)
                        h3 = tl.zeros([T, Q], dtype=tl.float32)
                        h4 = tl.zeros([T, Q], dtype=tl.float32)
                        h5 = tl.zeros([T, Q], dtype=tl.float32)
                        h6 = tl.zeros([T, Q], dtype=tl.float32)
                        h7 = tl.zeros([T, Q], dtype=tl.float32)
                        ab = tl.zeros([T, Q], dtype=tl.float32)
                        kc -= S
                        bag += 1
                if K > 6:
                    nlo, nhi, nsb = _tile_rows(qw_lane, qw_sb, r6, wlo, whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                    if PF:
                        if PRMT and PF_BYTES > 0:
                            _prefetch_rows(qw_ptr, p6, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
                        r6 = p6
                        p6 = _tile_idx(idx_ptr, c + (3 * K + 6), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    else:
                        r6 = _tile_idx(idx_ptr, c + (2 * K + 6), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab = _acc_tile(
                        lo6, hi6, sb6, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, T, Q, PRMT)
                    lo6 = nlo
                    hi6 = nhi
                    sb6 = nsb
                    kc += 1
                    if kc == S:
                        _store_bag(out_ptr, bag, b_end, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, D, HALF, Q)
                        a0 = tl.zeros([T, Q], dtype=tl.float32)
                        a1 = tl.zeros([T, Q], dtype=tl.float32)
                        a2 = tl.zeros([T, Q], dtype=tl.float32)
                        a3 = tl.zeros([T, Q], dtype=tl.float32)
                        a4 = tl.zeros([T, Q], dtype=tl.float32)
                        a5 = tl.zeros([T, Q], dtype=tl.float32)
                        a6 = tl.zeros([T, Q], dtype=tl.float32)
                        a7 = tl.zeros([T, Q], dtype=tl.float32)
                        h0 = tl.zeros([T, Q], dtype=tl.float32)
                        h1 = tl.zeros([T, Q], dtype=tl.float32)
                        h2 = tl.zeros([T, Q], dtype=tl.float32)
                        h3 = tl.zeros([T, Q], dtype=tl.float32)
                        h4 = tl.zeros([T, Q], dtype=tl.float32)
                        h5 = tl.zeros([T, Q], dtype=tl.float32)
                        h6 = tl.zeros([T, Q], dtype=tl.float32)
                        h7 = tl.zeros([T, Q], dtype=tl.float32)
                        ab = tl.zeros([T, Q], dtype=tl.float32)
                        kc -= S
                        bag += 1
                if K > 7:
                    nlo, nhi, nsb = _tile_rows(qw_lane, qw_sb, r7, wlo, whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                    if PF:
                        if PRMT and PF_BYTES > 0:
                            _prefetch_rows(qw_ptr, p7, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
                        r7 = p7
                        p7 = _tile_idx(idx_ptr, c + (3 * K + 7), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    else:
                        r7 = _tile_idx(idx_ptr, c + (2 * K + 7), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab = _acc_tile(
                        lo7, hi7, sb7, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, T, Q, PRMT)
                    lo7 = nlo
                    hi7 = nhi
                    sb7 = nsb
                    kc += 1
                    if kc == S:
                        _store_bag(out_ptr, bag, b_end, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, D, HALF, Q)
                        a0 = tl.zeros([T, Q], dtype=tl.float32)
                        a1 = tl.zeros([T, Q], dtype=tl.float32)
                        a2 = tl.zeros([T, Q], dtype=tl.float32)
                        a3 = tl.zeros([T, Q], dtype=tl.float32)
                        a4 = tl.zeros([T, Q], dtype=tl.float32)
                        a5 = tl.zeros([T, Q], dtype=tl.float32)
                        a6 = tl.zeros([T, Q], dtype=tl.float32)
                        a7 = tl.zeros([T, Q], dtype=tl.float32)
                        h0 = tl.zeros([T, Q], dtype=tl.float32)
                        h1 = tl.zeros([T, Q], dtype=tl.float32)
                        h2 = tl.zeros([T, Q], dtype=tl.float32)
                        h3 = tl.zeros([T, Q], dtype=tl.float32)
                        h4 = tl.zeros([T, Q], dtype=tl.float32)
                        h5 = tl.zeros([T, Q], dtype=tl.float32)
                        h6 = tl.zeros([T, Q], dtype=tl.float32)
                        h7 = tl.zeros([T, Q], dtype=tl.float32)
                        ab = tl.zeros([T, Q], dtype=tl.float32)
                        kc -= S
                        bag += 1
                if K > 8:
                    nlo, nhi, nsb = _tile_rows(qw_lane, qw_sb, r8, wlo, whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                    if PF:
                        if PRMT and PF_BYTES > 0:
                            _prefetch_rows(qw_ptr, p8, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
                        r8 = p8
                        p8 = _tile_idx(idx_ptr, c + (3 * K + 8), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    else:
                        r8 = _tile_idx(idx_ptr, c + (2 * K + 8), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab = _acc_tile(
                        lo8, hi8, sb8, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, T, Q, PRMT)
                    lo8 = nlo
                    hi8 = nhi
                    sb8 = nsb
                    kc += 1
                    if kc == S:
                        _store_bag(out_ptr, bag, b_end, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, D, HALF, Q)
                        a0 = tl.zeros([T, Q], dtype=tl.float32)
                        a1 = tl.zeros([T, Q], dtype=tl.float32)
                        a2 = tl.zeros([T, Q], dtype=tl.float32)
                        a3 = tl.zeros([T, Q], dtype=tl.float32)
                        a4 = tl.zeros([T, Q], dtype=tl.float32)
                        a5 = tl.zeros([T, Q], dtype=tl.float32)
                        a6 = tl.zeros([T, Q], dtype=tl.float32)
                        a7 = tl.zeros([T, Q], dtype=tl.float32)
                        h0 = tl.zeros([T, Q], dtype=tl.float32)
                        h1 = tl.zeros([T, Q], dtype=tl.float32)
                        h2 = tl.zeros([T, Q], dtype=tl.float32)
                        h3 = tl.zeros([T, Q], dtype=tl.float32)
                        h4 = tl.zeros([T, Q], dtype=tl.float32)
                        h5 = tl.zeros([T, Q], dtype=tl.float32)
                        h6 = tl.zeros([T, Q], dtype=tl.float32)
                        h7 = tl.zeros([T, Q], dtype=tl.float32)
                        ab = tl.zeros([T, Q], dtype=tl.float32)
                        kc -= S
                        bag += 1
                if K > 9:
                    nlo, nhi, nsb = _tile_rows(qw_lane, qw_sb, r9, wlo, whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                    if PF:
                        if PRMT and PF_BYTES > 0:
                            _prefetch_rows(qw_ptr, p9, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
                        r9 = p9
                        p9 = _tile_idx(idx_ptr, c + (3 * K + 9), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    else:
                        r9 = _tile_idx(idx_ptr, c + (2 * K + 9), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab = _acc_tile(
                        lo9, hi9, sb9, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, T, Q, PRMT)
                    lo9 = nlo
                    hi9 = nhi
                    sb9 = nsb
                    kc += 1
                    if kc == S:
                        _store_bag(out_ptr, bag, b_end, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, D, HALF, Q)
                        a0 = tl.zeros([T, Q], dtype=tl.float32)
                        a1 = tl.zeros([T, Q], dtype=tl.float32)
                        a2 = tl.zeros([T, Q], dtype=tl.float32)
                        a3 = tl.zeros([T, Q], dtype=tl.float32)
                        a4 = tl.zeros([T, Q], dtype=tl.float32)
                        a5 = tl.zeros([T, Q], dtype=tl.float32)
                        a6 = tl.zeros([T, Q], dtype=tl.float32)
                        a7 = tl.zeros([T, Q], dtype=tl.float32)
                        h0 = tl.zeros([T, Q], dtype=tl.float32)
                        h1 = tl.zeros([T, Q], dtype=tl.float32)
                        h2 = tl.zeros([T, Q], dtype=tl.float32)
                        h3 = tl.zeros([T, Q], dtype=tl.float32)
                        h4 = tl.zeros([T, Q], dtype=tl.float32)
                        h5 = tl.zeros([T, Q], dtype=tl.float32)
                        h6 = tl.zeros([T, Q], dtype=tl.float32)
                        h7 = tl.zeros([T, Q], dtype=tl.float32)
                        ab = tl.zeros([T, Q], dtype=tl.float32)
                        kc -= S
                        bag += 1
                if K > 10:
                    nlo, nhi, nsb = _tile_rows(qw_lane, qw_sb, r10, wlo, whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                    if PF:
                        if PRMT and PF_BYTES > 0:
                            _prefetch_rows(qw_ptr, p10, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
                        r10 = p10
                        p10 = _tile_idx(idx_ptr, c + (3 * K + 10), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    else:
                        r10 = _tile_idx(idx_ptr, c + (2 * K + 10), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab = _acc_tile(
                        lo10, hi10, sb10, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, T, Q, PRMT)
                    lo10 = nlo
                    hi10 = nhi
                    sb10 = nsb
                    kc += 1
                    if kc == S:
                        _store_bag(out_ptr, bag, b_end, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, D, HALF, Q)
                        a0 = tl.zeros([T, Q], dtype=tl.float32)
                        a1 = tl.zeros([T, Q], dtype=tl.float32)
                        a2 = tl.zeros([T, Q], dtype=tl.float32)
                        a3 = tl.zeros([T, Q], dtype=tl.float32)
                        a4 = tl.zeros([T, Q], dtype=tl.float32)
                        a5 = tl.zeros([T, Q], dtype=tl.float32)
                        a6 = tl.zeros([T, Q], dtype=tl.float32)
                        a7 = tl.zeros([T, Q], dtype=tl.float32)
                        h0 = tl.zeros([T, Q], dtype=tl.float32)
                        h1 = tl.zeros([T, Q], dtype=tl.float32)
                        h2 = tl.zeros([T, Q], dtype=tl.float32)
                        h3 = tl.zeros([T, Q], dtype=tl.float32)
                        h4 = tl.zeros([T, Q], dtype=tl.float32)
                        h5 = tl.zeros([T, Q], dtype=tl.float32)
                        h6 = tl.zeros([T, Q], dtype=tl.float32)
                        h7 = tl.zeros([T, Q], dtype=tl.float32)
                        ab = tl.zeros([T, Q], dtype=tl.float32)
                        kc -= S
                        bag += 1
                if K > 11:
                    nlo, nhi, nsb = _tile_rows(qw_lane, qw_sb, r11, wlo, whi, ROW_WORDS, HALF, WFULL, EVEN, SMALL)
                    if PF:
                        if PRMT and PF_BYTES > 0:
                            _prefetch_rows(qw_ptr, p11, lead, n_rows, ROW_WORDS, PF_BYTES, SMALL)
                        r11 = p11
                        p11 = _tile_idx(idx_ptr, c + (3 * K + 11), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    else:
                        r11 = _tile_idx(idx_ptr, c + (2 * K + 11), n_t, b0, t, L, T, S, ISTRIDE, EVEN, SMALL)
                    a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab = _acc_tile(
                        lo11, hi11, sb11, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, T, Q, PRMT)
                    lo11 = nlo
                    hi11 = nhi
                    sb11 = nsb
                    kc += 1
                    if kc == S:
                        _store_bag(out_ptr, bag, b_end, a0, a1, a2, a3, a4, a5, a6, a7, h0, h1, h2, h3, h4, h5, h6, h7, ab, D, HALF, Q)
                        a0 = tl.zeros([T, Q], dtype=tl.float32)
                        a1 = tl.zeros([T, Q], dtype=tl.float32)
                        a2 = tl.zeros([T, Q], dtype=tl.float32)
                        a3 = tl.zeros([T, Q], dtype=tl.float32)
                        a4 = tl.zeros([T, Q], dtype=tl.float32)
                        a5 = tl.zeros([T, Q], dtype=tl.float32)
                        a6 = tl.zeros([T, Q], dtype=tl.float32)
                        a7 = tl.zeros([T, Q], dtype=tl.float32)
                        h0 = tl.zeros([T, Q], dtype=tl.float32)
                        h1 = tl.zeros([T, Q], dtype=tl.float32)
                        h2 = tl.zeros([T, Q], dtype=tl.float32)
                        h3 = tl.zeros([T, Q], dtype=tl.float32)
                        h4 = tl.zeros([T, Q], dtype=tl.float32)
                        h5 = tl.zeros([T, Q], dtype=tl.float32)
                        h6 = tl.zeros([T, Q], dtype=tl.float32)
                        h7 = tl.zeros([T, Q], dtype=tl.float32)
                        ab = tl.zeros([T, Q], dtype=tl.float32)
                        kc -= S
                        bag += 1
    else:  # empty bags: zeros
        zero = tl.zeros([T, Q], dtype=tl.float32)
        for g in range(0, nb):
            _store_bag(out_ptr, b0 + g, b_end, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero, zero,
                       zero, zero, zero, zero, zero, D, HALF, Q)



#: SMs per device index (the one-wave grid's size)
_SMS = {}


def _num_sms(device):
    if device.type != "cuda":
        return 2
    idx = device.index if device.index is not None else torch.cuda.current_device()
    n = _SMS.get(idx)
    if n is None:
        n = _SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return n


def _programs(batch, slots):
    """Programs for ``batch`` bags on ``slots`` resident programs: as many as fit, shrunk so that every program gets
    the same number of bags (ceil(batch / programs); the last program fewer)."""
    return triton.cdiv(batch, triton.cdiv(batch, max(1, slots)))


class ModelNew(nn.Module):
    """Same buffer as the problem's ``Model`` (``qweight``, uint8 [num_embeddings, embedding_dim + 8])."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        w = torch.randn(num_embeddings, embedding_dim)
        lo = w.min(dim=1, keepdim=True).values
        hi = w.max(dim=1, keepdim=True).values
        scale = (hi - lo).clamp_min(1e-8) / 255.0
        codes = torch.round((w - lo) / scale).clamp(0, 255).to(torch.uint8)
        scale_bias = torch.cat([scale, lo], dim=1).contiguous().view(torch.uint8)
        self.register_buffer("qweight", torch.cat([codes, scale_bias], dim=1).contiguous())
        self.embedding_dim = embedding_dim

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        d = self.embedding_dim
        if d % 4:
            raise ValueError(f"embedding_dim must be a multiple of 4 (fp32 scale/bias alignment), got {d}")
        words = self.qweight.view(torch.int32)  # [N, D/4 + 2]: codes 4 per word (little-endian), then scale, bias
        indices = indices.contiguous()
        batch, bag = indices.shape
        out = torch.empty(batch, d, device=words.device, dtype=torch.float32)
        if batch == 0:
            return out
        # a row as two halves of HALF words, Q = HALF / 2 lanes (8-byte pairs) per half row, T rows per warp
        half = max(4, triton.next_power_of_2(d // 4)) // 2
        t = max(1, 64 // half)
        small = 2 * batch * bag < 2**31 and words.numel() < 2**31
        # ids below 2^31 (small): read the low int32 word of each int64 id
        istride = 1
        if small and bag > 0 and indices.dtype == torch.int64:
            indices = indices.view(torch.int32)
            istride = 2
        # the L2 prefetch's span: the row's start rounded down to 16 bytes, plus the row, in 16-byte units
        row_bytes = d + 8
        pf_bytes = (row_bytes + 16 - math.gcd(row_bytes, 16) + 15) // 16 * 16
        if words.data_ptr() % 16:  # the spans' 16-byte alignment needs the table's: no prefetch
            pf_bytes = 0
        sms = _num_sms(words.device)
        _launch(_int8_bag_kernel, (bag, d, indices.dtype, words.device),
                lambda meta: (_programs(batch, meta["PROGS"] * sms),),
                indices, words, out, batch, words.shape[0], L=bag, D=d, HALF=half, T=t, ISTRIDE=istride,
                SMALL=small, PRMT=not _INTERPRET, PF_BYTES=pf_bytes)
        return out
