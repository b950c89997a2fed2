"""kbstudy example candidate for KernelBench level 1 problem 36 (RMSNorm over dim 1 of a (B, C, *) input).

y = x / sqrt(mean_c(x^2) + eps). One program per (batch, block of trailing positions); it loops over the feature
dimension twice (sum of squares, then the scaled store), so any number of features fits.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, y_ptr, C, S, eps, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    s_offs = tl.program_id(1) * BLOCK_S + tl.arange(0, BLOCK_S)
    s_mask = s_offs < S
    base = b * C * S
    c_range = tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_S,), tl.float32)
    for c0 in range(0, C, BLOCK_C):
        c = c0 + c_range
        mask = (c[:, None] < C) & s_mask[None, :]
        x = tl.load(x_ptr + base + c[:, None].to(tl.int64) * S + s_offs[None, :], mask=mask, other=0.0)
        x = x.to(tl.float32)
        acc += tl.sum(x * x, axis=0)
    inv_rms = 1.0 / tl.sqrt(acc / C + eps)
    for c0 in range(0, C, BLOCK_C):
        c = c0 + c_range
        mask = (c[:, None] < C) & s_mask[None, :]
        offs = base + c[:, None].to(tl.int64) * S + s_offs[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + offs, (x * inv_rms[None, :]).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() < 2:
            raise ValueError(f"expected an input of shape (batch, features, *), got {tuple(x.shape)}")
        x = x.contiguous()
        y = torch.empty_like(x)
        B, C = x.shape[0], x.shape[1]
        S = x[0, 0].numel()  # product of the trailing dimensions (1 for a 2-D input)
        BLOCK_C = min(16, triton.next_power_of_2(C))
        BLOCK_S = min(256, triton.next_power_of_2(S))
        rmsnorm_kernel[(B, triton.cdiv(S, BLOCK_S))](x, y, C, S, float(self.eps), BLOCK_C=BLOCK_C, BLOCK_S=BLOCK_S)
        return y
