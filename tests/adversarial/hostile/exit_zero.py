# Hostile candidate for KernelBench level 1, problem 19 (19_ReLU): os._exit(0) in forward: the process ends cleanly without replying
# expected outcome: crashed
import torch
import torch.nn as nn
import os


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        os._exit(0)
