"""kbstudy-triton candidate for DLRM-Bench problem 5 (fused EmbeddingBag backward + row-wise Adagrad, functional).

Only the rows that were looked up are read and written (the FBGEMM TBE approach), instead of a dense gradient and
dense passes over the whole table; the table and the state are inputs and are never written (out of place: the
updated rows go to fresh outputs). No sort (as problem 4's kernel):

1. One zero-filled int64 buffer (the only non-Triton work, 16 MB at full size) holds ``last`` (one int32 per table
   row), the scan's status words (one per block of table rows), its ticket counter and the output size U.
2. Triton ``_link_kernel``, one pass over the (int64, unconverted) lookups: lookup ``j`` of row ``r`` swaps ``j + 1``
   into ``last[r]`` (one int32 ``atomic_xchg``) and stores the value it displaced in ``link[j]``, so each touched
   row's lookups form one list from ``last[r]`` backwards (positions + 1; 0 ends it). Which lookup comes last is the
   GPU's order, so a repeated row's fp32 summation order may differ from eager (within the verifiers' relative-L2
   thresholds: a row has 1.1 lookups on average).
3. Triton ``_scan_kernel``, the ascending compaction of the touched rows in one pass over ``last`` (16 MB read, 4M
   rows at full size) with a *decoupled look-back* (as CUB's single-pass scan, and problem 7's kernel): a program takes
   a ticket (an atomic counter, so blocks are numbered in the order programs started), counts the touched rows
   (``last != 0``) of its block of ``BLOCK_R`` rows and publishes the count at once (status word ``1 << 32 | count``);
   it then walks the status words of earlier blocks backwards, ``WINDOW`` at a time (one vector load each), adding
   counts until it meets an inclusive prefix (``2 << 32 | prefix``), publishes its own inclusive prefix, and writes
   its touched rows' ids (int64, ascending: the first output) and list tails at their slots. Block t waits only on
   blocks with smaller tickets, which have all started, so the wait always ends (it is also capped: a broken GPU
   ordering would give a wrong answer, never a hang). The last ticket writes U.
4. Triton ``_rowwise_adagrad_kernel``, over the U output slots (a grid for the worst case ``min(lookups, rows)``;
   slots at or past U, read from the device, are masked off): a program takes ``BLOCK_P`` consecutive slots (dense:
   every lane is a touched row, rows ascending). Its table rows and state are loaded at once (they do not depend on
   the gradient), then the gradient rows of each row's list are summed (the tail lookup directly, the rest of the
   list -- 0.1 lookups on average -- in a loop that ends when no lane's list continues; grad_output is 4 MB and
   stays in L2), and ``m' = m + mean(g^2)`` and ``w' = w - g * (lr / (sqrt(m') + eps))`` (the problem's update,
   rounded slightly differently) are written at the slot.

The output size U depends on the data: the outputs are allocated for the worst case and every kernel is launched
*before* the one host synchronisation that reads U; the results are the first U rows of those buffers.

Why it should approach the floor (0.77 GB compulsory, 184 us at the H200's copy bandwidth): the former version ran an
int64 -> int32 conversion, ``torch.sort`` of the 819k keys with a permutation (several CUB launches and passes, each
on the critical path), a run-head kernel and ``torch.cumsum`` before its update kernel could start. Now the update
kernel waits only on one 16 MB memset, 819k independent int32 exchanges on an L2-resident array and one 16 MB scan
(about 60 MB of traffic in all, against the update's ~0.8 GB of row reads and writes), and its lanes are all touched
rows (the former kernel's programs were 10 % idle lanes on the non-head positions). ``triton.autotune`` picks slots
per program and warps of the update kernel on the GPU (one config under ``TRITON_INTERPRET=1``); the link and scan
kernels have atomics and state, so they run one fixed shape each (their work is small and not gather-bound).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: spin-wait cap of the look-back (loop iterations): a wrong answer instead of a hang if ever exceeded
MAX_SPINS = 1 << 22
# status words of the look-back: ``flag << 32 | value``, flag 1 = the block's count, 2 = its inclusive prefix,
# 0 = not yet published (the buffer is zero-filled every call)

#: sm_90 (Triton 3.9 ptxas) registers, no spills: [16 slots, 4 warps] 76, [32, 8] 70, [64, 16] 77 -> 6, 3, 1
#: programs per SM, 64-96 touched rows in flight per SM (link kernel 32 registers, scan kernel 78 at 8 warps)
_UPDATE_CONFIGS = [
    triton.Config({"BLOCK_P": 16}, num_warps=4),
    triton.Config({"BLOCK_P": 32}, num_warps=8),
    triton.Config({"BLOCK_P": 64}, num_warps=16),
]
if _INTERPRET:
    _UPDATE_CONFIGS = [triton.Config({"BLOCK_P": 16}, num_warps=4)]


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
def _link_kernel(idx_ptr, last_ptr, link_ptr, n, BLOCK: tl.constexpr):
    """Per lookup j of row r: ``link[j]`` = the lookup of r that was ``last[r]`` before j swapped itself in (0 for
    none), so every touched row's lookups form one list from ``last[r]`` backwards (positions + 1, 0 ends it)."""
    j = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = j < n
    r = tl.load(idx_ptr + j, mask=m, other=0)
    prev = tl.atomic_xchg(last_ptr + r, (j + 1).to(tl.int32), mask=m, sem="relaxed")
    tl.store(link_ptr + j, prev, mask=m)


@triton.jit
def _lookback(state_ptr, t, WINDOW: tl.constexpr, MAX_SPIN: tl.constexpr):
    """Exclusive prefix of scan block ``t``: walks the status words of blocks ``t - 1, t - 2, ...`` back in windows
    of ``WINDOW`` (one vector load each), summing block counts (flag 1) until the nearest inclusive prefix (flag 2);
    re-reads a window while a word it needs is unpublished (those blocks hold smaller tickets: they have started)."""
    prefix = (t * 0).to(tl.int64)
    hi = t.to(tl.int64)
    done = (t == 0).to(tl.int32)
    spins = 0
    while (done == 0) & (spins < MAX_SPIN):
        q = hi - WINDOW + tl.arange(0, WINDOW)
        inw = q >= 0
        st = tl.load(state_ptr + q, mask=inw, other=0, volatile=True)
        flag = st >> 32
        pidx = tl.max(tl.where(inw & (flag == 2), q, -1), axis=0)
        need = inw & (q >= pidx)
        missing = tl.sum((need & (flag == 0)).to(tl.int32), axis=0)
        if missing == 0:
            prefix += tl.sum(tl.where(need, st & 0xFFFFFFFF, 0), axis=0)
            done = ((pidx >= 0) | (hi <= WINDOW)).to(tl.int32)
            hi -= WINDOW
        else:
            spins += 1
    return prefix


@triton.jit
def _scan_kernel(last_ptr, state_ptr, counter_ptr, u_ptr, rows_out, tails_ptr, N, n_blocks,
                 BLOCK_R: tl.constexpr, WINDOW: tl.constexpr, MAX_SPIN: tl.constexpr):
    """Scan block ``t`` (a ticket): its touched rows (``last != 0``) get the slots ``prefix + 0, 1, ...`` in row
    order; writes their ids (``rows_out``) and list tails (``tails``); the last block writes U."""
    t = tl.atomic_add(counter_ptr, 1, sem="relaxed")
    r = t.to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = r < N
    tail = tl.load(last_ptr + r, mask=rmask, other=0)
    touched = (tail != 0).to(tl.int64)
    cnt = tl.sum(touched, axis=0)
    tl.atomic_xchg(state_ptr + t, (tl.where(t == 0, 2, 1).to(tl.int64) << 32) | cnt, sem="release")
    prefix = _lookback(state_ptr, t, WINDOW, MAX_SPIN)
    if t > 0:
        tl.atomic_xchg(state_ptr + t, (2 << 32) | (prefix + cnt), sem="release")
    slot = prefix + tl.cumsum(touched, axis=0) - touched
    hit = touched != 0
    tl.store(rows_out + slot, r, mask=hit)
    tl.store(tails_ptr + slot, tail, mask=hit)
    if t == n_blocks - 1:
        tl.store(u_ptr, prefix + cnt)


@triton.autotune(configs=_UPDATE_CONFIGS, key=["D", "BAG"], do_bench=_bench)
@triton.jit
def _rowwise_adagrad_kernel(rows_ptr, tails_ptr, u_ptr, link_ptr, grad_ptr, w_ptr, mom_ptr, w_out, mom_out, D,
                            lr, eps, BAG: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_P: tl.constexpr):
    u = tl.load(u_ptr)
    s = tl.program_id(0).to(tl.int64) * BLOCK_P + tl.arange(0, BLOCK_P)
    valid = s < u
    row = tl.load(rows_ptr + s, mask=valid, other=0)
    j = tl.load(tails_ptr + s, mask=valid, other=1).to(tl.int64) - 1
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    vmask = valid[:, None] & dmask[None, :]
    w = tl.load(w_ptr + row[:, None] * D + d[None, :], mask=vmask, other=0.0)
    mom = tl.load(mom_ptr + row, mask=valid, other=0.0)
    acc = tl.load(grad_ptr + (j // BAG)[:, None] * D + d[None, :], mask=vmask, other=0.0).to(tl.float32)
    nxt = tl.load(link_ptr + j, mask=valid, other=0)
    cont = nxt != 0
    while tl.sum(cont.to(tl.int32), axis=0) > 0:
        j = nxt.to(tl.int64) - 1
        acc += tl.load(grad_ptr + (j // BAG)[:, None] * D + d[None, :], mask=cont[:, None] & dmask[None, :],
                       other=0.0).to(tl.float32)
        nxt = tl.load(link_ptr + j, mask=cont, other=0)
        cont = nxt != 0
    new_mom = mom + tl.sum(acc * acc, axis=1) / D
    step = lr / (tl.sqrt(new_mom) + eps)
    tl.store(mom_out + s, new_mom, mask=valid)
    tl.store(w_out + s[:, None] * D + d[None, :], w - acc * step[:, None], mask=vmask)


class ModelNew(nn.Module):
    """Same interface as the problem's ``Model``: (indices, grad_output, weight, momentum) -> (rows, new rows, new
    state); the inputs are only read. ``BLOCK_L`` lookups per link program, ``BLOCK_R`` table rows per scan block,
    ``WINDOW`` status words per look-back load (class attributes, so tests can shrink them)."""

    BLOCK_L = 1024
    BLOCK_R = 2048
    WINDOW = 32

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.lr = 0.005
        self.eps = 1e-8

    def forward(self, indices: torch.Tensor, grad_output: torch.Tensor, weight: torch.Tensor,
                momentum: torch.Tensor):
        batch, bag = indices.shape
        n_rows, dim = weight.shape
        n = indices.numel()
        if n_rows >= 2**31 or n >= 2**31 - 1:
            raise ValueError("this kernel indexes rows and lookups with int32 (< 2**31)")
        dev = indices.device
        cap = min(n, n_rows)
        rows = torch.empty(cap, dtype=torch.int64, device=dev)
        new_weight = torch.empty(cap, dim, dtype=weight.dtype, device=dev)
        new_momentum = torch.empty(cap, dtype=momentum.dtype, device=dev)
        if cap == 0:
            return rows, new_weight, new_momentum
        weight, momentum, grad_output = weight.contiguous(), momentum.contiguous(), grad_output.contiguous()
        flat = indices.reshape(-1).contiguous()
        n_blocks = triton.cdiv(n_rows, self.BLOCK_R)
        # one memset: [status words (n_blocks) | ticket counter | U | last (int32 per row)]
        buf = torch.zeros(n_blocks + 2 + (n_rows + 1) // 2, dtype=torch.int64, device=dev)
        state, counter, u = buf[:n_blocks], buf[n_blocks:n_blocks + 1], buf[n_blocks + 1:n_blocks + 2]
        last = buf[n_blocks + 2:].view(torch.int32)
        link = torch.empty(n, dtype=torch.int32, device=dev)
        tails = torch.empty(cap, dtype=torch.int32, device=dev)
        _launch(_link_kernel, None, (triton.cdiv(n, self.BLOCK_L),), flat, last, link, n, BLOCK=self.BLOCK_L,
                num_warps=4)
        _launch(_scan_kernel, None, (n_blocks,), last, state, counter, u, rows, tails, n_rows, n_blocks,
                BLOCK_R=self.BLOCK_R, WINDOW=self.WINDOW, MAX_SPIN=MAX_SPINS, num_warps=8)
        _launch(_rowwise_adagrad_kernel, (dim, bag, weight.dtype, momentum.dtype, dev),
                lambda meta: (triton.cdiv(cap, meta["BLOCK_P"]),),
                rows, tails, u, link, grad_output, weight, momentum, new_weight, new_momentum, dim,
                self.lr, self.eps, BAG=bag, BLOCK_D=triton.next_power_of_2(dim))
        n_out = int(u.item())  # the one host synchronisation: after every launch
        return rows[:n_out], new_weight[:n_out], new_momentum[:n_out]
