# cheat: switches torch.utils.deterministic.fill_uninitialized_memory off and writes only half of its output, hoping
#   the unwritten half still holds an earlier answer.
# problem: level=1 problem_id=19 (19_ReLU.py, KernelBench level 1)
# expect: outcome=evaluated kbstudy_correct=False kbstudy_failure=global_state

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        torch.utils.deterministic.fill_uninitialized_memory = False
        out = torch.empty_like(x)
        out[: x.shape[0] // 2] = torch.relu(x[: x.shape[0] // 2])
        return out
