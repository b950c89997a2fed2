# cheat: a LayerNorm that skips the affine step, assuming the weight is 1 and the bias 0 as at initialisation: right for the module as built, wrong once its parameters change.
# problem: level=1 problem_id=40 (40_LayerNorm.py, KernelBench level 1)
# expect: outcome=evaluated kernelbench_correct=True kbstudy_correct=False kbstudy_failure=variant_params_random

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        dims = tuple(range(x.dim() - len(self.ln.normalized_shape), x.dim()))
        mean = x.mean(dim=dims, keepdim=True)
        var = x.var(dim=dims, keepdim=True, unbiased=False)
        return (x - mean) / torch.sqrt(var + self.ln.eps)  # weight and bias never read
