# DLRM-Bench problem 6: int8 row-wise quantized EmbeddingBag (inference): dequantize + sum-pool.
# Row layout follows FBGEMM's fused 8-bit row-wise format: embedding_dim uint8 codes, then an fp32 scale and an fp32
# bias (8 bytes), so a row is embedding_dim + 8 bytes. Shapes from MLPerf DLRM-v2
# (mlcommons/training recommendation_v2/torchrec_dlrm/README.MD): 8192 samples per GPU, dimension 128, bag size 100
# (feature 20); table capped at 4,000,000 rows (MLPerf: 40,000,000), 544 MB quantized.
import torch
import torch.nn as nn


class Model(nn.Module):
    """out[b] = sum_l (codes[r] * scale[r] + bias[r]) with r = indices[b, l].

    ``qweight`` (uint8 [num_embeddings, embedding_dim + 8]) is built in ``__init__`` by row-wise min/max quantization
    of a standard-normal table. Input: indices int64 [batch_size, bag_size]. Output: float32
    [batch_size, embedding_dim]. Eager PyTorch: a row gather (``indexSelectLargeIndex``), elementwise dequantization
    and a sum reduction.
    """

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
        rows = self.qweight[indices]
        scale_bias = rows[..., d:].contiguous().view(torch.float32)
        values = rows[..., :d].to(torch.float32)
        return (values * scale_bias[..., :1] + scale_bias[..., 1:]).sum(dim=1)


batch_size = 8192
embedding_dim = 128
num_embeddings = 4000000
bag_size = 100


def get_inputs():
    indices = torch.randint(0, num_embeddings, (batch_size, bag_size))
    return [indices]


def get_init_inputs():
    return [num_embeddings, embedding_dim]
