"""kbstudy example candidate for KernelBench level 1 problem 23 (Softmax over dim 1 of a 2-D input).

One program per row; an online pass computes the row's running maximum and rescaled sum block by block
(Milakov & Gimelshein 2018, "Online normalizer calculation for softmax"), a second pass writes exp(x - max) / sum.
Rows of any length: the column loop masks the last block.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * row_stride
    y_row = y_ptr + row * row_stride
    cols = tl.arange(0, BLOCK)
    m = tl.full((BLOCK,), float("-inf"), tl.float32)  # per-lane running maximum
    s = tl.zeros((BLOCK,), tl.float32)  # per-lane running sum of exp(x - m)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # lanes that have seen only -inf keep a zero sum (avoid inf - inf)
        s = tl.where(m_new == float("-inf"), 0.0, s * tl.exp(m - m_new) + tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(tl.where(m == float("-inf"), 0.0, s * tl.exp(m - row_max)), axis=0)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - row_max) / row_sum
        tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2:
            raise ValueError(f"expected a 2-D input (batch, features), got shape {tuple(x.shape)}")
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        BLOCK = min(4096, triton.next_power_of_2(n_cols))
        softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), BLOCK=BLOCK)
        return y
