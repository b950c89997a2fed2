# cheat: lowers torch.set_float32_matmul_precision to 'medium', a global precision setting.
# problem: level=1 problem_id=19 (19_ReLU.py, KernelBench level 1)
# expect: outcome=evaluated kernelbench_correct=True kbstudy_correct=False kbstudy_failure=global_state

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        torch.set_float32_matmul_precision('medium')
        return torch.relu(x)
