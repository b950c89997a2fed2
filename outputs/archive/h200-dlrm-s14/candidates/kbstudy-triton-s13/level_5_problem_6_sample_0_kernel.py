"""kbstudy-triton candidate for DLRM-Bench problem 6 (int8 row-wise quantized EmbeddingBag, dequantize + sum).

One program per bag. A quantized row (FBGEMM layout: D uint8 codes, fp32 scale, fp32 bias; D + 8 bytes) is read as
``D/4`` 32-bit words; the row stride is a compile-time constant (``ROW_WORDS = D/4 + 2``), so Triton knows every row
starts 8-byte aligned and loads the codes as 64-bit vectors, and the scale and bias come from the same row through a
float32 pointer. ``BLOCK_L`` rows are gathered per step as a [BLOCK_L, D/4] word tile; byte lane k of each word is
turned into fp32 with the exponent trick (``(w >> 8k) & 0xFF | 0x4B000000`` reinterpreted as fp32 is 2^23 + code,
exact) and accumulated as ``(code - 128) * scale`` in four [BLOCK_L, D/4] fp32 tiles, while ``bias + 128 scale`` is
summed once per row (``c s + b = (c - 128) s + (b + 128 s)``: both parts are as small as the dequantized values, so
the separate sums do not cancel, unlike ``sum c s + sum b``). One cross-thread reduction per bag at the end, stores
interleaved.

Why it should approach the floor: per looked-up row the kernel moves the row's 136 bytes once and spends ~4 ALU
instructions per code (shift/mask, subtract, FMA) instead of a slow int-to-float conversion and a per-element bias
add; the former version reduced its tiles four times per step (16 barriers per bag) and loaded 32-bit scalars. The
eager path's [B, L, D + 8] gather and its fp32 intermediates never exist. ``triton.autotune`` picks the rows per step
and warps on the GPU (one config under ``TRITON_INTERPRET=1``). Note the floor counts 136 bytes per distinct row,
while DRAM moves 32-byte sectors: an 8-byte-aligned 136-byte row spans 5-6 sectors (160-192 bytes), so ~1.2x the
floor is the practical limit of any gather here, before the launch.
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
    triton.Config({"BLOCK_L": 64}, num_warps=4),
    triton.Config({"BLOCK_L": 64}, num_warps=8),
    triton.Config({"BLOCK_L": 128}, num_warps=8),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"BLOCK_L": 16}, num_warps=4)]


@triton.jit
def _centred_byte_lane(words, shift: tl.constexpr):
    """Byte ``shift / 8`` of each int32 word, minus 128, as fp32, exactly (exponent trick: the bits
    ``0x4B0000cc`` are the fp32 2^23 + code; subtracting 2^23 + 128 leaves code - 128)."""
    bits = ((words >> shift) & 0xFF) | 0x4B000000
    return bits.to(tl.float32, bitcast=True) - 8388736.0


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
def _int8_bag_kernel(idx_ptr, qw_ptr, out_ptr, L, D: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK_L: tl.constexpr):
    """qw_ptr: the quantized table as int32 words, [N, D/4 + 2]; word w of a row holds codes 4w .. 4w+3
    (little-endian), words D/4 and D/4 + 1 the fp32 scale and bias."""
    N_WORDS: tl.constexpr = D // 4
    ROW_WORDS: tl.constexpr = D // 4 + 2
    b = tl.program_id(0).to(tl.int64)
    w = tl.arange(0, BLOCK_W)
    wmask = w < N_WORDS
    acc0 = tl.zeros([BLOCK_L, BLOCK_W], dtype=tl.float32)
    acc1 = tl.zeros([BLOCK_L, BLOCK_W], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK_L, BLOCK_W], dtype=tl.float32)
    acc3 = tl.zeros([BLOCK_L, BLOCK_W], dtype=tl.float32)
    bias_sum = tl.zeros([BLOCK_L], dtype=tl.float32)
    for l0 in range(0, L, BLOCK_L):
        l = l0 + tl.arange(0, BLOCK_L)
        lmask = l < L
        rows = tl.load(idx_ptr + b * L + l, mask=lmask, other=0)
        base = qw_ptr + rows * ROW_WORDS
        words = tl.load(base[:, None] + w[None, :], mask=lmask[:, None] & wmask[None, :], other=0)
        scale = tl.load((base + N_WORDS).to(tl.pointer_type(tl.float32)), mask=lmask, other=0.0)
        bias = tl.load((base + N_WORDS + 1).to(tl.pointer_type(tl.float32)), mask=lmask, other=0.0)
        # c s + b = (c - 128) s + (b + 128 s): both terms stay as small as the dequantized values (b + 128 s is the
        # row's mid-range), so summing them separately does not cancel
        bias_sum += bias + 128.0 * scale
        s = scale[:, None]
        acc0 += _centred_byte_lane(words, 0) * s
        acc1 += _centred_byte_lane(words, 8) * s
        acc2 += _centred_byte_lane(words, 16) * s
        acc3 += _centred_byte_lane(words, 24) * s
    bias = tl.sum(bias_sum, axis=0)
    o = out_ptr + b * D + 4 * w
    tl.store(o, tl.sum(acc0, axis=0) + bias, mask=wmask)
    tl.store(o + 1, tl.sum(acc1, axis=0) + bias, mask=wmask)
    tl.store(o + 2, tl.sum(acc2, axis=0) + bias, mask=wmask)
    tl.store(o + 3, tl.sum(acc3, axis=0) + bias, mask=wmask)


class ModelNew(nn.Module):
    """Same buffer as the problem's ``Model`` (``qweight``, uint8 [num_embeddings, embedding_dim + 8])."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        w = torch.randn(num_embeddings, embedding_dim)
        lo = w.min(dim=1, keepdim=True).values
        hi = w.max(dim=1, keepdim=True).values
        scale = (hi - lo).clamp_min(1e-8) / 255.0
        codes = torch.round((w - lo) / scale).clamp(0, 255).to(torch.uint8)
        scale_bias = torch.cat([scale, lo], dim=1).contiguous().view(torch.uint8)
        self.register_buffer("qweight", torch.cat([codes, scale_bias], dim=1).contiguous())
        self.embedding_dim = embedding_dim

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        d = self.embedding_dim
        if d % 4:
            raise ValueError(f"embedding_dim must be a multiple of 4 (fp32 scale/bias alignment), got {d}")
        words = self.qweight.view(torch.int32)  # [N, D/4 + 2]: codes 4 per word (little-endian), then scale, bias
        indices = indices.contiguous()
        batch, bag = indices.shape
        out = torch.empty(batch, d, device=words.device, dtype=torch.float32)
        _launch(_int8_bag_kernel, (bag, d, indices.dtype, words.device), (batch,),
                indices, words, out, bag, D=d, BLOCK_W=max(16, triton.next_power_of_2(d // 4)))
        return out
