"""kbstudy-triton candidate for DLRM-Bench problem 1 (EmbeddingBag sum, fixed bag size, forward).

**One launch, a persistent grid of small programs, every row load of a tile in flight at once, the next tile's indices
loaded before this tile is summed.** A program owns a contiguous range of bags (``n_per = ceil(B / programs)`` of
them, the last program fewer) and walks their lookups as one stream in *two-bag tiles*: a tile is the next ``BLOCK_L``
lookups, cut short at the end of the second bag it reaches (at L = 100 every tile is full for ``BLOCK_L`` <= 64;
128-row tiles run 128, 128, 128, 116: 98 % full). Per tile the rows are gathered into registers as [BLOCK_L, D] tiles
of 16-byte vectors, the *next* tile's indices are loaded, then the two segments are summed (``where`` masks, fp32), a
finished bag is stored once and an unfinished one carried. No shared-memory staging and no per-bag program start.

**Why latency, not bandwidth, limits a gather like this one, and what ``maxnreg`` fixes.** With one program per bag
(the design this kernel was measured against, sm_90 SASS of its [128, 16 warps] / [64, 8] / [32, 4] configs under
Triton 3.6) ptxas, left to itself at 56-64 registers, interleaves the adds with the row loads: a thread issues 3-4 of
its 8 row loads, waits, adds, issues the rest, and its first gather waits for its index load. A bag costs two to three
dependent DRAM round trips and every one of the 8192 programs starts cold; that kernel's device time falls only from
121.5 us cold to 115.3 us warm (``outputs/records/dlrm_bench/h200/host-gap/gap/gap2_shipped.csv``): latency sets its
pace. The same interleaving happens in this kernel without a register budget (80 registers for [32 rows, 1 warp]: 6 of
32 row loads in flight). With the ``maxnreg`` caps below ptxas (Triton 3.6, sm_90) issues every row load of a tile,
and the next tile's index load, before the first select or add (checked in the SASS of each config), and the caps also
fix the residency: [32 rows, 4 warps, maxnreg 64] 64 registers -> 8 programs per SM; [32, 2, 128] 126 -> 8; [16, 1,
168] 153 -> 12; [64, 4, 128] 126 -> 4; [128, 16, 64] 64 -> 2 (no spills; a [64, 8, 64] config issues its next index
load after the first adds and is not among the configs). Each keeps 192-256 rows (96-128 KB) per SM in flight while
it waits, ~13-17 MB on 132 SMs, against the ~6-8 MB that ~4.2 TB/s at ~1.5-2 us of loaded latency needs, so the gaps
while a program sums its tile (a few hundred cycles per 1-2 us round trip) are covered by the other programs of its SM.

**Why it approaches the floor (91.7 us; ~430 MB through DRAM with the ~10 % repeated lookups a non-sorting kernel
re-reads).** Index loads are never on the critical path (one per program start, the rest one tile ahead), the rows of
a tile share one round trip, and the grid is one wave sized to what the H200 holds (``PROGS`` per SM x 132 SMs),
shrunk so every program has the same number of bags: 8192 bags on 1056 slots -> 1024 programs of 8 bags (25 full
32-row tiles each); all bandwidth-bound at equal shares, they finish together. Model: ~430 MB at ~4.0-4.2 TB/s plus ~2
us of start and drain, ~105-110 us, cold about equal to warm. ``triton.autotune`` (keyed on the bag size and
dimension) picks the tile, warps and register cap on the GPU (one config under ``TRITON_INTERPRET=1``).

Measured on the H200: 105.4 us of cold device time, 1.15x the floor (``outputs/records/dlrm_bench/h200/final``;
104.0 us in ``outputs/records/dlrm_bench/h200/repeat``). Beside the one-program-per-bag kernel in one run
(``outputs/records/dlrm_bench/h200/variants-problems-1-9``: this file is the record ``s14-b``, that kernel the
record ``kbstudy-triton``; device time there with the writing L2 flush): 111.9 against 120.5 us of cold device time
(0.928x, interval 0.924-0.933), 0.93x per call (interval 0.91-0.95).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: BLOCK_L lookups per tile; PROGS programs per SM, all resident (65536 registers / (maxnreg x 32 x num_warps));
#: maxnreg also makes ptxas issue all of a tile's row loads before the first add (Triton 3.6, sm_90 SASS)
_CONFIGS = [
    triton.Config({"BLOCK_L": 32, "PROGS": 8}, num_warps=4, num_stages=1, maxnreg=64),
    triton.Config({"BLOCK_L": 32, "PROGS": 8}, num_warps=2, num_stages=1, maxnreg=128),
    triton.Config({"BLOCK_L": 16, "PROGS": 12}, num_warps=1, num_stages=1, maxnreg=168),
    triton.Config({"BLOCK_L": 64, "PROGS": 4}, num_warps=4, num_stages=1, maxnreg=128),
    triton.Config({"BLOCK_L": 128, "PROGS": 2}, num_warps=16, num_stages=1, maxnreg=64),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"BLOCK_L": 16, "PROGS": 2}, num_warps=1, num_stages=1)]


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
def _bag_sum_kernel(idx_ptr, w_ptr, out_ptr, B, L, D, BLOCK_D: tl.constexpr, BLOCK_L: tl.constexpr,
                    PROGS: tl.constexpr):
    """Bags [b0, b0 + nb) of the batch, n_per = ceil(B / programs) per program. Positions are local to the range
    (0 = its first lookup). A tile covers lookups [q, te) with te = min(q + BLOCK_L, eb, total): the rest of bag
    ``a`` (ending at ea) and at most the start of bag a + 1 (ending at eb)."""
    n_per = tl.cdiv(B, tl.num_programs(0))
    b0 = tl.program_id(0) * n_per
    nb = tl.minimum(n_per, B - b0)
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    zero_d = d * 0  # (masks as vectors: the interpreter mis-types scalar-bool & vector-bool masks)
    t = tl.arange(0, BLOCK_L)
    idx_base = idx_ptr + b0.to(tl.int64) * L
    out_base = out_ptr + b0.to(tl.int64) * D
    total = nb * L
    a = 0
    ea = L
    eb = 2 * L
    te = tl.minimum(tl.minimum(BLOCK_L, eb), total)
    rows = tl.load(idx_base + t, mask=t < te, other=0)
    carry = tl.zeros([BLOCK_D], dtype=tl.float32)
    q = 0
    while q < total:
        j = q + t
        vals = tl.load(w_ptr + rows[:, None] * D + d[None, :], mask=(j < te)[:, None] & dmask[None, :], other=0.0)
        # the next tile: its extent, and its indices loaded now (before this tile's rows are used)
        done_a = te >= ea
        done_b = te >= eb
        an = a + done_a.to(tl.int32) + done_b.to(tl.int32)
        ean = tl.where(done_b, eb + L, tl.where(done_a, eb, ea))
        ebn = ean + L
        ten = tl.minimum(tl.minimum(te + BLOCK_L, ebn), total)
        jn = te + t
        rows_n = tl.load(idx_base + jn, mask=jn < ten, other=0)
        # this tile: rows of bag a (j < ea), then rows of bag a + 1
        v = vals.to(tl.float32)
        in_a = (j < ea)[:, None]
        sa = tl.sum(tl.where(in_a, v, 0.0), axis=0) + carry
        sb = tl.sum(tl.where(in_a, 0.0, v), axis=0)
        tl.store(out_base + a.to(tl.int64) * D + d, sa.to(out_ptr.dtype.element_ty),
                 mask=dmask & ((zero_d + done_a.to(tl.int32)) != 0))
        tl.store(out_base + (a + 1).to(tl.int64) * D + d, sb.to(out_ptr.dtype.element_ty),
                 mask=dmask & ((zero_d + done_b.to(tl.int32)) != 0))
        carry = tl.where(done_a, tl.where(done_b, 0.0, sb), sa)
        a = an
        q = te
        ea = ean
        eb = ebn
        te = ten
        rows = rows_n
    if L == 0:  # empty bags: zeros
        for i in range(0, nb):
            tl.store(out_base + i * D + d, tl.zeros([BLOCK_D], dtype=out_ptr.dtype.element_ty), mask=dmask)


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
        _launch(_bag_sum_kernel, (bag, dim, indices.dtype, weight.dtype, weight.device),
                lambda meta: (_programs(batch, meta["PROGS"] * sms),),
                indices, weight, out, batch, bag, dim, BLOCK_D=triton.next_power_of_2(dim))
        return out
