"""kbstudy-triton kernel for DLRM-Bench problem 5 (fused EmbeddingBag backward + row-wise Adagrad, functional).

Measured on the H200: 276.0 us of cold device time, 1.51x the floor (183.2 us;
``outputs/records/dlrm_bench/h200/final``). Beside the base design below without this file's four additions (the record
``kbstudy-triton``, the kernel 5 of ``outputs/records/dlrm_bench/h200/previous-kernels``) in one run
(``outputs/records/dlrm_bench/h200/variants-problem-5``, where this file is the record ``s16-c``): 276.3 against 283.1
us, ratio 0.976 [0.974, 0.978]. In ``outputs/records/dlrm_bench/h200/variants-l2-fetch`` the same design without the
claim protocol ("Race-free", below; the record ``s16-a``) took 278.7 against 285.2 us for the base design (0.977 [0.974,
0.979]), and that design without the dependent launches and the discard (``s16-b``) 1.007x the base design's time: the
gain is those two mechanisms'.

**Design.** The base design (zero fill, link kernel, one-wave scan, persistent pipelined update kernel, one host wait
for U) with its kernel boundaries overlapped by programmatic dependent launch, a scan that does not wait on DRAM once
per 128 rows, ``last``'s dirty lines dropped from L2 instead of written back, the update kernel ranked in the judged
state, and a claim protocol that makes the discard race-free.

**Race-free: the claim protocol.** A scan block's look-back that still misses an earlier block's status word after
``MAX_SPINS`` re-reads counts that block's rows itself from ``last``. If the decision ("unpublished") and the
recount's loads were separate, the earlier block could publish, finish and discard its lines of ``last`` between them
(``discard.global.L2`` is, in the PTX memory model, a weak write of an indeterminate value), so the recount could read
undefined data and give wrong slots. So both sides meet on one word, the earlier block's status word (zeroed by the
per-call fill; its only writers are the two read-modify-writes below):

- a look-back that gives up on block t first does ``old = atomic_or(status[t], CLAIM)`` (bit 31, above any count);
  if ``old`` is published (this epoch in the high half) it takes ``old``'s count and reads none of t's rows,
  otherwise it recounts t's rows;
- block t publishes with ``atomic_or(status[t], epoch << 32 | count)`` (an OR, so a CLAIM already there stays), and
  the same thread then loads the word back (``ld.volatile``, after its own OR in program order at the same address,
  so it reads the OR's value or a later one). The block discards its lines only if that word is published and has no
  CLAIM.

All read-modify-writes of one address are totally ordered (coherence order; each reads the value just before it). If
a claim comes before t's publish, the publish keeps CLAIM and every later value of the word has it, so t's read-back
sees it and t keeps its lines (they are written back, as in the base design). If the claim comes after t's publish,
it reads t's published word and reads none of t's rows. So no interleaving has a recount load and a discard of the
same line. A line is discarded only by its own block (lines lie wholly inside one block: a block is a multiple of 32
rows and ``last`` is 128-byte aligned), after a barrier that orders its own threads' loads before it. Readers mask the
count with ``COUNT_MASK``. Cost on the path taken in practice (one wave of 489 <= 528 resident blocks, no look-back
gives up, so no claim): the publish is an OR (fire-and-forget, ``REDG.E.OR.64`` in the SASS, as an exchange whose
result is unused would be), plus one 64-bit load by one thread whose result is first used at the discard (SASS:
issued right after the publish, first read ~0x8030, after the second pass), so nothing waits for it; 64 registers, no
spills, as without the protocol (measured above: 276.3 us with it, 278.7 us without it in another run). The
CPU checks exercise the claim path (hand-made status words: unpublished, unpublished and already claimed, published
and claimed late; and a whole forward with CLAIM set in half the words before the scan); under the interpreter there
is no discard, so the discard decision itself is only checked by reading the code and the SASS.

Only the rows that were looked up are read and written (the FBGEMM TBE approach); the table and the state are inputs
and are never written (the updated rows go to fresh outputs). No sort. Per call:

1. One ``torch.zeros`` (16 MB at full size, ~4.5 us): U, the scan's status words and ``last`` (one int32 per table
   row, on a 128-byte boundary).
2. Triton ``_link_kernel`` (800 programs of 1024 lookups, 51 registers, one wave): lookup ``j`` of row ``r`` swaps
   ``1 << (JB + 1) | (j + 1)`` into ``last[r]`` (relaxed int32 exchange), keeps a displaced entry as ``link[j]``
   and sets the row's repeat flag; each program adds its first touches to U.
3. Triton ``_scan_kernel`` (489 blocks of 8192 rows, 8 warps, capped at 64 registers: 4 per SM, one wave):
   count, publish, look back, then give the touched rows their slots and write each slot's record and state.
4. U is copied to pinned host memory on a side stream that waits for the scan; the main stream goes on.
5. Triton ``_update_kernel``, persistent, autotuned over six configs.

The four additions, and the microseconds each was estimated to take off the base design's 283.2 us (a per-kernel
profile of it on the H200, kept in no record folder: update 233.1, scan 23.3, link 15.7, fill 4.5 us; floor 185.1 us):

- **Programmatic dependent launch** (sm_90, Triton 3.6's ``launch_pdl`` launch option and ``griddepcontrol``): the
  link, scan and update kernels are launched with it; each kernel lets the next one's programs be scheduled as soon as
  it starts (``griddepcontrol.launch_dependents``), and each waits for the previous grid's end and memory
  (``griddepcontrol.wait``) only after the work that does not need it: the link kernel loads its indices first; the
  scan issues its L2 prefetches first (below). The three boundaries (fill -> link -> scan -> update) do not pay a
  grid drain plus a launch each: about 1-2 us each, 3-6 us in all. The update kernel's programs need the registers
  the scan's hold (4 x 16K per SM), so they start as scan programs exit, with no launch latency.
- **Scan** (23.3 us in the base design, where a model gives 7-9 us). Compiled for sm_90 under Triton 3.6, its scan uses
  64 registers (N = 4,000,000 is specialised as a multiple of 16, so its loads are 16-byte vectors; one wave of 489 <=
  528 blocks), so the extra time is not a second wave. It is the rows' second pass: 8 steps of 128 rows per warp,
  each loading ``last`` (L2) and the state (DRAM) and only then storing (the loads of step k + 1 come after the
  stores of step k: ptxas does not move loads above possibly aliasing stores), with ~9 barriers per step (cumsum and
  store layout conversions). Per step all blocks have only 489 x 256 x 16 B = 2 MB of state loads in flight, ~1.3
  TB/s at a loaded DRAM latency of ~1.5 us: ~12 us for the 16 MB of state, on top of the count pass, the look-back
  and the launch. Here (a) each thread prefetches its block's state into L2 (``cp.async.bulk.prefetch.L2``, 128 B a
  thread, the 16 MB issued at once at the block's start, before the wait for the link kernel, so with programmatic
  dependent launch it overlaps the link kernel's last programs) and its share of ``grad_output`` (4 MB, ~48 B a
  thread: the update kernel's L2-resident gradient rows start in L2); (b) the second pass issues step k + 1's loads
  before step k's stores (one L2 round trip of latency per block instead of eight DRAM ones). 79 registers uncapped
  (3 per SM: 396 slots, a second wave), so it is launched with ``maxnreg`` 64: 64 registers, no spills (Triton 3.6
  ptxas). A scan that prefetches the state too but still issues its state loads one step after another, with a
  prefetch that does not overlap the link kernel (the record ``s14-a`` of problem 5 in
  ``outputs/records/dlrm_bench/h200/variants-problems-1-9``), takes 25.3 us. Estimate ~12-16 us: -7 to -11 us.
- **No write-back of ``last``.** The zero fill and the exchanges leave 16 MB of dirty ``last`` lines in L2; the
  update kernel's 750 MB stream evicts them, and their write-back (16 MB, ~3.8 us of DRAM time) shares the DRAM with
  the update. Each scan block, once its rows are read (a barrier), discards its own 256 lines of 128 bytes
  (``discard.global.L2``, sm_80, PTX 7.4: invalidated without write-back; ``CCTL.E.RML2`` in the SASS). A block discards
  only if no look-back has claimed it (above, "Race-free"). Estimate -2 to -4 us.
- **Autotuning in the judged state**: ``_bench`` flushes by reading and hides the host (as problem 12's kernel does),
  instead of ``do_bench``'s write-flush, whose 60 MB of dirty write-back every ranked update call paid.

Registers / shared memory, sm_90, Triton 3.6 ptxas, no spills: link 51; scan 64 (capped) / 8 KB; update
configs: [16, 4 stages] 96 / 25.4 KB, [16, 5] 96 / 33.8 KB, [8, 4, 2 warps] 96 / 12.8 KB, [8, 6] 80 / 21.2 KB,
[8, 4, STAGED] 80 / 36.9 KB, [16, registers] 104 / 0.

Model: ~265-272 us (1.43-1.47x the floor), against 276.0-276.3 us measured; the 1.25x target (231.4 us) is out of
reach of this design. The update kernel
(233 us for ~760 MB of DRAM traffic and ~420 MB of L2 gradient reads) is still the bulk; nothing here changes it but
its config choice.

A repeated row's fp32 summation order is the GPU's exchange order (not deterministic). The link and scan kernels have
atomics and state, so they run one fixed shape each; the update kernel only reads what they wrote (and writes its
outputs and a list it rebuilds every run), so its tuning runs need no state restored. Under ``TRITON_INTERPRET=1``
there is no programmatic dependent launch, prefetch, discard or register cap (off sm_90 no launch option or prefetch).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: a status word's count bits; a look-back that gives up on a block ORs ``CLAIM`` (bit 31, above any count: a block
#: has fewer than 2**31 rows) into its word before it recounts the block's rows (see the module docstring, "Race-free")
COUNT_MASK = tl.constexpr(0x7FFFFFFF)
CLAIM = tl.constexpr(1 << 31)

#: look-back spin cap (re-reads of one window of status words) before a program counts an unpublished block itself
MAX_SPINS = 1 << 12

#: update kernel (persistent: ``PROGS`` programs per SM, each looping over the chunks p, p + G, p + 2G, ... of
#: ``BLOCK_P`` output slots; ``STAGES`` 0: registers only, >= 2: ``tl.range`` software pipeline of that many stages;
#: ``STAGED``: grad_output rows staged through shared memory too). sm_90 under Triton 3.6's ptxas (the GPU's), no
#: spills at these ``maxnreg`` caps: registers / dynamic shared memory -> programs per SM that fit = ``PROGS`` ->
#: table rows in flight per SM ((STAGES - 1) chunks x BLOCK_P x PROGS):
#:   [16, 4 stages, 4 warps]          96 / 25.4 KB -> 5 -> 240 rows (grad rows loaded in the iteration)
#:   [16, 5 stages, 4 warps]          96 / 33.8 KB -> 5 -> 320 rows
#:   [8, 4 stages, 2 warps]           96 / 12.8 KB -> 10 -> 240 rows
#:   [8, 6 stages, 4 warps]           80 / 21.2 KB -> 6 -> 240 rows
#:   [8, 4 stages, 4 warps, STAGED]   80 / 36.9 KB -> 5 -> 120 rows (no load waited for in the iteration)
#:   [16, registers, 4 warps]        104 / 0 -> 4 -> 64 rows (all of a chunk's loads at once; no pipeliner)
_UPDATE_CONFIGS = [
    triton.Config({"BLOCK_P": 16, "PROGS": 5, "STAGES": 4, "STAGED": False}, num_warps=4, num_stages=1, maxnreg=96),
    triton.Config({"BLOCK_P": 16, "PROGS": 5, "STAGES": 5, "STAGED": False}, num_warps=4, num_stages=1, maxnreg=96),
    triton.Config({"BLOCK_P": 8, "PROGS": 10, "STAGES": 4, "STAGED": False}, num_warps=2, num_stages=1, maxnreg=96),
    triton.Config({"BLOCK_P": 8, "PROGS": 6, "STAGES": 6, "STAGED": False}, num_warps=4, num_stages=1, maxnreg=80),
    triton.Config({"BLOCK_P": 8, "PROGS": 5, "STAGES": 4, "STAGED": True}, num_warps=4, num_stages=1, maxnreg=80),
    triton.Config({"BLOCK_P": 16, "PROGS": 4, "STAGES": 0, "STAGED": False}, num_warps=4, num_stages=1, maxnreg=104),
]
if _INTERPRET:
    _UPDATE_CONFIGS = [triton.Config({"BLOCK_P": 16, "PROGS": 2, "STAGES": 3, "STAGED": False}, num_warps=4,
                                     num_stages=1)]


def _bench(kernel_call, quantiles):
    """Autotuning benchmark, timed as the project judges a kernel (``kbstudy.harness.timing.time_device``): before
    each timed call the L2 is flushed by *reading* a 256 MiB buffer (it is left holding clean lines), then a spin
    kernel keeps the device busy while the host launches the call; CUDA events around the call; 5 ms of warm-up and
    about 25 ms of timed calls (10 to 200) per config. ``triton.testing.do_bench`` flushes by *writing* the buffer,
    which leaves the L2 full of dirty lines whose write-back (2.5-8.4 us for these kernels:
    ``outputs/records/dlrm_bench/h200/flush-states``) every timed call pays, so it ranks the configs under another
    memory state than the one they are judged in (as problem 12's ``_bench``). Falls back to ``do_bench`` (5 / 25 ms)
    if this raises."""
    try:
        return _bench_read_flush(kernel_call, quantiles)
    except Exception:
        return triton.testing.do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)


def _bench_read_flush(kernel_call, quantiles, warmup_ms=5.0, rep_ms=25.0, spin_cycles=200_000):
    """:func:`_bench`'s method: the quantiles (in the order asked; a number for one) of the timed calls, in ms."""
    device = torch.cuda.current_device()
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0
    buf = torch.zeros(max(256 << 20, 2 * l2) // 8, dtype=torch.int64, device="cuda")
    sink = torch.empty((), dtype=torch.int64, device="cuda")
    kernel_call()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        kernel_call()
    end.record()
    torch.cuda.synchronize()
    estimate_ms = max(start.elapsed_time(end) / 5, 1e-3)
    for _ in range(max(1, int(warmup_ms / estimate_ms))):
        kernel_call()
    # each timed call also waits for its flush (~0.07 ms) and spin (~0.1 ms)
    n = max(10, min(200, int(rep_ms / (estimate_ms + 0.2))))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for start, end in events:
        torch.amax(buf, dim=0, out=sink)  # the read flush (kbstudy.harness.timing.l2_flusher "read")
        torch.cuda._sleep(spin_cycles)
        start.record()
        kernel_call()
        end.record()
    torch.cuda.synchronize()
    del buf
    times = sorted(s.elapsed_time(e) for s, e in events)
    ret = [times[min(n - 1, max(0, int(round(q * (n - 1)))))] for q in (quantiles or (0.5,))]
    return ret[0] if len(ret) == 1 else ret


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
def _l2_prefetch(ptr, nbytes):
    """``cp.async.bulk.prefetch.L2`` of ``nbytes`` (a multiple of 16; 0: nothing) at ``ptr`` (16-byte aligned), per
    element: a hint that fetches DRAM lines into L2 without registers, waiting or results (sm_90, PTX 8.0)."""
    tl.inline_asm_elementwise(
        asm="{ .reg .pred p; setp.gt.s32 p, $2, 0; @p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
        constraints="=r,l,r", args=[ptr, nbytes], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _gdc_wait():
    """``griddepcontrol.wait`` (sm_90, PTX 7.8): blocks until the stream's previous grid has completed and its memory
    is visible (a no-op for a launch without programmatic dependent launch). Triton 3.6's
    ``tl.extra.cuda.gdc_wait`` spelled out, so that the file needs nothing newer."""
    tl.inline_asm_elementwise(asm="griddepcontrol.wait; // $0", constraints="=r", args=[], dtype=tl.int32,
                              is_pure=False, pack=1)


@triton.jit
def _gdc_launch_dependents():
    """``griddepcontrol.launch_dependents`` (sm_90): once every program of this grid has executed it (or exited), the
    stream's next grid, if launched with programmatic dependent launch, may start its programs."""
    tl.inline_asm_elementwise(asm="griddepcontrol.launch_dependents; // $0", constraints="=r", args=[],
                              dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _l2_discard(ptr, flag):
    """``discard.global.L2 [ptr], 128`` where ``flag`` is non-zero (``ptr`` 128-byte aligned, per element): the L2 line
    is invalidated without being written back to DRAM (sm_80, PTX 7.4); its contents become undefined."""
    tl.inline_asm_elementwise(
        asm="{ .reg .pred p; setp.ne.s32 p, $2, 0; @p discard.global.L2 [$1], 128; mov.u32 $0, 0; }",
        constraints="=r,l,r", args=[ptr, flag], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit(do_not_specialize=["epoch"])
def _link_kernel(idx_ptr, last_ptr, link_ptr, u_ptr, n, last_bytes, epoch, JB: tl.constexpr, BLOCK: tl.constexpr,
                 PF_BYTES: tl.constexpr, PF_THREADS: tl.constexpr, PDL: tl.constexpr):
    """Per lookup j of row r: swap this call's entry ``epoch << (JB + 1) | (j + 1)`` into ``last[r]`` (relaxed); if
    the displaced entry is this call's (an earlier lookup of r), ``link[j]`` = its ``j + 1`` (else 0) and r's repeat
    flag (bit JB) is set by a relaxed ``atomic_or`` on the same word (same thread, same address: after the swap, so
    the final entry of every row with two or more lookups carries it). A lookup that displaced no entry of this call
    is its row's first: the program adds its number of them to U (one atomic per program). First, each of the
    program's ``PF_THREADS`` threads prefetches ``PF_BYTES`` of ``last`` into L2 (its share of the whole array; no
    fill precedes this kernel, so without it every exchange would miss L2). ``PDL``: launched with programmatic
    dependent launch behind the zero fill: the program loads its lookups' rows (an input) first, lets the scan's
    programs be scheduled, and only then waits for the fill's zeros (:func:`_gdc_wait`)."""
    pid = tl.program_id(0)
    if PF_BYTES > 0:
        off = (pid * PF_THREADS + tl.arange(0, PF_THREADS)).to(tl.int64) * PF_BYTES
        size = (tl.minimum(tl.maximum(last_bytes - off, 0), PF_BYTES) & -16).to(tl.int32)
        _l2_prefetch(last_ptr + off // 4, size)
    j = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = j < n
    r = tl.load(idx_ptr + j, mask=m, other=0)
    if PDL:
        _gdc_launch_dependents()
        _gdc_wait()
    ety = last_ptr.dtype.element_ty
    tag = epoch.to(ety) << (JB + 1)
    prev = tl.atomic_xchg(last_ptr + r, tag | (j + 1).to(ety), mask=m, sem="relaxed")
    mine = (prev >> (JB + 1)) == epoch
    hit = m & mine
    tl.atomic_or(last_ptr + r, tl.full([BLOCK], 1, ety) << JB, mask=hit, sem="relaxed")
    low = (tl.full([BLOCK], 1, ety) << JB) - 1
    tl.store(link_ptr + j, tl.where(hit, prev & low, 0).to(tl.int32), mask=m)
    first = tl.sum((m & (mine == 0)).to(tl.int64), axis=0)
    tl.atomic_add(u_ptr, first, sem="relaxed")


@triton.jit
def _warp_counts(last_ptr, base, N, epoch, JB: tl.constexpr, W: tl.constexpr, NCH: tl.constexpr):
    """Touched rows (this call's ``last`` entries) per warp of scan block ``base``: warp w owns the ``NCH * 128``
    consecutive rows from ``base + w * NCH * 128`` and reads them as NCH loads of 128 words (a 16-byte vector per
    thread), unrolled (all in flight), counted per lane and summed within the warp. An entry is this call's iff it
    is at least ``epoch << (JB + 1)``: no entry of a later epoch exists (``last`` is zeroed when the epochs wrap)."""
    rw = tl.arange(0, W)[:, None] * (NCH * 128) + tl.arange(0, 128)[None, :]
    lo = epoch.to(last_ptr.dtype.element_ty) << (JB + 1)
    cnt = tl.zeros([W, 128], dtype=tl.int32)
    for k in tl.static_range(NCH):
        r = base + k * 128 + rw
        e = tl.load(last_ptr + r, mask=r < N, other=0)
        cnt += (e >= lo).to(tl.int32)
    return tl.sum(cnt, axis=1)


@triton.jit
def _block_prefix(status_ptr, last_ptr, t, N, epoch, JB: tl.constexpr, W: tl.constexpr, NCH: tl.constexpr,
                  WIN: tl.constexpr, MAX_SPIN: tl.constexpr):
    """The number of touched rows before scan block ``t``: the sum of the counts that blocks ``0 .. t - 1`` published
    (status word ``epoch << 32 | count``; a word of another epoch is unpublished), read ``WIN`` words per load. The
    grid is about one wave and a block publishes right after its own count, so the words are there or arrive within
    a few hundred ns; a word still missing after ``MAX_SPIN`` re-reads is not waited for (a block that is not
    resident yet, or a GPU that runs blocks out of order): its block is counted here from ``last``, so the look-back
    never depends on another program being scheduled."""
    prefix = t * 0
    ar = tl.arange(0, WIN)
    for lo in range(0, t, WIN):
        q = lo + ar
        inw = q < t
        st = tl.load(status_ptr + q, mask=inw, other=0, volatile=True)
        good = (st >> 32) == epoch
        miss = tl.sum((inw & (good == 0)).to(tl.int32), axis=0)
        spins = 0
        while (miss > 0) & (spins < MAX_SPIN):
            need = inw & (good == 0)
            st2 = tl.load(status_ptr + q, mask=need, other=0, volatile=True)
            new = need & ((st2 >> 32) == epoch)
            st = tl.where(new, st2, st)
            good = good | new
            miss = tl.sum((inw & (good == 0)).to(tl.int32), axis=0)
            spins += 1
        prefix += tl.sum(tl.where(inw & good, st & COUNT_MASK, 0), axis=0).to(tl.int32)
        if miss > 0:
            for i in range(0, WIN):
                if tl.sum((inw & (good == 0) & (ar == i)).to(tl.int32), axis=0) > 0:
                    # claim the block before reading its rows: the same word its publisher exchanges (see
                    # _scan_kernel: a block whose exchange returns the claim keeps its lines of ``last``)
                    old = tl.atomic_or(status_ptr + lo + i, (t * 0).to(tl.int64) + CLAIM, sem="relaxed")
                    if (old >> 32) == epoch:  # published meanwhile: its count, and its rows are not read
                        prefix += (old & COUNT_MASK).to(tl.int32)
                    else:
                        prefix += tl.sum(_warp_counts(last_ptr, (lo + i) * (W * NCH * 128), N, epoch, JB, W, NCH),
                                         axis=0)
    return prefix


@triton.jit(do_not_specialize=["epoch"])
def _scan_kernel(last_ptr, status_ptr, mom_ptr, rec_ptr, momc_ptr, u_next_ptr, grad_ptr, grad_bytes, N, epoch,
                 JB: tl.constexpr, W: tl.constexpr, NCH: tl.constexpr, WIN: tl.constexpr, MAX_SPIN: tl.constexpr,
                 PF: tl.constexpr, GPF: tl.constexpr, PDL: tl.constexpr, DISCARD: tl.constexpr):
    """Scan block ``pid`` = rows [pid * R, (pid + 1) * R), R = W * NCH * 128, warp w owning the NCH * 128 rows from
    w * NCH * 128 (:func:`_warp_counts`): count its touched rows, publish the count, add the earlier blocks' counts
    (:func:`_block_prefix`) and the earlier warps' counts, then each warp gives its touched rows the slots that follow
    in row order, 128 rows (a 16-byte vector per thread) at a time, with a cumsum within the warp (no barrier), and
    writes each slot's record: ``row << 32 | flag << JB | (j1 + 1)`` (the row, its repeat flag and its last lookup)
    and its state ``momentum[row]``. Block 0 also zeroes the U counter of the next call (the other one of the two).

    Before anything that depends on the link kernel (``PDL``: launched with programmatic dependent launch, so these
    programs start while the link kernel's last programs run), each thread prefetches ``PF`` bytes of the block's
    ``momentum`` and ``GPF`` bytes of ``grad_output`` (its share of the whole 4 MB, which the update kernel reads from
    L2) into L2, and the block lets the update kernel's programs be scheduled. The rows' second pass loads the next
    128 rows' ``last`` and state before the current rows' stores (one load round trip per block, not one per 128
    rows). ``DISCARD``: once its rows are read, the block drops its 128-byte lines of ``last`` from L2 without a
    write-back (the zero fill's and the exchanges' dirty lines would otherwise be written to DRAM, 4 bytes per table
    row, while the update kernel streams)."""
    pid = tl.program_id(0)
    base = pid * (W * NCH * 128)
    tid = tl.arange(0, W * 32)
    if PF > 0:
        off = base.to(tl.int64) * 4 + tid * PF
        size = (tl.minimum(tl.maximum(N.to(tl.int64) * 4 - off, 0), PF) & -16).to(tl.int32)
        _l2_prefetch(mom_ptr + off // 4, size)
    if GPF > 0:
        goff = (pid * (W * 32) + tid).to(tl.int64) * GPF
        gsize = (tl.minimum(tl.maximum(grad_bytes - goff, 0), GPF) & -16).to(tl.int32)
        _l2_prefetch(grad_ptr + goff // 4, gsize)
    if PDL:
        _gdc_launch_dependents()
        _gdc_wait()
    wc = _warp_counts(last_ptr, base, N, epoch, JB, W, NCH)
    cnt = tl.sum(wc, axis=0)
    # publish: thread 0 ORs the count into the block's status word (zeroed by the fill; a look-back that gave up on
    # this block may have ORed CLAIM into it, :func:`_block_prefix`, and the OR keeps that bit), then thread 0 loads
    # the word back. The load follows the OR in thread 0's program order at the same address, so it reads the OR's
    # value or a later one: CLAIM set there iff a claim came before it. Both are fire-and-forget until the discard
    # uses the loaded word (one-lane vector operations: a scalar atomic's result would be broadcast at once through
    # shared memory, a barrier waiting for the round trip)
    pub = (epoch.to(tl.int64) << 32) | cnt.to(tl.int64)
    one = tid == 0
    tl.atomic_or(status_ptr + pid + tid * 0, pub + tid.to(tl.int64) * 0, mask=one, sem="relaxed")
    if DISCARD:
        mine = tl.load(status_ptr + pid + tid * 0, mask=one, other=0, volatile=True)
    if pid == 0:
        tl.store(u_next_ptr, cnt.to(tl.int64) * 0)
    prefix = _block_prefix(status_ptr, last_ptr, pid, N, epoch, JB, W, NCH, WIN, MAX_SPIN)
    woff = prefix + tl.cumsum(wc, axis=0) - wc  # first slot of each warp's rows
    rw = tl.arange(0, W)[:, None] * (NCH * 128) + tl.arange(0, 128)[None, :]
    keep = (2 << JB) - 1  # j + 1 of the row's last lookup and the repeat flag
    lo = epoch.to(last_ptr.dtype.element_ty) << (JB + 1)
    r = base + rw
    rm = r < N
    e = tl.load(last_ptr + r, mask=rm, other=0)
    mom = tl.load(mom_ptr + r, mask=rm, other=0.0)
    for k in tl.static_range(NCH):
        if k + 1 < NCH:  # the next 128 rows' loads go out before this step's stores
            r_n = base + (k + 1) * 128 + rw
            rm_n = r_n < N
            e_n = tl.load(last_ptr + r_n, mask=rm_n, other=0)
            mom_n = tl.load(mom_ptr + r_n, mask=rm_n, other=0.0)
        ti = (e >= lo).to(tl.int32)
        slot = woff[:, None] + tl.cumsum(ti, axis=1) - ti
        hit = ti != 0
        tl.store(rec_ptr + slot, (r.to(tl.int64) << 32) | (e & keep).to(tl.int64), mask=hit)
        tl.store(momc_ptr + slot, mom, mask=hit)
        woff += tl.sum(ti, axis=1)
        if k + 1 < NCH:
            r, e, mom = r_n, e_n, mom_n
    if DISCARD:
        # every thread's loads of the block's rows have returned (their values were used above); then each 128-byte
        # line of ``last`` that lies wholly in this block's rows (``last`` is 128-byte aligned) is discarded
        tl.debug_barrier()
        # thread 0's word read back after its own publish: this call's, and without CLAIM (else no discard)
        claimed = tl.sum(tl.where(one & (((mine & CLAIM) != 0) | ((mine >> 32) != epoch)), 1, 0), axis=0) != 0
        for q in tl.static_range((NCH + 7) // 8):
            line = q * (W * 32) + tid
            first = base + line * 32  # the line's first row
            ok = (line < NCH * W * 4) & (first + 32 <= N) & (claimed == 0)
            _l2_discard(last_ptr + first, ok.to(tl.int32))


@triton.jit
def _store_rows(w, acc, mom, s, keep, row, rows_out, w_out, mom_out, lr, eps, d, dm, D: tl.constexpr):
    """``m' = m + mean(g^2)``, ``w' = w - g * (lr / (sqrt(m') + eps))``, stored at the chunk's slots ``s`` (rows
    ``keep``) with their row ids; the updated rows as streaming stores (evict-first)."""
    new_mom = mom + tl.sum(acc * acc, axis=1) / D
    step = lr / (tl.sqrt(new_mom) + eps)
    tl.store(mom_out + s, new_mom, mask=keep)
    tl.store(rows_out + s, row, mask=keep)
    tl.store(w_out + s.to(tl.int64)[:, None] * D + d[None, :], w - acc * step[:, None],
             mask=keep[:, None] & dm[None, :], cache_modifier=".cs")


@triton.jit
def _walk_rest(acc, nxt, link_ptr, grad_ptr, d, dm, D: tl.constexpr, BAG: tl.constexpr):
    """Adds the ``grad_output`` rows of the rest of each row's list from ``nxt`` (``j + 1`` of its next lookup, 0:
    none) to ``acc``; the loop runs only while a row of the chunk has lookups left."""
    cont = nxt != 0
    while tl.max(cont.to(tl.int32), axis=0) > 0:
        jn = tl.where(cont, nxt - 1, 0)
        acc += tl.load(grad_ptr + (jn // BAG)[:, None] * D + d[None, :], mask=cont[:, None] & dm[None, :],
                       other=0.0, eviction_policy="evict_last").to(tl.float32)
        nxt = tl.load(link_ptr + jn, mask=cont, other=0)
        cont = nxt != 0
    return acc


@triton.autotune(configs=_UPDATE_CONFIGS, key=["D", "BAG", "JB"], do_bench=_bench)
@triton.jit
def _update_kernel(rec_ptr, momc_ptr, u_ptr, link_ptr, grad_ptr, w_ptr, rows_out, w_out, mom_out, deep_ptr, lr, eps,
                   D: tl.constexpr, BAG: tl.constexpr, JB: tl.constexpr, BLOCK_D: tl.constexpr,
                   BLOCK_P: tl.constexpr, PROGS: tl.constexpr, STAGES: tl.constexpr, STAGED: tl.constexpr,
                   PDL: tl.constexpr):
    """Program p updates the output slots of chunks p, p + G, p + 2G, ... (G programs, ``BLOCK_P`` slots a chunk, up
    to U) from the slot records the scan wrote (row, repeat flag and last lookup; state).

    ``STAGES`` = 0: registers only, and no load of a chunk waits on another load of the same chunk: its records were
    loaded two chunks earlier and the second-to-last lookups of its repeated rows (``link`` at the last lookup) one
    chunk earlier, so the table rows (DRAM, evict-first), the state, the ``grad_output`` rows of both lookups (L2:
    4 MB, evict-last; the second masked to the 10 % of rows that have one) and the third-lookup test go out
    together, followed by the next chunk's links and the records two chunks ahead. Rows with three or more lookups
    (0.6 % of the touched rows) walk the rest of their list in a loop that runs only when the chunk has one.
    ``STAGES`` >= 2: Triton's software pipeliner (``tl.range``) copies the records, then the table rows, the state
    and the links of the next ``STAGES - 1`` chunks to shared memory (``cp.async``) while the current chunk runs;
    the ``grad_output`` rows (L2) are loaded in the chunk's own iteration, inside an ``if`` the pipeliner does not
    enter. A loop inside the pipelined loop would stop the pipelining, so rows with three or more lookups are not
    stored there: their slots go to the program's own list (in ``deep``: entry k at chunk p + (k // BLOCK_P) G's
    slots, which only this program uses) and are redone with a full list walk after the loop. ``PDL``: launched with
    programmatic dependent launch, the programs are scheduled as the scan's programs exit and wait for the scan's end
    (:func:`_gdc_wait`) before any load."""
    pid = tl.program_id(0)
    G = tl.num_programs(0)
    if PDL:
        _gdc_wait()
    u = tl.load(u_ptr).to(tl.int32)
    nch = tl.cdiv(u, BLOCK_P)
    ar = tl.arange(0, BLOCK_P)
    d = tl.arange(0, BLOCK_D)
    dm = d < D
    low = (1 << JB) - 1
    if STAGES == 0:
        s = pid * BLOCK_P + ar
        rec_a = tl.load(rec_ptr + s, mask=s < u, other=1)
        s = s + G * BLOCK_P
        rec_b = tl.load(rec_ptr + s, mask=s < u, other=1)
        l_a = tl.load(link_ptr + ((rec_a & low).to(tl.int32) - 1), mask=((rec_a >> JB) & 1) != 0, other=0)
        for c in range(pid, nch, G):
            s = c * BLOCK_P + ar
            valid = s < u
            row = rec_a >> 32
            j1 = (rec_a & low).to(tl.int32) - 1
            two = l_a != 0
            j2 = tl.where(two, l_a - 1, 0)
            w = tl.load(w_ptr + row[:, None] * D + d[None, :], mask=valid[:, None] & dm[None, :], other=0.0,
                        eviction_policy="evict_first")
            mom = tl.load(momc_ptr + s, mask=valid, other=0.0)
            g1 = tl.load(grad_ptr + (j1 // BAG)[:, None] * D + d[None, :], mask=valid[:, None] & dm[None, :],
                         other=0.0, eviction_policy="evict_last")
            g2 = tl.load(grad_ptr + (j2 // BAG)[:, None] * D + d[None, :], mask=two[:, None] & dm[None, :],
                         other=0.0, eviction_policy="evict_last")
            nxt = tl.load(link_ptr + j2, mask=two, other=0)
            l_b = tl.load(link_ptr + ((rec_b & low).to(tl.int32) - 1), mask=((rec_b >> JB) & 1) != 0, other=0)
            s2 = s + 2 * G * BLOCK_P
            rec_c = tl.load(rec_ptr + s2, mask=s2 < u, other=1)
            acc = _walk_rest(g1.to(tl.float32) + g2.to(tl.float32), nxt, link_ptr, grad_ptr, d, dm, D, BAG)
            _store_rows(w, acc, mom, s, valid, row, rows_out, w_out, mom_out, lr, eps, d, dm, D)
            rec_a, l_a, rec_b = rec_b, l_b, rec_c
    else:
        n_deep = 0
        for c in tl.range(pid, nch, G, num_stages=STAGES):
            s = c * BLOCK_P + ar
            valid = s < u
            rec = tl.load(rec_ptr + s, mask=valid, other=1)
            row = rec >> 32
            j1 = (rec & low).to(tl.int32) - 1
            w = tl.load(w_ptr + row[:, None] * D + d[None, :], mask=valid[:, None] & dm[None, :], other=0.0,
                        eviction_policy="evict_first")
            mom = tl.load(momc_ptr + s, mask=valid, other=0.0)
            l1 = tl.load(link_ptr + j1, mask=((rec >> JB) & 1) != 0, other=0)
            two = l1 != 0
            j2 = tl.where(two, l1 - 1, 0)
            if STAGED:
                # grad_output rows and the third-lookup test staged through shared memory too (a stage later)
                acc = tl.load(grad_ptr + (j1 // BAG)[:, None] * D + d[None, :], mask=valid[:, None] & dm[None, :],
                              other=0.0).to(tl.float32)
                acc += tl.load(grad_ptr + (j2 // BAG)[:, None] * D + d[None, :], mask=two[:, None] & dm[None, :],
                               other=0.0).to(tl.float32)
                deep = tl.load(link_ptr + j2, mask=two, other=0) != 0
            else:
                acc = tl.zeros([BLOCK_P, BLOCK_D], dtype=tl.float32)
                deep = l1 < 0
                if u > 0:  # (always) grad_output rows from L2 in this iteration: not staged through shared memory
                    acc = tl.load(grad_ptr + (j1 // BAG)[:, None] * D + d[None, :],
                                  mask=valid[:, None] & dm[None, :], other=0.0,
                                  eviction_policy="evict_last").to(tl.float32)
                    acc += tl.load(grad_ptr + (j2 // BAG)[:, None] * D + d[None, :],
                                   mask=two[:, None] & dm[None, :], other=0.0,
                                   eviction_policy="evict_last").to(tl.float32)
                    deep = tl.load(link_ptr + j2, mask=two, other=0) != 0
            _store_rows(w, acc, mom, s, valid & (deep == 0), row, rows_out, w_out, mom_out, lr, eps, d, dm, D)
            di = deep.to(tl.int32)
            nd = tl.sum(di, axis=0)
            if nd > 0:
                pos = n_deep + tl.cumsum(di, axis=0) - di
                tl.store(deep_ptr + (pid + (pos // BLOCK_P) * G) * BLOCK_P + pos % BLOCK_P, s, mask=deep)
                n_deep += nd
        if n_deep > 0:
            tl.debug_barrier()  # the list was stored by other threads of this program
            for k0 in range(0, n_deep, BLOCK_P):
                km = k0 + ar < n_deep
                s = tl.load(deep_ptr + (pid + (k0 // BLOCK_P) * G) * BLOCK_P + ar, mask=km, other=0)
                rec = tl.load(rec_ptr + s, mask=km, other=1)
                row = rec >> 32
                j1 = (rec & low).to(tl.int32) - 1
                w = tl.load(w_ptr + row[:, None] * D + d[None, :], mask=km[:, None] & dm[None, :], other=0.0)
                mom = tl.load(momc_ptr + s, mask=km, other=0.0)
                acc = tl.load(grad_ptr + (j1 // BAG)[:, None] * D + d[None, :], mask=km[:, None] & dm[None, :],
                              other=0.0).to(tl.float32)
                nxt = tl.load(link_ptr + j1, mask=km, other=0)
                acc = _walk_rest(acc, nxt, link_ptr, grad_ptr, d, dm, D, BAG)
                _store_rows(w, acc, mom, s, km, row, rows_out, w_out, mom_out, lr, eps, d, dm, D)


class ModelNew(nn.Module):
    """Same interface as the problem's ``Model``: (indices, grad_output, weight, momentum) -> (rows, new rows, new
    state); the inputs are only read. Forward: one zero fill and three Triton launches, and one wait for U that ends
    before the last kernel does. ``LINK_BLOCK`` lookups per link program; ``SCAN_WARPS`` warps of ``NCH * 128``
    rows per scan block, ``WIN`` status words per look-back load (class attributes, so tests can shrink them)."""

    LINK_BLOCK = 1024
    LINK_WARPS = 4
    SCAN_WARPS = 8
    #: scan programs per SM that fit at once (sm_90 registers, in the module docstring): the scan grid is one wave
    SCAN_PROGS = 4
    #: most unrolled chunk loads per scan block (above: more blocks than one wave)
    SCAN_MAX_NCH = 16
    WIN = 512
    #: the one epoch of every call (``last`` and the status words are zeroed per call)
    EPOCH = 1
    #: programmatic dependent launch of the three Triton kernels (sm_90); the scan's discard of ``last``'s L2 lines
    USE_PDL = True
    USE_DISCARD = True

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.lr = 0.005
        self.eps = 1e-8
        self._scratch = {}
        self._sms = {}

    def _num_sms(self, dev):
        key = str(dev)
        if key not in self._sms:
            self._sms[key] = (torch.cuda.get_device_properties(dev).multi_processor_count if dev.type == "cuda"
                              else 4)
        return self._sms[key]

    def _scratch_for(self, dev, n_rows: int, n: int):
        """Scratch for (device, rows, lookups) that every call overwrites before reading it: ``link`` (one int32 per
        lookup), ``rec``, ``momc`` and ``deep`` (per output slot), and on a GPU a pinned host word, a side stream and
        two events for U."""
        key = (str(dev), n_rows, n)
        st = self._scratch.get(key)
        if st is None:
            cap = min(n, n_rows)
            st = {"link": torch.empty(n, dtype=torch.int32, device=dev),
                  "rec": torch.empty(cap, dtype=torch.int64, device=dev),
                  "momc": torch.empty(cap, dtype=torch.float32, device=dev),
                  "deep": torch.empty(cap + 64, dtype=torch.int32, device=dev)}
            if dev.type == "cuda":
                st["host"] = torch.zeros(2, dtype=torch.int64, pin_memory=True)
                st["stream"] = torch.cuda.Stream(device=dev)
                st["done"], st["copied"] = torch.cuda.Event(), torch.cuda.Event()
            self._scratch[key] = st
        return st

    def forward(self, indices: torch.Tensor, grad_output: torch.Tensor, weight: torch.Tensor,
                momentum: torch.Tensor):
        batch, bag = indices.shape
        n_rows, dim = weight.shape
        n = batch * bag
        cap = min(n, n_rows)
        if (n_rows + 128 * self.SCAN_WARPS * self.SCAN_MAX_NCH >= 2**31 or n >= 2**29 or cap * max(dim, 1) >= 2**31
                or batch * max(dim, 1) >= 2**31):
            raise ValueError("this kernel indexes rows, lookups and output elements with int32")
        dev = weight.device
        rows = torch.empty(cap, dtype=torch.int64, device=dev)
        new_weight = torch.empty(cap, dim, dtype=weight.dtype, device=dev)
        new_momentum = torch.empty(cap, dtype=momentum.dtype, device=dev)
        if cap == 0:
            return rows, new_weight, new_momentum
        weight, momentum, grad_output = weight.contiguous(), momentum.contiguous(), grad_output.contiguous()
        idx = indices if indices.is_contiguous() else indices.contiguous()
        n_sm = self._num_sms(dev)
        chunks = triton.cdiv(n_rows, 128 * self.SCAN_WARPS)  # rows a scan block reads per load
        nch = min(self.SCAN_MAX_NCH, triton.cdiv(chunks, n_sm * self.SCAN_PROGS))
        n_scan = triton.cdiv(chunks, nch)
        st = self._scratch_for(dev, n_rows, n)
        link, jb = st["link"], max(1, n.bit_length())
        # one zero fill: [U | unused (zeroed by the scan) | status words | padding | last (int32 per row)]; the fill
        # leaves ``last`` in L2 for the link kernel's exchanges; ``last`` starts on a 128-byte line
        # boundary (the caching allocator's blocks are 512-byte aligned), so the scan can discard its lines
        hdr = triton.cdiv(4 + n_scan, 16) * 16
        buf = torch.zeros(hdr + (n_rows + 1) // 2, dtype=torch.int64, device=dev)
        u, u_spare, status = buf[0:1], buf[2:3], buf[4:4 + n_scan]
        last = buf[hdr:].view(torch.int32)[:n_rows]
        cuda = dev.type == "cuda"
        gpu = cuda and not _INTERPRET
        # programmatic dependent launch (sm_90): each Triton kernel's programs are scheduled while the previous
        # kernel's last programs run, and wait for its end in the kernel (:func:`_gdc_wait`)
        sm90 = gpu and torch.cuda.get_device_capability(dev)[0] >= 9
        pdl = sm90 and self.USE_PDL
        lk = {"launch_pdl": True} if pdl else {}
        _launch(_link_kernel, None, (triton.cdiv(n, self.LINK_BLOCK),), idx, last, link, u, n, 0, self.EPOCH,
                JB=jb, BLOCK=self.LINK_BLOCK, PF_BYTES=0, PF_THREADS=32 * self.LINK_WARPS, PDL=pdl,
                num_warps=self.LINK_WARPS, **lk)
        # the scan's L2 prefetches (16-byte aligned bulk copies): its block's state, and its share of grad_output
        threads = 32 * self.SCAN_WARPS
        pf = nch * 16 if sm90 and momentum.data_ptr() % 16 == 0 else 0
        grad_bytes = grad_output.numel() * grad_output.element_size()
        gpf = (triton.cdiv(triton.cdiv(grad_bytes, n_scan * threads), 16) * 16
               if sm90 and grad_output.data_ptr() % 16 == 0 else 0)
        discard = gpu and self.USE_DISCARD and last.data_ptr() % 128 == 0
        # a register cap that keeps SCAN_PROGS scan programs per SM (one wave): 64 at 8 warps, no spills under
        # Triton 3.6 (79 uncapped: 3 programs per SM, 396 < 489 blocks, a second wave)
        sk = {"maxnreg": 65536 // (self.SCAN_PROGS * 32 * self.SCAN_WARPS)} if gpu else {}
        _launch(_scan_kernel, None, (n_scan,), last, status, momentum, st["rec"], st["momc"], u_spare, grad_output,
                grad_bytes, n_rows, self.EPOCH, JB=jb, W=self.SCAN_WARPS, NCH=nch, WIN=self.WIN, MAX_SPIN=MAX_SPINS,
                PF=pf, GPF=gpf, PDL=pdl, DISCARD=discard, num_warps=self.SCAN_WARPS, **lk, **sk)
        if cuda:  # U is final when the link kernel ends; the event follows the scan's launch, so that nothing stands
            # between the link and scan launches (programmatic dependent launch); its copy is enqueued after the update
            st["done"].record(torch.cuda.current_stream(dev))
        block_d = triton.next_power_of_2(dim)
        _launch(_update_kernel, (dim, bag, jb, weight.dtype, dev, pdl),
                lambda meta: (min(triton.cdiv(cap, meta["BLOCK_P"]), n_sm * meta["PROGS"]),),
                st["rec"], st["momc"], u, link, grad_output, weight, rows, new_weight, new_momentum, st["deep"],
                self.lr, self.eps, D=dim, BAG=bag, JB=jb, BLOCK_D=block_d, PDL=pdl, **lk)
        # the one host synchronisation, after every launch: U is copied on a side stream that waits for the scan
        # kernel only, so the wait ends long before the update kernel, which keeps running; the outputs are views of
        # buffers the current stream writes
        if cuda:
            side = st["stream"]
            side.wait_event(st["done"])
            with torch.cuda.stream(side):
                st["host"][:1].copy_(u, non_blocking=True)
                st["copied"].record(side)
            st["copied"].synchronize()
            n_out = int(st["host"][0])
        else:
            n_out = int(u.item())
        return rows[:n_out], new_weight[:n_out], new_momentum[:n_out]
