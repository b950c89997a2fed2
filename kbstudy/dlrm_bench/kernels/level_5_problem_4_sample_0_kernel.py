"""kbstudy-triton candidate for DLRM-Bench problem 4 (EmbeddingBag sum backward to a dense weight gradient).

The dense gradient (num_embeddings x dim, 2 GB at full size) is written exactly once, with no atomics and no zero-fill
pass over it:

1. ``torch.sort`` of the flat indices (int32 keys when the table has < 2**31 rows): runs of equal rows; ``perm``
   maps a sorted position back to its lookup, whose bag is ``position // bag_size``.
2. Triton ``_touched_kernel`` (on the unsorted indices, before the sort) sets a one-byte flag for every looked-up
   row, in a zero-filled int8 array (4 MB: an eighth of the former two int32 run-bound arrays).
3. Triton ``_dense_grad_kernel``, one launch with two kinds of programs:

   * *touched rows*: a program takes ``BLOCK_P`` sorted positions; each one that starts a run is
     one touched row, whose gradient is the sum of the ``grad_output`` rows of its run's bags (the first lookup
     directly, the rest of the run -- 1.1 lookups on average -- in a loop that ends when no lane's run continues;
     grad_output is 4 MB and stays in L2), stored as one 512-byte row;
   * *untouched rows*: a program takes ``BLOCK_R`` consecutive rows, reads their flags and stores zeros to the rows
     not looked up (82 % of them).

   Every row is written by exactly one program; the zero stores need one small load and no gather. The two kinds
   alternate in the grid (while both last), so the latency-bound touched rows run beside the bandwidth-bound zero
   stores rather than before them.

Why it should approach the floor (2 GB of compulsory writes, 487 us): the former single-role kernel stored each
[32, 128] tile only after a chain of three dependent memory round trips (run bounds, positions, gradient rows) and
needed 120 registers, so too few stores were in flight (1.07 ms on the H200, 2.2x the floor). Here 82 % of the
bytes are stores behind a single flag load, from short-lived programs, and the touched rows overlap with them; the
flags (4 MB zero-filled, 4 MB read) replace the former two int32 run-bound arrays (32 MB zero-filled, written and
read) and their separate pass. ``torch.sort`` (and the flags' zero fill) is the only non-Triton work.
``triton.autotune`` picks the block sizes and warps on the GPU (one config under ``TRITON_INTERPRET=1``); the kernel
is idempotent, so its tuning runs need no state restored.
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

_CONFIGS = [
    triton.Config({"BLOCK_P": 16, "BLOCK_R": 64}, num_warps=4),
    triton.Config({"BLOCK_P": 32, "BLOCK_R": 128}, num_warps=8),
    triton.Config({"BLOCK_P": 64, "BLOCK_R": 256}, num_warps=16),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"BLOCK_P": 16, "BLOCK_R": 64}, num_warps=4)]


def _bench(kernel_call, quantiles):
    """Autotuning benchmark: ``triton.testing.do_bench`` with 5 ms of warm-up and 25 ms of timed calls (instead of
    25 / 100) per config, to keep the first call's tuning short."""
    return triton.testing.do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)


#: the tuned launch arguments per shape key (see :func:`_launch`)
_TUNED = {}


def _launch(kernel, key, grid, *args, **kwargs):
    """``kernel[grid](*args, **kwargs)`` for the ``triton.autotune``-d ``kernel``. The first call for ``key`` (the
    shapes and dtypes the tuning depends on) goes through the autotuner, which benchmarks its configs once and launches
    the best; later calls launch the underlying ``JITFunction`` with that config's arguments directly, skipping the
    autotuner's per-call bookkeeping (argument dicts, key building: ~9 us of host time per call measured on a
    2-core CPU machine)."""
    tuned = _TUNED.get(key)
    if tuned is None:
        kernel[grid](*args, **kwargs)
        best = getattr(kernel, "best_config", None)
        if best is not None:
            _TUNED[key] = best.all_kwargs()
        return
    kernel.fn[grid](*args, **kwargs, **tuned)


@triton.jit
def _touched_kernel(idx_ptr, flag_ptr, n, BLOCK: tl.constexpr):
    j = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = j < n
    r = tl.load(idx_ptr + j, mask=m, other=0)
    tl.store(flag_ptr + r, tl.full([BLOCK], 1, tl.int8), mask=m)


@triton.autotune(configs=_CONFIGS, key=["N", "D", "BAG"], do_bench=_bench)
@triton.jit
def _dense_grad_kernel(sorted_ptr, perm_ptr, grad_ptr, flag_ptr, out_ptr, n, N, D,
                       BAG: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_R: tl.constexpr):
    pid = tl.program_id(0)
    # the two kinds of programs alternate (while both last), so the latency-bound touched rows run beside the
    # bandwidth-bound zero stores instead of before them
    n_touch = tl.cdiv(n, BLOCK_P)
    n_zero = tl.cdiv(N, BLOCK_R)
    both = tl.minimum(n_touch, n_zero)
    if pid < 2 * both:
        touched = (pid % 2) == 0
        idx = pid // 2
    else:
        touched = n_touch > n_zero
        idx = pid - both
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    if touched:
        # touched rows: one per run of equal rows in the sorted lookups
        j = idx.to(tl.int64) * BLOCK_P + tl.arange(0, BLOCK_P)
        valid = j < n
        row = tl.load(sorted_ptr + j, mask=valid, other=-1)
        prev = tl.load(sorted_ptr + j - 1, mask=valid & (j > 0), other=-1)
        head = valid & (row != prev)
        hmask = head[:, None] & dmask[None, :]
        p = tl.load(perm_ptr + j, mask=head, other=0)
        acc = tl.load(grad_ptr + (p // BAG)[:, None] * D + d[None, :], mask=hmask, other=0.0).to(tl.float32)
        k = 1
        nxt = tl.load(sorted_ptr + j + 1, mask=head & (j + 1 < n), other=-1)
        cont = head & (nxt == row)
        while tl.sum(cont.to(tl.int32), axis=0) > 0:
            p = tl.load(perm_ptr + j + k, mask=cont, other=0)
            acc += tl.load(grad_ptr + (p // BAG)[:, None] * D + d[None, :], mask=cont[:, None] & dmask[None, :],
                           other=0.0).to(tl.float32)
            k += 1
            nxt = tl.load(sorted_ptr + j + k, mask=cont & (j + k < n), other=-1)
            cont = cont & (nxt == row)
        tl.store(out_ptr + row.to(tl.int64)[:, None] * D + d[None, :], acc.to(out_ptr.dtype.element_ty), mask=hmask)
    else:
        # untouched rows: zeros
        r = idx.to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
        rmask = r < N
        flag = tl.load(flag_ptr + r, mask=rmask, other=1)
        zero = rmask & (flag == 0)
        tl.store(out_ptr + r[:, None] * D + d[None, :], tl.zeros([BLOCK_R, BLOCK_D], dtype=out_ptr.dtype.element_ty),
                 mask=zero[:, None] & dmask[None, :])


class ModelNew(nn.Module):
    """No parameters, like the problem's ``Model``; forward is a 4 MB zero fill, a sort and two Triton launches."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.num_embeddings = num_embeddings

    def forward(self, indices: torch.Tensor, grad_output: torch.Tensor) -> torch.Tensor:
        batch, bag = indices.shape
        n_rows = self.num_embeddings
        dim = grad_output.shape[1]
        n = indices.numel()
        if n_rows >= 2**31 or n >= 2**31:
            raise ValueError("this kernel indexes rows and positions with int32 (< 2**31)")
        out = torch.empty(n_rows, dim, device=grad_output.device, dtype=grad_output.dtype)
        flags = torch.zeros(n_rows, dtype=torch.int8, device=indices.device)
        flat = indices.reshape(-1).to(torch.int32)
        if n:
            block = 1024
            _touched_kernel[(triton.cdiv(n, block),)](flat, flags, n, BLOCK=block, num_warps=4)
        sorted_idx, perm = torch.sort(flat)
        _launch(_dense_grad_kernel, (n_rows, dim, bag, grad_output.dtype, grad_output.device),
                lambda meta: (triton.cdiv(n, meta["BLOCK_P"]) + triton.cdiv(n_rows, meta["BLOCK_R"]),),
                sorted_idx, perm, grad_output.contiguous(), flags, out, n, n_rows, dim, BAG=bag,
                BLOCK_D=triton.next_power_of_2(dim))
        return out
