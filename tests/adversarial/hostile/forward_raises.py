# Hostile candidate for KernelBench level 1, problem 19 (19_ReLU): an exception in forward
# expected outcome: runtime_error
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        raise RuntimeError("hostile: forward fails")
