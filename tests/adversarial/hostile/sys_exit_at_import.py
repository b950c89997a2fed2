# Hostile candidate for KernelBench level 1, problem 19 (19_ReLU): sys.exit at import
# expected outcome: compile_error
import torch
import torch.nn as nn
import sys

sys.exit(3)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
