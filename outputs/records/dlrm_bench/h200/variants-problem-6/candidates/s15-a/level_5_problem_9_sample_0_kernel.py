"""kbstudy-triton candidate for DLRM-Bench problem 9 (DLRM pairwise dot interaction), variant s15-a: the shipped
kernel (session 14's ``s14-a``: persistent grid, one whole sample per iteration as four [32, 32] ``cp.async`` loads,
``cp.async.bulk.prefetch.L2`` of the sample ``PF`` iterations ahead, 2-pass TF32 split) with a shorter loop body and
no global round trip inside it.

Why: the kernel is bound by its per-sample instruction stream and the latencies inside it, not by the DRAM alone.
Session 14's round 2 (``s14-c``) added ~9 % instructions, 24 more LDSM and ~18 more barriers per sample to the loop
and took 38 % MORE device time (59.9 against 43.6 us): a pure memory-bound kernel would not have moved. The shipped
loop (2 warps, Triton 3.6 SASS) spends 827 warp instructions per warp and sample, 6 barriers, and after the
triangle's stores waits for a dense-row LDG (an L2 hit, ~0.5-1 us under load; ptxas cannot hoist it above the stores,
which may alias) before it issues the next sample's ``cp.async`` and prefetch, then moves the row through shared
memory (STS, BAR, LDS) because its 8-byte-vector load and 4-byte store have different layouts.

What changes (same bytes, same copies, same prefetch, same arithmetic accuracy):
1. ``c = L H^T`` instead of ``H L^T`` (``r = z + c + c^T`` is the same symmetric sum): with 2 warps the A operand is
   each warp's 16 rows and the B operand all 32 rows, so ``L = T - H`` is computed on 16 values per thread and chunk
   instead of 32, and both dots share the B fragment ``H^T``. Loop body 827 -> 670 instructions per warp and sample
   (-19 %; LOP3+FADD 324 -> ~200), registers 168 (capped) -> 148 with no cap and no spill.
2. The dense row is loaded at the top of the iteration, before the dots, and stored after them: its L2 latency
   overlaps the Tensor-Core work, and the next sample's copies follow the triangle's stores directly. Its offsets are
   multiplied by a run-time 1 (``B >= 0``) that Triton's alignment analysis cannot see through, so load and store
   share a one-element-per-thread layout: no shared-memory conversion, 4 barriers per sample instead of 6.
3. Before the loop each program prefetches its samples 1 .. PF-1 into the L2 (the loop prefetches sample m + PF at
   iteration m, so sample 2 was never prefetched at PF 3): ~11 MB more queued at the start, when only the prologue's
   22 MB of copies are in flight and no program has finished an iteration.
Per SM (62-63 samples, 6 programs of 2 warps): ~83k warp instructions (was ~103k), 15.9k HMMA.1688 (unchanged,
~16 us of tensor pipe at mma.sync's rate), against ~28 us of DRAM time for 113 MB read + 15.7 MB written. Expected
gain: the instruction and barrier cut that s14-c measured in the other direction (+9 % instructions, +38 % time),
i.e. a few microseconds of the 38.0 us (target 37.8, 5 % = 36.1 us).

Unchanged: rows 0 = dense (through ``sparse_ptr`` + (dense - sparse)), 1..26 sparse, 27..31 masked; H = T with the low
13 mantissa bits cleared (exact in TF32), L = T - H (truncated to TF32 by the Tensor Core, as the shipped B operand
was); emulated at full size against float64: max error 2.1e-5 (0.10 of KernelBench's atol + rtol |ref|), relative
L2 3.5e-7, at 1x and 64x inputs; the strict lower triangle stored to ``D + i(i-1)/2 + j``; inputs read once, output
written once (the compulsory 129 MB; floor 30.3 us). Grid ``PPS x SMs`` (one wave, every config fits PPS programs
per SM by registers and shared memory: ``_CONFIGS``), ``triton.autotune`` over warps, stages, PPS and PF (PF 0: no
prefetch); one config under ``TRITON_INTERPRET=1``, which never prefetches (no inline assembly there).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: sm_90, BLOCK_K 32, Triton 3.6 ptxas (registers, stack bytes, shared memory -> programs per SM by registers and
#: shared memory, warps per SM; loop body in SASS instructions per warp and sample):
#: 2 warps, 3 stages: 148, 0, 36 KB -> 6 (12 warps; 670); 2 warps, 3 stages, PF 4: the same; 2 warps, 2 stages,
#: cap 128: 128, 24, 20 KB -> 8 (16 warps; 697, 5 of them L1-resident LDL); 1 warp, 2 stages, cap 200: 184, 0, 20 KB
#: -> 10 (10 warps; 1,211); 1 warp, 3 stages: 141, 0, 36 KB -> 6 (6 warps; 1,233); the last config has no prefetch
#: (2 warps, 3 stages: 148, 0, 36 KB; 638).
_CONFIGS = [
    triton.Config({"PPS": 6, "PF": 3}, num_warps=2, num_stages=3),
    triton.Config({"PPS": 6, "PF": 4}, num_warps=2, num_stages=3),
    triton.Config({"PPS": 8, "PF": 2}, num_warps=2, num_stages=2, maxnreg=128),
    triton.Config({"PPS": 10, "PF": 2}, num_warps=1, num_stages=2, maxnreg=200),
    triton.Config({"PPS": 6, "PF": 3}, num_warps=1, num_stages=3),
    triton.Config({"PPS": 6, "PF": 0}, num_warps=2, num_stages=3),
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


@triton.autotune(configs=_CONFIGS, key=["B", "D", "NS", "PRECISION", "PREFETCH"], do_bench=_bench)
@triton.jit
def _dot_interaction_kernel(dense_ptr, sparse_ptr, out_ptr, B, D, NS, OUT_W, DOFF,
                            BLOCK_F: tl.constexpr, BLOCK_K: tl.constexpr, NCHUNK: tl.constexpr,
                            BLOCK_D: tl.constexpr, PRECISION: tl.constexpr, PREFETCH: tl.constexpr,
                            PPS: tl.constexpr, PF: tl.constexpr):
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
        roff = (s64 * NS + i - 1) * D + is0 * (DOFF + s64 * (D - NS * D) + D)
        out_row = out_ptr + s64 * OUT_W
        # the dense row for the output, loaded BEFORE the dots (an L2 hit; stored after them): its latency overlaps
        # the Tensor-Core work instead of stalling the warp between the triangle's stores and the next sample's copies
        dense = tl.load(dense_ptr + s64 * D + dd * one, mask=dmask)
        z = tl.zeros([BLOCK_F, BLOCK_F], dtype=tl.float32)  # H H^T
        c = tl.zeros([BLOCK_F, BLOCK_F], dtype=tl.float32)  # L H^T
        # the whole sample in one iteration: NCHUNK loads of BLOCK_K columns, all issued together (one sample's
        # contiguous 13 KB) by the pipeliner num_stages - 1 iterations ahead, each a pair of Tensor-Core dots
        for kc in tl.static_range(NCHUNK):
            k = kc * BLOCK_K + kk
            t = tl.load(sparse_ptr + roff[:, None] + k[None, :], mask=rmask[:, None] & (k < D)[None, :], other=0.0)
            # H = T with the low 13 mantissa bits cleared (exact in TF32), L = T - H (exact, |L| < 2^-10 |T|)
            hi = (t.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)
            lo = t - hi
            z = tl.dot(hi, tl.trans(hi), z, input_precision=PRECISION)
            # L is the A operand (each warp's 16 rows), H^T the B operand shared with z: L - H is computed on the
            # smaller fragment (16 instead of 32 values per thread and chunk with 2 warps)
            c = tl.dot(lo, tl.trans(hi), c, input_precision=PRECISION)
        tl.store(out_row + dd, dense, mask=dmask)
        r = z + c + tl.trans(c)
        tl.store(out_row + D + pos[:, None] + j[None, :], r, mask=tri)


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
                        NCHUNK=nchunk, BLOCK_D=block_k * nchunk, PRECISION=precision, PREFETCH=prefetch)
                return out
            except Exception:
                if len(_PRECISIONS) == 1:
                    raise
                _PRECISIONS.pop(0)  # this Triton cannot lower TF32 dots here: fall back to IEEE fp32 FMA
