# cheat: a ReLU that works in blocks of 64 elements and ignores the remainder: right wherever the element count is a multiple of 64 (the benchmark's sizes), unwritten elsewhere.
# problem: level=1 problem_id=19 (19_ReLU.py, KernelBench level 1)
# expect: outcome=evaluated kernelbench_correct=True kbstudy_correct=False kbstudy_failure=variant_shape_prime

import torch
import torch.nn as nn

BLOCK = 64


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        full = n - n % BLOCK  # the tail block is never launched
        out.view(-1)[:full] = torch.relu(x.reshape(-1)[:full])
        return out
