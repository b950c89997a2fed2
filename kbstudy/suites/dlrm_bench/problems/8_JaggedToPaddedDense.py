# DLRM-Bench problem 8: jagged (values + lengths) to padded dense [batch, max_length, dim] (FBGEMM
# ``jagged_2d_to_dense``), as for sequence features fed to attention-style interaction layers.
# Shapes from MLPerf DLRM-v2 (mlcommons/training recommendation_v2/torchrec_dlrm/README.MD): 8192 samples per GPU,
# dimension 128; max length 100 = the largest multi-hot size (feature 20); lengths uniform in [0, 100].
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """out[b, l] = values[offsets[b] + l] if l < lengths[b] else 0, offsets = exclusive cumsum of lengths.

    Inputs: values float32 [total, embedding_dim]; lengths int64 [batch_size] in [0, max_length], sum = total.
    Output: float32 [batch_size, max_length, embedding_dim]. Eager PyTorch: zero fill, a boolean mask,
    ``index_put_`` (``index_elementwise_kernel``).
    """

    def __init__(self, max_length: int):
        super().__init__()
        self.max_length = max_length

    def forward(self, values: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        batch = lengths.shape[0]
        positions = torch.arange(self.max_length, device=values.device)
        mask = positions.unsqueeze(0) < lengths.unsqueeze(1)
        out = values.new_zeros(batch, self.max_length, values.shape[1])
        out[mask] = values
        return out


batch_size = 8192
embedding_dim = 128
max_length = 100


def get_inputs():
    lengths = torch.randint(0, max_length + 1, (batch_size,))
    values = torch.randn(int(lengths.sum()), embedding_dim)
    return [values, lengths]


def get_init_inputs():
    return [max_length]
