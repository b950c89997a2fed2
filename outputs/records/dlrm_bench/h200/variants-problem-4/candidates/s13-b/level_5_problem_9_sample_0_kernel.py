"""kbstudy-triton candidate for DLRM-Bench problem 9 (DLRM pairwise dot interaction), variant s13-b (one program
per group of samples, the whole group prefetched).

The same arithmetic as s13-a, without persistence: one program per group of ``S`` samples, one warp per sample. The
27 vectors of each sample (row 0 = dense, read through ``sparse_ptr`` + (dense - sparse); rows 1..26 = sparse; rows
27..31 masked to zero) form an ``[S, 32, D]`` block read ``BLOCK_K`` = 32 columns per iteration of a loop that Triton
pipelines with 16-byte ``cp.async`` into shared memory; with ``num_stages`` 5 and D = 128 (4 chunks) all of a group's
~55 KB is requested before the first dot. Each chunk is a batched ``tl.dot`` ([S, 32, K] x [S, K, 32]; the MMA's warps
split the batch, so no operand is loaded twice). fp32 accuracy from a 2-pass split: ``H`` = T with the low 13
mantissa bits cleared (exact in TF32), ``L = T - H``, ``Z = H H^T + C + C^T`` with ``C = H L^T`` (Z is symmetric: 2
Tensor-Core passes instead of tf32x3's 3; emulated max error 3.7e-5 against float64, 0.11 of KernelBench's 1e-4
bound). The dense chunk is copied on the way; the strict lower triangle goes to ``D + i(i-1)/2 + j`` of each row.

Why faster than the shipped kernel (118.5 us, 3.9x its 30.4 us floor): the shipped tile wastes half its MMA warps
(a ``[4, 1]`` warp grid of 16-row warps over M = 32) and stores/reloads tf32x3 hi/lo copies of both operands, ~290
KB of shared-memory traffic per sample (~70 us of an SM's bandwidth for its 62 samples), with one exposed HBM round
trip per 4 KB chunk. Here a chunk of one sample costs its warp a 4 KB ``cp.async`` write, 16 ``ldmatrix.x4`` (8 KB)
and 64 HMMA; the loop body is ~200-250 instructions per chunk (Triton 3.6 SASS), ~1,300 per sample with the
epilogue, so the SM's shared memory (~14 us), Tensor Cores (~8-16 us) and issue slots stay below its ~31 us of HBM
time. Bytes in flight: 3 programs x 4 chunks x 16 KB = 192 KB per SM at the start of their groups, 2048 programs
(S = 4) for the hardware to schedule dynamically (no static imbalance; against s13-a: no flattened-loop bookkeeping,
but a pipeline fill per group). ``triton.autotune`` picks S/warps, stages and the register cap on the GPU (one
config under ``TRITON_INTERPRET=1``).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: sm_90, BLOCK_K 32, Triton 3.6 ptxas (registers, stack bytes, shared memory; programs of 4 warps per SM):
#: 5 stages (the whole group requested up front) 156, 0, 64 KB -> 3; 4 stages capped at 168: 168, 8 B, 48 KB -> 3;
#: 3 stages capped at 128: 128, 8 B, 32 KB -> 4; S 2 / 2 warps capped at 128: 128, 48 B, 24 KB -> 8 of 2 warps;
#: S 8 / 8 warps capped at 128: 128, 24 B, 64 KB -> 2 of 8 warps. Uncapped at 3 stages: 168.
_CONFIGS = [
    triton.Config({"S": 4}, num_warps=4, num_stages=5, maxnreg=168),
    triton.Config({"S": 4}, num_warps=4, num_stages=4, maxnreg=168),
    triton.Config({"S": 4}, num_warps=4, num_stages=3, maxnreg=128),
    triton.Config({"S": 2}, num_warps=2, num_stages=4, maxnreg=128),
    triton.Config({"S": 8}, num_warps=8, num_stages=3, maxnreg=128),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"S": 2}, num_warps=2, num_stages=1)]


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


@triton.autotune(configs=_CONFIGS, key=["B", "D", "NS", "PRECISION"], do_bench=_bench)
@triton.jit
def _dot_interaction_kernel(dense_ptr, sparse_ptr, out_ptr, B, D, NS, OUT_W, DOFF,
                            BLOCK_F: tl.constexpr, BLOCK_K: tl.constexpr, NCHUNK: tl.constexpr,
                            PRECISION: tl.constexpr, S: tl.constexpr):
    pid = tl.program_id(0)
    F = NS + 1
    i = tl.arange(0, BLOCK_F)
    j = tl.arange(0, BLOCK_F)
    kk = tl.arange(0, BLOCK_K)
    s = pid * S + tl.arange(0, S)
    smask = s < B
    s64 = s.to(tl.int64)
    # Element offset from sparse_ptr of row i of sample s: sparse row i - 1, or for i == 0 the dense row (DOFF =
    # dense - sparse, in elements). Written with a 0/1 factor, not tl.where: both Triton 3.6 and 3.9 then prove the
    # 16-byte alignment (D and DOFF divisible by 16) and issue 16-byte cp.async; a select loses it in one or the other.
    is0 = (i == 0).to(tl.int64)
    off = (s64[:, None] * NS + i[None, :] - 1) * D + is0[None, :] * (DOFF + s64[:, None] * (D - NS * D) + D)
    rmask = smask[:, None] & (i < F)[None, :]
    out_row = out_ptr + s64 * OUT_W
    z = tl.zeros([S, BLOCK_F, BLOCK_F], dtype=tl.float32)  # H H^T
    c = tl.zeros([S, BLOCK_F, BLOCK_F], dtype=tl.float32)  # H L^T
    for kc in range(0, NCHUNK):  # pipelined: num_stages - 1 chunks in flight
        k = kc * BLOCK_K + kk
        kmask = k < D
        t = tl.load(sparse_ptr + off[:, :, None] + k[None, None, :], mask=rmask[:, :, None] & kmask[None, None, :],
                    other=0.0)
        dmask = smask[:, None] & kmask[None, :]
        dense = tl.load(dense_ptr + s64[:, None] * D + k[None, :], mask=dmask)
        tl.store(out_row[:, None] + k[None, :], dense, mask=dmask)
        # H = T with the low 13 mantissa bits cleared (exact in TF32), L = T - H (exact, |L| < 2^-10 |T|)
        hi = (t.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)
        lo = t - hi
        z = tl.dot(hi, tl.permute(hi, (0, 2, 1)), z, input_precision=PRECISION)
        c = tl.dot(hi, tl.permute(lo, (0, 2, 1)), c, input_precision=PRECISION)
    r = z + c + tl.permute(c, (0, 2, 1))
    pos = (i * (i - 1)) // 2
    tri = (i[:, None] > j[None, :]) & (i < F)[:, None]
    tl.store(out_row[:, None, None] + D + (pos[:, None] + j[None, :])[None, :, :], r,
             mask=smask[:, None, None] & tri[None, :, :])


_PRECISIONS = ["tf32", "ieee"]


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
        doff = (dense.data_ptr() - sparse.data_ptr()) // dense.element_size()  # dense row 0 = sparse_ptr + doff

        def grid(meta):
            return (triton.cdiv(batch, meta["S"]),)

        while True:
            try:
                precision = _PRECISIONS[0]
                _launch(_dot_interaction_kernel, (batch, dim, ns, precision, dense.dtype, dense.device), grid,
                        dense, sparse, out, batch, dim, ns, out_w, doff, BLOCK_F=block_f, BLOCK_K=block_k,
                        NCHUNK=triton.cdiv(dim, block_k), PRECISION=precision)
                return out
            except Exception:
                if len(_PRECISIONS) == 1:
                    raise
                _PRECISIONS.pop(0)  # this Triton cannot lower TF32 dots here: fall back to IEEE fp32 FMA
