# cheat: returns the right values as a tensor subclass it defines (which could override comparisons): KernelBench's
#   check sees the values and passes; kbstudy rejects the form.
# problem: level=1 problem_id=19 (19_ReLU.py, KernelBench level 1)
# expect: outcome=evaluated kernelbench_correct=True kbstudy_correct=False kbstudy_failure=not_a_dense_tensor

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        class _Looks(torch.Tensor):
            pass

        return torch.relu(x).as_subclass(_Looks)
