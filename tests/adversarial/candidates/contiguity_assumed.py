# cheat: a ReLU that reads its input's storage in memory order from its data pointer, ignoring the strides: right for contiguous inputs, wrong for a transposed or strided view of the same values.
# problem: level=1 problem_id=19 (19_ReLU.py, KernelBench level 1)
# expect: outcome=evaluated kernelbench_correct=True kbstudy_correct=False kbstudy_failure=variant_layout_transposed

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        # what a kernel given x.data_ptr() and x.numel() sees: numel elements from the pointer, in memory order
        flat = torch.empty(0, dtype=x.dtype, device=x.device).set_(x.untyped_storage(), x.storage_offset(),
                                                                     (x.numel(),))
        return torch.relu(flat).view(x.shape).clone()
