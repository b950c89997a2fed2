# DLRM-Bench problem 9: DLRM pairwise dot interaction (facebookresearch/dlrm ``interact_features``, "dot").
# Shapes from MLPerf DLRM-v2 (mlcommons/training recommendation_v2/torchrec_dlrm/README.MD): 8192 samples per GPU,
# 26 sparse features + the bottom-MLP output = 27 vectors of dimension 128; output 128 + 27*26/2 = 479 wide.
import torch
import torch.nn as nn


class Model(nn.Module):
    """T = [dense; sparse] (float32 [batch, 27, dim]); Z = T T^T; out = [dense, Z[i, j] for i > j] (row-major order
    of ``torch.tril_indices(27, 27, -1)``).

    Inputs: dense float32 [batch_size, embedding_dim]; sparse float32 [batch_size, num_sparse_features, embedding_dim].
    Output: float32 [batch_size, embedding_dim + 351]. Eager PyTorch: ``cat``, batched GEMM (``bmm``), an index gather,
    ``cat``.
    """

    def __init__(self, num_sparse_features: int):
        super().__init__()
        f = num_sparse_features + 1
        li, lj = torch.tril_indices(f, f, offset=-1)
        self.register_buffer("li", li, persistent=False)
        self.register_buffer("lj", lj, persistent=False)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        t = torch.cat([dense.unsqueeze(1), sparse], dim=1)
        z = torch.bmm(t, t.transpose(1, 2))
        return torch.cat([dense, z[:, self.li, self.lj]], dim=1)


batch_size = 8192
embedding_dim = 128
num_sparse_features = 26


def get_inputs():
    return [torch.randn(batch_size, embedding_dim), torch.randn(batch_size, num_sparse_features, embedding_dim)]


def get_init_inputs():
    return [num_sparse_features]
