"""kbstudy-triton kernel for DLRM-Bench problem 6 (int8 row-wise quantized EmbeddingBag, dequantize + sum).

Measured on the H200: 46.0 us of cold device time, 1.76x the floor (``outputs/records/dlrm_bench/h200/final``; 44.2
us in ``outputs/records/dlrm_bench/h200/repeat``), where reading the lookups' 740,759 distinct random 136-byte rows
alone takes 44.1 us (``outputs/records/dlrm_bench/h200/variants-problem-5``, ``scripts/bench_random_rows.py``). Beside
a cp.async-pipelined kernel in two runs (``outputs/records/dlrm_bench/h200/variants-problem-6`` and
``outputs/records/dlrm_bench/h200/variants-problem-2``, where this file is the record ``s15-a`` and that kernel the
record ``kbstudy-triton``): 46.3 us of device time against 59.7 and 59.8 us.

**Rows gathered into registers, 16 lanes per row, no cross-thread work per step, ~19 warp instructions per row
instead of ~40.** A program (one warp) owns consecutive groups of ``BB`` bags and walks them as one stream of steps
(a group's last step stores its bags, the next step's rows already belong to the next group: no per-bag pipeline
start). A step is R = 2 T = 4 lookups (D = 128) of each bag of its group: two halves, each an [T, BB, D/4] tile of
32-bit words in which a row is read by 16 lanes as 8-byte pairs (the FBGEMM row, D codes + fp32 scale + fp32 bias =
136 bytes, is 8-byte aligned), and its (scale, bias) pair by the same 16 lanes, one more 8-byte load in the same
layout (so no layout conversion). Each lane keeps 8 columns x its rows' accumulators; the sum over a bag's rows is
in-thread (``acc += (c - 128) s``, one FFMA per code, per half), the 2 row sets of a warp are added once per bag.
Codes become fp32 by one ``prmt`` (bytes [c, 0, 0, 0x4B] = 2^23 + c) and one FADD (inline PTX on the GPU, shifts
under the interpreter); ``c s + b = (c - 128) s + (b + 128 s)``. The indices are loaded two steps ahead and a
step's rows one step ahead of the step that sums them, in registers (no ``cp.async``: Triton's pipeliner waits on one
FIFO of copy groups, so in the cp.async-pipelined kernel each step's wait also drains the next step's index copy and
every step pays a full DRAM round trip with the whole chip's rows issued in one burst).

**What the cp.async-pipelined kernel costs (Triton 3.6, sm_90 SASS).** Its [4, 8, 4, 3] config runs 1300 instructions
per 32-row step, ~40 warp instructions per row (165 SHFL: its UNROLL reduction is across lanes; 4-5 ops to unpack a
code); on 1024 one-warp programs (7.75 per SM, ~2 per scheduler) that is ~62k issue cycles per scheduler, ~33 us
at 1.9 GHz, more than half of its 59.8 us. Its [4, 8, 8, 3] config spills under Triton 3.6 (255 registers, 224 bytes
of stack). Here the loop is 301 instructions per 16-row step ([BB 4], ptxas of Triton 3.6): 64 PRMT + 72 FADD + 72
FFMA for the 64 codes and 8 biases a lane sums, 25 loads, the rest addressing (one wide multiply-add per pointer:
rows as zero-extended 32-bit ids) -> ~19 warp instructions per row, ~29k issue cycles per scheduler (~15 us),
which the 15.5-31 warps per SM hide under the row loads.

**Registers and residency (Triton 3.6 ptxas, sm_90, no spills):** [BB 4, maxnreg 128] 128 registers -> 16
programs per SM; 8192 bags -> 2048 programs of one group (one wave). [BB 2, maxnreg 64] 64 -> 32 per SM, 4096
programs of one group (one wave). [BB 2, maxnreg 96] 96 -> 21 per SM, 2048 programs of two groups each. In every
config an SM holds 62 bags x 4 lookups = 248 rows per step (~40 KB of 160-byte sector spans); ptxas interleaves
the next step's loads with the current step's sums, so at least one full step and up to two are in flight per
warp: 248-496 rows, 5-10 MB on 132 SMs, against the ~4-6 MB that ~4 TB/s at 1-1.5 us of loaded latency needs.

**Bytes.** Compulsory (the floor): 819,200 x 8 index bytes + E[U] (~739k) x 136 + 8192 x 512 = 111.5 MB, 26.2 us.
Moved: every lookup's row (no sort; ~10 % repeats, some of them L2 hits): five 32-byte sectors each (136 bytes
starting 0, 8, 16 or 24 bytes into a sector), ~131 MB, plus 6.5 MB of indices and 4.2 MB of output -> ~142 MB,
33 us at the 4.27 TB/s copy rate: the target (32.7 us) is out of reach of any kernel that reads every lookup's row
through 32-byte sectors; a kernel at DRAM speed for those sectors would be ~1.3x the floor. Model: ~38-45 us
(random 160-byte spans do not reach the copy rate; problem 1's 512-byte rows reach 3.8 TB/s); measured 44.2-46.3 us
(above). ``triton.autotune``
(keyed on L and D; L is a compile-time constant, so the step count and the masks' absence are too) picks the config
on the GPU; one config under ``TRITON_INTERPRET=1``.
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: BB bags per group; PROGS one-warp programs per SM, all resident (65536 / (maxnreg x 32)); Triton 3.6 ptxas, sm_90:
#: 128 / 64 / 96 registers, no spills ([BB 8, 255] spilled 104 bytes and is not listed)
_CONFIGS = [
    triton.Config({"BB": 4, "PROGS": 16}, num_warps=1, num_stages=1, maxnreg=128),
    triton.Config({"BB": 2, "PROGS": 32}, num_warps=1, num_stages=1, maxnreg=64),
    triton.Config({"BB": 2, "PROGS": 21}, num_warps=1, num_stages=1, maxnreg=96),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"BB": 2, "PROGS": 2}, num_warps=1, num_stages=1)]


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
def _gather(qw_lane, qw_sb, rows, m, wmask, ROW_WORDS: tl.constexpr, EVEN: tl.constexpr, SMALL: tl.constexpr):
    """The [T, BB, BLOCK_W] words of rows ``rows`` ([T, BB]) and, in the same layout, their (scale, bias) word
    pairs (even w: scale, odd w: bias); ``qw_lane`` / ``qw_sb``: the table's pointer plus each lane's word offset
    (w, or D/4 + w % 2), so a row costs one multiply and one wide add per pointer. Masked rows read as zeros
    (scale 0, bias 0)."""
    if SMALL:  # row < 2^32: a zero-extended 32-bit row times the row's size (one wide multiply-add per pointer)
        off = (rows.to(tl.uint32).to(tl.int64) * ROW_WORDS)[:, :, None]
    else:
        off = (rows * ROW_WORDS)[:, :, None]
    if EVEN:
        words = tl.load(qw_lane + off)
        sb = tl.load(qw_sb + off)
    else:
        mm = m[:, :, None]
        words = tl.load(qw_lane + off, mask=mm & wmask, other=0)
        sb = tl.load(qw_sb + off, mask=mm & (wmask | True), other=0)
    return words, sb


@triton.jit
def _accumulate(words, sb, acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7, accb, T: tl.constexpr,
                BB: tl.constexpr, HW: tl.constexpr, PRMT: tl.constexpr):
    """Adds one [T, BB] set of rows: c s + b = (c - 128) s + (b + 128 s), both terms as small as the dequantized
    values. acc{k} [T, BB, HW]: byte k of the even words (0-3) and of the odd words (4-7) of each thread's pair."""
    sc, bi = tl.split(tl.reshape(sb.to(tl.float32, bitcast=True), [T, BB, HW, 2]))
    wl, wh = tl.split(tl.reshape(words, [T, BB, HW, 2]))
    accb += bi + 128.0 * sc
    acc0 += _code_minus_128(wl, 0, PRMT) * sc
    acc1 += _code_minus_128(wl, 1, PRMT) * sc
    acc2 += _code_minus_128(wl, 2, PRMT) * sc
    acc3 += _code_minus_128(wl, 3, PRMT) * sc
    acc4 += _code_minus_128(wh, 0, PRMT) * sc
    acc5 += _code_minus_128(wh, 1, PRMT) * sc
    acc6 += _code_minus_128(wh, 2, PRMT) * sc
    acc7 += _code_minus_128(wh, 3, PRMT) * sc
    return acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7, accb


@triton.jit
def _store_bags(out_ptr, bag0, B, acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7, accb, D: tl.constexpr,
                BB: tl.constexpr, HW: tl.constexpr):
    """out[bag0 + i, 8 q + j] for the group's bags i: the sums over the T row sets of acc{j} (+ the bias sums)."""
    N_WORDS: tl.constexpr = D // 4
    bag = bag0 + tl.arange(0, BB)[:, None]
    q = tl.arange(0, HW)[None, :]
    o = out_ptr + bag.to(tl.int64) * D + 8 * q
    om = (bag < B) & (2 * q < N_WORDS)
    om1 = (bag < B) & (2 * q + 1 < N_WORDS)
    bsum = tl.sum(accb, axis=0)
    tl.store(o, tl.sum(acc0, axis=0) + bsum, mask=om)
    tl.store(o + 1, tl.sum(acc1, axis=0) + bsum, mask=om)
    tl.store(o + 2, tl.sum(acc2, axis=0) + bsum, mask=om)
    tl.store(o + 3, tl.sum(acc3, axis=0) + bsum, mask=om)
    tl.store(o + 4, tl.sum(acc4, axis=0) + bsum, mask=om1)
    tl.store(o + 5, tl.sum(acc5, axis=0) + bsum, mask=om1)
    tl.store(o + 6, tl.sum(acc6, axis=0) + bsum, mask=om1)
    tl.store(o + 7, tl.sum(acc7, axis=0) + bsum, mask=om1)


@triton.autotune(configs=_CONFIGS, key=["L", "D"], do_bench=_bench)
@triton.jit
def _int8_bag_kernel(idx_ptr, qw_ptr, out_ptr, B, L: tl.constexpr, D: tl.constexpr, BLOCK_W: tl.constexpr,
                     T: tl.constexpr, B_POW2: tl.constexpr, SMALL: tl.constexpr, PRMT: tl.constexpr,
                     BB: tl.constexpr, PROGS: tl.constexpr):
    """qw_ptr: the quantized table as int32 words, [N, D/4 + 2]; word w of a row holds codes 4w .. 4w+3
    (little-endian), words D/4 and D/4 + 1 the fp32 scale and bias. A program owns ``gpp`` consecutive groups of
    ``BB`` bags and walks them as one stream of steps; a step is R = 2 T lookups of each bag of the group, as two
    halves A (lookups t) and B (lookups T + t), each a [T, BB, BLOCK_W] tile of words (a thread: BB rows, 2 words
    each; T rows side by side per warp); each row's (scale, bias) is one more word pair in the same layout.
    EVEN: L a multiple of R and B of BB (no masks; the prefetches past the end re-read the last step). SMALL: index
    and row offsets fit int32."""
    N_WORDS: tl.constexpr = D // 4
    ROW_WORDS: tl.constexpr = D // 4 + 2
    HW: tl.constexpr = BLOCK_W // 2
    R: tl.constexpr = 2 * T
    EVEN: tl.constexpr = (L % R == 0) and (B_POW2 % BB == 0)
    S: tl.constexpr = (L + R - 1) // R  # steps per group
    n_groups = tl.cdiv(B, BB)
    gpp = tl.cdiv(n_groups, tl.num_programs(0))
    g_first = tl.program_id(0) * gpp
    ng = tl.minimum(gpp, n_groups - g_first)
    if L > 0:
        total = ng * S
        last = tl.maximum(total - 1, 0)
        tt = tl.arange(0, T)[:, None]  # [T, 1]
        bb = tl.arange(0, BB)[None, :]  # [1, BB]
        w = tl.arange(0, BLOCK_W)[None, None, :]  # [1, 1, BLOCK_W]
        wmask = w < N_WORDS
        qw_lane = qw_ptr + w  # each lane's words of row 0
        qw_sb = qw_ptr + (N_WORDS + w % 2)  # each lane's (scale, bias) pair of row 0: scale at even w, bias at odd w
        # half A's lookups (bag g_first BB + bb, position t) of the program's first step as index offsets; step (g, k)
        # adds g BB L + k R, half B adds T
        if SMALL:
            ioff = (g_first * BB + bb) * L + tt
        else:
            ioff = (g_first * BB + bb).to(tl.int64) * L + tt
        if not EVEN:
            bag_lim = B - g_first * BB - bb  # bag valid iff g BB < bag_lim
            pos_lim = L - tt  # half A's position valid iff k R < pos_lim, half B's iff k R + T < pos_lim
            zt = tt * 0 + bb * 0  # (step bounds as [T, BB] masks: the interpreter mis-types scalar & tensor masks)

        # steps 0 and 1's indices, step 0's rows (a step = (group g, step k within it))
        s1 = tl.minimum(1, last)
        g1 = s1 // S
        k1 = s1 - g1 * S
        o1 = g1 * BB * L + k1 * R
        if EVEN:
            ma0 = None
            mb0 = None
            ma1 = None
            mb1 = None
            ra0 = tl.load(idx_ptr + ioff)
            rb0 = tl.load(idx_ptr + ioff + T)
            ra1 = tl.load(idx_ptr + ioff + o1)
            rb1 = tl.load(idx_ptr + ioff + (o1 + T))
        else:
            ma0 = (0 < bag_lim) & (0 < pos_lim) & (zt < total)
            mb0 = (0 < bag_lim) & (T < pos_lim) & (zt < total)
            ma1 = (g1 * BB < bag_lim) & (k1 * R < pos_lim) & (zt + 1 < total)
            mb1 = (g1 * BB < bag_lim) & (k1 * R + T < pos_lim) & (zt + 1 < total)
            ra0 = tl.load(idx_ptr + ioff, mask=ma0, other=0)
            rb0 = tl.load(idx_ptr + ioff + T, mask=mb0, other=0)
            ra1 = tl.load(idx_ptr + ioff + o1, mask=ma1, other=0)
            rb1 = tl.load(idx_ptr + ioff + (o1 + T), mask=mb1, other=0)
        wa0, sba0 = _gather(qw_lane, qw_sb, ra0, ma0, wmask, ROW_WORDS, EVEN, SMALL)
        wb0, sbb0 = _gather(qw_lane, qw_sb, rb0, mb0, wmask, ROW_WORDS, EVEN, SMALL)
        acc0 = tl.zeros([T, BB, HW], dtype=tl.float32)
        acc1 = tl.zeros([T, BB, HW], dtype=tl.float32)
        acc2 = tl.zeros([T, BB, HW], dtype=tl.float32)
        acc3 = tl.zeros([T, BB, HW], dtype=tl.float32)
        acc4 = tl.zeros([T, BB, HW], dtype=tl.float32)
        acc5 = tl.zeros([T, BB, HW], dtype=tl.float32)
        acc6 = tl.zeros([T, BB, HW], dtype=tl.float32)
        acc7 = tl.zeros([T, BB, HW], dtype=tl.float32)
        accb = tl.zeros([T, BB, HW], dtype=tl.float32)
        kc = 0  # the current step's position in its group
        gc = 0
        for s in tl.range(0, total, loop_unroll_factor=2):
            # indices two steps ahead (past the end: the last step's again)
            s2 = tl.minimum(s + 2, last)
            g2 = s2 // S
            k2 = s2 - g2 * S
            o2 = g2 * BB * L + k2 * R
            if EVEN:
                ra2 = tl.load(idx_ptr + ioff + o2)
                rb2 = tl.load(idx_ptr + ioff + (o2 + T))
            else:
                ma2 = (g2 * BB < bag_lim) & (k2 * R < pos_lim) & (zt + s + 2 < total)
                mb2 = (g2 * BB < bag_lim) & (k2 * R + T < pos_lim) & (zt + s + 2 < total)
                ra2 = tl.load(idx_ptr + ioff + o2, mask=ma2, other=0)
                rb2 = tl.load(idx_ptr + ioff + (o2 + T), mask=mb2, other=0)
            # rows one step ahead
            wa1, sba1 = _gather(qw_lane, qw_sb, ra1, ma1, wmask, ROW_WORDS, EVEN, SMALL)
            wb1, sbb1 = _gather(qw_lane, qw_sb, rb1, mb1, wmask, ROW_WORDS, EVEN, SMALL)
            # this step
            acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7, accb = _accumulate(
                wa0, sba0, acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7, accb, T, BB, HW, PRMT)
            acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7, accb = _accumulate(
                wb0, sbb0, acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7, accb, T, BB, HW, PRMT)
            if kc == S - 1:  # the group's last step: store its bags, start the next group
                _store_bags(out_ptr, (g_first + gc) * BB, B, acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7, accb, D,
                            BB, HW)
                acc0 = tl.zeros([T, BB, HW], dtype=tl.float32)
                acc1 = tl.zeros([T, BB, HW], dtype=tl.float32)
                acc2 = tl.zeros([T, BB, HW], dtype=tl.float32)
                acc3 = tl.zeros([T, BB, HW], dtype=tl.float32)
                acc4 = tl.zeros([T, BB, HW], dtype=tl.float32)
                acc5 = tl.zeros([T, BB, HW], dtype=tl.float32)
                acc6 = tl.zeros([T, BB, HW], dtype=tl.float32)
                acc7 = tl.zeros([T, BB, HW], dtype=tl.float32)
                accb = tl.zeros([T, BB, HW], dtype=tl.float32)
            gc = g1
            kc = k1
            g1 = g2
            k1 = k2
            wa0 = wa1
            sba0 = sba1
            wb0 = wb1
            sbb0 = sbb1
            ra1 = ra2
            rb1 = rb2
            if not EVEN:
                ma1 = ma2
                mb1 = mb2
    else:  # empty bags: zeros
        zero = tl.zeros([T, BB, HW], dtype=tl.float32)
        for g in range(0, ng):
            _store_bags(out_ptr, (g_first + g) * BB, B, zero, zero, zero, zero, zero, zero, zero, zero, zero, D,
                        BB, HW)


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


def _programs(batch, bb, slots):
    """Programs for ``batch`` bags in groups of ``bb`` on ``slots`` resident programs: as many as fit, shrunk so that
    every program gets the same number of groups (ceil(groups / programs); the last program fewer)."""
    groups = triton.cdiv(batch, bb)
    return triton.cdiv(groups, triton.cdiv(groups, max(1, slots)))


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
        block_w = triton.next_power_of_2(d // 4)
        # T rows side by side in a warp: 16 lanes (2 words each) per row of 32 words
        t = max(1, 64 // block_w)
        sms = _num_sms(words.device)
        # the largest power of two (up to 64) dividing the batch: bag groups need no mask when BB divides it
        b_pow2 = min(64, batch & -batch)
        small = batch * bag < 2**31 and words.numel() < 2**31
        _launch(_int8_bag_kernel, (bag, d, indices.dtype, words.device),
                lambda meta: (_programs(batch, meta["BB"], meta["PROGS"] * sms),),
                indices, words, out, batch, L=bag, D=d, BLOCK_W=block_w, T=t, B_POW2=b_pow2, SMALL=small,
                PRMT=not _INTERPRET)
        return out
