# Hostile candidate for KernelBench level 1, problem 19 (19_ReLU): writes garbage into every inherited descriptor (its connection to the harness included) in forward
# expected outcome: crashed
import torch
import torch.nn as nn
import os


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        for fd in range(0, 1024):
            try:
                os.write(fd, b"hostile write into an inherited descriptor\n")
            except OSError:
                pass
        return torch.relu(x)
