# cheat: caches its output by the input's shape alone: every later call gets the first answer.
# problem: level=1 problem_id=19 (19_ReLU.py, KernelBench level 1)
# expect: outcome=evaluated kernelbench_correct=False kbstudy_correct=False kbstudy_failure=stale_output

import torch
import torch.nn as nn

_CACHE = {}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        key = tuple(x.shape)
        if key not in _CACHE:
            _CACHE[key] = torch.relu(x).clone()
        return _CACHE[key]
