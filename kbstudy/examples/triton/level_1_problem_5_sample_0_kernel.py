"""kbstudy example candidate for KernelBench level 1 problem 5 (matrix-scalar multiplication): elementwise Triton."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(a_ptr, c_ptr, n_elements, s, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    a = tl.load(a_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    tl.store(c_ptr + offsets, (a * s).to(c_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        A = A.contiguous()
        C = torch.empty_like(A)
        n = A.numel()
        BLOCK = 4096
        scale_kernel[(triton.cdiv(n, BLOCK),)](A, C, n, float(s), BLOCK=BLOCK)
        return C
