# DLRM-Bench problem 5: fused EmbeddingBag backward + row-wise Adagrad update of the table, in place (what FBGEMM's
# TBE ``split_embedding_backward_codegen_rowwise_adagrad`` kernels do for TorchRec).
# Shapes as problem 1, from MLPerf DLRM-v2 (mlcommons/training recommendation_v2/torchrec_dlrm/README.MD): 8192 samples
# per GPU, dimension 128, bag size 100, table capped at 4,000,000 rows; Adagrad with learning rate 0.005 (the MLPerf
# DLRM-v2 optimizer and rate); eps 1e-8 (FBGEMM's default).
import torch
import torch.nn as nn


class Model(nn.Module):
    """One row-wise Adagrad step on an EmbeddingBag table from the upstream gradient of a sum-pooled lookup.

    g = dense weight gradient (as problem 4); state[r] += mean_d g[r, d]^2; weight[r] -= lr * g[r] / (sqrt(state[r]) + eps).
    Rows with no lookup have g[r] = 0 and are unchanged. The table ``weight`` (float32 [num_embeddings, embedding_dim])
    and the row-wise state ``momentum`` (float32 [num_embeddings]) are buffers updated in place; the output is the
    updated table itself (float32 [num_embeddings, embedding_dim]). Inputs: indices int64 [batch_size, bag_size],
    grad_output float32 [batch_size, embedding_dim]. Eager PyTorch: the dense backward of problem 4, then dense
    elementwise/reduction kernels over all rows of the table.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.register_buffer("weight", torch.randn(num_embeddings, embedding_dim))
        self.register_buffer("momentum", torch.zeros(num_embeddings))
        self.lr = 0.005
        self.eps = 1e-8

    def forward(self, indices: torch.Tensor, grad_output: torch.Tensor) -> torch.Tensor:
        batch, bag = indices.shape
        n = self.weight.shape[0]
        flat = indices.reshape(-1)
        offsets = torch.arange(0, batch * bag, bag, device=indices.device)
        offset2bag = torch.arange(batch * bag, device=indices.device) // bag
        bag_size = torch.full((batch,), bag, dtype=torch.long, device=indices.device)
        max_indices = torch.empty(0, dtype=torch.long, device=indices.device)
        grad = torch.ops.aten._embedding_bag_backward(grad_output, flat, offsets, offset2bag, bag_size, max_indices,
                                                      n, False, 0, False, None, -1)
        self.momentum.add_(grad.pow(2).mean(dim=1))
        self.weight.addcdiv_(grad, (self.momentum.sqrt() + self.eps).unsqueeze(1), value=-self.lr)
        return self.weight


batch_size = 8192
embedding_dim = 128
num_embeddings = 4000000
bag_size = 100


def get_inputs():
    indices = torch.randint(0, num_embeddings, (batch_size, bag_size))
    grad_output = torch.randn(batch_size, embedding_dim)
    return [indices, grad_output]


def get_init_inputs():
    return [num_embeddings, embedding_dim]
