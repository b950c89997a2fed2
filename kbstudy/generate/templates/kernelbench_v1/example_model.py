import torch
import torch.nn as nn


class Model(nn.Module):
    """Scales a tensor, adds a second one and applies ReLU: relu(x * scale + y)."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * self.scale + y)


batch_size = 4096
dim = 8192
scale = 0.5


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return [scale]
