"""kbstudy-triton candidate for DLRM-Bench problem 12 (256 -> 1 head, sigmoid, BCE mean loss, forward + backward).

Variant s15-a: session 14's ``s14-a`` (one launch, warps streaming h independently two row-steps ahead, a one-round-trip
tail), which had 6-8 % less device time than the shipped kernel, plus two changes aimed at its remaining gap to a copy
of the same bytes (34.9 us): **dL/dh on a 128-byte boundary** (16-byte vectors in whole sectors for both streams) and an
optional **L2 bulk prefetch** of h further ahead than the registers can hold (the autotuner chooses it or not).

**One launch**, h read once and dL/dh written once (the compulsory traffic):

* ``W`` warps per program, ``PPS`` programs per SM (grid ``PPS x SMs``, registers capped by ``maxnreg`` so all are
  resident: one wave). Warp ``w`` of program ``p`` owns, at step ``k``, the unit of ``R`` consecutive rows
  ``k * NWG + w * P + p`` (``NWG = P x W``): the grid walks h in order, every warp does the same number of units to
  within one, and every SM has warps on the last units (s14-a's schedule).
* A step's tile is ``[W, R, NCH, CW]`` (row ``R * unit + s``, column ``c * CW + j``, CW = 128): the 32 lanes on j with
  four columns each (16-byte vectors), the warps on W (TTGIR: ``sizePerThread [1, 1, 1, 4]``, ``warpsPerCTA [W, 1,
  1, 1]``). A row's logit ``x = h w + b`` is an in-thread sum and one warp's shuffles; ``g = (sigmoid(x) - y) / B`` and
  the loss ``max(x, 0) - x y + log(1 + e)`` from one ``e = exp(-|x|)`` (no overflow); dL/dw accumulates in the thread;
  ``dL/dh = g w`` is stored from the same registers. No barrier, shared memory or layout conversion in the loop.
* **Aligned dL/dh.** The output's dL/dh starts at element ``2 + F`` = 258, 8 bytes past a 16-byte boundary in a fresh
  allocation, which held s14-a to 8-byte vectors for both streams (its loads were narrowed to the stores' layout) and
  made each warp store of 256 bytes touch 9 sectors, two of them partly. Here the forward allocates 32 more elements and
  returns the view that starts ``pad`` elements in, ``pad`` chosen so that dL/dh starts on a 128-byte boundary (30 for
  F = 256 on the allocator's 512-byte blocks); dL/dh is passed as its own pointer, so Triton's 16-byte specialisation
  sees it. The output is still one contiguous fresh [2 + F + B F] tensor (a view with a storage offset). Loads
  and stores are ``LDG.E.EF.128`` / ``STG.E.128``: half of s14-a's memory instructions, each warp store 512 bytes in
  four whole 128-byte lines, so every L2 write is a full sector (no partial-sector merge, 8 not 9 sector writes per
  256 bytes).
* **Two steps ahead in registers, PF more in L2.** Each step issues the loads of the step after next (SASS: the four
  ``LDG.E.EF.128`` are the first memory instructions of the loop body). With ``PF > 0`` each warp's first lane also
  issues one ``cp.async.bulk.prefetch.L2`` (sm_90 TMA: no destination, no register, nothing to wait for; SASS: one
  ``UBLKPF.L2`` per warp and step) for its unit ``2 + PF`` steps ahead (``R F 4`` = 2 KB), so the register loads hit
  the L2. One step of the grid is ``132 x 16 x 2`` = 4224 rows = 4.3 MB of h: registers keep 4.3-8.6 MB of loads in
  flight (32-64 KB per SM, 1.5-3 us of cover at 2.1 TB/s of reads), the prefetch 8.6-17 MB more (PF 2-4), which also
  makes the ramp-up issue the first steps' DRAM reads at once. PF = 0 configs keep s14-a's exact schedule.
* **Tail: one round trip** (s14-a's): each program sums its warps' dL/dw, adds it, its dL/db and its loss into copy
  ``p % 8`` of an [8, F + 2] fp32 scratch array (relaxed ``RED``), then a barrier and an acq_rel counter increment;
  the last program reads the copies with atomic adds of zero, writes loss, dL/dw and dL/db, and leaves zeros. The fp32
  summation order is the atomics' order (not bit-for-bit deterministic; far inside the fp32 tolerances).

Why it should be faster (134.5 MB of compulsory traffic, 31.6 us floor, 34.9 us for a copy at size; s14-a measured
0.92-0.94 x the shipped kernel, ~39.5 us at the shipped 42.6): half the load/store instructions and whole-sector
writes cut the L2 write transactions by 1/9 and the issue slots of the memory pipe by half; the prefetch, where the
autotuner takes it, raises the DRAM queue at the start and during the loop without registers. Configs (Triton 3.6,
sm_90, ``cuobjdump -res-usage``, no spills; main loop: 4 x ``LDG.E.EF.128``, 4 x ``STG.E.128``, 20 ``SHFL.BFLY``,
4 ``MUFU`` per R = 2 rows, no ``BAR``):

| W x R, PPS, PF | warps per SM | registers (cap) | h in registers per SM | ahead in L2 per SM |
| --- | --- | --- | --- | --- |
| 16 x 2, 1, 0 | 16 | 120 (128) | 32-64 KB | 0 |
| 16 x 2, 1, 2 | 16 | 114 (128) | 32-64 KB | 64 KB |
| 16 x 2, 1, 4 | 16 | 114 (128) | 32-64 KB | 128 KB |
| 8 x 2, 2, 2 | 16 | 114 (128) | 32-64 KB | 64 KB |
| 16 x 1, 2, 0 | 32 | 64 (64) | 32-64 KB | 0 |

(A 16 x 1 config with prefetch spilled at 64 registers and is left out.) The prefetch is used only on sm_90+ GPUs with
16-byte-aligned h and F % 4 == 0 (a ``PREFETCH`` constexpr in the autotune key); never under ``TRITON_INTERPRET=1``
(no inline assembly there), where one config runs.
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: W warps per program, each warp R rows per step, two steps ahead in registers; PPS programs per SM, all resident
#: (maxnreg caps the registers at 65536 / (PPS x 32 x W)); PF > 0: each row is also prefetched into the L2 PF steps
#: before its register load is issued (counts in the docstring: Triton 3.6, sm_90, no spills)
_CONFIGS = [
    triton.Config({"W": 16, "R": 2, "PPS": 1, "PF": 0}, num_warps=16, num_stages=1, maxnreg=128),
    triton.Config({"W": 16, "R": 2, "PPS": 1, "PF": 2}, num_warps=16, num_stages=1, maxnreg=128),
    triton.Config({"W": 16, "R": 2, "PPS": 1, "PF": 4}, num_warps=16, num_stages=1, maxnreg=128),
    triton.Config({"W": 8, "R": 2, "PPS": 2, "PF": 2}, num_warps=8, num_stages=1, maxnreg=128),
    triton.Config({"W": 16, "R": 1, "PPS": 2, "PF": 0}, num_warps=16, num_stages=1, maxnreg=64),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"W": 2, "R": 2, "PPS": 2, "PF": 1}, num_warps=2, num_stages=1)]


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


@triton.jit
def _prefetch_l2(ptr, nbytes):
    """Per element: if ``nbytes`` is not zero, ask the TMA unit to bring ``nbytes`` (a multiple of 16) from ``ptr``
    (16-byte aligned) into the L2: ``cp.async.bulk.prefetch.L2`` (sm_90), a hint with no destination, no register and
    no completion to wait for (problem 9's helper, predicated per element instead of per program)."""
    tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.u32 p, $2, 0; @p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
        "=r,l,r", [ptr, nbytes], dtype=tl.int32, is_pure=False, pack=1)


@triton.autotune(configs=_CONFIGS, key=["B", "F", "PREFETCH"], do_bench=_bench)
@triton.jit
def _bce_head_kernel(h_ptr, y_ptr, w_ptr, b_ptr, out_ptr, dh_ptr, acc_ptr, count_ptr, B, inv_b,
                     F: tl.constexpr, BLOCK_F: tl.constexpr, CW: tl.constexpr, PREFETCH: tl.constexpr,
                     BLOCK_S: tl.constexpr, NCOPY: tl.constexpr,
                     W: tl.constexpr, R: tl.constexpr, PPS: tl.constexpr, PF: tl.constexpr):
    # PPS (programs per SM) only sizes the grid (ModelNew.forward); W is the config's num_warps; F is a constexpr.
    # dh_ptr = out_ptr + 2 + F, passed on its own: the forward places it on a 128-byte boundary, so Triton's
    # specialisation sees it 16-byte aligned and h's loads and dL/dh's stores are both 16-byte vectors.
    p = tl.program_id(0)
    P = tl.num_programs(0)
    NCH: tl.constexpr = BLOCK_F // CW
    NWG = P * W
    # warp w of program p owns, at iteration k, the unit of R rows k * NWG + w * P + p: R contiguous rows per warp,
    # the grid's units in order, a program's warps P units apart (every program has a warp on the last units)
    n_units = tl.cdiv(B, R)
    n_iter = tl.cdiv(n_units - p, NWG)
    lrow = (tl.arange(0, W)[:, None] * P + p) * R + tl.arange(0, R)[None, :]  # [W, R], rows past the step's first
    lrow4 = lrow[:, :, None, None]
    col2 = tl.arange(0, NCH)[:, None] * CW + tl.arange(0, CW)[None, :]  # [NCH, CW]: lanes on CW, 4 columns each
    col4 = col2[None, None, :, :]
    offs = lrow4 * F + col4  # one offset tensor (one register layout) for h's loads and dL/dh's stores
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
    if PREFETCH and PF > 0:
        # unit u (R rows, R F 4 contiguous bytes) of the step is prefetched by one bulk request, issued by the first
        # lane of one warp: elements of a 1-D [32 W] tensor, one per thread in its layout, lane 0 of each warp active
        # (the instruction takes uniform operands, so one active lane per warp keeps it a single issue)
        pt = tl.arange(0, 32 * W)
        prow = ((pt // 32) * P + p) * R
        plive = (pt % 32) == 0
        # the units of iterations 2 .. PF + 1 into the L2
        for j in tl.static_range(PF):
            pbase = base + (2 + j) * STEP
            pleft = tl.minimum(B - pbase, STEP).to(tl.int32)
            _prefetch_l2(h_ptr + (pbase + prow) * F,
                         tl.where(plive, tl.minimum(tl.maximum(pleft - prow, 0), R) * (F * 4), 0))
    w4 = tl.load(w_ptr + col4, mask=col4 < F, other=0.0)
    bias = tl.load(b_ptr)
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
        if PREFETCH and PF > 0:
            pbase = base + (2 + PF) * STEP
            pleft = tl.minimum(B - pbase, STEP).to(tl.int32)
            _prefetch_l2(h_ptr + (pbase + prow) * F,
                         tl.where(plive, tl.minimum(tl.maximum(pleft - prow, 0), R) * (F * 4), 0))
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
    tl.atomic_add(sums + col2, tl.sum(acc, axis=0), mask=col2 < F, sem="relaxed", scope="gpu")
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


#: per device index: whether it has ``cp.async.bulk.prefetch.L2`` (sm_90 and later; never under the interpreter)
_BULK = {}


def _bulk_prefetch(device):
    if _INTERPRET or device.type != "cuda":
        return False
    idx = device.index if device.index is not None else torch.cuda.current_device()
    ok = _BULK.get(idx)
    if ok is None:
        ok = _BULK[idx] = torch.cuda.get_device_capability(idx)[0] >= 9
    return ok


class ModelNew(nn.Module):
    """Same parameters as the problem's ``Model`` (``head`` = ``nn.Linear(in_features, 1)``); one Triton launch."""

    #: programs per SM; None: the autotuned config's (a number here overrides it, as the edge tests do)
    PROGRAMS_PER_SM = None
    #: copies of the [F + 2] sums (program p adds into copy p % NCOPY; the last program adds them up)
    NCOPY = 8
    #: dL/dh (element 2 + F of the output) starts on a multiple of this many bytes
    DH_ALIGN = 128

    def __init__(self, in_features: int):
        super().__init__()
        self.head = nn.Linear(in_features, 1)
        self._scratch = {}

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
        n = 2 + feat + batch * feat
        # the output is a fresh buffer's view starting `pad` elements in, so that dL/dh (its element 2 + F) starts on
        # a 128-byte boundary: 16-byte vector stores in whole 32-byte sectors, in h's register layout
        esize = h.element_size()
        buf = torch.empty(n + self.DH_ALIGN // esize, device=h.device, dtype=h.dtype)
        pad = ((-(buf.data_ptr() + (2 + feat) * esize)) % self.DH_ALIGN) // esize
        out = buf[pad:pad + n]
        counter, sums, sms = self._scratch_for(h.device, feat + 2)
        pps = self.PROGRAMS_PER_SM
        prefetch = (_bulk_prefetch(h.device) and feat % 4 == 0 and h.data_ptr() % 16 == 0
                    and h.dtype == torch.float32)

        def grid(meta):
            n_units = triton.cdiv(batch, meta["R"])
            return (max(1, min(triton.cdiv(n_units, meta["W"]), (pps or meta["PPS"]) * sms)),)

        key = (batch, feat, prefetch, h.dtype, h.device)
        block_f = triton.next_power_of_2(feat)
        _launch(_bce_head_kernel, key, grid, h, labels.contiguous(), w, b, out, out[2 + feat:], sums, counter, batch,
                1.0 / batch, F=feat, BLOCK_F=block_f, CW=min(128, block_f), PREFETCH=prefetch,
                BLOCK_S=triton.next_power_of_2(feat + 2), NCOPY=self.NCOPY)
        return out
