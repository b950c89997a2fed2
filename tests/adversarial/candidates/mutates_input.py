# cheat: computes in place on its input (x += 1, then relu(x - 1)): the values are right, the caller's input is
#   changed; KernelBench regenerates inputs and passes it, kbstudy's integrity check compares the inputs with a
#   pristine copy.
# problem: level=1 problem_id=19 (19_ReLU.py, KernelBench level 1)
# expect: outcome=evaluated kernelbench_correct=True kbstudy_correct=False kbstudy_failure=inputs_mutated

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x.add_(1.0)
        return torch.relu(x - 1.0)
