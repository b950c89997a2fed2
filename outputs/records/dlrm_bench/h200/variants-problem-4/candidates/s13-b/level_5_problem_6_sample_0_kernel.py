"""kbstudy-triton variant s13-b for DLRM-Bench problem 6 (int8 row-wise quantized EmbeddingBag, dequantize + sum).

**s13-a's bag-parallel kernel with the row gathers made asynchronous.** Same tile and arithmetic as s13-a (a program
owns ``BLOCK_B`` bags, 8 per warp; a step takes the next ``UNROLL`` lookups of every bag as an [UNROLL, Q, BLOCK_B,
D/4/Q] word tile with the UNROLL lookups and the Q quarters of a row in the thread, so a row's index, scale and bias
are handled by 4 lanes, not 16; codes to fp32 by the exponent trick; ``(code - 128) * scale`` and ``bias + 128 scale``
accumulated in fp32 registers, no cross-thread reduction, one store per bag), but the step loop is a
``tl.range(..., num_stages=STAGES)`` loop without hand-written prefetch: Triton's software pipeliner turns the index
tile and the word, scale and bias gathers into ``cp.async`` copies into shared memory (``LDGSTS`` 8-byte pieces for
the 8-byte-aligned words, 4-byte ones for scale and bias), issued one step (3 stages) or two steps (5 stages) ahead of
the step that sums them. The rows in flight then no longer depend on how ptxas orders register loads against the
arithmetic (s13-a relies on that: its SASS issues most of a step's loads before the first multiply-add), and cost
shared memory instead of registers; the price is one shared-memory read per 8-byte piece (~10 % more instructions
per step: 1355 against 1237 for 256 codes per thread).

Why it should beat the shipped kernel (61.7 us device time, floor 26.3 us, ~32 us practical): as s13-a, all 1024
programs are resident (one wave), a bag takes 13 steps of 8 lookups, every step's rows were requested a step earlier,
and the shipped kernel's 16-lanes-per-row metadata and 8 dependent round trips per bag are gone. sm_90 (Triton 3.9
ptxas, no spills; shared memory per program): [Q 4, 8 bags, UNROLL 8, 3 stages, 1 warp] 166 registers, 18.4 KB ->
12 programs per SM, 2 steps = 128 rows per program in flight, ~990 rows per SM; [4, 8, 4, 3] 112, 9.2 KB -> 18;
[2, 4, 8, 3] 89, 9.2 KB -> 21 (2048 programs); [4, 8, 4, 5] three steps in flight. Expected device time ~35-40 us,
bandwidth-bound. ``triton.autotune`` picks the shape on the GPU (one config under ``TRITON_INTERPRET=1``).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: sm_90 (Triton 3.9 ptxas) registers / shared memory, no spills, one warp each: [Q 4, BLOCK_B 8, UNROLL 8, 3 stages]
#: 166 / 18.4 KB -> 12 programs per SM (1024 programs: all resident); [4, 8, 4, 3] 112 / 9.2 KB -> 18; [2, 4, 8, 3]
#: 89 / 9.2 KB -> 21 (2048 programs); [4, 8, 4, 5 stages]: rows two steps ahead. The pipeliner puts the index tile
#: and the row gathers one stage apart, so STAGES = 3 fetches rows one step ahead, 5 two steps.
_CONFIGS = [
    triton.Config({"Q": 4, "BLOCK_B": 8, "UNROLL": 8, "STAGES": 3}, num_warps=1, num_stages=3),
    triton.Config({"Q": 4, "BLOCK_B": 8, "UNROLL": 4, "STAGES": 3}, num_warps=1, num_stages=3),
    triton.Config({"Q": 2, "BLOCK_B": 4, "UNROLL": 8, "STAGES": 3}, num_warps=1, num_stages=3),
    triton.Config({"Q": 4, "BLOCK_B": 8, "UNROLL": 4, "STAGES": 5}, num_warps=1, num_stages=5),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"Q": 2, "BLOCK_B": 4, "UNROLL": 8, "STAGES": 3}, num_warps=1, num_stages=3)]


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
def _int8_bag_kernel(idx_ptr, qw_ptr, out_ptr, B, L, D: tl.constexpr, BLOCK_W: tl.constexpr, Q: tl.constexpr,
                     BLOCK_B: tl.constexpr, UNROLL: tl.constexpr, STAGES: tl.constexpr):
    """qw_ptr: the quantized table as int32 words, [N, D/4 + 2]; word w of a row holds codes 4w .. 4w+3
    (little-endian), words D/4 and D/4 + 1 the fp32 scale and bias. Word c = q * (BLOCK_W / Q) + w of a row sits at
    [q, ., w] of a step's tile (BLOCK_W = D/4 rounded up to a power of two, masked past D/4)."""
    N_WORDS: tl.constexpr = D // 4
    QW: tl.constexpr = BLOCK_W // Q
    ROW_WORDS: tl.constexpr = D // 4 + 2
    b = tl.program_id(0).to(tl.int64) * BLOCK_B + tl.arange(0, BLOCK_B)
    bmask = b < B
    u = tl.arange(0, UNROLL)
    col = (tl.arange(0, Q) * QW)[None, :, None, None] + tl.arange(0, QW)[None, None, None, :]  # [1, Q, 1, QW]
    idx_tile = idx_ptr + b[None, :] * L + u[:, None]  # [UNROLL, BLOCK_B]
    acc0 = tl.zeros([Q, BLOCK_B, QW], dtype=tl.float32)
    acc1 = tl.zeros([Q, BLOCK_B, QW], dtype=tl.float32)
    acc2 = tl.zeros([Q, BLOCK_B, QW], dtype=tl.float32)
    acc3 = tl.zeros([Q, BLOCK_B, QW], dtype=tl.float32)
    accb = tl.zeros([BLOCK_B], dtype=tl.float32)
    for l0 in tl.range(0, L, UNROLL, num_stages=STAGES):
        m = ((l0 + u) < L)[:, None] & bmask[None, :]
        rows = tl.load(idx_tile + l0, mask=m, other=0)
        # masked lookups read row 0 (a valid row) and get scale 0 and bias 0 below
        base = qw_ptr + rows * ROW_WORDS
        if BLOCK_W == N_WORDS:
            words = tl.load(base[:, None, :, None] + col)
        else:
            words = tl.load(base[:, None, :, None] + col, mask=col < N_WORDS, other=0)
        scale = tl.load((base + N_WORDS).to(tl.pointer_type(tl.float32)))
        bias = tl.load((base + N_WORDS + 1).to(tl.pointer_type(tl.float32)))
        s = tl.where(m, scale, 0.0)
        # c s + b = (c - 128) s + (b + 128 s): both terms stay as small as the dequantized values
        accb += tl.sum(tl.where(m, bias, 0.0) + 128.0 * s, axis=0)
        s4 = s[:, None, :, None]
        acc0 += tl.sum(_centred_byte_lane(words, 0) * s4, axis=0)
        acc1 += tl.sum(_centred_byte_lane(words, 8) * s4, axis=0)
        acc2 += tl.sum(_centred_byte_lane(words, 16) * s4, axis=0)
        acc3 += tl.sum(_centred_byte_lane(words, 24) * s4, axis=0)
    bias = accb[None, :, None]
    c3 = tl.reshape(col, (Q, 1, QW))
    o = out_ptr + b[None, :, None] * D + 4 * c3
    om = bmask[None, :, None] & (c3 < N_WORDS)
    tl.store(o, acc0 + bias, mask=om)
    tl.store(o + 1, acc1 + bias, mask=om)
    tl.store(o + 2, acc2 + bias, mask=om)
    tl.store(o + 3, acc3 + bias, mask=om)


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
        # BLOCK_W >= 4 so that every config's Q (<= 4) divides it
        block_w = max(4, triton.next_power_of_2(d // 4))
        _launch(_int8_bag_kernel, (bag, d, indices.dtype, words.device),
                lambda meta: (triton.cdiv(batch, meta["BLOCK_B"]),),
                indices, words, out, batch, bag, D=d, BLOCK_W=block_w)
        return out
