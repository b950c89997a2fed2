# Hostile candidate for KernelBench level 1, problem 19 (19_ReLU): a fork bomb with a bounded fan-out: a shell forks 72 processes that sleep (more than the harness's limit of 64 descendants); never an unbounded `while True: os.fork()`: test machines run as root, where RLIMIT_NPROC does not hold
# expected outcome: crashed
import torch
import torch.nn as nn
import subprocess
import time

FAN_OUT = 72


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        subprocess.Popen(["sh", "-c", f"i=0; while [ $i -lt {FAN_OUT} ]; do sleep 3600 & i=$((i+1)); done; wait"])
        time.sleep(3600)
        return torch.relu(x)
