"""kbstudy-triton candidate for DLRM-Bench problem 6 (int8 row-wise quantized EmbeddingBag, dequantize + sum).

One program per bag: the quantized rows are read as 32-bit words (4 codes each; a [BLOCK_L, D/4] tile per step),
the rows' fp32 scale and bias are read from the same words through a float32 pointer, and the four byte lanes are
dequantized and pooled in registers, then stored interleaved. The eager path's [batch, bag, dim + 8] gather and its fp32 intermediates never exist.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _int8_bag_kernel(idx_ptr, qw_ptr, out_ptr, L, D, ROW_WORDS, BLOCK_L: tl.constexpr, BLOCK_W: tl.constexpr):
    """qw_ptr: the quantized table as 32-bit words, [N, ROW_WORDS]; word w of a row holds codes 4w .. 4w+3."""
    b = tl.program_id(0).to(tl.int64)
    w = tl.arange(0, BLOCK_W)
    n_words = D // 4
    wmask = w < n_words
    acc0 = tl.zeros([BLOCK_W], dtype=tl.float32)
    acc1 = tl.zeros([BLOCK_W], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK_W], dtype=tl.float32)
    acc3 = tl.zeros([BLOCK_W], dtype=tl.float32)
    for l0 in range(0, L, BLOCK_L):
        l = l0 + tl.arange(0, BLOCK_L)
        lmask = l < L
        rows = tl.load(idx_ptr + b * L + l, mask=lmask, other=0)
        base = rows * ROW_WORDS
        scale = tl.load((qw_ptr + base + n_words).to(tl.pointer_type(tl.float32)), mask=lmask, other=0.0)
        bias = tl.load((qw_ptr + base + n_words + 1).to(tl.pointer_type(tl.float32)), mask=lmask, other=0.0)
        words = tl.load(qw_ptr + base[:, None] + w[None, :], mask=lmask[:, None] & wmask[None, :], other=0)
        s = scale[:, None]
        bb = bias[:, None]
        acc0 += tl.sum((words & 0xFF).to(tl.float32) * s + bb, axis=0)
        acc1 += tl.sum(((words >> 8) & 0xFF).to(tl.float32) * s + bb, axis=0)
        acc2 += tl.sum(((words >> 16) & 0xFF).to(tl.float32) * s + bb, axis=0)
        acc3 += tl.sum(((words >> 24) & 0xFF).to(tl.float32) * s + bb, axis=0)
    o = out_ptr + b * D + 4 * w
    tl.store(o, acc0, mask=wmask)
    tl.store(o + 1, acc1, mask=wmask)
    tl.store(o + 2, acc2, mask=wmask)
    tl.store(o + 3, acc3, mask=wmask)


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
        words = q.view(torch.int32)  # [N, (D + 8) / 4]: codes 4 per word (little-endian), then scale, bias
        indices = indices.contiguous()
        batch, bag = indices.shape
        out = torch.empty(batch, d, device=q.device, dtype=torch.float32)
        _int8_bag_kernel[(batch,)](indices, words, out, bag, d, words.shape[1],
                                   BLOCK_L=min(32, triton.next_power_of_2(bag)),
                                   BLOCK_W=max(16, triton.next_power_of_2(d // 4)), num_warps=4)
        return out
