"""kbstudy-triton candidate for DLRM-Bench problem 9 (DLRM pairwise dot interaction) (persistent).

A persistent grid (``PPS`` programs per SM) walks groups of ``S`` samples, one warp per sample: each sample's 27
vectors (row 0 = dense, rows 1..26 = sparse, rows 27..31 masked to zero) form an ``[S, 32, D]`` block read ``BLOCK_K``
= 32 columns at a time in ONE flattened loop over (group, chunk), so Triton's software pipeliner keeps
``num_stages - 1`` chunks in flight across group boundaries (16-byte ``cp.async`` straight into shared memory, no
register staging, no drain between groups). Row 0 is read through ``sparse_ptr`` + (dense - sparse) so that one load
serves the whole block. Each chunk is a batched ``tl.dot`` ([S, 32, K] x [S, K, 32]: the MMA's warps split the
batch, so no operand is loaded by two warps). fp32 accuracy from a hand-made 2-pass split instead of ``tf32x3``:
``H`` = T with the low 13 mantissa bits cleared (exact in TF32), ``L = T - H``, and ``Z = H H^T + C + C^T`` with
``C = H L^T`` (Z is symmetric, so 2 Tensor-Core passes instead of 3; the dropped ``L L^T`` and the TF32 truncation
of ``L`` are ~2^-20 relative per product: emulated at 2048 x 27 x 128, max error 3.7e-5 against float64, 0.11 of
KernelBench's atol/rtol 1e-4 bound, as plain fp32 matmul's 0.10). The dense chunk is copied to the output on the
way; at a group's last chunk the strict lower triangle of ``z + c + c^T`` is stored to ``D + i(i-1)/2 + j``: no
intermediate, no gather, no ``cat``; inputs read once, output written once (the compulsory 129 MB).

Why it beats the session-12 kernel (one program per sample, 118.5 us device time, 3.9x its 30.4 us floor): its
SASS (sm_90, Triton 3.6 and 3.9 alike) runs its M = 32 tile on a ``[4, 1]`` MMA warp grid of 16-row warps, so warps
2-3 repeat warps 0-1, and tf32x3 stores and reloads hi/lo copies of both operands: per 32-column chunk of one sample
48 HMMA and 24 ``ldmatrix.x4`` per warp, 8 ``st.shared.v4``, and the ``cp.async`` buffer read back: ~72 KB of
shared-memory traffic per chunk, ~290 KB per sample, i.e. ~70 us of an SM's 128 B/clk for its 62 samples, plus one
exposed HBM round trip per chunk (its copy of chunk k+1 is issued after chunk k's dots: 4 KB in flight per
program, 5 programs per SM). Here (Triton 3.6 SASS) a chunk of one sample costs its warp one 4 KB ``cp.async`` write, 16
``ldmatrix.x4`` (8 KB: A and B^T once) and 64 HMMA: ~12 KB of shared-memory traffic (6x less), the split done in
registers after ``ldmatrix``; per sample ~1,600 warp instructions (4 chunks of 322 + a 311-instruction epilogue).
Per SM: ~14 us of shared-memory time, ~8-16 us of HMMA, ~25k issue cycles, all below the ~31 us of HBM time, and
4 programs x 2 chunks x 16 KB = 128 KB requested ahead (Little's law needs ~25-35 KB per SM at ~4.2 TB/s and 1-2 us
of loaded latency). Program g takes groups g, g + grid, ...; grid = ``min(groups, PPS x SMs)``, so a config whose
registers or shared memory do not fit ``PPS`` programs per SM just loses the tuning. Registers are capped with
``maxnreg`` (Triton 3.6: 214 uncapped; at 128 only 24 bytes of stack, a few loop-invariant reloads per chunk).
``triton.autotune`` picks S/warps, stages, cap and PPS on the GPU (one config under ``TRITON_INTERPRET=1``).

Measured on the H200 in session 13's variant run (`outputs/records/h200-dlrm-s13-variants`, `s13-a`): 39.8 us of
device time against the session-12 kernel's 119.6 us in the same run (1.32x of the floor), per call 0.79x of it
(0.77-0.83).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: sm_90, BLOCK_K 32, Triton 3.6 ptxas (registers, stack bytes, shared memory -> programs per SM): 4 warps, 3 stages,
#: cap 128: 128, 24, 48 KB -> 4 (16 warps, 196 KB); 4 stages, cap 168: 168, 0, 64 KB -> 3; 4 stages uncapped: 214,
#: 0, 64 KB -> 2; S 2 / 2 warps, 3 stages, cap 128: 128, 16, 24 KB -> 8; 2 stages, cap 128: 128, 24, 32 KB -> 4.
#: (Triton 3.9 spills more at the caps: 88-208 bytes.)
_CONFIGS = [
    triton.Config({"S": 4, "PPS": 4}, num_warps=4, num_stages=3, maxnreg=128),
    triton.Config({"S": 4, "PPS": 3}, num_warps=4, num_stages=4, maxnreg=168),
    triton.Config({"S": 4, "PPS": 2}, num_warps=4, num_stages=4),
    triton.Config({"S": 2, "PPS": 8}, num_warps=2, num_stages=3, maxnreg=128),
    triton.Config({"S": 4, "PPS": 4}, num_warps=4, num_stages=2, maxnreg=128),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"S": 2, "PPS": 2}, num_warps=2, num_stages=1)]


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
                            PRECISION: tl.constexpr, S: tl.constexpr, PPS: tl.constexpr):
    # PPS (programs per SM) only sizes the grid; it is a parameter so that the autotuner can vary it.
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    my_groups = tl.cdiv(tl.cdiv(B, S) - pid, nprog)  # groups pid, pid + nprog, ... of S samples
    F = NS + 1
    i = tl.arange(0, BLOCK_F)
    j = tl.arange(0, BLOCK_F)
    w = tl.arange(0, S)
    kk = tl.arange(0, BLOCK_K)
    pos = (i * (i - 1)) // 2
    tri = (i[:, None] > j[None, :]) & (i < F)[:, None]
    # Element offset from sparse_ptr of row i of sample s: sparse row i - 1, or for i == 0 the dense row (DOFF =
    # dense - sparse, in elements). Written with a 0/1 factor, not tl.where: both Triton 3.6 and 3.9 then prove the
    # 16-byte alignment (D and DOFF divisible by 16) and issue 16-byte cp.async; a select loses it in one or the other.
    is0 = (i == 0).to(tl.int64)
    s0 = (pid * S + w).to(tl.int64)
    goff = (s0[:, None] * NS + i[None, :] - 1) * D + is0[None, :] * (DOFF + s0[:, None] * (D - NS * D) + D)
    gstep = (nprog * S).to(tl.int64) * D * (NS + is0 * (1 - NS))  # moves every row on by nprog * S samples
    z = tl.zeros([S, BLOCK_F, BLOCK_F], dtype=tl.float32)  # H H^T
    c = tl.zeros([S, BLOCK_F, BLOCK_F], dtype=tl.float32)  # H L^T
    # one flattened loop over (group, chunk): the pipeliner prefetches across group boundaries
    for it in range(0, my_groups * NCHUNK):
        m = it // NCHUNK
        kc = it - m * NCHUNK
        s = (pid + m * nprog) * S + w
        smask = s < B
        k = kc * BLOCK_K + kk
        kmask = k < D
        t = tl.load(sparse_ptr + goff[:, :, None] + k[None, None, :],
                    mask=(smask[:, None] & (i < F)[None, :])[:, :, None] & kmask[None, None, :], other=0.0)
        s64 = s.to(tl.int64)
        out_row = out_ptr + s64 * OUT_W
        dmask = smask[:, None] & kmask[None, :]
        dense = tl.load(dense_ptr + s64[:, None] * D + k[None, :], mask=dmask)
        tl.store(out_row[:, None] + k[None, :], dense, mask=dmask)
        # H = T with the low 13 mantissa bits cleared (exact in TF32), L = T - H (exact, |L| < 2^-10 |T|)
        hi = (t.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)
        lo = t - hi
        z = tl.dot(hi, tl.permute(hi, (0, 2, 1)), z, input_precision=PRECISION)
        c = tl.dot(hi, tl.permute(lo, (0, 2, 1)), c, input_precision=PRECISION)
        if kc == NCHUNK - 1:
            r = z + c + tl.permute(c, (0, 2, 1))
            tl.store(out_row[:, None, None] + D + (pos[:, None] + j[None, :])[None, :, :], r,
                     mask=smask[:, None, None] & tri[None, :, :])
            z = tl.zeros([S, BLOCK_F, BLOCK_F], dtype=tl.float32)
            c = tl.zeros([S, BLOCK_F, BLOCK_F], dtype=tl.float32)
        goff += (kc == NCHUNK - 1).to(tl.int64) * gstep[None, :]


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
        sms = _num_sms(dense.device)

        def grid(meta):
            return (max(1, min(triton.cdiv(batch, meta["S"]), meta["PPS"] * sms)),)

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
