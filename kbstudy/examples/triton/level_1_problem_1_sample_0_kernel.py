"""kbstudy example candidate for KernelBench level 1 problem 1 (square matrix multiplication C = A @ B).

A tiled ``tl.dot`` matmul with fp32 accumulation and masked edges (any M, N, K). fp32 inputs use
``input_precision="ieee"`` (no TF32: at K = 4096 TF32's ~1e-3 relative error exceeds KernelBench's fp32 tolerance).
Under Triton's interpreter (``TRITON_INTERPRET=1``, Triton 3.9) ``tl.dot`` on bf16/fp16 tiles is wrong, so there
the tiles are upcast to fp32 first; compiled on a GPU the native half-precision ``tl.dot`` is used.
"""
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, UPCAST: tl.constexpr,
                  PRECISION: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (rn[None, :] < N), other=0.0)
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    c_mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        if A.dim() != 2 or B.dim() != 2 or A.shape[1] != B.shape[0]:
            raise ValueError(f"expected (M, K) @ (K, N), got {tuple(A.shape)} @ {tuple(B.shape)}")
        if A.dtype != B.dtype:
            raise TypeError(f"A and B must share a dtype, got {A.dtype} and {B.dtype}")
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), device=A.device, dtype=A.dtype)
        interpret = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
        fp32 = A.dtype == torch.float32
        upcast = interpret or fp32
        BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32
        grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
        matmul_kernel[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1), C.stride(0),
                            C.stride(1), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, UPCAST=upcast,
                            PRECISION="ieee" if upcast else "tf32")
        return C
