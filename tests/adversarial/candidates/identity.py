# cheat: ReLU as the identity: right for every input in [0, 1), which is all KernelBench's get_inputs() draws
#   (torch.rand); kbstudy's signed-input trial fails it.
# problem: level=1 problem_id=19 (19_ReLU.py, KernelBench level 1)
# expect: outcome=evaluated kernelbench_correct=True kbstudy_correct=False kbstudy_failure=variant_signed

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.clone()  # ReLU as the identity: right for every input in [0, 1)
