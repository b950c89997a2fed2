# cheat: honest for its first 14 calls (KernelBench's 5 trials, 2 fresh seeds, the signed and the large trial, and the
#   5 structural variants that apply to ReLU: three shapes, two layouts), then returns its last answer forever: caught
#   by the check of the timed calls' outputs.
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
        if _CALLS <= _CORRECTNESS_CALLS:  # honest while judged, then the last answer forever
            _CACHE[0] = torch.relu(x)
        return _CACHE[0]
