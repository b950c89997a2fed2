"""kbstudy-triton candidate for DLRM-Bench problem 4 (EmbeddingBag sum backward to a dense weight gradient).

The dense gradient (num_embeddings x dim) is written exactly once, with no atomics and no separate zero fill of it:

1. ``torch.sort`` of the flat indices (int32 keys when the table has < 2**31 rows) gives each looked-up row's run of
   positions; ``perm`` maps a position back to its lookup, and lookup ``p`` belongs to bag ``p // bag_size``.
2. Triton ``_segments_kernel``: for every run, ``start[row]`` = first position and ``end[row]`` = one past the last
   (both arrays zero-initialised, so rows never looked up have an empty run).
3. Triton ``_dense_grad_kernel``: one program per block of ``BLOCK_R`` output rows sums ``grad_output`` rows of the
   bags in each row's run (grad_output is 4 MB, so these gathers hit L2) and stores the whole [BLOCK_R, dim] tile,
   zeros included, with contiguous coalesced stores.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _segments_kernel(sorted_ptr, start_ptr, end_ptr, n, BLOCK: tl.constexpr):
    j = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = j < n
    r = tl.load(sorted_ptr + j, mask=m, other=0)
    prev = tl.load(sorted_ptr + j - 1, mask=m & (j > 0), other=-1)
    nxt = tl.load(sorted_ptr + j + 1, mask=(j + 1) < n, other=-1)
    tl.store(start_ptr + r, j.to(tl.int32), mask=m & (r != prev))
    tl.store(end_ptr + r, (j + 1).to(tl.int32), mask=m & (r != nxt))


@triton.jit
def _dense_grad_kernel(start_ptr, end_ptr, perm_ptr, grad_ptr, out_ptr, N, L, D,
                       BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = r < N
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    s = tl.load(start_ptr + r, mask=rmask, other=0)
    c = tl.load(end_ptr + r, mask=rmask, other=0) - s
    max_c = tl.max(c, axis=0)
    acc = tl.zeros([BLOCK_R, BLOCK_D], dtype=tl.float32)
    for k in range(0, max_c):
        valid = rmask & (k < c)
        p = tl.load(perm_ptr + s + k, mask=valid, other=0)
        bag = p // L
        acc += tl.load(grad_ptr + bag[:, None] * D + d[None, :], mask=valid[:, None] & dmask[None, :],
                       other=0.0).to(tl.float32)
    tl.store(out_ptr + r[:, None] * D + d[None, :], acc, mask=rmask[:, None] & dmask[None, :])


class ModelNew(nn.Module):
    """No parameters, like the problem's ``Model``; forward is a sort, a 2 x num_embeddings int32 fill and two Triton
    launches."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.num_embeddings = num_embeddings

    def forward(self, indices: torch.Tensor, grad_output: torch.Tensor) -> torch.Tensor:
        batch, bag = indices.shape
        n_rows = self.num_embeddings
        dim = grad_output.shape[1]
        flat = indices.reshape(-1)
        if n_rows < 2**31:
            flat = flat.to(torch.int32)
        sorted_idx, perm = torch.sort(flat)
        n = flat.numel()
        seg = torch.zeros(2, n_rows, dtype=torch.int32, device=indices.device)
        block = 1024
        _segments_kernel[(triton.cdiv(n, block),)](sorted_idx, seg[0], seg[1], n, BLOCK=block, num_warps=4)
        out = torch.empty(n_rows, dim, device=grad_output.device, dtype=grad_output.dtype)
        block_r = 32
        _dense_grad_kernel[(triton.cdiv(n_rows, block_r),)](seg[0], seg[1], perm, grad_output.contiguous(), out, n_rows,
                                                           bag, dim, BLOCK_R=block_r,
                                                           BLOCK_D=triton.next_power_of_2(dim), num_warps=4)
        return out
