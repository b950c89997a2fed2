"""kbstudy-triton candidate for DLRM-Bench problem 6 (int8 row-wise quantized EmbeddingBag, dequantize + sum).

One program per bag: a [BLOCK_L, BLOCK_D] tile of uint8 codes is gathered straight from the quantized rows, the
rows' fp32 scale and bias are read through a float32 view of the same buffer, and dequantization and pooling happen
in registers. The eager path's [batch, bag, dim + 8] gather and its fp32 intermediates never exist.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _int8_bag_kernel(idx_ptr, q_ptr, qf_ptr, out_ptr, L, D, ROW_BYTES, ROW_WORDS,
                     BLOCK_L: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    acc = tl.zeros([BLOCK_L, BLOCK_D], dtype=tl.float32)
    for l0 in range(0, L, BLOCK_L):
        l = l0 + tl.arange(0, BLOCK_L)
        lmask = l < L
        rows = tl.load(idx_ptr + b * L + l, mask=lmask, other=0)
        scale = tl.load(qf_ptr + rows * ROW_WORDS + D // 4, mask=lmask, other=0.0)
        bias = tl.load(qf_ptr + rows * ROW_WORDS + D // 4 + 1, mask=lmask, other=0.0)
        codes = tl.load(q_ptr + rows[:, None] * ROW_BYTES + d[None, :], mask=lmask[:, None] & dmask[None, :], other=0)
        vals = codes.to(tl.float32) * scale[:, None] + bias[:, None]
        acc += tl.where(lmask[:, None] & dmask[None, :], vals, 0.0)
    tl.store(out_ptr + b * D + d, tl.sum(acc, axis=0), mask=dmask)


class ModelNew(nn.Module):
    """Same buffer as the problem's ``Model`` (``qweight``, uint8 [num_embeddings, embedding_dim + 8])."""

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        w = torch.randn(num_embeddings, embedding_dim)
        lo = w.min(dim=1, keepdim=True).values
        hi = w.max(dim=1, keepdim=True).values
        scale = (hi - lo).clamp_min(1e-8) / 255.0
        codes = torch.round((w - lo) / scale).clamp(0, 255).to(torch.uint8)
        scale_bias = torch.cat([scale, lo], dim=1).contiguous().view(torch.uint8)
        self.register_buffer("qweight", torch.cat([codes, scale_bias], dim=1).contiguous())
        self.embedding_dim = embedding_dim

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        d = self.embedding_dim
        if d % 4:
            raise ValueError(f"embedding_dim must be a multiple of 4 (fp32 scale/bias alignment), got {d}")
        q = self.qweight
        row_bytes = q.shape[1]
        qf = q.view(torch.float32)  # [N, row_bytes / 4]: the same bytes read as fp32 words
        indices = indices.contiguous()
        batch, bag = indices.shape
        out = torch.empty(batch, d, device=q.device, dtype=torch.float32)
        _int8_bag_kernel[(batch,)](indices, q, qf, out, bag, d, row_bytes, row_bytes // 4,
                                   BLOCK_L=min(32, triton.next_power_of_2(bag)), BLOCK_D=triton.next_power_of_2(d),
                                   num_warps=4)
        return out
