# cheat: caches its output by the input's address and shape: a call on new values at a recycled address gets the old
#   answer (kbstudy's storage-reuse trial).
# problem: level=1 problem_id=19 (19_ReLU.py, KernelBench level 1)
# expect: outcome=evaluated kbstudy_correct=False kbstudy_failure=stale_output

import torch
import torch.nn as nn

_CACHE = {}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in _CACHE:
            _CACHE[key] = torch.relu(x)
        return _CACHE[key]
