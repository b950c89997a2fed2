"""kbstudy-triton candidate for DLRM-Bench problem 12 (256 -> 1 head, sigmoid, BCE mean loss, forward + backward).

Variant s14-a: one launch, one fat program per SM whose warps stream h independently (no barrier, no shared memory and
no layout conversion in the main loop), two row-steps ahead in registers, and a one-round-trip tail: the programs'
dL/dw, dL/db and loss are added into a small scratch array in L2 and the last program to arrive copies it out.

**One launch**, h read once and dL/dh written once (the compulsory traffic):

* ``W`` warps per program, ``PPS`` programs per SM (grid ``PPS x SMs``, registers capped by ``maxnreg`` so all are
  resident: one wave). Every warp of the grid owns, at each step, a *unit* of ``R`` consecutive rows: unit
  ``k * NWG + w * P + p`` for warp ``w`` of program ``p`` at step ``k`` (``NWG = P x W``): the grid walks h in
  order, every warp does the same number of units to within one (R rows), and every SM has warps on the last units
  (the session-13 kernel gave whole 16-32-row tiles to programs, so a quarter of them idled through the last round).
* A step's tile is ``[W, R, NCH, CW]`` (row ``R * unit + s``, column ``c * CW + j``, CW = 64): the 32 lanes on j
  with two columns each, the warps on W, R and NCH in registers (Triton 3.6's layout, checked in the TTGIR). A
  row's logit ``x = h w + b`` is a reduction inside one thread and one warp's shuffles; ``g = (sigmoid(x) - y) / B``
  and the loss ``max(x, 0) - x y + log(1 + e)`` from one ``e = exp(-|x|)`` (no overflow); dL/dw accumulates in
  the thread (``[W, NCH, CW]``, 8 registers); ``dL/dh = g w`` is stored from the same registers.
* **One register layout for loads, math and stores.** dL/dh starts at element ``2 + F`` = 258, 8 bytes past a
  16-byte boundary, so its stores can be 8-byte vectors at most, and Triton's coalescing gives the store a 2-column
  layout. The session-13 kernel loaded h as 16-byte vectors and converted ``g`` to the store's layout through shared
  memory, a barrier pair per tile that made the program's warps wait for each other. Here a contiguity hint
  (``tl.max_contiguous(..., 2)``) gives h's loads the same 2-column layout: 8-byte loads (the same 128-byte lines
  and sectors per byte, twice the instructions, far below the issue rate), and the loop has no ``BAR``, ``STS`` or
  ``LDS`` (SASS below).
* **Two steps ahead.** Each step issues the loads (h, labels) of the step after next, so a warp always has one to two
  units in flight whatever point of the step ptxas issues them at (Triton 3.6 places them after the current step's
  shuffles); the first two steps' loads are the first instructions of the program.
* **Tail: one round trip.** After its loop a program sums its warps' dL/dw (one shared-memory reduction per call),
  adds it, its dL/db and its loss into copy ``p % 8`` of an [8, F + 2] fp32 scratch array with relaxed fp32
  atomics (``RED``: 16-33 adds per address), then a barrier and an acq_rel counter increment; the last program to
  arrive reads the 8 copies at the L2 (one atomic add of zero per word, all in flight at once), adds them up,
  writes loss, dL/dw and dL/db, and leaves the copies and the counter at zero for the next call. No partials
  buffer, no group level, no loop over partial rows: the session-13 tail (a fence and atomic, a 16-row sum, a second
  fence and atomic, then 33 group rows in three dependent 16-row loads) was six or more dependent L2 round trips
  after the last tile. The fp32 summation order of dL/dw, dL/db and the loss is the
  atomics' order (not deterministic bit for bit; 132-264 partials of 250-500 rows, far inside the fp32 tolerances).

Why it should approach the floor (134.5 MB of compulsory traffic, 31.6 us at 4266 GB/s): at the floor each SM reads
16 KB/us; the configs keep 32-64 KB of h in flight per SM during the whole loop (two steps ahead), i.e. 2-4 us of
latency cover. Configs (Triton 3.6, sm_90, ``cuobjdump -res-usage``, no spills; main loop SASS: 8-byte ``LDG.E.EF``
and ``STG.E.64``, ``SHFL.BFLY``, two ``MUFU`` per row, no barrier):

| W x R, PPS | warps per SM | registers (cap) | h in flight per SM | shared memory (tail only) |
| --- | --- | --- | --- | --- |
| 16 x 2, 1 | 16 | 124 (128) | 32-64 KB | 16 KB |
| 8 x 2, 2 | 16 | 118 (128) | 32-64 KB | 8 KB |
| 16 x 1, 2 | 32 | 64 (64) | 32-64 KB | 16 KB |
| 32 x 1, 1 | 32 | 64 (64) | 32-64 KB | 32 KB |

Only the last program's tail is on the critical path: its own stores' acknowledgement (the release fence), the
counter atomic, one round of atomic reads (8 x (F + 2) words) and a 1 KB store, against the session-13 chain above
(estimated 2-3 us saved). h is loaded evict-first (L2 and L1), so the L2 keeps dL/dh's lines, whose first and
last 32-byte sectors per warp store are completed by the neighbouring stores of the same warp or unit.
``triton.autotune`` picks the config on the GPU (one under ``TRITON_INTERPRET=1``).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: W warps per program, each warp R rows per step, two steps ahead; PPS programs per SM, all resident: maxnreg caps
#: the registers at 65536 / (PPS x 32 x W) (counts in the docstring: Triton 3.6, sm_90, no spills)
_CONFIGS = [
    triton.Config({"W": 16, "R": 2, "PPS": 1}, num_warps=16, num_stages=1, maxnreg=128),
    triton.Config({"W": 8, "R": 2, "PPS": 2}, num_warps=8, num_stages=1, maxnreg=128),
    triton.Config({"W": 16, "R": 1, "PPS": 2}, num_warps=16, num_stages=1, maxnreg=64),
    triton.Config({"W": 32, "R": 1, "PPS": 1}, num_warps=32, num_stages=1, maxnreg=64),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"W": 2, "R": 2, "PPS": 2}, num_warps=2, num_stages=1)]


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
def _tile_mask(lrow4, col4, left, F: tl.constexpr, BLOCK_F: tl.constexpr):
    """Rows below ``left`` (and columns below F when F is not a power of two: no column term otherwise, so the mask
    stays constant along a thread's vector)."""
    if F == BLOCK_F:
        m = lrow4 < left
    else:
        m = (lrow4 < left) & (col4 < F)
    return m


@triton.autotune(configs=_CONFIGS, key=["B", "F"], do_bench=_bench)
@triton.jit
def _bce_head_kernel(h_ptr, y_ptr, w_ptr, b_ptr, out_ptr, acc_ptr, count_ptr, B, inv_b,
                     F: tl.constexpr, BLOCK_F: tl.constexpr, CW: tl.constexpr, W: tl.constexpr, R: tl.constexpr,
                     PPS: tl.constexpr, BLOCK_S: tl.constexpr, NCOPY: tl.constexpr):
    # PPS (programs per SM) only sizes the grid (ModelNew.forward); W is the config's num_warps; F is a constexpr
    p = tl.program_id(0)
    P = tl.num_programs(0)
    NCH: tl.constexpr = BLOCK_F // CW
    NWG = P * W
    # warp w of program p owns, at iteration k, the unit of R rows k * NWG + w * P + p: R contiguous rows per warp,
    # the grid's units in order, a program's warps P units apart (every program has a warp on the last units)
    n_units = tl.cdiv(B, R)
    n_iter = tl.cdiv(n_units - p, NWG)
    lrow = (tl.arange(0, W)[:, None] * P + p) * R + tl.arange(0, R)[None, :]  # [W, R], rows past the first unit's
    lrow4 = lrow[:, :, None, None]
    col2 = tl.arange(0, NCH)[:, None] * CW + tl.arange(0, CW)[None, :]  # [NCH, CW]: lanes on CW, 2 columns each
    col4 = col2[None, None, :, :]
    # one offset tensor for h and dL/dh; its 2-element contiguity hint gives h's loads the 8-byte vectors of dL/dh's
    # stores (dL/dh starts 8 bytes past a 16-byte boundary), so loads, math and stores share one register layout
    offs = tl.max_contiguous(lrow4 * F + col4, [1, 1, 1, 2])
    STEP = NWG * R  # rows per iteration, whole grid
    # two tiles ahead: the loads of iterations 0 and 1 before anything else
    base = tl.cast(0, tl.int64)
    left = tl.minimum(B - base, STEP).to(tl.int32)
    h_a = tl.load(h_ptr + base * F + offs, mask=_tile_mask(lrow4, col4, left, F, BLOCK_F), other=0.0,
                  eviction_policy="evict_first")
    y_a = tl.load(y_ptr + base + lrow, mask=lrow < left, other=0.0)
    left = tl.minimum(B - (base + STEP), STEP).to(tl.int32)
    h_b = tl.load(h_ptr + (base + STEP) * F + offs, mask=_tile_mask(lrow4, col4, left, F, BLOCK_F), other=0.0,
                  eviction_policy="evict_first")
    y_b = tl.load(y_ptr + (base + STEP) + lrow, mask=lrow < left, other=0.0)
    w4 = tl.load(w_ptr + col4, mask=col4 < F, other=0.0)
    bias = tl.load(b_ptr)
    dh_ptr = out_ptr + 2 + F
    acc = tl.zeros([W, NCH, CW], dtype=tl.float32)
    gsum = tl.zeros([W, R], dtype=tl.float32)
    lsum = tl.zeros([W, R], dtype=tl.float32)
    for k in range(n_iter):
        h = h_a
        y = y_a
        h_a = h_b
        y_a = y_b
        left = tl.minimum(B - base, STEP).to(tl.int32)
        nbase = base + 2 * STEP
        nleft = tl.minimum(B - nbase, STEP).to(tl.int32)
        h_b = tl.load(h_ptr + nbase * F + offs, mask=_tile_mask(lrow4, col4, nleft, F, BLOCK_F), other=0.0,
                      eviction_policy="evict_first")
        y_b = tl.load(y_ptr + nbase + lrow, mask=lrow < nleft, other=0.0)
        x = tl.sum(tl.sum(h * w4, axis=3), axis=2) + bias  # [W, R]: in-thread, then one warp's shuffles
        # one exp per row: e = exp(-|x|) gives both the loss's log(1 + e) and sigmoid(x) (no overflow for x << 0)
        e = tl.exp(-tl.abs(x))
        rmask = lrow < left
        loss = tl.maximum(x, 0.0) - x * y + tl.log(1.0 + e)
        g = (tl.where(x >= 0, 1.0, e) / (1.0 + e) - y) * inv_b
        g = tl.where(rmask, g, 0.0)
        g4 = g[:, :, None, None]
        acc += tl.sum(g4 * h, axis=1)
        tl.store(dh_ptr + base * F + offs, g4 * w4, mask=_tile_mask(lrow4, col4, left, F, BLOCK_F))
        gsum += g
        lsum += tl.where(rmask, loss, 0.0)
        base += STEP
    # this program's dL/dw, dL/db and loss (the only cross-warp step), added into [F + 2] scratch sums in L2
    # (copy p % NCOPY of the sums: P / NCOPY additions per address)
    sums = acc_ptr + (p % NCOPY) * (F + 2)
    col1 = tl.arange(0, NCH)[:, None] * CW + tl.arange(0, CW)[None, :]
    tl.atomic_add(sums + col1, tl.sum(acc, axis=0), mask=col1 < F, sem="relaxed", scope="gpu")
    two = tl.arange(0, 2)
    gs = tl.sum(tl.sum(gsum, axis=1), axis=0)
    ls = tl.sum(tl.sum(lsum, axis=1), axis=0) * inv_b
    tl.atomic_add(sums + F + two, tl.where(two == 0, gs, ls), sem="relaxed", scope="gpu")
    # every thread's additions precede the counter increment (barrier + release); the last program's exchanges
    # follow it (acquire): it reads the sums, leaves zeros, writes loss, dL/dw and dL/db and resets the counter
    tl.debug_barrier()
    arrived = tl.atomic_add(count_ptr, 1, sem="acq_rel", scope="gpu")
    if arrived == P - 1:
        i = tl.arange(0, BLOCK_S)
        cp = acc_ptr + tl.arange(0, NCOPY)[:, None] * (F + 2) + i[None, :]
        cmask = (i < F + 2)[None, :]
        # read the copies at L2 (an atomic add of zero returns them), zero them for the next call, add them up
        v = tl.atomic_add(cp, tl.zeros([NCOPY, BLOCK_S], dtype=tl.float32), mask=cmask, sem="relaxed", scope="gpu")
        tl.store(cp, tl.zeros([NCOPY, BLOCK_S], dtype=tl.float32), mask=cmask)
        # sums [dL/dw, dL/db, loss] -> out [loss, dL/dw, dL/db]
        tl.store(out_ptr + tl.where(i == F + 1, 0, i + 1), tl.sum(tl.where(cmask, v, 0.0), axis=0), mask=i < F + 2)
        tl.atomic_xchg(count_ptr, 0, sem="relaxed", scope="gpu")


class ModelNew(nn.Module):
    """Same parameters as the problem's ``Model`` (``head`` = ``nn.Linear(in_features, 1)``); one Triton launch."""

    #: programs per SM; None: the autotuned config's (a number here overrides it, as the edge tests do)
    PROGRAMS_PER_SM = None

    def __init__(self, in_features: int):
        super().__init__()
        self.head = nn.Linear(in_features, 1)
        self._scratch = {}

    #: copies of the [F + 2] sums (program p adds into copy p % NCOPY; the last program adds them up)
    NCOPY = 8

    def _scratch_for(self, device, width: int):
        """(counter, sums, SMs) for ``device``: an int32 arrival counter and fp32 [NCOPY, width] sums (dL/dw, dL/db,
        loss), zero between calls (the last program of every call reads them and leaves zeros); allocated once."""
        key = (str(device), width)
        entry = self._scratch.get(key)
        if entry is None:
            sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 2
            entry = (torch.zeros(1, dtype=torch.int32, device=device),
                     torch.zeros(self.NCOPY, width, dtype=torch.float32, device=device), sms)
            self._scratch[key] = entry
        return entry

    def forward(self, h: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        h = h.detach().contiguous()
        batch, feat = h.shape
        w = self.head.weight.detach().reshape(-1)
        b = self.head.bias.detach()
        out = torch.empty(2 + feat + batch * feat, device=h.device, dtype=h.dtype)
        counter, sums, sms = self._scratch_for(h.device, feat + 2)
        pps = self.PROGRAMS_PER_SM

        def grid(meta):
            n_units = triton.cdiv(batch, meta["R"])
            return (max(1, min(triton.cdiv(n_units, meta["W"]), (pps or meta["PPS"]) * sms)),)

        key = (batch, feat, h.dtype, h.device)
        block_f = triton.next_power_of_2(feat)
        _launch(_bce_head_kernel, key, grid, h, labels.contiguous(), w, b, out, sums, counter, batch, 1.0 / batch,
                F=feat, BLOCK_F=block_f, CW=min(64, block_f), BLOCK_S=triton.next_power_of_2(feat + 2),
                NCOPY=self.NCOPY)
        return out
