"""kbstudy-triton candidate for DLRM-Bench problem 1 (EmbeddingBag sum, fixed bag size, forward).

One program per bag: it gathers ``BLOCK_L`` table rows at a time as a [BLOCK_L, BLOCK_D] tile (each row 128 fp32 =
512 contiguous bytes, loaded as 16-byte vectors: the table pointer and D are specialised as multiples of 16),
accumulates in fp32 registers and writes the pooled row once. Compulsory traffic only: indices, the looked-up rows,
the output; one launch, one allocation.

Why it should approach the floor: the call is a stream of random 512-byte row reads (819,200 lookups, 739,000 distinct
rows = 379 MB of the floor's 390 MB). What a gather kernel controls is how many rows are in flight: at 4.2 TB/s and
~1 us of loaded DRAM latency an H200 needs ~4 MB in flight, i.e. ~32 KB per SM. Each config below keeps 100-130 KB
per SM in flight (sm_90 registers: [32 rows, 4 warps] 58, [64, 8] 58, [128, 16] 64 -> 8, 4, 2 programs per SM), and
``triton.autotune`` (keyed on the bag size and dimension) picks the fastest on the GPU; [128, 16 warps] takes a whole
100-row bag in one step. What is left between this and the floor is not in the kernel: the duplicate lookups
(819,200 - 739,000 rows = 41 MB, +10 %, which a non-sorting kernel re-reads from DRAM since the L2 is flushed before
each timed call), the DRAM efficiency of 512-byte random reads against a streaming copy, and one launch (see the
launch-aware view of notebook 4).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

_CONFIGS = [
    triton.Config({"BLOCK_L": 32}, num_warps=4),
    triton.Config({"BLOCK_L": 64}, num_warps=8),
    triton.Config({"BLOCK_L": 128}, num_warps=16),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"BLOCK_L": 32}, num_warps=4)]


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


@triton.autotune(configs=_CONFIGS, key=["L", "D"], do_bench=_bench)
@triton.jit
def _bag_sum_kernel(idx_ptr, w_ptr, out_ptr, L, D, BLOCK_D: tl.constexpr, BLOCK_L: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    acc = tl.zeros([BLOCK_L, BLOCK_D], dtype=tl.float32)
    for l0 in range(0, L, BLOCK_L):
        l = l0 + tl.arange(0, BLOCK_L)
        lmask = l < L
        rows = tl.load(idx_ptr + b * L + l, mask=lmask, other=0)
        vals = tl.load(w_ptr + rows[:, None] * D + d[None, :], mask=lmask[:, None] & dmask[None, :], other=0.0)
        acc += vals.to(tl.float32)
    tl.store(out_ptr + b * D + d, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty), mask=dmask)


class ModelNew(nn.Module):
    """Same parameters as the problem's ``Model`` (an ``nn.EmbeddingBag``); forward is one Triton launch."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.bag = nn.EmbeddingBag(num_embeddings, embedding_dim, mode="sum")

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        weight = self.bag.weight
        indices = indices.contiguous()
        batch, bag = indices.shape
        dim = weight.shape[1]
        out = torch.empty(batch, dim, device=weight.device, dtype=weight.dtype)
        _launch(_bag_sum_kernel, (bag, dim, indices.dtype, weight.dtype, weight.device), (batch,),
                indices, weight, out, bag, dim, BLOCK_D=triton.next_power_of_2(dim))
        return out
