"""kbstudy-triton variant s13-b for DLRM-Bench problem 2 (variable-length EmbeddingBag with per-sample weights).

**One launch; rows copied asynchronously, several tiles ahead.** A program owns ``GROUP`` consecutive bags (3-12) and
walks their lookups as one contiguous stream in fixed tiles of ``BLOCK_L`` lookups (every tile full except the last:
no per-bag padding). The tile loop is a ``tl.range(..., num_stages=3)`` loop, so Triton's software pipeliner turns the
index load and the [BLOCK_L, D] row gather into ``cp.async`` copies into shared memory, issued two and one tiles
ahead: while a tile is summed, the next tile's rows and the one after's indices are already in flight, without
holding registers (sm_90 SASS: ``LDGSTS.128`` per 16-byte row piece, ``DEPBAR.LE SB0, 0x3`` before a tile is read).
Each row's bag is the number of bag ends at or before its position (the group's lengths are read once and
prefix-summed in registers); a segmented scan over the tile (``tl.associative_scan`` keyed by bag, in-thread with
one warp) gives every bag's running sum, the last row of a bag stores its pooled row (16-byte vector stores), and the
bag still open at the tile's end is carried into the next tile. Empty bags are written as zeros up front.

**The start offset without a B^2 scan** (as s13-a): the shorter of the lengths before ``b0`` and ``T`` minus the
lengths from ``b0`` on, at most two 2048-wide loads (the 64 KB of lengths should mostly be served by each SM's L1).

Why it should beat the shipped kernel (57.1 us device time, floor 27.7 us): the shipped kernel waits for each bag's
length, then its indices, then its rows (about 25 serial round trips per program, 32-row tiles 40 % empty). Here the
copies run ahead of the sums, so a program keeps two tiles of rows in flight at all times. sm_90 (Triton 3.9 ptxas,
no spills): [16 rows, 1 warp, 3 stages] 128 registers, 16.8 KB shared -> 13 programs per SM (shared memory bound),
two tiles each = up to 416 rows (208 KB) in flight per SM (~330 with GROUP 6: 1366 programs for 1716 slots);
[32, 1, 3] 96 registers, 33.8 KB -> 6 per SM, 384 rows; [8, 1, 3] 96 registers, 8.4 KB -> 21 per SM, 336 rows.
That is ~20-28 MB in flight on 132 SMs, well above the ~6 MB the H200's bandwidth needs at ~1.5 us loaded latency,
so the 117 MB gather should run at copy-like bandwidth; expected device time ~30 us plus the prefix and the pipeline
fill (~33-36 us). ``triton.autotune`` picks tile, group size and stages
on the GPU (one config under ``TRITON_INTERPRET=1``).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: sm_90 (Triton 3.9 ptxas) registers / shared memory, no spills, one warp each: [16 rows, 3 stages] 128 / 16.8 KB ->
#: 13 programs per SM (1716 on 132 SMs: GROUP 6 -> 1366 programs, room down to 11 per SM; GROUP 3 -> 2731 in about
#: 1.6 waves, shorter programs for the tail); [32, 3] 96 / 33.8 KB -> 6 (792: GROUP 12 -> 683); [8, 3] 96 / 8.4 KB
#: -> 21 (2772: GROUP 4 -> 2048).
#: The ends vector is padded to at least 16 entries (with 8 entries, [32, 3] needs 206 registers).
_CONFIGS = [
    triton.Config({"GROUP": 6, "GROUP_P2": 16, "BLOCK_L": 16, "STAGES": 3}, num_warps=1, num_stages=3),
    triton.Config({"GROUP": 3, "GROUP_P2": 16, "BLOCK_L": 16, "STAGES": 3}, num_warps=1, num_stages=3),
    triton.Config({"GROUP": 12, "GROUP_P2": 16, "BLOCK_L": 32, "STAGES": 3}, num_warps=1, num_stages=3),
    triton.Config({"GROUP": 4, "GROUP_P2": 16, "BLOCK_L": 8, "STAGES": 3}, num_warps=1, num_stages=3),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"GROUP": 3, "GROUP_P2": 16, "BLOCK_L": 8, "STAGES": 3}, num_warps=1, num_stages=3)]


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
def _seg_add(v1, k1, v2, k2):
    """Segmented sum keyed by bag (keys are non-decreasing along the tile, so this is associative)."""
    return tl.where(k1 == k2, v1 + v2, v2), k2


@triton.autotune(configs=_CONFIGS, key=["B", "D"], do_bench=_bench)
@triton.jit(do_not_specialize=["T"])
def _weighted_bags_kernel(idx_ptr, psw_ptr, len_ptr, w_ptr, out_ptr, B, T, D,
                          BLOCK_D: tl.constexpr, EVEN_D: tl.constexpr, BLOCK_S: tl.constexpr, GROUP: tl.constexpr,
                          GROUP_P2: tl.constexpr, BLOCK_L: tl.constexpr, STAGES: tl.constexpr):
    """Bags [b0, b0 + GROUP) of the jagged batch; ``T`` = number of lookups (= sum of the lengths). Positions are
    local to the group (0 = its first lookup); ``ends[g]`` = end of bag g (bags past the group: length 0)."""
    tl.static_assert(GROUP <= GROUP_P2)
    b0 = tl.program_id(0).to(tl.int64) * GROUP
    # where the group starts: the shorter of sum(len[0:b0]) and T - sum(len[b0:B])
    front = 2 * b0 <= B
    lo = tl.where(front, 0, b0)
    hi = tl.where(front, b0, B)
    side = lo * 0
    for s0 in range(lo, hi, BLOCK_S):
        i = s0 + tl.arange(0, BLOCK_S)
        side += tl.sum(tl.load(len_ptr + i, mask=i < hi, other=0), axis=0)
    start = tl.where(front, side, T - side)
    g = tl.arange(0, GROUP_P2)
    gb = b0 + g
    gm = (g < GROUP) & (gb < B)
    lens = tl.load(len_ptr + gb, mask=gm, other=0).to(tl.int32)
    ends = tl.cumsum(lens, axis=0)
    total = tl.sum(lens, axis=0)
    d = tl.arange(0, BLOCK_D)
    if EVEN_D:
        dmask = d < BLOCK_D
    else:
        dmask = d < D
    # empty bags have no row to end them: zeros
    tl.store(out_ptr + gb[:, None] * D + d[None, :], tl.zeros([GROUP_P2, BLOCK_D], dtype=out_ptr.dtype.element_ty),
             mask=(gm & (lens == 0))[:, None] & dmask[None, :])
    t = tl.arange(0, BLOCK_L)
    idx_base = idx_ptr + start
    psw_base = psw_ptr + start
    carry = tl.zeros([BLOCK_D], dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(total, BLOCK_L), num_stages=STAGES):
        j = k * BLOCK_L + t
        m = j < total
        rows = tl.load(idx_base + j, mask=m, other=0)
        psw = tl.load(psw_base + j, mask=m, other=0.0)
        if EVEN_D:
            vals = tl.load(w_ptr + rows[:, None] * D + d[None, :], mask=m[:, None], other=0.0)
        else:
            vals = tl.load(w_ptr + rows[:, None] * D + d[None, :], mask=m[:, None] & dmask[None, :], other=0.0)
        # bag of row j = number of bag ends <= j; row j ends its bag if some bag ends at j + 1 (one reduction)
        enc = tl.sum((ends[None, :] <= j[:, None]).to(tl.int32)
                     + (ends[None, :] == (j + 1)[:, None]).to(tl.int32) * 1024, axis=1)
        key = enc % 1024
        is_end = (enc >= 1024) & m
        v = vals.to(tl.float32) * psw.to(tl.float32)[:, None] + tl.where(t[:, None] == 0, carry[None, :], 0.0)
        s, _ = tl.associative_scan((v, tl.broadcast_to(key[:, None], (BLOCK_L, BLOCK_D))), 0, _seg_add)
        tl.store(out_ptr + (b0 + key)[:, None] * D + d[None, :], s.to(out_ptr.dtype.element_ty),
                 mask=is_end[:, None] & dmask[None, :])
        # the bag still open at the tile's end continues in the next tile's first row
        carry = tl.sum(tl.where(((t == BLOCK_L - 1) & (enc < 1024))[:, None], s, 0.0), axis=0)


class ModelNew(nn.Module):
    """Same parameters as the problem's ``Model``; forward is one Triton launch."""

    BLOCK_S = 2048

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.bag = nn.EmbeddingBag(num_embeddings, embedding_dim, mode="sum", include_last_offset=True)

    def forward(self, indices, lengths, per_sample_weights):
        weight = self.bag.weight
        batch = lengths.shape[0]
        dim = weight.shape[1]
        out = torch.empty(batch, dim, device=weight.device, dtype=weight.dtype)
        block_d = triton.next_power_of_2(dim)
        key = (batch, dim, indices.dtype, lengths.dtype, per_sample_weights.dtype, weight.dtype, weight.device)
        _launch(_weighted_bags_kernel, key, lambda meta: (triton.cdiv(batch, meta["GROUP"]),),
                indices.contiguous(), per_sample_weights.contiguous(), lengths.contiguous(), weight, out, batch,
                indices.shape[0], dim, BLOCK_D=block_d, EVEN_D=block_d == dim, BLOCK_S=self.BLOCK_S)
        return out
