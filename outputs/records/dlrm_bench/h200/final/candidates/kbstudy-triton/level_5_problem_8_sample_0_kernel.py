"""kbstudy-triton candidate for DLRM-Bench problem 8 (jagged values + lengths to padded dense).

**One launch.** A program owns ``GROUP`` consecutive samples. It finds where its first sample's values start by
summing the lengths before it (``BLOCK_S`` at a time, from L2: the lengths are 64 KB for 8192 samples), then walks its
samples with a running offset, copying each sample's [max_length, D] output block ``BLOCK_L`` rows at a time: rows
below the sample's length are loaded from the values, rows past it are zeros (masked loads issue no memory traffic),
and every output row is stored once with contiguous 16-byte vector stores.

Why it should approach the floor: the call is pure traffic (read T x D values, write B x Lmax x D, half of it zeros).
The former version spent a whole launch (one program, serial) on the offsets scan and then ran 57k small programs of
8 KB each behind two dependent scalar loads. Here one launch moves [BLOCK_L = 64-128, D] tiles (32-64 KB per step),
with ``B / GROUP`` programs several per SM, and nothing but the compulsory bytes (no zero-fill pass, no mask tensor,
no ``nonzero``). ``triton.autotune`` picks GROUP / BLOCK_L / warps on the GPU (one config under
``TRITON_INTERPRET=1``).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

_CONFIGS = [
    triton.Config({"GROUP": 8, "BLOCK_L": 64}, num_warps=8),
    triton.Config({"GROUP": 8, "BLOCK_L": 128}, num_warps=16),
    triton.Config({"GROUP": 16, "BLOCK_L": 32}, num_warps=4),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"GROUP": 4, "BLOCK_L": 16}, num_warps=4)]


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


@triton.autotune(configs=_CONFIGS, key=["B", "max_len", "D"], do_bench=_bench)
@triton.jit
def _jagged_to_padded_kernel(values_ptr, len_ptr, out_ptr, B, max_len, D,
                             BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr, GROUP: tl.constexpr,
                             BLOCK_L: tl.constexpr):
    b0 = tl.program_id(0).to(tl.int64) * GROUP
    part = tl.zeros([BLOCK_S], dtype=tl.int64)
    for s0 in range(0, b0, BLOCK_S):
        i = s0 + tl.arange(0, BLOCK_S)
        part += tl.load(len_ptr + i, mask=i < b0, other=0).to(tl.int64)
    start = tl.sum(part, axis=0)
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    for g in range(GROUP):
        b = b0 + g
        n = tl.load(len_ptr + b, mask=b < B, other=0).to(tl.int64)
        # the sample test as a vector (the interpreter mis-types scalar-bool & vector-bool masks)
        live = (tl.zeros([BLOCK_L], dtype=tl.int64) + b) < B
        for l0 in range(0, max_len, BLOCK_L):
            l = l0 + tl.arange(0, BLOCK_L)
            vals = tl.load(values_ptr + (start + l)[:, None] * D + d[None, :],
                           mask=(l < n)[:, None] & dmask[None, :], other=0.0)
            tl.store(out_ptr + (b * max_len + l)[:, None] * D + d[None, :], vals,
                     mask=((l < max_len) & live)[:, None] & dmask[None, :])
        start += n


class ModelNew(nn.Module):
    """Same (parameter-free) construction as the problem's ``Model``; forward is one Triton launch."""

    BLOCK_S = 2048

    def __init__(self, max_length: int):
        super().__init__()
        self.max_length = max_length

    def forward(self, values: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        batch = lengths.shape[0]
        dim = values.shape[1]
        out = torch.empty(batch, self.max_length, dim, device=values.device, dtype=values.dtype)
        key = (batch, self.max_length, dim, values.dtype, lengths.dtype, values.device)
        _launch(_jagged_to_padded_kernel, key, lambda meta: (triton.cdiv(batch, meta["GROUP"]),),
                values.contiguous(), lengths.contiguous(), out, batch, self.max_length, dim,
                BLOCK_D=triton.next_power_of_2(dim), BLOCK_S=self.BLOCK_S)
        return out
