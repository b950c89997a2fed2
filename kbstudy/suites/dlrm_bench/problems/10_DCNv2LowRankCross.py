# DLRM-Bench problem 10: DCN-v2 low-rank cross network (TorchRec ``LowRankCrossNet``), 3 layers, in bf16.
# Shapes from MLPerf DLRM-v2 (mlcommons/training recommendation_v2/torchrec_dlrm/README.MD): interaction "DCN, 3
# layers, low rank 512"; width 26*128 + 128 = 3456; 8192 samples per GPU. bf16 is our choice (the H200's matrix
# precision for a mixed-precision step); the MLPerf reference code itself runs fp32.
import torch
import torch.nn as nn


class Model(nn.Module):
    """x_{l+1} = x_0 * (W_l (V_l x_l) + b_l) + x_l for l = 0..num_layers-1.

    V_l: bf16 [low_rank, in_features] (no bias), W_l: bf16 [in_features, low_rank] with bias bf16 [in_features].
    Input: x float/bf16 [batch_size, in_features] (bf16 from ``get_inputs``). Output: bf16 [batch_size, in_features].
    Eager PyTorch: per layer two GEMMs (cuBLAS, bias in the epilogue) and two elementwise kernels.
    """

    def __init__(self, in_features: int, low_rank: int, num_layers: int):
        super().__init__()
        self.V = nn.ModuleList(nn.Linear(in_features, low_rank, bias=False, dtype=torch.bfloat16) for _ in range(num_layers))
        self.W = nn.ModuleList(nn.Linear(low_rank, in_features, bias=True, dtype=torch.bfloat16) for _ in range(num_layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x0 = x
        for v, w in zip(self.V, self.W):
            x = x0 * w(v(x)) + x
        return x


batch_size = 8192
embedding_dim = 128
num_sparse_features = 26
low_rank = 512
num_layers = 3


def get_inputs():
    in_features = (num_sparse_features + 1) * embedding_dim
    return [torch.randn(batch_size, in_features, dtype=torch.bfloat16)]


def get_init_inputs():
    return [(num_sparse_features + 1) * embedding_dim, low_rank, num_layers]
