"""kbstudy-triton candidate for DLRM-Bench problem 5 (fused EmbeddingBag backward + row-wise Adagrad, functional).

Only the rows that were looked up are read and written (the FBGEMM TBE approach), instead of a dense gradient and
dense passes over the whole table; the table and the state are inputs and are never written (out of place: the
updated rows go to fresh outputs):

1. ``torch.sort`` of the flat indices as int32 keys (tables and batches below 2**31): runs of equal rows.
2. Triton ``_head_kernel``: ``head[j]`` = 1 where a run starts; ``torch.cumsum`` of it gives each run's slot in the
   output.
3. Triton ``_rowwise_adagrad_kernel``, over *sorted positions*: a program takes ``BLOCK_P`` positions; each position
   that starts a run (90 % of them: the 819,200 lookups hit 739,000 distinct rows) is one output row. Its table row
   and state are loaded at once (they do not depend on the gradient), then the gradient rows of the run's lookups are
   summed (the first lookup directly, the rest of the run -- 1.1 lookups on average -- in a loop that ends when no
   lane's run continues), and the row id, ``m' = m + mean(g^2)`` and ``w' = w - g * (lr / (sqrt(m') + eps))`` (the
   problem's update, rounded slightly differently) are written at the run's slot.

The output size U (distinct rows) depends on the data. The outputs are allocated for the worst case (every lookup a
distinct row) and the kernel is launched *before* the one host synchronisation that reads U, so the host's work
overlaps the sort on the GPU instead of following it; the results are the first U rows of those buffers.

Why it should approach the floor: the former version synchronised before allocating, then ran two more launches
(run starts, then the update), and its update kernel loaded each touched row only after summing the gradient, behind
four dependent memory round trips per program. Now the table/state loads overlap the gradient gathers, the run
starts need no pass of their own, and the bag of a lookup is ``position // bag_size`` with the bag size a
compile-time constant (a multiply, not a 64-bit division). ``torch.sort`` and ``torch.cumsum`` are the only non-Triton
compute. ``triton.autotune`` picks positions per program and warps on the GPU (one config under
``TRITON_INTERPRET=1``).
"""
import os

import torch
import torch.nn as nn
import triton
import triton.testing
import triton.language as tl

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

#: sm_90 (Triton 3.9 ptxas) registers: [16 positions, 4 warps] 78, [32, 8] 78, [64, 16] 82 -> 6, 3, 1 programs per
#: SM, 64-96 touched rows in flight per SM ([32, 4 warps] would need 140 registers)
_CONFIGS = [
    triton.Config({"BLOCK_P": 16}, num_warps=4),
    triton.Config({"BLOCK_P": 32}, num_warps=8),
    triton.Config({"BLOCK_P": 64}, num_warps=16),
]
if _INTERPRET:
    _CONFIGS = [triton.Config({"BLOCK_P": 16}, num_warps=4)]


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
def _head_kernel(sorted_ptr, head_ptr, n, BLOCK: tl.constexpr):
    j = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = j < n
    r = tl.load(sorted_ptr + j, mask=m, other=0)
    prev = tl.load(sorted_ptr + j - 1, mask=m & (j > 0), other=-1)
    tl.store(head_ptr + j, (r != prev).to(tl.int32), mask=m)


@triton.autotune(configs=_CONFIGS, key=["D", "BAG"], do_bench=_bench)
@triton.jit
def _rowwise_adagrad_kernel(sorted_ptr, perm_ptr, slot_ptr, grad_ptr, w_ptr, mom_ptr, rows_out, w_out, mom_out,
                            n, D, lr, eps, BAG: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_P: tl.constexpr):
    j = tl.program_id(0).to(tl.int64) * BLOCK_P + tl.arange(0, BLOCK_P)
    valid = j < n
    row = tl.load(sorted_ptr + j, mask=valid, other=-1)
    prev = tl.load(sorted_ptr + j - 1, mask=valid & (j > 0), other=-1)
    head = valid & (row != prev)
    r64 = row.to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    hmask = head[:, None] & dmask[None, :]
    # the touched row and its state: independent of the gradient, so in flight during the gathers below
    w = tl.load(w_ptr + r64[:, None] * D + d[None, :], mask=hmask, other=0.0)
    mom = tl.load(mom_ptr + r64, mask=head, other=0.0)
    slot = tl.load(slot_ptr + j, mask=head, other=1).to(tl.int64) - 1  # inclusive count of run starts -> slot
    # the run's lookups: the first one, then while any lane's run continues
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
    new_mom = mom + tl.sum(acc * acc, axis=1) / D
    step = lr / (tl.sqrt(new_mom) + eps)
    tl.store(rows_out + slot, r64, mask=head)
    tl.store(mom_out + slot, new_mom, mask=head)
    tl.store(w_out + slot[:, None] * D + d[None, :], w - acc * step[:, None], mask=hmask)


class ModelNew(nn.Module):
    """Same interface as the problem's ``Model``: (indices, grad_output, weight, momentum) -> (rows, new rows, new
    state); the inputs are only read."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.lr = 0.005
        self.eps = 1e-8

    def forward(self, indices: torch.Tensor, grad_output: torch.Tensor, weight: torch.Tensor,
                momentum: torch.Tensor):
        batch, bag = indices.shape
        n_rows, dim = weight.shape
        flat = indices.reshape(-1)
        n = flat.numel()
        if n_rows >= 2**31 or n >= 2**31:
            raise ValueError("this kernel indexes rows and positions with int32 (< 2**31)")
        dev = indices.device
        weight, momentum, grad_output = weight.contiguous(), momentum.contiguous(), grad_output.contiguous()
        # worst-case outputs (every lookup a distinct row); the first U rows are returned
        rows = torch.empty(n, dtype=torch.int64, device=dev)
        new_weight = torch.empty(n, dim, dtype=weight.dtype, device=dev)
        new_momentum = torch.empty(n, dtype=momentum.dtype, device=dev)
        if n == 0:
            return rows, new_weight, new_momentum
        sorted_idx, perm = torch.sort(flat.to(torch.int32))
        block = 1024
        head = torch.empty(n, dtype=torch.int32, device=dev)
        _head_kernel[(triton.cdiv(n, block),)](sorted_idx, head, n, BLOCK=block, num_warps=4)
        slot = torch.cumsum(head, 0, dtype=torch.int32)
        _launch(_rowwise_adagrad_kernel, (dim, bag, weight.dtype, momentum.dtype, dev),
                lambda meta: (triton.cdiv(n, meta["BLOCK_P"]),),
                sorted_idx, perm, slot, grad_output, weight, momentum, rows, new_weight, new_momentum, n, dim,
                self.lr, self.eps, BAG=bag, BLOCK_D=triton.next_power_of_2(dim))
        u = int(slot[-1])  # the one host synchronisation: after every launch
        return rows[:u], new_weight[:u], new_momentum[:u]
