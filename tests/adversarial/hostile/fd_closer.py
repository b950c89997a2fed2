# Hostile candidate for KernelBench level 1, problem 19 (19_ReLU): closes every inherited descriptor (its connection to the harness included) in forward
# expected outcome: crashed
import torch
import torch.nn as nn
import os


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        os.closerange(3, 65536)
        return torch.relu(x)
