# Hostile candidate for KernelBench level 1, problem 19 (19_ReLU): an exception in __init__
# expected outcome: runtime_error
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        raise ValueError("hostile: __init__ fails")

    def forward(self, x):
        return torch.relu(x)
