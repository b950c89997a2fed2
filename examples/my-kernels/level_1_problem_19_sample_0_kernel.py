"""An example candidate for KernelBench level 1, problem 19 (19_ReLU.py): ``ModelNew`` with one Triton kernel.

KernelBench's naming, ``level_{L}_problem_{P}_sample_{S}_kernel.py``, tells kbstudy which problem this file answers;
the folder's name (``my-kernels``) becomes the candidate's model configuration. ``ModelNew`` takes the same
constructor arguments and ``forward`` signature as the problem's ``Model``. On a machine without a GPU kbstudy runs
Triton under its interpreter (``TRITON_INTERPRET=1``); on a GPU the kernel compiles as usual.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements  # the last block may be partial
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(y_ptr + offsets, tl.where(x > 0, x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        BLOCK = 1024
        relu_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)
        return y
