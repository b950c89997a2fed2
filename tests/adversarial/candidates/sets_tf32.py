# cheat: switches TF32 matmuls on (torch.backends.cuda.matmul.allow_tf32), a global precision setting that would carry
#   over to the reference.
# problem: level=1 problem_id=19 (19_ReLU.py, KernelBench level 1)
# expect: outcome=evaluated kernelbench_correct=True kbstudy_correct=False kbstudy_failure=global_state

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        torch.backends.cuda.matmul.allow_tf32 = True
        return torch.relu(x)
