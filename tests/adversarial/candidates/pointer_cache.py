# cheat: honest for its first 14 calls (the correctness trials, whose inputs live at recycled addresses), then caches by
#   input address and shape: caught by the check of the timed calls' outputs (fresh inputs each timed call).
# problem: level=1 problem_id=19 (19_ReLU.py, KernelBench level 1)
# expect: outcome=evaluated kernelbench_correct=True kbstudy_correct=False kbstudy_failure=timing_output_mismatch

import torch
import torch.nn as nn

_CORRECTNESS_CALLS = 14  # before timing on ReLU: 5 KernelBench + 2 fresh + signed + large + 3 shape + 2 layout
_CALLS = 0
_CACHE = {}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        global _CALLS
        _CALLS += 1
        if _CALLS <= _CORRECTNESS_CALLS:  # the trials' inputs live at recycled addresses: stay honest there
            return torch.relu(x)
        key = (x.data_ptr(), tuple(x.shape))
        if key not in _CACHE:
            _CACHE[key] = torch.relu(x)
        return _CACHE[key]
