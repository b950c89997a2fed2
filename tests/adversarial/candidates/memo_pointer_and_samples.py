# cheat: memoises its answer on the input's address and shape plus three sampled values (the first element, the
#   middle one, the last): a call on new values in the same storage that leaves those three alone gets the old answer.
#   Caught on the storage-reuse trial, which keeps the first and last elements, the middle and a random half of the
#   trial before's values (kbstudy.harness.fresh_inputs.keep_some); in the timed calls every value changes.
# problem: level=1 problem_id=19 (19_ReLU.py, KernelBench level 1)
# expect: outcome=evaluated kbstudy_correct=False kbstudy_failure=stale_output

import torch
import torch.nn as nn

_MEMO = {}


def _key(x):
    flat = x.reshape(-1)
    n = flat.numel()
    return (x.data_ptr(), tuple(x.shape), float(flat[0]), float(flat[n // 2]), float(flat[-1]))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        key = _key(x)
        if key not in _MEMO:
            _MEMO[key] = torch.relu(x)
        return _MEMO[key]
