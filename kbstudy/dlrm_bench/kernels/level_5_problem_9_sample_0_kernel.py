"""kbstudy-triton candidate for DLRM-Bench problem 9 (DLRM pairwise dot interaction).

One program per sample: the 27 feature vectors (row 0 = dense, rows 1..26 = sparse) form a [32, D] tile (rows 27..31
masked to zero) that is read ``BLOCK_K`` columns at a time; ``Z += T_k T_k^T`` is one ``tl.dot`` per chunk (Tensor
Cores with 3-pass TF32, ``input_precision="tf32x3"``, which keeps fp32 accuracy; IEEE fp32 if a Triton build cannot
lower it), the dense chunk is copied to the output on the way, and the strict lower triangle of Z is stored straight
to its place ``D + i(i-1)/2 + j`` of the output row. No [B, 27, 27] intermediate, no gather, no ``cat``; inputs are
read once and the output written once (the compulsory traffic).

Why it should approach the floor: the former version loaded the whole [32, 128] tile at once; tf32x3 keeps hi/lo
copies of both operands, which cost 255 registers with spills and 64 KB of shared memory per program (sm_90), i.e.
2 programs per SM for 8192 latency-bound programs. Chunking D (``BLOCK_K`` = 32: 94 registers, 20 KB shared, no spill)
lets 5 programs share an SM and pipelines the chunk loads (``num_stages``). The FLOPs (0.74 GFLOP needed) are far
below the Tensor Core rate, so the call is bound by its 129 MB of traffic and, at this size, by its single launch.
``triton.autotune`` picks the chunk, warps and stages on the GPU (one config under ``TRITON_INTERPRET=1``).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: sm_90 (Triton 3.9 ptxas, tf32x3): BLOCK_K 32 -> 94-96 registers, 16-29 KB shared; 64 -> 166 registers, 41 KB.
_CONFIGS = [
    triton.Config({"BLOCK_K": 32}, num_warps=4, num_stages=2),
    triton.Config({"BLOCK_K": 32}, num_warps=4, num_stages=3),
    triton.Config({"BLOCK_K": 32}, num_warps=8, num_stages=2),
    triton.Config({"BLOCK_K": 64}, num_warps=8, num_stages=2),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"BLOCK_K": 32}, num_warps=4, num_stages=1)]


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


@triton.autotune(configs=_CONFIGS, key=["D", "NS", "PRECISION"], do_bench=_bench)
@triton.jit
def _dot_interaction_kernel(dense_ptr, sparse_ptr, out_ptr, D, NS, OUT_W,
                            BLOCK_F: tl.constexpr, PRECISION: tl.constexpr, BLOCK_K: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    i = tl.arange(0, BLOCK_F)
    F = NS + 1
    sparse_rows = (i >= 1) & (i < F)
    row_base = sparse_ptr + (b * NS + i - 1) * D
    out_row = out_ptr + b * OUT_W
    z = tl.zeros([BLOCK_F, BLOCK_F], dtype=tl.float32)
    for k0 in range(0, D, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        kmask = k < D
        t = tl.load(row_base[:, None] + k[None, :], mask=sparse_rows[:, None] & kmask[None, :], other=0.0)
        dense = tl.load(dense_ptr + b * D + k, mask=kmask, other=0.0)
        tl.store(out_row + k, dense, mask=kmask)
        t = tl.where((i == 0)[:, None], dense[None, :], t)
        z = tl.dot(t, tl.trans(t), z, input_precision=PRECISION)
    j = tl.arange(0, BLOCK_F)
    pos = (i * (i - 1)) // 2
    tri = (i[:, None] > j[None, :]) & (i < F)[:, None]
    tl.store(out_row + D + pos[:, None] + j[None, :], z, mask=tri)


_PRECISIONS = ["tf32x3", "ieee"]


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
        while True:
            try:
                precision = _PRECISIONS[0]
                _launch(_dot_interaction_kernel, (dim, ns, precision, dense.dtype, dense.device), (batch,),
                        dense, sparse, out, dim, ns, out_w, BLOCK_F=block_f, PRECISION=precision)
                return out
            except Exception:
                if len(_PRECISIONS) == 1:
                    raise
                _PRECISIONS.pop(0)  # this Triton cannot lower tf32x3 here: fall back to IEEE fp32 FMA
