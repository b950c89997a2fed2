"""kbstudy-triton candidate for DLRM-Bench problem 8 (jagged values + lengths to padded dense).

Two launches: a single-program exclusive scan of the lengths, then a [batch, cdiv(max_length, BLOCK_L)] grid in which
each program copies a [BLOCK_L, dim] tile of its sample's rows (or writes zeros past the sample's length). Every
output byte is written once and every value read once, with no zero-fill pass and no boolean-mask ``nonzero``.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _exclusive_scan_kernel(len_ptr, off_ptr, n, BLOCK: tl.constexpr):
    carry = tl.zeros([], dtype=tl.int64)
    for s in range(0, n, BLOCK):
        i = s + tl.arange(0, BLOCK)
        x = tl.load(len_ptr + i, mask=i < n, other=0).to(tl.int64)
        inclusive = tl.cumsum(x, axis=0)
        tl.store(off_ptr + i, carry + inclusive - x, mask=i < n)
        carry += tl.sum(x, axis=0)
    tl.store(off_ptr + n, carry)


@triton.jit
def _jagged_to_padded_kernel(values_ptr, len_ptr, off_ptr, out_ptr, max_len, D,
                             BLOCK_L: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    l = tl.program_id(1) * BLOCK_L + tl.arange(0, BLOCK_L)
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    length = tl.load(len_ptr + b)
    start = tl.load(off_ptr + b)
    inside = l < length
    vals = tl.load(values_ptr + (start + l)[:, None] * D + d[None, :], mask=inside[:, None] & dmask[None, :], other=0.0)
    tl.store(out_ptr + (b * max_len + l)[:, None] * D + d[None, :], vals, mask=(l < max_len)[:, None] & dmask[None, :])


class ModelNew(nn.Module):
    """Same (parameter-free) construction as the problem's ``Model``; forward is two Triton launches."""

    def __init__(self, max_length: int):
        super().__init__()
        self.max_length = max_length

    def forward(self, values: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        batch = lengths.shape[0]
        dim = values.shape[1]
        lengths = lengths.contiguous()
        offsets = torch.empty(batch + 1, device=lengths.device, dtype=torch.int64)
        _exclusive_scan_kernel[(1,)](lengths, offsets, batch, BLOCK=4096, num_warps=8)
        out = torch.empty(batch, self.max_length, dim, device=values.device, dtype=values.dtype)
        block_l = 16
        _jagged_to_padded_kernel[(batch, triton.cdiv(self.max_length, block_l))](
            values.contiguous(), lengths, offsets, out, self.max_length, dim,
            BLOCK_L=block_l, BLOCK_D=triton.next_power_of_2(dim), num_warps=4)
        return out
