# Hostile candidate for KernelBench level 1, problem 19 (19_ReLU): correct, but starts two processes that sleep forever: one in a new session, one in its own group
# expected outcome: evaluated
import torch
import torch.nn as nn
import subprocess

_STARTED = []


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if not _STARTED:
            _STARTED.append(subprocess.Popen(["sleep", "86399.5"], start_new_session=True))
            _STARTED.append(subprocess.Popen(["sleep", "86399.5"]))
        return torch.relu(x)
