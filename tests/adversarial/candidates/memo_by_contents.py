# control: memoises its answer on the input's full contents (a hash of every byte, its shape and dtype), the memo a
#   timing loop that repeats input values would reward (a lookup timed in place of the kernel). Every correctness
#   trial and every timed call sees values no call saw before (kbstudy.harness.fresh_inputs), so the memo never hits
#   (_HITS stays 0: test_anticheat.py) and the candidate is an honest, slower ReLU: it passes and gains nothing.
# problem: level=1 problem_id=19 (19_ReLU.py, KernelBench level 1)
# expect: outcome=evaluated kernelbench_correct=True kbstudy_correct=True kbstudy_failure=None

import hashlib

import torch
import torch.nn as nn

_MEMO = {}
_HITS = 0


def _key(x):
    data = x.detach().contiguous().reshape(-1).view(torch.uint8).cpu().numpy().tobytes()
    return (hashlib.sha256(data).hexdigest(), tuple(x.shape), str(x.dtype))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        global _HITS
        key = _key(x)
        if key in _MEMO:
            _HITS += 1
            return _MEMO[key].clone()
        _MEMO[key] = torch.relu(x)
        return _MEMO[key].clone()
