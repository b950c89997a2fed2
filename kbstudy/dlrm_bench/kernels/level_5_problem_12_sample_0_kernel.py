"""kbstudy-triton candidate for DLRM-Bench problem 12 (256 -> 1 head, sigmoid, BCE mean loss, forward + backward).

**One launch**, h read once and dL/dh written once (the compulsory traffic):

* ``P`` programs (a few per SM) stride over ``BLOCK_B``-row tiles of h: logits ``x = h w + b``, the stable
  BCE-with-logits terms ``max(x, 0) - x y + log(1 + exp(-|x|))``, ``g = (sigmoid(x) - y) / B``, and
  ``dL/dh = g w`` stored into the output; each program keeps its running sums of ``g h`` (for dL/dw), ``g`` (dL/db)
  and the loss in registers and writes them once, as one row of a [P, F + 2] partials buffer.
* The partials are reduced inside the same launch by the *last* programs to finish, in two levels (the classic
  "threadfence reduction", as CUTLASS's semaphores do it: every program stores its row, synchronises its threads,
  then one thread increments a counter with an acq_rel atomic; the program that sees the count complete knows every
  row is visible): the last program of each group of ``GROUP`` programs sums its group's rows into a group row, and the
  last group to finish sums the group rows and writes loss, dL/dw and dL/db. Each last program resets the counter it
  used, so the counters are zero again for the next call. Fixed summation order (deterministic), no zero-fill, no
  second launch, no spin-waiting (nothing ever waits for another program).

Why it should approach the floor: the former version used 2048 one-tile programs plus a second launch whose 17
programs walked the [2048, 258] partials column-strided. This one is one launch of 3 programs per SM (16-row tiles,
8 warps, 80 registers on sm_90: 48 KB of h in flight per SM), and a tail of two short reductions (16 rows, then
~25 group rows, from L2). The counters and the partials buffers are allocated once per device and reused (scratch,
never returned).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl


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
def _sum_rows(src_ptr, first, n_rows, F, BLOCK_P: tl.constexpr, BLOCK_F: tl.constexpr):
    """Column sums of rows [first, first + n_rows) of a [*, F + 2] fp32 buffer: (sums of columns 0..F-1, of column F,
    of column F + 1), in a fixed order. Loads go to L2 (``.cg``): the rows were written by other SMs."""
    f = tl.arange(0, BLOCK_F)
    fmask = f < F
    width = F + 2
    acc = tl.zeros([BLOCK_P, BLOCK_F], dtype=tl.float32)
    acc_g = tl.zeros([BLOCK_P], dtype=tl.float32)
    acc_l = tl.zeros([BLOCK_P], dtype=tl.float32)
    for q0 in range(0, n_rows, BLOCK_P):
        q = q0 + tl.arange(0, BLOCK_P)
        qmask = q < n_rows
        base = src_ptr + (first + q) * width
        acc += tl.load(base[:, None] + f[None, :], mask=qmask[:, None] & fmask[None, :], other=0.0,
                       cache_modifier=".cg")
        acc_g += tl.load(base + F, mask=qmask, other=0.0, cache_modifier=".cg")
        acc_l += tl.load(base + F + 1, mask=qmask, other=0.0, cache_modifier=".cg")
    return tl.sum(acc, axis=0), tl.sum(acc_g, axis=0), tl.sum(acc_l, axis=0)


@triton.jit
def _bce_head_kernel(h_ptr, y_ptr, w_ptr, b_ptr, out_ptr, part_ptr, group_ptr, count_ptr, B, F, inv_b, n_tiles,
                     BLOCK_B: tl.constexpr, BLOCK_F: tl.constexpr, GROUP: tl.constexpr, BLOCK_P: tl.constexpr):
    p = tl.program_id(0)
    P = tl.num_programs(0)
    f = tl.arange(0, BLOCK_F)
    fmask = f < F
    w = tl.load(w_ptr + f, mask=fmask, other=0.0)
    bias = tl.load(b_ptr)
    gh = tl.zeros([BLOCK_B, BLOCK_F], dtype=tl.float32)
    gsum = tl.zeros([BLOCK_B], dtype=tl.float32)
    lsum = tl.zeros([BLOCK_B], dtype=tl.float32)
    for t in range(p, n_tiles, P):
        rows = (t * BLOCK_B + tl.arange(0, BLOCK_B)).to(tl.int64)
        rmask = rows < B
        m2 = rmask[:, None] & fmask[None, :]
        h = tl.load(h_ptr + rows[:, None] * F + f[None, :], mask=m2, other=0.0)
        x = tl.sum(h * w[None, :], axis=1) + bias
        y = tl.load(y_ptr + rows, mask=rmask, other=0.0)
        loss = tl.maximum(x, 0.0) - x * y + tl.log(1.0 + tl.exp(-tl.abs(x)))
        g = (1.0 / (1.0 + tl.exp(-x)) - y) * inv_b
        g = tl.where(rmask, g, 0.0)
        tl.store(out_ptr + 2 + F + rows[:, None] * F + f[None, :], g[:, None] * w[None, :], mask=m2)
        gh += g[:, None] * h
        gsum += g
        lsum += tl.where(rmask, loss, 0.0)
    width = F + 2
    row = part_ptr + p * width
    tl.store(row + f, tl.sum(gh, axis=0), mask=fmask)
    tl.store(row + F, tl.sum(gsum, axis=0))
    tl.store(row + F + 1, tl.sum(lsum, axis=0) * inv_b)
    # two-level "last block" reduction. Every thread's stores precede the counter increment (barrier + release);
    # the last arrival's loads follow it (acquire, then .cg loads from L2, where the other SMs' stores are).
    n_groups = tl.cdiv(P, GROUP)
    grp = p // GROUP
    first = grp * GROUP
    size = tl.minimum(P - first, GROUP)
    tl.debug_barrier()
    arrived = tl.atomic_add(count_ptr + 1 + grp, 1, sem="acq_rel", scope="gpu")
    if arrived == size - 1:
        v, vg, vl = _sum_rows(part_ptr, first, size, F, BLOCK_P, BLOCK_F)
        grow = group_ptr + grp * width
        tl.store(grow + f, v, mask=fmask)
        tl.store(grow + F, vg)
        tl.store(grow + F + 1, vl)
        tl.atomic_xchg(count_ptr + 1 + grp, 0)
        tl.debug_barrier()
        groups_done = tl.atomic_add(count_ptr, 1, sem="acq_rel", scope="gpu")
        if groups_done == n_groups - 1:
            v, vg, vl = _sum_rows(group_ptr, 0, n_groups, F, BLOCK_P, BLOCK_F)
            tl.store(out_ptr + 1 + f, v, mask=fmask)
            tl.store(out_ptr + 1 + F, vg)
            tl.store(out_ptr, vl)
            tl.atomic_xchg(count_ptr, 0)


class ModelNew(nn.Module):
    """Same parameters as the problem's ``Model`` (``head`` = ``nn.Linear(in_features, 1)``); one Triton launch."""

    BLOCK_B = 16
    #: programs per SM: 8 warps, 80 registers (sm_90, Triton 3.9 ptxas) -> 3 fit an SM
    PROGRAMS_PER_SM = 3
    #: programs per first-level reduction group (each group's last program sums its GROUP partial rows)
    GROUP = 16

    def __init__(self, in_features: int):
        super().__init__()
        self.head = nn.Linear(in_features, 1)
        self._scratch = {}

    def _scratch_for(self, device, width: int):
        """(counters, partials, group partials, programs) for ``device``: int32 counters (zero between calls: the
        kernel resets each one it uses), fp32 [programs, width] and [groups, width] buffers; allocated once."""
        key = (str(device), width)
        entry = self._scratch.get(key)
        if entry is None:
            sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 2
            programs = self.PROGRAMS_PER_SM * sms
            groups = triton.cdiv(programs, self.GROUP)
            entry = (torch.zeros(1 + groups, dtype=torch.int32, device=device),
                     torch.empty(programs, width, dtype=torch.float32, device=device),
                     torch.empty(groups, width, dtype=torch.float32, device=device), programs)
            self._scratch[key] = entry
        return entry

    def forward(self, h: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        h = h.detach().contiguous()
        batch, feat = h.shape
        w = self.head.weight.detach().reshape(-1)
        b = self.head.bias.detach()
        out = torch.empty(2 + feat + batch * feat, device=h.device, dtype=h.dtype)
        counters, partials, group_partials, max_programs = self._scratch_for(h.device, feat + 2)
        n_tiles = triton.cdiv(batch, self.BLOCK_B)
        programs = max(1, min(n_tiles, max_programs))
        _launch(_bce_head_kernel, None, (programs,), h, labels.contiguous(), w, b, out, partials, group_partials,
                counters, batch, feat, 1.0 / batch, n_tiles, BLOCK_B=self.BLOCK_B,
                BLOCK_F=triton.next_power_of_2(feat), GROUP=self.GROUP, BLOCK_P=16, num_warps=8)
        return out
