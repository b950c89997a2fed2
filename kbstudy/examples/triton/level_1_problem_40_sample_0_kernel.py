"""kbstudy example candidate for KernelBench level 1 problem 40 (LayerNorm over the trailing ``normalized_shape``).

Keeps the problem's ``nn.LayerNorm`` submodule (``self.ln``) so its weight and bias, and the state dict, are the
reference's; only the computation is replaced. One program per normalised row of N = prod(normalized_shape)
elements: three passes over the row (mean, variance about the mean, then the affine store), each a masked block
loop, so rows of any length fit. Biased variance, as ``torch.nn.functional.layer_norm``.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * N
    y_row = y_ptr + row * N
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, N, BLOCK):
        mask = start + cols < N
        acc += tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, N, BLOCK):
        mask = start + cols < N
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    for start in range(0, N, BLOCK):
        mask = start + cols < N
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = tuple(self.ln.normalized_shape)
        if tuple(x.shape[x.dim() - len(shape):]) != shape:
            raise ValueError(f"input shape {tuple(x.shape)} does not end with normalized_shape {shape}")
        x = x.contiguous()
        y = torch.empty_like(x)
        N = self.ln.weight.numel()
        rows = x.numel() // N
        weight = self.ln.weight.detach().to(x.dtype).contiguous()
        bias = self.ln.bias.detach().to(x.dtype).contiguous()
        BLOCK = min(4096, triton.next_power_of_2(N))
        layernorm_kernel[(rows,)](x, weight, bias, y, N, float(self.ln.eps), BLOCK=BLOCK)
        return y
