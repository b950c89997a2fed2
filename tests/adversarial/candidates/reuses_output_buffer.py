# control: an honest ReLU that writes into the same output tensor on every call, rewritten in full: a reused
#   buffer is no cached answer and must pass the timed-output check.
# problem: level=1 problem_id=19 (19_ReLU.py, KernelBench level 1)
# expect: outcome=evaluated kernelbench_correct=True kbstudy_correct=True kbstudy_failure=None

import torch
import torch.nn as nn

_BUF = {}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = _BUF.get(tuple(x.shape))
        if out is None:
            out = _BUF[tuple(x.shape)] = torch.empty_like(x)
        return torch.clamp(x, min=0.0, out=out)  # honest: the same output tensor every call, rewritten in full
