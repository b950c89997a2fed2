# DLRM-Bench problem 3: 26-table batched lookup (the TorchRec EmbeddingBagCollection / FBGEMM TBE analog),
# concatenated to [batch, 26 * dim].
# Shapes: MLPerf DLRM-v2 (mlcommons/training recommendation_v2/torchrec_dlrm/README.MD): 26 sparse features with the
# table rows and multi-hot sizes below, embedding dimension 128, 8192 samples per GPU. Each table is capped at
# 4,000,000 rows (the five 40M-row tables), 24.3M rows = 12.4 GB in fp32, to fit one GPU.
import torch
import torch.nn as nn


class Model(nn.Module):
    """26 sum-pooled EmbeddingBags with fixed per-table bag sizes, outputs concatenated.

    Input: indices int64 [batch_size, sum(multi_hot_sizes)]; columns are grouped by table (table t owns
    ``multi_hot_sizes[t]`` consecutive columns) and hold row ids local to that table. Output: float32
    [batch_size, 26 * embedding_dim]. Eager PyTorch: 26 ``EmbeddingBag_updateOutputKernel_sum_mean`` + a ``cat``.
    """

    def __init__(self, table_rows, multi_hot, embedding_dim: int):
        super().__init__()
        self.multi_hot = list(multi_hot)
        self.bags = nn.ModuleList(nn.EmbeddingBag(int(n), embedding_dim, mode="sum") for n in table_rows)

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        cols = torch.split(indices, self.multi_hot, dim=1)
        return torch.cat([bag(c) for bag, c in zip(self.bags, cols)], dim=1)


batch_size = 8192
embedding_dim = 128
max_table_rows = 4000000
# MLPerf DLRM-v2 table rows (before the cap) and multi-hot sizes, in feature order
table_rows = (40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282, 10, 2209, 11938, 155, 4, 976, 14, 40000000, 40000000, 40000000, 590152, 12973, 108, 36)
multi_hot_sizes = (3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1)


def _capped_rows():
    return [min(n, max_table_rows) for n in table_rows]


def get_inputs():
    cols = [torch.randint(0, n, (batch_size, h)) for n, h in zip(_capped_rows(), multi_hot_sizes)]
    return [torch.cat(cols, dim=1)]


def get_init_inputs():
    return [_capped_rows(), list(multi_hot_sizes), embedding_dim]
