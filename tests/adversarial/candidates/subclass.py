# cheat: returns the right values as a torch.nn.Parameter (a tensor subclass): KernelBench's torch.allclose accepts it;
#   kbstudy requires a plain dense tensor.
# problem: level=1 problem_id=19 (19_ReLU.py, KernelBench level 1)
# expect: outcome=evaluated kernelbench_correct=True kbstudy_correct=False kbstudy_failure=not_a_dense_tensor

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.nn.Parameter(torch.relu(x), requires_grad=False)
