# Hostile candidate for KernelBench level 1, problem 19 (19_ReLU): fills its temporary folder's disk (bounded by RLIMIT_FSIZE: the write fails with EFBIG)
# expected outcome: runtime_error
import torch
import torch.nn as nn
import tempfile


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        block = b"\0" * (16 << 20)
        with tempfile.NamedTemporaryFile(prefix="hostile-fill-", delete=False) as fh:
            while True:
                fh.write(block)
                fh.flush()
