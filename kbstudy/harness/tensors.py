"""What both sides of a trial make the same way: precision dtypes, seeding, KernelBench's trial seeds, input casts and
output flattening. The reference process (``child/reference.py``) and the candidate process (``child/candidate.py``)
both use these, so a trial's inputs and a call's outputs mean the same on either side.
"""

from __future__ import annotations

import random
from typing import Any

import torch

PRECISIONS = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def torch_dtype(precision: str):
    """The torch dtype of a precision name (``fp32``, ``fp16``, ``bf16``). Raises ``ValueError`` otherwise."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; expected one of {sorted(PRECISIONS)}")
    return getattr(torch, PRECISIONS[precision])


def set_seed(seed: int) -> None:
    """Seed torch's CPU and CUDA generators and Python's ``random`` (KernelBench's ``set_seed`` seeds torch only; the
    extra ``random`` seed changes nothing for problems that do not use it)."""
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(seed)
    random.seed(seed)


def kernelbench_trial_seeds(n: int, seed: int = 42) -> list[int]:
    """KernelBench's correctness-trial seeds: ``torch.manual_seed(seed)`` then ``n`` draws of
    ``torch.randint(0, 2**32 - 1, (1,))`` (``run_and_check_correctness`` in ``src/kernelbench/eval.py``)."""
    gen_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        return [int(torch.randint(0, 2**32 - 1, (1,)).item()) for _ in range(n)]
    finally:
        torch.random.set_rng_state(gen_state)


def cast_input(x: Any, device: str, dtype) -> Any:
    """Move a tensor to ``device``; cast it to ``dtype`` only if it is floating point.

    KernelBench's ``_process_input_tensor`` casts every tensor, integer targets included, which breaks level1/95
    (KernelBench issue #151); kbstudy keeps integer and bool tensors as they are. Non-tensors pass through.
    """
    if isinstance(x, torch.Tensor):
        x = x.to(device=device)
        if x.is_floating_point():
            x = x.to(dtype=dtype)
    return x


def flatten_outputs(out: Any) -> list:
    """A model's output as a flat list: a tensor becomes ``[tensor]``; tuples and lists are flattened one level."""
    if isinstance(out, (tuple, list)):
        return list(out)
    return [out]
