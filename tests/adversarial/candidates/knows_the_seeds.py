# cheat: answers right only under KernelBench's 5 public trial seeds (torch.initial_seed()) and returns zeros
#   otherwise; kbstudy's fresh-seed trials fail it.
# problem: level=1 problem_id=19 (19_ReLU.py, KernelBench level 1)
# expect: outcome=evaluated kernelbench_correct=True kbstudy_correct=False kbstudy_failure=variant_fresh_seeds

import torch
import torch.nn as nn

from kbstudy.harness.tensors import kernelbench_trial_seeds

_KB_SEEDS = set(kernelbench_trial_seeds(5))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if torch.initial_seed() in _KB_SEEDS:  # the harness seeds each trial; KernelBench's 5 seeds are public
            return torch.relu(x)
        return torch.zeros_like(x)  # whatever it does elsewhere
