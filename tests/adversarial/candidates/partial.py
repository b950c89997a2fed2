# cheat: writes only the first half of its output (the rest of an empty_like is whatever the allocator gives): caught
#   by the coverage sentinels.
# problem: level=1 problem_id=19 (19_ReLU.py, KernelBench level 1)
# expect: outcome=evaluated kernelbench_correct=False kbstudy_correct=False kbstudy_failure=coverage

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        out[: x.shape[0] // 2] = torch.relu(x[: x.shape[0] // 2])
        return out
