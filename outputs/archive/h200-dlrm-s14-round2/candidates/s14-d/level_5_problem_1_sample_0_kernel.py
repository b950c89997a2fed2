"""kbstudy-triton candidate for DLRM-Bench problem 1 (EmbeddingBag sum, fixed bag size, forward). Session 14's
second-round variant ``s14-d``: ``s14-c``'s bag-parallel gather plus L2 bulk prefetches of the rows PF steps ahead.

**One launch, a persistent one-wave grid; a program owns a block of bags and gathers one lookup of every bag per
slot, UNROLL slots per step, into a per-thread fp32 accumulator (no cross-warp reduction: no shared memory, no
barrier), and prefetches into L2 the rows it will gather PF steps later.** As ``s14-c`` (see there: problem 3's
access pattern, a bag in one warp, each warp independent, next step's indices loaded a step ahead, int64 indices read
as their low 32-bit words), and in each step, after its gathers are issued and before it adds them, one
``cp.async.bulk.prefetch.L2`` per row of the step PF ahead (512 bytes, one instruction per row: the row's address is
spread as a [BLOCK_B, BLOCK_D] tensor in the gathers' layout, ``pack=4`` gives one asm instance per thread and row,
and ``match.any.sync`` lets only the lowest lane holding the address issue it); that step's indices are loaded one
step before their prefetch. The prologue prefetches steps 1 .. PF - 1.

**Why.** Registers cap the rows a warp can hold in flight as gathers (4 registers per row and lane). A bulk prefetch
holds no register and returns nothing, so DRAM sees the prefetched rows *plus* the gathers in flight, and the gathers
themselves then mostly hit L2 (or merge with a miss already under way): shorter waits per step, and less exposure to
the slowest of a step's DRAM reads. Problem 5's measured variant (s14-a) used the same instruction without trouble.

**Registers and bytes in flight (Triton 3.6, sm_90 SASS, checked per config).** 128 registers (cap), no spills, every
gather and index load of a step before the first add, the prefetches right after the gathers, 0 ``BAR``/``STS``:
[16 bags x 2 slots, 4 warps, PF 2] -> 4 programs per SM: 16 warps x 8 rows = 128 gathered rows (64 KB) plus 256
prefetched rows (128 KB) per SM, ~25 MB over 132 SMs; [8 x 2, 2 warps, PF 2] -> 8; [32 x 2, 8 warps, PF 2] -> 2;
[16 x 2, 4 warps, PF 1] -> 4 (128 prefetched rows per SM); [4 x 2, 1 warp, PF 2] 120 -> 16. (UNROLL 4 with PF >= 2
spilled at 128-168 registers; dropped.) Grid as ``s14-c``: 8192 bags -> 512 programs of one 16-bag block, etc.; one
wave, equal shares.

**Expected.** ~430 MB through DRAM (prefetched rows are gathered within PF steps, ~1-3 us, so little is evicted from
the 50 MB L2) at or above problem 3's gather efficiency: ~104-108 us of cold device time against the shipped
111.9-113.4 us. Risk: if the prefetches are dropped or evicted, it runs as ``s14-c`` with half the gathers per step
(128 rows per SM, UNROLL 2) and may be slower than ``s14-c``. ``triton.autotune`` picks the config on the GPU (one
config under ``TRITON_INTERPRET=1``, where the asm is skipped: ``ASM`` off, ``ROW_BYTES`` 0).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: BLOCK_B bags per block, UNROLL lookups per bag and step, PF steps of L2 prefetch ahead of the gathers, PROGS
#: programs per SM (the persistent grid's slots; all resident: 65536 registers / (maxnreg x 32 x num_warps)).
#: Triton 3.6 / sm_90 SASS: 128 registers, no spills, every gather and index load of a step before its first add
_CONFIGS = [
    triton.Config({"BLOCK_B": 16, "UNROLL": 2, "PF": 2, "PROGS": 4}, num_warps=4, num_stages=1, maxnreg=128),
    triton.Config({"BLOCK_B": 8, "UNROLL": 2, "PF": 2, "PROGS": 8}, num_warps=2, num_stages=1, maxnreg=128),
    triton.Config({"BLOCK_B": 32, "UNROLL": 2, "PF": 2, "PROGS": 2}, num_warps=8, num_stages=1, maxnreg=128),
    triton.Config({"BLOCK_B": 16, "UNROLL": 2, "PF": 1, "PROGS": 4}, num_warps=4, num_stages=1, maxnreg=128),
    triton.Config({"BLOCK_B": 4, "UNROLL": 2, "PF": 2, "PROGS": 16}, num_warps=1, num_stages=1, maxnreg=128),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"BLOCK_B": 2, "UNROLL": 4, "PF": 2, "PROGS": 2}, num_warps=1, num_stages=1)]


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
def _idx(idx_row, j, L, bmask, zero_b, IDX_W: tl.constexpr):
    """Lookup ``j`` of each bag of the block; -1 past the bag's end or the program's bags (no prefetch there)."""
    return tl.load(idx_row + j * IDX_W, mask=bmask & ((zero_b + j) < L), other=-1)


@triton.jit
def _l2_prefetch_rows(w_ptr, r, D, d, ROW_BYTES: tl.constexpr, ASM: tl.constexpr):
    """One ``cp.async.bulk.prefetch.L2`` of ROW_BYTES at each row ``r`` (r >= 0) of the block (sm_90, PTX 8.0):
    fetches the row's DRAM lines into L2 without registers, waiting or results. The address is spread as a
    [BLOCK_B, BLOCK_D] tensor (each row in one warp, as the gathers); ``pack=4`` hands a thread four of its elements
    at once (one instance per four columns), and of the lanes holding a row address only the lowest issues
    (``match.any.sync``). ``ASM`` off (interpreter): nothing."""
    ptr = w_ptr + r.to(tl.int64)[:, None] * D + (d * 0)[None, :]
    nbytes = tl.where((r >= 0)[:, None] & (d >= 0)[None, :], ROW_BYTES, 0)
    if ASM:
        tl.inline_asm_elementwise(
            asm="{ .reg .pred p; .reg .b32 m, lt; match.any.sync.b64 m, $4, 0xffffffff; mov.u32 lt, %lanemask_lt; "
                "and.b32 m, m, lt; setp.eq.u32 p, m, 0; setp.gt.and.s32 p, $8, 0, p; "
                "@p cp.async.bulk.prefetch.L2.global [$4], $8; "
                "mov.u32 $0, 0; mov.u32 $1, 0; mov.u32 $2, 0; mov.u32 $3, 0; }",
            constraints="=r,=r,=r,=r,l,l,l,l,r,r,r,r", args=[ptr, nbytes], dtype=tl.int32, is_pure=False, pack=4)


@triton.autotune(configs=_CONFIGS, key=["L", "D"], do_bench=_bench)
@triton.jit
def _bag_sum_kernel(idx_ptr, w_ptr, out_ptr, B, L, D, BLOCK_D: tl.constexpr, BLOCK_B: tl.constexpr,
                    UNROLL: tl.constexpr, PROGS: tl.constexpr, IDX_W: tl.constexpr, PF: tl.constexpr,
                    ROW_BYTES: tl.constexpr, ASM: tl.constexpr):
    """Bags [b0, b0 + nb) of the batch, n_per = ceil(B / programs) per program, in blocks of BLOCK_B bags; a block
    steps through its bags' lookups UNROLL at a time, one [BLOCK_B, D] row gather per lookup slot, into one fp32
    [BLOCK_B, D] accumulator (no reduction across threads). Each step also prefetches into L2 the rows of the step PF
    ahead (indices loaded one step before that)."""
    n_per = tl.cdiv(B, tl.num_programs(0))
    b0 = tl.program_id(0) * n_per
    b_end = tl.minimum(b0 + n_per, B)
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    w_col = w_ptr + d[None, :]
    zero_b = tl.zeros([BLOCK_B], dtype=tl.int32)  # (the interpreter mis-types scalar-bool & vector-bool masks)
    for c in range(b0, b_end, BLOCK_B):
        b = c + tl.arange(0, BLOCK_B)
        bmask = b < b_end
        idx_row = idx_ptr + b.to(tl.int64) * (L * IDX_W)
        acc = tl.zeros([BLOCK_B, BLOCK_D], dtype=tl.float32)
        # UNROLL (1, 2 or 4) lookups per bag and step, in named registers; each step loads the *next* step's indices
        # before it gathers its own rows, so a step's UNROLL x BLOCK_B row gathers never wait on an index load
        r0 = tl.load(idx_row, mask=bmask & (zero_b < L), other=0)
        if UNROLL >= 2:
            r1 = tl.load(idx_row + IDX_W, mask=bmask & ((zero_b + 1) < L), other=0)
        if UNROLL >= 4:
            r2 = tl.load(idx_row + 2 * IDX_W, mask=bmask & ((zero_b + 2) < L), other=0)
            r3 = tl.load(idx_row + 3 * IDX_W, mask=bmask & ((zero_b + 3) < L), other=0)
        # L2 prefetch queue: the rows of steps 1 .. PF - 1 now (step 0 is gathered at once), step PF's indices loaded
        for s in tl.static_range(1, PF):
            for k in tl.static_range(UNROLL):
                _l2_prefetch_rows(w_ptr, _idx(idx_row, s * UNROLL + k, L, bmask, zero_b, IDX_W), D, d, ROW_BYTES, ASM)
        p0 = _idx(idx_row, PF * UNROLL, L, bmask, zero_b, IDX_W)
        if UNROLL >= 2:
            p1 = _idx(idx_row, PF * UNROLL + 1, L, bmask, zero_b, IDX_W)
        if UNROLL >= 4:
            p2 = _idx(idx_row, PF * UNROLL + 2, L, bmask, zero_b, IDX_W)
            p3 = _idx(idx_row, PF * UNROLL + 3, L, bmask, zero_b, IDX_W)
        for l0 in range(0, L, UNROLL):
            nx = l0 + UNROLL
            q0 = tl.load(idx_row + nx * IDX_W, mask=bmask & ((zero_b + nx) < L), other=0)
            if UNROLL >= 2:
                q1 = tl.load(idx_row + (nx + 1) * IDX_W, mask=bmask & ((zero_b + (nx + 1)) < L), other=0)
            if UNROLL >= 4:
                q2 = tl.load(idx_row + (nx + 2) * IDX_W, mask=bmask & ((zero_b + (nx + 2)) < L), other=0)
                q3 = tl.load(idx_row + (nx + 3) * IDX_W, mask=bmask & ((zero_b + (nx + 3)) < L), other=0)
            # the indices of step + PF + 1, for the next step's prefetches
            npf = l0 + (PF + 1) * UNROLL
            pn0 = _idx(idx_row, npf, L, bmask, zero_b, IDX_W)
            if UNROLL >= 2:
                pn1 = _idx(idx_row, npf + 1, L, bmask, zero_b, IDX_W)
            if UNROLL >= 4:
                pn2 = _idx(idx_row, npf + 2, L, bmask, zero_b, IDX_W)
                pn3 = _idx(idx_row, npf + 3, L, bmask, zero_b, IDX_W)
            m0 = bmask & ((zero_b + l0) < L)
            g = tl.load(w_col + r0.to(tl.int64)[:, None] * D, mask=m0[:, None] & dmask[None, :], other=0.0).to(tl.float32)
            if UNROLL >= 2:
                m1 = bmask & ((zero_b + (l0 + 1)) < L)
                g1 = tl.load(w_col + r1.to(tl.int64)[:, None] * D, mask=m1[:, None] & dmask[None, :], other=0.0).to(tl.float32)
            if UNROLL >= 4:
                m2 = bmask & ((zero_b + (l0 + 2)) < L)
                m3 = bmask & ((zero_b + (l0 + 3)) < L)
                g2 = tl.load(w_col + r2.to(tl.int64)[:, None] * D, mask=m2[:, None] & dmask[None, :], other=0.0).to(tl.float32)
                g3 = tl.load(w_col + r3.to(tl.int64)[:, None] * D, mask=m3[:, None] & dmask[None, :], other=0.0).to(tl.float32)
            # the rows of step + PF into L2, after this step's gathers are issued
            _l2_prefetch_rows(w_ptr, p0, D, d, ROW_BYTES, ASM)
            p0 = pn0
            if UNROLL >= 2:
                _l2_prefetch_rows(w_ptr, p1, D, d, ROW_BYTES, ASM)
                p1 = pn1
            if UNROLL >= 4:
                _l2_prefetch_rows(w_ptr, p2, D, d, ROW_BYTES, ASM)
                _l2_prefetch_rows(w_ptr, p3, D, d, ROW_BYTES, ASM)
                p2 = pn2
                p3 = pn3
            if UNROLL >= 4:
                g += g2 + g3
                r2 = q2
                r3 = q3
            if UNROLL >= 2:
                g += g1
                r1 = q1
            acc += g
            r0 = q0
        out = out_ptr + b.to(tl.int64)[:, None] * D + d[None, :]
        tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=bmask[:, None] & dmask[None, :])


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


def _programs(batch, slots):
    """At most ``slots`` programs, each with the same number of bags but the last: ceil(batch / ceil(batch /
    slots)); the kernel gives each ceil(batch / programs)."""
    return triton.cdiv(batch, triton.cdiv(batch, max(1, slots)))


#: whether a device takes ``cp.async.bulk.prefetch.L2`` (sm_90 and later), per device index
_BULK = {}


def _row_bytes(weight):
    """Bytes per row for the rows' L2 bulk prefetches, or 0 (none): a multiple of 16 on a 16-byte aligned table, on a
    device of compute capability 9.0 or later, outside the interpreter."""
    nbytes = weight.shape[1] * weight.element_size()
    if _INTERPRET or weight.device.type != "cuda" or nbytes % 16 or weight.data_ptr() % 16:
        return 0
    idx = weight.device.index if weight.device.index is not None else torch.cuda.current_device()
    ok = _BULK.get(idx)
    if ok is None:
        ok = _BULK[idx] = torch.cuda.get_device_capability(idx)[0] >= 9
    return nbytes if ok else 0


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
        if batch == 0:
            return out
        sms = _num_sms(weight.device)
        # int64 indices are read as their low 32-bit words (little-endian; rows < 2^31): half the index registers
        low = indices.dtype == torch.int64 and weight.shape[0] < 2**31
        idx = indices.view(torch.int32) if low else indices
        _launch(_bag_sum_kernel, (bag, dim, indices.dtype, weight.dtype, weight.device),
                lambda meta: (_programs(batch, meta["PROGS"] * sms),),
                idx, weight, out, batch, bag, dim, BLOCK_D=triton.next_power_of_2(dim), IDX_W=2 if low else 1,
                ROW_BYTES=_row_bytes(weight), ASM=not _INTERPRET)
        return out
