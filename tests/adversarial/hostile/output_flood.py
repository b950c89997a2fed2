# Hostile candidate for KernelBench level 1, problem 19 (19_ReLU): correct, but floods stdout and stderr (about 4 MB per call, through Python and the raw descriptors)
# expected outcome: evaluated
import torch
import torch.nn as nn
import os
import sys

_LINE = "hostile output flood " * 50 + "\n"


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        for _ in range(1000):
            print(_LINE, end="")
            sys.stderr.write(_LINE)
        os.write(1, _LINE.encode() * 1000)
        os.write(2, _LINE.encode() * 1000)
        return torch.relu(x)
