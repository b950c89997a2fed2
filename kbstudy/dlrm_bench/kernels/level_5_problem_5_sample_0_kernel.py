"""kbstudy-triton candidate for DLRM-Bench problem 5 (fused EmbeddingBag backward + row-wise Adagrad, in place).

Only the rows that were looked up are touched (the FBGEMM TBE approach), instead of a dense gradient and dense
optimizer passes over the whole table:

1. ``torch.sort`` of the flat indices as int32 keys (tables and batches below 2**31): runs of equal rows.
2. Triton ``_run_end_kernel``: ``end[row]`` = one past the last position of the row's run (written only for rows that
   occur; the array is never read for other rows, so it needs no fill).
3. Triton ``_rowwise_adagrad_kernel``: a program takes ``BLOCK_P`` sorted positions; each run head sums the
   ``grad_output`` rows of its run (L2-resident gathers), then updates the row's state and weight:
   ``m += mean(g^2)``; ``w -= g * (lr / (sqrt(m) + eps))`` (the problem's update, rounded slightly differently).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _run_end_kernel(sorted_ptr, end_ptr, n, BLOCK: tl.constexpr):
    j = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = j < n
    r = tl.load(sorted_ptr + j, mask=m, other=0)
    nxt = tl.load(sorted_ptr + j + 1, mask=(j + 1) < n, other=-1)
    tl.store(end_ptr + r, (j + 1).to(tl.int32), mask=m & (r != nxt))


@triton.jit
def _rowwise_adagrad_kernel(sorted_ptr, end_ptr, perm_ptr, grad_ptr, w_ptr, mom_ptr, n, L, D, lr, eps,
                            BLOCK_P: tl.constexpr, BLOCK_D: tl.constexpr):
    j = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    m = j < n
    r = tl.load(sorted_ptr + j, mask=m, other=0)
    prev = tl.load(sorted_ptr + j - 1, mask=m & (j > 0), other=-1)
    head = m & (r != prev)
    run_end = tl.load(end_ptr + r, mask=head, other=0)
    c = tl.where(head, run_end - j, 0)
    max_c = tl.max(c, axis=0)
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    acc = tl.zeros([BLOCK_P, BLOCK_D], dtype=tl.float32)
    for k in range(0, max_c):
        valid = k < c
        p = tl.load(perm_ptr + j + k, mask=valid, other=0)
        bag = p // L
        acc += tl.load(grad_ptr + bag[:, None] * D + d[None, :], mask=valid[:, None] & dmask[None, :],
                       other=0.0).to(tl.float32)
    row = r.to(tl.int64)
    sq = tl.sum(acc * acc, axis=1)
    mom = tl.load(mom_ptr + row, mask=head, other=0.0) + sq / D
    tl.store(mom_ptr + row, mom, mask=head)
    step = lr / (tl.sqrt(mom) + eps)
    wmask = head[:, None] & dmask[None, :]
    wptr = w_ptr + row[:, None] * D + d[None, :]
    w = tl.load(wptr, mask=wmask, other=0.0)
    tl.store(wptr, w - acc * step[:, None], mask=wmask)


class ModelNew(nn.Module):
    """Same buffers as the problem's ``Model`` (``weight``, ``momentum``), updated in place; returns ``weight``."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.register_buffer("weight", torch.randn(num_embeddings, embedding_dim))
        self.register_buffer("momentum", torch.zeros(num_embeddings))
        self.lr = 0.005
        self.eps = 1e-8

    def forward(self, indices: torch.Tensor, grad_output: torch.Tensor) -> torch.Tensor:
        batch, bag = indices.shape
        n_rows, dim = self.weight.shape
        flat = indices.reshape(-1)
        if n_rows >= 2**31 or flat.numel() >= 2**31:
            raise ValueError("this kernel indexes rows and positions with int32 (< 2**31)")
        sorted_idx, perm = torch.sort(flat.to(torch.int32))
        n = flat.numel()
        end = torch.empty(n_rows, dtype=torch.int32, device=indices.device)
        block = 1024
        _run_end_kernel[(triton.cdiv(n, block),)](sorted_idx, end, n, BLOCK=block, num_warps=4)
        block_p = 32
        _rowwise_adagrad_kernel[(triton.cdiv(n, block_p),)](sorted_idx, end, perm, grad_output.contiguous(), self.weight,
                                                           self.momentum, n, bag, dim, self.lr, self.eps,
                                                           BLOCK_P=block_p, BLOCK_D=triton.next_power_of_2(dim),
                                                           num_warps=4)
        return self.weight
