"""kbstudy-triton candidate for DLRM-Bench problem 11 (bottom MLP 13 -> 512 -> 256 -> 128, ReLU, bf16).

**One launch for the whole MLP.** A program owns ``BLOCK_M`` rows of x and carries them through all three layers
without writing an intermediate to memory:

1. layer 1 is computed ``BLOCK_H1`` hidden units at a time (``x [BLOCK_M, 16] @ W1^T``, K = 13 padded to one
   16-wide ``tl.dot`` step by masking), its bias and ReLU applied in fp32 and the chunk rounded to bf16 -- exactly
   the value eager PyTorch stores after its first ``addmm`` (``relu`` commutes with rounding);
2. each chunk is immediately consumed by layer 2 (``acc2 += h1_chunk @ W2[:, chunk]^T``), so the [BLOCK_M, 512]
   activation never exists in full;
3. ``h2 = bf16(relu(acc2 + b2))`` then ``out = bf16(relu(h2 @ W3^T + b3))`` (one ``tl.dot`` with K = 256).

Why one launch: the problem's floor is 3.6 us of bf16 Tensor Core work (2.8 GFLOP) and 2.7 MB of traffic, far
below one launch; eager PyTorch pays 6 dispatches (3 ``addmm`` + 3 ``relu``), a kernel per layer 3 Triton launches. Here
the whole call is 1 launch and 1 allocation (the output); the weights (340 KB) are re-read by every program from L2, and
the inputs/outputs (213 KB / 2 MB) cross DRAM once. The time left is the launch itself (see the launch-aware view of
notebook 4). ``triton.autotune`` picks BLOCK_M / BLOCK_H1 / warps per shape on the GPU (one config under
``TRITON_INTERPRET=1``).

Under ``TRITON_INTERPRET=1`` the operands are upcast to fp32 before ``tl.dot`` (the interpreter's bf16 dot is wrong in
Triton 3.9) and fp32 -> bf16 casts are rounded to nearest even by hand (the interpreter truncates); on a GPU the
operands stay bf16 with fp32 accumulation, as cuBLAS does, and the casts are native (round to nearest even).

Measured on the H200: 16.3 us of cold device time, 4.61x the floor (``outputs/records/dlrm_bench/h200/final``).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: sm_90 (Triton 3.9 ptxas): 64-row configs use wgmma (128 regs, 96 KB smem), 32-row ones mma.sync (152-164 regs,
#: 80 KB); none spills. 128-row tiles spill (acc2 alone is 128 regs/thread at 8 warps) and are left out.
_CONFIGS = [
    triton.Config({"BLOCK_M": 64, "BLOCK_H1": 64}, num_warps=8, num_stages=2),
    triton.Config({"BLOCK_M": 64, "BLOCK_H1": 32}, num_warps=8, num_stages=2),
    triton.Config({"BLOCK_M": 32, "BLOCK_H1": 64}, num_warps=4, num_stages=2),
    triton.Config({"BLOCK_M": 32, "BLOCK_H1": 32}, num_warps=4, num_stages=2),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"BLOCK_M": 16, "BLOCK_H1": 16}, num_warps=4, num_stages=1)]


@triton.jit
def _round(x, out_ty: tl.constexpr, RNE: tl.constexpr):
    """``x.to(out_ty)``; with ``RNE`` (interpreter, bf16) rounded to nearest even by hand first: Triton 3.9's
    interpreter truncates fp32 -> bf16, while GPUs (and eager PyTorch) round to nearest even."""
    if RNE:
        bits = x.to(tl.int32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536
        x = bits.to(tl.float32, bitcast=True)
    return x.to(out_ty)


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


@triton.autotune(configs=_CONFIGS, key=["M", "K1", "H1", "H2", "N3"], do_bench=_bench)
@triton.jit
def _mlp3_kernel(x_ptr, w1_ptr, b1_ptr, w2_ptr, b2_ptr, w3_ptr, b3_ptr, out_ptr, M,
                 K1: tl.constexpr, H1: tl.constexpr, H2: tl.constexpr, N3: tl.constexpr,
                 BLOCK_K1: tl.constexpr, BLOCK_H2: tl.constexpr, BLOCK_N3: tl.constexpr, UPCAST: tl.constexpr,
                 RNE: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_H1: tl.constexpr):
    """out = relu(relu(relu(x W1^T + b1) W2^T + b2) W3^T + b3) for BLOCK_M rows; weights in nn.Linear layout [out, in],
    all contiguous. Each layer's output is rounded to the output dtype before the next layer, as eager does."""
    pid = tl.program_id(0)
    rows = (pid * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rmask = rows < M
    k1 = tl.arange(0, BLOCK_K1)
    k1mask = k1 < K1
    x = tl.load(x_ptr + rows[:, None] * K1 + k1[None, :], mask=rmask[:, None] & k1mask[None, :], other=0.0)
    n2 = tl.arange(0, BLOCK_H2)
    n2mask = n2 < H2
    acc2 = tl.zeros([BLOCK_M, BLOCK_H2], dtype=tl.float32)
    for j0 in range(0, H1, BLOCK_H1):
        j = j0 + tl.arange(0, BLOCK_H1)
        jmask = j < H1
        # layer 1 chunk: [BLOCK_M, BLOCK_K1] @ W1[j, :]^T -> [BLOCK_M, BLOCK_H1]
        w1t = tl.load(w1_ptr + j[None, :] * K1 + k1[:, None], mask=k1mask[:, None] & jmask[None, :], other=0.0)
        if UPCAST:
            h1 = tl.dot(x.to(tl.float32), w1t.to(tl.float32))
        else:
            h1 = tl.dot(x, w1t)
        h1 += tl.load(b1_ptr + j, mask=jmask, other=0.0).to(tl.float32)[None, :]
        h1 = _round(tl.maximum(h1, 0.0), x_ptr.dtype.element_ty, RNE)
        # layer 2 partial: [BLOCK_M, BLOCK_H1] @ W2[:, j]^T -> [BLOCK_M, BLOCK_H2]
        w2t = tl.load(w2_ptr + n2[None, :] * H1 + j[:, None], mask=jmask[:, None] & n2mask[None, :], other=0.0)
        if UPCAST:
            acc2 = tl.dot(h1.to(tl.float32), w2t.to(tl.float32), acc2)
        else:
            acc2 = tl.dot(h1, w2t, acc2)
    acc2 += tl.load(b2_ptr + n2, mask=n2mask, other=0.0).to(tl.float32)[None, :]
    h2 = _round(tl.maximum(acc2, 0.0), x_ptr.dtype.element_ty, RNE)
    n3 = tl.arange(0, BLOCK_N3)
    n3mask = n3 < N3
    w3t = tl.load(w3_ptr + n3[None, :] * H2 + n2[:, None], mask=n2mask[:, None] & n3mask[None, :], other=0.0)
    if UPCAST:
        acc3 = tl.dot(h2.to(tl.float32), w3t.to(tl.float32))
    else:
        acc3 = tl.dot(h2, w3t)
    acc3 += tl.load(b3_ptr + n3, mask=n3mask, other=0.0).to(tl.float32)[None, :]
    out = tl.maximum(acc3, 0.0)
    tl.store(out_ptr + rows[:, None] * N3 + n3[None, :], _round(out, out_ptr.dtype.element_ty, RNE),
             mask=rmask[:, None] & n3mask[None, :])


def _grid(meta, m):
    return (triton.cdiv(m, meta["BLOCK_M"]),)


class ModelNew(nn.Module):
    """Same parameters, in the same order, as the problem's ``Model``; forward is one Triton launch."""

    def __init__(self, num_dense_features: int, hidden1: int, hidden2: int, out_features: int):
        super().__init__()
        sizes = [num_dense_features, hidden1, hidden2, out_features]
        self.layers = nn.ModuleList(nn.Linear(a, b, dtype=torch.bfloat16) for a, b in zip(sizes[:-1], sizes[1:]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        l1, l2, l3 = self.layers
        w1, w2, w3 = l1.weight, l2.weight, l3.weight
        if not (x.dtype == w1.dtype == w2.dtype == w3.dtype and x.is_contiguous() and w1.is_contiguous()
                and w2.is_contiguous() and w3.is_contiguous()):
            x, w1, w2, w3 = x.contiguous(), w1.contiguous().to(x.dtype), w2.contiguous().to(x.dtype), \
                w3.contiguous().to(x.dtype)
        m, k1 = x.shape
        h1, h2, n3 = w1.shape[0], w2.shape[0], w3.shape[0]
        out = torch.empty(m, n3, device=x.device, dtype=x.dtype)
        _launch(_mlp3_kernel, (m, k1, h1, h2, n3, x.dtype, l1.bias.dtype, x.device), lambda meta: _grid(meta, m),
                x, w1, l1.bias, w2, l2.bias, w3, l3.bias, out, m, K1=k1, H1=h1, H2=h2, N3=n3,
                BLOCK_K1=max(16, triton.next_power_of_2(k1)), BLOCK_H2=max(16, triton.next_power_of_2(h2)),
                BLOCK_N3=max(16, triton.next_power_of_2(n3)), UPCAST=_INTERPRET,
                RNE=_INTERPRET and x.dtype == torch.bfloat16)
        return out
