"""kbstudy-triton candidate for DLRM-Bench problem 9 (DLRM pairwise dot interaction). Session 14's round-2 variant
``s14-c``: the shipped kernel (``s14-a``: persistent grid, one whole sample per iteration as four [32, 32] cp.async
loads, ``cp.async.bulk.prefetch.L2`` of the sample ``PF`` iterations ahead) with the TF32 split's correction dot in
bf16, a quarter of the Tensor-Core time of the TF32 dot it replaces.

The shipped kernel spends 2 TF32 dots per [32, 32] chunk: ``Z = H H^T`` and ``C = H L^T`` (``H`` = T in TF32, ``L =
T - H``; ``Z + C + C^T`` is fp32-accurate), 128 HMMA.1688.TF32 per warp and sample (2 warps), ~15.9k per SM, ~17 us of
the ~36.8 us kernel time at mma.sync's rate: the tensor pipe is the one unit near the memory time. ``C`` is a
correction of relative size 2^-11 and needs only ~8 significant bits, so here it is a bf16 dot (m16n8k16: half as
many HMMAs as TF32 m16n8k8, each the same tensor time): per warp and sample 64 TF32 + 32 bf16 HMMAs, i.e. 96 HMMA
slots instead of 128 (-25 % tensor time, ~4 us less tensor-busy time per SM). Accuracy: with the shipped truncated
split (|L| < 2^-10 |T|) the bf16 rounding of H and L costs ~2^-19 |T|^2 per product (emulated at full size: max
error 1.0e-4, 0.64 of KernelBench's tolerance; relative L2 1.3e-6, above the edge test's 1e-6 bound), so H is
rounded to NEAREST TF32 (|L| <= 2^-11 |T|): emulated max error 5.1e-5 (0.37 of KernelBench's 1e-4), relative L2
~6.5e-7 in the edge cases (the shipped kernel: 2e-7; bound 1e-6). The bf16 conversion is non-pure inline
``cvt.rn.bf16.f32`` and the TF32 rounding non-pure inline ``add``/``and``: with plain Triton ops, Triton 3.6 hoists
the dot-operand conversions up to the load, the load then feeds TF32 and bf16 operands whose shared encodings
differ and the pipeliner drops the cp.async copies (plain loads, 10 KB of shared memory: checked in the SASS), and
the rounding is redone in each operand layout (loop body 1,082 instructions). Opaque ops keep the cp.async pipeline
(LDGSTS, 36 KB shared) and compute H once per element; the price is the operands' trip through shared memory
(per warp and sample 60 STS, 31 LDS, 20 BAR vs 12 / 15 / few). Loop body per warp and sample (2 warps, 3 stages, cap
168; Triton 3.6 SASS): 896 instructions (shipped: 823), of them 96 HMMA (128), 72 LDSM (48), 64 F2FP (bf16 pairs).
Under ``TRITON_INTERPRET=1`` (no inline assembly there; its bf16 arithmetic is wrong in Triton 3.9) the same
roundings in integer arithmetic and an IEEE fp32 dot of the bf16-rounded values (``EMULATE_BF16``).

Everything else is the shipped kernel's: rows 0 = dense (through ``sparse_ptr`` + (dense - sparse)), 1..26 sparse,
27..31 masked; the strict lower triangle stored to ``D + i(i-1)/2 + j``; the dense row copied from a 512-byte L2
hit; inputs read once, output written once (the compulsory 129 MB; floor 30.3 us). Grid ``PPS x SMs`` (one wave,
62-63 samples per SM), prefetch ``PF`` = ``num_stages`` samples ahead.

Expected on the H200: the memory side is unchanged (same copies, same prefetch, same bytes in flight: 6 programs x
1-2 samples x 13.8 KB per SM); the tensor pipe's busy time per SM falls from ~16-17 us to ~12-13 us and the issued
instructions rise ~9 % (2 x 896 vs 2 x 823 per sample: ~112k vs ~103k per SM over 4 schedulers, ~14 vs ~13 us), so
if the shipped kernel is partly compute-bound (its 36.8 us kernel time against a copy's ~31 us) the gap should
shrink by a few microseconds. Not measured on a GPU.
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: sm_90, BLOCK_K 32, Triton 3.6 ptxas (registers, stack bytes, shared memory -> programs per SM, warps per SM; loop
#: body in SASS instructions per warp and sample): 2 warps, 3 stages, cap 168: 168, 0, 36 KB -> 6 (12 warps; 64.5k
#: registers, 222 KB), 896; 2 warps, 4 stages: 186, 0, 52 KB -> 4 (8 warps; 47.6k registers, 208 KB), 897; 2 warps,
#: 2 stages, cap 128: 128, 16, 20 KB -> 8 (16 warps; 64k registers, 160 KB), 929; 1 warp, 3 stages: 255, 8, 36 KB ->
#: 6 (6 warps), 1,582 (the conversions through shared memory cost more with one warp); the last config has no
#: prefetch. (4 warps split the [32, 32] tile 2 x 2 and double the HMMAs per sample: dropped.)
_CONFIGS = [
    triton.Config({"PPS": 6, "PF": 3}, num_warps=2, num_stages=3, maxnreg=168),
    triton.Config({"PPS": 4, "PF": 4}, num_warps=2, num_stages=4),
    triton.Config({"PPS": 8, "PF": 2}, num_warps=2, num_stages=2, maxnreg=128),
    triton.Config({"PPS": 6, "PF": 3}, num_warps=1, num_stages=3),
    triton.Config({"PPS": 6, "PF": 0}, num_warps=2, num_stages=3, maxnreg=168),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"PPS": 2, "PF": 2}, num_warps=2, num_stages=1)]


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
def _prefetch_l2(ptr, nbytes):
    """One thread of the program asks the TMA unit to bring ``nbytes`` (a multiple of 16) from ``ptr`` (16-byte
    aligned) into the L2: ``cp.async.bulk.prefetch.L2`` (sm_90), a hint with no destination, no register and no
    completion to wait for."""
    tl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .u32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; "
        "@p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
        "=r,l,r", [ptr, nbytes], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _tf32_hi(t, EMULATE: tl.constexpr):
    """``t`` rounded to TF32 (to nearest, ties away: 2^12 added below the 13 low mantissa bits, which are then
    cleared), as float32. On the GPU as one non-pure inline-assembly op (``add.s32``, ``and.b32``): opaque, so
    Triton 3.6 computes it once per element in the load's blocked layout and converts H to the dot operands through
    shared memory, instead of hoisting those conversions up to the load and redoing the add and the mask in each of
    the three operand layouts (loop body ~900 instead of ~1,080 SASS instructions per warp and sample)."""
    if EMULATE:
        return ((t.to(tl.int32, bitcast=True) + 4096) & -8192).to(tl.float32, bitcast=True)
    else:
        return tl.inline_asm_elementwise("{ .reg .b32 q; add.s32 q, $1, 4096; and.b32 $0, q, -8192; }", "=r,r",
                                         [t], dtype=tl.float32, is_pure=False, pack=1)


@triton.jit
def _bf16(x, EMULATE: tl.constexpr):
    """``x`` rounded to bf16 (to nearest, ties to even). On the GPU ``cvt.rn.bf16.f32`` as non-pure inline assembly:
    an opaque op, so that Triton 3.6 does not hoist the bf16 dot operand's layout conversion up to the load (the
    load would then feed dot operands of two element widths, TF32 and bf16, whose shared-memory encodings differ,
    and the pipeliner would give up its ``cp.async`` copies: plain loads, 10 KB of shared memory, checked in the
    SASS). Under the interpreter (no inline assembly; its bf16 arithmetic is wrong in Triton 3.9) the same rounding
    in integer arithmetic, returned as float32 (the caller then takes an IEEE fp32 dot of the rounded values)."""
    if EMULATE:
        b = x.to(tl.int32, bitcast=True)
        b = (b + (0x7FFF + ((b >> 16) & 1))) & -65536
        return b.to(tl.float32, bitcast=True)
    else:
        return tl.inline_asm_elementwise("cvt.rn.bf16.f32 $0, $1;", "=h,r", [x], dtype=tl.bfloat16, is_pure=False,
                                         pack=1)


@triton.autotune(configs=_CONFIGS, key=["B", "D", "NS", "PRECISION", "PREFETCH"], do_bench=_bench)
@triton.jit
def _dot_interaction_kernel(dense_ptr, sparse_ptr, out_ptr, B, D, NS, OUT_W, DOFF,
                            BLOCK_F: tl.constexpr, BLOCK_K: tl.constexpr, NCHUNK: tl.constexpr,
                            BLOCK_D: tl.constexpr, PRECISION: tl.constexpr, PREFETCH: tl.constexpr,
                            EMULATE_BF16: tl.constexpr, PPS: tl.constexpr, PF: tl.constexpr):
    # PPS (programs per SM) only sizes the grid; it is a parameter so that the autotuner can vary it.
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    my_samples = tl.cdiv(B - pid, nprog)  # samples pid, pid + nprog, ...
    F = NS + 1
    i = tl.arange(0, BLOCK_F)
    j = tl.arange(0, BLOCK_F)
    kk = tl.arange(0, BLOCK_K)
    dd = tl.arange(0, BLOCK_D)
    pos = (i * (i - 1)) // 2
    tri = (i[:, None] > j[None, :]) & (i < F)[:, None]
    rmask = i < F
    dmask = dd < D
    # Element offset from sparse_ptr of row i of sample s: sparse row i - 1, or for i == 0 the dense row (DOFF =
    # dense - sparse, in elements), written with a 0/1 factor (not tl.where) so that the 16-byte alignment of every
    # row start stays provable (D and DOFF divisible by 16) and the copies are 16-byte cp.async.
    is0 = (i == 0).to(tl.int64)
    for m in range(0, my_samples):
        s = pid + m * nprog
        s64 = s.to(tl.int64)
        if PREFETCH and PF > 0:
            # sample s + PF * nprog (this program's PF-th next) into the L2, ahead of its cp.async: its 26 sparse
            # rows (one contiguous range) and its dense row, one bulk request each
            sp = s64 + PF * nprog
            if sp < B:
                _prefetch_l2(sparse_ptr + sp * (NS * D), NS * D * 4)
                _prefetch_l2(dense_ptr + sp * D, D * 4)
        roff = (s64 * NS + i - 1) * D + is0 * (DOFF + s64 * (D - NS * D) + D)
        z = tl.zeros([BLOCK_F, BLOCK_F], dtype=tl.float32)  # H H^T
        c = tl.zeros([BLOCK_F, BLOCK_F], dtype=tl.float32)  # H L^T
        # the whole sample in one iteration: NCHUNK loads of BLOCK_K columns, all issued together (one sample's
        # contiguous 13 KB) by the pipeliner num_stages - 1 iterations ahead, each a pair of Tensor-Core dots
        for kc in tl.static_range(NCHUNK):
            k = kc * BLOCK_K + kk
            t = tl.load(sparse_ptr + roff[:, None] + k[None, :], mask=rmask[:, None] & (k < D)[None, :], other=0.0)
            # H = T rounded to TF32 (to nearest: 2^12 added below the 13 mantissa bits then cleared; exact in TF32),
            # L = T - H (exact, |L| <= 2^-11 |T|: half the truncated split's, which halves the bf16 term's error)
            hi = _tf32_hi(t, EMULATE_BF16)
            lo = t - hi
            z = tl.dot(hi, tl.trans(hi), z, input_precision=PRECISION)
            # the correction C = H L^T as a bf16 dot (m16n8k16: half the HMMAs of a TF32 dot, each the same
            # tensor time): |L| <= 2^-11 |T|, so rounding H and L to bf16 (8 significant bits) adds <= ~2^-9 |H L| <=
            # 2^-20 |T|^2 per product (emulated at full size: max error 5.1e-5 = 0.37 of KernelBench's tolerance)
            if EMULATE_BF16:
                c = tl.dot(_bf16(hi, True), tl.trans(_bf16(lo, True)), c, input_precision="ieee")
            else:
                c = tl.dot(_bf16(hi, False), tl.trans(_bf16(lo, False)), c)
        r = z + c + tl.trans(c)
        out_row = out_ptr + s64 * OUT_W
        tl.store(out_row + D + pos[:, None] + j[None, :], r, mask=tri)
        dense = tl.load(dense_ptr + s64 * D + dd, mask=dmask)
        tl.store(out_row + dd, dense, mask=dmask)


_PRECISIONS = ["tf32", "ieee"]
#: SMs per device index (the persistent grid's size)
_SMS = {}


def _num_sms(device):
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
    """Same (parameter-free) construction as the problem's ``Model``; forward is one Triton launch."""

    def __init__(self, num_sparse_features: int):
        super().__init__()
        self.num_sparse_features = num_sparse_features

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        batch, dim = dense.shape
        ns = self.num_sparse_features
        f = ns + 1
        out_w = dim + f * (f - 1) // 2
        out = torch.empty(batch, out_w, device=dense.device, dtype=dense.dtype)
        dense, sparse = dense.contiguous(), sparse.contiguous()
        block_f = max(16, triton.next_power_of_2(f))
        block_k = min(32, max(16, triton.next_power_of_2(dim)))
        nchunk = triton.cdiv(dim, block_k)
        doff = (dense.data_ptr() - sparse.data_ptr()) // dense.element_size()  # dense row 0 = sparse_ptr + doff
        sms = _num_sms(dense.device)
        # the bulk L2 prefetch (sm_90 and later) needs 16-byte aligned sample starts in both tensors
        prefetch = (_bulk_prefetch(dense.device) and dim % 4 == 0 and dense.data_ptr() % 16 == 0
                    and sparse.data_ptr() % 16 == 0)

        def grid(meta):
            return (max(1, min(batch, meta["PPS"] * sms)),)

        while True:
            try:
                precision = _PRECISIONS[0]
                _launch(_dot_interaction_kernel, (batch, dim, ns, precision, prefetch, dense.dtype, dense.device),
                        grid, dense, sparse, out, batch, dim, ns, out_w, doff, BLOCK_F=block_f, BLOCK_K=block_k,
                        NCHUNK=nchunk, BLOCK_D=block_k * nchunk, PRECISION=precision, PREFETCH=prefetch,
                        EMULATE_BF16=_INTERPRET)
                return out
            except Exception:
                if len(_PRECISIONS) == 1:
                    raise
                _PRECISIONS.pop(0)  # this Triton cannot lower TF32 dots here: fall back to IEEE fp32 FMA
