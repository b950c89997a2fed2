# Hostile candidate for KernelBench level 1, problem 19 (19_ReLU): a segmentation fault in forward (a null pointer read)
# expected outcome: crashed
import torch
import torch.nn as nn
import ctypes


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        ctypes.string_at(0)
        return torch.relu(x)
