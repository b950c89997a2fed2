# control: an honest ReLU that reads its input's pointer (clones when the output would alias it): reading data_ptr() is
#   no cheat and must not be flagged.
# problem: level=1 problem_id=19 (19_ReLU.py, KernelBench level 1)
# expect: outcome=evaluated kernelbench_correct=True kbstudy_correct=True kbstudy_failure=None

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.relu(x)
        return y.clone() if y.data_ptr() != x.data_ptr() else y
