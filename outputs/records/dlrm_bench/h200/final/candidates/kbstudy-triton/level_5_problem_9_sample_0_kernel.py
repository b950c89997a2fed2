"""kbstudy-triton candidate for DLRM-Bench problem 9 (DLRM pairwise dot interaction). Session 14's variant ``s14-a``
(one whole sample per iteration, whole-sample L2 prefetch), shipped in session 14.

A persistent grid (``PPS`` programs per SM, 1 or 2 warps each) walks samples pid, pid + G, pid + 2G, ... (G = the
grid). One loop iteration is one WHOLE sample: its 27 vectors (row 0 = dense, read through ``sparse_ptr`` + (dense -
sparse); rows 1..26 = sparse; rows 27..31 masked to zero) as ``NCHUNK`` = 4 loads of [32, 32] columns, which the
pipeliner issues together as 16-byte ``cp.async`` one or two iterations ahead (``num_stages`` 3 / 4), so the memory
system sees each sample's 13,312 contiguous sparse bytes (plus its 512-byte dense row) requested at once. The shipped
kernel asks for 128-byte column chunks of every 512-byte row, the four chunks of a row ~2.5 us apart, i.e. random
128-byte reads at 512-byte stride from the DRAM's point of view. On top, one thread of each program issues
``cp.async.bulk.prefetch.L2`` (sm_90 TMA, no destination, no register, nothing to wait for) for the sample ``PF``
iterations ahead: one bulk request for its sparse rows, one for its dense row. In Triton 3.6's SASS the prefetch and
the next sample's ``cp.async`` both sit at the end of the loop body, so ``PF`` = ``num_stages`` puts the prefetch one
iteration (~3 us) ahead of the copy: the copies hit the L2, and the DRAM streams whole samples as a copy does.
The arithmetic is the shipped kernel's: fp32 accuracy from a 2-pass TF32 split (``H`` = T with the low 13 mantissa
bits cleared, ``L = T - H``, ``Z = H H^T + C + C^T`` with ``C = H L^T``; 2 dots of [32, 32] x [32, 32] per chunk,
emulated max error 3.7e-5 against float64, 0.11 of KernelBench's 1e-4), 2D dots (no batch dimension), the strict
lower triangle stored to ``D + i(i-1)/2 + j`` (one row per warp store: coalesced), the dense row copied from a
separate 512-byte load (an L2 hit); inputs read once, output written once (the compulsory 129 MB).

Numbers (H200: 132 SMs, 4.27 TB/s copy; floor 30.3 us for 113 MB read + 15.7 MB written): per SM 62-63 samples,
~975 KB, i.e. ~32 KB/us. Bytes in flight per SM from the copies alone: 6 programs x 1-2 samples x 13.8 KB = 83-166 KB
(the shipped kernel: 4 programs x 1-2 chunks of 4 samples = 55-110 KB), plus ~792 x 13.8 KB = 11 MB of prefetches
ahead in the whole GPU (2.6 us of DRAM time; 11-18 MB of the 50 MB L2 held at once). Per sample (Triton 3.6 SASS,
loop body): 1 warp: 1,193 warp instructions, 256 HMMA.1688.TF32, 65 LDSM, 32 LDGSTS, 35 STG (the shipped kernel:
~1,600); 2 warps (``warpsPerCTA`` [2, 1], 16 rows each, B loaded by both): 2 x 827, 2 x 128 HMMA. Per SM 15.9k HMMA
(~17 us at mma.sync's ~2 clk per HMMA.1688 per SM, half of wgmma's TF32 rate) and 58-87k other instructions over
4 schedulers (8-11 us): below the 30 us of HBM time, with 6-12 warps per SM to overlap them. The grid is
``PPS x SMs``; every config fits ``PPS`` programs per SM by registers and shared memory (``_CONFIGS``), so it is one
wave; with the usual round-robin placement each SM gets 62-63 samples. The 2-stage configs are single-buffered
(Triton 3.6 issues the next sample's copies after the epilogue), so a program waits for each copy and only the
other programs (10 per SM) and the L2 prefetch hide it. ``triton.autotune`` picks warps, stages, PPS and PF (PF 0:
no prefetch) on the GPU; one config under ``TRITON_INTERPRET=1``, which never prefetches (no inline assembly there).

Measured on the H200 (session 14's variant run, ``outputs/records/h200-dlrm-s14-variants``): 43.4 us of cold device
time against the former kernel's 46.9 us (0.926x, interval 0.910-0.938), 1.43x the floor; 0.91x per call (interval
0.86-0.94). Not within 1.25x of the floor (37.9 us); a plain copy of the problem's 129 MB took 34.6 us in the same
run (1.14x the floor).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: sm_90, BLOCK_K 32, Triton 3.6 ptxas (registers, stack bytes, shared memory -> programs per SM, warps per SM):
#: 2 warps, 3 stages, cap 168: 168, 0, 36 KB -> 6 (12 warps; 64.5k registers, 222 KB); 1 warp, 3 stages: 234, 0,
#: 36 KB -> 6 (6 warps); 1 warp, 2 stages, cap 200: 172, 0, 20 KB -> 10 (10 warps); 2 warps, 4 stages: 188, 0, 52 KB
#: -> 4 (8 warps); 2 warps, 2 stages, cap 96: 96, 16, 20 KB -> 10 (20 warps); the last config has no prefetch.
_CONFIGS = [
    triton.Config({"PPS": 6, "PF": 3}, num_warps=2, num_stages=3, maxnreg=168),
    triton.Config({"PPS": 6, "PF": 3}, num_warps=1, num_stages=3),
    triton.Config({"PPS": 10, "PF": 2}, num_warps=1, num_stages=2, maxnreg=200),
    triton.Config({"PPS": 4, "PF": 4}, num_warps=2, num_stages=4),
    triton.Config({"PPS": 10, "PF": 2}, num_warps=2, num_stages=2, maxnreg=96),
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
            # H = T with the low 13 mantissa bits cleared (exact in TF32), L = T - H (exact, |L| < 2^-10 |T|)
            hi = (t.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)
            lo = t - hi
            z = tl.dot(hi, tl.trans(hi), z, input_precision=PRECISION)
            c = tl.dot(hi, tl.trans(lo), c, input_precision=PRECISION)
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
                        NCHUNK=nchunk, BLOCK_D=block_k * nchunk, PRECISION=precision, PREFETCH=prefetch)
                return out
            except Exception:
                if len(_PRECISIONS) == 1:
                    raise
                _PRECISIONS.pop(0)  # this Triton cannot lower TF32 dots here: fall back to IEEE fp32 FMA
