# DLRM-Bench problem 4: EmbeddingBag (sum) backward to a dense weight gradient.
# Shapes as problem 1, from MLPerf DLRM-v2 (mlcommons/training recommendation_v2/torchrec_dlrm/README.MD): 8192 samples
# per GPU, dimension 128, bag size 100 (feature 20), table capped at 4,000,000 rows (MLPerf: 40,000,000), so the dense
# gradient is 4,000,000 x 128 fp32 = 2 GB.
import torch
import torch.nn as nn


class Model(nn.Module):
    """Weight gradient of ``embedding_bag(indices, weight, mode="sum")`` for an upstream gradient ``grad_output``:
    grad[r] = sum over (b, l) with indices[b, l] == r of grad_output[b].

    Inputs: indices int64 [batch_size, bag_size] in [0, num_embeddings); grad_output float32 [batch_size, embedding_dim].
    Output: float32 [num_embeddings, embedding_dim] (dense; rows never looked up are zero). Eager PyTorch dispatches
    ``aten::_embedding_bag_backward`` (what autograd runs): zero fill, radix sort, ``krn_partials_per_segment``,
    ``compute_grad_weight_bags``, ``sum_and_scatter``.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.num_embeddings = num_embeddings

    def forward(self, indices: torch.Tensor, grad_output: torch.Tensor) -> torch.Tensor:
        batch, bag = indices.shape
        flat = indices.reshape(-1)
        offsets = torch.arange(0, batch * bag, bag, device=indices.device)
        offset2bag = torch.arange(batch * bag, device=indices.device) // bag
        bag_size = torch.full((batch,), bag, dtype=torch.long, device=indices.device)
        max_indices = torch.empty(0, dtype=torch.long, device=indices.device)
        return torch.ops.aten._embedding_bag_backward(grad_output, flat, offsets, offset2bag, bag_size, max_indices,
                                                      self.num_embeddings, False, 0, False, None, -1)


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
