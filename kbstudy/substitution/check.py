"""The end-to-end check: the substituted model against the original on the same inputs, before anything is timed.

Both runs start from the same weights and the same seed (dropout draws the same masks); each runs the workload's
``probe`` (its forward, with the step's autocast and grad mode), and in training also the backward. Compared: the
relative L2 error ``||sub - orig|| / ||orig||`` of the outputs (all output tensors together), of the loss, and of the
gradients (all parameters together; sparse gradients are coalesced and compared row for row). The original is run
twice, and the difference between those two runs (nondeterministic kernels: atomics in backward passes) is recorded
as the noise floor. The check passes when every error is within :data:`E2E_REL_L2_THRESHOLD` of the workload's
precision, or within ten times the noise floor where that is larger.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn as nn

#: Largest relative L2 error of outputs, loss and gradients that passes, by the workload's compute precision: fp32
#: is kbstudy's per-kernel threshold (``rel_l2_threshold`` 1e-3); bf16 allows bf16's rounding propagated through a
#: network.
E2E_REL_L2_THRESHOLD = {"fp32": 1e-3, "bf16": 2e-2}
#: A failing check's errors are compared with this multiple of the original-vs-original difference.
NOISE_MULTIPLE = 10.0


def _tensors(x) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for item in x for t in _tensors(item)]
    return []


def _dense_pair(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Two gradients as comparable dense tensors (sparse ones coalesced; ``None`` when their rows differ)."""
    if a.is_sparse or b.is_sparse:
        a, b = a.coalesce(), b.coalesce()
        if a.indices().shape != b.indices().shape or not torch.equal(a.indices(), b.indices()):
            return None
        return a.values(), b.values()
    return a, b


def rel_l2(reference: list[torch.Tensor], other: list[torch.Tensor]) -> float:
    """``||other - reference|| / ||reference||`` over tensors taken together (float64); ``inf`` for mismatched shapes,
    ``nan`` from either side propagates."""
    if len(reference) != len(other):
        return math.inf
    num = den = 0.0
    for r, o in zip(reference, other):
        pair = _dense_pair(r, o)
        if pair is None or pair[0].shape != pair[1].shape:
            return math.inf
        r64, o64 = pair[0].detach().double(), pair[1].detach().double()
        num += float(((o64 - r64) ** 2).sum())
        den += float((r64 ** 2).sum())
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return math.sqrt(num / den)


def _run(model: nn.Module, probe: Callable, seed: int, train: bool):
    torch.manual_seed(seed)
    outputs, loss = probe()
    outs = [t.detach().clone() for t in _tensors(outputs)]
    grads = None
    if train and loss is not None:
        for p in model.parameters():
            p.grad = None
        loss.backward()
        grads = [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]
        for p in model.parameters():
            p.grad = None
        loss = loss.detach().clone()
    return outs, loss, grads


def precision_key(precision_label: str) -> str:
    """``bf16`` for a workload run in bf16 (autocast or weights), ``fp32`` otherwise."""
    return "bf16" if "bf16" in precision_label else "fp32"


def end_to_end_check(model: nn.Module, probe: Callable, substitution, *, train: bool, precision: str,
                     seed: int = 0) -> dict:
    """Compare the substituted model with the original (module docstring). Returns the record fields
    ``e2e_rel_l2`` (``outputs``, ``loss``, ``grads``; ``None`` where not applicable), ``e2e_noise_rel_l2``,
    ``e2e_threshold`` and ``e2e_passed``; an exception in the substituted run fails the check with ``e2e_error``."""
    ref = _run(model, probe, seed, train)
    again = _run(model, probe, seed, train)
    try:
        with substitution:
            sub = _run(model, probe, seed, train)
    except Exception as exc:  # a kernel that raises inside the model fails the check, recorded
        return {"e2e_rel_l2": None, "e2e_noise_rel_l2": None, "e2e_threshold": None, "e2e_passed": False,
                "e2e_error": f"{type(exc).__name__}: {exc}"[:400]}

    def errors(other):
        return {"outputs": rel_l2(ref[0], other[0]),
                "loss": rel_l2([ref[1]], [other[1]]) if ref[1] is not None and train else None,
                "grads": rel_l2(ref[2], other[2]) if ref[2] is not None else None}

    err, noise = errors(sub), errors(again)
    threshold = E2E_REL_L2_THRESHOLD[precision_key(precision)]
    passed = all(v is not None and not math.isnan(v)
                 and v <= max(threshold, NOISE_MULTIPLE * (noise[k] or 0.0))
                 for k, v in err.items() if err[k] is not None or k == "outputs")
    return {"e2e_rel_l2": err, "e2e_noise_rel_l2": noise, "e2e_threshold": threshold, "e2e_passed": bool(passed)}
