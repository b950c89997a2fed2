# DLRM-Bench problem 11: DLRM bottom MLP 13 -> 512 -> 256 -> 128 with ReLU after every layer (TorchRec ``MLP``), bf16.
# Shapes from MLPerf DLRM-v2 (mlcommons/training recommendation_v2/torchrec_dlrm/README.MD): 13 dense features,
# bottom MLP 512-256-128, 8192 samples per GPU. K = 13 is not a multiple of the Tensor Core tile. bf16 is our choice
# (see problem 10); the MLPerf reference code runs fp32.
import torch
import torch.nn as nn


class Model(nn.Module):
    """relu(L3(relu(L2(relu(L1(x)))))) with bf16 ``nn.Linear`` layers (weights [out, in], bias [out]).

    Input: x bf16 [batch_size, num_dense_features]. Output: bf16 [batch_size, 128]. Eager PyTorch: per layer
    ``addmm`` (cuBLASLt, bias epilogue) and a ReLU elementwise kernel.
    """

    def __init__(self, num_dense_features: int, hidden1: int, hidden2: int, out_features: int):
        super().__init__()
        sizes = [num_dense_features, hidden1, hidden2, out_features]
        self.layers = nn.ModuleList(nn.Linear(a, b, dtype=torch.bfloat16) for a, b in zip(sizes[:-1], sizes[1:]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


batch_size = 8192
num_dense_features = 13
hidden1 = 512
hidden2 = 256
out_features = 128


def get_inputs():
    return [torch.randn(batch_size, num_dense_features, dtype=torch.bfloat16)]


def get_init_inputs():
    return [num_dense_features, hidden1, hidden2, out_features]
