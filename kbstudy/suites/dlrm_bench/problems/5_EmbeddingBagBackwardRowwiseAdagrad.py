# DLRM-Bench problem 5: fused EmbeddingBag backward + row-wise Adagrad step on the touched rows (what FBGEMM's TBE
# ``split_embedding_backward_codegen_rowwise_adagrad`` kernels do for TorchRec), in functional form: the table and the
# optimizer state are inputs, never written; the step's result is returned as the sparse update (touched row ids,
# their new rows, their new state), which a caller applies with ``index_copy_``. Repeated calls are independent.
# Shapes as problem 1, from MLPerf DLRM-v2 (mlcommons/training recommendation_v2/torchrec_dlrm/README.MD): 8192 samples
# per GPU, dimension 128, bag size 100, table capped at 4,000,000 rows; Adagrad with learning rate 0.005 (the MLPerf
# DLRM-v2 optimizer and rate); eps 1e-8 (FBGEMM's default). The state is drawn from U[0, 1) (a step mid-training).
import torch
import torch.nn as nn


class Model(nn.Module):
    """One row-wise Adagrad step of an EmbeddingBag table from the upstream gradient of a sum-pooled lookup.

    g = dense weight gradient (as problem 4); for every row r looked up at least once (sorted ascending):
    state'[r] = state[r] + mean_d g[r, d]^2; weight'[r] = weight[r] - lr * g[r] / (sqrt(state'[r]) + eps).
    Inputs: indices int64 [batch_size, bag_size] in [0, num_embeddings); grad_output float32 [batch_size,
    embedding_dim]; weight float32 [num_embeddings, embedding_dim]; momentum float32 [num_embeddings] (not modified).
    Outputs (tuple): rows int64 [U] (the distinct looked-up rows, ascending), new_weight float32 [U, embedding_dim],
    new_momentum float32 [U]. Eager PyTorch: the dense backward of problem 4, ``unique`` (sort), row gathers and
    elementwise kernels over the U touched rows.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.lr = 0.005
        self.eps = 1e-8

    def forward(self, indices: torch.Tensor, grad_output: torch.Tensor, weight: torch.Tensor,
                momentum: torch.Tensor):
        batch, bag = indices.shape
        n = weight.shape[0]
        flat = indices.reshape(-1)
        offsets = torch.arange(0, batch * bag, bag, device=indices.device)
        offset2bag = torch.arange(batch * bag, device=indices.device) // bag
        bag_size = torch.full((batch,), bag, dtype=torch.long, device=indices.device)
        max_indices = torch.empty(0, dtype=torch.long, device=indices.device)
        grad = torch.ops.aten._embedding_bag_backward(grad_output, flat, offsets, offset2bag, bag_size, max_indices,
                                                      n, False, 0, False, None, -1)
        rows = torch.unique(flat)
        g = grad[rows]
        new_momentum = momentum[rows] + g.pow(2).mean(dim=1)
        new_weight = weight[rows] - self.lr * g / (new_momentum.sqrt() + self.eps).unsqueeze(1)
        return rows, new_weight, new_momentum


batch_size = 8192
embedding_dim = 128
num_embeddings = 4000000
bag_size = 100


def get_inputs():
    indices = torch.randint(0, num_embeddings, (batch_size, bag_size))
    grad_output = torch.randn(batch_size, embedding_dim)
    weight = torch.randn(num_embeddings, embedding_dim)
    momentum = torch.rand(num_embeddings)
    return [indices, grad_output, weight, momentum]


def get_init_inputs():
    return [num_embeddings, embedding_dim]
