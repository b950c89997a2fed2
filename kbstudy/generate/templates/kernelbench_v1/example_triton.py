import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_add_relu_kernel(x_ptr, y_ptr, out_ptr, scale, n_elements, BLOCK_SIZE: tl.constexpr):
    # one program per BLOCK_SIZE consecutive elements of the flattened tensors
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    out = tl.maximum(x * scale + y, 0.0)
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def scaled_add_relu(x: torch.Tensor, y: torch.Tensor, scale: float) -> torch.Tensor:
    x = x.contiguous()
    y = y.contiguous()
    out = torch.empty_like(x)
    n_elements = out.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
    scaled_add_relu_kernel[grid](x, y, out, scale, n_elements, BLOCK_SIZE=1024)
    return out


class ModelNew(nn.Module):
    """relu(x * scale + y) in one Triton kernel: one read of each input, one write of the output."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return scaled_add_relu(x, y, self.scale)
