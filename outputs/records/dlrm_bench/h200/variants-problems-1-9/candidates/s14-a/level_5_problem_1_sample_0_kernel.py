"""kbstudy-triton variant s14-a for DLRM-Bench problem 1 (EmbeddingBag sum, fixed bag size, forward).

**One launch, a persistent grid, rows copied into shared memory two or three steps ahead.** A program owns the bags
``pid, pid + G, pid + 2G, ...`` (G programs, every program's count within one of the others) and walks them as a
stream of steps, one step = one bag (``BLOCK_L`` >= L) or one ``BLOCK_L``-lookup chunk of it. The step loop is a
``tl.range(..., num_stages=STAGES)`` loop, so Triton's software pipeliner turns the index load and the [BLOCK_L, D]
row gather into ``cp.async`` copies into shared memory, the rows ``STAGES - 1`` steps before they are summed and their
indices two steps before the rows (sm_90 SASS, Triton 3.6: ``LDGSTS.E.BYPASS.128`` per 16-byte piece of a row, one
lane per warp copying the indices, ``DEPBAR.LE SB0, 2 x (STAGES - 2)`` before a step's tile is read, two copy groups
per step, so the next ``STAGES - 2`` steps' rows stay in flight while one step is summed). The sum of a step is read
back from shared memory, reduced over the rows in fp32 and the pooled row stored once (the bag's last chunk).
Compulsory traffic only: indices, looked-up rows, output; one launch, one allocation.

**What the shipped kernel wastes (sm_90 SASS of its [128, 16 warps] / [64, 8] / [32, 4] configs under Triton 3.6).**
One program per bag issues its index loads, then gathers with plain loads into registers, and ptxas, which keeps those
programs at 56-64 registers, interleaves the adds with the loads: a thread issues 3-4 of its 8 row loads, waits for
them, adds, issues the next ones, and the first gather waits for its own index load. A bag therefore costs two to
three dependent DRAM round trips (index, then two batches of rows), and each program starts cold (one more index round
trip per bag, from DRAM after the flush). Its device time falls from 121.5 us cold to 115.3 us warm (session 13,
``gap2_shipped.csv``): latency, not bandwidth, sets its pace.

**Why this should approach the floor (91.7 us; 6.5 MB of indices, ~742k distinct rows = 380 MB, 4 MB out; with the ~10 %
 repeated lookups that a non-sorting kernel re-reads, ~430 MB through DRAM).** The copies need no registers and ptxas
cannot consume them early, so what is in flight is fixed by the pipeline: with ``STAGES = 3`` a program has the rows
of the step it waits for and of the next step in flight (up to 2 x 100 rows = 100 KB per program), with 4 up to three
steps. Little's law at ~4.2 TB/s and ~1.5-2 us loaded latency asks for 6-8 MB, i.e. ~50-64 KB per SM; every config
keeps 100-150 KB per SM in flight at the wait, and the indices of the next steps are already in shared memory when a
step's gathers are issued, so no gather waits on an index load. sm_90 (Triton 3.6, no spills): [128 rows, 16 warps, 3
stages] 64 registers, 141 KB shared -> 1 program per SM, 100-200 rows in flight; [128, 16, 4] 86 / 208 KB -> 1 per SM,
200-300 rows; [64, 8, 4] 78 / 104 KB -> 2 per SM (chunks of 64 + 36 lookups), ~300 rows; [64, 8, 3] 64 / 71 KB -> 3
per SM, ~300 rows; [128, 8, 3] 110 / 137 KB -> 1 per SM. **Waves and the tail**: the grid is sized to what the H200
holds at once (``PROGS`` per SM x 132 SMs), then shrunk so every program gets the same number of bags: 8192 bags on 2
x 132 slots -> 256 programs of exactly 32 bags; on 3 x 132 -> 391 of at most 21; on 132 slots -> 131 programs of at
most 63. One wave, no block launches after the start, and programs that are all bandwidth-bound at equal shares finish
together: the tail is the last steps' DRAM latency, once, instead of the shipped kernel's 8192 program starts.
Expected device time: ~430 MB at ~4.0-4.2 TB/s plus ~2 us of pipeline fill and drain, ~105-110 us, cold about equal to
warm since no round trip waits on an L2 miss of an index. ``triton.autotune`` (keyed on the bag size and dimension)
picks tile, warps, stages and programs per SM on the GPU (one config under ``TRITON_INTERPRET=1``).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: BLOCK_L lookups per step, STAGES pipeline stages, PROGS programs per SM (all resident: registers x threads and
#: shared memory per SM, counts in the docstring; Triton 3.6, sm_90, no spills)
_CONFIGS = [
    triton.Config({"BLOCK_L": 128, "STAGES": 3, "PROGS": 1}, num_warps=16, num_stages=3),
    triton.Config({"BLOCK_L": 128, "STAGES": 4, "PROGS": 1}, num_warps=16, num_stages=4),
    triton.Config({"BLOCK_L": 64, "STAGES": 4, "PROGS": 2}, num_warps=8, num_stages=4),
    triton.Config({"BLOCK_L": 64, "STAGES": 3, "PROGS": 3}, num_warps=8, num_stages=3),
    triton.Config({"BLOCK_L": 128, "STAGES": 3, "PROGS": 1}, num_warps=8, num_stages=3),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"BLOCK_L": 32, "STAGES": 3, "PROGS": 1}, num_warps=4, num_stages=3)]


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
                    STAGES: tl.constexpr, PROGS: tl.constexpr):
    """Bags pid, pid + G, ... (G = the grid); step s = chunk s % nch of the program's bag s // nch."""
    pid = tl.program_id(0)
    G = tl.num_programs(0)
    nch = tl.maximum(tl.cdiv(L, BLOCK_L), 1)  # L = 0: one empty chunk, the bag's row is stored as zeros
    nsteps = tl.cdiv(B - pid, G) * nch
    l = tl.arange(0, BLOCK_L)
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    zero_d = d * 0  # (masks as vectors: the interpreter mis-types scalar-bool & vector-bool masks)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for s in tl.range(0, nsteps, num_stages=STAGES):
        k = s // nch
        c = s - k * nch
        bag = pid.to(tl.int64) + k.to(tl.int64) * G
        p = c * BLOCK_L + l
        pm = p < L
        rows = tl.load(idx_ptr + bag * L + p, mask=pm, other=0)
        vals = tl.load(w_ptr + rows[:, None] * D + d[None, :], mask=pm[:, None] & dmask[None, :], other=0.0)
        acc += tl.sum(vals.to(tl.float32), axis=0)
        last = (zero_d + c) == nch - 1
        tl.store(out_ptr + bag * D + d, acc.to(out_ptr.dtype.element_ty), mask=dmask & last)
        acc = tl.where(last, 0.0, acc)


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
    """At most ``slots`` programs, each with the same number of bags (within one): ceil(batch / ceil(batch /
    slots))."""
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
