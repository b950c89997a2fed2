"""kbstudy-triton candidate for DLRM-Bench problem 4 (EmbeddingBag sum backward to a dense weight gradient).

The dense gradient (num_embeddings x dim, 2 GB at full size) is written exactly once, with no sort, no float atomics,
no zero-fill pass over it and no zero fill of the row table either: a call is two Triton launches and one allocation
(the output).

1. ``last`` (one int32 per table row, 16 MB) and ``link`` (one int32 per lookup, 3.3 MB) are scratch kept per device
   and shape (as problems 7 and 12 keep theirs), zeroed once when allocated. Every call takes a new *epoch* (odd,
   3, 5, ...: so a launch's integer specialisation never changes with it); an entry is
   ``epoch << (JB + 1) | repeat << JB | (j + 1)`` with ``JB = n.bit_length()`` (``j + 1 <= n < 2**JB``), and one
   whose epoch is not the call's reads as empty, so no fill is needed before a call. At full size JB = 20 leaves 10
   epoch bits: 511 calls, then one ``zero_()`` of ``last`` and the epochs start again (entries of old epochs could
   otherwise match); with fewer than 8 epoch bits (n >= 2**22) the entries are int64 (epochs up to 2**31 - 1).
2. Triton ``_link_kernel``, one pass over the (int64, unconverted) lookups: lookup ``j`` of row ``r`` swaps its
   entry into ``last[r]`` (one *relaxed* int32 ``atomic_xchg``: nothing has to be published before it, unlike
   forward lists, whose acq_rel exchange fences every lookup) and keeps the displaced lookup as
   ``link[j]`` (0 if the displaced entry is of an older epoch), so a row's lookups form one list that runs backwards
   from its final ``last`` entry. A lookup that displaced one of this call's entries also sets the row's repeat flag
   with a relaxed ``atomic_or`` on the same word (same thread, same address, so it lands after its swap): the final
   entry of a row carries the flag iff the row has two or more lookups (73k of the 741k touched rows at full size),
   and only those rows ever read ``link``. Per lookup: an 8-byte index load, one exchange, a 4-byte store (plus an
   ``or`` for the 78k repeats), against a fenced exchange and three stores for forward lists; 819,200 lookups in
   800 programs of 1024 (8 per thread, all in flight at once; 48 registers).
3. Triton ``_dense_grad_kernel``: a grid of programs each owning ``TILES`` consecutive tiles of ``BLOCK_R``
   consecutive rows. Per tile: one load of the rows' ``last`` words (the next tile's are loaded before this tile's
   gathers, so their DRAM latency overlaps its work), one masked gather of the touched rows' last lookups' bag rows
   (``grad_output`` is 4 MB and stays in L2: gathers are ``evict_last``), the rare list walks (a loop that runs only
   while a row of the tile still has lookups left), and one [BLOCK_R, D] store of the whole tile (zeros and sums alike,
   masked only at the table's end; 16-byte ``st.global.cs`` vectors, evict-first in L2, so the 2 GB stream does not
   push the gathered rows out).

Why it approaches the floor (2 GB of compulsory writes, 486 us): a dense kernel that writes the 82 % untouched rows
from one kind of program, with holes, and the 741k touched rows (377 MB) from another, in lookup order (the design of
the record ``kbstudy-triton`` in ``outputs/records/dlrm_bench/h200/variants-problem-4``, whose dense kernel alone took
~560 us on the H200), makes 512-byte writes at random places, each reopening a DRAM page that its zero neighbours were
written to at another time. Here every row of the table is written once, in address order, by the program owning its
tile, each tile as one contiguous 16-32 KB burst: a pure streaming write, whose only extra traffic is 16 MB of
``last`` reads and L2-resident gathers. Latency: a program holds its tile in registers from the ``last`` load to the
store (an L2 gather and, for 45 % of 32-row tiles, one more); with [32 rows, 4 warps] at 56 registers, 9 programs per
SM hold 144 KB of tiles, which covers 4.5 us per tile at the 32 GB/s per SM that 4.2 TB/s asks for; the prefetching
configs (``TILES`` > 1) take the DRAM load off that path for the autotuner to choose if latency is what limits.
Before the dense kernel, the call pays no 16 MB memset launch (with one, the device idles while the host enqueues it
and the link kernel; ~9 us of host time per call), and the link kernel issues relaxed exchanges instead of fenced
ones (its 819k exchanges miss L2 on a cold table, where after a zero fill they would hit a freshly zeroed one: ~403k
random 32-byte sectors). A repeated row's fp32 summation order is the GPU's exchange order, reversed (not
deterministic; rows with one or two lookups are bit-identical to eager). ``triton.autotune`` picks the tile shape on
the GPU (one config under ``TRITON_INTERPRET=1``); the dense kernel only reads its inputs and the scratch, so its
tuning runs need no state restored.

Measured on the H200: 510.8 us of cold device time, 1.06x the floor (483.0 us;
``outputs/records/dlrm_bench/h200/final``; 508.9 us in ``outputs/records/dlrm_bench/h200/repeat``). Beside the
forward-list kernel with a zero-filled row table in one run (``outputs/records/dlrm_bench/h200/variants-problem-4``:
this file is the record ``s13-a``, that kernel the record ``kbstudy-triton``): 507.1 against 575.8 us of device time,
per call 0.89x of it (0.84-0.91).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: sm_90 (Triton 3.9 ptxas) registers, no spills: [32 rows x 1 tile, 4 warps] 56, [16 x 8, 4] 54, [32 x 4, 4] 78,
#: [64 x 1, 8] 64 (9, 9, 6 and 4 programs per SM by registers); 16-byte ``st.global.cs`` vector stores
_CONFIGS = [
    triton.Config({"BLOCK_R": 32, "TILES": 1}, num_warps=4, num_stages=1),
    triton.Config({"BLOCK_R": 16, "TILES": 8}, num_warps=4, num_stages=1),
    triton.Config({"BLOCK_R": 32, "TILES": 4}, num_warps=4, num_stages=1),
    triton.Config({"BLOCK_R": 64, "TILES": 1}, num_warps=8, num_stages=1),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"BLOCK_R": 16, "TILES": 8}, num_warps=4, num_stages=1)]

#: lookups per link program (8 per thread at 4 warps: all of a thread's exchanges in flight at once)
LINK_BLOCK = 1024


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


@triton.jit(do_not_specialize=["epoch"])
def _link_kernel(idx_ptr, last_ptr, link_ptr, n, epoch, JB: tl.constexpr, BLOCK: tl.constexpr):
    """Per lookup j of row r: swap this call's entry ``epoch << (JB + 1) | (j + 1)`` into ``last[r]`` (relaxed); if the
    displaced entry is this call's (an earlier lookup of r), link j to it (``link[j]`` = its ``j + 1``, else 0) and
    set r's repeat flag (bit JB) with a relaxed ``atomic_or`` (no return value) on the same word (same thread, same
    address: it lands after the swap, so the final entry of every row with two or more lookups carries the flag)."""
    j = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = j < n
    r = tl.load(idx_ptr + j, mask=m, other=0)
    ety = last_ptr.dtype.element_ty
    tag = epoch.to(ety) << (JB + 1)
    prev = tl.atomic_xchg(last_ptr + r, tag | (j + 1).to(ety), mask=m, sem="relaxed")
    hit = m & ((prev >> (JB + 1)) == epoch)
    tl.atomic_or(last_ptr + r, tl.full([BLOCK], 1, ety) << JB, mask=hit, sem="relaxed")
    low = (tl.full([BLOCK], 1, ety) << JB) - 1
    tl.store(link_ptr + j, tl.where(hit, prev & low, 0).to(tl.int32), mask=m)


@triton.autotune(configs=_CONFIGS, key=["N", "D", "BAG", "JB"], do_bench=_bench)
@triton.jit(do_not_specialize=["epoch"])
def _dense_grad_kernel(last_ptr, link_ptr, grad_ptr, out_ptr, N, epoch, D: tl.constexpr, BAG: tl.constexpr,
                       JB: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_R: tl.constexpr, TILES: tl.constexpr):
    """Rows [pid * TILES * BLOCK_R, (pid + 1) * TILES * BLOCK_R) of the gradient, as TILES consecutive tiles of
    BLOCK_R rows, each row written once in its tile's one [BLOCK_R, D] store: a row whose ``last`` entry is not this
    call's is zero; a touched row is the sum of its lookups' ``grad_output`` rows, walked from its last lookup back
    through ``link`` (only rows with the repeat flag read ``link`` at all). The next tile's ``last`` words are loaded
    before this tile's gathers, so their DRAM latency overlaps this tile's work."""
    base = tl.program_id(0).to(tl.int64) * (BLOCK_R * TILES)
    nloc = tl.minimum(N - base, BLOCK_R * TILES).to(tl.int32)  # rows of this program
    last_blk = last_ptr + base
    out_blk = out_ptr + base * D
    rr = tl.arange(0, BLOCK_R)
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    e_next = tl.load(last_blk + rr, mask=rr < nloc, other=0, eviction_policy="evict_first")
    for k in range(TILES):
        r = k * BLOCK_R + rr  # local row
        rmask = r < nloc
        e = e_next
        if TILES > 1:  # prefetch the next tile's entries (none after the last tile)
            e_next = tl.load(last_blk + r + BLOCK_R, mask=r + BLOCK_R < nloc, other=0, eviction_policy="evict_first")
        live = rmask & ((e >> (JB + 1)) == epoch)
        low = (tl.full([BLOCK_R], 1, e.dtype) << JB) - 1
        t = tl.where(live, e & low, 1).to(tl.int32)  # lookup + 1 (1 where not touched: a valid, masked-off address)
        more = live & (((e >> JB) & 1) != 0)
        acc = tl.load(grad_ptr + ((t - 1) // BAG).to(tl.int64)[:, None] * D + d[None, :],
                      mask=live[:, None] & dmask[None, :], other=0.0, eviction_policy="evict_last").to(tl.float32)
        t = tl.load(link_ptr + (t - 1), mask=more, other=0, eviction_policy="evict_last")
        cont = t != 0
        while tl.sum(cont.to(tl.int32), axis=0) > 0:
            t = tl.where(cont, t, 1)
            acc += tl.load(grad_ptr + ((t - 1) // BAG).to(tl.int64)[:, None] * D + d[None, :],
                           mask=cont[:, None] & dmask[None, :], other=0.0, eviction_policy="evict_last").to(tl.float32)
            t = tl.load(link_ptr + (t - 1), mask=cont, other=0, eviction_policy="evict_last")
            cont = t != 0
        tl.store(out_blk + r[:, None] * D + d[None, :], acc.to(out_ptr.dtype.element_ty),
                 mask=rmask[:, None] & dmask[None, :], cache_modifier=".cs")


class ModelNew(nn.Module):
    """No parameters, like the problem's ``Model``; forward is two Triton launches (link, dense gradient) on scratch
    state kept per device and shape (``last`` and ``link``, allocated once, never returned)."""

    #: the first epoch of a fresh (zeroed) ``last``; epochs are odd and >= 3, so a launch's integer specialisation
    #: (== 1, divisible by 16) never changes with it
    FIRST_EPOCH = 3
    #: ``last`` entries are int32 when at least this many epoch bits fit beside ``j + 1`` and the flag, else int64
    MIN_EPOCH_BITS = 8

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.num_embeddings = num_embeddings
        self._scratch = {}

    def _scratch_for(self, device, n_rows: int, n: int):
        """[last, link, epoch, JB, max epoch] for (device, rows, lookups): ``last`` holds one entry per table row
        (int32 when ``j + 1`` (JB bits), the repeat flag and ``MIN_EPOCH_BITS`` epoch bits fit in 31 bits, else
        int64), zeroed once; ``link`` one int32 per lookup, overwritten by every call."""
        key = (device, n_rows, n)
        st = self._scratch.get(key)
        if st is None:
            jb = max(1, n.bit_length())  # j + 1 <= n < 2**JB
            dtype = torch.int32 if 31 - (jb + 1) >= self.MIN_EPOCH_BITS else torch.int64
            max_epoch = min(2**31 - 1, 2**((31 if dtype == torch.int32 else 63) - (jb + 1)) - 1)
            st = [torch.zeros(n_rows, dtype=dtype, device=device), torch.empty(max(n, 1), dtype=torch.int32,
                  device=device), self.FIRST_EPOCH - 2, jb, max_epoch]
            self._scratch[key] = st
        return st

    def forward(self, indices: torch.Tensor, grad_output: torch.Tensor) -> torch.Tensor:
        batch, bag = indices.shape
        n_rows = self.num_embeddings
        dim = grad_output.shape[1]
        n = batch * bag
        if n_rows >= 2**31 or n >= 2**31 - 1:
            raise ValueError("this kernel indexes rows and lookups with int32 (< 2**31)")
        dev = grad_output.device
        out = torch.empty(n_rows, dim, device=dev, dtype=grad_output.dtype)
        if n_rows == 0:
            return out
        st = self._scratch_for(dev, n_rows, n)
        last, link, epoch, jb = st[0], st[1], st[2] + 2, st[3]
        if epoch > st[4]:  # every epoch used since the last zero fill: entries of old epochs could match again
            last.zero_()
            epoch = self.FIRST_EPOCH
        st[2] = epoch
        if n:
            idx = indices if indices.is_contiguous() else indices.contiguous()
            _launch(_link_kernel, None, (triton.cdiv(n, LINK_BLOCK),), idx, last, link, n, epoch, JB=jb,
                    BLOCK=LINK_BLOCK, num_warps=4)
        grad = grad_output if grad_output.is_contiguous() else grad_output.contiguous()
        _launch(_dense_grad_kernel, (n_rows, dim, bag, jb, grad.dtype, last.dtype, dev),
                lambda meta: (triton.cdiv(n_rows, meta["BLOCK_R"] * meta["TILES"]),), last, link, grad, out, n_rows,
                epoch, D=dim, BAG=bag, JB=jb, BLOCK_D=triton.next_power_of_2(dim))
        return out
