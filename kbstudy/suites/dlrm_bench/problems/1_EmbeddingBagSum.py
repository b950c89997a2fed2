# DLRM-Bench problem 1: EmbeddingBag sum pooling, fixed bag size, forward.
# Shapes: MLPerf DLRM-v2 (mlcommons/training recommendation_v2/torchrec_dlrm/README.MD): batch 65536 over 8 GPUs
# = 8192 per GPU, embedding dimension 128; bag size 100 = the largest multi-hot size (feature 20); the feature's
# 40,000,000-row table is capped at 4,000,000 rows (2 GB in fp32) so that the problem fits one GPU with room to spare.
import torch
import torch.nn as nn


class Model(nn.Module):
    """Sum-pooled embedding lookup: out[b] = sum_l weight[indices[b, l]].

    Inputs: indices int64 [batch_size, bag_size] in [0, num_embeddings). Output: float32 [batch_size, embedding_dim].
    Eager PyTorch dispatches ``aten::_embedding_bag`` (``EmbeddingBag_updateOutputKernel_sum_mean``).
    """

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.bag = nn.EmbeddingBag(num_embeddings, embedding_dim, mode="sum")

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        return self.bag(indices)


batch_size = 8192
embedding_dim = 128
num_embeddings = 4000000
bag_size = 100


def get_inputs():
    indices = torch.randint(0, num_embeddings, (batch_size, bag_size))
    return [indices]


def get_init_inputs():
    return [num_embeddings, embedding_dim]
