# DLRM-Bench problem 12: the top MLP's last layer 256 -> 1, sigmoid and binary cross-entropy (mean), forward and
# backward (the loss head of a DLRM training step).
# Shapes from MLPerf DLRM-v2 (mlcommons/training recommendation_v2/torchrec_dlrm/README.MD): top MLP
# 1024-1024-512-256-1, global batch 65536 (the loss head over the whole global batch, as in a data-parallel step
# gathered on one device).
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """loss = mean BCE-with-logits(h @ w^T + b, labels); returns cat([loss, dL/dw, dL/db, dL/dh]) flattened.

    Parameters: ``head`` = ``nn.Linear(in_features, 1)`` (float32). Inputs: h float32 [batch_size, in_features];
    labels float32 [batch_size] in {0, 1}. Output: float32 [1 + in_features + 1 + batch_size * in_features].
    Eager PyTorch: ``addmm``/GEMV, ``binary_cross_entropy_with_logits`` and its backward, reductions, through autograd.
    """

    def __init__(self, in_features: int):
        super().__init__()
        self.head = nn.Linear(in_features, 1)

    def forward(self, h: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            h = h.detach().requires_grad_(True)
            logits = self.head(h).squeeze(1)
            loss = F.binary_cross_entropy_with_logits(logits, labels)
            gh, gw, gb = torch.autograd.grad(loss, [h, self.head.weight, self.head.bias])
        return torch.cat([loss.detach().reshape(1), gw.reshape(-1), gb.reshape(-1), gh.reshape(-1)])


batch_size = 65536
in_features = 256


def get_inputs():
    h = torch.randn(batch_size, in_features)
    labels = torch.randint(0, 2, (batch_size,)).to(torch.float32)
    return [h, labels]


def get_init_inputs():
    return [in_features]
