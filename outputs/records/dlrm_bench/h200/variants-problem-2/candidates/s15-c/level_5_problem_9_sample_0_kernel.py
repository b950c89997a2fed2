"""kbstudy-triton candidate for DLRM-Bench problem 9 (DLRM pairwise dot interaction), variant s15-c: the shipped
design (persistent grid, one whole sample per iteration loaded by ``cp.async``, ``cp.async.bulk.prefetch.L2`` of the
sample ``PF`` iterations ahead, 2-pass TF32 split) with 12.5 % less Tensor-Core work: the block above the diagonal
is never computed.

Why: cutting 19 % of the non-MMA instructions (round 1's ``s15-a``) changed nothing (37.8 against 37.7 us), so the
issue slots are not what binds; what it left alone is the Tensor-Core pipe. Per SM the shipped kernel runs 62-63
samples x 256 HMMA.1688.TF32 = 15.9k HMMA, ~16-18 us at mma.sync's ~2 clock cycles per HMMA per SM (half of
wgmma's TF32 rate): over half of the 30.6 us floor, so the pipe is a co-bottleneck with the DRAM, and at the end of
the DRAM stream the samples still waiting for their dots are what the kernel's tail is made of.
What changes: the sample's 32 padded rows are loaded as two halves (rows 0-15, 16-31; the same bytes, the same
16-byte ``cp.async``), and per [16, BLOCK_K] chunk 7 dots of [16, 32] x [32, 16] replace 2 of [32, 32] x [32, 32]:
Z = H H^T + C + C^T (C = L H^T) needs only the blocks (0, 0), (1, 0), (1, 1) of H H^T (3 blocks, not 4) and all of C:
z0 = H0 H0^T, z1 = H1 H0^T, z2 = H1 H1^T, c0 = L0 H0^T, c1 = L1 H0^T + H1 L0^T (= C10 + C01^T, no transpose),
c2 = L1 H1^T; stored as z0 + c0 + c0^T, z1 + c1, z2 + c2 + c2^T (the strict lower triangle of each block). 224 HMMA
per sample instead of 256 (13.9k per SM, -2 us of pipe time), 1,226-1,232 SASS instructions per sample (the shipped
2-warp loop: 2 x 827; s15-a: 2 x 669). One warp per program: Triton 3.6 gives chained dots ``warpsPerCTA``
[num_warps, 1], so with 2 warps each 16-row dot would run in both warps (448 HMMA per sample); with one warp the
7 accumulators (12 m16n8 tiles, 14 chains of 16 HMMA per sample) give the pipe enough independent work.
Programs per SM: 6 at 3 stages (33 KB of shared memory each; 244 registers), 12 at 2 stages (17 KB, ``maxnreg`` 168,
no spill): 6-12 warps per SM as the shipped 2-warp configs (12). Bytes in flight: 6 programs x 2 samples x 13.8 KB
= 166 KB per SM of copies at 3 stages (as shipped), plus the prefetches (~11 MB GPU-wide ahead, 2.6 us of DRAM time);
the loop's bulk prefetch of sample m + PF at iteration m, the pre-loop prefetch of samples 1 .. PF - 1 and the dense
row loaded before the dots are kept from ``s15-a``.

Unchanged: rows 0 = dense (through ``sparse_ptr`` + (dense - sparse)), 1..26 sparse, 27..31 masked; H = T with the low
13 mantissa bits cleared (exact in TF32), L = T - H (truncated to TF32 by the Tensor Core as an operand); emulated at
2,048 samples against float64: max error 2.1e-5 (0.10 of KernelBench's atol + rtol |ref|), relative L2 3.5e-7 at 1x
and 64x inputs (the same terms as the shipped kernel). Inputs read once, output written once (the compulsory 129 MB;
floor 30.6 us). Grid ``PPS x SMs`` (one wave: every config fits PPS programs per SM by registers and shared memory,
``_CONFIGS``); ``triton.autotune`` over stages, PPS and PF (PF 0: no prefetch); one config under
``TRITON_INTERPRET=1``, which never prefetches (no inline assembly there).
Risk: with one warp, a sample's dots are one warp's serial chain (~1 us alone on a sub-core against ~0.55 us for the
shipped 2-warp split), so the last samples after the DRAM stream ends take longer; the gain needs the pipe to bind.
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: sm_90, BLOCK_H 16, BLOCK_K 32, Triton 3.6 ptxas, all 1 warp (registers, stack bytes, shared memory -> programs per
#: SM; loop body in SASS instructions per sample, 224 HMMA.1688 each): 3 stages: 244, 0, 33 KB -> 6 (1,232); 3 stages,
#: PF 4: the same; 2 stages, cap 168: 168, 0, 17 KB -> 12 (1,226); 2 stages, cap 200: 200, 0, 17 KB -> 10 (1,233);
#: the last config has no prefetch. (2 warps would repeat every [16, 16] dot in both warps: Triton 3.6 gives chained
#: dots warpsPerCTA [num_warps, 1], and a 16-row block has one m16 tile.)
_CONFIGS = [
    triton.Config({"PPS": 6, "PF": 3}, num_warps=1, num_stages=3),
    triton.Config({"PPS": 6, "PF": 4}, num_warps=1, num_stages=3),
    triton.Config({"PPS": 12, "PF": 2}, num_warps=1, num_stages=2, maxnreg=168),
    triton.Config({"PPS": 12, "PF": 3}, num_warps=1, num_stages=2, maxnreg=168),
    triton.Config({"PPS": 10, "PF": 2}, num_warps=1, num_stages=2, maxnreg=200),
    triton.Config({"PPS": 6, "PF": 0}, num_warps=1, num_stages=3),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"PPS": 2, "PF": 2}, num_warps=1, num_stages=1)]


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


@triton.autotune(configs=_CONFIGS, key=["B", "D", "NS", "PRECISION", "PREFETCH"], do_bench=_bench)
@triton.jit
def _dot_interaction_kernel(dense_ptr, sparse_ptr, out_ptr, B, D, NS, OUT_W, DOFF,
                            BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, NCHUNK: tl.constexpr,
                            BLOCK_D: tl.constexpr, PRECISION: tl.constexpr, PREFETCH: tl.constexpr,
                            PPS: tl.constexpr, PF: tl.constexpr):
    # PPS (programs per SM) only sizes the grid; it is a parameter so that the autotuner can vary it.
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    my_samples = tl.cdiv(B - pid, nprog)  # samples pid, pid + nprog, ...
    F = NS + 1
    i = tl.arange(0, BLOCK_H)  # a row within a half: rows i (half 0) and BLOCK_H + i (half 1)
    j = tl.arange(0, BLOCK_H)
    kk = tl.arange(0, BLOCK_K)
    dd = tl.arange(0, BLOCK_D)
    i1 = BLOCK_H + i
    pos0 = (i * (i - 1)) // 2
    pos1 = (i1 * (i1 - 1)) // 2
    # strict lower triangle of each output block: (0, 0) rows i > cols j; (1, 0) every valid row; (1, 1) i > j
    tri0 = (i[:, None] > j[None, :]) & (i < F)[:, None]
    all1 = (i1 < F)[:, None] & (j >= 0)[None, :]
    tri1 = (i[:, None] > j[None, :]) & (i1 < F)[:, None]
    rmask0 = i < F
    rmask1 = i1 < F
    dmask = dd < D
    is0 = (i == 0).to(tl.int64)
    # 1 at run time, opaque to Triton's alignment analysis: the dense row's load then has the layout of its store
    # (one element per thread; the output row is only 4-byte aligned), so no shared-memory conversion between them
    one = (B >= 0).to(tl.int32)
    if PREFETCH and PF > 1:
        # before the first iteration: this program's samples 1 .. PF - 1 into the L2 (the loop prefetches sample
        # m + PF at iteration m), so the DRAM has work queued from the start
        for q in tl.static_range(1, PF):
            sq = pid.to(tl.int64) + q * nprog
            if sq < B:
                _prefetch_l2(sparse_ptr + sq * (NS * D), NS * D * 4)
                _prefetch_l2(dense_ptr + sq * D, D * 4)
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
        roff0 = (s64 * NS + i - 1) * D + is0 * (DOFF + s64 * (D - NS * D) + D)
        roff1 = (s64 * NS + i1 - 1) * D
        out_row = out_ptr + s64 * OUT_W
        # the dense row for the output, loaded BEFORE the dots (an L2 hit; stored after them)
        dense = tl.load(dense_ptr + s64 * D + dd * one, mask=dmask)
        z0 = tl.zeros([BLOCK_H, BLOCK_H], dtype=tl.float32)  # H0 H0^T
        z1 = tl.zeros([BLOCK_H, BLOCK_H], dtype=tl.float32)  # H1 H0^T
        z2 = tl.zeros([BLOCK_H, BLOCK_H], dtype=tl.float32)  # H1 H1^T
        c0 = tl.zeros([BLOCK_H, BLOCK_H], dtype=tl.float32)  # L0 H0^T
        c1 = tl.zeros([BLOCK_H, BLOCK_H], dtype=tl.float32)  # L1 H0^T + H1 L0^T
        c2 = tl.zeros([BLOCK_H, BLOCK_H], dtype=tl.float32)  # L1 H1^T
        # the whole sample in one iteration: NCHUNK x 2 loads of [BLOCK_H, BLOCK_K] (one sample's contiguous 13 KB),
        # issued together by the pipeliner num_stages - 1 iterations ahead; 7 half-size dots per chunk: the block
        # (0, 1) above the diagonal, 1/4 of H H^T, is never computed
        for kc in tl.static_range(NCHUNK):
            k = kc * BLOCK_K + kk
            kmask = (k < D)[None, :]
            t0 = tl.load(sparse_ptr + roff0[:, None] + k[None, :], mask=rmask0[:, None] & kmask, other=0.0)
            t1 = tl.load(sparse_ptr + roff1[:, None] + k[None, :], mask=rmask1[:, None] & kmask, other=0.0)
            # H = T with the low 13 mantissa bits cleared (exact in TF32), L = T - H (exact, |L| < 2^-10 |T|)
            h0 = (t0.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)
            h1 = (t1.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)
            l0 = t0 - h0
            l1 = t1 - h1
            h0t = tl.trans(h0)
            z0 = tl.dot(h0, h0t, z0, input_precision=PRECISION)
            z1 = tl.dot(h1, h0t, z1, input_precision=PRECISION)
            z2 = tl.dot(h1, tl.trans(h1), z2, input_precision=PRECISION)
            c0 = tl.dot(l0, h0t, c0, input_precision=PRECISION)
            c1 = tl.dot(l1, h0t, c1, input_precision=PRECISION)
            c1 = tl.dot(h1, tl.trans(l0), c1, input_precision=PRECISION)
            c2 = tl.dot(l1, tl.trans(h1), c2, input_precision=PRECISION)
        tl.store(out_row + dd, dense, mask=dmask)
        # Z = H H^T + C + C^T (C = L H^T) block by block: (0, 0) and (1, 1) add their own transpose, (1, 0) holds
        # C10 + C01^T = L1 H0^T + H1 L0^T already
        tri_row = out_row + D
        tl.store(tri_row + pos0[:, None] + j[None, :], z0 + c0 + tl.trans(c0), mask=tri0)
        tl.store(tri_row + pos1[:, None] + j[None, :], z1 + c1, mask=all1)
        tl.store(tri_row + pos1[:, None] + BLOCK_H + j[None, :], z2 + c2 + tl.trans(c2), mask=tri1)


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
        block_h = max(32, triton.next_power_of_2(f)) // 2  # half the padded rows (a dot needs 16)
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
                        grid, dense, sparse, out, batch, dim, ns, out_w, doff, BLOCK_H=block_h, BLOCK_K=block_k,
                        NCHUNK=nchunk, BLOCK_D=block_k * nchunk, PRECISION=precision, PREFETCH=prefetch)
                return out
            except Exception:
                if len(_PRECISIONS) == 1:
                    raise
                _PRECISIONS.pop(0)  # this Triton cannot lower TF32 dots here: fall back to IEEE fp32 FMA
