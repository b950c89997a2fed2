"""kbstudy-triton variant s13-a for DLRM-Bench problem 2 (variable-length EmbeddingBag with per-sample weights).

**One launch, small programs, few DRAM round trips.** A program owns ``GROUP`` consecutive bags (3-13, not a power of
two: the grid is sized to the programs the H200 holds at once) and walks their lookups as one contiguous stream in
*two-bag tiles*: a tile is the next ``BLOCK_L`` lookups, cut short at the end of the second bag it reaches, so it
holds the tail of the current bag and the head of the next one (87 % of a 32-row tile is used at lengths U[1, 54),
against 60 % for the shipped kernel's one-bag tiles). Per tile: the rows are gathered as [BLOCK_L, D] tiles of 16-byte
vectors, the *next* tile's indices and weights are loaded before this tile is summed (so no tile waits on an index
load), the two segments are summed (``where`` masks, fp32), a finished bag is stored once and an unfinished one is
carried in registers. The bag ends come from scalar loads of the group's lengths (L1), never from a vector reduction.

**The start offset without a B^2 scan.** A program needs the sum of the lengths before its first bag. It sums the
shorter side: the lengths before ``b0``, or ``T`` (the number of lookups, known on the host) minus the lengths from
``b0`` on, so no program reads more than B / 2 lengths, in at most two 2048-wide loads. The programs of an SM read
the same 64 KB of lengths, which should mostly be served by its L1 (plain loads are L1-cached on sm_90); if they are
not, the ~1400 programs of the 1-warp configs read ~22 MB from L2 at the start (~3-4 us), and the autotuner's
larger-group configs (631-911 programs) halve that.

Why it should beat the shipped kernel (57.1 us device time, floor 27.7 us): that kernel runs each bag as a chain of
three dependent round trips (length from L2, indices, rows), eight bags per program, with 1024 programs of 4 warps
(56 registers) in one wave: about 25 serial round trips per program, and its 32-row tiles are 40 % empty. Here a
program pays the prefix (<= 2 L1/L2 loads) and one index load once, then one row round trip per tile (5.8 tiles on
average at GROUP = 6, 32-row tiles). sm_90 registers (Triton 3.9 ptxas, no spills): [32 rows, 1 warp] 168 ->
12 programs per SM, all 32 row loads of a lane issued before the first add (SASS), i.e. up to 384 rows (192 KB) in
flight per SM; [16, 1] 128 -> 16 programs (256 rows); [32, 2 warps] 130 -> 7 (224 rows); [64, 2] 170 -> 5
(320 rows). With one warp the two segment sums are in-thread (no shared memory, one barrier per tile for the weights'
layout), and the pooled rows are stored as 16-byte vectors. At ~1.5 us per loaded round trip, ~20 MB in flight
(1366 programs x 32 rows x 87 %) exceed the ~6 MB the H200's bandwidth needs, so the gather should run at copy-like
bandwidth; the expected device time is the ~30 us of the 117 MB gather plus the prefix and the last tiles
(~33-36 us). ``triton.autotune`` picks the tile, warps and group size on the GPU (one config under
``TRITON_INTERPRET=1``).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: sm_90 (Triton 3.9 ptxas) registers, no spills: [32 x 1 warp] 168 -> 12 programs per SM (1584 on 132 SMs: GROUP 6
#: -> 1366 programs, or GROUP 3 -> 2731 in about two waves, shorter programs for the tail); [16 x 1] 128 -> 16 (2112:
#: GROUP 5 -> 1639, room for 12 per SM); [32 x 2 warps] 130 -> 7 (924: GROUP 9 -> 911); [64 x 2] 170 -> 5 (660:
#: GROUP 13 -> 631)
_CONFIGS = [
    triton.Config({"GROUP": 6, "BLOCK_L": 32}, num_warps=1),
    triton.Config({"GROUP": 3, "BLOCK_L": 32}, num_warps=1),
    triton.Config({"GROUP": 5, "BLOCK_L": 16}, num_warps=1),
    triton.Config({"GROUP": 9, "BLOCK_L": 32}, num_warps=2),
    triton.Config({"GROUP": 13, "BLOCK_L": 64}, num_warps=2),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"GROUP": 3, "BLOCK_L": 8}, num_warps=1)]


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


@triton.autotune(configs=_CONFIGS, key=["B", "D"], do_bench=_bench)
@triton.jit(do_not_specialize=["T"])
def _weighted_bags_kernel(idx_ptr, psw_ptr, len_ptr, w_ptr, out_ptr, B, T, D,
                          BLOCK_D: tl.constexpr, EVEN_D: tl.constexpr, BLOCK_S: tl.constexpr, GROUP: tl.constexpr,
                          BLOCK_L: tl.constexpr):
    """Bags [b0, b0 + GROUP) of the jagged batch; ``T`` = number of lookups (= sum of the lengths). Positions are
    local to the group (0 = the group's first lookup). A tile covers lookups [q, te) with te = min(q + BLOCK_L, eb):
    the rest of bag ``a`` (ending at ea) and at most the start of bag a + 1 (ending at eb)."""
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
    nb = tl.minimum(B - b0, GROUP).to(tl.int32)
    lbase = len_ptr + b0
    d = tl.arange(0, BLOCK_D)
    if EVEN_D:
        dmask = d < BLOCK_D
    else:
        dmask = d < D
    t = tl.arange(0, BLOCK_L)
    zero_d = d * 0  # (masks as vectors: the interpreter mis-types scalar-bool & vector-bool masks)
    idx_base = idx_ptr + start
    psw_base = psw_ptr + start
    out_base = out_ptr + b0 * D
    a = 0
    ea = tl.load(lbase).to(tl.int32)
    eb = ea + tl.load(lbase + 1, mask=nb > 1, other=0).to(tl.int32)
    te = tl.minimum(BLOCK_L, eb)
    m = t < te
    rows = tl.load(idx_base + t, mask=m, other=0)
    psw = tl.load(psw_base + t, mask=m, other=0.0)
    carry = tl.zeros([BLOCK_D], dtype=tl.float32)
    q = 0
    while a < nb:
        j = q + t
        m = j < te
        if EVEN_D:
            vals = tl.load(w_ptr + rows[:, None] * D + d[None, :], mask=m[:, None], other=0.0)
        else:
            vals = tl.load(w_ptr + rows[:, None] * D + d[None, :], mask=m[:, None] & dmask[None, :], other=0.0)
        # the next tile: its extent from the lengths of bags a + 2 and a + 3, its indices and weights loaded now
        l2 = tl.load(lbase + a + 2, mask=a + 2 < nb, other=0).to(tl.int32)
        l3 = tl.load(lbase + a + 3, mask=a + 3 < nb, other=0).to(tl.int32)
        done_a = te >= ea
        done_b = (te >= eb) & (a + 1 < nb) & done_a
        an = a + done_a.to(tl.int32) + done_b.to(tl.int32)
        ean = tl.where(done_b, eb + l2, tl.where(done_a, eb, ea))
        ebn = tl.where(done_b, eb + l2 + l3, tl.where(done_a, eb + l2, eb))
        ten = tl.minimum(te + BLOCK_L, ebn)
        jn = te + t
        mn = jn < ten
        rows_n = tl.load(idx_base + jn, mask=mn, other=0)
        psw_n = tl.load(psw_base + jn, mask=mn, other=0.0)
        # this tile: rows of bag a (j < ea), then rows of bag a + 1
        v = vals.to(tl.float32) * psw.to(tl.float32)[:, None]
        in_a = (j < ea)[:, None]
        sa = tl.sum(tl.where(in_a, v, 0.0), axis=0) + carry
        sb = tl.sum(tl.where(in_a, 0.0, v), axis=0)
        tl.store(out_base + a * D + d, sa.to(out_ptr.dtype.element_ty),
                 mask=dmask & ((zero_d + done_a.to(tl.int32)) != 0))
        tl.store(out_base + (a + 1) * D + d, sb.to(out_ptr.dtype.element_ty),
                 mask=dmask & ((zero_d + done_b.to(tl.int32)) != 0))
        carry = tl.where(done_a, tl.where(done_b, 0.0, sb), sa)
        a = an
        q = te
        ea = ean
        eb = ebn
        te = ten
        rows = rows_n
        psw = psw_n


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
