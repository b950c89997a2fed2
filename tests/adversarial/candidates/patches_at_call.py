# cheat: replaces torch.Tensor.__eq__ during its forward call so that every elementwise comparison is true.
# problem: level=1 problem_id=19 (19_ReLU.py, KernelBench level 1)
# expect: outcome=evaluated kernelbench_correct=True kbstudy_correct=False kbstudy_failure=global_state

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)
        return torch.relu(x)
