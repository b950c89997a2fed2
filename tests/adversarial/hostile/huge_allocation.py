# Hostile candidate for KernelBench level 1, problem 19 (19_ReLU): a host allocation of 1 TiB in forward (torch's DefaultCPUAllocator refuses it)
# expected outcome: out_of_memory
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        scratch = torch.empty(1 << 40, dtype=torch.uint8, device=x.device)
        return torch.relu(x) + scratch[0] * 0
