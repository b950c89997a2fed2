# DLRM-Bench problem 2: EmbeddingBag with variable bag lengths (jagged, lengths -> offsets) and per-sample weights.
# Shapes: MLPerf DLRM-v2 (mlcommons/training recommendation_v2/torchrec_dlrm/README.MD): 8192 samples per GPU,
# embedding dimension 128; mean bag length 27 (multi-hot size of feature 21), lengths uniform in [1, 2*27);
# table capped at 4,000,000 rows (MLPerf: 40,000,000) to fit one GPU.
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Weighted sum pooling over jagged bags: out[b] = sum_{j in bag b} w[j] * weight[indices[j]].

    Inputs: indices int64 [total] in [0, num_embeddings); lengths int64 [batch_size] (>= 1, sum = total);
    per_sample_weights float32 [total]. Output: float32 [batch_size, embedding_dim]. Eager PyTorch: ``cumsum`` for the
    offsets, then ``aten::_embedding_bag`` with per-sample weights.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.bag = nn.EmbeddingBag(num_embeddings, embedding_dim, mode="sum", include_last_offset=True)

    def forward(self, indices: torch.Tensor, lengths: torch.Tensor, per_sample_weights: torch.Tensor) -> torch.Tensor:
        offsets = F.pad(torch.cumsum(lengths, 0), (1, 0))
        return self.bag(indices, offsets, per_sample_weights=per_sample_weights)


batch_size = 8192
embedding_dim = 128
num_embeddings = 4000000
mean_bag_size = 27


def get_inputs():
    lengths = torch.randint(1, 2 * mean_bag_size, (batch_size,))
    total = int(lengths.sum())
    indices = torch.randint(0, num_embeddings, (total,))
    per_sample_weights = torch.rand(total)
    return [indices, lengths, per_sample_weights]


def get_init_inputs():
    return [num_embeddings, embedding_dim]
