# Hostile candidate for KernelBench level 1, problem 19 (19_ReLU): forward never returns (a busy loop holding a core)
# expected outcome: timeout
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n = 0
        while True:
            n += 1
        return torch.relu(x)
