"""kbstudy-triton candidate for DLRM-Bench problem 9 (DLRM pairwise dot interaction).

One program per sample: the 27 feature vectors (row 0 = dense, rows 1..26 = sparse) are loaded once as a
[32, BLOCK_D] tile (rows 27..31 masked to zero), Z = T T^T is one ``tl.dot`` (Tensor Cores with 3-pass TF32,
``input_precision="tf32x3"``, which keeps fp32 accuracy; plain FMA if a Triton build lacks it), and the strict lower
triangle is stored straight to its place ``128 + i(i-1)/2 + j`` of the output row, next to the copied dense vector.
No [B, 27, 27] intermediate, no gather, no ``cat``.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _dot_interaction_kernel(dense_ptr, sparse_ptr, out_ptr, D, NS, OUT_W,
                            BLOCK_F: tl.constexpr, BLOCK_D: tl.constexpr, PRECISION: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    i = tl.arange(0, BLOCK_F)
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    F = NS + 1
    sp_rows = b * NS + i - 1
    t = tl.load(sparse_ptr + sp_rows[:, None] * D + d[None, :], mask=((i >= 1) & (i < F))[:, None] & dmask[None, :],
                other=0.0)
    dense = tl.load(dense_ptr + b * D + d, mask=dmask, other=0.0)
    t = tl.where((i == 0)[:, None], dense[None, :], t)
    z = tl.dot(t, tl.trans(t), input_precision=PRECISION)
    tl.store(out_ptr + b * OUT_W + d, dense, mask=dmask)
    j = tl.arange(0, BLOCK_F)
    pos = (i * (i - 1)) // 2
    tri = (i[:, None] > j[None, :]) & (i < F)[:, None]
    tl.store(out_ptr + b * OUT_W + D + pos[:, None] + j[None, :], z, mask=tri)


_PRECISIONS = ["tf32x3", "ieee"]


class ModelNew(nn.Module):
    """Same (parameter-free) construction as the problem's ``Model``; forward is one Triton launch."""

    def __init__(self, num_sparse_features: int):
        super().__init__()
        self.num_sparse_features = num_sparse_features

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        batch, dim = dense.shape
        ns = self.num_sparse_features
        f = ns + 1
        out_w = dim + f * (f - 1) // 2
        out = torch.empty(batch, out_w, device=dense.device, dtype=dense.dtype)
        block_f = max(16, triton.next_power_of_2(f))
        block_d = max(16, triton.next_power_of_2(dim))
        while True:
            try:
                _dot_interaction_kernel[(batch,)](dense.contiguous(), sparse.contiguous(), out, dim, ns, out_w,
                                                  BLOCK_F=block_f, BLOCK_D=block_d, PRECISION=_PRECISIONS[0],
                                                  num_warps=4)
                return out
            except Exception:
                if len(_PRECISIONS) == 1:
                    raise
                _PRECISIONS.pop(0)  # this Triton cannot lower tf32x3 here: fall back to IEEE fp32 FMA
